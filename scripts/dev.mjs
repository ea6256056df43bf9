// `make dev`: the pipeline offline on a laptop, as production runs it.
//
// 1. applies the local D1 migrations (the ledger and the offline index);
// 2. builds the Worker once (scripts/build-worker.sh);
// 3. runs `wrangler dev --env local` on a configuration without the build
//    step (scripts/wrangler-config.mjs says why), and once it answers, prints
//    where it is, the local tokens and the console;
// 4. runs the cron handler on a schedule of its own, as production's cron
//    trigger does (a finished backfill ends, cleanups drain, stalled jobs
//    come back without anyone calling it by hand);
// 5. rebuilds when a file of the crate or the console changes and restarts
//    the Worker on the same local state (a failed build keeps the running
//    one and says so).
//
// Settings (environment variables; `make dev` passes its own of the same
// names through):
//   DEV_PORT=8787            the port (on 127.0.0.1)
//   DEV_CRON_SECONDS=60      seconds between cron runs; 0: no cron
//   DEV_PERSIST_DIR=         the local state's directory (default wrangler's, .wrangler/state)
//   DEV_WATCH=1              0: no rebuild on change
//   DEV_BUILD=1              0: serve build/ as it is (the end-to-end test, after `make build`)
//   DEV_INSPECTOR_PORT=      wrangler's inspector port (default its own)
//   DEV_SHARDS=1             shards to serve (SHARDS; wrangler.toml's local
//                            profile declares the bindings of 2)

import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, localConfig } from './wrangler-config.mjs';

const PORT = intSetting('DEV_PORT', 8787, 1, 65535);
const CRON_SECONDS = intSetting('DEV_CRON_SECONDS', 60, 0, 86_400);
const PERSIST_DIR = process.env.DEV_PERSIST_DIR || null;
const WATCH = process.env.DEV_WATCH !== '0';
const BUILD = process.env.DEV_BUILD !== '0';
const INSPECTOR_PORT = process.env.DEV_INSPECTOR_PORT || null;
const SHARDS = intSetting('DEV_SHARDS', 1, 1, 2);
/** The production schedule (wrangler.toml's [triggers]), which the handler is told it runs on. */
const CRON = '*/5 * * * *';
const WRANGLER = path.join(REPO_ROOT, 'node_modules', '.bin', 'wrangler');
const BASE = `http://127.0.0.1:${PORT}`;
const ENV = {
  ...process.env,
  CI: '1', // no interactive prompts from `d1 migrations apply`
  WRANGLER_SEND_METRICS: 'false',
  // Offline: no fetch of the Request.cf placeholder (the Worker reads none of it).
  CLOUDFLARE_CF_FETCH_ENABLED: 'false',
};

function intSetting(name, fallback, min, max) {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    console.error(`make dev: ${name} must be an integer in ${min}..${max}, not ${JSON.stringify(raw)}`);
    process.exit(2);
  }
  return n;
}

/** Runs a command to its end; its output is shown only if it fails. */
function quiet(what, cmd, args) {
  const r = spawnSync(cmd, args, { cwd: REPO_ROOT, env: ENV, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  if (r.status !== 0) {
    process.stderr.write(`${r.stdout ?? ''}${r.stderr ?? ''}`);
    console.error(`make dev: ${what} failed (exit ${r.status ?? r.signal})`);
    process.exit(1);
  }
}

/** The Worker's build; its output streams (a first build takes minutes). Resolves to success. */
function build() {
  return new Promise((resolve) => {
    const child = spawn('sh', ['scripts/build-worker.sh'], { cwd: REPO_ROOT, env: ENV, stdio: 'inherit' });
    child.once('exit', (code) => resolve(code === 0));
  });
}

/** The local tokens, from .dev.vars (scripts/setup.sh writes it). */
function devVars() {
  const file = path.join(REPO_ROOT, '.dev.vars');
  if (!fs.existsSync(file)) fs.copyFileSync(path.join(REPO_ROOT, '.dev.vars.example'), file);
  const vars = {};
  for (const line of fs.readFileSync(file, 'utf8').split('\n')) {
    const m = /^\s*([A-Z_]+)\s*=\s*"?([^"]*)"?\s*$/.exec(line);
    if (m) vars[m[1]] = m[2];
  }
  return vars;
}

const config = localConfig('.dev-wrangler.toml');
const persist = PERSIST_DIR ? ['--persist-to', PERSIST_DIR] : [];
let worker = null;
let stopping = false;

function startWorker() {
  const args = ['dev', '-c', config, '--env', 'local', '--ip', '127.0.0.1', '--port', String(PORT), '--test-scheduled', '--show-interactive-dev-session=false', ...persist];
  if (SHARDS > 1) args.push('--var', `SHARDS:${SHARDS}`);
  if (INSPECTOR_PORT) args.push('--inspector-port', INSPECTOR_PORT);
  const child = spawn(WRANGLER, args, { cwd: REPO_ROOT, env: ENV, stdio: 'inherit' });
  child.once('exit', (code, signal) => {
    if (worker === child) worker = null;
    if (!stopping && !child.restarting) {
      console.error(`make dev: wrangler dev ended (${signal ?? `exit ${code}`})`);
      process.exit(code ?? 1);
    }
  });
  worker = child;
  return child;
}

