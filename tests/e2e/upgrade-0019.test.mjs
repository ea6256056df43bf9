// Upgrade in place (issue 35, item 8): a ledger written before migration
// 0019 (chunk rows per version) migrates with `wrangler d1 migrations
// apply`, keeps every vector (nothing is embedded again), and serves the
// same search answers; the next edit then embeds only what changed.
//
// The previous release's Worker cannot run here, so its ledger is made from
// today's: the BUILT Worker over the strict fakes (miniflare-env.mjs)
// ingests, then its D1 is turned back into the 0011..0018 shape (the chunks
// table, indexes and triggers verbatim from 0011, the keyword index from
// 0010, rebuilt because a later migration may have changed it) with 0019
// and later unrecorded in d1_migrations, and what 0021 added (the keyword
// index per tenant, the tenants' keyword columns), 0022 (text parts shared
// across versions: each version's text made its own parts again) and 0023
// (cleanup intents without rowid), 0024 (each generation's row count),
// 0025 (the dead letters' page index), 0026 (the document counts), 0027
// (the jobs due for a retry), 0028 (the dead letters' group counts), 0029
// (repair runs pruned by ID), 0030 (the jobs' state index with their
// tenant), 0031 (the switch by a backfill's pass), 0032 (the shard
// directory) and 0033 (tenants' moves) undone. The same fakes
// (the vector index) serve both workers. After 0021 the old rows wait for
// cron to enter the per-tenant keyword index: keyword answers come back
// with the first cron run.
//
// D1 is kept where `wrangler --persist-to DIR` keeps it (DIR/v3/d1), and
// wrangler runs on a copy of the test configuration whose local ledger has
// the id the Miniflare worker gives its D1 ('ingest-ledger'), so wrangler
// and the worker open the same SQLite file.
//
// Run from the repository root after `make build`:
//   node --test tests/e2e/upgrade-0019.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, api, docPath, runWrangler, search, waitFor, waitForState } from './helpers.mjs';
import { splitSql, startProductionWorker } from './miniflare-env.mjs';
import { localConfig } from '../../scripts/wrangler-config.mjs';

const MIGRATIONS = path.join(REPO_ROOT, 'migrations');
const MIGRATION = '0019_shared_chunk_rows.sql';
// What `migrations apply` must apply to the old ledger: 0019 and any later one.
const PENDING = fs.readdirSync(MIGRATIONS).filter((f) => f.endsWith('.sql') && f >= MIGRATION).sort();
const LONG = 'upgrade/long';
const JA = 'upgrade/ja';
const SHORT = 'upgrade/short';
const LIVE = { [LONG]: 1, [JA]: 1, [SHORT]: 2 }; // each document's live version before the upgrade
const PARAGRAPHS = 30;
const EDITED_AT = 17;
// One chunk per paragraph (vector-identity.test.mjs says why), so that the
// edit below changes exactly one chunk.
const VARS = { CHUNK_OVERLAP_TOKENS: '0' };
const VECTORIZE = { metadataIndexes: ['doc_id', 'generation'] };

/** Paragraph `i`: "Paragraph i of the harbour log" and pseudo-random words, 450 ASCII bytes. */
function paragraph(i) {
  let x = (Math.imul(i + 11, 2654435761) >>> 0) || 1;
  const next = () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0);
  let text = `Paragraph ${i} of the harbour log`;
  while (text.length < 450) {
    let w = '';
    for (let n = 5 + (next() % 4); n > 0; n--) w += String.fromCharCode(97 + ((next() >>> 16) % 26));
    text += ` ${w}`;
  }
  return `${text.slice(0, 449)}.`;
}

const EN = Array.from({ length: PARAGRAPHS }, (_, i) => paragraph(i));
const EDITED = 'Paragraph 17 was rewritten after the upgrade: the harbour master moved the quillwort beacon to the eastern mole, '
  .padEnd(449, 'and logged it twice ') + '.';
