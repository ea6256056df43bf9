// Hybrid search, end to end in the BUILT Worker in workerd (`wrangler dev
// --env local`, local D1, local index and embedder): migration 0021 (the
// per-tenant FTS5 keyword index and the trigger that keeps it) applied by wrangler;
// keyword, vector and hybrid modes finding exact English and Japanese terms;
// highlight snippets (HTML-escaped, terms in <mark>); FTS5 syntax in a query
// taken literally; the request's error contract; and the fences a keyword
// hit goes through like a vector hit: never a deleted document, an old
// version, another tenant's chunk or another generation's.
//
// Run from the repository root after `make build`:
//   node --test --test-concurrency=1 tests/e2e/search.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  REPO_ROOT,
  admin,
  api,
  docPath,
  eventsIn,
  getBackfill,
  getGenerations,
  runWrangler,
  search,
  startWorker,
  tokens,
  triggerCron,
  waitFor,
  waitForState,
  withLogs,
} from './helpers.mjs';

const MODES = ['keyword', 'vector', 'hybrid'];
// The generation fence's restart: chunks of at most 200 tokens instead of 500.
const SMALL = { CHUNK_SIZE_MAX_TOKENS: '200', CHUNK_OVERLAP_TOKENS: '20' };

// ---------------------------------------------------------------------------
// 1. Migration 0021 (the keyword index per tenant and its trigger) through wrangler, as `make migrate-local` applies it.

