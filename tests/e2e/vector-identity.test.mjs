// Vector identity from content (docs/ARCHITECTURE.md, "Vector identity"), in
// the BUILT Worker with its production backends over the strict fakes of
// Vectorize and Workers AI (fakes/vectorize-ai-fakes.mjs):
//
//   1. a document of 1,200 paragraphs, one of them twice: every chunk row
//      has a vector of its own, the two copies two different ones (the
//      occurrence is part of the ID), and both copies are served;
//   2. one paragraph edited: one text embedded, one upsert call of one
//      vector, no `getByIds`, one vector deleted; the job's usage says so,
//      and the edit is served, the old text no longer;
//   3. a paragraph moved to the end: nothing embedded or written, and
//      search serves it at its new place (the chunk number comes from D1,
//      never from the index);
//   4. one copy of the repeated paragraph removed: the other copy is served
//      once, at its place, and the vector no row refers to any more is
//      deleted; at every step, the index holds exactly the vectors the live
//      rows refer to.
//
// `CHUNK_OVERLAP_TOKENS=0` so that a chunk is exactly one paragraph (each
// 450 characters: past a quarter of the 500-token limit, where the chunker
// ends a chunk at a paragraph): the test can then say which chunk must keep
// its vector. With overlap, a chunk next to an
// edit changes too (its overlap does) and is embedded again.
//
// Run from the repository root after `make build`:
//   node --test --test-concurrency=1 tests/e2e/

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { api, docPath, search, waitFor, waitForState } from './helpers.mjs';
import { startProductionWorker } from './miniflare-env.mjs';

const DOC = 'books/identity';
const PARAGRAPHS = 1_200;
const REPEATED = 'Paragraph repeated: the tide tables are printed twice in this almanac, once in spring and once in autumn, '
  .padEnd(449, 'word for word the same ') + '.';

/** Paragraph `i`: "Paragraph i" and pseudo-random words, exactly 450 ASCII bytes. */
function paragraph(i) {
  let x = (Math.imul(i + 7, 2654435761) >>> 0) || 1;
  const next = () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0);
  let text = `Paragraph ${i}`;
  while (text.length < 450) {
    let w = '';
    for (let n = 3 + (next() % 6); n > 0; n--) w += String.fromCharCode(97 + ((next() >>> 16) % 26));
    text += ` ${w}`;
  }
  return `${text.slice(0, 449)}.`;
}

/** Version 1's paragraphs: 0..PARAGRAPHS-1, with REPEATED after paragraphs 100 and 700. */
function v1Paragraphs() {
  const ps = [];
  for (let i = 0; i < PARAGRAPHS; i++) {
    ps.push(paragraph(i));
    if (i === 100 || i === 700) ps.push(REPEATED);
  }
  return ps;
}

let w;
const step = (name, fn) =>
  it(
    name,
    async () => {
      try {
        await fn();
      } catch (err) {
        if (w) process.stderr.write(`\n--- worker log (tail) ---\n${w.logs().slice(-4000)}\n--- end ---\n`);
        throw err;
      }
    },
    { timeout: 300_000 },
  );

before(
  async () => {
    w = await startProductionWorker({
      vars: { CHUNK_OVERLAP_TOKENS: '0' },
      vectorize: { metadataIndexes: ['doc_id', 'generation'] },
    });
  },
  { timeout: 120_000 },
);
after(async () => {
  await w?.stop();
});

/** The live version's chunk rows (valid at it), in order: `{ord, vector_id, text}`. */
async function liveRows() {
  const db = await w.mf.getD1Database('DB');
  const { results } = await db
    .prepare(
      `SELECT c.ord, c.vector_id, c.text FROM chunks c
         JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version
          AND (c.to_version IS NULL OR c.to_version > d.live_version)
        WHERE c.doc_id = ?1 ORDER BY c.ord`,
    )
    .bind(DOC)
    .all();
  return results;
}

