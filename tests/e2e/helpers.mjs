// Helpers for the end-to-end tests: start the BUILT Worker in workerd with
// `wrangler dev --env local` on a fresh, empty persistence directory, talk to
// its HTTP API, and poll for the asynchronous (Queue-driven) outcomes.
//
// Only Node built-ins and the global fetch are used.

import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { localConfig } from '../../scripts/wrangler-config.mjs';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const INGEST_TOKEN = 'dev-ingest-token';

const WRANGLER = path.join(REPO_ROOT, 'node_modules', '.bin', 'wrangler');
const STARTUP_TIMEOUT_MS = 240_000;
const LOG_BUFFER_MAX = 512 * 1024;

// Preloaded into every wrangler process: Miniflare's loopback server must
// not close idle connections that workerd reuses (see the file).
const KEEPALIVE_PRELOAD = `--import=${pathToFileURL(path.join(REPO_ROOT, 'tests', 'e2e', 'loopback-keepalive.mjs')).href}`;

function childEnv() {
  const nodeOptions = [process.env.NODE_OPTIONS, KEEPALIVE_PRELOAD].filter(Boolean).join(' ');
  return { ...process.env, CI: '1', WRANGLER_SEND_METRICS: 'false', CLOUDFLARE_CF_FETCH_ENABLED: 'false', NO_COLOR: '1', NODE_OPTIONS: nodeOptions };
}

function tail(text, n = 6000) {
  return text.length > n ? `…${text.slice(-n)}` : text;
}

/** The worker reads its secrets from `.dev.vars`; create it from the example when missing. */
function ensureDevVars() {
  const devVars = path.join(REPO_ROOT, '.dev.vars');
  if (!fs.existsSync(devVars)) {
    fs.copyFileSync(path.join(REPO_ROOT, '.dev.vars.example'), devVars);
  }
}

/**
 * The configuration the tests run on: wrangler.toml without its [build]
 * step (scripts/wrangler-config.mjs says why). The tests run the Worker
 * `make build` built.
 */
function testConfig() {
  if (!fs.existsSync(path.join(REPO_ROOT, 'build', 'entry.mjs'))) {
    throw new Error('e2e: build/entry.mjs is missing (run `make build`)');
  }
  return localConfig('.e2e-wrangler.toml');
}

function applyMigrations(binding, persistDir) {
  runWrangler(['d1', 'migrations', 'apply', binding, '--local', '--env', 'local', '--persist-to', persistDir, '-c', testConfig()]);
}

/**
 * Runs a wrangler command to its end from the repository root; throws with
 * its output if it fails. Returns `{ stdout, stderr }`.
 */
export function runWrangler(args) {
  const r = spawnSync(WRANGLER, args, {
    cwd: REPO_ROOT,
    env: childEnv(),
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
    timeout: 120_000,
  });
  if (r.error || r.status !== 0) {
    throw new Error(
      `wrangler ${args.join(' ')} failed (status ${r.status}, signal ${r.signal}, error ${r.error?.message ?? 'none'})\n` +
        `--- stdout ---\n${r.stdout ?? ''}\n--- stderr ---\n${r.stderr ?? ''}`,
    );
  }
  return { stdout: r.stdout, stderr: r.stderr };
}

/**
 * Runs SQL on a local D1 database of the test configuration (`binding`:
 * `DB` or `VECTORS_DB`) in a worker's state directory, with `wrangler d1
 * execute --local`. Resolves to the rows of the last statement.
 *
 * Asynchronous on purpose: a test process blocked in a synchronous child
 * for seconds does not see the Worker close its idle keep-alive
 * connections, and its next fetch on one of them fails.
 */
export async function d1Query(binding, persistDir, sql) {
  // The running Worker writes the same SQLite file: a read that finds it
  // locked (SQLITE_BUSY) is tried again, a few times, after a pause.
  for (let attempt = 1; ; attempt++) {
    try {
      return await d1QueryOnce(binding, persistDir, sql);
    } catch (e) {
      if (attempt >= 5 || !/SQLITE_BUSY|database is locked/.test(e.message)) throw e;
      await sleep(500 * attempt);
    }
  }
}

