// What D1 bills, through the built Worker on the local runtime (workerd
// counts rows the way D1 does): a job's `usage.d1_rows` holds the rows its
// statements read and wrote as each result's meta reported them, and the
// tenant's usage holds the sums over its jobs. The figures of this test's
// two jobs are printed; docs/performance.md compares them with the native
// ledger's count of the same work (src/native/rows.rs).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admin, api, docPath, startWorker, waitForState, withLogs } from './helpers.mjs';

// Twenty paragraphs of distinct words, and the same with one changed.
const WORDS = ['amber', 'birch', 'cedar', 'delta', 'ember', 'fjord', 'grove', 'heath', 'inlet', 'juniper'];
const paragraph = (i, tag = '') =>
  Array.from({ length: 60 }, (_, k) => `${WORDS[(i + k) % WORDS.length]}${(i * 7 + k) % 13}${tag}`).join(' ') + '.';
const text = (changed) =>
  Array.from({ length: 20 }, (_, i) => paragraph(i, i === changed ? 'x' : '')).join('\n\n');

describe('D1 rows billed, as the local runtime reports them', () => {
  let w;
  before(async () => {
    w = await startWorker();
  });
  after(async () => {
    await w?.stop();
  });

  it('a job shows its rows read and written, and its tenant the sums', withLogs(() => w, async () => {
    const jobs = [];
    for (const [version, body] of [[1, text(-1)], [2, text(9)]]) {
      const put = await api(w.base, 'PUT', docPath('rows-a'), { text: body });
      assert.equal(put.status, 202, put.text);
      await waitForState(w.base, 'rows-a', 'indexed', { liveVersion: version, timeoutMs: 60_000 });
      const job = await api(w.base, 'GET', `/v1/jobs/${put.body.job_id}`);
      assert.equal(job.status, 200, job.text);
      jobs.push(job.body);
    }
    const [first, edit] = jobs.map((j) => j.usage.d1_rows);
    console.log(`d1_rows: first version ${JSON.stringify(first)} (${jobs[0].progress.chunks_total} chunks); one-paragraph edit ${JSON.stringify(edit)}`);
    const chunks = jobs[0].progress.chunks_total;
    assert.ok(chunks >= 5, `chunks: ${chunks}`);
    // Each chunk row written is at least its row and its index entries.
    assert.ok(first.written >= 4 * chunks, `first version ${JSON.stringify(first)} for ${chunks} chunks`);
    assert.ok(first.read > 0 && edit.read > 0 && edit.written > 0, JSON.stringify({ first, edit }));
    const tenant = await admin(w.base, 'GET', '/v1/admin/tenants/default');
    assert.equal(tenant.status, 200, tenant.text);
    assert.deepEqual(tenant.body.usage.d1_rows, { read: first.read + edit.read, written: first.written + edit.written });
  }));
});
