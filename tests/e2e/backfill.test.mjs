// Index generations and backfills, end to end in workerd (`wrangler dev
// --env local`): a chunk size change is backfilled into a new generation
// while search keeps serving exactly one generation per response; the switch
// is atomic; the old generation is kept for a rollback, then retired (its
// vectors leave the local index); `all`/`filter` backfills and a single
// document's reindex make new versions in the active generation.
//
// Run from the repository root: node --test --test-concurrency=1 tests/e2e/backfill.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import {
  BACKFILL_STATES,
  REPO_ROOT,
  admin,
  api,
  assertErrorCode,
  checkBackfillCounts,
  docPath,
  getBackfill as getBackfillView,
  getGenerations,
  pageChecks,
  search,
  sleep,
  startWorker,
  tokens,
  triggerCron,
  waitFor,
  waitForState,
  withLogs,
} from './helpers.mjs';

const STEP = { timeout: 300_000 };
// One backfill page per cron run (default BACKFILL_PAGES_PER_RUN=5), so that
// every run's effect can be observed page by page.
const ONE_PAGE = { BACKFILL_PAGES_PER_RUN: '1' };
const SMALL = { ...ONE_PAGE, CHUNK_SIZE_MAX_TOKENS: '200', CHUNK_OVERLAP_TOKENS: '20' };

let worker;
let base;
const getWorker = () => worker;
const step = (name, fn) => it(name, STEP, withLogs(getWorker, fn));

before(
  async () => {
    worker = await startWorker({ vars: ONE_PAGE });
    base = worker.base;
  },
  { timeout: 300_000 },
);

after(async () => {
  await worker?.stop();
});

// ---------------------------------------------------------------------------
// Documents: 30 texts of 2-4 KB, each with its own code word in every
// sentence (the local embedder is lexical: a search for the code word finds
// the document), half of them `lang: en`, half `lang: de`.

const VOCAB = [
  'granite', 'meadow', 'lantern', 'orchard', 'compass', 'harvest', 'saddle', 'thimble', 'pebble', 'quarry',
  'willow', 'falcon', 'cinder', 'marble', 'tundra', 'beacon', 'copper', 'violet', 'canyon', 'rafter',
  'sorrel', 'timber', 'walnut', 'summit', 'pylon', 'estuary', 'mosaic', 'nettle', 'oyster', 'pumice',
];

function alpha(i) {
  let s = '';
  let n = i + 26 * 27; // always three letters
  while (n > 0) {
    s = String.fromCharCode(97 + (n % 26)) + s;
    n = Math.floor(n / 26);
  }
  return s;
}

function rng(seed) {
  let x = seed * 2654435761 + 12345;
  return () => {
    x = (x * 1103515245 + 12345) % 2147483648;
    return x / 2147483648;
  };
}

/** 2-4 KB of ASCII text; every sentence carries `code`. */
function makeText(code, seed) {
  const r = rng(seed + 1);
  const pick = () => VOCAB[Math.floor(r() * VOCAB.length)];
  const target = 2048 + Math.floor(r() * 1800);
  let text = '';
  let n = 0;
  while (text.length < target) {
    n += 1;
    text += `Entry ${n} of ${code}: the ${pick()} ${pick()} near the ${pick()} recorded ${code} readings of ${pick()} and ${pick()}.`;
    text += n % 5 === 0 ? '\n\n' : ' ';
  }
  return text.trim();
}

const DOCS = Array.from({ length: 30 }, (_, i) => {
  const code = `kw${alpha(i)}`;
  return {
    doc_id: `bf/doc-${String(i + 1).padStart(2, '0')}`,
    code,
    text: makeText(code, i),
    metadata: { lang: i % 2 === 0 ? 'en' : 'de', n: i + 1 },
  };
});
// Ingested after the configuration change, before the backfill.
const AFTER_RESTART = { doc_id: 'bf/doc-31', code: 'kwafter', metadata: { lang: 'en', n: 31 } };
AFTER_RESTART.text = makeText(AFTER_RESTART.code, 31);
// Ingested while the backfill runs; its doc_id sorts before every other one,
// so the backfill's cursor has already passed it.
const DURING = { doc_id: 'bf/a-during', code: 'kwduring', metadata: { lang: 'en', n: 0 } };
DURING.text = makeText(DURING.code, 32);

