// Tenants, end to end, in the BUILT Worker in workerd (`wrangler dev --env
// local`), as a new operator and their users would run them: onboarding a
// tenant with the admin token, two tenants writing the same doc_id, token
// scopes, revocation, disabling (data kept), storage quotas, the rate limit,
// the admin routes' error contract, INGEST_TOKEN as the built-in `default`
// tenant, TENANTS_MAX, migration 0009 on a database that holds documents,
// and the upgrade of vectors written before tenants existed (no namespace)
// by a full backfill.
//
// Run from the repository root after `make build`:
//   node --test --test-concurrency=1 tests/e2e/tenants.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  ADMIN_TOKEN,
  INGEST_TOKEN,
  REPO_ROOT,
  admin,
  api,
  assertError,
  d1Query,
  docPath,
  eventsIn,
  getBackfill,
  runWrangler,
  search,
  sleep,
  startWorker,
  triggerCron,
  waitFor,
  waitForState,
  withLogs,
} from './helpers.mjs';

const TOKEN_SHAPE = /^tkn_([0-9a-f]{16})_[0-9a-f]{48}$/;
const jobPath = (id) => `/v1/jobs/${encodeURIComponent(id)}`;

/** `POST /v1/admin/tenants`, asserting 201; returns the tenant view. */
async function createTenant(base, tenantId, quotas) {
  const body = quotas === undefined ? { tenant_id: tenantId } : { tenant_id: tenantId, quotas };
  const res = await admin(base, 'POST', '/v1/admin/tenants', body);
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/** `POST /v1/admin/tenants/{id}/tokens`, asserting 201; returns `{token_id, token, scopes, …}`. */
async function mintToken(base, tenantId, scopes) {
  const res = await admin(base, 'POST', `/v1/admin/tenants/${tenantId}/tokens`, { scopes });
  assert.equal(res.status, 201, res.text);
  return res.body;
}

/** A positive integer `Retry-After` header, as a number. */
function retryAfter(res, what) {
  const h = res.headers.get('retry-after');
  assert.match(h ?? '', /^[1-9][0-9]*$/, `${what}: Retry-After ${JSON.stringify(h)}`);
  return Number(h);
}

/** The tenants as listed, without what moves with the clock (this minute's requests). */
async function tenantsSnapshot(base) {
  const res = await admin(base, 'GET', '/v1/admin/tenants?limit=1000');
  assert.equal(res.status, 200, res.text);
  return res.body.tenants.map((t) => ({ ...t, usage: { ...t.usage, requests_this_minute: undefined } }));
}

// ---------------------------------------------------------------------------
describe('tenants on one Worker', () => {
  let worker;
  let base;
  const getWorker = () => worker;
  const step = (name, fn) => it(name, withLogs(getWorker, fn));

  // What the steps share.
  const DOC = 'shared/report';
  const ONLY_A = 'a/only';
  const TEXT = {
    a: 'Emperor penguins waddle across Antarctic glaciers hunting krill beneath floating icebergs.',
    b: 'Quarterly invoices reconcile mortgage payments through automated ledger spreadsheets.',
    default: 'Lighthouse keepers polish brass lenses before stormy nights on the rocky coast.',
    onlyA: 'Volcanic basalt columns cool into hexagonal pillars along rugged coastlines.',
  };
  const QUERY = { a: 'penguins antarctic krill icebergs', b: 'invoices mortgage ledger spreadsheets', default: 'lighthouse brass lenses' };
  const tok = {}; // a, b (both scopes), aSearch (search only)
  const jobs = {};

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

  step('1. onboarding: the admin token creates tenants and mints their tokens', async () => {
    const a = await createTenant(base, 'tenant-a');
    assert.equal(a.tenant_id, 'tenant-a');
    assert.equal(a.state, 'active');
    assert.equal(a.tokens, 0);
    assert.deepEqual(a.usage, { documents: 0, bytes: 0, requests_this_minute: 0, d1_rows: { read: 0, written: 0 } });
    // No quotas given: the configured defaults (docs/configuration.md).
    assert.deepEqual(a.quotas, {
      documents_max: 1_000_000,
      bytes_max: 1_000_000_000,
      requests_per_minute_max: 6000,
      defaults: ['documents_max', 'bytes_max', 'requests_per_minute_max'],
    });
    await createTenant(base, 'tenant-b');

    const full = await mintToken(base, 'tenant-a', ['ingest', 'search']);
    const [, id] = TOKEN_SHAPE.exec(full.token) ?? [];
    assert.ok(id, `token shape: ${full.token}`);
    assert.equal(full.token_id, id, 'the token carries its ID');
    assert.equal(full.tenant_id, 'tenant-a');
    assert.deepEqual(full.scopes, ['ingest', 'search']);
    assert.equal(typeof full.created_at, 'number');
    tok.a = full.token;
    tok.aId = full.token_id;
    const searchOnly = await mintToken(base, 'tenant-a', ['search']);
    assert.deepEqual(searchOnly.scopes, ['search']);
    assert.notEqual(searchOnly.token, full.token);
    tok.aSearch = searchOnly.token;
    tok.b = (await mintToken(base, 'tenant-b', ['search', 'ingest'])).token;

    // The tenant with its tokens; a token list never shows a token or its hash.
    const view = await admin(base, 'GET', '/v1/admin/tenants/tenant-a');
    assert.equal(view.status, 200, view.text);
    assert.equal(view.body.tokens, 2);
    const listed = await admin(base, 'GET', '/v1/admin/tenants/tenant-a/tokens');
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.tokens.map((t) => t.token_id).sort(), [full.token_id, searchOnly.token_id].sort());
    for (const t of listed.body.tokens) {
      assert.deepEqual(Object.keys(t).sort(), ['created_at', 'revoked_at', 'scopes', 'tenant_id', 'token_id'], JSON.stringify(t));
      assert.equal(t.revoked_at, null);
    }
    assert.ok(!listed.text.includes(full.token.slice(22)), 'no secret in the listing');

    // The list, in ID order, paged: the built-in `default` tenant is one of them.
    const all = await admin(base, 'GET', '/v1/admin/tenants');
    assert.equal(all.status, 200, all.text);
    assert.deepEqual(all.body.tenants.map((t) => t.tenant_id), ['default', 'tenant-a', 'tenant-b']);
    assert.equal(all.body.next_cursor, null);
    const seen = [];
    let cursor = '';
    for (let page = 0; page < 5; page++) {
      const res = await admin(base, 'GET', `/v1/admin/tenants?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200, res.text);
      seen.push(...res.body.tenants.map((t) => t.tenant_id));
      if (!res.body.next_cursor) break;
      cursor = res.body.next_cursor;
    }
    assert.deepEqual(seen, ['default', 'tenant-a', 'tenant-b']);
  });

  step('2. two tenants, the same doc_id: each sees only its own document, search results and jobs', async () => {
    const putA = await api(base, 'PUT', docPath(DOC), { text: TEXT.a, metadata: { team: 'x' } }, { token: tok.a });
    const putB = await api(base, 'PUT', docPath(DOC), { text: TEXT.b, metadata: { team: 'x' } }, { token: tok.b });
    assert.equal(putA.status, 202, putA.text);
    assert.equal(putB.status, 202, putB.text);
    assert.equal(putA.body.version, 1);
    assert.equal(putB.body.version, 1, "B's document is its own: version 1, not A's version 2");
    assert.notEqual(putA.body.job_id, putB.body.job_id);
    jobs.a = putA.body.job_id;
    jobs.b = putB.body.job_id;
    const onlyA = await api(base, 'PUT', docPath(ONLY_A), { text: TEXT.onlyA }, { token: tok.a });
    assert.equal(onlyA.status, 202, onlyA.text);

    const viewA = await waitForState(base, DOC, 'indexed', { token: tok.a });
    const viewB = await waitForState(base, DOC, 'indexed', { token: tok.b });
    await waitForState(base, ONLY_A, 'indexed', { token: tok.a });
    assert.equal(viewA.job_id, jobs.a);
    assert.equal(viewB.job_id, jobs.b);

    // Search: each tenant's own text, never the other's, for either query.
    for (const [who, token, own, other] of [['a', tok.a, TEXT.a, TEXT.b], ['b', tok.b, TEXT.b, TEXT.a]]) {
      for (const query of [QUERY.a, QUERY.b]) {
        const s = await search(base, { query, top_k: 50 }, { token });
        assert.equal(s.status, 200, s.text);
        assert.ok(!s.text.includes(other.slice(0, 30)), `${who} was served the other tenant's text: ${s.text}`);
        const ownDocs = who === 'a' ? [DOC, ONLY_A] : [DOC];
        for (const hit of s.body.results) assert.ok(ownDocs.includes(hit.doc_id), s.text);
      }
      const mine = await search(base, { query: QUERY[who], filter: { doc_id: DOC } }, { token });
      assert.equal(mine.body.results[0]?.text, own, mine.text);
    }
    const bOnA = await search(base, { query: 'basalt hexagonal pillars', top_k: 50 }, { token: tok.b });
    assert.ok(!bOnA.body.results.some((r) => r.doc_id === ONLY_A), bOnA.text);
    const bFiltered = await search(base, { query: 'basalt hexagonal pillars', filter: { doc_id: ONLY_A } }, { token: tok.b });
    assert.deepEqual(bFiltered.body.results, [], bFiltered.text);
    const bMeta = await search(base, { query: QUERY.a, top_k: 50, filter: { metadata: { team: 'x' } } }, { token: tok.b });
    assert.ok(bMeta.body.results.every((r) => r.text === TEXT.b), bMeta.text);

    // Jobs: each its own; the other tenant's job ID is not found.
    const jobA = await api(base, 'GET', jobPath(jobs.a), undefined, { token: tok.a });
    assert.equal(jobA.status, 200, jobA.text);
    assert.equal(jobA.body.doc_id, DOC);
    assert.equal(jobA.body.state, 'succeeded');
    assertError(await api(base, 'GET', jobPath(jobs.a), undefined, { token: tok.b }), 404, 'job_not_found', "A's job read with B's token");
    assertError(await api(base, 'GET', jobPath(jobs.b), undefined, { token: tok.a }), 404, 'job_not_found', "B's job read with A's token");
    assertError(await api(base, 'GET', jobPath(jobs.a), undefined, { token: INGEST_TOKEN }), 404, 'job_not_found', "A's job read with INGEST_TOKEN");

    // A's document is not B's to read, delete or reindex.
    assertError(await api(base, 'GET', docPath(ONLY_A), undefined, { token: tok.b }), 404, 'document_not_found', "A's doc via B");
    assertError(await api(base, 'DELETE', docPath(ONLY_A), undefined, { token: tok.b }), 404, 'document_not_found', "DELETE A's doc via B");
    assertError(await api(base, 'POST', `${docPath(ONLY_A)}/reindex`, undefined, { token: tok.b }), 404, 'document_not_found', "reindex A's doc via B");
    assertError(await api(base, 'GET', docPath(ONLY_A), undefined, { token: INGEST_TOKEN }), 404, 'document_not_found', "A's doc via INGEST_TOKEN");
    const stillA = await api(base, 'GET', docPath(ONLY_A), undefined, { token: tok.a });
    assert.equal(stillA.body.latest_version, 1, stillA.text);

    // B deletes its `shared/report`: A's document of the same ID stays.
    const delB = await api(base, 'DELETE', docPath(DOC), undefined, { token: tok.b });
    assert.equal(delB.status, 202, delB.text);
    await waitForState(base, DOC, 'deleted', { token: tok.b });
    const afterDel = await waitForState(base, DOC, 'indexed', { token: tok.a });
    assert.equal(afterDel.latest_version, 1);
    const sA = await search(base, { query: QUERY.a, filter: { doc_id: DOC } }, { token: tok.a });
    assert.equal(sA.body.results[0]?.text, TEXT.a, sA.text);
    const sB = await search(base, { query: QUERY.b, top_k: 50 }, { token: tok.b });
    assert.deepEqual(sB.body.results, [], sB.text);

    // Usage, per tenant: documents whose latest version is not a delete,
    // and the bytes of the texts D1 holds: B's deleted text until cron
    // prunes it, then none.
    assert.equal((await admin(base, 'GET', '/v1/admin/tenants/tenant-b')).body.usage.bytes, Buffer.byteLength(TEXT.b));
    await triggerCron(base);
    const usageA = (await admin(base, 'GET', '/v1/admin/tenants/tenant-a')).body.usage;
    assert.equal(usageA.documents, 2);
    assert.equal(usageA.bytes, Buffer.byteLength(TEXT.a) + Buffer.byteLength(TEXT.onlyA));
    const usageB = (await admin(base, 'GET', '/v1/admin/tenants/tenant-b')).body.usage;
    assert.equal(usageB.documents, 0);
    assert.equal(usageB.bytes, 0);
  });

  step('3. scopes: a search-only token searches and nothing else; tenant tokens do not open /v1/admin', async () => {
    const s = await search(base, { query: QUERY.a, filter: { doc_id: DOC } }, { token: tok.aSearch });
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.results[0]?.text, TEXT.a, 'the search-only token searches its own tenant');
    const cases = [
      ['PUT', docPath(DOC), { text: 'overwritten by a search-only token' }],
      ['PUT', docPath('a/new'), { text: 'written by a search-only token' }],
      ['POST', '/v1/documents', { doc_id: 'a/new', text: 'posted by a search-only token' }],
      ['GET', docPath(DOC), undefined],
      ['DELETE', docPath(DOC), undefined],
      ['POST', `${docPath(DOC)}/reindex`, undefined],
      ['GET', jobPath(jobs.a), undefined],
    ];
    for (const [method, p, body] of cases) {
      assertError(await api(base, method, p, body, { token: tok.aSearch }), 403, 'forbidden', `${method} ${p} with a search-only token`);
    }
    for (const token of [tok.a, tok.aSearch, INGEST_TOKEN]) {
      assertError(await api(base, 'GET', '/v1/admin/tenants', undefined, { token }), 403, 'forbidden', 'a tenant token on /v1/admin');
    }
    assertError(await api(base, 'POST', '/v1/admin/tenants', { tenant_id: 'by-tenant' }, { token: tok.a }), 403, 'forbidden', 'a tenant creating a tenant');
    assertError(await api(base, 'GET', docPath(DOC), undefined, { token: ADMIN_TOKEN }), 401, 'unauthorized', 'the admin token on a tenant route');
    // Nothing was written.
    const view = await api(base, 'GET', docPath(DOC), undefined, { token: tok.a });
    assert.equal(view.body.latest_version, 1, view.text);
    assert.equal(view.body.state, 'indexed');
    assertError(await api(base, 'GET', docPath('a/new'), undefined, { token: tok.a }), 404, 'document_not_found', 'nothing written by the search-only token');
    assertError(await admin(base, 'GET', '/v1/admin/tenants/by-tenant'), 404, 'tenant_not_found', 'no tenant created by a tenant');
  });

  step('4. revocation: a revoked token is refused at its next request; other tokens go on', async () => {
    const extra = await mintToken(base, 'tenant-a', ['ingest', 'search']);
    assert.equal((await api(base, 'GET', docPath(DOC), undefined, { token: extra.token })).status, 200);

    // Another tenant's path does not reach A's token.
    assertError(await admin(base, 'DELETE', `/v1/admin/tenants/tenant-b/tokens/${extra.token_id}`), 404, 'token_not_found', "revoking A's token under B");
    assert.equal((await api(base, 'GET', docPath(DOC), undefined, { token: extra.token })).status, 200, 'still valid');

    const del = await admin(base, 'DELETE', `/v1/admin/tenants/tenant-a/tokens/${extra.token_id}`);
    assert.equal(del.status, 200, del.text);
    assert.equal(del.body.token_id, extra.token_id);
    assert.equal(typeof del.body.revoked_at, 'number');
    assert.ok(!('token' in del.body), 'the answer does not show the token');
    for (const [method, p, body] of [['GET', docPath(DOC)], ['POST', '/v1/search', { query: QUERY.a }], ['PUT', docPath('a/revoked'), { text: 'after revocation' }]]) {
      assertError(await api(base, method, p, body, { token: extra.token }), 401, 'unauthorized', `${method} ${p} with a revoked token`);
    }
    // Revoking again changes nothing and answers the same.
    const again = await admin(base, 'DELETE', `/v1/admin/tenants/tenant-a/tokens/${extra.token_id}`);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.revoked_at, del.body.revoked_at);

    const listed = await admin(base, 'GET', '/v1/admin/tenants/tenant-a/tokens');
    assert.equal(listed.body.tokens.find((t) => t.token_id === extra.token_id)?.revoked_at, del.body.revoked_at, listed.text);
    assert.equal((await admin(base, 'GET', '/v1/admin/tenants/tenant-a')).body.tokens, 2, 'live tokens');
    assert.equal((await api(base, 'GET', docPath(DOC), undefined, { token: tok.a })).status, 200, "A's other token still works");
    assertError(await api(base, 'GET', docPath('a/revoked'), undefined, { token: tok.a }), 404, 'document_not_found', 'nothing written with the revoked token');

    // The right token ID with a wrong secret, and a token of no tenant.
    const forged = `tkn_${tok.aId}_${'0'.repeat(48)}`;
    assertError(await api(base, 'GET', docPath(DOC), undefined, { token: forged }), 401, 'unauthorized', 'a wrong secret');
    assertError(await api(base, 'GET', docPath(DOC), undefined, { token: `tkn_${'f'.repeat(16)}_${'1'.repeat(48)}` }), 401, 'unauthorized', 'an unknown token');
  });

  step('5. disable: 401 tenant_disabled at once; its jobs still run; data kept; enable brings it all back', async () => {
    const LATE = 'a/disable-drill';
    const LATE_TEXT = 'Honeybees dance in figure eights to share the location of clover meadows.';
    const put = await api(base, 'PUT', docPath(LATE), { text: LATE_TEXT, metadata: { drill: 'disable' } }, { token: tok.a });
    assert.equal(put.status, 202, put.text);
    await waitForState(base, LATE, 'indexed', { token: tok.a });
    const dis = await admin(base, 'POST', '/v1/admin/tenants/tenant-a/disable');
    assert.equal(dis.status, 200, dis.text);
    assert.equal(dis.body.state, 'disabled');

    for (const token of [tok.a, tok.aSearch]) {
      for (const [method, p, body] of [['GET', docPath(DOC)], ['POST', '/v1/search', { query: QUERY.a }], ['PUT', docPath('a/while-disabled'), { text: 'written while disabled' }], ['GET', jobPath(jobs.a)]]) {
        assertError(await api(base, method, p, body, { token }), 401, 'tenant_disabled', `${method} ${p} while disabled`);
      }
    }
    // Other tenants go on.
    assert.equal((await api(base, 'GET', docPath(DOC), undefined, { token: tok.b })).status, 200);

    // A job of the disabled tenant runs: the operator re-runs its document
    // (a backfill over metadata only that document has) while it is disabled.
    const start = await admin(base, 'POST', '/v1/admin/reindex', { scope: 'filter', filter: { drill: 'disable' } });
    assert.equal(start.status, 202, start.text);
    const id = start.body.backfill.backfill_id;
    const done = await waitFor(
      async () => {
        await triggerCron(base);
        const v = await getBackfill(base, id);
        return v.state === 'completed' && v;
      },
      { what: 'the backfill to complete while the tenant is disabled', timeoutMs: 60_000, intervalMs: 500 },
    );
    assert.equal(done.progress.total, 1, JSON.stringify(done));
    assert.equal(done.progress.done, 1, JSON.stringify(done));
    const whileDisabled = await admin(base, 'GET', '/v1/admin/tenants/tenant-a');
    assert.equal(whileDisabled.body.state, 'disabled');
    assert.equal(whileDisabled.body.usage.documents, 3, 'its documents are kept');

    const en = await admin(base, 'POST', '/v1/admin/tenants/tenant-a/enable');
    assert.equal(en.status, 200, en.text);
    assert.equal(en.body.state, 'active');
    const kept = await api(base, 'GET', docPath(DOC), undefined, { token: tok.a });
    assert.equal(kept.status, 200, kept.text);
    assert.equal(kept.body.state, 'indexed');
    assert.equal(kept.body.latest_version, 1);
    const s = await search(base, { query: QUERY.a, filter: { doc_id: DOC } }, { token: tok.aSearch });
    assert.equal(s.body.results[0]?.text, TEXT.a, s.text);
    const late = await api(base, 'GET', docPath(LATE), undefined, { token: tok.a });
    assert.equal(late.body.state, 'indexed', late.text);
    assert.equal(late.body.live_version, 2, 'the re-run committed');
    const lines = worker.logs().split('\n');
    const ackAt = lines.findIndex((l) => l.includes('"consume_ack"') && l.includes(late.body.job_id) && l.includes('"committed"'));
    const enabledAt = lines.findIndex((l) => l.includes('"tenant_state"') && l.includes('"tenant-a"') && l.includes('"active"'));
    assert.ok(ackAt >= 0 && enabledAt > ackAt, `the job committed before the enable (log lines ${ackAt}, ${enabledAt})`);
    const sLate = await search(base, { query: 'honeybees clover meadows', filter: { doc_id: LATE } }, { token: tok.a });
    assert.equal(sLate.body.results[0]?.text, LATE_TEXT, sLate.text);
    assert.equal(sLate.body.results[0].version, 2);
    assertError(await api(base, 'GET', docPath('a/while-disabled'), undefined, { token: tok.a }), 404, 'document_not_found', 'nothing written while disabled');
  });

  step('6. quotas: past documents_max or bytes_max a write answers 429 with Retry-After and writes nothing', async () => {
    const docs = await createTenant(base, 'quota-docs', { documents_max: 1 });
    assert.equal(docs.quotas.documents_max, 1);
    assert.deepEqual(docs.quotas.defaults, ['bytes_max', 'requests_per_minute_max']);
    const t = (await mintToken(base, 'quota-docs', ['ingest'])).token;
    assertError(await search(base, { query: 'anything' }, { token: t }), 403, 'forbidden', 'an ingest-only token searching');

    const first = await api(base, 'PUT', docPath('q/one'), { text: 'The first document fits the quota.' }, { token: t });
    assert.equal(first.status, 202, first.text);
    const second = await api(base, 'PUT', docPath('q/two'), { text: 'The second document does not.' }, { token: t });
    assertError(second, 429, 'document_quota_exceeded', 'a second document past documents_max 1');
    retryAfter(second, 'document_quota_exceeded');
    assertError(await api(base, 'GET', docPath('q/two'), undefined, { token: t }), 404, 'document_not_found', 'the refused document is not there');
    const batch = await api(base, 'POST', '/v1/documents', { documents: [{ doc_id: 'q/three', text: 'three' }] }, { token: t });
    assertError(batch, 429, 'document_quota_exceeded', 'a batch past documents_max');
    retryAfter(batch, 'batch');
    assertError(await api(base, 'GET', docPath('q/three'), undefined, { token: t }), 404, 'document_not_found', 'nothing of the batch');
    // A new version of a stored document is not a new document.
    const update = await api(base, 'PUT', docPath('q/one'), { text: 'The first document, edited.' }, { token: t });
    assert.equal(update.status, 202, update.text);
    assert.equal(update.body.version, 2);
    assert.equal((await admin(base, 'GET', '/v1/admin/tenants/quota-docs')).body.usage.documents, 1);
    // A delete frees the room.
    assert.equal((await api(base, 'DELETE', docPath('q/one'), undefined, { token: t })).status, 202);
    const now = await api(base, 'PUT', docPath('q/two'), { text: 'The second document fits now.' }, { token: t });
    assert.equal(now.status, 202, now.text);
    // The operator raises the quota (docs/runbook.md, "Quotas"): one more fits.
    assertError(await api(base, 'PUT', docPath('q/four'), { text: 'four' }, { token: t }), 429, 'document_quota_exceeded', 'still at 1');
    const raised = await admin(base, 'PUT', '/v1/admin/tenants/quota-docs/quotas', { documents_max: 2 });
    assert.equal(raised.status, 200, raised.text);
    assert.equal(raised.body.quotas.documents_max, 2);
    assert.deepEqual(raised.body.quotas.defaults, ['bytes_max', 'requests_per_minute_max']);
    assert.equal((await api(base, 'PUT', docPath('q/four'), { text: 'four' }, { token: t })).status, 202);

    await createTenant(base, 'quota-bytes', { bytes_max: 64 });
    const tb = (await mintToken(base, 'quota-bytes', ['ingest'])).token;
    const forty = 'x'.repeat(40);
    assert.equal((await api(base, 'PUT', docPath('b/one'), { text: forty }, { token: tb })).status, 202);
    const over = await api(base, 'PUT', docPath('b/two'), { text: 'y'.repeat(30) }, { token: tb });
    assertError(over, 429, 'byte_quota_exceeded', '40 + 30 bytes past bytes_max 64');
    retryAfter(over, 'byte_quota_exceeded');
    assertError(await api(base, 'GET', docPath('b/two'), undefined, { token: tb }), 404, 'document_not_found', 'the refused document is not there');
    // Every text D1 holds counts, history included: 40 stored, a new
    // version of 30 does not fit in 64 (70) until the 40 are pruned; one of
    // 20 does (60).
    assertError(await api(base, 'PUT', docPath('b/one'), { text: 'z'.repeat(30) }, { token: tb }), 429, 'byte_quota_exceeded', 'the superseded text still counts');
    assert.equal((await api(base, 'PUT', docPath('b/one'), { text: 'w'.repeat(20) }, { token: tb })).status, 202);
    let usage = (await admin(base, 'GET', '/v1/admin/tenants/quota-bytes')).body.usage;
    assert.deepEqual([usage.documents, usage.bytes], [1, 60]);
    // Once version 2 is live, cron prunes version 1's text and gives its
    // bytes back (TEXT_RETENTION_SECONDS = 0): then 30 more fit.
    await waitForState(base, 'b/one', 'indexed', { token: tb, liveVersion: 2 });
    await triggerCron(base);
    usage = (await admin(base, 'GET', '/v1/admin/tenants/quota-bytes')).body.usage;
    assert.deepEqual([usage.documents, usage.bytes], [1, 20]);
    assert.equal((await api(base, 'PUT', docPath('b/one'), { text: 'z'.repeat(30) }, { token: tb })).status, 202);
  });

  step('7. rate limit: the request past requests_per_minute_max answers 429 rate_limited with Retry-After', async () => {
    await createTenant(base, 'rate-3', { requests_per_minute_max: 3 });
    const t = (await mintToken(base, 'rate-3', ['ingest', 'search'])).token;
    // The count is per clock minute: do the four requests within one.
    const into = Date.now() % 60_000;
    if (into > 45_000) await sleep(60_000 - into + 250);
    for (let i = 1; i <= 3; i++) {
      assertError(await api(base, 'GET', docPath('r/none'), undefined, { token: t }), 404, 'document_not_found', `request ${i} is admitted`);
    }
    const fourth = await api(base, 'PUT', docPath('r/doc'), { text: 'one request too many' }, { token: t });
    assertError(fourth, 429, 'rate_limited', 'the 4th request of the minute');
    const wait = retryAfter(fourth, 'rate_limited');
    assert.ok(wait <= 60, `Retry-After is the rest of the minute: ${wait}`);
    assertError(await search(base, { query: 'x' }, { token: t }), 429, 'rate_limited', 'a 5th request');
    const view = await admin(base, 'GET', '/v1/admin/tenants/rate-3');
    assert.equal(view.body.usage.requests_this_minute, 3, view.text);
    assert.equal(view.body.usage.documents, 0, 'the refused PUT wrote nothing');
    // The limit is the tenant's: others are not slowed down.
    assert.equal((await api(base, 'GET', docPath(DOC), undefined, { token: tok.a })).status, 200);
    assert.equal((await api(base, 'GET', '/v1/jobs/00000000-0000-0000-0000-000000000000')).status, 404, 'INGEST_TOKEN is not limited by it');
  });

  step('8. bad input on every tenant route answers JSON with a stable code, and changes nothing', async () => {
    const tenantsBefore = await tenantsSnapshot(base);
    const tokensBefore = (await admin(base, 'GET', '/v1/admin/tenants/tenant-a/tokens')).body;
    const raw = (method, p, body, headers = {}) => api(base, method, p, body, { token: ADMIN_TOKEN, headers });
    const create = (body, headers) => raw('POST', '/v1/admin/tenants', body, headers);
    const mint = (body, tenant = 'tenant-a') => raw('POST', `/v1/admin/tenants/${tenant}/tokens`, body);
    const cases = [
      // POST /v1/admin/tenants
      ['tenant_id with capitals', () => create({ tenant_id: 'Acme' }), 422, 'invalid_field'],
      ['tenant_id with a space', () => create({ tenant_id: 'a b' }), 422, 'invalid_field'],
      ['tenant_id with a slash', () => create({ tenant_id: 'a/b' }), 422, 'invalid_field'],
      ['tenant_id of 65 bytes', () => create({ tenant_id: 'a'.repeat(65) }), 422, 'invalid_field'],
      ['tenant_id empty', () => create({ tenant_id: '' }), 422, 'invalid_field'],
      ['tenant_id a number', () => create({ tenant_id: 7 }), 422, 'invalid_field'],
      ['tenant_id missing', () => create({ quotas: { documents_max: 1 } }), 422, 'invalid_field'],
      ['duplicate tenant', () => create({ tenant_id: 'tenant-a' }), 409, 'tenant_exists'],
      ['the built-in default tenant', () => create({ tenant_id: 'default' }), 409, 'tenant_exists'],
      ['unknown field', () => create({ tenant_id: 'new-one', plan: 'gold' }), 422, 'unknown_field'],
      ['unknown quota', () => create({ tenant_id: 'new-one', quotas: { vectors_max: 1 } }), 422, 'unknown_field'],
      ['negative quota', () => create({ tenant_id: 'new-one', quotas: { documents_max: -1 } }), 422, 'invalid_field'],
      ['fractional quota', () => create({ tenant_id: 'new-one', quotas: { bytes_max: 1.5 } }), 422, 'invalid_field'],
      ['quota a string', () => create({ tenant_id: 'new-one', quotas: { requests_per_minute_max: '10' } }), 422, 'invalid_field'],
      ['quotas not an object', () => create({ tenant_id: 'new-one', quotas: [1] }), 422, 'invalid_field'],
      ['non-JSON body', () => create('{"tenant_id": "new-one"'), 400, 'invalid_json'],
      ['a JSON array body', () => create('[]'), 400, 'invalid_body'],
      ['Content-Type text/plain', () => create(JSON.stringify({ tenant_id: 'new-one' }), { 'Content-Type': 'text/plain' }), 415, 'unsupported_media_type'],
      // GET /v1/admin/tenants
      ['list limit 0', () => raw('GET', '/v1/admin/tenants?limit=0'), 422, 'invalid_field'],
      ['list limit 1001', () => raw('GET', '/v1/admin/tenants?limit=1001'), 422, 'invalid_field'],
      // GET /v1/admin/tenants/{id}
      ['unknown tenant', () => raw('GET', '/v1/admin/tenants/nobody'), 404, 'tenant_not_found'],
      ['bad tenant in the path', () => raw('GET', '/v1/admin/tenants/Not%20A%20Tenant'), 422, 'invalid_field'],
      // disable / enable
      ['disable an unknown tenant', () => raw('POST', '/v1/admin/tenants/nobody/disable'), 404, 'tenant_not_found'],
      ['enable an unknown tenant', () => raw('POST', '/v1/admin/tenants/nobody/enable'), 404, 'tenant_not_found'],
      ['disable a bad tenant id', () => raw('POST', '/v1/admin/tenants/BAD/disable'), 422, 'invalid_field'],
      // POST /v1/admin/tenants/{id}/tokens
      ['scopes empty', () => mint({ scopes: [] }), 422, 'invalid_field'],
      ['scope unknown', () => mint({ scopes: ['admin'] }), 422, 'invalid_field'],
      ['scopes a string', () => mint({ scopes: 'ingest' }), 422, 'invalid_field'],
      ['scopes repeated', () => mint({ scopes: ['ingest', 'ingest'] }), 422, 'invalid_field'],
      ['scope a number', () => mint({ scopes: [1] }), 422, 'invalid_field'],
      ['scopes missing', () => mint({}), 422, 'invalid_field'],
      ['token: unknown field', () => mint({ scopes: ['search'], expires_at: 0 }), 422, 'unknown_field'],
      ['token: non-JSON body', () => mint('scopes=search'), 400, 'invalid_json'],
      ['token for an unknown tenant', () => mint({ scopes: ['search'] }, 'nobody'), 404, 'tenant_not_found'],
      ['token for a bad tenant id', () => mint({ scopes: ['search'] }, 'UPPER'), 422, 'invalid_field'],
      // GET /v1/admin/tenants/{id}/tokens
      ['tokens of an unknown tenant', () => raw('GET', '/v1/admin/tenants/nobody/tokens'), 404, 'tenant_not_found'],
      // DELETE /v1/admin/tenants/{id}/tokens/{token_id}
      ['revoke an unknown token', () => raw('DELETE', '/v1/admin/tenants/tenant-a/tokens/0000000000000000'), 404, 'token_not_found'],
      ['revoke under an unknown tenant', () => raw('DELETE', `/v1/admin/tenants/nobody/tokens/${tok.aId}`), 404, 'tenant_not_found'],
      // methods and routes
      ['PUT the tenant list', () => raw('PUT', '/v1/admin/tenants', { tenant_id: 'new-one' }), 405, 'method_not_allowed'],
      ['DELETE a tenant', () => raw('DELETE', '/v1/admin/tenants/tenant-a'), 405, 'method_not_allowed'],
      ['GET disable', () => raw('GET', '/v1/admin/tenants/tenant-a/disable'), 405, 'method_not_allowed'],
      ['unknown tenant action', () => raw('POST', '/v1/admin/tenants/tenant-a/suspend'), 404, 'not_found'],
      // credentials
      ['no token', () => api(base, 'POST', '/v1/admin/tenants', { tenant_id: 'new-one' }, { token: null }), 401, 'unauthorized'],
      ['a wrong token', () => api(base, 'POST', '/v1/admin/tenants', { tenant_id: 'new-one' }, { token: 'nope' }), 401, 'unauthorized'],
      ['INGEST_TOKEN', () => api(base, 'POST', '/v1/admin/tenants', { tenant_id: 'new-one' }, { token: INGEST_TOKEN }), 403, 'forbidden'],
      ["a tenant's token", () => api(base, 'POST', `/v1/admin/tenants/tenant-a/tokens`, { scopes: ['ingest'] }, { token: tok.a }), 403, 'forbidden'],
      ['a malformed tenant token', () => api(base, 'GET', docPath(DOC), undefined, { token: 'tkn_xyz' }), 401, 'unauthorized'],
    ];
    const failures = [];
    for (const [what, send, status, code] of cases) {
      const res = await send();
      const json = (res.headers.get('content-type') ?? '').startsWith('application/json');
      if (res.status !== status || res.body?.error?.code !== code || typeof res.body?.error?.message !== 'string' || !json) {
        failures.push(`${what}: expected ${status} ${code}, got ${res.status} ${res.headers.get('content-type')} ${res.text.slice(0, 300)}`);
      }
    }
    assert.deepEqual(failures, [], `unexpected answers:\n${failures.join('\n')}`);

    assert.deepEqual(await tenantsSnapshot(base), tenantsBefore, 'no tenant created or changed');
    assert.deepEqual((await admin(base, 'GET', '/v1/admin/tenants/tenant-a/tokens')).body, tokensBefore, 'no token minted or revoked');
    assert.equal((await api(base, 'GET', docPath(DOC), undefined, { token: tok.a })).status, 200, "A's token still works");
  });

  step('9. INGEST_TOKEN works as before: the built-in default tenant, with every scope', async () => {
    const put = await api(base, 'PUT', docPath(DOC), { text: TEXT.default });
    assert.equal(put.status, 202, put.text);
    assert.equal(put.body.version, 1, "the default tenant's own document");
    const view = await waitForState(base, DOC, 'indexed');
    assert.equal(view.job_id, put.body.job_id);
    const s = await search(base, { query: QUERY.default });
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.results[0]?.text, TEXT.default, s.text);
    for (const query of [QUERY.a, QUERY.b]) {
      const other = await search(base, { query, top_k: 50 });
      assert.ok(other.body.results.every((r) => r.text === TEXT.default), `only the default tenant's text: ${other.text}`);
    }
    const job = await api(base, 'GET', jobPath(put.body.job_id));
    assert.equal(job.status, 200, job.text);
    assert.equal(job.body.state, 'succeeded');
    assertError(await api(base, 'GET', jobPath(put.body.job_id), undefined, { token: tok.a }), 404, 'job_not_found', "the default tenant's job via A");
    const a = await search(base, { query: QUERY.default, top_k: 50 }, { token: tok.a });
    assert.ok(a.body.results.every((r) => r.text !== TEXT.default), a.text);

    const d = await admin(base, 'GET', '/v1/admin/tenants/default');
    assert.equal(d.status, 200, d.text);
    assert.equal(d.body.state, 'active');
    assert.equal(d.body.tokens, 0, 'INGEST_TOKEN is a secret, not a minted token');
    assert.deepEqual([d.body.usage.documents, d.body.usage.bytes], [1, Buffer.byteLength(TEXT.default)]);
  });
});

