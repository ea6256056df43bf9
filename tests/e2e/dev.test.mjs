// `make dev` as a new user meets it (scripts/dev.mjs, which `make dev` runs
// after scripts/setup.sh), on a fresh state directory and the Worker that
// `make build` built (DEV_BUILD=0; the build itself is the same script):
//
// 1. a clean start prints where the pipeline is, the tokens, the console and
//    the cron schedule, and nothing alarming: no warning, no stack trace, no
//    network error, no second build;
// 2. cron runs on its own schedule: a backfill ends `completed` and the
//    repair runs are listed without any cron call by the test;
// 3. Ctrl-C (SIGINT) stops it and its wrangler.
//
// Run from the repository root: node --test tests/e2e/dev.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, admin, api, freePorts, waitFor, waitForState } from './helpers.mjs';

const CRON_SECONDS = 2;
let child;
let output = '';
let base;
let port;
let persistDir;
let exited;

before(
  async () => {
    [port] = await freePorts(1);
    const [inspector] = await freePorts(1);
    persistDir = fs.mkdtempSync(path.join(os.tmpdir(), 'e2e-dev-'));
    child = spawn('node', ['scripts/dev.mjs'], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        NO_COLOR: '1',
        DEV_PORT: String(port),
        DEV_PERSIST_DIR: persistDir,
        DEV_CRON_SECONDS: String(CRON_SECONDS),
        DEV_BUILD: '0',
        DEV_INSPECTOR_PORT: String(inspector),
      },
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
    child.stdout.on('data', (c) => (output += c));
    child.stderr.on('data', (c) => (output += c));
    base = `http://127.0.0.1:${port}`;
    await waitFor(() => output.includes('  cron  '), { timeoutMs: 180_000, intervalMs: 250, what: `make dev's banner; output so far:\n${output}` });
  },
  { timeout: 200_000 },
);

after(async () => {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // ended already
  }
  fs.rmSync(persistDir, { recursive: true, force: true });
});

describe('make dev', () => {
  it('1. a clean start says where everything is, and nothing alarming', () => {
    for (const want of [
      `serving offline on http://localhost:${port}`,
      'ingest token  dev-ingest-token',
      'admin token   dev-admin-token',
      `http://localhost:${port}/console`,
      `cron          every ${CRON_SECONDS} s`,
    ]) {
      assert.ok(output.includes(want), `missing ${JSON.stringify(want)} in:\n${output}`);
    }
    for (const alarming of [/WARNING/i, /ENOTFOUND/, /\bError\b/, /^\s+at .+:\d+:\d+\)?$/m, /restarting build/, /This is not what you probably want/]) {
      assert.doesNotMatch(output, alarming, output);
    }
  });

  it('2. cron runs on its own: a backfill completes, and the run that moved it is listed', async () => {
    for (const id of ['dev-a', 'dev-b', 'dev-c']) {
      const r = await api(base, 'PUT', `/v1/documents/${id}`, { text: `Lighthouse ${id} keeps a log of tides and passing ships.` });
      assert.equal(r.status, 202, r.text);
    }
    for (const id of ['dev-a', 'dev-b', 'dev-c']) await waitForState(base, id, 'indexed');
    const started = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'all', page_size: 1 });
    assert.equal(started.status, 202, started.text);
    const id = started.body.backfill.backfill_id;
    // Each page after the first is enqueued by a cron run, and only a cron
    // run marks the backfill completed.
    const done = await waitFor(
      async () => {
        const res = await admin(base, 'GET', `/v1/admin/reindex/${id}`);
        assert.equal(res.status, 200, res.text);
        return res.body.state === 'completed' ? res.body : null;
      },
      { timeoutMs: 90_000, intervalMs: 500, what: 'the backfill completed by cron alone' },
    );
    assert.equal(done.progress.done, 3, JSON.stringify(done));
    const runs = await admin(base, 'GET', '/v1/admin/repair/runs?limit=50');
    assert.equal(runs.status, 200, runs.text);
    // A run that found nothing to do is not recorded; the ones that moved the backfill are.
    assert.ok(runs.body.runs.some((r) => r.report.backfill_pages >= 1), runs.text);
  });

  it('3. SIGINT stops it and its wrangler', async () => {
    process.kill(child.pid, 'SIGINT');
    const { code, signal } = await Promise.race([exited, new Promise((r) => setTimeout(() => r({ code: 'timeout' }), 20_000))]);
    assert.equal(code, 0, `exit ${code} ${signal}:\n${output.slice(-2000)}`);
    await assert.rejects(fetch(`${base}/healthz`), 'nothing answers on the port any more');
  });
});
