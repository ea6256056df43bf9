// Shards (issue 37), end to end, in the BUILT Worker in workerd with two
// local shards (`SHARDS=2`: the ledgers DB and DB_SHARD_1, the offline
// indexes VECTORS_DB and VECTORS_DB_SHARD_1 of wrangler.toml's local
// profile): tenants placed by the policy and pinned by the operator, each
// tenant's documents, jobs and searches on its own shard only (the same
// document ID in both), the operator's per-shard routes and the shards'
// view, a cron run over both shards, and a revoked token.
//
// Run from the repository root after `make build`:
//   node --test tests/e2e/shards.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admin, api, assertError, d1Query, eventsIn, search, startWorker, triggerCron, waitFor, waitForState, withLogs } from './helpers.mjs';

/** `POST /v1/admin/tenants` with `placement`, asserting 201; the view. */
async function createTenant(base, tenantId, placement = {}) {
  const res = await admin(base, 'POST', '/v1/admin/tenants', { tenant_id: tenantId, ...placement });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/** A token of `tenantId` with both scopes. */
async function mint(base, tenantId) {
  const res = await admin(base, 'POST', `/v1/admin/tenants/${tenantId}/tokens`, { scopes: ['ingest', 'search'] });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/** `SELECT count(*)` of `where` on `table` in the ledger `binding`. */
async function countIn(w, binding, table, where) {
  const rows = await d1Query(binding, w.persistDir, `SELECT count(*) AS n FROM ${table} WHERE ${where}`);
  return rows[0].n;
}

describe('two shards on one Worker', () => {
  let w;
  const step = (name, fn) => it(name, withLogs(() => w, fn));
  const tokens = {};

  before(async () => {
    w = await startWorker({ vars: { SHARDS: '2' } });
  });
  after(async () => {
    await w?.stop();
  });

  step('tenants are placed by the policy or where the operator pins them', async () => {
    // Two equal ledgers: the one with fewer tenants (`default` is on 0).
    assert.equal((await createTenant(w.base, 'auto')).shard, 1);
    assert.equal((await createTenant(w.base, 'left', { shard: 0 })).shard, 0);
    assert.equal((await createTenant(w.base, 'right', { shard: 1 })).shard, 1);
    assertError(await admin(w.base, 'POST', '/v1/admin/tenants', { tenant_id: 'x', shard: 2 }), 422, 'invalid_field');
    const res = await admin(w.base, 'GET', '/v1/admin/tenants');
    assert.equal(res.status, 200, res.text);
    const placed = Object.fromEntries(res.body.tenants.map((t) => [t.tenant_id, t.shard]));
    assert.deepEqual(placed, { auto: 1, default: 0, left: 0, right: 1 });
    tokens.left = (await mint(w.base, 'left')).token;
    tokens.right = await mint(w.base, 'right');
  });

  step("each tenant's documents, jobs and searches stay on its shard", async () => {
    const right = tokens.right.token;
    for (const [token, text] of [
      [tokens.left, 'the left tenant keeps its harbour ledger here'],
      [right, '右のテナントは港湾台帳をここに置く'],
    ]) {
      const res = await api(w.base, 'PUT', '/v1/documents/ledger', { text }, { token });
      assert.equal(res.status, 202, res.text);
    }
    await waitForState(w.base, 'ledger', 'indexed', { token: tokens.left });
    await waitForState(w.base, 'ledger', 'indexed', { token: right });
    // Rows: each tenant's on its shard only.
    assert.equal(await countIn(w, 'DB', 'documents', "tenant_id = 'left'"), 1);
    assert.equal(await countIn(w, 'DB', 'documents', "tenant_id = 'right'"), 0);
    assert.equal(await countIn(w, 'DB_SHARD_1', 'documents', "tenant_id = 'right'"), 1);
    assert.equal(await countIn(w, 'DB_SHARD_1', 'documents', "tenant_id = 'left'"), 0);
    // The token's secret lives with its tenant; the directory has a pointer.
    assert.equal(await countIn(w, 'DB_SHARD_1', 'tenant_tokens', "tenant_id = 'right'"), 1);
    assert.equal(await countIn(w, 'DB', 'tenant_tokens', "tenant_id = 'right'"), 0);
    assert.equal(await countIn(w, 'DB', 'token_directory', "tenant_id = 'right'"), 1);
    const hits = async (token, query) => {
      const res = await search(w.base, { query, top_k: 5 }, { token });
      assert.equal(res.status, 200, res.text);
      return res.body.results.map((h) => h.text);
    };
    assert.deepEqual(await hits(right, '港湾台帳'), ['右のテナントは港湾台帳をここに置く']);
    assert.deepEqual(await hits(tokens.left, 'harbour ledger'), ['the left tenant keeps its harbour ledger here']);
    assert.ok((await hits(tokens.left, '港湾台帳')).every((t) => !t.includes('港')));
  });

  step("the operator's routes read the shard they name, and the shards' view", async () => {
    const docs = await admin(w.base, 'GET', '/v1/admin/documents?shard=1');
    assert.equal(docs.status, 200, docs.text);
    assert.deepEqual(docs.body.documents.map((d) => d.tenant_id), ['right']);
    assertError(await admin(w.base, 'GET', '/v1/admin/documents?shard=9'), 422, 'invalid_field');
    const res = await admin(w.base, 'GET', '/v1/admin/shards');
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(
      res.body.shards.map((s) => [s.shard, s.tenants, s.takes_new_tenants]),
      [
        [0, 2, true],
        [1, 2, true],
      ],
    );
    for (const s of res.body.shards) assert.ok(s.size_bytes > 0, JSON.stringify(s));
  });

  step('a cron run repairs both shards, and a revoked token is refused', async () => {
    const before = eventsIn(w.logs(), 'repair_run').length;
    await triggerCron(w.base);
    // One run per shard, each logged with its shard (0 is left out); the
    // log lines may reach the test after the handler's answer.
    const runs = await waitFor(
      () => {
        const r = eventsIn(w.logs(), 'repair_run').slice(before);
        return r.length >= 2 && r;
      },
      { what: "both shards' repair_run lines" },
    );
    assert.deepEqual(runs.map((r) => r.shard ?? 0), [0, 1], JSON.stringify(runs));
    for (const r of runs) assert.ok(r.subrequests_used <= 250, JSON.stringify(r));
    const { token_id: id, token } = tokens.right;
    assert.equal((await admin(w.base, 'DELETE', `/v1/admin/tenants/right/tokens/${id}`)).status, 200);
    assert.equal(await countIn(w, 'DB', 'token_directory', "tenant_id = 'right'"), 0);
    assertError(await api(w.base, 'GET', '/v1/documents/ledger', undefined, { token }), 401, 'unauthorized');
  });
});