async function d1QueryOnce(binding, persistDir, sql) {
  const args = ['d1', 'execute', binding, '--local', '--env', 'local', '--persist-to', persistDir, '-c', testConfig(), '--json', '--command', sql];
  const { status, signal, stdout, stderr } = await runChild(WRANGLER, args, { env: childEnv() });
  if (status !== 0) {
    throw new Error(`wrangler ${args.join(' ')} failed (status ${status}, signal ${signal})\n--- stdout ---\n${stdout}\n--- stderr ---\n${stderr}`);
  }
  try {
    return JSON.parse(stdout).at(-1).results;
  } catch (e) {
    throw new Error(`wrangler d1 execute: unexpected output (${e.message})\n${stdout}`);
  }
}

/**
 * Runs a command to its end without blocking the test process; resolves to
 * `{ status, signal, stdout, stderr }` (killed after `timeoutMs`).
 *
 * A test that talks to a running Worker runs its child processes this way:
 * while spawnSync blocks, the process does not see the Worker's dev server
 * close an idle keep-alive connection (after 5 s), and the next fetch is
 * sent on the closed socket and fails ("fetch failed"). CI met it once, in
 * too-large.test.mjs, after two Python clients had run for seconds each.
 */
export function runChild(cmd, args, { cwd = REPO_ROOT, env = process.env, timeoutMs = 120_000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c) => (stdout += c));
    child.stderr.setEncoding('utf8').on('data', (c) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (status, signal) => {
      clearTimeout(timer);
      resolve({ status, signal, stdout, stderr });
    });
  });
}

/** Distinct free TCP ports on 127.0.0.1 (all held open together, then released). */
export async function freePorts(count) {
  const servers = [];
  try {
    for (let i = 0; i < count; i++) {
      const srv = net.createServer();
      servers.push(srv);
      await new Promise((resolve, reject) => {
        srv.once('error', reject);
        srv.listen(0, '127.0.0.1', resolve);
      });
    }
    return servers.map((s) => s.address().port);
  } finally {
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(() => resolve()))));
  }
}

export function sleep(ms) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Is any process of this process group still alive? */
function groupAlive(pgid) {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

function killGroup(pgid, signal) {
  try {
    process.kill(-pgid, signal);
  } catch {
    // already gone
  }
}

// Every started worker, so that an abrupt exit of the test process still
// takes the wrangler/workerd process groups down with it.
const running = new Set();
let exitHooksInstalled = false;
function installExitHooks() {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on('exit', () => {
    for (const pgid of running) killGroup(pgid, 'SIGKILL');
  });
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
    process.once(sig, () => {
      for (const pgid of running) killGroup(pgid, 'SIGKILL');
      process.exit(128 + (os.constants.signals[sig] ?? 0));
    });
  }
}

// A tiny detached process that outlives a test process killed with SIGKILL
// (no 'exit' hook runs then): once this process is gone, it takes the
// wrangler process group down and removes the state directory. It exits on
// its own as soon as the group is gone (the normal stop()).
const WATCHDOG = `
const [pgid, parent, dir] = process.argv.slice(1).map((v, i) => (i < 2 ? Number(v) : v));
const alive = (pid) => { try { process.kill(pid, 0); return true; } catch (e) { return e.code === 'EPERM'; } };
const kill = (sig) => { try { process.kill(-pgid, sig); } catch {} };
const timer = setInterval(() => {
  if (!alive(-pgid)) { clearInterval(timer); return; }
  if (alive(parent)) return;
  clearInterval(timer);
  kill('SIGTERM');
  setTimeout(() => {
    kill('SIGKILL');
    setTimeout(() => { try { require('fs').rmSync(dir, { recursive: true, force: true }); } catch {} }, 500);
  }, 5000);
}, 500);
`;