// ---------------------------------------------------------------------------
describe('TENANTS_MAX (the default tenant counts)', () => {
  let worker;
  const step = (name, fn) => it(name, withLogs(() => worker, fn));
  before(
    async () => {
      worker = await startWorker({ vars: { TENANTS_MAX: '2' } });
    },
    { timeout: 300_000 },
  );
  after(async () => {
    await worker?.stop();
  });

  step('one tenant besides default fits; the next answers 409 tenant_limit and is not created', async () => {
    await createTenant(worker.base, 'only-one');
    const next = await admin(worker.base, 'POST', '/v1/admin/tenants', { tenant_id: 'one-too-many' });
    assertError(next, 409, 'tenant_limit', 'a third tenant with TENANTS_MAX=2');
    assertError(await admin(worker.base, 'GET', '/v1/admin/tenants/one-too-many'), 404, 'tenant_not_found', 'not created');
    const all = await admin(worker.base, 'GET', '/v1/admin/tenants');
    assert.deepEqual(all.body.tenants.map((t) => t.tenant_id), ['default', 'only-one']);
    // The existing ones go on.
    const t = (await mintToken(worker.base, 'only-one', ['ingest'])).token;
    assert.equal((await api(worker.base, 'PUT', docPath('x'), { text: 'still writes' }, { token: t })).status, 202);
  });
});

