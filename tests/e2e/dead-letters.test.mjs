// Dead letters and canary redrives end to end, with the real local queues
// (`ingest-jobs-local` and its dead-letter queue `ingest-jobs-local-dlq`):
//
// 1. with `LOCAL_INDEX_REJECT_DOC_PREFIX=poison-` the local index rejects
//    upserts of `poison-*` documents (a permanent `index_rejected`): they end
//    `failed`, their letters are archived in D1 (by the consumer and again by
//    the DLQ's consumer) and the read-only admin routes show them;
// 2. a canary redrive while the cause is still there stops after the canaries
//    (`canary_failed`) without sending the rest;
// 3. the cause is removed (the worker restarts on the same state directory
//    without the variable): a preflight changes nothing, the executed plan
//    completes and the document is indexed again as a new version;
// 4. the admin routes take only the admin token.
//
// Run from the repository root: node --test --test-concurrency=1 tests/e2e/

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { ADMIN_TOKEN, INGEST_TOKEN, admin, api, assertError, docPath, eventsIn, lettersReceived, search, startWorker, triggerCron, waitFor, waitForState, withLogs } from './helpers.mjs';

const POISON_VARS = { LOCAL_INDEX_REJECT_DOC_PREFIX: 'poison-' };
const FIRST = 'poison-1';
const CANARY_DOCS = ['poison-2', 'poison-3', 'poison-4', 'poison-5', 'poison-6'];
const POISONED = [FIRST, ...CANARY_DOCS];
const HEALTHY = 'healthy-1';
const textOf = (id) => `Document ${id}: lighthouse keepers log tides, gulls and passing freighters in the ${id} ledger.`;

let worker;
let base;
const getWorker = () => worker;
/** `it` whose failures print the tail of the wrangler log. */
const step = (name, fn) => it(name, withLogs(getWorker, fn));

before(
  async () => {
    worker = await startWorker({ vars: POISON_VARS });
    base = worker.base;
  },
  { timeout: 300_000 },
);

after(async () => {
  await worker?.stop();
});

/** Every letter matching `query` (a query string without `limit`/`cursor`), paging with `limit`. */
async function allLetters(query = '', limit = 50) {
  const letters = [];
  let cursor = null;
  for (let page = 0; page < 100; page++) {
    const q = new URLSearchParams(query);
    q.set('limit', String(limit));
    if (cursor) q.set('cursor', cursor);
    const res = await admin(base, 'GET', `/v1/admin/dead-letters?${q}`);
    assert.equal(res.status, 200, res.text);
    assert.ok(Array.isArray(res.body.letters), res.text);
    letters.push(...res.body.letters);
    cursor = res.body.next_cursor;
    if (cursor === null) return letters;
    assert.equal(typeof cursor, 'string', res.text);
  }
  throw new Error('the dead-letter listing did not end within 100 pages');
}

/**
 * Waits until `docIds` each have a letter for `version`, archived by the
 * consumer and received by the DLQ's consumer (which confirms it without
 * counting it again), so that nothing moves under a preflight's plan id.
 */
async function waitForLetters(docIds, version) {
  let mine = [];
  try {
    return await waitFor(
      async () => {
        const letters = await allLetters('bucket=index_rejected');
        mine = letters.filter((l) => docIds.includes(l.doc_id) && l.version === version);
        const done = mine.length === docIds.length && lettersReceived(worker.logs(), mine.map((l) => l.job_id));
        return done ? mine : null;
      },
      // The local dead-letter queue delivers in batches, and with the native
      // tests beside these its consumer can be late; a letter whose first
      // confirmation failed is retried after DLQ_RETRY_DELAY_MIN_SECONDS
      // (60 s): 180 s covers one such retry.
      { timeoutMs: 180_000, intervalMs: 300, what: `letters of ${docIds.join(', ')} v${version} archived and received` },
    );
  } catch (err) {
    // What the failure needs to be understood: which letters are archived,
    // which the DLQ's consumer confirmed, and what it deferred and why.
    const ids = new Set(mine.map((l) => l.job_id));
    const of = (event) => eventsIn(worker.logs(), event).filter((e) => ids.has(e.job_id));
    err.message += `\narchived: ${JSON.stringify(mine.map((l) => [l.doc_id, l.job_id]))}` +
      `\nreceived: ${JSON.stringify(of('dead_letter_received'))}` +
      `\ndeferred: ${JSON.stringify(of('dead_letter_deferred'))}` +
      `\nsent: ${JSON.stringify(of('consume_dead_letter'))}`;
    throw err;
  }
}