const JA_TEXT = fs.readFileSync(path.join(REPO_ROOT, 'tests', 'data', 'seeds', '000_23c333604504c1bd.txt'), 'utf8');
const SHORT_V1 = 'A first note: the lighthouse lamp was cleaned on Tuesday.';
const SHORT_TEXT = 'A short note: the harbour ferry leaves at dawn and returns with the tide.';

/** A word of `text` found in no other paragraph of EN (nor in the other documents). */
function uniqueWord(text) {
  const words = text.replace(/\.$/, '').split(' ').slice(6);
  const elsewhere = [EDITED, JA_TEXT, SHORT_V1, SHORT_TEXT].join(' ');
  const w = words.find((c) => c.length >= 6 && EN.filter((p) => p.split(/[ .]/).includes(c)).length <= 1 && !elsewhere.includes(c));
  assert.ok(w, `no unique word in ${text}`);
  return w;
}
const OLD_WORD = uniqueWord(EN[EDITED_AT]);

// The queries whose answers must not change across the upgrade.
const QUERIES = [
  { query: EN[12], mode: 'vector', top_k: 5 },
  { query: 'harbour log ferry', mode: 'vector', top_k: 8 },
  { query: 'harbour', mode: 'keyword', top_k: 10 },
  { query: uniqueWord(EN[3]), mode: 'keyword', top_k: 5 },
  { query: OLD_WORD, mode: 'keyword', top_k: 5 },
  { query: '障害解析の一次証拠', mode: 'keyword', top_k: 5 },
  { query: 'DLQ は障害解析の一次証拠', mode: 'vector', top_k: 5 },
  { query: 'harbour 障害解析', mode: 'hybrid', top_k: 6 },
];
/** The texts a query embeds (vector and hybrid modes embed the query, keyword mode nothing). */
const QUERY_TEXTS = QUERIES.filter((q) => q.mode !== 'keyword').map((q) => q.query);

let w;
let dir;
let config;
let fakes;
const embedded = []; // every text the fake AI embedded, in order
let broken = false; // each step builds on the one before: after a failure, the rest is skipped
const step = (name, fn) =>
  it(
    name,
    async (t) => {
      if (broken) return t.skip('an earlier step failed');
      try {
        await fn();
      } catch (err) {
        broken = true;
        if (w) process.stderr.write(`\n--- worker log (tail) ---\n${w.logs().slice(-4000)}\n--- end ---\n`);
        throw err;
      }
    },
    { timeout: 300_000 },
  );

/** The test configuration (`--env local`) with its local ledger's id the Miniflare worker's, paths absolute. */
function upgradeConfig() {
  const text = fs.readFileSync(localConfig('.e2e-wrangler.toml'), 'utf8');
  const out = text
    .replace(/^database_id = "local-ledger"$/m, 'database_id = "ingest-ledger"')
    .replace(/^migrations_dir = "migrations"$/gm, `migrations_dir = "${MIGRATIONS}"`)
    .replace(/^migrations_dir = "(migrations-[^"]*)"$/gm, (_, d) => `migrations_dir = "${path.join(REPO_ROOT, d)}"`)
    .replace(/^main = "build\/entry\.mjs"$/m, `main = "${path.join(REPO_ROOT, 'build', 'entry.mjs')}"`);
  assert.match(out, /^database_id = "ingest-ledger"$/m, 'the local ledger of the test configuration is no longer "local-ledger"');
  assert.ok(!/^migrations_dir = "migrations/m.test(out), 'a relative migrations_dir is left');
  const file = path.join(dir, 'wrangler.toml');
  fs.writeFileSync(file, out);
  return file;
}

/** `make migrate-local`'s command for the ledger, on this state directory. */
function migrateLocal() {
  const { stdout, stderr } = runWrangler(['d1', 'migrations', 'apply', 'DB', '--local', '--env', 'local', '--persist-to', dir, '-c', config]);
  return `${stdout}\n${stderr}`;
}

/** The rowids the keyword index holds (its docsize table: with or without external content). */
function ftsRowids() {
  return ledger('SELECT id FROM chunks_fts_docsize ORDER BY id').map((r) => r.id);
}