describe('migration 0021 through `wrangler d1 migrations apply` (make migrate-local)', () => {
  let dir;
  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingest-e2e-fts-migrate-'));
  });
  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('1. wrangler applies 0021 with its trigger body whole: the contentless keyword index, its fts5vocab tables and the trigger work in local D1', () => {
    // The Makefile's command (wrangler.toml, env local) on a state directory
    // of its own. The e2e harness (startWorker) applies migrations the same
    // way, with wrangler.toml minus [build].
    const applied = runWrangler(['d1', 'migrations', 'apply', 'DB', '--local', '--env', 'local', '--persist-to', dir]);
    assert.match(applied.stdout, /0021_keyword_index_per_tenant\.sql/, `0021 not in wrangler's output:\n${applied.stdout}`);

    // The trigger as the migration writes it, through its `END;`.
    const file = fs.readFileSync(path.join(REPO_ROOT, 'migrations', '0021_keyword_index_per_tenant.sql'), 'utf8');
    const expected = new Map(
      [...file.matchAll(/^CREATE TRIGGER (\w+)[\s\S]*?^END;/gm)].map((m) => [m[1], m[0].slice(0, -1)]),
    );
    assert.ok(expected.has('chunks_keyword_deleted'), 'migration 0021 no longer creates trigger chunks_keyword_deleted');

    // A functional check in the same wrangler call, as the Worker's
    // statements use the index (src/store/sql.rs): a staged row enters
    // with its tenant-scoped terms (KEYWORD_STAGE) and its tenant's totals
    // (KEYWORD_STAGE_COUNT); fts5vocab counts the rows and instances of a
    // term; deleting a row takes its entry and its counts away (the
    // trigger, contentless_delete); a row never indexed leaves nothing to
    // take. Each SELECT's rows are one result set.
    const ins = (id, ord, text, len) =>
      `INSERT INTO chunks (chunk_id, doc_id, version, to_version, generation, ord, vector_id, content_hash, text, keyword_len) ` +
      `VALUES (${id}, 'a', 1, NULL, 1, ${ord}, 'a:${id}', 'h', '${text}', ${len})`;
    const state = (what) =>
      `SELECT '${what}' AS what, json_object('held', (SELECT group_concat(id, ' ') FROM (SELECT id FROM keyword_index_docsize ORDER BY id)), ` +
      `'rows', (SELECT keyword_rows FROM tenants WHERE tenant_id = 'default'), 'tokens', (SELECT keyword_tokens FROM tenants WHERE tenant_id = 'default'), ` +
      `'alpha', (SELECT doc FROM keyword_terms WHERE term = k.key || 'zalpha'), ` +
      `'alpha in 1', (SELECT count(*) FROM keyword_instances WHERE term = k.key || 'zalpha' AND doc = 1)) AS ids ` +
      `FROM (SELECT keyword_key AS key FROM tenants WHERE tenant_id = 'default') k`;
    const statements = [
      "SELECT 'migrations' AS what, group_concat(name, ' ') AS ids FROM (SELECT name FROM d1_migrations ORDER BY id)",
      "SELECT 'triggers' AS what, json_group_array(json_object('name', name, 'tbl', tbl_name, 'sql', sql)) AS ids FROM (SELECT * FROM sqlite_master WHERE type = 'trigger' ORDER BY name)",
      "SELECT 'fts table' AS what, sql AS ids FROM sqlite_master WHERE name = 'keyword_index'",
      "SELECT 'key' AS what, keyword_key AS ids FROM tenants WHERE tenant_id = 'default'",
      "INSERT INTO documents (doc_id, latest_version, live_version, created_at, updated_at) VALUES ('a', 1, 1, 1, 1)",
      "INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, created_at) VALUES ('a', 1, 0, 'h1', 'text/plain', '{}', 1, 1, 1)",
      ins(1, 0, 'alpha bravo alpha', 3),
      ins(2, 1, 'alpha 東京', 4),
      ins(3, 2, 'written before 0021', 'NULL'),
      "INSERT INTO keyword_index (rowid, terms) SELECT 1, k || 'zalpha ' || k || 'zbravo ' || k || 'zalpha' FROM (SELECT keyword_key AS k FROM tenants WHERE tenant_id = 'default')",
      "INSERT INTO keyword_index (rowid, terms) SELECT 2, k || 'zalpha ' || k || 'z東 ' || k || 'z東京 ' || k || 'z京' FROM (SELECT keyword_key AS k FROM tenants WHERE tenant_id = 'default')",
      "UPDATE tenants SET keyword_rows = keyword_rows + 2, keyword_tokens = keyword_tokens + 7 WHERE tenant_id = 'default'",
      state('entered'),
      "DELETE FROM chunks WHERE chunk_id = 2",
      state('one deleted'),
      "DELETE FROM chunks WHERE chunk_id = 3",
      state('unindexed deleted'),
      // A tenant inserted without a key (as the previous release does) gets the next one.
      "INSERT INTO tenants (tenant_id, state, documents, bytes, created_at, updated_at) VALUES ('late', 'active', 0, 0, 1, 1)",
      "SELECT 'late key' AS what, keyword_key AS ids FROM tenants WHERE tenant_id = 'late'",
    ];
    const out = runWrangler(['d1', 'execute', 'DB', '--local', '--env', 'local', '--persist-to', dir, '--json', '--command', statements.join(';\n')]);
    let sets;
    try {
      sets = JSON.parse(out.stdout);
    } catch (e) {
      throw new Error(`wrangler d1 execute --json: not JSON (${e.message}):\n${out.stdout}`);
    }
    const got = Object.fromEntries(sets.flatMap((s) => s.results ?? []).filter((r) => typeof r.what === 'string').map((r) => [r.what, r.ids]));

    const migrations = fs.readdirSync(path.join(REPO_ROOT, 'migrations')).filter((f) => f.endsWith('.sql')).sort();
    assert.deepEqual(got.migrations?.split(' '), migrations, 'every migration recorded as applied');
    assert.match(got['fts table'] ?? '', /CREATE VIRTUAL TABLE keyword_index USING fts5/i, `keyword_index missing: ${JSON.stringify(got)}`);
    assert.match(got['fts table'], /content = ''/, 'the index keeps no copy of the text (contentless)');
    assert.match(got['fts table'], /contentless_delete = 1/);
    assert.equal(typeof got.key, 'number', `the default tenant has a keyword key: ${JSON.stringify(got)}`);
    const triggers = JSON.parse(got.triggers ?? '[]');
    assert.deepEqual(
      triggers.map((t) => t.name).filter((n) => n.startsWith('chunks_fts') || n.startsWith('chunks_keyword')),
      ['chunks_keyword_deleted'],
      `the keyword index's triggers (0020's are dropped): ${JSON.stringify(triggers)}`,
    );
    // SQLite stores a CREATE statement's own text: a body cut at one of
    // its inner `;` would differ (or not have applied at all).
    assert.deepEqual([...expected.keys()].sort(), ['chunks_keyword_deleted', 'tenants_keyword_key']);
    for (const [name, sql] of expected) {
      const t = triggers.find((x) => x.name === name);
      assert.equal(t?.sql, sql, `trigger ${name} as stored differs from the migration's text (split inside BEGIN … END?)`);
    }
    assert.equal(triggers.find((x) => x.name === 'chunks_keyword_deleted').tbl, 'chunks');

    const st = (what) => JSON.parse(got[what] ?? 'null');
    assert.deepEqual(st('entered'), { held: '1 2', rows: 2, tokens: 7, alpha: 2, 'alpha in 1': 2 }, 'fts5vocab: 2 rows hold alpha, twice in row 1');
    assert.deepEqual(st('one deleted'), { held: '1', rows: 1, tokens: 3, alpha: 1, 'alpha in 1': 2 }, 'the trigger: the deleted row leaves the index and its counts');
    assert.deepEqual(st('unindexed deleted'), st('one deleted'), 'a row never indexed leaves nothing behind');
    assert.equal(got['late key'], got.key + 1, 'the trigger tenants_keyword_key gives a tenant inserted without a key the next one');
  });
});

// ---------------------------------------------------------------------------
// 2-5. One Worker.