/** Polls `GET /v1/admin/redrives/{id}` (which also advances it) until `pred(view)`. */
async function waitForRedrive(id, pred, what) {
  return waitFor(
    async () => {
      const res = await admin(base, 'GET', `/v1/admin/redrives/${encodeURIComponent(id)}`);
      assert.equal(res.status, 200, res.text);
      return pred(res.body) ? res.body : null;
    },
    { timeoutMs: 60_000, intervalMs: 300, what },
  );
}

async function preflight(body) {
  const res = await admin(base, 'POST', '/v1/admin/redrives', body);
  assert.equal(res.status, 200, res.text);
  assert.equal(res.body.preflight, true, res.text);
  const plan = res.body.plan;
  assert.match(plan.plan_id, /^[0-9a-f]{32}$/, res.text);
  for (const key of ['eligible', 'skipped', 'documents', 'canaries']) assert.ok(Array.isArray(plan[key]), `${key}: ${res.text}`);
  assert.equal(typeof plan.matched, 'number', res.text);
  return plan;
}

async function execute(body, planId) {
  const res = await admin(base, 'POST', '/v1/admin/redrives', { ...body, plan_id: planId });
  assert.equal(res.status, 202, res.text);
  assert.equal(typeof res.body.redrive_id, 'string', res.text);
  assert.ok(res.body.redrive_id.length > 0, res.text);
  assert.equal(res.body.plan_id, planId, res.text);
  return res.body;
}

const auditEvents = (view) => view.audit.map((a) => a.event);

describe('admin routes take only the admin token', () => {
  step('ingest token on /v1/admin/* → 403 forbidden; admin token on /v1/documents → 401', async () => {
    const routes = [
      ['GET', '/v1/admin/dead-letters/summary'],
      ['GET', '/v1/admin/dead-letters'],
      ['GET', '/v1/admin/repair/runs'],
      ['GET', '/v1/admin/redrives/000000000000000000000000'],
      ['POST', '/v1/admin/redrives', { filter: { bucket: 'index_rejected' } }],
    ];
    for (const [method, path, body] of routes) {
      assertError(await api(base, method, path, body, { token: INGEST_TOKEN }), 403, 'forbidden', `${method} ${path} with the ingest token`);
      assertError(await api(base, method, path, body, { token: null }), 401, 'unauthorized', `${method} ${path} without a token`);
      assertError(await api(base, method, path, body, { token: 'nope' }), 401, 'unauthorized', `${method} ${path} with a wrong token`);
    }
    assertError(await api(base, 'PUT', docPath('admin-token-doc'), { text: 'x' }, { token: ADMIN_TOKEN }), 401, 'unauthorized', 'PUT with the admin token');
    assertError(await api(base, 'GET', docPath('admin-token-doc'), undefined, { token: ADMIN_TOKEN }), 401, 'unauthorized', 'GET with the admin token');
    assertError(await api(base, 'POST', '/v1/search', { query: 'x' }, { token: ADMIN_TOKEN }), 401, 'unauthorized', 'search with the admin token');
    assertError(await api(base, 'GET', docPath('admin-token-doc')), 404, 'document_not_found', 'nothing was written');

    const ok = await admin(base, 'GET', '/v1/admin/dead-letters/summary');
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual(ok.body, { groups: [] });
    assertError(await admin(base, 'GET', '/v1/admin/redrives/000000000000000000000000'), 404, 'redrive_not_found', 'unknown redrive');
    assertError(await admin(base, 'GET', '/v1/admin/dead-letters?limit=0'), 422, 'invalid_field', 'limit 0');
    assertError(await admin(base, 'POST', '/v1/admin/redrives', { filter: { bucket: 'nope' } }), 422, 'invalid_field', 'unknown bucket');
    assertError(await admin(base, 'POST', '/v1/admin/redrives', { canary_size: 2 }), 422, 'invalid_field', 'canary_size 2');
    assertError(await admin(base, 'POST', '/v1/admin/redrives', { purge: true }), 422, 'unknown_field', 'unknown field');
    assertError(await admin(base, 'POST', '/v1/admin/redrives', { plan_id: 'abc' }), 422, 'invalid_field', 'malformed plan id');
  });
});