/** Runs SQL on the stopped worker's ledger with `wrangler d1 execute`; the last statement's rows. */
function ledger(sql) {
  const { stdout } = runWrangler(['d1', 'execute', 'DB', '--local', '--env', 'local', '--persist-to', dir, '-c', config, '--json', '--command', sql]);
  return JSON.parse(stdout).at(-1).results;
}

async function start() {
  w = await startProductionWorker({ vars: VARS, vectorize: VECTORIZE, persistDir: path.join(dir, 'v3', 'd1'), fakes });
  fakes = w.fakes;
}

async function stop() {
  await w?.stop();
  w = undefined;
}

/** The rows valid at each document's live version (0019's shape), by chunk_id. */
async function liveRows() {
  const db = await w.mf.getD1Database('DB');
  const { results } = await db
    .prepare(
      `SELECT c.chunk_id, c.doc_id, c.version, c.to_version, c.ord, c.vector_id, c.text FROM chunks c
         JOIN documents d ON d.doc_id = c.doc_id AND c.version <= d.live_version
          AND (c.to_version IS NULL OR c.to_version > d.live_version)
        ORDER BY c.chunk_id`,
    )
    .all();
  return results;
}

/** The index's vectors: id → {values, metadata, namespace}. */
function vectors() {
  return new Map([...fakes.vectorize.eventualState()].map(([id, v]) => [id, structuredClone(v)]));
}

function counters() {
  const s = fakes.vectorize.stats();
  return { upsertCalls: s.calls.upsert, deleteCalls: s.calls.deleteByIds, upserted: s.accepted.upserted, deleted: s.accepted.deleted, texts: fakes.ai.stats().texts };
}
const diff = (a, b) => Object.fromEntries(Object.keys(a).map((k) => [k, b[k] - a[k]]));

async function answers() {
  const out = [];
  for (const q of QUERIES) {
    const res = await search(w.base, q);
    assert.equal(res.status, 200, `${JSON.stringify(q)}: ${res.text}`);
    out.push(res.body.results);
  }
  return out;
}

async function put(docId, text) {
  const res = await api(w.base, 'PUT', docPath(docId), { text });
  assert.equal(res.status, 202, res.text);
  await waitForState(w.base, docId, 'indexed', { liveVersion: res.body.version, timeoutMs: 120_000 });
  const job = await api(w.base, 'GET', `/v1/jobs/${encodeURIComponent(res.body.job_id)}`);
  assert.equal(job.status, 200, job.text);
  assert.equal(job.body.state, 'succeeded', job.text);
  return { version: res.body.version, job: job.body };
}

/** Waits until the index holds exactly the vectors the live rows refer to, running cron while not. */
async function indexMatchesLedger() {
  await waitFor(
    async () => {
      const wanted = new Set((await liveRows()).map((r) => r.vector_id));
      const held = new Set(fakes.vectorize.eventualState().keys());
      if (held.size === wanted.size && [...wanted].every((id) => held.has(id))) return true;
      await w.scheduled();
      return null;
    },
    { timeoutMs: 60_000, intervalMs: 500, what: 'the index to hold exactly the live rows’ vectors' },
  );
}