async function stopWorker() {
  const child = worker;
  if (!child) return;
  child.restarting = true;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000))]);
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
}

/** Resolves once the Worker answers /healthz (false after `ms`). */
async function healthy(ms) {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${BASE}/healthz`);
      if (res.ok) return true;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  return false;
}

function banner(vars) {
  const cron = CRON_SECONDS > 0 ? `every ${CRON_SECONDS} s (DEV_CRON_SECONDS=0 turns it off; production: "${CRON}")` : 'off (DEV_CRON_SECONDS=0)';
  console.log(
    [
      '',
      `ingest-pipeline is serving offline on http://localhost:${PORT}`,
      `  ingest token  ${vars.INGEST_TOKEN ?? '(INGEST_TOKEN is not set in .dev.vars)'}   (-H "Authorization: Bearer …"; the README's walk-through)`,
      `  admin token   ${vars.ADMIN_TOKEN ?? '(ADMIN_TOKEN is not set in .dev.vars)'}`,
      `  console       http://localhost:${PORT}/console (sign in with the admin token)`,
      `  cron          ${cron}`,
      `  state         ${PERSIST_DIR ?? '.wrangler/state'}${WATCH ? '; src/ and console/ are watched: a change rebuilds and restarts' : ''}`,
      '',
    ].join('\n'),
  );
}

/** One cron run through wrangler's scheduled route; a failure is said once per streak. */
let cronFailing = false;
async function runCron() {
  if (!worker || worker.restarting) return;
  try {
    const res = await fetch(`${BASE}/cdn-cgi/handler/scheduled?cron=${encodeURIComponent(CRON)}`);
    await res.arrayBuffer();
    if (!res.ok) throw new Error(`status ${res.status}`);
    if (cronFailing) console.log('make dev: cron runs again');
    cronFailing = false;
  } catch (e) {
    if (!cronFailing) console.error(`make dev: a cron run failed (${e.message}); trying again in ${CRON_SECONDS} s`);
    cronFailing = true;
  }
}

function watch(onChange) {
  let timer = null;
  const fire = () => {
    clearTimeout(timer);
    timer = setTimeout(onChange, 500);
  };
  for (const dir of ['src', 'console']) fs.watch(path.join(REPO_ROOT, dir), { recursive: true }, fire);
  for (const file of ['Cargo.toml', 'Cargo.lock']) fs.watch(path.join(REPO_ROOT, file), fire);
}

async function main() {
  quiet('applying the ledger migrations', WRANGLER, ['d1', 'migrations', 'apply', 'DB', '--local', '--env', 'local', '-c', config, ...persist]);
  quiet('applying the local index migrations', WRANGLER, ['d1', 'migrations', 'apply', 'VECTORS_DB', '--local', '--env', 'local', '-c', config, ...persist]);
  for (let n = 1; n < SHARDS; n++) {
    quiet(`applying shard ${n}'s migrations`, WRANGLER, ['d1', 'migrations', 'apply', `DB_SHARD_${n}`, '--local', '--env', 'local', '-c', config, ...persist]);
    quiet(`applying shard ${n}'s index migrations`, WRANGLER, ['d1', 'migrations', 'apply', `VECTORS_DB_SHARD_${n}`, '--local', '--env', 'local', '-c', config, ...persist]);
  }
  if (BUILD) {
    console.log('make dev: building the Worker (scripts/build-worker.sh)');
    if (!(await build())) process.exit(1);
  } else if (!fs.existsSync(path.join(REPO_ROOT, 'build', 'entry.mjs'))) {
    console.error('make dev: DEV_BUILD=0 but build/entry.mjs is missing (run `make build`)');
    process.exit(1);
  }
  const vars = devVars();
  startWorker();
  if (!(await healthy(120_000))) {
    console.error(`make dev: the Worker did not answer ${BASE}/healthz within 120 s`);
    await stopWorker();
    process.exit(1);
  }
  banner(vars);
  if (CRON_SECONDS > 0) setInterval(runCron, CRON_SECONDS * 1000);
  if (WATCH && BUILD) {
    let building = false;
    let again = false;
    watch(async function rebuild() {
      if (building) {
        again = true;
        return;
      }
      building = true;
      console.log('make dev: a file changed; rebuilding');
      if (await build()) {
        await stopWorker();
        startWorker();
        if (await healthy(120_000)) console.log(`make dev: restarted on http://localhost:${PORT}`);
      } else {
        console.error('make dev: the build failed; still serving the previous build');
      }
      building = false;
      if (again) {
        again = false;
        void rebuild();
      }
    });
  }
}

for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, async () => {
    stopping = true;
    await stopWorker();
    process.exit(0);
  });
}

await main();
