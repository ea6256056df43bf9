// A new embedding model rolled out without downtime, end to end in workerd
// (Miniflare) over the production-binding fakes (fakes/vectorize-ai-fakes.mjs,
// whose AI embeddings depend on the model: a query embedded by another model
// than its document's vectors does not find it):
//
//   1. the Worker runs with @cf/baai/bge-large-en-v1.5 (1,024 dimensions) and
//      indexes a few documents;
//   2. it is restarted over the SAME D1 state (and the same index) with
//      @cf/baai/bge-m3 (also 1,024 dimensions; SentencePiece, 512 tokens);
//   3. a `config` backfill builds generation 2 with bge-m3 and cron drives it
//      to its switch, while a client searches continuously (one POST
//      /v1/search every few ms for the whole duration) and a document is
//      ingested during the backfill: every search answers 200 and finds its
//      document (each query embedded by the active generation's model), and
//      after the switch the active generation's configuration names bge-m3.
//
// Run from the repository root after `make build`:
//   node --test tests/e2e/model-switch.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { admin, api, docPath, search, sleep, waitForState } from './helpers.mjs';
import { startProductionWorker } from './miniflare-env.mjs';

const LARGE = '@cf/baai/bge-large-en-v1.5';
const M3 = '@cf/baai/bge-m3';
const DIMS = 1024;
// What `config::known_model` says of each: the tokenizer family and input
// limit the Worker's settings must match (set explicitly here).
const VARS = {
  [LARGE]: { EMBEDDING_MODEL: LARGE, EMBEDDING_DIMENSIONS: String(DIMS), EMBEDDING_TOKENIZER: 'wordpiece', EMBEDDING_MAX_INPUT_TOKENS: '512' },
  [M3]: { EMBEDDING_MODEL: M3, EMBEDDING_DIMENSIONS: String(DIMS), EMBEDDING_TOKENIZER: 'sentencepiece', EMBEDDING_MAX_INPUT_TOKENS: '512' },
};
const COMMON = { BACKFILL_PAGES_PER_RUN: '1', INDEX_CHECK_TTL_SECONDS: '0' };
const STEP = { timeout: 300_000 };

/** Short documents on unrelated subjects, each found by its own words. */
const DOCS = [
  ['ms/lighthouse', 'The lighthouse keeper trims the lamp wick so ships clear the rocky headland.', 'lighthouse keeper lamp wick headland'],
  ['ms/sourdough', 'A sourdough starter of flour and water makes the loaf rise with a tangy crumb.', 'sourdough starter flour loaf crumb'],
  ['ms/glacier', 'Glaciers carve valleys as compacted ice creeps downhill dragging moraines.', 'glaciers carve valleys ice moraines'],
  ['ms/violin', 'Violin makers season spruce and maple before carving the scroll.', 'violin makers spruce maple scroll'],
  ['ms/beekeeper', 'The beekeeper smokes the hive gently before lifting honeycomb frames.', 'beekeeper smokes hive honeycomb frames'],
  ['ms/telescope', 'Astronomers polish the telescope mirror to chart faint nebulae and comets.', 'astronomers telescope mirror nebulae comets'],
].map(([doc_id, text, query]) => ({ doc_id, text, query }));
/** Ingested during the backfill. */
const LATE = { doc_id: 'ms/orchard', text: 'Apple orchards are pruned in winter and grafted saplings bear fruit.', query: 'apple orchards pruned grafted saplings' };

let worker;
let persistDir;

before(() => {
  persistDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingest-e2e-model-'));
});

after(async () => {
  await worker?.stop();
  if (persistDir) fs.rmSync(persistDir, { recursive: true, force: true });
});

/** `it` whose failures print the tail of the Worker's log. */
function step(name, fn) {
  return it(name, STEP, async () => {
    try {
      await fn();
    } catch (err) {
      if (worker) process.stderr.write(`\n--- worker log (tail) ---\n${worker.logs().slice(-4000)}\n--- end ---\n`);
      throw err;
    }
  });
}

/**
 * One (hybrid) search for `d`: `null` if it answered 200 with `d` first and
 * a vector score only its own model's query gives (a query of another model
 * scores about 0; the keyword ranking alone would still find `d`), else
 * what went wrong.
 */
async function searchProblem(d) {
  const s = await search(worker.base, { query: d.query, top_k: 3 });
  if (s.status !== 200) return `${d.doc_id}: ${s.status} ${s.text}`;
  const top = s.body?.results?.[0];
  if (top?.doc_id !== d.doc_id || !(top.scores?.vector > 0.2)) return `${d.doc_id}: top hit ${JSON.stringify(top)}`;
  return null;
}

async function generations() {
  const res = await admin(worker.base, 'GET', '/v1/admin/generations');
  assert.equal(res.status, 200, res.text);
  return res.body;
}

const gen = (gs, n) => gs.generations.find((g) => g.generation === n);

