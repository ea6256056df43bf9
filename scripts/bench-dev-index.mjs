// The offline vector index measured through `make dev` (issue 36, item 6;
// docs/performance.md, "The offline vector index at 100,000 vectors").
//
//   node scripts/bench-dev-index.mjs corpus <source dir> <corpus dir> <files>
//     copies the first <files> non-empty UTF-8 files under <source dir>
//     (depth first, names in byte order) to <corpus dir>, which
//     `cli/ingest-sync.mjs --glob '**/*'` then sends to the pipeline.
//   node scripts/bench-dev-index.mjs search <url> <corpus dir> <queries> <answers.jsonl> [mode]
//     times <queries> searches (`POST /v1/search`, top_k 10, mode `vector`
//     unless given), each of 2 to 6 consecutive words of a file of the
//     corpus (deterministic: the same queries every run), one at a time,
//     and prints p50 and p95 of each request's time, as the client sees
//     it. Writes each query, its time and the vector scores it was
//     answered with to <answers.jsonl>: `make bench-index`'s recall check
//     (BENCH_INDEX_CHECK_DB, BENCH_INDEX_CHECK_ANSWERS) compares them with an
//     exhaustive scan of the local index's own database.
//   node scripts/bench-dev-index.mjs d1-columns [rows]
//     how long local D1 (workerd through Miniflare, a throwaway Worker in
//     JS) takes to hand <rows> (5,000) rows of one 384-dimension vector each
//     to the Worker, the `.all()` call alone, 5 times each, by how the
//     vector is stored: f32 BLOB, base64 of the f32s, int8 BLOB, base64 of
//     the int8s, JSON text (src/core/vector_codes.rs says what was chosen).
//
// The token is INGEST_TOKEN's (from the environment, else `.dev.vars`).

import fs from 'node:fs';
import path from 'node:path';

function usage() {
  console.error('usage: bench-dev-index.mjs corpus <source> <dest> <files> | search <url> <corpus> <queries> <answers.jsonl> [mode] | d1-columns [rows]');
  process.exit(2);
}

/** The files under `dir`, depth first, each directory's names in byte order. */
function walk(dir, out = []) {
  const names = fs.readdirSync(dir).sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)));
  for (const name of names) {
    const p = path.join(dir, name);
    const st = fs.lstatSync(p);
    if (st.isDirectory()) walk(p, out);
    else if (st.isFile()) out.push(p);
  }
  return out;
}

function corpus(source, dest, count) {
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  let copied = 0;
  let bytes = 0;
  for (const file of walk(source)) {
    if (copied >= count) break;
    const raw = fs.readFileSync(file);
    let text;
    try {
      text = utf8.decode(raw);
    } catch {
      continue;
    }
    if (!text.trim()) continue;
    const to = path.join(dest, path.relative(source, file));
    fs.mkdirSync(path.dirname(to), { recursive: true });
    fs.writeFileSync(to, raw);
    copied += 1;
    bytes += raw.length;
  }
  console.log(`${copied} files, ${(bytes / 1e6).toFixed(1)} MB, in ${dest}`);
}

/** splitmix64, as the Rust bench's `Rng`: the same queries every run. */
function rng(seed) {
  let s = (BigInt(seed) ^ 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
  return (n) => {
    s = (s + 0x9e3779b97f4a7c15n) & 0xffffffffffffffffn;
    let z = s;
    z = ((z ^ (z >> 30n)) * 0xbf58476d1ce4e5b9n) & 0xffffffffffffffffn;
    z = ((z ^ (z >> 27n)) * 0x94d049bb133111ebn) & 0xffffffffffffffffn;
    z ^= z >> 31n;
    return Number(z % BigInt(Math.max(1, n)));
  };
}

function token() {
  if (process.env.INGEST_TOKEN) return process.env.INGEST_TOKEN;
  const vars = fs.readFileSync(path.join(path.dirname(new URL(import.meta.url).pathname), '..', '.dev.vars'), 'utf8');
  return /^INGEST_TOKEN\s*=\s*"?([^"\n]*)"?/m.exec(vars)[1];
}

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length, Math.max(1, Math.ceil(sorted.length * p))) - 1];
}