function startWatchdog(pgid, persistDir) {
  const w = spawn(process.execPath, ['-e', WATCHDOG, String(pgid), String(process.pid), persistDir], {
    detached: true,
    stdio: 'ignore',
  });
  w.unref();
}

/**
 * Starts the Worker with `wrangler dev --env local` on an empty state
 * directory with both D1 databases migrated. Returns
 * `{ base, logs(), stop(), persistDir }`.
 *
 * Options (all optional):
 * - `vars`: `{ NAME: value }`, each passed as `--var NAME:value` (overrides
 *   `[env.local.vars]` for this run only);
 * - `persistDir`: restart on the state directory of an earlier worker
 *   (stopped with `stop({ keepState: true })`) instead of a fresh one; its
 *   D1 data survives, local queue messages do not.
 *
 * `stop({ keepState = false, signal = 'SIGTERM' })`: stops the wrangler
 * process group (`signal: 'SIGKILL'` for an abrupt crash) and, unless
 * `keepState`, removes the state directory.
 */
export async function startWorker(opts = {}) {
  // Free ports are picked, released, then bound by wrangler: with two test
  // files at once another process can take one in between. A fresh worker
  // that lost that race is started again on new ports.
  for (let attempt = 1; ; attempt++) {
    try {
      return await startWorkerOnce(opts);
    } catch (err) {
      if (opts.persistDir !== undefined || attempt >= 3 || !/Address already in use/.test(err.message)) throw err;
    }
  }
}