/** The default tenant's documents. */
const DOCS = {
  errors: {
    doc_id: 'kb/errors/E4021',
    text:
      'Upload API troubleshooting. The server answers with error code E4021 when the signed upload URL expired ' +
      'before the client finished sending the file. Request a fresh URL and retry the upload; repeated E4021 ' +
      'answers usually mean that the client clock runs several minutes behind the server.',
  },
  upload: {
    doc_id: 'kb/upload-limits',
    text:
      'Upload limits. Files larger than 5 GB must be sent in parts; the client retries each part on its own when ' +
      'the connection drops, and resumes the upload from the last part the server acknowledged. Error codes of ' +
      'the upload API are listed in the troubleshooting guide.',
  },
  config: {
    doc_id: 'kb/config-loader',
    text:
      'Configuration loading. Call parse_config_v2(path) to read the YAML file: it validates every section, ' +
      'fills in the defaults and returns a Config value. The older loader is kept for compatibility, but it ' +
      'ignores unknown keys silently.',
  },
  tokyo: {
    doc_id: 'ja/東京都の人口',
    text:
      '東京都の人口は約1400万人で、日本の総人口のおよそ一割を占める。人口密度は特別区部で特に高く、' +
      '昼間の人口は夜間の人口を大きく上回る。',
  },
  reindex: {
    doc_id: 'ja/インデックス',
    text:
      '検索インデックスの再構築は、チャンクの大きさや埋め込みモデルを変更したときに必要になる。' +
      '再構築の間も、古いインデックスで検索を続けることができる。',
  },
  osaka: {
    doc_id: 'ja/大阪府',
    text: '大阪府の人口は約880万人である。道頓堀や大阪城は観光客に人気があり、食べ物の街としても知られている。',
  },
  html: {
    doc_id: 'kb/widget-markup',
    text: 'Widget titles: typing <script>alert(1)</script> & other markup into a title stores it as typed; the sanitizer escapes it on render.',
  },
};