// ---------------------------------------------------------------------------
describe('migration 0009 on a ledger that holds documents (wrangler d1 migrations apply --local)', () => {
  // A configuration of its own whose migrations directory first holds
  // 0001–0008 (a deployment from before tenants), then 0009 too.
  let dir;
  let config;
  const wr = (...args) => runWrangler([...args, '--local', '--persist-to', path.join(dir, 'state'), '-c', config]);
  const sql = (command) => JSON.parse(wr('d1', 'execute', 'DB', '--json', '--command', command).stdout).at(-1).results;

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingest-e2e-upgrade-'));
    fs.mkdirSync(path.join(dir, 'migrations'));
    config = path.join(dir, 'wrangler.toml');
    fs.writeFileSync(
      config,
      [
        'name = "ingest-upgrade-check"',
        `main = ${JSON.stringify(path.join(REPO_ROOT, 'build', 'entry.mjs'))}`,
        'compatibility_date = "2026-04-01"',
        '[[d1_databases]]',
        'binding = "DB"',
        'database_name = "ingest-ledger-upgrade"',
        'database_id = "upgrade-ledger"',
        `migrations_dir = ${JSON.stringify(path.join(dir, 'migrations'))}`,
        '',
      ].join('\n'),
    );
  });
  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('0009 applies after 0001–0008 and documents already stored; they become the default tenant’s', () => {
    const all = fs.readdirSync(path.join(REPO_ROOT, 'migrations')).filter((f) => f.endsWith('.sql')).sort();
    const at = all.indexOf('0009_tenants.sql');
    assert.ok(at > 0, all.join(', '));
    for (const f of all.slice(0, at)) fs.copyFileSync(path.join(REPO_ROOT, 'migrations', f), path.join(dir, 'migrations', f));
    wr('d1', 'migrations', 'apply', 'DB');
    // Two documents stored before tenants existed: one live, one deleted.
    sql(
      "INSERT INTO documents (doc_id, latest_version, live_version, created_at, updated_at) VALUES ('legacy/a', 1, 1, 1, 1), ('legacy/b', 2, 2, 1, 1);" +
        "INSERT INTO versions (doc_id, version, is_delete, content_hash, content_type, metadata, text_bytes, part_count, created_at) VALUES " +
        "('legacy/a', 1, 0, 'h1', 'text/plain', '{}', 11, 1, 1), ('legacy/b', 1, 0, 'h2', 'text/plain', '{}', 5, 1, 1), ('legacy/b', 2, 1, 'h3', 'text/plain', '{}', 0, 0, 1);" +
        "INSERT INTO version_parts (doc_id, version, part, text) VALUES ('legacy/a', 1, 0, 'hello world'), ('legacy/b', 1, 0, 'bye!!')",
    );

    // 0009, and every migration after it (0010's keyword index over these rows too).
    for (const f of all.slice(at)) fs.copyFileSync(path.join(REPO_ROOT, 'migrations', f), path.join(dir, 'migrations', f));
    const out = wr('d1', 'migrations', 'apply', 'DB');
    assert.match(out.stdout, /0009_tenants\.sql/, out.stdout);
    const applied = sql('SELECT name FROM d1_migrations ORDER BY id').map((r) => r.name);
    assert.deepEqual(applied, all);

    // The generated columns: every row written before tenants is the default tenant's.
    assert.deepEqual(sql('SELECT doc_id, tenant_id FROM documents ORDER BY doc_id'), [
      { doc_id: 'legacy/a', tenant_id: 'default' },
      { doc_id: 'legacy/b', tenant_id: 'default' },
    ]);
    assert.deepEqual(sql('SELECT DISTINCT tenant_id FROM versions UNION SELECT DISTINCT tenant_id FROM version_parts'), [{ tenant_id: 'default' }]);
    // The default tenant, with what it stores: live documents, and the
    // bytes of every text D1 holds (0018: legacy/b's first version, which
    // its tombstone superseded, counts until cron prunes it).
    assert.deepEqual(sql("SELECT tenant_id, state, documents, bytes FROM tenants"), [{ tenant_id: 'default', state: 'active', documents: 1, bytes: 16 }]);
    assert.deepEqual(sql('SELECT doc_id, version, superseded_at IS NOT NULL AS superseded FROM versions ORDER BY doc_id, version'), [
      { doc_id: 'legacy/a', version: 1, superseded: 0 },
      { doc_id: 'legacy/b', version: 1, superseded: 1 },
      { doc_id: 'legacy/b', version: 2, superseded: 0 },
    ]);
    // A tenant-qualified key (tenant, U+001F, doc_id) is that tenant's.
    sql("INSERT INTO documents (doc_id, latest_version, created_at, updated_at) VALUES ('acme' || char(31) || 'legacy/a', 1, 2, 2)");
    assert.deepEqual(sql("SELECT tenant_id, count(*) AS n FROM documents GROUP BY tenant_id ORDER BY tenant_id"), [
      { tenant_id: 'acme', n: 1 },
      { tenant_id: 'default', n: 2 },
    ]);
    // Applying again is a no-op.
    const again = wr('d1', 'migrations', 'apply', 'DB');
    assert.match(again.stdout + again.stderr, /No migrations to apply/i, again.stdout);
  });
});

