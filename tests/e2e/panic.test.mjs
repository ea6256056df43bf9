// A panic while consuming a job, in a test-only build of the Worker
// (`--features panic-probe`: the consumer panics on a document containing
// `PANIC-PROBE`, with the document's text in the panic message):
//
//   - the log carries one fixed `panic` event with the source location, and
//     no text of the document anywhere (not Rust's message, not the glue's);
//   - the job ends `failed` with `internal_error` at once (no wait for its
//     lease), and its letter is archived and sent to the dead-letter queue;
//   - the Worker recovers: the next document is indexed.
//
// The build goes to build-panic-probe/ (never deployed).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { REPO_ROOT, api, docPath, waitFor, waitForState } from './helpers.mjs';
import { ADMIN_TOKEN, startProductionWorker } from './miniflare-env.mjs';

const BUILD_DIR = path.join(REPO_ROOT, 'build-panic-probe');
// Words that appear only in the document: none may reach a log line.
const SECRET = 'Zanzibar-quokka-7731 マルハナバチの秘密';
const TEXT = `The confidential memo says ${SECRET}. PANIC-PROBE follows: ${SECRET} again.`;

function buildProbe() {
  const r = spawnSync('sh', ['scripts/build-worker.sh', '--features', 'panic-probe'], {
    cwd: REPO_ROOT,
    env: { ...process.env, OUT_DIR: BUILD_DIR },
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
    timeout: 900_000,
  });
  if (r.status !== 0) throw new Error(`panic-probe build failed (${r.status})\n${r.stdout}\n${r.stderr}`);
}

describe('a panic while consuming ends the job failed, logs no content, and the Worker recovers', () => {
  let w;
  before(async () => {
    buildProbe();
    w = await startProductionWorker({ buildDir: BUILD_DIR });
  });
  after(async () => {
    await w?.stop();
  });

  it('ends the panicking job failed with internal_error and a dead letter', async () => {
    const put = await api(w.base, 'PUT', docPath('boom'), { text: TEXT });
    assert.equal(put.status, 202, JSON.stringify(put.body));
    const doc = await waitForState(w.base, 'boom', 'failed', { timeoutMs: 60_000 });
    assert.equal(doc.last_failure_bucket, 'internal_error', JSON.stringify(doc));
    const job = await api(w.base, 'GET', `/v1/jobs/${put.body.job_id}`);
    assert.equal(job.body.state, 'failed', JSON.stringify(job.body));
    assert.equal(job.body.last_failure_bucket, 'internal_error');
    assert.equal(job.body.attempts, 1, 'ended on its first attempt, not retried');
    // The letter: archived by the consumer, and received through the DLQ.
    const letter = await waitFor(
      async () => {
        const res = await api(w.base, 'GET', '/v1/admin/dead-letters?doc_id=boom', undefined, { token: ADMIN_TOKEN });
        const l = res.body.letters?.[0];
        return l && w.events('dead_letter_received').some((e) => e.job_id === l.job_id) ? l : null;
      },
      { timeoutMs: 30_000, what: 'the dead letter, archived and delivered through the DLQ' },
    );
    assert.equal(letter.times_seen, 1, 'archived once, confirmed by the DLQ consumer');
    assert.equal(letter.job_id, put.body.job_id);
    assert.equal(letter.failure_bucket, 'internal_error', JSON.stringify(letter));
  });

  it('logs a fixed panic event with the source location and no document text', () => {
    const logs = w.logs();
    const panics = w.events('panic');
    assert.ok(panics.length >= 1, `no panic event in:\n${logs.slice(-3000)}`);
    const p = panics[0];
    assert.equal(p.bucket, 'internal_error');
    // The probe panics in the consumer's staging step.
    assert.match(p.file, /src\/pipeline\/consume\/stage\.rs$/);
    assert.ok(Number.isInteger(p.line) && p.line > 0, JSON.stringify(p));
    for (const fragment of ['Zanzibar', 'quokka', 'マルハナバチ', 'confidential', 'panic probe in']) {
      assert.ok(!logs.includes(fragment), `the log carries "${fragment}":\n${logs.slice(-3000)}`);
    }
  });

  it('recovers: the next document is indexed', async () => {
    const put = await api(w.base, 'PUT', docPath('after'), { text: 'A calm document after the storm.' });
    assert.equal(put.status, 202);
    await waitForState(w.base, 'after', 'indexed', { timeoutMs: 60_000 });
  });
});
