// Runs the BUILT Worker (build/entry.mjs + index.js + index_bg.wasm, from
// `sh scripts/build-worker.sh`; another build directory with `buildDir`) in workerd through Miniflare's API, with the
// production backends selected (INDEX_BACKEND=vectorize,
// EMBEDDER_BACKEND=workers-ai) and the VECTORIZE and AI bindings replaced by
// the strict fakes of fakes/vectorize-ai-fakes.mjs. In-memory D1 (migrated
// here from migrations/*.sql; or kept in a directory, for a restart over the
// same state) and in-memory Queues. One instance per
// scenario: options differ per scenario (delays, failure rates, dimensions).

// First: Miniflare's loopback server must not close idle connections (see the file).
import './loopback-keepalive.mjs';
import fs from 'node:fs';
import path from 'node:path';
import { Miniflare, Response as MfResponse } from 'miniflare';
import { REPO_ROOT, INGEST_TOKEN } from './helpers.mjs';
import { FakeVectorizeIndex, FakeWorkersAi, fakeBackendHandler } from './fakes/vectorize-ai-fakes.mjs';

const BUILD = path.join(REPO_ROOT, 'build');
const FAKES = path.join(REPO_ROOT, 'tests', 'e2e', 'fakes');
export const ADMIN_TOKEN = 'dev-admin-token';
export const QUEUE = 'ingest-jobs';
export const DLQ = 'ingest-jobs-dlq';
export const CRON = '*/5 * * * *';

/** The compatibility date of wrangler.toml (the production configuration). */
function compatibilityDate() {
  const toml = fs.readFileSync(path.join(REPO_ROOT, 'wrangler.toml'), 'utf8');
  return /^compatibility_date\s*=\s*"([^"]+)"/m.exec(toml)[1];
}