// ---------------------------------------------------------------------------
describe('upgrade: vectors written before tenants (no namespace) move to namespace default by a full backfill', () => {
  const DOC = 'legacy/guide';
  const TEXT = 'Sourdough starters of wild yeast leaven rye loaves overnight in cool kitchens.';
  const QUERY = 'sourdough wild yeast rye loaves';
  let worker;
  const step = (name, fn) => it(name, withLogs(() => worker, fn));
  const vectors = (dir = worker.persistDir) => d1Query('VECTORS_DB', dir, 'SELECT id, namespace, doc_id FROM vectors ORDER BY id');

  before(
    async () => {
      worker = await startWorker();
    },
    { timeout: 300_000 },
  );
  after(async () => {
    await worker?.stop();
  });

  let oldIds;
  step('a default-tenant document whose vectors are in no namespace (as 0002_namespaces leaves them) is not found by vector search', async () => {
    const put = await api(worker.base, 'PUT', docPath(DOC), { text: TEXT });
    assert.equal(put.status, 202, put.text);
    await waitForState(worker.base, DOC, 'indexed');
    const ok = await search(worker.base, { query: QUERY });
    assert.equal(ok.body.results[0]?.doc_id, DOC, ok.text);
    const written = await vectors();
    assert.ok(written.length >= 1 && written.every((v) => v.namespace === 'default'), JSON.stringify(written));

    // What a deployment from before tenants holds after migrating: the same
    // ledger rows (a default-tenant key is the bare doc_id) with the vector
    // IDs of that time, derived from the version (`<32 hex of sha256(key)>:
    // <version>:<chunk>`, src/core/ids.rs `legacy_vector_id`: content-derived
    // IDs came after tenants), and those vectors in no namespace (the local
    // index's migration 0002 gives them ''), carrying the version and chunk
    // metadata vectors had then.
    const persistDir = worker.persistDir;
    await worker.stop({ keepState: true });
    const rows = await d1Query('DB', persistDir, `SELECT chunk_index, vector_id FROM chunks WHERE doc_id = '${DOC}' ORDER BY chunk_index`);
    assert.equal(rows.length, written.length, JSON.stringify({ rows, written }));
    const keyHash = createHash('sha256').update(DOC).digest('hex').slice(0, 32);
    const legacyId = (chunk) => `${keyHash}:1:${chunk}`;
    await d1Query('DB', persistDir, rows.map((r) => `UPDATE chunks SET vector_id = '${legacyId(r.chunk_index)}' WHERE vector_id = '${r.vector_id}'`).join(';\n'));
    await d1Query(
      'VECTORS_DB',
      persistDir,
      rows
        .map(
          (r) =>
            `UPDATE vectors SET id = '${legacyId(r.chunk_index)}', namespace = '', ` +
            `metadata = json_set(metadata, '$.version', 1, '$.chunk', ${r.chunk_index}) WHERE id = '${r.vector_id}'`,
        )
        .join(';\n'),
    );
    const legacy = await vectors(persistDir);
    assert.ok(legacy.every((v) => v.namespace === ''), JSON.stringify(legacy));
    oldIds = legacy.map((v) => v.id);
    assert.deepEqual(oldIds, rows.map((r) => legacyId(r.chunk_index)).sort());
    worker = await startWorker({ persistDir });

    const view = await api(worker.base, 'GET', docPath(DOC));
    assert.equal(view.body.state, 'indexed', 'D1, the source of truth, still has it');
    const none = await search(worker.base, { query: QUERY, mode: 'vector' });
    assert.equal(none.status, 200, none.text);
    assert.deepEqual(none.body.results, [], 'vector search asks namespace default, which holds nothing yet');
    // The keyword index is in D1, which keys the document by its tenant already.
    const kw = await search(worker.base, { query: QUERY, mode: 'keyword' });
    assert.equal(kw.body.results[0]?.doc_id, DOC, kw.text);
  });

  step('POST /v1/admin/reindex {"scope": "all"}: every live document re-run; its vectors are written into namespace default', async () => {
    const start = await admin(worker.base, 'POST', '/v1/admin/reindex', { scope: 'all' });
    assert.equal(start.status, 202, start.text);
    const id = start.body.backfill.backfill_id;
    assert.equal(typeof id, 'string', start.text);
    const view = await waitForState(worker.base, DOC, 'indexed', { latestVersion: 2, liveVersion: 2 });
    assert.equal(view.latest_version, 2, 'a re-run is a new version of the same content');
    const job = await api(worker.base, 'GET', `/v1/jobs/${encodeURIComponent(view.job_id)}`);
    assert.equal(job.status, 200, job.text);
    assert.ok(job.body.progress.chunks_total >= 1, job.text);
    // Same content, but the vector IDs are now content-derived, not those of
    // the legacy rows: no vector is kept; every value is copied from the old
    // vectors (getByIds) and written under its new ID into namespace default.
    assert.equal(job.body.progress.chunks_reused, job.body.progress.chunks_total, `values copied from the old vectors, none embedded again: ${job.text}`);
    assert.equal(job.body.progress.chunks_embedded, 0, job.text);
    assert.equal(job.body.progress.chunks_kept, 0, job.text);
    await waitFor(
      async () => {
        await triggerCron(worker.base);
        return (await getBackfill(worker.base, id)).state === 'completed';
      },
      { what: 'the backfill to complete', timeoutMs: 60_000, intervalMs: 500 },
    );
    const s = await search(worker.base, { query: QUERY });
    assert.equal(s.body.results[0]?.doc_id, DOC, s.text);
    assert.equal(s.body.results[0].version, 2);
    // The new version's vectors (new, content-derived IDs) are in namespace
    // default; the legacy ones of version 1 (in none) are deleted.
    await waitFor(
      async () => {
        await triggerCron(worker.base);
        return (await vectors()).every((v) => v.namespace === 'default');
      },
      { what: 'the old vectors to be deleted', timeoutMs: 60_000, intervalMs: 500 },
    );
    const now = await vectors();
    assert.ok(now.length >= 1);
    assert.ok(now.every((v) => !oldIds.includes(v.id) && /^[0-9a-f]{32}\.[0-9a-f]{24}$/.test(v.id)), JSON.stringify({ oldIds, now }));
    const live = await d1Query('DB', worker.persistDir, `SELECT vector_id FROM chunks WHERE doc_id = '${DOC}' AND version = 2 ORDER BY vector_id`);
    assert.deepEqual(now.map((v) => v.id).sort(), live.map((r) => r.vector_id), 'the index holds exactly the live rows\' vectors');
  });
});
