// A worker killed (SIGKILL) in the middle of indexing a batch, restarted on
// the same state, with `make dev`'s own configuration (`[env.local.vars]`:
// leases of 40 s and stall times of 20 s sized for local invocations): the
// ledger kept every document, the local queue lost its messages, and cron,
// triggered by hand, brings every document to `indexed` within two minutes
// of the restart.
//
// Run from the repository root: node --test --test-concurrency=1 tests/e2e/

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admin, api, docPath, search, sleep, startWorker, triggerCron, withLogs } from './helpers.mjs';

// No overrides: the offline profile as `make dev` runs it.
const VARS = {};
const RECOVERY_MS_MAX = 120_000;
const DOCS = Array.from({ length: 12 }, (_, i) => `restart/${String(i + 1).padStart(2, '0')}`);
const WORDS = ['amber', 'basalt', 'cobalt', 'dune', 'ember', 'fjord', 'glacier', 'harbor', 'iris', 'juniper', 'kelp', 'lagoon'];
const textOf = (i) => `Field note ${i + 1}: the ${WORDS[i]} survey crossed the ${WORDS[i]} ridge at dawn and logged ${WORDS[i]} samples.`;
const SETTLED = new Set(['indexed', 'failed']);

let worker;
let base;
const getWorker = () => worker;
const step = (name, fn) => it(name, withLogs(getWorker, fn));

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

async function views() {
  return Promise.all(
    DOCS.map(async (id) => {
      const res = await api(base, 'GET', docPath(id));
      assert.equal(res.status, 200, `${id}: ${res.text}`);
      return res.body;
    }),
  );
}

const states = (vs) => Object.fromEntries(vs.map((v) => [v.doc_id, `${v.state}/${v.job_state}`]));

describe('restart in the middle of indexing', () => {
  let accepted;
  let atRestart;
  let restartedAt;

  step('1. a batch is accepted, then the worker is killed at once', async () => {
    const res = await api(base, 'POST', '/v1/documents', {
      documents: DOCS.map((doc_id, i) => ({ doc_id, text: textOf(i) })),
    });
    await worker.stop({ keepState: true, signal: 'SIGKILL' });
    assert.equal(res.status, 200, res.text);
    accepted = res.body.results;
    assert.deepEqual(accepted.map((r) => r.status), Array(DOCS.length).fill(202), res.text);
  });

  step('2. restarted on the same state: D1 kept every document; queue messages are gone', async () => {
    const persistDir = worker.persistDir;
    worker = undefined;
    worker = await startWorker({ vars: VARS, persistDir });
    base = worker.base;
    restartedAt = Date.now();

    atRestart = await views();
    for (const [i, v] of atRestart.entries()) {
      assert.equal(v.latest_version, 1, JSON.stringify(v));
      assert.equal(v.job_id, accepted[i].job_id, JSON.stringify(v));
    }
    // The crash left work to recover: documents neither indexed nor
    // failed, whose queue messages died with the worker. That cron, not a
    // redelivery, brought them back is shown by the repair runs (step 4:
    // they re-enqueued at least as many jobs as there were such documents).
    const unsettled = atRestart.filter((v) => !SETTLED.has(v.state));
    assert.ok(
      unsettled.length > 0,
      `the test needs documents left unindexed by the crash (all settled before the kill): ${JSON.stringify(states(atRestart))}`,
    );
    assert.ok(
      unsettled.every((v) => ['queued', 'indexing'].includes(v.state)),
      JSON.stringify(states(atRestart)),
    );
  });

  step('3. cron (by hand, every 5 s) brings every document back within two minutes of the restart', async () => {
    let last;
    while (Date.now() - restartedAt < RECOVERY_MS_MAX) {
      assert.equal((await triggerCron(base)).trim(), 'ok');
      await sleep(5_000);
      last = await views();
      if (last.every((v) => SETTLED.has(v.state))) break;
    }
    const took = Date.now() - restartedAt;
    process.stdout.write(`# recovered ${DOCS.length} documents ${Math.round(took / 1000)} s after the restart\n`);
    const stuck = last.filter((v) => !SETTLED.has(v.state));
    assert.deepEqual(stuck, [], `documents still queued or indexing ${RECOVERY_MS_MAX / 1000} s after the restart: ${JSON.stringify(states(last))}`);
    assert.ok(took < RECOVERY_MS_MAX, `${took} ms`);
    for (const v of last) {
      if (v.state === 'failed') {
        assert.equal(typeof v.last_failure_bucket, 'string', `a failed document tells its bucket: ${JSON.stringify(v)}`);
      } else {
        assert.equal(v.live_version, 1, JSON.stringify(v));
        assert.equal(v.job_state, 'succeeded', JSON.stringify(v));
        assert.ok(v.chunk_count >= 1, JSON.stringify(v));
      }
    }
    // Nothing here has a reason to fail.
    assert.deepEqual(last.filter((v) => v.state === 'failed'), [], JSON.stringify(states(last)));

    for (const [i, id] of DOCS.entries()) {
      const s = await search(base, { query: `${WORDS[i]} survey ridge samples`, filter: { doc_id: id } });
      assert.equal(s.status, 200, s.text);
      assert.equal(s.body.results[0]?.text, textOf(i), `${id}: ${s.text}`);
    }
  });

  step('4. GET /v1/admin/repair/runs lists the run that re-enqueued them', async () => {
    const res = await admin(base, 'GET', '/v1/admin/repair/runs?limit=50');
    assert.equal(res.status, 200, res.text);
    const runs = res.body.runs;
    assert.ok(Array.isArray(runs) && runs.length >= 1, res.text);
    for (const r of runs) {
      assert.equal(typeof r.run_id, 'number', JSON.stringify(r));
      assert.ok(r.started_at <= r.finished_at, JSON.stringify(r));
      assert.equal(typeof r.budget_hit, 'boolean', JSON.stringify(r));
      assert.equal(typeof r.report, 'object', JSON.stringify(r));
    }
    // Newest first.
    const ids = runs.map((r) => r.run_id);
    assert.deepEqual(ids, [...ids].sort((a, b) => b - a), res.text);
    const requeued = runs.reduce((n, r) => n + r.report.jobs_requeued, 0);
    assert.ok(runs.some((r) => r.report.jobs_requeued > 0), `no run re-enqueued a job: ${res.text}`);
    const unsettledAtRestart = atRestart.filter((v) => !SETTLED.has(v.state)).length;
    assert.ok(requeued >= unsettledAtRestart, `re-enqueued ${requeued} jobs for ${unsettledAtRestart} unsettled documents: ${res.text}`);
    assert.ok(runs.every((r) => r.report.jobs_dead === 0), res.text);

    // A job that was re-enqueued was claimed again: at least one attempt.
    for (const r of accepted) {
      const job = await api(base, 'GET', `/v1/jobs/${encodeURIComponent(r.job_id)}`);
      assert.equal(job.status, 200, job.text);
      assert.equal(job.body.state, 'succeeded', job.text);
      assert.ok(job.body.attempts >= 1, job.text);
    }

    const limited = await admin(base, 'GET', '/v1/admin/repair/runs?limit=1');
    assert.equal(limited.status, 200, limited.text);
    assert.equal(limited.body.runs.length, 1, limited.text);
    assert.equal(limited.body.runs[0].run_id, ids[0], limited.text);
  });
});