describe('hybrid search in workerd', () => {
  let worker;
  let base;
  const getWorker = () => worker;
  const step = (name, fn) => it(name, { timeout: 300_000 }, withLogs(getWorker, fn));

  before(
    async () => {
      worker = await startWorker();
      base = worker.base;
    },
    { timeout: 300_000 },
  );
  after(async () => {
    await worker?.stop();
  });

  /** `POST /v1/search` answering 200 with a results array; returns the results. */
  async function results(body, opts = {}, what = '') {
    const s = await search(base, body, opts);
    assert.equal(s.status, 200, `${what} search ${JSON.stringify(body)}: expected 200, got ${s.status} ${s.text}`);
    assert.ok(Array.isArray(s.body?.results), `${what} search ${JSON.stringify(body)}: no results array: ${s.text}`);
    return s.body.results;
  }

  /** Each hit's `scores` as its mode says: present, null where the hit is not in that ranking. */
  function checkScores(hits, mode, what) {
    for (const h of hits) {
      const ctx = `${what} (${mode}): ${JSON.stringify(h)}`;
      assert.equal(typeof h.scores, 'object', `no scores: ${ctx}`);
      assert.ok(h.scores !== null, `no scores: ${ctx}`);
      assert.equal(typeof h.scores.fused, 'number', `scores.fused: ${ctx}`);
      if (mode === 'keyword') {
        assert.equal(typeof h.scores.keyword, 'number', `scores.keyword must be a number in keyword mode: ${ctx}`);
        assert.equal(h.scores.vector, null, `scores.vector must be null in keyword mode: ${ctx}`);
        assert.equal(h.score, h.scores.keyword, `score is the keyword score in keyword mode: ${ctx}`);
      } else if (mode === 'vector') {
        assert.equal(typeof h.scores.vector, 'number', `scores.vector must be a number in vector mode: ${ctx}`);
        assert.equal(h.scores.keyword, null, `scores.keyword must be null in vector mode: ${ctx}`);
        assert.equal(h.score, h.scores.vector, `score is the vector score in vector mode: ${ctx}`);
      } else {
        for (const k of ['vector', 'keyword']) {
          assert.ok(h.scores[k] === null || typeof h.scores[k] === 'number', `scores.${k}: ${ctx}`);
        }
        assert.ok(h.scores.vector !== null || h.scores.keyword !== null, `a hybrid hit is in at least one ranking: ${ctx}`);
        assert.equal(h.score, h.scores.fused, `score is the fused score in hybrid mode: ${ctx}`);
      }
    }
  }

  async function put(doc, token) {
    const res = await api(base, 'PUT', docPath(doc.doc_id), { text: doc.text }, token === undefined ? {} : { token });
    assert.equal(res.status, 202, `PUT ${doc.doc_id}: ${res.text}`);
    return res.body;
  }

  // The default tenant's documents, ingested once (by whichever step needs them first).
  let ingesting;
  function ingested() {
    ingesting ??= (async () => {
      const res = await api(base, 'POST', '/v1/documents', { documents: Object.values(DOCS).map(({ doc_id, text }) => ({ doc_id, text })) });
      assert.equal(res.status, 200, res.text);
      assert.deepEqual(res.body.results.map((r) => r.status), Object.values(DOCS).map(() => 202), res.text);
      for (const d of Object.values(DOCS)) await waitForState(base, d.doc_id, 'indexed', { timeoutMs: 60_000 });
    })();
    return ingesting;
  }

  step('2. keyword and hybrid find an exact term (E4021, parse_config_v2, 東京都の人口, 検索)', async () => {
    await ingested();

    // keyword: the exact term's chunk first, only chunks holding it, scores.vector null.
    for (const [term, doc] of [['E4021', DOCS.errors], ['parse_config_v2', DOCS.config], ['東京都の人口', DOCS.tokyo], ['検索インデックスの再構築', DOCS.reindex]]) {
      const hits = await results({ query: term, mode: 'keyword', top_k: 10 }, {}, 'keyword');
      assert.ok(hits.length >= 1, `keyword search for ${term} found nothing (expected ${doc.doc_id})`);
      assert.equal(hits[0].doc_id, doc.doc_id, `keyword search for ${term}: expected ${doc.doc_id} first, got ${JSON.stringify(hits.map((h) => h.doc_id))}`);
      assert.ok(hits[0].text.includes(term), `the first keyword hit for ${term} holds it: ${JSON.stringify(hits[0])}`);
      checkScores(hits, 'keyword', term);
      for (let i = 1; i < hits.length; i++) {
        assert.ok(hits[i - 1].score >= hits[i].score, `keyword hits best first: ${JSON.stringify(hits.map((h) => h.score))}`);
      }
    }
    // Terms found nowhere else: only their own document's chunks.
    for (const [term, doc] of [['E4021', DOCS.errors], ['parse_config_v2', DOCS.config]]) {
      const hits = await results({ query: term, mode: 'keyword', top_k: 10 }, {}, 'keyword');
      assert.deepEqual([...new Set(hits.map((h) => h.doc_id))], [doc.doc_id], `keyword ${term}: only the document that holds it`);
    }
    // Case folding: the lower-case code finds it too.
    const lower = await results({ query: 'e4021', mode: 'keyword' }, {}, 'keyword');
    assert.equal(lower[0]?.doc_id, DOCS.errors.doc_id, `keyword e4021 (lower case): ${JSON.stringify(lower)}`);

    // A 2-character Japanese word: found, and only in chunks that hold it.
    const kensaku = await results({ query: '検索', mode: 'keyword', top_k: 10 }, {}, 'keyword');
    assert.ok(kensaku.some((h) => h.doc_id === DOCS.reindex.doc_id), `keyword 検索 did not find ${DOCS.reindex.doc_id}: ${JSON.stringify(kensaku)}`);
    for (const h of kensaku) assert.ok(h.text.includes('検索'), `keyword 検索 served a chunk without it: ${JSON.stringify(h)}`);
    checkScores(kensaku, 'keyword', '検索');
    // A word in neither document: nothing.
    assert.deepEqual(await results({ query: '名古屋', mode: 'keyword' }, {}, 'keyword'), [], 'keyword 名古屋 (in no document)');
    assert.deepEqual(await results({ query: 'zygomorphic', mode: 'keyword' }, {}, 'keyword'), [], 'keyword zygomorphic (in no document)');

    // hybrid (the default, and named): the document first, with a fused score and its keyword score.
    for (const [term, doc] of [['E4021', DOCS.errors], ['parse_config_v2', DOCS.config], ['東京都の人口', DOCS.tokyo], ['検索', DOCS.reindex]]) {
      for (const body of [{ query: term, mode: 'hybrid' }, { query: term }]) {
        const hits = await results(body, {}, 'hybrid');
        assert.equal(hits[0]?.doc_id, doc.doc_id, `hybrid ${JSON.stringify(body)}: expected ${doc.doc_id} first, got ${JSON.stringify(hits.map((h) => h.doc_id))}`);
        checkScores(hits, 'hybrid', term);
        assert.equal(typeof hits[0].scores.keyword, 'number', `hybrid ${term}: the first hit is in the keyword ranking: ${JSON.stringify(hits[0])}`);
        for (let i = 1; i < hits.length; i++) assert.ok(hits[i - 1].score >= hits[i].score, `hybrid hits best first: ${JSON.stringify(hits)}`);
      }
    }

    // vector: no keyword scores.
    const vec = await results({ query: 'E4021 upload URL expired', mode: 'vector' }, {}, 'vector');
    assert.ok(vec.length >= 1, 'vector search found nothing');
    checkScores(vec, 'vector', 'E4021 upload URL expired');
  });

  step('3. highlight: <mark> around the term (English and Japanese), the rest HTML-escaped', async () => {
    await ingested();
    /** The snippet without its <mark> tags, adjacent marks merged. */
    const unmarked = (s) => s.replace(/<\/?mark>/g, '');
    const merged = (s) => s.replace(/<\/mark><mark>/g, '');

    // A spaced-script word is marked on its own (parse_config_v2 is three
    // words to the tokenizer); a Japanese run as a whole.
    const MARKED = {
      E4021: /<mark>E4021<\/mark>/,
      parse_config_v2: /<mark>parse<\/mark>_<mark>config<\/mark>_<mark>v2<\/mark>|<mark>parse_config_v2<\/mark>/,
      東京都: /<mark>東京都<\/mark>/,
      検索: /<mark>検索<\/mark>/,
    };
    for (const [term, doc] of [['E4021', DOCS.errors], ['parse_config_v2', DOCS.config], ['東京都', DOCS.tokyo], ['検索', DOCS.reindex]]) {
      for (const mode of MODES) {
        const hits = await results({ query: term, mode, highlight: true, filter: { doc_id: doc.doc_id } }, {}, `highlight ${mode}`);
        assert.ok(hits.length >= 1, `highlight ${mode} ${term}: nothing found`);
        for (const h of hits) assert.equal(typeof h.snippet, 'string', `highlight ${mode} ${term}: no snippet string: ${JSON.stringify(h)}`);
        const hit = hits.find((h) => h.text.includes(term));
        assert.ok(hit, `highlight ${mode} ${term}: no hit holds the term: ${JSON.stringify(hits)}`);
        assert.match(merged(hit.snippet), MARKED[term], `highlight ${mode} ${term}: the term should be marked; got ${JSON.stringify(hit.snippet)}`);
        assert.ok(unmarked(hit.snippet).includes(term), `highlight ${mode} ${term}: the snippet is the chunk's text around the term: ${JSON.stringify(hit.snippet)}`);
      }
    }

    // HTML in the text: escaped in the snippet, raw in `text`.
    for (const mode of MODES) {
      const hits = await results({ query: 'sanitizer', mode, highlight: true, filter: { doc_id: DOCS.html.doc_id } }, {}, `highlight ${mode}`);
      const hit = hits[0];
      assert.ok(hit, `highlight ${mode} sanitizer: nothing found`);
      assert.equal(hit.text, DOCS.html.text, 'text is the chunk as written');
      const s = hit.snippet;
      assert.equal(typeof s, 'string', `highlight ${mode}: no snippet: ${JSON.stringify(hit)}`);
      assert.ok(!/<script/i.test(s), `highlight ${mode}: a raw <script> in the snippet: ${JSON.stringify(s)}`);
      assert.ok(s.includes('&lt;script&gt;'), `highlight ${mode}: the snippet should hold &lt;script&gt;; got ${JSON.stringify(s)}`);
      assert.ok(s.includes('&amp;'), `highlight ${mode}: the & should be &amp;; got ${JSON.stringify(s)}`);
      const bare = unmarked(s);
      assert.ok(!/[<>]/.test(bare), `highlight ${mode}: only <mark> tags may be raw markup; got ${JSON.stringify(s)}`);
      assert.ok(!/&(?!(?:amp|lt|gt|quot|apos|#39|#x27);)/.test(bare), `highlight ${mode}: a raw & in the snippet: ${JSON.stringify(s)}`);
      assert.ok(/<mark>sanitizer<\/mark>/i.test(s), `highlight ${mode}: <mark>sanitizer</mark> expected; got ${JSON.stringify(s)}`);
    }
    // A query term that is markup itself: marked, and still escaped.
    const tagged = await results({ query: '<script>', mode: 'keyword', highlight: true }, {}, 'highlight');
    for (const h of tagged) assert.ok(!/<script/i.test(h.snippet ?? ''), `a raw <script> in the snippet: ${JSON.stringify(h)}`);

    // No highlight asked (absent or false): no snippet.
    for (const body of [{ query: 'E4021' }, { query: 'E4021', highlight: false }, { query: 'E4021', mode: 'keyword', highlight: false }]) {
      const hits = await results(body, {}, 'no highlight');
      assert.ok(hits.length >= 1, JSON.stringify(body));
      for (const h of hits) assert.ok(h.snippet === undefined || h.snippet === null, `${JSON.stringify(body)}: a snippet without highlight: ${JSON.stringify(h)}`);
    }
  });

  step('4. FTS5 syntax in a query is literal (200 in every mode, never 500); bad mode/highlight → 422 invalid_field', async () => {
    await ingested();
    const QUERIES = [
      '"unbalanced', 'foo AND OR', 'NEAR(a b)', 'terms:x', '*', '^start', 'a - b', '(((', '{col}: x', '!!!',
      // more of FTS5's grammar, and of SQL's
      'AND', 'OR', 'NOT', 'NOT E4021', 'E4021 NOT', 'E4021 AND', 'E4021 OR OR', '"E4021"', 'E4021*', '"E4021" *', '-E4021',
      '+E4021', 'terms:E4021', '{terms}:E4021', 'NEAR(E4021 clock, 3)', 'NEAR("E4021" "clock")', '""', "'", "E4021' OR '1'='1",
      'a"b"c', '"E4021', 'E4021"', ')', '))) OR (((', ':', '-', '^', '-- comment', '; DROP TABLE chunks_fts; --', '%', '_',
      '\\', '\\"', '東京都"', 'NEAR(東京都 人口, 2)', '"検索', '検索*', '* 検索 *', '（検索）', '「東京都」',
      `${'E4021 '.repeat(60)}`, `${'( '.repeat(200)}E4021`, `${'"'.repeat(101)}`,
    ];
    const failures = [];
    // Every mode with highlights (the snippet reads the query too), and keyword without.
    const ASKS = [...MODES.map((mode) => ({ mode, highlight: true })), { mode: 'keyword', highlight: false }];
    for (const query of QUERIES) {
      for (const { mode, highlight } of ASKS) {
        const s = await search(base, { query, mode, highlight, top_k: 10 });
        if (s.status !== 200 || !Array.isArray(s.body?.results)) {
          failures.push(`${JSON.stringify({ query, mode, highlight })}: expected 200 with results, got ${s.status} ${s.text.slice(0, 300)}`);
        }
      }
    }
    assert.deepEqual(failures, [], `queries with FTS5 syntax not answered 200:\n${failures.join('\n')}`);

    // Literal: the syntax around a term is punctuation, the term still matches.
    for (const query of ['"E4021"', 'E4021*', '(E4021)', '{E4021}', 'E4021:', '^E4021']) {
      const hits = await results({ query, mode: 'keyword' }, {}, 'literal');
      assert.equal(hits[0]?.doc_id, DOCS.errors.doc_id, `keyword ${JSON.stringify(query)}: the term inside the syntax should match: ${JSON.stringify(hits)}`);
    }
    // Punctuation only: nothing to match by keyword (200, no results).
    for (const query of ['!!!', '*', '(((', '""', '-']) {
      assert.deepEqual(await results({ query, mode: 'keyword' }, {}, 'punctuation'), [], `keyword ${JSON.stringify(query)} has no terms`);
    }

    // The request's new fields: bad values are 422 invalid_field, and nothing else.
    const BAD = [
      { mode: 'fuzzy' }, { mode: 3 }, { highlight: 'yes' }, { mode: '' }, { mode: 'HYBRID' }, { mode: 'keyword ' }, { mode: true },
      { mode: ['keyword'] }, { mode: { keyword: true } }, { highlight: 1 }, { highlight: 'true' }, { highlight: [] },
    ];
    const bad = [];
    for (const extra of BAD) {
      const s = await search(base, { query: 'E4021', ...extra });
      if (s.status !== 422 || s.body?.error?.code !== 'invalid_field' || typeof s.body?.error?.message !== 'string') {
        bad.push(`${JSON.stringify(extra)}: expected 422 invalid_field, got ${s.status} ${s.text.slice(0, 300)}`);
      }
    }
    assert.deepEqual(bad, [], `bad search fields:\n${bad.join('\n')}`);
    // null is the default, as for top_k.
    for (const extra of [{ mode: null }, { highlight: null }]) {
      const hits = await results({ query: 'E4021', ...extra }, {}, 'null field');
      assert.equal(hits[0]?.doc_id, DOCS.errors.doc_id, JSON.stringify(extra));
      checkScores(hits, 'hybrid', JSON.stringify(extra));
    }
  });

  // The fences, shared by the steps below.
  const GONE = { doc_id: 'fence/deleted', text: 'Quarantine notice: the batch marked xq7vanish was withdrawn from the catalogue.' };
  const V1 = { doc_id: 'fence/versioned', text: 'Release notes, first draft: the flag oldflagkestrel enables the legacy exporter.' };
  const V2 = { doc_id: 'fence/versioned', text: 'Release notes, final: the flag newflagosprey enables the streaming exporter.' };
  const TENANT = 'search-other';
  const THEIRS = { doc_id: 'kb/errors/E4021', text: 'Tenant handbook: the vault code wombatcipher9 and the 合言葉は山桜 belong to this tenant alone. E4021 is our own code.' };
  // A document over 200 tokens (non-whitespace characters): several
  // chunks at 500, more at 200; its last sentence holds a term of its own.
  const LONG = {
    doc_id: 'fence/long',
    text:
      Array.from({ length: 24 }, (_, i) => `Survey log ${i + 1}: the glacier moraine shifted ${i + 3} centimetres along the northern ridge overnight.`).join(' ') +
      ' Final entry: the beacon tern7sentinel was recovered intact.',
  };
  let otherToken;
  const fencedTerms = ['xq7vanish', 'oldflagkestrel', 'wombatcipher9', '山桜'];

  /**
   * In no mode does a search for `query` serve a chunk holding `needle` or
   * one that `bad` picks; by keyword it finds nothing at all.
   */
  async function assertNotServed(query, { needle, bad = () => false, token, what }) {
    for (const mode of MODES) {
      const hits = await results({ query, mode, top_k: 50 }, token ? { token } : {}, what);
      const leaked = hits.filter((h) => h.text.includes(needle) || bad(h));
      assert.deepEqual(leaked, [], `${what}: ${mode} search for ${JSON.stringify(query)} served ${JSON.stringify(leaked)}`);
      if (mode === 'keyword') assert.deepEqual(hits, [], `${what}: keyword search for ${JSON.stringify(query)} should find nothing`);
    }
  }

  step('5a. fence: a deleted document is never served by keyword or hybrid search', async () => {
    await ingested();
    await put(GONE);
    await waitForState(base, GONE.doc_id, 'indexed');
    const before = await results({ query: 'xq7vanish', mode: 'keyword' }, {}, 'before the delete');
    assert.equal(before[0]?.doc_id, GONE.doc_id, `keyword xq7vanish before the delete: ${JSON.stringify(before)}`);
    const hybrid = await results({ query: 'xq7vanish' }, {}, 'before the delete');
    assert.equal(hybrid[0]?.doc_id, GONE.doc_id, `hybrid xq7vanish before the delete: ${JSON.stringify(hybrid)}`);

    const del = await api(base, 'DELETE', docPath(GONE.doc_id));
    assert.equal(del.status, 202, del.text);
    const view = await waitForState(base, GONE.doc_id, 'deleted');
    assert.equal(view.chunk_count, 0, JSON.stringify(view));
    const job = await api(base, 'GET', `/v1/jobs/${encodeURIComponent(del.body.job_id)}`);
    assert.equal(job.body?.state, 'succeeded', `the tombstone's job has run: ${job.text}`);

    await assertNotServed('xq7vanish', { needle: 'xq7vanish', bad: (h) => h.doc_id === GONE.doc_id, what: 'after the delete' });
    assert.deepEqual(await results({ query: 'quarantine catalogue', mode: 'keyword', filter: { doc_id: GONE.doc_id } }, {}, 'after the delete'), []);
  });

  step('5b. fence: an old version is never served; the new one is', async () => {
    await ingested();
    await put(V1);
    await waitForState(base, V1.doc_id, 'indexed', { liveVersion: 1 });
    const old = await results({ query: 'oldflagkestrel', mode: 'keyword' }, {}, 'version 1');
    assert.equal(old[0]?.doc_id, V1.doc_id, `keyword oldflagkestrel, version 1 live: ${JSON.stringify(old)}`);
    assert.equal(old[0].version, 1);

    const res = await put(V2);
    assert.equal(res.version, 2, JSON.stringify(res));
    await waitForState(base, V2.doc_id, 'indexed', { latestVersion: 2, liveVersion: 2 });

    await assertNotServed('oldflagkestrel', { needle: 'oldflagkestrel', bad: (h) => h.doc_id === V1.doc_id && h.version !== 2, what: 'after the replace' });
    for (const mode of ['keyword', 'hybrid']) {
      const fresh = await results({ query: 'newflagosprey', mode }, {}, 'after the replace');
      assert.equal(fresh[0]?.doc_id, V2.doc_id, `${mode} newflagosprey: ${JSON.stringify(fresh)}`);
      assert.equal(fresh[0].version, 2, `${mode} newflagosprey: version 2: ${JSON.stringify(fresh)}`);
      assert.ok(fresh.every((h) => h.doc_id !== V2.doc_id || h.version === 2), `only version 2 of ${V2.doc_id}: ${JSON.stringify(fresh)}`);
    }
    replaced = true;
    // A term both versions share ("exporter"): version 2 only.
    const shared = await results({ query: 'exporter', mode: 'keyword', top_k: 50 }, {}, 'after the replace');
    assert.deepEqual(shared.map((h) => [h.doc_id, h.version]), [[V2.doc_id, 2]], `keyword exporter: ${JSON.stringify(shared)}`);
  });

  // The second tenant (admin API, as tests/e2e/tenants.test.mjs onboards
  // one) and its document, which has the same doc_id as a default-tenant one.
  let onboarding;
  function otherTenant() {
    onboarding ??= (async () => {
      const t = await admin(base, 'POST', '/v1/admin/tenants', { tenant_id: TENANT });
      assert.equal(t.status, 201, t.text);
      const tok = await admin(base, 'POST', `/v1/admin/tenants/${TENANT}/tokens`, { scopes: ['ingest', 'search'] });
      assert.equal(tok.status, 201, tok.text);
      otherToken = tok.body.token;
      await put(THEIRS, otherToken);
      await waitForState(base, THEIRS.doc_id, 'indexed', { token: otherToken });
    })();
    return onboarding;
  }
  let replaced = false; // 5b ran: V2 is fence/versioned's live version

  step("5c. fence: another tenant's chunks are never served; its own search finds them", async () => {
    await ingested();
    await otherTenant();

    for (const term of ['wombatcipher9', '山桜']) {
      await assertNotServed(term, { needle: term, bad: (h) => h.text === THEIRS.text, what: `the default tenant, ${term}` });
      for (const mode of ['keyword', 'hybrid']) {
        const own = await results({ query: term, mode }, { token: otherToken }, TENANT);
        assert.equal(own[0]?.doc_id, THEIRS.doc_id, `${TENANT}, ${mode} ${term}: ${JSON.stringify(own)}`);
        assert.equal(own[0].text, THEIRS.text, `${TENANT}, ${mode} ${term}: its own text`);
      }
    }
    // A term both tenants' documents hold (E4021, the same doc_id): each its own chunk only.
    const mine = await results({ query: 'E4021', mode: 'keyword', top_k: 50 }, {}, 'default tenant');
    assert.ok(mine.length >= 1 && mine.every((h) => DOCS.errors.text.includes(h.text)), `default tenant, keyword E4021: ${JSON.stringify(mine)}`);
    const theirs = await results({ query: 'E4021', mode: 'keyword', top_k: 50 }, { token: otherToken }, TENANT);
    assert.deepEqual(theirs.map((h) => h.text), [THEIRS.text], `${TENANT}, keyword E4021: ${JSON.stringify(theirs)}`);
    // The default tenant's documents are not the other tenant's either.
    for (const term of ['parse_config_v2', '東京都', '検索']) {
      assert.deepEqual(await results({ query: term, mode: 'keyword' }, { token: otherToken }, TENANT), [], `${TENANT}, keyword ${term}`);
    }
  });

  step('5d. fence: during and after a config backfill (200-token chunks), every keyword hit is of the active generation', async () => {
    await ingested();
    await otherTenant();
    await put(LONG);
    await waitForState(base, LONG.doc_id, 'indexed');
    const QUERIES = ['tern7sentinel', 'glacier moraine', 'E4021', 'parse_config_v2', '東京都の人口', '検索', 'newflagosprey', 'survey'];

    /** Keyword and hybrid hits for every query: each of `generation`, no chunk twice. */
    async function assertGeneration(generation, what) {
      let seen = 0;
      for (const query of QUERIES) {
        for (const mode of ['keyword', 'hybrid']) {
          const hits = await results({ query, mode, top_k: 50 }, {}, what);
          seen += hits.length;
          const wrong = hits.filter((h) => h.generation !== generation);
          assert.deepEqual(wrong, [], `${what}: ${mode} ${query}: hits not of generation ${generation}`);
          const keys = hits.map((h) => `${h.doc_id}#${h.version}#${h.chunk}`);
          assert.equal(new Set(keys).size, keys.length, `${what}: ${mode} ${query}: a chunk served twice: ${JSON.stringify(keys)}`);
        }
      }
      const theirs = await results({ query: 'wombatcipher9', mode: 'keyword' }, { token: otherToken }, what);
      assert.ok(theirs.length >= 1 && theirs.every((h) => h.generation === generation), `${what}: ${TENANT}'s keyword hits: ${JSON.stringify(theirs)}`);
      assert.ok(seen > 0, `${what}: no hits at all`);
    }

    const gen1 = await results({ query: 'tern7sentinel', mode: 'keyword' }, {}, 'generation 1');
    assert.equal(gen1[0]?.doc_id, LONG.doc_id, JSON.stringify(gen1));
    assert.ok(tokens(gen1[0].text) > 200, `generation 1 chunks are up to 500 tokens: ${JSON.stringify(gen1[0])}`);
    assert.equal((await getGenerations(base)).body.active, 1);
    await assertGeneration(1, 'before the backfill');

    // Restarted with another chunk size: a config backfill builds generation 2.
    const persistDir = worker.persistDir;
    await worker.stop({ keepState: true });
    worker = undefined;
    worker = await startWorker({ vars: SMALL, persistDir });
    base = worker.base;
    const start = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'config', page_size: 100 });
    assert.equal(start.status, 202, start.text);
    const bf = start.body.backfill;
    assert.deepEqual(bf.generation, { from: 1, to: 2 }, start.text);

    // The build jobs stage generation 2's rows of live versions, which the
    // keyword index holds at once; until the switch, search serves 1.
    const built = await waitFor(
      async () => {
        const v = await getBackfill(base, bf.backfill_id);
        return v.progress.enqueued === v.progress.total && v.progress.pending === 0 && v;
      },
      { what: 'the build jobs of the first page to end', timeoutMs: 60_000, intervalMs: 300 },
    );
    const failedJobs = eventsIn(worker.logs(), 'job_attempt_failed');
    assert.equal(
      built.progress.failed,
      0,
      `the config backfill's build jobs failed (${built.progress.failed} of ${built.progress.total}): ` +
        `${JSON.stringify(failedJobs)}; backfill ${JSON.stringify(built)}`,
    );
    const gsBuilding = (await getGenerations(base)).body;
    assert.equal(gsBuilding.active, 1, JSON.stringify(gsBuilding));
    const g2 = gsBuilding.generations.find((g) => g.generation === 2);
    assert.equal(g2?.state, 'building', JSON.stringify(gsBuilding));
    assert.ok(g2.chunks > 0, `generation 2's rows are staged: ${JSON.stringify(gsBuilding)}`);
    await assertGeneration(1, 'while generation 2 is built');

    // cron ends the pass and switches.
    await waitFor(
      async () => {
        await triggerCron(base);
        return (await getBackfill(base, bf.backfill_id)).state === 'completed';
      },
      { what: 'the config backfill to complete', timeoutMs: 60_000, intervalMs: 300 },
    );
    const gs = (await getGenerations(base)).body;
    assert.equal(gs.active, 2, JSON.stringify(gs));
    assert.equal(gs.generations.find((g) => g.generation === 1)?.state, 'retained', `generation 1 keeps its rows: ${JSON.stringify(gs)}`);
    await assertGeneration(2, 'after the switch');
    const gen2 = await results({ query: 'tern7sentinel', mode: 'keyword' }, {}, 'generation 2');
    assert.equal(gen2[0]?.doc_id, LONG.doc_id, JSON.stringify(gen2));
    assert.ok(gen2.every((h) => tokens(h.text) <= 200), `generation 2 chunks are ≤ 200 tokens: ${JSON.stringify(gen2)}`);

    // The other fences hold in generation 2 too.
    for (const term of fencedTerms) {
      const hits = await results({ query: term, mode: 'keyword', top_k: 50 }, {}, 'generation 2, default tenant');
      assert.deepEqual(hits, [], `generation 2: default tenant's keyword ${term}`);
    }
    if (replaced) {
      const fresh = await results({ query: 'newflagosprey', mode: 'keyword' }, {}, 'generation 2');
      assert.deepEqual(fresh.map((h) => [h.doc_id, h.version, h.generation]), [[V2.doc_id, 2, 2]], JSON.stringify(fresh));
    }

    // Rolled back to generation 1: its rows were kept in the index all along.
    const back = await admin(base, 'POST', '/v1/admin/generations/1/activate');
    assert.equal(back.status, 200, back.text);
    await assertGeneration(1, 'after a rollback to generation 1');
    const fwd = await admin(base, 'POST', '/v1/admin/generations/2/activate');
    assert.equal(fwd.status, 200, fwd.text);
    await assertGeneration(2, 'forward to generation 2 again');
  });
});
