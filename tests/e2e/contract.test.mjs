// The API's contract (docs/openapi.yaml, OpenAPI 3.1) against the built
// Worker in workerd (`wrangler dev --env local`), with two local shards
// (`SHARDS=2`: a tenant's move between shards is one of the operations):
//
// 1. GET /openapi.json serves exactly docs/openapi.yaml (and
//    docs/openapi.json, what the Worker embeds, is up to date);
// 2. every route of the Worker's route tables (src/api/mod.rs, admin.rs,
//    tenants.rs) is a documented operation, and every documented operation
//    is a route: a method the document does not list for a path is refused;
// 3. every error code the API can answer (`ApiError::new(status, code, …)`
//    in src/) is documented under that status;
// 4. a walk through every operation, successes and refusals: each response's
//    status must be documented for its operation, its body must validate
//    against the documented schema (fields, types, required fields, no
//    undocumented field, the error code among those listed for the status),
//    and every operation must have answered at least one documented success;
//    each call names the answer it expects (a status, or a status and its
//    code), and a call answered otherwise fails, documented or not;
// 5. every error code docs/openapi.yaml lists under a status is asserted,
//    with that status, by some test of tests/it or tests/e2e (a documented
//    code no test produces fails the run; the two no test can produce are
//    listed with why).

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import YAML from 'yaml';
import Ajv2020 from 'ajv/dist/2020.js';
import { ADMIN_TOKEN, INGEST_TOKEN, REPO_ROOT, startWorker, triggerCron, waitFor, withLogs } from './helpers.mjs';

const DOC = YAML.parse(fs.readFileSync(path.join(REPO_ROOT, 'docs', 'openapi.yaml'), 'utf8'));
const METHODS = ['get', 'head', 'put', 'post', 'delete', 'patch'];

const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(DOC, 'openapi');