async function search(base, dir, count, out, mode) {
  const files = walk(dir);
  const next = rng(36);
  const queries = [];
  while (queries.length < count) {
    const words = fs.readFileSync(files[next(files.length)], 'utf8').split(/\s+/).filter(Boolean);
    const len = 2 + next(5);
    if (words.length < len) continue;
    const at = next(words.length - len + 1);
    queries.push(words.slice(at, at + len).join(' '));
  }
  const auth = { authorization: `Bearer ${token()}`, 'content-type': 'application/json' };
  const lines = [];
  const times = [];
  for (const query of queries) {
    const started = performance.now();
    const res = await fetch(`${base}/v1/search`, { method: 'POST', headers: auth, body: JSON.stringify({ query, top_k: 10, mode }) });
    const body = await res.json();
    const ms = performance.now() - started;
    if (res.status !== 200) throw new Error(`${res.status} ${JSON.stringify(body)}`);
    times.push(ms);
    lines.push(JSON.stringify({ query, ms, scores: body.results.map((r) => r.scores.vector) }));
  }
  fs.writeFileSync(out, lines.join('\n') + '\n');
  times.sort((a, b) => a - b);
  console.log(`${count} ${mode} searches: p50 ${percentile(times, 0.5).toFixed(1)} ms, p95 ${percentile(times, 0.95).toFixed(1)} ms; answers in ${out}`);
}

/** The Worker of `d1-columns`: `/setup?n=` writes n rows, `/q?col=&n=` times reading n. */
const D1_COLUMNS_WORKER = `
export default {
  async fetch(req, env) {
    const u = new URL(req.url);
    const n = Number(u.searchParams.get('n'));
    if (u.pathname === '/setup') {
      await env.DB.exec('CREATE TABLE t (id TEXT PRIMARY KEY, fblob BLOB, fb64 TEXT, qblob BLOB, qb64 TEXT, fjson TEXT)');
      const b64 = (a) => btoa(String.fromCharCode(...a));
      let batch = [];
      for (let i = 0; i < n; i++) {
        const f = new Float32Array(384).map((_, j) => Math.sin(i * 31 + j));
        const q = new Int8Array(384).map((_, j) => Math.round(f[j] * 127));
        const fb = new Uint8Array(f.buffer);
        const qb = new Uint8Array(q.buffer);
        batch.push(env.DB.prepare('INSERT INTO t VALUES (?1, ?2, ?3, ?4, ?5, ?6)')
          .bind('id' + i, fb.buffer, b64(fb), qb.buffer, b64(qb), JSON.stringify(Array.from(f))));
        if (batch.length === 200) { await env.DB.batch(batch); batch = []; }
      }
      if (batch.length) await env.DB.batch(batch);
      return new Response('ok');
    }
    const col = u.searchParams.get('col');
    const started = Date.now();
    const r = await env.DB.prepare('SELECT id, ' + col + ' AS v FROM t LIMIT ?1').bind(n).all();
    return Response.json({ ms: Date.now() - started, rows: r.results.length, type: Array.isArray(r.results[0].v) ? 'array of numbers' : typeof r.results[0].v });
  },
};`;

async function d1Columns(rows) {
  const { Miniflare } = await import('miniflare');
  const mf = new Miniflare({ modules: true, script: D1_COLUMNS_WORKER, d1Databases: ['DB'], compatibilityDate: '2025-01-01' });
  try {
    await (await mf.dispatchFetch(`http://x/setup?n=${rows}`)).text();
    console.log(`| column | the Worker gets | .all() of ${rows} rows, ms (5 runs) |\n|---|---|---|`);
    for (const [col, what] of [['fblob', 'f32 BLOB'], ['fb64', 'base64 of the f32s'], ['qblob', 'int8 BLOB'], ['qb64', 'base64 of the int8s'], ['fjson', 'JSON text']]) {
      const runs = [];
      let type;
      for (let k = 0; k < 5; k++) {
        const r = await (await mf.dispatchFetch(`http://x/q?col=${col}&n=${rows}`)).json();
        runs.push(r.ms);
        type = r.type;
      }
      console.log(`| ${what} | ${type} | ${runs.join(', ')} |`);
    }
  } finally {
    await mf.dispose();
  }
}

const [cmd, ...args] = process.argv.slice(2);
if (cmd === 'corpus' && args.length === 3) corpus(args[0], args[1], Number(args[2]));
else if (cmd === 'd1-columns') await d1Columns(Number(args[0] ?? 5000));
else if (cmd === 'search' && args.length >= 4) await search(args[0].replace(/\/$/, ''), args[1], Number(args[2]), args[3], args[4] ?? 'vector');
else usage();