/** Waits until the index holds exactly the vectors the live rows refer to (running cron while not). */
async function indexMatchesLedger() {
  await waitFor(
    async () => {
      const wanted = new Set((await liveRows()).map((r) => r.vector_id));
      const held = new Set([...w.fakes.vectorize.eventualState().keys()]);
      if (held.size === wanted.size && [...wanted].every((id) => held.has(id))) return true;
      await w.scheduled();
      return null;
    },
    { timeoutMs: 60_000, intervalMs: 500, what: 'the index to hold exactly the live rows’ vectors' },
  );
}

async function put(paragraphs) {
  const res = await api(w.base, 'PUT', docPath(DOC), { text: paragraphs.join('\n\n') });
  assert.equal(res.status, 202, res.text);
  await waitForState(w.base, DOC, 'indexed', { liveVersion: res.body.version, timeoutMs: 240_000 });
  const job = await api(w.base, 'GET', `/v1/jobs/${encodeURIComponent(res.body.job_id)}`);
  assert.equal(job.status, 200, job.text);
  assert.equal(job.body.state, 'succeeded', job.text);
  return { version: res.body.version, job: job.body };
}

/** The vector hits for `text` in DOC (vector mode only: the keyword index cannot stand in). */
async function vectorHits(text, topK = 5) {
  const res = await search(w.base, { query: text, top_k: topK, mode: 'vector', filter: { doc_id: DOC } });
  assert.equal(res.status, 200, res.text);
  return res.body.results;
}

/** Counters of the fakes, to diff around a step. */
function counters() {
  const s = w.fakes.vectorize.stats();
  return { upsertCalls: s.calls.upsert, getCalls: s.calls.getByIds, upserted: s.accepted.upserted, deleted: s.accepted.deleted, texts: w.fakes.ai.stats().texts };
}
const diff = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, b[k] - a[k]]));

