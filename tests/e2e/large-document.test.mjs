// A 10 MB document in workerd, under a consumer budget small enough that
// one invocation cannot index it: the job checkpoints in D1 and continues in
// new queue messages, never making more subrequests per invocation than the
// budget, and ends indexed and searchable. A new version with one paragraph
// changed then embeds and writes only the chunks that changed; every other
// chunk keeps its vector (content-derived IDs, src/core/ids.rs).
//
// `CONSUME_SUBREQUESTS_MAX=25` (default 50) forces more invocations;
// `EMBEDDING_DIMENSIONS=128` keeps the local index's brute-force search over
// ~16,500 vectors quick while the hashed embedder still tells chunks apart. Everything else is the local profile's default
// (1,000-character chunks, pages of 1,000, embed batches of 100).
//
// Run from the repository root: node --test --test-concurrency=1 tests/e2e/

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { api, docPath, search, startWorker, waitFor, withLogs } from './helpers.mjs';

const BUDGET = 25;
const VARS = { CONSUME_SUBREQUESTS_MAX: String(BUDGET), EMBEDDING_DIMENSIONS: '128' };
const DOC = 'books/large';
const TEN_MB = 10_000_000; // DOCUMENT_BYTES_MAX's default: the largest accepted
/** Paragraph `i`: "Paragraph i" and pseudo-random words, exactly 300 ASCII bytes. Random
 * words keep the local hashed embedder's vectors of different chunks apart. */
function paragraph(i) {
  let x = (Math.imul(i + 1, 2654435761) >>> 0) || 1;
  const next = () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0);
  let text = `Paragraph ${i}`;
  while (text.length < 300) {
    let w = '';
    for (let n = 3 + (next() % 6); n > 0; n--) w += String.fromCharCode(97 + ((next() >>> 16) % 26));
    text += ` ${w}`;
  }
  return `${text.slice(0, 299)}.`;
}

/** Exactly `TEN_MB` bytes of paragraphs; `changed` replaces one paragraph (with 300 bytes: no boundary moves). */
function book(changed) {
  const parts = [];
  let bytes = 0;
  for (let i = 0; bytes < TEN_MB; i++) {
    let p = changed && changed.index === i ? changed.text : paragraph(i);
    const room = TEN_MB - bytes - (parts.length ? 2 : 0);
    if (p.length > room) p = p.slice(0, room);
    parts.push(p);
    bytes += p.length + (parts.length > 1 ? 2 : 0);
  }
  return parts.join('\n\n');
}

let worker;
let base;
const getWorker = () => worker;
const step = (name, fn) => it(name, withLogs(getWorker, fn), { timeout: 600_000 });

before(
  async () => {
    worker = await startWorker({ vars: VARS });
    base = worker.base;
  },
  { timeout: 300_000 },
);

after(async () => {
  await worker?.stop();
});

