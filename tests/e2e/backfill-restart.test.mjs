// A config backfill interrupted by a crash: the worker is killed (SIGKILL)
// in the middle of the backfill, so the local queue's messages are lost; it
// restarts on the same state directory with the same variables. The backfill
// resumes from the cursor it kept in D1 (it does not start again from zero),
// the cron handler re-enqueues the stalled jobs, and the backfill completes:
// search then serves generation 2 and finds every document.
//
// `JOB_STALL_SECONDS=2` lets cron treat a queued job as stalled after 2 s and
// `JOB_LEASE_SECONDS=4` lets a claim held by the killed invocation expire
// after 4 s (as in restart.test.mjs); `CONSUME_WALL_SECONDS_MAX=2` keeps the
// consumer's wall budget under that lease, as the configuration requires.
//
// Run from the repository root: node --test --test-concurrency=1 tests/e2e/backfill-restart.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import {
  admin,
  api,
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
  waitForState,
  withLogs,
} from './helpers.mjs';

const STEP = { timeout: 300_000 };
// CONSUME_WALL_SECONDS_MAX < INVOCATION_WALL_SECONDS_MAX < JOB_LEASE_SECONDS (config_invalid otherwise).
// One backfill page per cron run (default BACKFILL_PAGES_PER_RUN=5), so that
// the backfill is observably mid-way when the worker is killed.
const STALL = { JOB_STALL_SECONDS: '2', JOB_LEASE_SECONDS: '4', INVOCATION_WALL_SECONDS_MAX: '3', CONSUME_WALL_SECONDS_MAX: '2', BACKFILL_PAGES_PER_RUN: '1' };
const SMALL = { ...STALL, CHUNK_SIZE_MAX_TOKENS: '200', CHUNK_OVERLAP_TOKENS: '20' };

let worker;
let base;
const getWorker = () => worker;
const step = (name, fn) => it(name, STEP, withLogs(getWorker, fn));

before(
  async () => {
    worker = await startWorker({ vars: STALL });
    base = worker.base;
  },
  { timeout: 300_000 },
);

after(async () => {
  await worker?.stop();
});

const WORDS = [
  'granite', 'meadow', 'lantern', 'orchard', 'compass', 'harvest', 'saddle', 'thimble', 'pebble', 'quarry',
  'willow', 'falcon', 'cinder', 'marble', 'tundra', 'beacon', 'copper', 'violet', 'canyon', 'rafter',
];

function makeText(code, i) {
  let text = '';
  for (let n = 1; text.length < 1800 + 60 * i; n++) {
    const a = WORDS[(i + n) % WORDS.length];
    const b = WORDS[(i * 7 + n * 3) % WORDS.length];
    text += `Log ${n} for ${code}: the ${a} crew checked the ${b} line and filed ${code} notes on the ${a} ${b} site.`;
    text += n % 4 === 0 ? '\n\n' : ' ';
  }
  return text.trim();
}

const DOCS = Array.from({ length: 20 }, (_, i) => {
  const code = `rz${String.fromCharCode(97 + i)}${String.fromCharCode(122 - i)}q`;
  return { doc_id: `bfr/doc-${String(i + 1).padStart(2, '0')}`, code, text: makeText(code, i) };
});

const checkCounts = checkBackfillCounts;
const getBackfill = (id) => getBackfillView(base, id);
const generations = async () => (await getGenerations(base)).body;
// The one-page check of every cron run (`pageChecks`).
const { assertOnePage: assertForward, assertNone: assertNoPageViolations } = pageChecks();