/** The JSON pointer of `obj` (a `$ref` followed) under `at`. */
function deref(node, at) {
  if (node?.$ref) {
    const p = node.$ref.replace(/^#/, '');
    return { node: p.split('/').slice(1).reduce((o, k) => o[k.replace(/~1/g, '/').replace(/~0/g, '~')], DOC), at: p };
  }
  return { node, at };
}
const esc = (k) => k.replace(/~/g, '~0').replace(/\//g, '~1');

/** The documented path template `urlPath` (no query) falls under, if any. */
function templateOf(urlPath) {
  const segs = urlPath.split('/');
  let best = null;
  for (const t of Object.keys(DOC.paths)) {
    const ts = t.split('/');
    if (ts.length !== segs.length) continue;
    let literals = 0;
    const ok = ts.every((s, i) => {
      if (/^\{.+\}$/.test(s)) return segs[i] !== '';
      if (s === segs[i]) { literals += 1; return true; }
      return false;
    });
    if (ok && (!best || literals > best.literals)) best = { t, literals };
  }
  return best?.t ?? null;
}

const successes = new Set();
const seen = [];

/**
 * Calls the Worker and checks the answer: first that it is the one the
 * walk expects (`want`: a status, or `[status, error code]`), then against
 * the contract: the operation exists, the status is documented for it, the
 * body validates.
 */
async function call(base, method, urlPath, { body, token, raw, contentType } = {}, want) {
  if (want === undefined) throw new Error(`${method} ${urlPath}: the walk names no expected answer`);
  const [wantStatus, wantCode] = Array.isArray(want) ? want : [want, undefined];
  const headers = {};
  if (token) headers.Authorization = `Bearer ${token}`;
  if (body !== undefined || raw !== undefined) headers['Content-Type'] = contentType ?? 'application/json';
  const res = await fetch(`${base}${urlPath}`, {
    method, headers, body: raw ?? (body === undefined ? undefined : JSON.stringify(body)),
    signal: AbortSignal.timeout(60_000),
  });
  const text = await res.text();
  const [pathOnly] = urlPath.split('?');
  const t = templateOf(pathOnly);
  const what = `${method} ${urlPath} -> ${res.status} ${text.slice(0, 300)}`;
  assert.equal(res.status, wantStatus, `${what}: the walk expects ${wantStatus}`);
  if (wantCode !== undefined) {
    let code;
    try { code = JSON.parse(text).error?.code; } catch { /* not JSON: no code */ }
    assert.equal(code, wantCode, `${what}: the walk expects the code ${wantCode}`);
  }
  if (!t) {
    // A path in no route table: the contract's answer for those.
    const declared = DOC['x-unrouted-responses']?.[String(res.status)];
    assert.ok(declared, `${what}: the path is not in the contract`);
    const validate = ajv.getSchema(`openapi#${deref(declared).at}/content/application~1json/schema`);
    assert.ok(validate(JSON.parse(text)), `${what}: ${ajv.errorsText(validate.errors)}`);
    seen.push(`${method} (unrouted) ${res.status}`);
    return { status: res.status, body: JSON.parse(text), text };
  }
  const op = DOC.paths[t][method.toLowerCase()];
  assert.ok(op, `${what}: ${method} is not documented on ${t}`);
  const declared = op.responses[String(res.status)];
  assert.ok(declared, `${what}: status ${res.status} is not documented for ${method} ${t} (documented: ${Object.keys(op.responses)})`);
  const { node: resp, at } = deref(declared, `/paths/${esc(t)}/${method.toLowerCase()}/responses/${res.status}`);
  const type = (res.headers.get('content-type') ?? '').split(';')[0].trim();
  if (method !== 'HEAD' && resp.content) {
    assert.ok(resp.content[type], `${what}: content type ${type} not documented (${Object.keys(resp.content)})`);
    if (type === 'application/json' && resp.content[type].schema) {
      const validate = ajv.getSchema(`openapi#${at}/content/${esc(type)}/schema`);
      assert.ok(validate, `${what}: no schema`);
      const json = JSON.parse(text);
      assert.ok(validate(json), `${what}: the body disagrees with the contract: ${ajv.errorsText(validate.errors, { separator: '\n  ' })}`);
    }
  }
  seen.push(`${method} ${t} ${res.status}`);
  if (res.status < 300) successes.add(`${method} ${t}`);
  let json = null;
  try { json = JSON.parse(text); } catch { /* a page or script */ }
  return { status: res.status, body: json, text };
}

/** The route arms of the Worker's route tables, as concrete sample paths. */
function codeRoutes() {
  const tables = [
    ['src/api/mod.rs', '/v1/'],
    ['src/api/admin.rs', '/v1/admin/'],
    ['src/api/tenants.rs', '/v1/admin/tenants/'],
  ];
  const actions = [...fs.readFileSync(path.join(REPO_ROOT, 'src/api/admin.rs'), 'utf8')
    .match(/fn parse_backfill_action[\s\S]*?\n}\n/)[0].matchAll(/"([a-z]+)" =>/g)].map((m) => m[1]);
  assert.ok(actions.length >= 3, 'the backfill actions were read');
  const out = [];
  for (const [file, prefix] of tables) {
    const src = fs.readFileSync(path.join(REPO_ROOT, file), 'utf8');
    for (const m of src.matchAll(/\("(GET|POST|PUT|DELETE)", \[([^\]]*)\]\)/g)) {
      const segs = m[2].split(/,(?![^(]*\))/).map((s) => s.trim()).filter(Boolean);
      if (segs.some((s) => s.includes('..'))) continue;
      let paths = [''];
      for (const s of segs) {
        let alts;
        if (/^"[^"]*"$/.test(s)) alts = [s.slice(1, -1)];
        else if (/@ \(/.test(s)) alts = [...s.matchAll(/"([^"]+)"/g)].map((x) => x[1]);
        else if (s === 'action') alts = actions;
        else alts = ['x1'];
        paths = paths.flatMap((p) => alts.map((a) => (p ? `${p}/${a}` : a)));
      }
      for (const p of paths) out.push({ method: m[1], path: `${prefix}${p}`.replace(/\/$/, ''), file });
    }
  }
  return out;
}

/**
 * Every error code docs/openapi.yaml lists, as `"<status> <code>"`: under
 * each operation's responses (a batch's 200 lists its items' codes) and
 * the unrouted ones.
 */
function documentedCodes() {
  const documented = new Set();
  const walk = (node, status) => {
    if (!node || typeof node !== 'object') return;
    if (node.$ref) return walk(deref(node).node, status);
    const code = node.properties?.error?.properties?.code;
    if (code) for (const c of deref(code).node.enum ?? []) documented.add(`${status} ${c}`);
    for (const v of Object.values(node)) walk(v, status);
  };
  for (const [status, resp] of Object.entries(DOC['x-unrouted-responses'] ?? {})) walk(deref(resp).node, status);
  for (const item of Object.values(DOC.paths)) {
    for (const m of METHODS) {
      for (const [status, resp] of Object.entries(item[m]?.responses ?? {})) walk(deref(resp).node, status);
    }
  }
  return documented;
}

/**
 * Documented codes no test can produce, each with why. Step 5 fails if
 * one of them is no longer documented or a test asserts it after all.
 */
const UNPRODUCIBLE = {
  '503 internal':
    'the Worker found no source of randomness (crypto.getRandomValues failed, src/wasm/mod.rs): workerd\'s cannot be made to fail',
  '200 internal':
    'a batch item the intake answered no outcome for (src/api/documents.rs, render_item): the intake answers one outcome per item',
};

/**
 * The error codes the tests assert, as `"<status> <code>"`, read from
 * tests/it/*.rs and tests/e2e/*.mjs (comment lines left out). An
 * assertion names the status and the code side by side: `409, "conflict"`
 * or `409, 'conflict'` (a tuple compared with assert_eq!, a row of a table
 * of expected answers, `assertErrorCode(res, 409, 'conflict', …)`, this
 * walk's `[409, 'conflict']`). A batch item's error, inside the batch's
 * 200, is asserted with tests/it/api.rs's `batch_item`:
 * `batch_item(&r, 2), (422, "invalid_field")` asserts `200 invalid_field`.
 */
function assertedCodes() {
  const asserted = new Map();
  const add = (key, where) => {
    if (!asserted.has(key)) asserted.set(key, new Set());
    asserted.get(key).add(where);
  };
  for (const dir of ['tests/it', 'tests/e2e']) {
    for (const f of fs.readdirSync(path.join(REPO_ROOT, dir))) {
      if (!/\.(rs|mjs)$/.test(f)) continue;
      const where = `${dir}/${f}`;
      const src = fs
        .readFileSync(path.join(REPO_ROOT, dir, f), 'utf8')
        .split('\n')
        .filter((l) => !/^\s*(\/\/|\*|\/\*)/.test(l))
        .join('\n');
      for (const m of src.matchAll(/\bbatch_item\([^;]*?\(\s*\d{3}\s*,\s*"([a-z_]+)"\s*\)/g)) add(`200 ${m[1]}`, where);
      for (const m of src.matchAll(/(?<![\w.])(\d{3})\s*,\s*["']([a-z_]+)["']/g)) add(`${m[1]} ${m[2]}`, where);
    }
  }
  return asserted;
}

let worker;
const getWorker = () => worker;
const step = (name, fn) => it(name, withLogs(getWorker, fn));

// Two shards: the moves' operations need a shard to move to (the rest of
// the walk answers as on one shard).
before(async () => { worker = await startWorker({ vars: { SHARDS: '2' } }); }, { timeout: 300_000 });
after(async () => { await worker?.stop(); });

describe('the OpenAPI contract', () => {
  step('1. /openapi.json is docs/openapi.yaml', async () => {
    const r = await call(worker.base, 'GET', '/openapi.json', {}, 200);
    assert.equal(r.status, 200);
    assert.deepEqual(r.body, DOC, 'the Worker serves the document (run `make openapi` and rebuild)');
    const embedded = JSON.parse(fs.readFileSync(path.join(REPO_ROOT, 'docs', 'openapi.json'), 'utf8'));
    assert.deepEqual(embedded, DOC, 'docs/openapi.json is docs/openapi.yaml (run `make openapi`)');
    assert.equal(DOC.openapi, '3.1.0');
  });

  step('2. every route is documented, and every documented route exists', async () => {
    const routes = codeRoutes();
    assert.ok(routes.length > 30, `the route tables were read (${routes.length})`);
    for (const r of routes) {
      const t = templateOf(r.path);
      assert.ok(t && DOC.paths[t][r.method.toLowerCase()], `${r.method} ${r.path} (${r.file}) is not in docs/openapi.yaml`);
    }
    // The other way: a method not documented on a path is not served, and
    // a 405's Allow names the methods the contract documents there (HEAD
    // beside GET where the Worker serves it too).
    for (const [t, item] of Object.entries(DOC.paths)) {
      const sample = t.replace(/\{[^}]+\}/g, 'x1');
      const documented = METHODS.filter((m) => item[m]).map((m) => m.toUpperCase());
      for (const m of ['GET', 'POST', 'PUT', 'DELETE']) {
        if (item[m.toLowerCase()]) continue;
        const res = await fetch(`${worker.base}${sample}`, { method: m, headers: { Authorization: `Bearer ${t.startsWith('/v1/admin') ? ADMIN_TOKEN : INGEST_TOKEN}` } });
        await res.text();
        assert.ok([404, 405].includes(res.status), `${m} ${sample} answered ${res.status}, but the contract has no ${m} on ${t}`);
        if (res.status !== 405) continue;
        const allow = (res.headers.get('allow') ?? '').split(',').map((x) => x.trim()).filter(Boolean);
        assert.ok(allow.length > 0, `${m} ${sample}: a 405 without Allow`);
        assert.deepEqual(allow.filter((x) => x !== 'HEAD' || !documented.includes('GET')).sort(), documented.filter((x) => x !== 'HEAD').sort(),
          `${m} ${sample}: Allow ${allow} is not the documented ${documented}`);
      }
    }
  });

  step('3. every error code is documented under its status', () => {
    const documented = documentedCodes();
    const codes = new Set();
    for (const dir of ['src/api', 'src/wasm', 'src/pipeline']) {
      for (const f of fs.readdirSync(path.join(REPO_ROOT, dir))) {
        if (!f.endsWith('.rs')) continue;
        const src = fs.readFileSync(path.join(REPO_ROOT, dir, f), 'utf8');
        for (const m of src.matchAll(/ApiError::new\(\s*(\d{3}),\s*"([a-z_]+)"/g)) codes.add(`${m[1]} ${m[2]}`);
      }
    }
    assert.ok(codes.size > 20, `the error codes were read (${codes.size})`);
    const missing = [...codes].filter((c) => !documented.has(c));
    assert.deepEqual(missing, [], 'error codes the Worker answers that docs/openapi.yaml does not list under that status');
  });

  step('4. every operation answers as documented', async () => {
    const b = worker.base;
    const A = { token: ADMIN_TOKEN };
    const I = { token: INGEST_TOKEN };
    // Every call names the answer it expects: a status, or a status and
    // its error code.
    // Unauthenticated.
    await call(b, 'GET', '/healthz', {}, 200);
    await call(b, 'HEAD', '/healthz', {}, 200);
    for (const p of ['/console', '/console/', '/console/console.js', '/console/console.css']) await call(b, 'GET', p, {}, 200);

    // Documents, jobs and search, as the default tenant.
    await call(b, 'PUT', '/v1/documents/c-1', { ...I, body: { text: '契約テストの文書です。検索できること。', metadata: { lang: 'ja' } } }, 202);
    const batch = await call(b, 'POST', '/v1/documents', { ...I, body: { documents: [{ doc_id: 'c-2', text: 'contract test two' }, { doc_id: 'c-3', text: 'contract test three' }] } }, 200);
    assert.deepEqual(batch.body.results.map((r) => r.status), [202, 202], batch.text);
    let doc;
    await waitFor(async () => { doc = await call(b, 'GET', '/v1/documents/c-1', I, 200); return doc.body.state === 'indexed'; }, { what: 'c-1 indexed' });
    await call(b, 'GET', `/v1/jobs/${doc.body.job_id}`, I, 200);
    await call(b, 'GET', '/v1/jobs/no-such-job', I, [404, 'job_not_found']);
    await call(b, 'GET', '/v1/documents/missing', I, [404, 'document_not_found']);
    await call(b, 'POST', '/v1/search', { ...I, body: { query: '検索', top_k: 3 } }, 200);
    await call(b, 'POST', '/v1/search', { ...I, body: { query: 'contract', top_k: 3, mode: 'keyword' } }, 200);
    await call(b, 'POST', '/v1/search', { ...I, body: { nope: 1 } }, [422, 'unknown_field']);
    await call(b, 'POST', '/v1/search', { ...I, raw: '{not json' }, [400, 'invalid_json']);
    await waitFor(async () => (await call(b, 'GET', '/v1/documents/c-2', I, 200)).body.state === 'indexed', { what: 'c-2 indexed' });
    await call(b, 'POST', '/v1/documents/c-2/reindex', I, 202);
    await call(b, 'DELETE', '/v1/documents/c-3', I, 202);
    await call(b, 'PUT', '/v1/documents/c-4', { ...I, body: { text: 'x', unknown: true } }, [422, 'unknown_field']);
    await call(b, 'GET', '/v1/documents/c-1', {}, [401, 'unauthorized']);
    await call(b, 'GET', '/v1/documents/c-1', { token: 'wrong' }, [401, 'unauthorized']);
    // The admin token is no tenant's token.
    await call(b, 'GET', '/v1/documents/c-1', A, [401, 'unauthorized']);
    await call(b, 'GET', '/v1/no/such/route', I, [404, 'not_found']);
    // The tenant's listing of its documents: pages, filters, refusals.
    const listed = await call(b, 'GET', '/v1/documents?limit=2', I, 200);
    assert.equal(listed.body.documents.length, 2, listed.text);
    await call(b, 'GET', `/v1/documents?cursor=${encodeURIComponent(listed.body.next_cursor)}&state=indexed&updated_since=0`, I, 200);
    await call(b, 'GET', '/v1/documents?state=nope', I, [422, 'invalid_field']);
    await call(b, 'GET', '/v1/documents?limit=101', I, [422, 'invalid_field']);

    // Syncs: a session, then each refusal of the protocol.
    const s = await call(b, 'POST', '/v1/syncs', { ...I, body: { source: 'contract' } }, 201);
    const sid = s.body.sync_id;
    await call(b, 'PUT', '/v1/documents/s-1', { ...I, body: { text: 'synced one', source: 'contract', sync_id: sid } }, 202);
    await call(b, 'POST', `/v1/syncs/${sid}/seen`, { ...I, body: { documents: [{ doc_id: 's-1', content_hash: '0'.repeat(64) }] } }, 200);
    await call(b, 'GET', `/v1/syncs/${sid}`, I, 200);
    await call(b, 'POST', `/v1/syncs/${sid}/commit`, { ...I, body: {} }, 202);
    await call(b, 'GET', '/v1/syncs/no-such-sync', I, [404, 'sync_not_found']);
    await call(b, 'POST', '/v1/syncs/no-such-sync/commit', { ...I, body: {} }, [404, 'sync_not_found']);
    // A committed session takes no more writes.
    await call(b, 'PUT', '/v1/documents/s-2', { ...I, body: { text: 'too late', source: 'contract', sync_id: sid } }, [409, 'sync_not_open']);
    await call(b, 'POST', `/v1/syncs/${sid}/seen`, { ...I, body: { documents: [{ doc_id: 's-1', content_hash: '0'.repeat(64) }] } }, [409, 'sync_not_open']);
    // Of two open sessions, the later commit wins.
    const early = (await call(b, 'POST', '/v1/syncs', { ...I, body: { source: 'contract' } }, 201)).body.sync_id;
    const late = (await call(b, 'POST', '/v1/syncs', { ...I, body: { source: 'contract' } }, 201)).body.sync_id;
    await call(b, 'PUT', '/v1/documents/s-1', { ...I, body: { text: 'synced one', source: 'contract', sync_id: late } }, 200);
    await call(b, 'PUT', '/v1/documents/s-2', { ...I, body: { text: 'synced two', source: 'contract', sync_id: late } }, 202);
    await call(b, 'POST', `/v1/syncs/${late}/commit`, { ...I, body: {} }, 202);
    await call(b, 'POST', `/v1/syncs/${early}/commit`, { ...I, body: {} }, [409, 'sync_superseded']);
    // A session that saw nothing would delete the whole source: refused
    // unless allowed.
    const empty = (await call(b, 'POST', '/v1/syncs', { ...I, body: { source: 'contract' } }, 201)).body.sync_id;
    await call(b, 'POST', `/v1/syncs/${empty}/commit`, { ...I, body: {} }, [409, 'sync_delete_guard']);
    await call(b, 'GET', `/v1/syncs/${empty}`, I, 200);
    await call(b, 'POST', `/v1/syncs/${empty}/commit`, { ...I, body: { allow_mass_delete: true } }, 202);
    // The tenant's listings of its sessions and of a source's documents.
    const syncs = await call(b, 'GET', '/v1/syncs?source=contract&limit=2', I, 200);
    assert.deepEqual(syncs.body.syncs.map((x) => x.sync_id), [empty, late], syncs.text);
    await call(b, 'GET', `/v1/syncs?cursor=${syncs.body.next_cursor}&state=superseded`, I, 200);
    await call(b, 'GET', '/v1/syncs?cursor=abc', I, [422, 'invalid_field']);
    const ofSource = await call(b, 'GET', '/v1/documents?source=contract', I, 200);
    assert.deepEqual(ofSource.body.documents.map((d) => d.doc_id), ['s-1', 's-2'], ofSource.text);

    // Tenants.
    await call(b, 'POST', '/v1/admin/tenants', { ...A, body: { tenant_id: 'contract', quotas: { documents_max: 100 } } }, 201);
    await call(b, 'POST', '/v1/admin/tenants', { ...A, body: { tenant_id: 'contract' } }, [409, 'tenant_exists']);
    await call(b, 'GET', '/v1/admin/tenants?limit=10', A, 200);
    await call(b, 'GET', '/v1/admin/tenants/contract', A, 200);
    await call(b, 'GET', '/v1/admin/tenants/nobody', A, [404, 'tenant_not_found']);
    await call(b, 'PUT', '/v1/admin/tenants/contract/quotas', { ...A, body: { bytes_max: 1000000 } }, 200);
    const tok = await call(b, 'POST', '/v1/admin/tenants/contract/tokens', { ...A, body: { scopes: ['ingest', 'search'] } }, 201);
    await call(b, 'PUT', '/v1/documents/t-1', { token: tok.body.token, body: { text: 'a tenant document' } }, 202);
    await call(b, 'GET', '/v1/admin/tenants/contract/tokens', A, 200);
    await call(b, 'POST', '/v1/admin/tenants/contract/disable', A, 200);
    await call(b, 'GET', '/v1/documents/t-1', { token: tok.body.token }, [401, 'tenant_disabled']);
    await call(b, 'POST', '/v1/admin/tenants/contract/enable', A, 200);
    await call(b, 'DELETE', `/v1/admin/tenants/contract/tokens/${tok.body.token_id}`, A, 200);
    await call(b, 'GET', '/v1/documents/t-1', { token: tok.body.token }, [401, 'unauthorized']);
    await call(b, 'DELETE', '/v1/admin/tenants/contract/tokens/nope', A, [404, 'token_not_found']);

    // A tenant's move to the other shard: started, read, paused, resumed,
    // cancelled (tests/e2e/moves.test.mjs drives one to its end), and the
    // refusals on the way.
    await call(b, 'POST', '/v1/admin/tenants', { ...A, body: { tenant_id: 'mover', shard: 0 } }, 201);
    await call(b, 'POST', '/v1/admin/tenants/mover/move', { ...A, body: { shard: 0 } }, [422, 'invalid_field']);
    await call(b, 'POST', '/v1/admin/tenants/mover/move', { ...A, body: { shard: 2 } }, [422, 'invalid_field']);
    await call(b, 'POST', '/v1/admin/tenants/nobody/move', { ...A, body: { shard: 1 } }, [404, 'tenant_not_found']);
    const mv = await call(b, 'POST', '/v1/admin/tenants/mover/move', { ...A, body: { shard: 1 } }, 202);
    const moveId = mv.body.move_id;
    assert.equal(mv.body.state, 'copying', mv.text);
    await call(b, 'POST', '/v1/admin/tenants/mover/move', { ...A, body: { shard: 1 } }, [503, 'tenant_moving']);
    const moves = await call(b, 'GET', '/v1/admin/moves?limit=5', A, 200);
    assert.deepEqual(moves.body.moves.map((m) => m.move_id), [moveId], moves.text);
    await call(b, 'GET', '/v1/admin/moves?limit=0', A, [422, 'invalid_field']);
    await call(b, 'GET', `/v1/admin/moves/${moveId}`, A, 200);
    await call(b, 'GET', '/v1/admin/moves/no-such-move', A, [404, 'move_not_found']);
    await call(b, 'POST', `/v1/admin/moves/${moveId}/resume`, A, [409, 'move_state']);
    assert.equal((await call(b, 'POST', `/v1/admin/moves/${moveId}/pause`, A, 200)).body.state, 'paused');
    await call(b, 'POST', `/v1/admin/moves/${moveId}/pause`, A, [409, 'move_state']);
    assert.equal((await call(b, 'POST', `/v1/admin/moves/${moveId}/resume`, A, 200)).body.state, 'copying');
    assert.equal((await call(b, 'POST', `/v1/admin/moves/${moveId}/cancel`, A, 200)).body.state, 'cancelling');
    await call(b, 'POST', `/v1/admin/moves/${moveId}/cancel`, A, [409, 'move_state']);
    await call(b, 'POST', '/v1/admin/moves/no-such-move/pause', A, [404, 'move_not_found']);
    await call(b, 'POST', '/v1/admin/moves/no-such-move/resume', A, [404, 'move_not_found']);
    await call(b, 'POST', '/v1/admin/moves/no-such-move/cancel', A, [404, 'move_not_found']);

    // The console's reads, repair, dead letters and redrives.
    await call(b, 'GET', '/v1/admin/documents/summary', A, 200);
    await call(b, 'GET', '/v1/admin/documents/summary?tenant_id=contract', A, 200);
    await call(b, 'GET', '/v1/admin/documents?limit=2', A, 200);
    await call(b, 'GET', '/v1/admin/documents?state=nope', A, [422, 'invalid_field']);
    await call(b, 'GET', '/v1/admin/jobs/timeline', A, 200);
    await call(b, 'GET', '/v1/admin/jobs/timeline?bucket_seconds=0', A, [422, 'invalid_field']);
    await triggerCron(b);
    await call(b, 'GET', '/v1/admin/repair/runs?limit=5', A, 200);
    await call(b, 'GET', '/v1/admin/dead-letters/summary', A, 200);
    await call(b, 'GET', '/v1/admin/dead-letters?limit=5', A, 200);
    await call(b, 'GET', '/v1/admin/dead-letters?limit=0', A, [422, 'invalid_field']);
    const plan = await call(b, 'POST', '/v1/admin/redrives', { ...A, body: { filter: {} } }, 200);
    await call(b, 'POST', '/v1/admin/redrives', { ...A, body: { plan_id: plan.body.plan.plan_id } }, 202);
    await call(b, 'GET', '/v1/admin/redrives/no-such-redrive', A, [404, 'redrive_not_found']);
    // A tenant's token is not the admin token.
    await call(b, 'GET', '/v1/admin/dead-letters/summary', I, [403, 'forbidden']);

    // Generations and backfills.
    await call(b, 'GET', '/v1/admin/generations', A, 200);
    await call(b, 'GET', '/v1/admin/shards', A, 200);
    await call(b, 'POST', '/v1/admin/generations/1/retire', A, [409, 'generation_in_use']);
    await call(b, 'POST', '/v1/admin/generations/99/activate', A, [404, 'generation_not_found']);
    await call(b, 'POST', '/v1/admin/generations/99/retire', A, [404, 'generation_not_found']);
    const bf = await call(b, 'POST', '/v1/admin/reindex', { ...A, body: { scope: 'all', page_size: 1 } }, 202);
    const id = bf.body.backfill.backfill_id;
    await call(b, 'POST', '/v1/admin/reindex', { ...A, body: { scope: 'all' } }, [409, 'backfill_active']);
    await call(b, 'GET', '/v1/admin/reindex', A, 200);
    await call(b, 'GET', `/v1/admin/reindex/${id}`, A, 200);
    await call(b, 'POST', `/v1/admin/reindex/${id}/pause`, A, 200);
    await call(b, 'POST', `/v1/admin/reindex/${id}/pause`, A, [409, 'backfill_state']);
    await call(b, 'POST', `/v1/admin/reindex/${id}/resume`, A, 200);
    await call(b, 'POST', `/v1/admin/reindex/${id}/cancel`, A, 200);
    await call(b, 'GET', '/v1/admin/reindex/no-such-backfill', A, [404, 'backfill_not_found']);
    await call(b, 'POST', '/v1/admin/reindex', { ...A, body: { scope: 'config' } }, [409, 'config_unchanged']);
    await call(b, 'POST', '/v1/admin/generations/1/activate', A, [409, 'generation_not_retained']);

    const ops = [];
    for (const [t, item] of Object.entries(DOC.paths)) {
      for (const m of METHODS) if (item[m]) ops.push(`${m.toUpperCase()} ${t}`);
    }
    const never = ops.filter((o) => !successes.has(o));
    // Reading a redrive needs dead letters to redrive, and activating or
    // retiring a generation needs a retained one (a configuration change
    // and a finished backfill): tests/e2e/dead-letters.test.mjs and
    // backfill.test.mjs drive those; here they are checked on their refusals.
    const elsewhere = [
      'GET /v1/admin/redrives/{redrive_id}',
      'POST /v1/admin/generations/{generation}/activate',
      'POST /v1/admin/generations/{generation}/retire',
    ];
    assert.deepEqual(never.filter((o) => !elsewhere.includes(o)), [], `operations never answered with a documented success (seen: ${seen.length} calls)`);
    for (const o of elsewhere) {
      const [m, t] = o.split(' ');
      assert.ok(seen.some((x) => x.startsWith(`${m} ${t} 4`)), `${o} was at least refused as documented`);
    }
  });

  step('5. every documented error code is asserted by a test, under its status', () => {
    const documented = documentedCodes();
    assert.ok(documented.size > 40, `the documented codes were read (${documented.size})`);
    const asserted = assertedCodes();
    assert.ok(asserted.size > 40, `the asserted codes were read (${asserted.size})`);
    const missing = [...documented].filter((c) => !asserted.has(c) && !(c in UNPRODUCIBLE)).sort();
    assert.deepEqual(missing, [], 'documented error codes no test asserts (write the test that produces each: tests/it/api.rs has examples)');
    for (const [c, why] of Object.entries(UNPRODUCIBLE)) {
      assert.ok(documented.has(c), `${c} is listed as unproducible (${why}) but no longer documented: drop it from the list`);
      assert.ok(!asserted.has(c), `${c} is listed as unproducible but ${[...asserted.get(c) ?? []].join(', ')} asserts it: drop it from the list`);
    }
  });
});