describe('vector identity over the strict fakes', () => {
  let paragraphs;

  step('1. a large document: a vector per chunk, the repeated paragraph twice, both copies served', async () => {
    paragraphs = v1Paragraphs();
    const { version, job } = await put(paragraphs);
    assert.equal(version, 1);
    const rows = await liveRows();
    assert.equal(rows.length, paragraphs.length, 'one chunk per paragraph');
    rows.forEach((r, i) => assert.equal(r.text.trim(), paragraphs[i], `chunk ${i} is paragraph ${i}`));
    assert.equal(new Set(rows.map((r) => r.vector_id)).size, rows.length, 'each row its own vector, the copies too');
    assert.equal(job.progress.chunks_embedded, rows.length, JSON.stringify(job.progress));
    for (const r of rows) assert.ok(Buffer.byteLength(r.vector_id) <= 64, r.vector_id);
    await indexMatchesLedger();

    // A first version's order keys are its chunk indexes.
    const copies = rows.filter((r) => r.text.trim() === REPEATED).map((r) => r.ord);
    assert.deepEqual(copies, [101, 702]);
    const hits = (await vectorHits(REPEATED)).filter((h) => h.text.trim() === REPEATED);
    assert.deepEqual(hits.map((h) => h.chunk).sort((a, b) => a - b), copies, 'both copies are served, each at its place');
    assert.ok(hits.every((h) => h.version === 1));
  });

  step('2. one paragraph edited: one text embedded, one vector written, one deleted, nothing read', async () => {
    const before = counters();
    const at = 600; // chunk 600: paragraph 599 (the first copy comes before it)
    const old = paragraphs[at];
    const edited = 'Paragraph 599 was rewritten: the lighthouse keeper moved the lantern to the northern jetty, '
      .padEnd(449, 'and logged the tide again ') + '.';
    paragraphs = paragraphs.slice();
    paragraphs[at] = edited;
    const { version, job } = await put(paragraphs);
    assert.equal(version, 2);
    await indexMatchesLedger();
    const d = diff(before, counters());
    console.log(`# one paragraph of ${paragraphs.length} edited: ${JSON.stringify({ progress: job.progress, usage: job.usage, fakes: d })}`);
    assert.equal(job.progress.chunks_embedded, 1, JSON.stringify(job.progress));
    assert.equal(job.progress.chunks_reused, 0, JSON.stringify(job.progress));
    assert.equal(job.progress.chunks_kept, paragraphs.length - 1, JSON.stringify(job.progress));
    assert.equal(job.usage.subrequests.embed, 1, JSON.stringify(job.usage));
    assert.deepEqual(d, { upsertCalls: 1, getCalls: 0, upserted: 1, deleted: 1, texts: 1 });

    const hit = (await vectorHits(edited, 1))[0];
    assert.equal(hit?.version, 2, JSON.stringify(hit));
    assert.equal(hit.chunk, at, 'its place, from D1');
    assert.equal(hit.text.trim(), edited);
    const stale = await vectorHits(old);
    assert.ok(stale.every((h) => h.text.trim() !== old && h.version === 2), JSON.stringify(stale));
  });

  step('3. a paragraph moved to the end: nothing embedded or written, served at its new place', async () => {
    const before = counters();
    const moved = paragraphs[50];
    paragraphs = [...paragraphs.slice(0, 50), ...paragraphs.slice(51), moved];
    const { version, job } = await put(paragraphs);
    assert.equal(version, 3);
    await indexMatchesLedger();
    const d = diff(before, counters());
    assert.equal(job.progress.chunks_embedded, 0, JSON.stringify(job.progress));
    assert.equal(job.progress.chunks_kept, paragraphs.length, JSON.stringify(job.progress));
    assert.deepEqual(d, { upsertCalls: 0, getCalls: 0, upserted: 0, deleted: 0, texts: 0 });

    const hit = (await vectorHits(moved, 1))[0];
    assert.equal(hit?.version, 3, JSON.stringify(hit));
    // Its new place: after the last chunk, whose order key is the first
    // version's last index (paragraphs.length - 1).
    assert.equal(hit.chunk, paragraphs.length, 'its new place, from D1');
    assert.equal(hit.text.trim(), moved);
    // No other chunk's place changed: the copies keep their order keys.
    const copies = (await vectorHits(REPEATED)).filter((h) => h.text.trim() === REPEATED);
    assert.deepEqual(copies.map((h) => h.chunk).sort((a, b) => a - b), [101, 702]);
    const rows = await liveRows();
    assert.deepEqual(rows.map((r) => r.text.trim()), paragraphs, 'the rows, in order-key order, are the document');
  });

  step('4. one copy of the repeated paragraph removed: the other is served once; the unreferenced vector is deleted', async () => {
    const before = counters();
    const first = paragraphs.indexOf(REPEATED);
    paragraphs = [...paragraphs.slice(0, first), ...paragraphs.slice(first + 1)];
    const { version, job } = await put(paragraphs);
    assert.equal(version, 4);
    await indexMatchesLedger();
    const d = diff(before, counters());
    assert.equal(job.progress.chunks_embedded, 0, JSON.stringify(job.progress));
    // The remaining copy is now the first occurrence: the first copy's vector
    // serves it, the second copy's is the one deleted. Its row is new (its
    // vector ID's old row was at the first copy's place), at the second
    // copy's order key (midway between its unchanged neighbours', 701 and 703).
    assert.deepEqual(d, { upsertCalls: 0, getCalls: 0, upserted: 0, deleted: 1, texts: 0 });
    const copies = (await vectorHits(REPEATED)).filter((h) => h.text.trim() === REPEATED);
    assert.deepEqual(copies.map((h) => [h.chunk, h.version]), [[702, 4]]);
    const rows = await liveRows();
    assert.equal(rows.length, paragraphs.length);
    assert.equal(w.fakes.vectorize.stats().visibleCount, rows.length);
  });
});