before(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingest-upgrade-'));
  config = upgradeConfig();
});
after(async () => {
  await stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('upgrade in place: a ledger written before 0019', () => {
  let rows1; // live rows after ingestion, in the new shape
  let vectors1;
  let answers1;
  let counters1;

  step('1. a ledger made by wrangler migrations; three documents ingested and searched', async () => {
    // Recorded in d1_migrations as a deployment's ledger is.
    const applied = migrateLocal();
    assert.match(applied, new RegExp(MIGRATION.replace('.', '\\.')));
    await start();
    // Every text the AI embeds, to tell chunks from queries later.
    const run = fakes.ai.run.bind(fakes.ai);
    fakes.ai.run = (model, inputs, options) => {
      embedded.push(...(typeof inputs?.text === 'string' ? [inputs.text] : inputs?.text ?? []));
      return run(model, inputs, options);
    };

    // SHORT's first version is replaced: its row, left out of the old
    // ledger (as cron would have pruned it), leaves a gap in the chunk_ids,
    // so that a migration that renumbered rows would show.
    for (const [id, text, v] of [[SHORT, SHORT_V1, 1], [SHORT, SHORT_TEXT, 2], [LONG, EN.join('\n\n'), 1], [JA, JA_TEXT, 1]]) {
      const { version } = await put(id, text);
      assert.equal(version, v);
    }
    await indexMatchesLedger();
    rows1 = await liveRows();
    assert.notDeepEqual(rows1.map((r) => r.chunk_id), rows1.map((_, i) => i + 1), 'no gap in the chunk_ids');
    assert.deepEqual(rows1.map((r) => [r.version, r.to_version]), rows1.map((r) => [LIVE[r.doc_id], null]));
    const long = rows1.filter((r) => r.doc_id === LONG);
    assert.deepEqual(long.map((r) => r.text.trim()), EN, 'one chunk per paragraph');
    assert.ok(rows1.filter((r) => r.doc_id === JA).length >= 2, 'the Japanese document has several chunks');
    assert.equal(new Set(rows1.map((r) => r.vector_id)).size, rows1.length);
    vectors1 = vectors();
    assert.equal(vectors1.size, rows1.length);

    answers1 = await answers();
    answers1.forEach((hits, i) => assert.ok(hits.length > 0, `no hit for ${JSON.stringify(QUERIES[i])}`));
    assert.equal(answers1[0][0].text.trim(), EN[12]);
    assert.ok(answers1[4].some((h) => h.doc_id === LONG && h.text.trim() === EN[EDITED_AT]), JSON.stringify(answers1[4]));
    assert.ok(answers1[5].some((h) => h.doc_id === JA), JSON.stringify(answers1[5]));
    assert.ok(answers1[6].some((h) => h.doc_id === JA), JSON.stringify(answers1[6]));
    counters1 = counters();
    assert.equal(counters1.texts, embedded.length);
  });

  step('2. stopped; its ledger turned back into the 0011..0018 shape, 0019 and later not recorded', async () => {
    await stop();
    const pick = (file, re, n) => {
      const stmts = splitSql(fs.readFileSync(path.join(MIGRATIONS, file), 'utf8')).filter((s) => re.test(s));
      assert.equal(stmts.length, n, `${file} no longer has the statements ${re} this test takes`);
      return stmts;
    };
    const table = pick('0011_content_vector_ids.sql', /^CREATE TABLE chunks_v\b/, 1);
    const indexes = pick('0011_content_vector_ids.sql', /^CREATE INDEX chunks_by_/, 3);
    const triggers = pick('0011_content_vector_ids.sql', /^CREATE TRIGGER chunks_fts_/, 3);
    // The keyword index as 0010 made it (a later migration may have changed it), filled from the live rows.
    const fts = [...pick('0010_keyword_index.sql', /^CREATE VIRTUAL TABLE chunks_fts\b/, 1), ...pick('0010_keyword_index.sql', /^INSERT INTO chunks_fts\b/, 1)];
    // The rows valid at each live version become that version's own rows.
    const intents = [
      ...pick('0001_init.sql', /^CREATE TABLE cleanup_intents\b/, 1),
      ...pick('0009_tenants.sql', /^ALTER TABLE cleanup_intents ADD COLUMN tenant_id\b/, 1),
      ...pick('0011_content_vector_ids.sql', /^ALTER TABLE cleanup_intents ADD COLUMN deleting_until\b/, 1),
    ];
    const intentIndexes = pick('0001_init.sql', /^CREATE INDEX cleanup_intents_/, 2);
    const sql = [
      // What 0033 added: the moves between shards, the tenants' move state.
      ...['tenant_moves', 'move_refusals'].map((t) => `DROP TABLE ${t}`),
      'ALTER TABLE tenants DROP COLUMN move_state',
      // What 0032 added: the shard directory.
      ...['tenant_placements', 'dedicated_shards', 'placement_refusals', 'token_directory'].map((t) => `DROP TABLE ${t}`),
      // What 0031 added: the backfills' pass and progress counts, the
      // trigger that counts failed jobs, the generations' skipped mark.
      'DROP TRIGGER jobs_backfill_failed_counted',
      ...['pass_missing', 'enqueued', 'failed', 'total', 'pass_scope'].map((c) => `ALTER TABLE backfills DROP COLUMN ${c}`),
      'ALTER TABLE generations DROP COLUMN skipped_at',
      // What 0030 changed: 0001's index of the jobs by state.
      'DROP INDEX jobs_by_state',
      'CREATE INDEX jobs_by_state ON jobs (state, updated_at)',
      // What 0029 dropped: 0018's index of the repair runs by start.
      'CREATE INDEX repair_runs_by_start ON repair_runs (started_at)',
      // What 0028 added: the dead letters counted by group, and its triggers.
      ...['dead_letters_grouped_new', 'dead_letters_grouped_seen', 'dead_letters_grouped_moved', 'dead_letters_grouped_gone', 'documents_letters_moved'].map((t) => `DROP TRIGGER ${t}`),
      'DROP TABLE dead_letter_groups',
      'ALTER TABLE dead_letters DROP COLUMN chunk_count_bucket',
      // What 0027 added: the jobs waiting for a retry, by when they fall due.
      'DROP INDEX jobs_retry_due',
      // What 0026 added: each tenant's document counts and their triggers.
      ...['documents_counted_new', 'documents_counted_moved', 'jobs_counted_new', 'jobs_counted_moved', 'jobs_counted_pruned'].map((t) => `DROP TRIGGER ${t}`),
      'ALTER TABLE tenants DROP COLUMN document_counts',
      // What 0025 added: the dead letters' index in the page's order.
      'DROP INDEX dead_letters_by_last_seen',
      // What 0024 added: each generation's row count.
      'DROP TRIGGER chunks_generation_counted',
      'ALTER TABLE generations DROP COLUMN chunk_rows',
      // What 0023 changed: the intents as 0001, 0009 and 0011 made them.
      'ALTER TABLE cleanup_intents RENAME TO cleanup_intents_0023',
      ...intents,
      `INSERT INTO cleanup_intents (vector_id, doc_id, version, reason, attempts, not_before, created_at, deleting_until)
       SELECT vector_id, doc_id, version, reason, attempts, not_before, created_at, deleting_until FROM cleanup_intents_0023`,
      'DROP TABLE cleanup_intents_0023',
      ...intentIndexes,
      // What 0022 added: a version's text is its own parts 0, 1, … again
      // (a part it shared becomes its own, at its place in the manifest).
      `INSERT INTO version_parts (doc_id, version, part, text)
       SELECT v.doc_id, v.version, m.key, p.text FROM versions v, json_each(v.parts) m
         JOIN version_parts p ON p.doc_id = v.doc_id AND p.version = json_extract(m.value, '$[0]') AND p.part = json_extract(m.value, '$[1]')
        WHERE v.part_count > 0 AND json_extract(m.value, '$[0]') <> v.version`,
      'ALTER TABLE versions DROP COLUMN parts',
      'ALTER TABLE version_parts DROP COLUMN to_version',
      // What 0021 added.
      'DROP TRIGGER chunks_keyword_deleted',
      'DROP TRIGGER tenants_keyword_key',
      'DROP TABLE keyword_instances',
      'DROP TABLE keyword_terms',
      'DROP TABLE keyword_index',
      'DROP INDEX tenants_by_keyword_key',
      'ALTER TABLE tenants DROP COLUMN keyword_key',
      'ALTER TABLE tenants DROP COLUMN keyword_rows',
      'ALTER TABLE tenants DROP COLUMN keyword_tokens',
      // (0021 dropped 0020's triggers on the shared index.)
      'DROP TABLE chunks_fts',
      ...table,
      `INSERT INTO chunks_v (chunk_id, doc_id, version, generation, chunk_index, vector_id, start_byte, end_byte, content_hash, text, terms)
       SELECT c.chunk_id, c.doc_id, d.live_version, c.generation,
              ROW_NUMBER() OVER (PARTITION BY c.doc_id, c.generation ORDER BY c.ord) - 1,
              c.vector_id, 0, length(CAST(c.text AS BLOB)), c.content_hash, c.text, c.terms
         FROM chunks c JOIN documents d ON d.doc_id = c.doc_id
        WHERE c.version <= d.live_version AND (c.to_version IS NULL OR c.to_version > d.live_version)`,
      'DROP TABLE chunks',
      'ALTER TABLE chunks_v RENAME TO chunks',
      ...indexes,
      ...fts,
      ...triggers,
      'ALTER TABLE documents DROP COLUMN rows_stamp',
      `DELETE FROM d1_migrations WHERE name >= '${MIGRATION}'`,
    ].map((s) => `${s};\n`).join('');
    const file = path.join(dir, 'pre-0019.sql');
    fs.writeFileSync(file, sql);
    runWrangler(['d1', 'execute', 'DB', '--local', '--env', 'local', '--persist-to', dir, '-c', config, '--file', file]);

    const cols = ledger("SELECT name FROM pragma_table_info('chunks')").map((r) => r.name);
    assert.deepEqual(cols.sort(), ['chunk_id', 'chunk_index', 'content_hash', 'doc_id', 'end_byte', 'generation', 'start_byte', 'terms', 'text', 'vector_id', 'version'].sort());
    assert.ok(!ledger("SELECT name FROM pragma_table_info('documents')").some((r) => r.name === 'rows_stamp'));
    const schema = ledger("SELECT sql FROM sqlite_schema WHERE type = 'trigger' AND name LIKE 'chunks_fts_%' ORDER BY name").map((r) => r.sql);
    assert.deepEqual(schema, triggers.slice().sort(), 'the triggers are 0011’s');
    const migrations = ledger('SELECT name FROM d1_migrations ORDER BY id').map((r) => r.name);
    assert.equal(migrations.length, 18, JSON.stringify(migrations));
    assert.equal(migrations.at(-1), '0018_retention.sql', JSON.stringify(migrations));

    const old = ledger('SELECT chunk_id, doc_id, version, chunk_index, vector_id FROM chunks ORDER BY chunk_id');
    assert.deepEqual(old.map((r) => [r.chunk_id, r.doc_id, r.version, r.vector_id]), rows1.map((r) => [r.chunk_id, r.doc_id, r.version, r.vector_id]));
    assert.deepEqual(old.filter((r) => r.doc_id === LONG).map((r) => r.chunk_index), EN.map((_, i) => i));
    assert.deepEqual(ftsRowids(), old.map((r) => r.chunk_id), 'the keyword index’s rowids are the rows’ chunk_ids');
    assert.ok(!ledger("SELECT name FROM pragma_table_info('versions')").some((r) => r.name === 'parts'));
    assert.deepEqual(ledger("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'cleanup_intents' AND sql LIKE '%WITHOUT ROWID%'"), [{ n: 0 }]);
  });

  step('3. `make migrate-local`’s command applies 0019 (and any later migration) to it', async () => {
    const out = migrateLocal();
    const named = [...new Set(out.match(/\d{4}_[a-z0-9_]+\.sql/g) ?? [])];
    assert.deepEqual(named, PENDING, out);
    assert.deepEqual(ledger('SELECT name FROM d1_migrations ORDER BY id').map((r) => r.name).slice(18), PENDING);
    // Every row kept, with its chunk_id and vector; open (the latest version's), in order.
    const rows = ledger('SELECT chunk_id, doc_id, version, to_version, ord, vector_id FROM chunks ORDER BY chunk_id');
    assert.deepEqual(rows.map((r) => [r.chunk_id, r.doc_id, r.version, r.to_version, r.vector_id]), rows1.map((r) => [r.chunk_id, r.doc_id, r.version, null, r.vector_id]));
    assert.deepEqual(rows.filter((r) => r.doc_id === LONG).map((r) => r.ord), EN.map((_, i) => i));
    // 0021 empties the shared keyword index; every row waits for cron to
    // enter the tenant's own (keyword_len NULL).
    assert.deepEqual(ftsRowids(), []);
    assert.deepEqual(ledger('SELECT count(*) AS n FROM keyword_index_docsize'), [{ n: 0 }]);
    assert.deepEqual(ledger('SELECT count(*) AS n FROM chunks WHERE keyword_len IS NULL'), [{ n: rows.length }]);
    assert.ok(ledger("SELECT name FROM pragma_table_info('documents')").some((r) => r.name === 'rows_stamp'));
    // 0024 counted each generation's rows.
    assert.deepEqual(
      ledger('SELECT generation, chunk_rows FROM generations ORDER BY generation'),
      ledger('SELECT g.generation, (SELECT count(*) FROM chunks c WHERE c.generation = g.generation) AS chunk_rows FROM generations g ORDER BY g.generation'),
    );
    assert.ok(ledger('SELECT chunk_rows FROM generations WHERE generation = 1')[0].chunk_rows > 0);
    // 0026 counted each tenant's documents by state: here every document
    // is indexed (its live version is its latest).
    const docs = ledger("SELECT count(*) AS n FROM documents WHERE live_version = latest_version AND repair_needed = 0")[0].n;
    assert.equal(docs, ledger('SELECT count(*) AS n FROM documents')[0].n);
    assert.deepEqual(JSON.parse(ledger("SELECT document_counts FROM tenants WHERE tenant_id = 'default'")[0].document_counts), { indexed: docs });
    // 0028 counted the archive's letters by group.
    assert.deepEqual(
      ledger('SELECT coalesce(sum(letters), 0) AS n FROM dead_letter_groups'),
      ledger('SELECT count(*) AS n FROM dead_letters'),
    );
    // 0022: no text rewritten; a latest version's parts stay open (its
    // next version closes them), any other's end at the version after it.
    const parts = ledger('SELECT p.doc_id, p.version, p.to_version, d.latest_version FROM version_parts p JOIN documents d ON d.doc_id = p.doc_id');
    assert.ok(parts.length >= 3, JSON.stringify(parts));
    for (const p of parts) assert.equal(p.to_version, p.version === p.latest_version ? null : p.version + 1, JSON.stringify(p));
    assert.deepEqual(ledger('SELECT count(*) AS n FROM versions WHERE parts IS NOT NULL'), [{ n: 0 }]);
    assert.deepEqual(ledger("SELECT count(*) AS n FROM sqlite_schema WHERE name = 'cleanup_intents' AND sql LIKE '%WITHOUT ROWID%'"), [{ n: 1 }]);
  });

  step('4. restarted on the migrated ledger and the same index: the same vector answers at once, the keyword ones after a cron run, nothing embedded or written', async () => {
    await start();
    for (const id of [LONG, JA, SHORT]) await waitForState(w.base, id, 'indexed', { liveVersion: LIVE[id] });
    const before = embedded.length;
    const early = await answers();
    QUERIES.forEach((q, i) => {
      if (q.mode === 'vector') assert.deepEqual(early[i], answers1[i], JSON.stringify(q));
      if (q.mode === 'keyword') assert.deepEqual(early[i], [], `a keyword hit before cron indexed the old rows: ${JSON.stringify(q)}`);
    });
    // Cron on the migrated ledger enters the old rows into the keyword
    // index (one page: fewer rows than CRON_PRUNE_ROWS_MAX) and deletes no vector.
    await w.scheduled();
    await w.scheduled();
    assert.deepEqual(await answers(), answers1);
    assert.deepEqual(embedded.slice(before), [...QUERY_TEXTS, ...QUERY_TEXTS], 'only the queries were embedded');
    const d = diff(counters1, counters());
    assert.deepEqual(d, { upsertCalls: 0, deleteCalls: 0, upserted: 0, deleted: 0, texts: 2 * QUERY_TEXTS.length });
    assert.deepEqual(vectors(), vectors1, 'the index is unchanged');
  });

  step('5. one paragraph edited: one chunk embedded, the others kept, the stale vector deleted', async () => {
    const c0 = counters();
    const e0 = embedded.length;
    const paragraphs = EN.slice();
    paragraphs[EDITED_AT] = EDITED;
    const { version, job } = await put(LONG, paragraphs.join('\n\n'));
    assert.equal(version, 2);
    assert.equal(job.progress.chunks_embedded, 1, JSON.stringify(job.progress));
    assert.equal(job.progress.chunks_reused, 0, JSON.stringify(job.progress));
    assert.equal(job.progress.chunks_kept, PARAGRAPHS - 1, JSON.stringify(job.progress));
    assert.deepEqual(embedded.slice(e0).map((t) => t.trim()), [EDITED]);
    await indexMatchesLedger();
    assert.deepEqual(diff(c0, counters()), { upsertCalls: 1, deleteCalls: 1, upserted: 1, deleted: 1, texts: 1 });

    // The converted rows are shared by version 2: only the edited one closed, one new row.
    const rows = (await liveRows()).filter((r) => r.doc_id === LONG).sort((x, y) => x.ord - y.ord);
    const oldRows = rows1.filter((r) => r.doc_id === LONG);
    const stale = oldRows[EDITED_AT];
    assert.deepEqual(rows.map((r) => r.text.trim()), paragraphs);
    const kept = rows.filter((r) => r.version === 1);
    assert.deepEqual(kept.map((r) => r.chunk_id), oldRows.filter((r) => r !== stale).map((r) => r.chunk_id));
    const fresh = rows.filter((r) => r.version === 2);
    assert.equal(fresh.length, 1);
    assert.equal(fresh[0].ord, EDITED_AT);

    const held = vectors();
    const expected = new Set([...vectors1.keys()].filter((id) => id !== stale.vector_id));
    expected.add(fresh[0].vector_id);
    assert.deepEqual(new Set(held.keys()), expected);
    for (const id of expected) if (id !== fresh[0].vector_id) assert.deepEqual(held.get(id), vectors1.get(id), id);

    // The old version's text (parts written before 0022, which the edit
    // closed) is pruned by cron; the new version's text is its manifest's.
    await w.scheduled();
    const db = await w.mf.getD1Database('DB');
    const { results: longParts } = await db.prepare('SELECT version, to_version FROM version_parts WHERE doc_id = ?1').bind(LONG).all();
    assert.ok(longParts.length > 0 && longParts.every((p) => p.version === 2 && p.to_version === null), JSON.stringify(longParts));
    const { results: manifests } = await db.prepare('SELECT version, parts, part_count FROM versions WHERE doc_id = ?1 ORDER BY version').bind(LONG).all();
    assert.deepEqual(manifests.map((v) => [v.version, v.part_count]), [[1, 0], [2, longParts.length]]);
    assert.deepEqual(JSON.parse(manifests[1].parts).map((r) => r[0]), longParts.map(() => 2));

    const hit = (await search(w.base, { query: EDITED, mode: 'vector', top_k: 1 })).body.results[0];
    assert.deepEqual([hit?.doc_id, hit?.version, hit?.chunk, hit?.text.trim()], [LONG, 2, EDITED_AT, EDITED], JSON.stringify(hit));
    const kw = (await search(w.base, { query: 'quillwort', mode: 'keyword', top_k: 5 })).body.results;
    assert.deepEqual(kw.map((h) => [h.doc_id, h.version, h.text.trim()]), [[LONG, 2, EDITED]]);
    const gone = (await search(w.base, { query: OLD_WORD, mode: 'keyword', top_k: 5 })).body.results;
    assert.deepEqual(gone, [], `the old text is still found: ${JSON.stringify(gone)}`);
    const old = (await search(w.base, { query: EN[EDITED_AT], mode: 'vector', top_k: 5 })).body.results;
    assert.ok(old.length > 0 && old.every((h) => h.text.trim() !== EN[EDITED_AT] && (h.doc_id !== LONG || h.version === 2)), JSON.stringify(old));
  });
});