async function startWorkerOnce({ vars = {}, persistDir: reuseDir } = {}) {
  ensureDevVars();
  for (const name of Object.keys(vars)) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) throw new Error(`startWorker: bad variable name ${JSON.stringify(name)}`);
  }
  let persistDir;
  if (reuseDir === undefined) {
    persistDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingest-e2e-'));
  } else {
    persistDir = reuseDir;
    fs.mkdirSync(persistDir, { recursive: true });
  }
  let child;
  let pgid;
  let exited = false;
  let exitInfo = null;
  let exitPromise = Promise.resolve();
  let buffer = '';
  const logs = () => buffer;

  const stop = async ({ keepState = false, signal = 'SIGTERM' } = {}) => {
    if (pgid !== undefined) {
      if (!exited) killGroup(pgid, signal);
      const deadline = Date.now() + 10_000;
      await Promise.race([exitPromise, sleep(10_000)]);
      // wrangler may leave workerd children behind the parent: wait for the
      // whole group, then force it.
      while (groupAlive(pgid) && Date.now() < deadline) await sleep(100);
      if (groupAlive(pgid)) {
        killGroup(pgid, 'SIGKILL');
        const killDeadline = Date.now() + 5_000;
        while (groupAlive(pgid) && Date.now() < killDeadline) await sleep(100);
      }
      running.delete(pgid);
      pgid = undefined;
    }
    if (!keepState) fs.rmSync(persistDir, { recursive: true, force: true });
  };

  try {
    applyMigrations('DB', persistDir);
    applyMigrations('VECTORS_DB', persistDir);
    // Shards past the first (`vars.SHARDS`): their ledgers and indexes.
    for (let n = 1; n < Number(vars.SHARDS ?? 1); n++) {
      applyMigrations(`DB_SHARD_${n}`, persistDir);
      applyMigrations(`VECTORS_DB_SHARD_${n}`, persistDir);
    }
    const [port, inspectorPort] = await freePorts(2);
    const args = [
      'dev',
      '-c', testConfig(),
      '--env', 'local',
      '--ip', '127.0.0.1',
      '--port', String(port),
      '--persist-to', persistDir,
      '--test-scheduled',
      '--inspector-port', String(inspectorPort),
      '--show-interactive-dev-session=false',
      ...Object.entries(vars).flatMap(([name, value]) => ['--var', `${name}:${value}`]),
    ];
    installExitHooks();
    child = spawn(WRANGLER, args, {
      cwd: REPO_ROOT,
      env: childEnv(),
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    pgid = child.pid;
    running.add(pgid);
    startWatchdog(pgid, persistDir);
    const append = (chunk) => {
      buffer += chunk.toString();
      if (buffer.length > LOG_BUFFER_MAX) buffer = buffer.slice(-LOG_BUFFER_MAX);
    };
    child.stdout.on('data', append);
    child.stderr.on('data', append);
    exitPromise = new Promise((resolve) => {
      child.once('exit', (code, signal) => {
        exited = true;
        exitInfo = { code, signal };
        resolve();
      });
      child.once('error', (err) => {
        exited = true;
        exitInfo = { error: err.message };
        resolve();
      });
    });

    const base = `http://127.0.0.1:${port}`;
    const deadline = Date.now() + STARTUP_TIMEOUT_MS;
    for (;;) {
      if (exited) throw new Error(`wrangler dev exited before it was ready: ${JSON.stringify(exitInfo)}`);
      try {
        const res = await fetch(`${base}/healthz`, { signal: AbortSignal.timeout(2_000) });
        const text = await res.text();
        if (res.status === 200) {
          let body = null;
          try {
            body = JSON.parse(text);
          } catch {
            // not JSON yet: keep waiting
          }
          if (body?.ok === true) break;
        }
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) throw new Error(`wrangler dev not healthy after ${STARTUP_TIMEOUT_MS} ms`);
      await sleep(250);
    }
    return { base, logs, stop, persistDir };
  } catch (err) {
    const out = tail(buffer, 8000);
    await stop().catch(() => {});
    err.message += `\n--- wrangler dev output (tail) ---\n${out}`;
    throw err;
  }
}

/**
 * Wraps a test body so that a failure carries the tail of the wrangler log.
 * Usage: `it('…', withLogs(() => worker, async () => { … }))`.
 */
export function withLogs(getWorker, fn) {
  return async (...args) => {
    try {
      return await fn(...args);
    } catch (err) {
      const w = getWorker();
      if (w) {
        // The whole log goes to a file (CI keeps target/); the tail, without
        // the request lines that polls repeat, to the test's output.
        const dir = path.join(REPO_ROOT, 'target', 'e2e-logs');
        fs.mkdirSync(dir, { recursive: true });
        const file = path.join(dir, `${path.basename(process.argv[1] ?? 'e2e')}-${Date.now()}.log`);
        fs.writeFileSync(file, w.logs());
        const quiet = w.logs().split('\n').filter((l) => !/\[wrangler:info\] (GET|POST|PUT|DELETE) /.test(l)).join('\n');
        process.stderr.write(`\n--- wrangler dev output (tail, request lines left out; whole log: ${file}) ---\n${tail(quiet, 4000)}\n--- end ---\n`);
      }
      throw err;
    }
  };
}

/** How long `api` waits for an answer (headers and body) by default. */
export const API_TIMEOUT_MS = 60_000;

/**
 * Sends a JSON request. `body` undefined sends none; a string is sent as is
 * (for malformed JSON); anything else is JSON-encoded. Authorization is
 * `Bearer dev-ingest-token` unless `token` is given (null: no header).
 * Returns `{ status, body, headers, text }` with `body` the parsed JSON (or null).
 *
 * A request is sent once, never again: a request that gets no answer within
 * `timeoutMs` fails the test with a message that says so. (GETs used to be
 * asked once more after 20 s of silence, on a fresh connection; a retry
 * would hide a Worker that hangs on one request in two. The stall it hid:
 * under `wrangler dev`, the first request that reaches the dev server
 * while the Worker's isolate is in a long synchronous stretch, such as a
 * 10 MB document's one-invocation edit, is not answered until another
 * request arrives (the retry was one) or the client gives up:
 * large-document.test.mjs, step 4.)
 */
export async function api(base, method, urlPath, body, { token = INGEST_TOKEN, headers = {}, timeoutMs = API_TIMEOUT_MS } = {}) {
  const h = { ...headers };
  if (token !== null) h.Authorization = `Bearer ${token}`;
  let payload;
  if (body !== undefined) {
    payload = typeof body === 'string' ? body : JSON.stringify(body);
    if (!Object.keys(h).some((k) => k.toLowerCase() === 'content-type')) h['Content-Type'] = 'application/json';
  }
  let res;
  let text;
  try {
    res = await fetch(`${base}${urlPath}`, { method, headers: h, body: payload, signal: AbortSignal.timeout(timeoutMs) });
    text = await res.text();
  } catch (err) {
    if (err?.name === 'TimeoutError') {
      throw new Error(
        `${method} ${urlPath}: no complete answer within ${timeoutMs} ms` +
          `${res ? ` (status ${res.status} came, the body did not)` : ''}; the request is not sent again: ` +
          'a stalled request is a defect to find (see the Worker\'s log)',
      );
    }
    throw err;
  }
  let parsed = null;
  try {
    parsed = text.length ? JSON.parse(text) : null;
  } catch {
    parsed = null;
  }
  return { status: res.status, body: parsed, headers: res.headers, text };
}

/** `/v1/documents/{percent-encoded doc_id}` */
export function docPath(docId) {
  return `/v1/documents/${encodeURIComponent(docId)}`;
}

/**
 * Polls `fn` until it returns a truthy value, which is returned. A falsy
 * value means "not yet": `fn` is called again after `intervalMs`. Anything
 * `fn` throws (a failed assertion above all) fails at once: nothing is
 * swallowed until the timeout, so a wrong answer seen while waiting is
 * never hidden by a later right one. On timeout, throws with the last value.
 */
export async function waitFor(fn, { timeoutMs = 30_000, intervalMs = 200, what = 'condition' } = {}) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const last = await fn();
    if (last) return last;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last value: ${JSON.stringify(last)}`);
    }
    await sleep(intervalMs);
  }
}

/**
 * Polls `GET /v1/documents/{doc_id}` until its `state` is `state` (and, if
 * given, `latest_version`/`live_version` match). Returns the last body.
 * Fails at once if the document reaches `failed` while another state is
 * wanted, and on any answer but 200 unless its status is in `tolerate`
 * (the statuses the caller expects while waiting, e.g. `[404]` for a
 * document another request is about to write): a transient 5xx or a 404
 * after a 202 is a defect, not a reason to poll again.
 * `token`: whose document (a tenant's token; INGEST_TOKEN by default).
 */
export async function waitForState(base, docId, state, { timeoutMs = 30_000, latestVersion, liveVersion, token = INGEST_TOKEN, tolerate = [] } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await api(base, 'GET', docPath(docId), undefined, { token });
    const b = last.body;
    if (last.status !== 200 && !tolerate.includes(last.status)) {
      throw new Error(`document ${JSON.stringify(docId)}: GET answered ${last.status} while waiting for ${state}: ${last.text}`);
    }
    if (
      last.status === 200 &&
      b?.state === state &&
      (latestVersion === undefined || b.latest_version === latestVersion) &&
      (liveVersion === undefined || b.live_version === liveVersion)
    ) {
      return b;
    }
    if (last.status === 200 && b?.state === 'failed' && state !== 'failed') {
      throw new Error(`document ${JSON.stringify(docId)} failed while waiting for ${state}: ${JSON.stringify(b)}`);
    }
    if (Date.now() > deadline) {
      throw new Error(
        `document ${JSON.stringify(docId)} not ${state} after ${timeoutMs} ms; last answer ${last.status} ${last.text}`,
      );
    }
    await sleep(150);
  }
}

/** `POST /v1/search`; asserts nothing, returns `{ status, body }`. `opts` as `api`'s (`token`). */
export function search(base, body, opts = {}) {
  return api(base, 'POST', '/v1/search', body, opts);
}

/** The admin token of the local profile (`.dev.vars.example`), for `/v1/admin/*`. */
export const ADMIN_TOKEN = 'dev-admin-token';

/** `api` with the admin token. */
export function admin(base, method, urlPath, body) {
  return api(base, method, urlPath, body, { token: ADMIN_TOKEN });
}

/** Runs the cron handler once (`--test-scheduled`); returns the response text. */
export async function triggerCron(base, cron = '*/5 * * * *') {
  const res = await fetch(`${base}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent(cron).replace(/%20/g, '+')}`, {
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`scheduled handler answered ${res.status}: ${text}`);
  return text;
}

/** Where the dry run's build goes (scripts/build-worker.sh's OUT_DIR). */
const DRY_RUN_BUILD = 'build-dry-run';

/** `wrangler deploy --dry-run` of one configuration, with no credentials and
 * no network: returns its output and the files it would upload. */
export function wranglerDryRun(envName) {
  const outdir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingest-dry-run-'));
  try {
    // The dry run runs wrangler.toml's [build] step. Into build/ it would
    // rewrite the files every other test file's wrangler dev serves, and
    // each of them would reload its Worker mid-test, dropping the messages
    // its local queues held (the dead-letter test's letters, never
    // delivered, on CI and here). It builds into a directory of its own,
    // through a copy of wrangler.toml whose `main` is there (git-ignored).
    const config = path.join(REPO_ROOT, '.dry-run-wrangler.toml');
    const toml = fs.readFileSync(path.join(REPO_ROOT, 'wrangler.toml'), 'utf8');
    const moved = toml.replace(/^main = "build\/entry\.mjs"$/m, `main = "${DRY_RUN_BUILD}/entry.mjs"`);
    assert.notEqual(moved, toml, 'wrangler.toml\'s main is no longer build/entry.mjs');
    if (!fs.existsSync(config) || fs.readFileSync(config, 'utf8') !== moved) fs.writeFileSync(config, moved);
    const env = { ...process.env, CI: '1', WRANGLER_SEND_METRICS: 'false', NO_COLOR: '1', OUT_DIR: DRY_RUN_BUILD };
    // No credentials: a dry run must not need them.
    delete env.CLOUDFLARE_API_TOKEN;
    delete env.CLOUDFLARE_ACCOUNT_ID;
    const r = spawnSync(path.join(REPO_ROOT, 'node_modules', '.bin', 'wrangler'), ['deploy', '--dry-run', '-c', config, `--env=${envName}`, '--outdir', outdir], {
      cwd: REPO_ROOT,
      env,
      encoding: 'utf8',
      maxBuffer: 16 * 1024 * 1024,
      timeout: 300_000,
    });
    const output = `${r.stdout ?? ''}\n${r.stderr ?? ''}`;
    assert.equal(r.status, 0, `wrangler deploy --dry-run --env=${envName} failed:\n${output.slice(-6000)}`);
    return { output, files: fs.readdirSync(outdir) };
  } finally {
    fs.rmSync(outdir, { recursive: true, force: true });
  }
}

/**
 * The chunker's WordPiece token bound (src/core/chunk/tokens.rs) for text
 * without Hangul or compatibility characters: its non-whitespace characters.
 */
export function tokens(text) {
  return [...text].filter((c) => !/\s/u.test(c)).length;
}

/** The Worker's structured log lines named `event`, from a worker's `logs()` text. */
export function eventsIn(text, event) {
  return text
    .split('\n')
    .map((l) => l.slice(l.indexOf('{')))
    .filter((l) => l.startsWith('{'))
    .map((l) => {
      try {
        return JSON.parse(l);
      } catch {
        return null;
      }
    })
    .filter((e) => e?.event === event);
}

/** Whether the dead-letter queue's consumer has received (confirmed) the letter of each job. */
export function lettersReceived(text, jobIds) {
  const seen = new Set(eventsIn(text, 'dead_letter_received').map((e) => e.job_id));
  return jobIds.every((id) => seen.has(id));
}

/**
 * An error answer: `status`, and a JSON error object whose `code` is `code`.
 * `what` names the request in the failure message.
 */
export function assertErrorCode(res, status, code, what) {
  const ctx = `${what}: got ${res.status} ${res.text}`;
  assert.equal(res.status, status, ctx);
  assert.equal(typeof res.body?.error, 'object', ctx);
  assert.equal(res.body.error.code, code, ctx);
}

/** As `assertErrorCode`, and the error carries a `message` string. */
export function assertError(res, status, code, what) {
  assertErrorCode(res, status, code, what);
  assert.equal(typeof res.body.error.message, 'string', `${what}: got ${res.status} ${res.text}`);
}

// ---------------------------------------------------------------------------
// Backfills (`/v1/admin/reindex`) and generations (`/v1/admin/generations`).

/** Every state a backfill view may be in. */
export const BACKFILL_STATES = ['running', 'paused', 'cancelled', 'completed'];

/**
 * The invariants of a backfill view's counts, at every moment: every count a
 * non-negative integer, `enqueued == done + pending + failed`,
 * `remaining == pending + not_enqueued`, a string cursor and an integer
 * pass count; with `states`, the view's state is one of them.
 */
export function checkBackfillCounts(v, what = 'backfill view', { states } = {}) {
  const ctx = `${what}: ${JSON.stringify(v)}`;
  const p = v?.progress;
  assert.equal(typeof p, 'object', ctx);
  for (const k of ['total', 'enqueued', 'done', 'pending', 'failed', 'not_enqueued', 'remaining']) {
    assert.equal(typeof p[k], 'number', `${k} ${ctx}`);
    assert.ok(Number.isInteger(p[k]) && p[k] >= 0, `${k} must be a non-negative integer; ${ctx}`);
  }
  assert.equal(p.enqueued, p.done + p.pending + p.failed, `enqueued == done + pending + failed; ${ctx}`);
  assert.equal(p.remaining, p.pending + p.not_enqueued, `remaining == pending + not_enqueued; ${ctx}`);
  if (states !== undefined) assert.ok(states.includes(v.state), ctx);
  assert.equal(typeof v.cursor, 'string', ctx);
  assert.ok(Number.isInteger(v.passes) && v.passes >= 0, ctx);
}

/**
 * `GET /v1/admin/reindex/{id}`: asserts 200 and checks the view with `check`
 * (by default `checkBackfillCounts`); returns the view.
 */
export async function getBackfill(base, id, check = checkBackfillCounts) {
  const res = await admin(base, 'GET', `/v1/admin/reindex/${encodeURIComponent(id)}`);
  assert.equal(res.status, 200, res.text);
  check(res.body, `GET /v1/admin/reindex/${id}`);
  return res.body;
}

/** `GET /v1/admin/generations`: asserts 200; returns the response (`{ status, body, text }`). */
export async function getGenerations(base) {
  const res = await admin(base, 'GET', '/v1/admin/generations');
  assert.equal(res.status, 200, res.text);
  return res;
}

/**
 * The one-page check between two polls of a backfill with at most one cron
 * run in between, within one pass: `enqueued` never drops and the cursor (a
 * doc_id, in doc_id order) never goes back. A run that enqueued more than
 * one page (page_size documents) is collected in `violations` (a test may
 * add its own) and asserted by `assertNone()` at the end of the step, so
 * that the rest of the step still runs.
 */
export function pageChecks() {
  const violations = [];
  return {
    violations,
    assertOnePage(prev, v) {
      if (v.passes !== prev.passes) return;
      const added = v.progress.enqueued - prev.progress.enqueued;
      assert.ok(added >= 0, `enqueued dropped: ${JSON.stringify(prev.progress)} → ${JSON.stringify(v.progress)}`);
      if (v.state === 'running' && prev.state === 'running') {
        assert.ok(v.cursor >= prev.cursor, `the cursor went back within pass ${v.passes}: ${prev.cursor} → ${v.cursor}`);
      }
      if (added > v.page_size) {
        violations.push(
          `one cron run enqueues at most one page of ${v.page_size} documents; it enqueued ${added}: ` +
            `${JSON.stringify(prev)} → ${JSON.stringify(v)}`,
        );
      }
    },
    assertNone() {
      const found = violations.splice(0);
      assert.deepEqual(found, [], found.join('\n'));
    },
  };
}