async function job(jobId) {
  const res = await api(base, 'GET', `/v1/jobs/${encodeURIComponent(jobId)}`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

/** The Worker's log lines as parsed events (null for other lines). */
function logEvents() {
  return worker
    .logs()
    .split('\n')
    .map((l) => {
      if (/QUEUE ingest-jobs-local/.test(l)) return { event: 'queue_invocation_ended' };
      const i = l.indexOf('{');
      if (i < 0) return null;
      try {
        return JSON.parse(l.slice(i));
      } catch {
        return null;
      }
    });
}

/**
 * Waits until job `jobId`'s last delivery ended, reading the Worker's log,
 * then reads the job once. No request is sent while it runs: under
 * `wrangler dev` the first request that reaches the dev server while the
 * Worker's isolate is in a long synchronous stretch (this document's last
 * invocation of v1, 4 s; v2's one invocation, 10-13 s) is not answered
 * until another request or delivery arrives or the client gives up
 * (reproduced every time: the job's poll waited until its 60 s timeout; of
 * ten requests sent 2 s apart, the first was answered when the seventh
 * arrived). It is what the e2e helpers' old GET retry hid. Each delivery's
 * subrequests, from its log line, are checked against the budget.
 */
async function waitForJob(jobId) {
  const mine = (e) => e?.job_id === jobId && /^consume_/.test(e.event);
  const over = (e) => e.event === 'consume_dead_letter' || (e.event === 'consume_ack' && e.reason !== 'checkpointed');
  await waitFor(
    () => {
      const events = logEvents();
      const end = events.findIndex((e) => mine(e) && over(e));
      // The invocation is over once wrangler logged it, after its last event.
      return end >= 0 && events.slice(end + 1).some((e) => e?.event === 'queue_invocation_ended');
    },
    { timeoutMs: 540_000, intervalMs: 1_000, what: `the last delivery of job ${jobId} to end` },
  );
  const deliveries = logEvents().filter(mine);
  assert.ok(deliveries.length > 0);
  for (const d of deliveries) {
    const used = Object.values(d.subrequests).reduce((a, b) => a + b, 0);
    assert.ok(used <= BUDGET, `a delivery made ${used} subrequests, over the budget of ${BUDGET}: ${JSON.stringify(d)}`);
  }
  const j = await job(jobId);
  assert.ok(j.usage.subrequests_peak_per_invocation <= BUDGET, `peak over budget: ${JSON.stringify(j.usage)}`);
  assert.equal(j.progress.chunks_done, j.progress.chunks_total, JSON.stringify(j));
  return j;
}

describe('a 10 MB document under a small invocation budget', () => {
  let v1Job;

  step('1. is accepted (10,000,000 bytes: the default limit) and one byte more is refused with 413', async () => {
    const text = book();
    assert.equal(Buffer.byteLength(text), TEN_MB);
    const tooBig = await api(base, 'PUT', docPath('books/too-large'), { text: `${text}x` });
    assert.equal(tooBig.status, 413, tooBig.text);
    assert.match(tooBig.body.error.message, /10000000/);
    const res = await api(base, 'PUT', docPath(DOC), { text });
    assert.equal(res.status, 202, res.text);
    v1Job = res.body.job_id;
    assert.ok(v1Job);
  });

  step('2. is indexed over several invocations, none over the budget', async () => {
    const j = await waitForJob(v1Job);
    assert.equal(j.state, 'succeeded');
    // The figures docs/performance.md quotes (printed, not asserted).
    console.log(`# v1: ${JSON.stringify({ progress: j.progress, usage: j.usage })}`);
    const { usage, progress } = j;
    assert.ok(usage.invocations >= 5, `expected several invocations: ${JSON.stringify(usage)}`);
    assert.ok(usage.subrequests_peak_per_invocation <= BUDGET, JSON.stringify(usage));
    assert.equal(usage.subrequests_budget_per_invocation, BUDGET);
    const s = usage.subrequests;
    assert.equal(s.total, s.d1 + s.embed + s.index + s.queue);
    assert.ok(s.total <= usage.invocations * BUDGET);
    assert.equal(s.queue, usage.invocations - 1, 'one continuation message per checkpoint');
    assert.ok(progress.chunks_total > 10_000, `~16,500 chunks of up to 1,000 characters: ${progress.chunks_total}`);
    assert.equal(progress.chunks_done, progress.chunks_total);
    assert.equal(progress.chunks_embedded, progress.chunks_total, 'each chunk embedded once');
    assert.equal(progress.chunks_reused, 0);
    // The fewest embed calls 100 texts each allow: no page was redone.
    assert.equal(s.embed, Math.ceil(progress.chunks_total / 100));

    const doc = await api(base, 'GET', docPath(DOC));
    assert.equal(doc.body.state, 'indexed', doc.text);
    assert.equal(doc.body.chunk_count, progress.chunks_total);
  });

  step('3. is searchable, down to a paragraph near its end', async () => {
    const target = 33_000;
    const res = await search(base, { query: paragraph(target), top_k: 3, filter: { doc_id: DOC } });
    assert.equal(res.status, 200, res.text);
    assert.ok(res.body.results.length > 0);
    assert.ok(
      res.body.results.some((r) => r.text.includes(`Paragraph ${target} `)),
      `paragraph ${target} found: ${JSON.stringify(res.body.results.map((r) => r.text.slice(0, 40)))}`,
    );
  });

  step('4. a new version with one paragraph changed embeds and writes only the chunks that changed', async () => {
    const changed = 'Paragraph 17000 was rewritten: the lighthouse keeper moved the lantern to the northern jetty, '
      .padEnd(299, 'and logged the tide again ') + '.';
    assert.equal(changed.length, 300);
    const text = book({ index: 17_000, text: changed });
    assert.equal(Buffer.byteLength(text), TEN_MB);
    const res = await api(base, 'PUT', docPath(DOC), { text });
    assert.equal(res.status, 202, res.text);
    const jobId = res.body.job_id;
    const j = await waitForJob(jobId);
    assert.equal(j.state, 'succeeded', JSON.stringify(j));
    console.log(`# v2: ${JSON.stringify({ progress: j.progress, usage: j.usage })}`);
    const { progress, usage } = j;
    assert.ok(progress.chunks_embedded >= 1 && progress.chunks_embedded <= 3, JSON.stringify(progress));
    // Every other chunk keeps its vector (its ID comes from its content):
    // nothing is read, embedded or written for it.
    assert.equal(progress.chunks_reused, 0, JSON.stringify(progress));
    assert.equal(progress.chunks_kept, progress.chunks_total - progress.chunks_embedded, JSON.stringify(progress));
    assert.ok(usage.subrequests_peak_per_invocation <= BUDGET, JSON.stringify(usage));
    assert.equal(usage.invocations, 1, `an edit fits in one invocation: ${JSON.stringify(usage)}`);
    // The upsert (the cleanup's delete may be recorded after the job ends).
    assert.ok(usage.subrequests.index >= 1 && usage.subrequests.index <= 2, JSON.stringify(usage));
    assert.equal(usage.subrequests.embed, progress.chunks_embedded > 0 ? 1 : 0, 'one embed call for the changed chunks');

    const hit = await search(base, { query: changed, top_k: 3, filter: { doc_id: DOC } });
    assert.equal(hit.status, 200, hit.text);
    assert.ok(hit.body.results.length > 0 && hit.body.results.every((r) => r.version === 2), hit.text);
    assert.ok(hit.body.results.some((r) => r.text.includes('lighthouse keeper')), hit.text);
  });
});