const ALL_DOCS = [...DOCS, AFTER_RESTART, DURING];
const docById = new Map(ALL_DOCS.map((d) => [d.doc_id, d]));

// ---------------------------------------------------------------------------
// Local helpers.

/** The invariants of a backfill view's counts, at every moment, and its state. */
function checkCounts(v, what = 'backfill view') {
  checkBackfillCounts(v, what, { states: BACKFILL_STATES });
}

async function getBackfill(id) {
  const v = await getBackfillView(base, id, checkCounts);
  assert.equal(v.backfill_id, id, JSON.stringify(v));
  return v;
}

async function generations() {
  const res = await getGenerations(base);
  const b = res.body;
  assert.equal(typeof b.active, 'number', res.text);
  assert.equal(typeof b.configured, 'object', res.text);
  assert.ok(Array.isArray(b.generations), res.text);
  const nums = b.generations.map((g) => g.generation);
  assert.deepEqual(nums, [...nums].sort((x, y) => x - y), `ascending by generation: ${res.text}`);
  for (const g of b.generations) {
    assert.ok(['active', 'building', 'retained', 'retiring', 'retired', 'abandoned'].includes(g.state), res.text);
    assert.equal(typeof g.index_config, 'object', res.text);
    assert.ok(Number.isInteger(g.chunks) && g.chunks >= 0, res.text);
  }
  const actives = b.generations.filter((g) => g.state === 'active');
  assert.equal(actives.length, 1, `exactly one active generation: ${res.text}`);
  assert.equal(actives[0].generation, b.active, res.text);
  return b;
}

const gen = (gs, n) => gs.generations.find((g) => g.generation === n);

/**
 * One search: 200, non-empty, and every result of the response from the same
 * generation. Returns `{ generation, results }`.
 */
async function searchOne(body, what) {
  const s = await search(base, body);
  assert.equal(s.status, 200, `${what}: ${s.text}`);
  const results = s.body?.results;
  assert.ok(Array.isArray(results) && results.length > 0, `${what}: empty search response ${s.text}`);
  for (const r of results) assert.ok(Number.isInteger(r.generation), `${what}: result without a generation ${s.text}`);
  const gens = [...new Set(results.map((r) => r.generation))];
  assert.equal(gens.length, 1, `${what}: one response mixes generations ${JSON.stringify(gens)}: ${s.text}`);
  return { generation: gens[0], results };
}

/** The document is found by its code word (filtered to it), in generation `g`. */
async function assertFound(d, g, what) {
  const { generation, results } = await searchOne(
    { query: `${d.code} readings`, filter: { doc_id: d.doc_id }, top_k: 3 },
    `${what}: ${d.doc_id}`,
  );
  if (g !== undefined) assert.equal(generation, g, `${what}: ${d.doc_id} served from generation ${generation}`);
  for (const r of results) {
    assert.equal(r.doc_id, d.doc_id);
    assert.ok(d.text.includes(r.text), `${what}: ${d.doc_id} chunk text not from the document: ${JSON.stringify(r.text)}`);
  }
  return { generation, results };
}

async function docView(id) {
  const res = await api(base, 'GET', docPath(id));
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** `wrangler d1 execute VECTORS_DB` on the worker's state; returns the rows. */
function vectorsQuery(persistDir, sql) {
  const wrangler = path.join(REPO_ROOT, 'node_modules', '.bin', 'wrangler');
  const args = ['d1', 'execute', 'VECTORS_DB', '--env', 'local', '--local', '--persist-to', persistDir, '--json', '--command', sql];
  const r = spawnSync(wrangler, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, CI: '1', WRANGLER_SEND_METRICS: 'false', NO_COLOR: '1' },
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
    timeout: 120_000,
  });
  if (r.error || r.status !== 0) {
    throw new Error(`wrangler ${args.join(' ')} failed (status ${r.status}): ${r.stdout}\n${r.stderr}`);
  }
  const out = r.stdout;
  const parsed = JSON.parse(out.slice(out.indexOf('[')));
  return parsed[0].results;
}