describe('a model switch without downtime', () => {
  step('1. bge-large indexes the documents; search finds each', async () => {
    worker = await startProductionWorker({
      vars: { ...COMMON, ...VARS[LARGE] },
      vectorize: { dimensions: DIMS },
      persistDir,
    });
    for (const d of DOCS) {
      const put = await api(worker.base, 'PUT', docPath(d.doc_id), { text: d.text });
      assert.equal(put.status, 202, put.text);
    }
    for (const d of DOCS) await waitForState(worker.base, d.doc_id, 'indexed', { timeoutMs: 60_000 });
    for (const d of DOCS) assert.equal(await searchProblem(d), null);
    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    assert.equal(gen(gs, 1).index_config.embedder, LARGE, JSON.stringify(gs));
    assert.ok(worker.fakes.ai.models[LARGE] > 0);
  });

  step('2. restarted over the same D1 state with bge-m3: search still answers with bge-large', async () => {
    const { fakes } = worker;
    await worker.stop();
    worker = undefined;
    worker = await startProductionWorker({ vars: { ...COMMON, ...VARS[M3] }, persistDir, fakes });
    for (const d of DOCS) assert.equal(await searchProblem(d), null, 'generation 1 is searched with its own model');
    const gs = await generations();
    assert.equal(gs.active, 1, JSON.stringify(gs));
    assert.equal(gs.configured.embedder, M3, JSON.stringify(gs));
    assert.equal(worker.fakes.ai.models[M3] ?? 0, 0, 'nothing embedded with bge-m3 yet');
  });

  step('3. a config backfill to bge-m3 switches while a client searches continuously', async () => {
    const searched = [...DOCS];
    const outcomes = { ok: 0, problems: [] };
    let stop = false;
    const client = (async () => {
      for (let i = 0; !stop; i++) {
        const problem = await searchProblem(searched[i % searched.length]);
        if (problem) outcomes.problems.push(problem);
        else outcomes.ok += 1;
        await sleep(5);
      }
    })();
    let view;
    try {
      const res = await admin(worker.base, 'POST', '/v1/admin/reindex', { scope: 'config', page_size: 2 });
      assert.equal(res.status, 202, res.text);
      assert.deepEqual(res.body.backfill.generation, { from: 1, to: 2 }, res.text);
      const id = res.body.backfill.backfill_id;
      const gs = await generations();
      assert.equal(gen(gs, 2).state, 'building', JSON.stringify(gs));
      assert.equal(gen(gs, 2).index_config.embedder, M3, JSON.stringify(gs));

      // A document ingested during the backfill: written in both generations.
      const put = await api(worker.base, 'PUT', docPath(LATE.doc_id), { text: LATE.text });
      assert.equal(put.status, 202, put.text);
      await waitForState(worker.base, LATE.doc_id, 'indexed', { timeoutMs: 60_000 });
      assert.equal(await searchProblem(LATE), null, 'the late document, found before the switch');
      searched.push(LATE);
      const lateIds = [...worker.fakes.vectorize.visible.values()]
        .filter((v) => v.metadata.doc_id === LATE.doc_id)
        .map((v) => v.metadata.generation ?? 1);
      assert.ok(lateIds.includes(1) && lateIds.includes(2), `written in both generations: ${JSON.stringify(lateIds)}`);

      const deadline = Date.now() + 180_000;
      for (;;) {
        const got = await admin(worker.base, 'GET', `/v1/admin/reindex/${encodeURIComponent(id)}`);
        assert.equal(got.status, 200, got.text);
        view = got.body;
        if (view.state !== 'running') break;
        if (Date.now() > deadline) throw new Error(`the backfill did not end: ${got.text}`);
        await worker.scheduled();
        await sleep(300);
      }
      // A little longer after the switch, still searching.
      await sleep(500);
    } finally {
      stop = true;
      await client;
    }
    assert.equal(view.state, 'completed', JSON.stringify(view));
    assert.deepEqual(outcomes.problems, [], `every search answered 200 and found its document (${outcomes.ok} did)`);
    assert.ok(outcomes.ok >= 20, `the client searched throughout: ${outcomes.ok} searches`);

    const gs = await generations();
    assert.equal(gs.active, 2, JSON.stringify(gs));
    assert.equal(gen(gs, 2).index_config.embedder, M3, JSON.stringify(gs));
    assert.equal(gen(gs, 1).state, 'retained', JSON.stringify(gs));
    assert.equal(gen(gs, 1).index_config.embedder, LARGE, JSON.stringify(gs));
    // Searched with bge-m3 now: every document, the late one included.
    const before = worker.fakes.ai.models[M3];
    for (const d of searched) assert.equal(await searchProblem(d), null, 'after the switch');
    assert.equal(worker.fakes.ai.models[M3], before + searched.length, 'each query embedded by bge-m3');
  });
});