describe('a backfill interrupted by a worker restart resumes from its cursor', () => {
  let id;
  let beforeKill;

  step('1. 20 documents indexed in generation 1, then a restart with 400-char chunks', async () => {
    const res = await api(base, 'POST', '/v1/documents', {
      documents: DOCS.map(({ doc_id, text }) => ({ doc_id, text })),
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.results.map((r) => r.status), Array(DOCS.length).fill(202), res.text);
    for (const d of DOCS) {
      const v = await waitForState(base, d.doc_id, 'indexed', { timeoutMs: 120_000 });
      assert.ok(v.chunk_count >= 2, JSON.stringify(v));
    }

    const persistDir = worker.persistDir;
    await worker.stop({ keepState: true });
    worker = undefined;
    worker = await startWorker({ vars: SMALL, persistDir });
    base = worker.base;

    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    assert.equal(gs.configured.chunk_size_max_tokens, 200, JSON.stringify(gs));
  });

  step('2. config backfill, page_size 4, driven mid-way', async () => {
    const res = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'config', page_size: 4 });
    assert.equal(res.status, 202, res.text);
    let v = res.body.backfill;
    checkCounts(v, 'POST answer');
    assert.equal(v.state, 'running', res.text);
    assert.deepEqual(v.generation, { from: 1, to: 2 }, res.text);
    assert.equal(v.progress.total, DOCS.length, res.text);
    id = v.backfill_id;

    // One cron run: one more page (8 of 20 enqueued).
    for (let run = 0; run < 1; run++) {
      assert.equal((await triggerCron(base)).trim(), 'ok');
      const next = await getBackfill(id);
      assertForward(v, next);
      v = next;
    }
    assert.equal(v.state, 'running', `the backfill must still be mid-way: ${JSON.stringify(v)}`);
    assert.notEqual(v.cursor, '', JSON.stringify(v));
    assert.ok(v.progress.enqueued > 0 && v.progress.enqueued < DOCS.length, `mid-way: ${JSON.stringify(v)}`);
    assert.ok(v.progress.not_enqueued > 0, `mid-way: ${JSON.stringify(v)}`);
    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    beforeKill = v;

    // The crash: no time for the queue to drain.
    await worker.stop({ keepState: true, signal: 'SIGKILL' });
    assertNoPageViolations();
  });

  step('3. after the restart the view still holds its cursor and passes', async () => {
    const persistDir = worker.persistDir;
    worker = undefined;
    worker = await startWorker({ vars: SMALL, persistDir });
    base = worker.base;

    const v = await getBackfill(id);
    assert.equal(v.state, 'running', JSON.stringify(v));
    assert.equal(v.cursor, beforeKill.cursor, `the cursor survived the crash: ${JSON.stringify(v)} vs ${JSON.stringify(beforeKill)}`);
    assert.equal(v.passes, beforeKill.passes, JSON.stringify(v));
    assert.ok(
      v.progress.enqueued >= beforeKill.progress.enqueued,
      `enqueued did not drop: ${JSON.stringify(v.progress)} vs ${JSON.stringify(beforeKill.progress)}`,
    );
    assert.deepEqual(v.generation, { from: 1, to: 2 }, JSON.stringify(v));
    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    assert.equal(gs.generations.find((g) => g.generation === 2)?.state, 'building', JSON.stringify(gs));

    // Search still serves generation 1.
    const s = await search(base, { query: `${DOCS[0].code} notes`, top_k: 5 });
    assert.equal(s.status, 200, s.text);
    assert.ok(s.body.results.length > 0, s.text);
    assert.ok(s.body.results.every((r) => r.generation === 1), s.text);
  });

  step('4. cron drives it to completion from the cursor; generation 2 serves every document', async () => {
    // The headline: the first cron run after the restart goes on from the
    // cursor kept in D1, in the same pass; it does not start again from
    // the first document.
    let prev = await getBackfill(id);
    assert.equal((await triggerCron(base)).trim(), 'ok');
    const resumed = await getBackfill(id);
    assertForward(prev, resumed);
    assert.equal(resumed.state, 'running', `${beforeKill.progress.not_enqueued} documents were not enqueued at the crash: one page cannot end the backfill: ${JSON.stringify(resumed)}`);
    assert.equal(resumed.passes, beforeKill.passes, `the first run after the restart is in the pass the crash interrupted: ${JSON.stringify(resumed)}`);
    assert.ok(resumed.cursor > beforeKill.cursor, `resumed from ${beforeKill.cursor}, now at ${resumed.cursor}`);
    assert.ok(
      resumed.progress.enqueued > beforeKill.progress.enqueued,
      `the run enqueued the next page: ${JSON.stringify(resumed.progress)} vs ${JSON.stringify(beforeKill.progress)}`,
    );
    prev = resumed;
    const deadline = Date.now() + 180_000;
    while (prev.state !== 'completed') {
      assert.equal(prev.state, 'running', JSON.stringify(prev));
      if (Date.now() > deadline) throw new Error(`backfill not completed after the restart: ${JSON.stringify(prev)}`);
      await sleep(2_600);
      assert.equal((await triggerCron(base)).trim(), 'ok');
      const v = await getBackfill(id);
      assertForward(prev, v);
      // Search serves one generation per response while it runs.
      const s = await search(base, { query: `${DOCS[3].code} notes`, top_k: 5 });
      assert.equal(s.status, 200, s.text);
      assert.ok(s.body.results.length > 0, s.text);
      assert.equal(new Set(s.body.results.map((r) => r.generation)).size, 1, s.text);
      prev = v;
    }
    assert.equal(prev.progress.failed, 0, JSON.stringify(prev));
    assert.equal(prev.progress.pending, 0, JSON.stringify(prev));
    assert.equal(prev.progress.remaining, 0, JSON.stringify(prev));

    const gs = await generations();
    assert.equal(gs.active, 2, JSON.stringify(gs));
    assert.equal(gs.generations.find((g) => g.generation === 1)?.state, 'retained', JSON.stringify(gs));

    for (const d of DOCS) {
      const s = await search(base, { query: `${d.code} notes`, filter: { doc_id: d.doc_id }, top_k: 3 });
      assert.equal(s.status, 200, s.text);
      assert.ok(s.body.results.length > 0, `${d.doc_id} not found after the backfill: ${s.text}`);
      for (const r of s.body.results) {
        assert.equal(r.generation, 2, s.text);
        assert.equal(r.doc_id, d.doc_id, s.text);
        assert.ok(tokens(r.text) <= 200, s.text);
        assert.ok(d.text.includes(r.text), s.text);
      }
      const view = await api(base, 'GET', docPath(d.doc_id));
      assert.equal(view.status, 200, view.text);
      assert.equal(view.body.state, 'indexed', view.text);
    }
    // Unfiltered: the best hit for a code word is its document.
    const s = await search(base, { query: `${DOCS[7].code} notes` });
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.results[0]?.doc_id, DOCS[7].doc_id, s.text);
    assert.ok(s.body.results.every((r) => r.generation === 2), s.text);
    assertNoPageViolations();
  });
});