/** Triggers cron until the backfill is completed; checks the counts at every poll. */
async function runToCompletion(id, { timeoutMs = 120_000, pauseMs = 400 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let v = await getBackfill(id);
  while (v.state !== 'completed') {
    assert.equal(v.state, 'running', JSON.stringify(v));
    if (Date.now() > deadline) throw new Error(`backfill ${id} not completed after ${timeoutMs} ms: ${JSON.stringify(v)}`);
    assert.equal((await triggerCron(base)).trim(), 'ok');
    await sleep(pauseMs);
    const next = await getBackfill(id);
    assertOnePage(v, next);
    v = next;
  }
  return v;
}

// The one-page check of every cron run (`pageChecks`); this test's own
// violations (invalid fields) are collected with them.
const pages = pageChecks();
const pageViolations = pages.violations;
const assertOnePage = pages.assertOnePage;
const assertNoPageViolations = pages.assertNone;

const QUERIES = [...DOCS.filter((_, i) => i % 3 === 0).map((d) => `${d.code} readings`), 'granite meadow lantern orchard'];

describe('a chunk size change, backfilled while search keeps serving one generation', () => {
  let gen1Config;
  let backfill; // the config backfill's view at its start
  const versionsBefore = new Map();

  step('a. 30 documents of 2-4 KB are indexed in generation 1', async () => {
    const res = await api(base, 'POST', '/v1/documents', {
      documents: DOCS.map(({ doc_id, text, metadata }) => ({ doc_id, text, metadata })),
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.results.map((r) => r.status), Array(DOCS.length).fill(202), res.text);
    let chunks = 0;
    for (const d of DOCS) {
      const v = await waitForState(base, d.doc_id, 'indexed', { timeoutMs: 120_000 });
      assert.equal(v.live_version, 1, JSON.stringify(v));
      assert.ok(v.chunk_count >= 3, `a 2-4 KB text makes several chunks at 500 tokens: ${JSON.stringify(v)}`);
      chunks += v.chunk_count;
    }

    for (const q of QUERIES) {
      const { generation, results } = await searchOne({ query: q, top_k: 10 }, q);
      assert.equal(generation, 1, q);
      assert.ok(results.every((r) => tokens(r.text) <= 500), q);
    }
    const { results } = await assertFound(DOCS[0], 1, 'generation 1');
    assert.ok(results.some((r) => tokens(r.text) > 200), `500-token chunks are longer than 200: ${JSON.stringify(results)}`);

    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    assert.equal(gs.generations.length, 1, JSON.stringify(gs));
    const g1 = gen(gs, 1);
    assert.equal(g1.state, 'active');
    assert.equal(g1.chunks, chunks, `generation 1 holds the chunk rows of the 30 documents: ${JSON.stringify(gs)}`);
    assert.deepEqual(g1.index_config, gs.configured, JSON.stringify(gs));
    assert.equal(gs.configured.chunk_size_max_tokens, 500, JSON.stringify(gs));
    gen1Config = g1.index_config;
  });

  step('b. scope config with an unchanged configuration → 409 config_unchanged', async () => {
    const res = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'config' });
    assertErrorCode(res, 409, 'config_unchanged', 'config backfill, nothing changed');
    const list = await admin(base, 'GET', '/v1/admin/reindex');
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.body.backfills, [], list.text);
  });

  step('c. restarted with 200-token chunks: search still serves generation 1; new ingests work', async () => {
    const persistDir = worker.persistDir;
    await worker.stop({ keepState: true });
    worker = undefined;
    worker = await startWorker({ vars: SMALL, persistDir });
    base = worker.base;

    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    assert.equal(gs.generations.length, 1, `a configuration change alone creates no generation: ${JSON.stringify(gs)}`);
    assert.deepEqual(gen(gs, 1).index_config, gen1Config, JSON.stringify(gs));
    assert.equal(gs.configured.chunk_size_max_tokens, 200, JSON.stringify(gs));
    assert.equal(gs.configured.chunk_overlap_tokens, 20, JSON.stringify(gs));
    assert.notDeepEqual(gs.configured, gen1Config);

    for (const q of QUERIES) {
      const { generation } = await searchOne({ query: q, top_k: 10 }, q);
      assert.equal(generation, 1, q);
    }
    const { results } = await assertFound(DOCS[1], 1, 'after the restart');
    assert.ok(results.some((r) => tokens(r.text) > 200), `still the 500-token chunks: ${JSON.stringify(results)}`);

    const put = await api(base, 'PUT', docPath(AFTER_RESTART.doc_id), {
      text: AFTER_RESTART.text,
      metadata: AFTER_RESTART.metadata,
    });
    assert.equal(put.status, 202, put.text);
    await waitForState(base, AFTER_RESTART.doc_id, 'indexed', { timeoutMs: 60_000 });
    await assertFound(AFTER_RESTART, 1, 'ingested after the configuration change');
  });

  step('d. config backfill, page_size 5: one generation per response, switch once, never back', async () => {
    const res = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'config', page_size: 5 });
    assert.equal(res.status, 202, res.text);
    backfill = res.body.backfill;
    checkCounts(backfill, 'POST answer');
    assert.equal(backfill.scope, 'config', res.text);
    assert.equal(backfill.filter, null, res.text);
    assert.equal(backfill.state, 'running', res.text);
    assert.deepEqual(backfill.generation, { from: 1, to: 2 }, res.text);
    assert.equal(backfill.page_size, 5, res.text);
    assert.ok(backfill.progress.enqueued <= 5, `the POST enqueues one page of at most 5: ${res.text}`);
    assert.ok(backfill.progress.enqueued >= 1, `the POST enqueues the first page at once: ${res.text}`);
    assert.notEqual(backfill.cursor, '', `the first page moved the cursor: ${res.text}`);
    const id = backfill.backfill_id;

    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    assert.equal(gen(gs, 2)?.state, 'building', JSON.stringify(gs));
    assert.deepEqual(gen(gs, 2).index_config, gs.configured, JSON.stringify(gs));

    // A second backfill while this one runs.
    assertErrorCode(await admin(base, 'POST', '/v1/admin/reindex', { scope: 'all' }), 409, 'backfill_active', 'second backfill');

    const list = await admin(base, 'GET', '/v1/admin/reindex');
    assert.equal(list.status, 200, list.text);
    assert.equal(list.body.backfills[0]?.backfill_id, id, list.text);

    const served = [];
    let sawGen2 = false;
    let duringIngested = false;
    let qi = 0;
    let v = backfill;
    const deadline = Date.now() + 150_000;
    for (let iter = 0; ; iter++) {
      for (let k = 0; k < 3; k++) {
        const q = QUERIES[qi++ % QUERIES.length];
        const { generation, results } = await searchOne({ query: q, top_k: 8 }, `during the backfill, iteration ${iter}`);
        served.push(generation);
        if (generation === 2) {
          sawGen2 = true;
          assert.ok(results.every((r) => tokens(r.text) <= 200), `generation 2 chunks are ≤ 200 tokens: ${JSON.stringify(results)}`);
        } else {
          assert.equal(generation, 1);
          assert.ok(!sawGen2, `generation 1 served again after generation 2: ${JSON.stringify(served)}`);
        }
      }
      const next = await getBackfill(id);
      assertOnePage(v, next);
      v = next;
      if (v.state === 'completed') break;
      assert.equal(v.state, 'running', JSON.stringify(v));
      assert.deepEqual(v.generation, { from: 1, to: 2 }, JSON.stringify(v));
      if (iter === 1 && !duringIngested) {
        duringIngested = true;
        const put = await api(base, 'PUT', docPath(DURING.doc_id), { text: DURING.text, metadata: DURING.metadata });
        assert.equal(put.status, 202, put.text);
        await waitForState(base, DURING.doc_id, 'indexed', { timeoutMs: 60_000 });
        const { generation } = await assertFound(DURING, undefined, 'ingested during the backfill');
        if (generation === 2) sawGen2 = true;
        else assert.ok(!sawGen2, 'generation 1 served again after generation 2');
        served.push(generation);
      }
      if (Date.now() > deadline) throw new Error(`backfill not completed in time: ${JSON.stringify(v)}`);
      assert.equal((await triggerCron(base)).trim(), 'ok');
      await sleep(300);
    }
    assert.ok(duringIngested, 'the backfill must last long enough for an ingest during it');
    assert.ok(served.includes(1), `generation 1 served while building: ${JSON.stringify(served)}`);

    // Completed: the switch happened.
    assert.equal(v.progress.pending, 0, JSON.stringify(v));
    assert.equal(v.progress.failed, 0, JSON.stringify(v));
    assert.equal(v.progress.remaining, 0, JSON.stringify(v));
    // The pass counted what it walked: DURING was written behind its cursor
    // (its own job wrote it in both generations), so the next pass would
    // count it.
    assert.equal(v.progress.total, ALL_DOCS.length - 1, `every document the pass walked is in scope: ${JSON.stringify(v)}`);
    assert.ok(v.passes >= 1, JSON.stringify(v));
    for (let k = 0; k < QUERIES.length; k++) {
      const { generation, results } = await searchOne({ query: QUERIES[k], top_k: 8 }, 'after completion');
      assert.equal(generation, 2, `after completion: ${QUERIES[k]}`);
      assert.ok(results.every((r) => tokens(r.text) <= 200), JSON.stringify(results));
    }
    const { results } = await assertFound(DURING, 2, 'ingested during the backfill, after the switch');
    assert.ok(results.every((r) => tokens(r.text) <= 200), JSON.stringify(results));
    for (const d of ALL_DOCS) await assertFound(d, 2, 'after the switch');
    assertNoPageViolations();
  });

  step('e. generation 1 is retained; rollback to it and forward again', async () => {
    const gs = await generations();
    assert.equal(gs.active, 2, JSON.stringify(gs));
    assert.equal(gen(gs, 1).state, 'retained', JSON.stringify(gs));
    assert.ok(gen(gs, 1).chunks > 0, `generation 1 keeps its chunk rows: ${JSON.stringify(gs)}`);
    assert.ok(gen(gs, 2).chunks > gen(gs, 1).chunks, `200-token chunks are more numerous: ${JSON.stringify(gs)}`);
    assert.deepEqual(gen(gs, 2).index_config, gs.configured, JSON.stringify(gs));
    assert.deepEqual(gen(gs, 1).index_config, gen1Config, JSON.stringify(gs));

    // Errors first: the active one, an unknown one, retiring the active one.
    assertErrorCode(await admin(base, 'POST', '/v1/admin/generations/2/activate'), 409, 'generation_not_retained', 'activate active');
    assert.equal((await admin(base, 'POST', '/v1/admin/generations/99/activate')).status, 404);
    assertErrorCode(await admin(base, 'POST', '/v1/admin/generations/2/retire'), 409, 'generation_in_use', 'retire active');

    const back = await admin(base, 'POST', '/v1/admin/generations/1/activate');
    assert.equal(back.status, 200, back.text);
    assert.equal(back.body.active, 1, back.text);
    assert.equal(gen(back.body, 1).state, 'active', back.text);
    assert.equal(gen(back.body, 2).state, 'retained', back.text);
    for (const q of QUERIES) {
      const { generation } = await searchOne({ query: q, top_k: 8 }, 'after rollback');
      assert.equal(generation, 1, `after rollback: ${q}`);
    }
    await assertFound(DURING, 1, 'ingested during the backfill, after rollback');
    await assertFound(AFTER_RESTART, 1, 'ingested after the restart, after rollback');

    const fwd = await admin(base, 'POST', '/v1/admin/generations/2/activate');
    assert.equal(fwd.status, 200, fwd.text);
    assert.equal(fwd.body.active, 2, fwd.text);
    assert.equal(gen(fwd.body, 1).state, 'retained', fwd.text);
    assert.equal(gen(fwd.body, 2).state, 'active', fwd.text);
    for (const q of QUERIES) {
      const { generation } = await searchOne({ query: q, top_k: 8 }, 'forward again');
      assert.equal(generation, 2, `forward again: ${q}`);
    }
    // The running configuration is the active generation's again.
    assertErrorCode(await admin(base, 'POST', '/v1/admin/reindex', { scope: 'config' }), 409, 'config_unchanged', 'config backfill after the switch');
  });

  step('f. generation 1 retired: chunk rows and vectors go, generation 2 stays', async () => {
    const res = await admin(base, 'POST', '/v1/admin/generations/1/retire');
    assert.equal(res.status, 200, res.text);
    let gs = await generations();
    // Retiring until a cron run deletes its rows (none ran since the retire).
    assert.equal(gen(gs, 1).state, 'retiring', JSON.stringify(gs));
    assertErrorCode(await admin(base, 'POST', '/v1/admin/generations/1/activate'), 409, 'generation_not_retained', 'activate retiring');

    for (let run = 0; run < 30; run++) {
      gs = await generations();
      if (gen(gs, 1).state === 'retired') break;
      assert.equal(gen(gs, 1).state, 'retiring', JSON.stringify(gs));
      assert.equal((await triggerCron(base)).trim(), 'ok');
      await sleep(300);
    }
    gs = await generations();
    assert.equal(gen(gs, 1).state, 'retired', `generation 1 not retired after 30 cron runs: ${JSON.stringify(gs)}`);
    assert.equal(gen(gs, 1).chunks, 0, JSON.stringify(gs));
    assert.equal(gs.active, 2, JSON.stringify(gs));
    assert.ok(gen(gs, 2).chunks > 0, JSON.stringify(gs));
    assertErrorCode(await admin(base, 'POST', '/v1/admin/generations/1/activate'), 409, 'generation_not_retained', 'activate retired');

    // Read the local index with the worker stopped: a second process on the
    // same SQLite files while workerd runs made the running worker drop
    // connections in one run.
    const persistDir = worker.persistDir;
    await worker.stop({ keepState: true });
    worker = undefined;
    const [g1] = vectorsQuery(persistDir, "SELECT count(*) AS n FROM vectors WHERE json_extract(metadata, '$.generation') = 1");
    const [g2] = vectorsQuery(persistDir, "SELECT count(*) AS n FROM vectors WHERE json_extract(metadata, '$.generation') = 2");
    worker = await startWorker({ vars: SMALL, persistDir });
    base = worker.base;
    assert.equal(g1.n, 0, 'no vector of generation 1 remains in the local index');
    assert.ok(g2.n > 0, `vectors of generation 2 remain: ${JSON.stringify(g2)}`);

    for (const q of QUERIES) {
      const { generation, results } = await searchOne({ query: q, top_k: 8 }, 'after retirement');
      assert.equal(generation, 2);
      assert.ok(results.every((r) => tokens(r.text) <= 200), JSON.stringify(results));
    }
    for (const d of ALL_DOCS) {
      const v = await docView(d.doc_id);
      assert.equal(v.state, 'indexed', JSON.stringify(v));
      versionsBefore.set(d.doc_id, v.latest_version);
    }
  });

  step('g. filter backfill on lang=de, a single reindex, and the errors', async () => {
    const de = ALL_DOCS.filter((d) => d.metadata.lang === 'de');
    const en = ALL_DOCS.filter((d) => d.metadata.lang !== 'de');

    const start = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'filter', filter: { lang: 'de' }, page_size: 4 });
    assert.equal(start.status, 202, start.text);
    const fb = start.body.backfill;
    checkCounts(fb, 'filter backfill POST');
    assert.equal(fb.scope, 'filter', start.text);
    assert.deepEqual(fb.filter, { lang: 'de' }, start.text);
    assert.equal(fb.generation, null, start.text);
    assert.equal(fb.page_size, 4, start.text);
    assert.equal(fb.progress.total, de.length, start.text);
    const done = await runToCompletion(fb.backfill_id);
    assert.equal(done.progress.failed, 0, JSON.stringify(done));
    assert.equal(done.progress.pending, 0, JSON.stringify(done));
    assert.equal(done.progress.remaining, 0, JSON.stringify(done));

    for (const d of de) {
      const v = await waitForState(base, d.doc_id, 'indexed', { latestVersion: versionsBefore.get(d.doc_id) + 1, timeoutMs: 60_000 });
      assert.equal(v.live_version, v.latest_version, JSON.stringify(v));
    }
    for (const d of en) {
      const v = await docView(d.doc_id);
      assert.equal(v.latest_version, versionsBefore.get(d.doc_id), `an 'en' document got no new version: ${JSON.stringify(v)}`);
      assert.equal(v.state, 'indexed', JSON.stringify(v));
    }
    const { results } = await assertFound(de[0], 2, 'after the filter backfill');
    assert.ok(results.every((r) => r.version === versionsBefore.get(de[0].doc_id) + 1), JSON.stringify(results));
    const gs = await generations();
    assert.equal(gs.active, 2, JSON.stringify(gs));

    // One document's reindex.
    const one = en[0];
    const v0 = versionsBefore.get(one.doc_id);
    const re = await api(base, 'POST', `${docPath(one.doc_id)}/reindex`);
    assert.equal(re.status, 202, re.text);
    assert.equal(re.body.doc_id, one.doc_id, re.text);
    assert.equal(re.body.version, v0 + 1, re.text);
    assert.equal(typeof re.body.job_id, 'string', re.text);
    const after1 = await waitForState(base, one.doc_id, 'indexed', { latestVersion: v0 + 1, liveVersion: v0 + 1, timeoutMs: 60_000 });
    assert.equal(after1.job_id, re.body.job_id, JSON.stringify(after1));
    const found = await assertFound(one, 2, 'after its reindex');
    assert.ok(found.results.every((r) => r.version === v0 + 1), JSON.stringify(found.results));
    assertErrorCode(await api(base, 'POST', `${docPath('bf/no-such-doc')}/reindex`), 404, 'document_not_found', 'reindex unknown');

    const gone = { doc_id: 'bf/zz-gone', text: 'A short note about a quince orchard, soon deleted.' };
    assert.equal((await api(base, 'PUT', docPath(gone.doc_id), { text: gone.text })).status, 202);
    await waitForState(base, gone.doc_id, 'indexed', { timeoutMs: 60_000 });
    assert.equal((await api(base, 'DELETE', docPath(gone.doc_id))).status, 202);
    await waitForState(base, gone.doc_id, 'deleted', { timeoutMs: 60_000 });
    assertErrorCode(await api(base, 'POST', `${docPath(gone.doc_id)}/reindex`), 409, 'document_not_indexed', 'reindex deleted');

    // backfill_active while running and while paused; transitions.
    const all = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'all', page_size: 1 });
    assert.equal(all.status, 202, all.text);
    const ab = all.body.backfill;
    checkCounts(ab, 'all backfill POST');
    assert.equal(ab.scope, 'all', all.text);
    assert.equal(ab.state, 'running', all.text);
    assert.equal(ab.page_size, 1, all.text);
    assert.ok(ab.progress.enqueued <= 1, all.text);
    const abPath = `/v1/admin/reindex/${encodeURIComponent(ab.backfill_id)}`;
    assertErrorCode(
      await admin(base, 'POST', '/v1/admin/reindex', { scope: 'filter', filter: { lang: 'en' } }),
      409,
      'backfill_active',
      'second backfill while running',
    );
    assertErrorCode(await admin(base, 'POST', `${abPath}/resume`), 409, 'backfill_state', 'resume a running one');
    const paused = await admin(base, 'POST', `${abPath}/pause`);
    assert.equal(paused.status, 200, paused.text);
    checkCounts(paused.body, 'paused');
    assert.equal(paused.body.state, 'paused', paused.text);
    assertErrorCode(await admin(base, 'POST', '/v1/admin/reindex', { scope: 'all' }), 409, 'backfill_active', 'second backfill while paused');
    // Pausing stops enqueuing: a cron run leaves it where it was.
    assert.equal((await triggerCron(base)).trim(), 'ok');
    const stillPaused = await getBackfill(ab.backfill_id);
    assert.equal(stillPaused.state, 'paused', JSON.stringify(stillPaused));
    assert.equal(stillPaused.cursor, paused.body.cursor, JSON.stringify(stillPaused));
    assert.equal(stillPaused.progress.enqueued, paused.body.progress.enqueued, JSON.stringify(stillPaused));
    const resumed = await admin(base, 'POST', `${abPath}/resume`);
    assert.equal(resumed.status, 200, resumed.text);
    assert.equal(resumed.body.state, 'running', resumed.text);
    const cancelled = await admin(base, 'POST', `${abPath}/cancel`);
    assert.equal(cancelled.status, 200, cancelled.text);
    checkCounts(cancelled.body, 'cancelled');
    assert.equal(cancelled.body.state, 'cancelled', cancelled.text);
    for (const t of ['pause', 'resume', 'cancel']) {
      assertErrorCode(await admin(base, 'POST', `${abPath}/${t}`), 409, 'backfill_state', `${t} a cancelled one`);
    }
    assert.equal((await triggerCron(base)).trim(), 'ok');
    assert.equal((await getBackfill(ab.backfill_id)).state, 'cancelled');

    // After the cancel, a new backfill may start; a completed one accepts no transition.
    const none = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'filter', filter: { lang: 'xx' } });
    assert.equal(none.status, 202, none.text);
    checkCounts(none.body.backfill, 'empty filter backfill');
    assert.equal(none.body.backfill.progress.total, 0, none.text);
    const noneDone = await runToCompletion(none.body.backfill.backfill_id);
    assert.equal(noneDone.progress.enqueued, 0, JSON.stringify(noneDone));
    const nonePath = `/v1/admin/reindex/${encodeURIComponent(noneDone.backfill_id)}`;
    for (const t of ['pause', 'resume', 'cancel']) {
      assertErrorCode(await admin(base, 'POST', `${nonePath}/${t}`), 409, 'backfill_state', `${t} a completed one`);
    }

    const list = await admin(base, 'GET', '/v1/admin/reindex');
    assert.equal(list.status, 200, list.text);
    const ids = list.body.backfills.map((b) => b.backfill_id);
    assert.deepEqual(ids.slice(0, 4), [noneDone.backfill_id, ab.backfill_id, fb.backfill_id, backfill.backfill_id], list.text);
    for (const b of list.body.backfills) checkCounts(b, 'listed');
    const unknown = typeof ab.backfill_id === 'number' ? '999999' : 'no-such-backfill';
    assertErrorCode(await admin(base, 'GET', `/v1/admin/reindex/${unknown}`), 404, 'backfill_not_found', 'unknown backfill');

    // The cancelled backfill's page jobs still end; everything ends indexed.
    for (const d of ALL_DOCS) {
      await waitFor(async () => (await docView(d.doc_id)).state === 'indexed', { timeoutMs: 60_000, what: `${d.doc_id} indexed` });
    }

    // Bad requests.
    for (const body of [
      { scope: 'bogus' },
      {},
      { scope: 'all', page_size: 0 },
      { scope: 'all', page_size: 101 },
      { scope: 'all', page_size: 'ten' },
      { scope: 'filter' },
      { scope: 'filter', filter: 'lang' },
      { scope: 'filter', filter: { lang: { nested: 1 } } },
    ]) {
      const res = await admin(base, 'POST', '/v1/admin/reindex', body);
      if (res.status !== 422 || res.body?.error?.code !== 'invalid_field') {
        pageViolations.push(`${JSON.stringify(body)}: want 422 invalid_field, got ${res.status} ${res.text}`);
      }
    }
    const denied = await api(base, 'POST', '/v1/admin/reindex', { scope: 'all' });
    assertErrorCode(denied, 403, 'forbidden', 'the ingest token is no admin token');

    // One page per cron run (the filter backfill above) and 422
    // invalid_field for the bad requests, reported together.
    assertNoPageViolations();
  });
});