/** Splits SQL text into statements: `;` outside quotes and trigger bodies, `--` comments dropped. */
export function splitSql(sql) {
  const out = [];
  let cur = '';
  let quote = null;
  for (let i = 0; i < sql.length; i++) {
    const c = sql[i];
    if (quote) {
      cur += c;
      if (c === quote) quote = null;
    } else if (c === "'" || c === '"') {
      quote = c;
      cur += c;
    } else if (c === '-' && sql[i + 1] === '-') {
      while (i < sql.length && sql[i] !== '\n') i++;
      cur += '\n';
    } else if (c === ';' && /^CREATE\s+(TEMP\s+|TEMPORARY\s+)?TRIGGER\b/i.test(cur.trim()) && !/\bEND$/i.test(cur.trim())) {
      // Inside a trigger's BEGIN … END body: its statements end with `;` too.
      cur += c;
    } else if (c === ';') {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
    } else {
      cur += c;
    }
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}

async function migrate(mf, binding, dir) {
  const db = await mf.getD1Database(binding);
  const files = fs.readdirSync(dir).filter((f) => f.endsWith('.sql')).sort();
  for (const f of files) {
    const stmts = splitSql(fs.readFileSync(path.join(dir, f), 'utf8'));
    await db.batch(stmts.map((s) => db.prepare(s)));
  }
}

function assertBuilt(dir) {
  for (const f of ['entry.mjs', 'index.js', 'index_bg.wasm']) {
    if (!fs.existsSync(path.join(dir, f))) {
      throw new Error(`${path.relative(REPO_ROOT, dir)}/${f} is missing: run \`sh scripts/build-worker.sh\` (make build) first`);
    }
  }
}

/** The built Worker's modules: the JS entry point, worker-build's glue, the Wasm. */
export function workerModules(dir) {
  return [
    { type: 'ESModule', path: path.join(dir, 'entry.mjs') },
    { type: 'ESModule', path: path.join(dir, 'index.js') },
    { type: 'CompiledWasm', path: path.join(dir, 'index_bg.wasm') },
  ];
}

/** The wrapped-binding worker: its entrypoints return the binding objects. */
function fakeBindingsWorker(fakes) {
  return {
    name: 'fake-bindings',
    modulesRoot: FAKES,
    // A wrapped binding must be one module: the shim imports nothing.
    modules: [{ type: 'ESModule', path: path.join(FAKES, 'binding-shim.mjs') }],
    // No compatibility date: a wrapped binding runs with its user's.
    serviceBindings: { FAKE_BACKEND: fakeBackendHandler(fakes, MfResponse) },
  };
}

/** Captures workerd's stdout/stderr (the Worker's log lines) in a bounded buffer. */
function stdioCollector() {
  let buffer = '';
  const append = (chunk) => {
    buffer += chunk.toString();
    if (buffer.length > 1024 * 1024) buffer = buffer.slice(-1024 * 1024);
  };
  return {
    handleRuntimeStdio(stdout, stderr) {
      stdout.on('data', append);
      stderr.on('data', append);
    },
    logs: () => buffer,
  };
}

/**
 * Starts the built Worker with the production backends over the fakes.
 * `vars` override Worker variables; `vectorize` / `ai` are options of the
 * fakes; `consumer` overrides the queue consumer settings; `vectorizeShard1`
 * (options of a second fake index) makes a deployment of two shards
 * (`SHARDS=2`, `DB_SHARD_1`, `VECTORIZE_SHARD_1` over `fakes.vectorize1`).
 *
 * A restart over the same state: `persistDir` keeps D1 in that directory
 * (migrated only when it is empty), and `fakes` reuses the fakes (the
 * index's vectors) of an earlier instance, stopped first. Queues are never
 * persisted: a message still queued at the stop is lost.
 * Returns `{ mf, base, fakes: {vectorize, ai}, logs(), events(name), scheduled(), stop() }`.
 */
export async function startProductionWorker({
  vars = {},
  vectorize = {},
  vectorizeShard1 = null,
  ai = {},
  consumer = {},
  buildDir = BUILD,
  persistDir = null,
  fakes: reused = null,
} = {}) {
  assertBuilt(buildDir);
  const fakes = reused ?? { vectorize: new FakeVectorizeIndex(vectorize), ai: new FakeWorkersAi(ai) };
  if (vectorizeShard1 && !reused) fakes.vectorize1 = new FakeVectorizeIndex(vectorizeShard1);
  const shard1 = vectorizeShard1
    ? {
        vars: { SHARDS: '2' },
        d1: { DB_SHARD_1: 'ingest-ledger-1' },
        wrapped: { VECTORIZE_SHARD_1: { scriptName: 'fake-bindings', entrypoint: 'vectorize1' } },
      }
    : { vars: {}, d1: {}, wrapped: {} };
  const fresh = !persistDir || !fs.existsSync(persistDir) || fs.readdirSync(persistDir).length === 0;
  if (persistDir) fs.mkdirSync(persistDir, { recursive: true });
  const stdio = stdioCollector();
  const mf = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    handleRuntimeStdio: stdio.handleRuntimeStdio,
    workers: [
      {
        name: 'ingest-pipeline',
        modulesRoot: buildDir,
        modules: workerModules(buildDir),
        compatibilityDate: compatibilityDate(),
        bindings: {
          INDEX_BACKEND: 'vectorize',
          EMBEDDER_BACKEND: 'workers-ai',
          // A deployment made with bge-base-en-v1.5 that kept it
          // (docs/deploy.md, "The embedding model"): a model that takes
          // `pooling`, which these tests check is sent.
          EMBEDDING_MODEL: '@cf/baai/bge-base-en-v1.5',
          EMBEDDING_POOLING: 'mean',
          EMBEDDING_DIMENSIONS: '768',
          INGEST_TOKEN,
          ADMIN_TOKEN,
          DEAD_LETTER_QUEUE: DLQ,
          ...shard1.vars,
          ...vars,
        },
        d1Databases: { DB: 'ingest-ledger', ...shard1.d1 },
        queueProducers: { INGEST_QUEUE: { queueName: QUEUE }, DLQ: { queueName: DLQ } },
        queueConsumers: {
          [QUEUE]: { maxBatchSize: 1, maxBatchTimeout: 1, maxRetries: 100, deadLetterQueue: DLQ, ...consumer },
          [DLQ]: { maxBatchSize: 10, maxBatchTimeout: 1, maxRetries: 100 },
        },
        wrappedBindings: {
          VECTORIZE: { scriptName: 'fake-bindings', entrypoint: 'vectorize' },
          AI: { scriptName: 'fake-bindings', entrypoint: 'ai' },
          ...shard1.wrapped,
        },
      },
      fakeBindingsWorker(fakes),
    ],
    d1Persist: persistDir ?? false,
    queuesPersist: false,
  });
  let stopped = false;
  const stop = async () => {
    if (!stopped) {
      stopped = true;
      await mf.dispose();
    }
  };
  try {
    const url = await mf.ready;
    if (fresh) await migrate(mf, 'DB', path.join(REPO_ROOT, 'migrations'));
    if (fresh && vectorizeShard1) await migrate(mf, 'DB_SHARD_1', path.join(REPO_ROOT, 'migrations'));
    const base = url.origin;
    const worker = await mf.getWorker('ingest-pipeline');
    return {
      mf,
      base,
      fakes,
      logs: stdio.logs,
      /** The Worker's structured log lines named `event`. */
      events(event) {
        return stdio
          .logs()
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
      },
      /** Runs the cron handler once. */
      scheduled: () => worker.scheduled({ cron: CRON, scheduledTime: new Date() }),
      stop,
    };
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
}

/** Starts only the probe worker over the fakes (tests of the fakes in workerd). */
export async function startProbeWorker({ vectorize = {}, ai = {} } = {}) {
  const fakes = { vectorize: new FakeVectorizeIndex(vectorize), ai: new FakeWorkersAi(ai) };
  const mf = new Miniflare({
    host: '127.0.0.1',
    port: 0,
    workers: [
      {
        name: 'probe',
        modulesRoot: FAKES,
        modules: [{ type: 'ESModule', path: path.join(FAKES, 'probe-worker.mjs') }],
        compatibilityDate: compatibilityDate(),
        wrappedBindings: {
          VECTORIZE: { scriptName: 'fake-bindings', entrypoint: 'vectorize' },
          AI: { scriptName: 'fake-bindings', entrypoint: 'ai' },
        },
      },
      fakeBindingsWorker(fakes),
    ],
  });
  const url = await mf.ready;
  return {
    fakes,
    probe: async (name) => (await fetch(new URL(`/${name}`, url), { method: 'POST' })).json(),
    stop: () => mf.dispose(),
  };
}