describe('dead letters and canary redrives with the real local queues', () => {
  step('1. poisoned documents end failed (index_rejected); a healthy one is indexed', async () => {
    const res = await api(base, 'POST', '/v1/documents', {
      documents: [...POISONED, HEALTHY].map((doc_id) => ({ doc_id, text: textOf(doc_id) })),
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.results.map((r) => r.status), Array(POISONED.length + 1).fill(202), res.text);

    for (const id of POISONED) {
      const view = await waitForState(base, id, 'failed');
      assert.equal(view.latest_version, 1, JSON.stringify(view));
      assert.equal(view.live_version, null, JSON.stringify(view));
      assert.equal(view.job_state, 'failed', JSON.stringify(view));
      assert.equal(view.last_failure_bucket, 'index_rejected', JSON.stringify(view));
    }
    await waitForState(base, HEALTHY, 'indexed');
  });

  step('2. the letters reach D1 (consumer + DLQ consumer); summary and listing show them', async () => {
    const group = await waitFor(
      async () => {
        const res = await admin(base, 'GET', '/v1/admin/dead-letters/summary');
        assert.equal(res.status, 200, res.text);
        return res.body.groups.find((g) => g.failure_bucket === 'index_rejected' && g.letters === POISONED.length);
      },
      { timeoutMs: 30_000, intervalMs: 300, what: 'an index_rejected group with every poisoned letter' },
    );
    assert.equal(group.version_is_latest, 1, JSON.stringify(group));
    assert.equal(group.chunk_count_bucket, '0-10', JSON.stringify(group));
    assert.ok(group.first_seen <= group.last_seen, JSON.stringify(group));

    const letters = await waitForLetters(POISONED, 1);
    const summary = await admin(base, 'GET', '/v1/admin/dead-letters/summary');
    assert.deepEqual(summary.body.groups.map((g) => g.failure_bucket), ['index_rejected'], summary.text);
    assert.equal(summary.body.groups[0].deliveries, letters.reduce((n, l) => n + l.times_seen, 0), summary.text);

    const list = await admin(base, 'GET', '/v1/admin/dead-letters?bucket=index_rejected');
    assert.equal(list.status, 200, list.text);
    assert.deepEqual(list.body.letters.map((l) => l.doc_id).sort(), [...POISONED].sort(), list.text);
    assert.equal(list.body.next_cursor, null, list.text);
    for (const l of list.body.letters) {
      assert.equal(l.failure_bucket, 'index_rejected', JSON.stringify(l));
      assert.equal(l.job_state, 'failed', JSON.stringify(l));
      assert.equal(l.version, 1, JSON.stringify(l));
      assert.equal(l.version_is_latest, 1, JSON.stringify(l));
      assert.equal(l.attempts, 1, JSON.stringify(l));
      assert.equal(typeof l.job_id, 'string', JSON.stringify(l));
      assert.equal(typeof l.message_id, 'string', JSON.stringify(l));
    }
    // Newest first, ties by job id.
    const order = list.body.letters.map((l) => [l.last_seen, l.job_id]);
    const sorted = [...order].sort((a, b) => b[0] - a[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    assert.deepEqual(order, sorted, list.text);
  });

  step('3. the listing pages with a cursor and filters by doc_id, since and until', async () => {
    const paged = await allLetters('bucket=index_rejected', 2);
    assert.deepEqual(paged.map((l) => l.job_id), (await allLetters('bucket=index_rejected')).map((l) => l.job_id));
    assert.equal(new Set(paged.map((l) => l.job_id)).size, POISONED.length, JSON.stringify(paged));

    const one = await admin(base, 'GET', `/v1/admin/dead-letters?doc_id=${encodeURIComponent(FIRST)}`);
    assert.equal(one.status, 200, one.text);
    assert.deepEqual(one.body.letters.map((l) => l.doc_id), [FIRST], one.text);

    const maxSeen = Math.max(...paged.map((l) => l.last_seen));
    const minSeen = Math.min(...paged.map((l) => l.last_seen));
    const future = await admin(base, 'GET', `/v1/admin/dead-letters?since=${maxSeen + 1}`);
    assert.deepEqual(future.body.letters, [], future.text);
    const past = await admin(base, 'GET', `/v1/admin/dead-letters?until=${minSeen - 1}`);
    assert.deepEqual(past.body.letters, [], past.text);
    const window = await allLetters(`since=${minSeen}&until=${maxSeen}`);
    assert.equal(window.length, POISONED.length, JSON.stringify(window));

    const other = await admin(base, 'GET', '/v1/admin/dead-letters?bucket=embed_rejected');
    assert.deepEqual(other.body.letters, [], other.text);
  });

  let stopped;
  step('4. a redrive whose canary fails (cause still there) stops without sending the rest', async () => {
    const body = { filter: { doc_ids: CANARY_DOCS }, canary_size: 3 };
    const before = Object.fromEntries(
      await Promise.all(CANARY_DOCS.map(async (id) => [id, (await api(base, 'GET', docPath(id))).body])),
    );
    const plan = await preflight(body);
    assert.equal(plan.matched, CANARY_DOCS.length, JSON.stringify(plan));
    assert.equal(plan.eligible.length, CANARY_DOCS.length, JSON.stringify(plan));
    assert.deepEqual(plan.skipped, [], JSON.stringify(plan));
    assert.deepEqual(plan.documents, [...CANARY_DOCS].sort(), JSON.stringify(plan));
    assert.equal(plan.canaries.length, 3, JSON.stringify(plan));
    assert.deepEqual(plan.canaries, plan.eligible.slice(0, 3).map((e) => e.job_id), JSON.stringify(plan));

    // A plan id from another request is refused, and sends nothing.
    const stale = await admin(base, 'POST', '/v1/admin/redrives', { ...body, canary_size: 4, plan_id: plan.plan_id });
    assertError(stale, 409, 'plan_changed', 'a plan id from another request');

    const started = await execute(body, plan.plan_id);
    assert.equal(started.state, 'canary', JSON.stringify(started));
    assert.equal(started.counts.total, 5, JSON.stringify(started));
    assert.equal(started.counts.pending, 2, JSON.stringify(started));
    assert.equal(started.counts.sent + started.counts.failed, 3, JSON.stringify(started));

    stopped = await waitForRedrive(started.redrive_id, (v) => v.state !== 'canary', 'the canary redrive to leave the canary phase');
    assert.equal(stopped.state, 'stopped', JSON.stringify(stopped));
    assert.equal(stopped.stop_reason, 'canary_failed', JSON.stringify(stopped));
    assert.equal(stopped.counts.pending, 2, `the rest was never sent: ${JSON.stringify(stopped.counts)}`);
    assert.ok(stopped.counts.failed >= 1, JSON.stringify(stopped.counts));
    assert.deepEqual(stopped.params.doc_ids, CANARY_DOCS, JSON.stringify(stopped.params));
    const events = auditEvents(stopped);
    assert.equal(events[0], 'created', JSON.stringify(stopped.audit));
    assert.ok(events.includes('sent'), JSON.stringify(stopped.audit));
    assert.equal(events.at(-1), 'stopped', JSON.stringify(stopped.audit));
    assert.ok(!events.includes('canaries_passed'), JSON.stringify(stopped.audit));
    assert.equal(JSON.parse(stopped.audit.at(-1).detail).reason, 'canary_failed', JSON.stringify(stopped.audit));

    const canaryItems = stopped.items.filter((i) => i.phase === 'canary');
    const pendingItems = stopped.items.filter((i) => i.state === 'pending');
    assert.equal(canaryItems.length, 3, JSON.stringify(stopped.items));
    assert.deepEqual(canaryItems.map((i) => i.letter_job_id), plan.canaries, JSON.stringify(stopped.items));
    assert.ok(pendingItems.every((i) => i.phase === 'batch' && i.new_job_id === null), JSON.stringify(stopped.items));

    // The canaries were re-run as version 2 and failed again, for the same reason.
    for (const item of canaryItems) {
      assert.equal(item.new_version, 2, JSON.stringify(item));
      await waitForState(base, item.doc_id, 'failed', { latestVersion: 2 });
    }
    // The two never sent are untouched.
    for (const item of pendingItems) {
      const now = await api(base, 'GET', docPath(item.doc_id));
      assert.equal(now.status, 200, now.text);
      assert.equal(now.body.latest_version, 1, now.text);
      assert.deepEqual(now.body, before[item.doc_id], 'a document the stopped redrive never sent is unchanged');
    }
    // Once stopped, polling or cron never sends them: both run now, to
    // their end (a send writes its new version before they answer).
    assert.equal((await triggerCron(base)).trim(), 'ok');
    const later = await admin(base, 'GET', `/v1/admin/redrives/${stopped.redrive_id}`);
    assert.equal(later.status, 200, later.text);
    assert.equal(later.body.state, 'stopped', later.text);
    assert.equal(later.body.counts.pending, 2, later.text);
    for (const item of pendingItems) {
      const now = await api(base, 'GET', docPath(item.doc_id));
      assert.equal(now.status, 200, now.text);
      assert.deepEqual(now.body, before[item.doc_id], 'a cron run and a poll of the stopped redrive sent nothing');
    }
    // The failed canaries' letters (version 2) are archived too.
    await waitForLetters(canaryItems.map((i) => i.doc_id), 2);
  });

  step('5. remove the cause: restart on the same state without the variable; nothing is lost', async () => {
    const persistDir = worker.persistDir;
    await worker.stop({ keepState: true });
    worker = undefined;
    worker = await startWorker({ persistDir });
    base = worker.base;

    const view = await api(base, 'GET', docPath(FIRST));
    assert.equal(view.status, 200, view.text);
    assert.equal(view.body.state, 'failed', view.text);
    const letters = await allLetters('bucket=index_rejected');
    assert.equal(letters.length, POISONED.length + 3, JSON.stringify(letters));
    const r = await admin(base, 'GET', `/v1/admin/redrives/${stopped.redrive_id}`);
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.state, 'stopped', r.text);
  });

  step('6. preflight for poison-1 changes nothing; the executed plan completes; indexed as version 2', async () => {
    const body = { filter: { doc_ids: [FIRST] } };
    const docBefore = await api(base, 'GET', docPath(FIRST));
    const lettersBefore = await allLetters();
    const plan = await preflight(body);
    assert.equal(plan.matched, 1, JSON.stringify(plan));
    assert.equal(plan.eligible.length, 1, JSON.stringify(plan));
    assert.deepEqual(
      { doc_id: plan.eligible[0].doc_id, version: plan.eligible[0].version, failure_bucket: plan.eligible[0].failure_bucket },
      { doc_id: FIRST, version: 1, failure_bucket: 'index_rejected' },
    );
    assert.deepEqual(plan.skipped, [], JSON.stringify(plan));
    assert.deepEqual(plan.documents, [FIRST], JSON.stringify(plan));
    assert.deepEqual(plan.canaries, [plan.eligible[0].job_id], JSON.stringify(plan));

    // The preflight changed nothing, and a second one gives the same plan.
    const docAfter = await api(base, 'GET', docPath(FIRST));
    assert.deepEqual(docAfter.body, docBefore.body, 'the preflight changed the document');
    assert.deepEqual(await allLetters(), lettersBefore, 'the preflight changed the letters');
    assert.deepEqual(await preflight(body), plan, 'a second preflight gives the same plan');
    // A cron run (which would re-enqueue any job a preflight had written)
    // finds nothing to send either.
    assert.equal((await triggerCron(base)).trim(), 'ok');
    assert.deepEqual((await api(base, 'GET', docPath(FIRST))).body, docBefore.body, 'nothing was sent');

    const started = await execute(body, plan.plan_id);
    assert.equal(started.counts.total, 1, JSON.stringify(started));
    assert.equal(started.counts.pending, 0, JSON.stringify(started));

    const done = await waitForRedrive(started.redrive_id, (v) => v.state === 'completed' || v.state === 'stopped', 'the redrive to end');
    assert.equal(done.state, 'completed', JSON.stringify(done));
    assert.equal(done.stop_reason, null, JSON.stringify(done));
    assert.deepEqual(done.counts, { total: 1, pending: 0, sent: 0, succeeded: 1, failed: 0, skipped: 0 }, JSON.stringify(done));
    assert.deepEqual(auditEvents(done), ['created', 'sent', 'canaries_passed', 'completed'], JSON.stringify(done.audit));
    assert.equal(done.items[0].new_version, 2, JSON.stringify(done.items));

    const view = await waitForState(base, FIRST, 'indexed', { latestVersion: 2, liveVersion: 2 });
    assert.equal(view.job_id, done.items[0].new_job_id, JSON.stringify(view));
    assert.equal(view.job_state, 'succeeded', JSON.stringify(view));
    assert.ok(view.chunk_count >= 1, JSON.stringify(view));

    const s = await search(base, { query: 'lighthouse keepers tides gulls freighters', filter: { doc_id: FIRST } });
    assert.equal(s.status, 200, s.text);
    assert.ok(s.body.results.length >= 1, s.text);
    assert.ok(s.body.results.every((r) => r.doc_id === FIRST && r.version === 2), s.text);
    assert.equal(s.body.results[0].text, textOf(FIRST), 'the new version has the same content');

    // The same content again is unchanged (the re-run version is the latest).
    const again = await api(base, 'PUT', docPath(FIRST), { text: textOf(FIRST) });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.unchanged, true, again.text);
    assert.equal(again.body.version, 2, again.text);
  });

  step('7. a redrive of the rest: superseded letters skipped, canaries then a batch, all indexed', async () => {
    const body = { filter: { bucket: 'index_rejected', doc_ids: CANARY_DOCS }, canary_size: 3, batch_size: 10 };
    const plan = await preflight(body);
    // 5 first letters + 3 letters of the failed canaries (version 2).
    assert.equal(plan.matched, CANARY_DOCS.length + 3, JSON.stringify(plan));
    assert.equal(plan.eligible.length, CANARY_DOCS.length, JSON.stringify(plan));
    assert.equal(plan.skipped.length, 3, JSON.stringify(plan));
    assert.ok(plan.skipped.every((s) => s.version === 1 && ['superseded', 'already_redriven'].includes(s.reason)), JSON.stringify(plan.skipped));
    assert.deepEqual(plan.documents, [...CANARY_DOCS].sort(), JSON.stringify(plan));

    // poison-1's letter is already handled.
    const again = await preflight({ filter: { doc_ids: [FIRST] } });
    assert.equal(again.eligible.length, 0, JSON.stringify(again));
    assert.equal(again.skipped.length, 1, JSON.stringify(again));
    assert.ok(['already_redriven', 'already_live'].includes(again.skipped[0].reason), JSON.stringify(again));

    const started = await execute(body, plan.plan_id);
    const done = await waitForRedrive(started.redrive_id, (v) => v.state === 'completed' || v.state === 'stopped', 'the redrive to end');
    assert.equal(done.state, 'completed', JSON.stringify(done));
    assert.equal(done.counts.succeeded, CANARY_DOCS.length, JSON.stringify(done.counts));
    assert.equal(done.counts.pending + done.counts.failed + done.counts.sent, 0, JSON.stringify(done.counts));
    const events = auditEvents(done);
    assert.deepEqual(events, ['created', 'sent', 'canaries_passed', 'sent', 'completed'], JSON.stringify(done.audit));

    for (const item of done.items) {
      await waitForState(base, item.doc_id, 'indexed', { latestVersion: item.new_version, liveVersion: item.new_version });
    }
    for (const id of CANARY_DOCS) {
      const view = await api(base, 'GET', docPath(id));
      assert.equal(view.body.state, 'indexed', view.text);
    }
  });

  step('8. letters are never deleted: the archive still holds every one', async () => {
    const letters = await allLetters();
    assert.equal(letters.length, POISONED.length + 3, JSON.stringify(letters));
    const summary = await admin(base, 'GET', '/v1/admin/dead-letters/summary');
    assert.equal(summary.status, 200, summary.text);
    const total = summary.body.groups.reduce((n, g) => n + g.letters, 0);
    assert.equal(total, POISONED.length + 3, summary.text);
    // The letters of redriven versions are no longer the latest version.
    assert.ok(summary.body.groups.every((g) => g.failure_bucket === 'index_rejected'), summary.text);
    assert.equal(
      summary.body.groups.filter((g) => g.version_is_latest === 1).reduce((n, g) => n + g.letters, 0),
      0,
      summary.text,
    );
  });
});
