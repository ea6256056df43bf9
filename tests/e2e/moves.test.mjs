// Moving a tenant between shards online (issue 37), end to end, in the
// BUILT Worker in workerd with two local shards (`SHARDS=2`: the ledgers
// DB and DB_SHARD_1, the offline indexes VECTORS_DB and VECTORS_DB_SHARD_1
// of wrangler.toml's local profile).
//
// A tenant pinned on shard 0 with 40 documents (some of them Japanese) is
// moved to shard 1 while a writer keeps writing to it (new documents,
// edits, a batch now and then, deletes; each write refused with `503
// tenant_moving` while the move catches up is sent again after its
// Retry-After) and a searcher keeps searching it (every search must answer
// 200, and a document nobody edits must be found every time). Cron is run
// by hand until the move has switched. Then: nothing acknowledged was
// lost (each document's latest acknowledged version is the one served,
// with its text, and no older text is), the directory names shard 1, the
// rows are in shard 1's ledger; and once the cleanup delay has passed
// (`DIRECTORY_CACHE_SECONDS` + `JOB_LEASE_SECONDS`, made short here), cron
// ends the move `completed` and shard 0 holds nothing of the tenant, while
// a tenant that stayed there is untouched.
//
// Run from the repository root after `make build`:
//   node --test tests/e2e/moves.test.mjs
// (`MOVES_DEBUG=/tmp/moves.log` also writes the Worker's log there and
// prints the documents still pending while the queue drains.)

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import {
  admin,
  api,
  d1Query,
  docPath,
  search,
  sleep,
  startWorker,
  triggerCron,
  waitFor,
  waitForState,
  withLogs,
} from './helpers.mjs';

const TENANT = 'mover';
const BYSTANDER = 'stayer';
const SEEDS = 40;
const WRITERS = 2;

// The cleanup delay is DIRECTORY_CACHE_SECONDS + JOB_LEASE_SECONDS; a lease
// must outlive INVOCATION_WALL_SECONDS_MAX (src/config.rs), which must
// exceed CONSUME_WALL_SECONDS_MAX. Local invocations take milliseconds, so
// 20 s / 10 s / 21 s bound them as the local profile's 30 / 15 / 40 do,
// and the shard left is cleaned 25 s after the switch.
const VARS = {
  SHARDS: '2',
  // A page of 4 documents, and a scheduled run's share for the moves (one
  // of SHARDS + 1 shares: 30 subrequests) of about two pages: the copy of
  // 40 documents takes several runs, and writes come between them.
  MOVE_PAGE_DOCUMENTS: '4',
  CRON_SUBREQUESTS_MAX: '90',
  DIRECTORY_CACHE_SECONDS: '4',
  INVOCATION_WALL_SECONDS_MAX: '20',
  CONSUME_WALL_SECONDS_MAX: '10',
  JOB_LEASE_SECONDS: '21',
};
const CLEANUP_DELAY_MS = (Number(VARS.DIRECTORY_CACHE_SECONDS) + Number(VARS.JOB_LEASE_SECONDS)) * 1000;

const MOVE_FIELDS = [
  'move_id',
  'tenant_id',
  'from_shard',
  'to_shard',
  'state',
  'cursor',
  'copied',
  'recopied',
  'vectors',
  'removed',
  'waiting_for',
  'created_at',
  'switched_at',
  'updated_at',
];

/** A seed document's unique word and text (every third one in Japanese too). */
function seedWord(i) {
  return `seedw${i}k`;
}
function seedId(i) {
  return `seed-${String(i).padStart(2, '0')}`;
}
function seedText(i) {
  const ja = i % 3 === 0 ? ` 東京の港の帳簿、第${i}頁を確かめる。` : '';
  return `Seed document ${i} about the harbour ledger, marked ${seedWord(i)}.${ja}`;
}

/** Writer `w` owns seed documents with i % 4 == w; those with i % 4 >= WRITERS are never edited. */
const stableSeeds = [...Array(SEEDS).keys()].filter((i) => i % 4 >= WRITERS);

/** `SELECT count(*)` of the tenant's rows, table by table, in one statement on a ledger. */
const TENANT_TABLES = ['documents', 'versions', 'version_parts', 'jobs', 'chunks', 'cleanup_intents', 'tenant_tokens', 'tenants'];
async function heldIn(w, binding, tenant) {
  const cols = TENANT_TABLES.map((t) => `(SELECT count(*) FROM ${t} WHERE tenant_id = '${tenant}') AS ${t}`).join(', ');
  const [row] = await d1Query(binding, w.persistDir, `SELECT ${cols}`);
  return row;
}
async function vectorsIn(w, binding, tenant) {
  const [row] = await d1Query(binding, w.persistDir, `SELECT count(*) AS n FROM vectors WHERE namespace = '${tenant}'`);
  return row.n;
}

async function getMove(base, id) {
  const res = await admin(base, 'GET', `/v1/admin/moves/${id}`);
  assert.equal(res.status, 200, res.text);
  return res.body;
}

describe('a tenant moves to another shard while it writes and searches', () => {
  let w;
  const step = (name, fn) => it(name, withLogs(() => w, fn));
  let token;
  let stayerToken;
  let moveId;
  // Every acknowledged write, per document: its latest acknowledged
  // version, text and word, whether it is a delete, and the words of its
  // earlier acknowledged versions (never to be served again).
  const docs = new Map();
  const stats = { acks: 0, acksAfterSwitch: 0, refusals: 0, batches: 0, deletes: 0, edits: 0, news: 0 };
  const unexpected = []; // any write answer but 202 (or 200 for a batch) / 503 tenant_moving
  const searchFailures = []; // non-200 searches
  const searchMisses = []; // a never-edited document not found
  let searches = 0;
  let moveState = 'copying';
  let switchedSeen = false;
  let runs = 0;
  const statesSeen = [];
  let startedAt;
  let drainedIn;

  before(async () => {
    w = await startWorker({ vars: VARS });
  });
  after(async () => {
    if (process.env.MOVES_DEBUG && w) fs.writeFileSync(process.env.MOVES_DEBUG, w.logs());
    await w?.stop();
  });

  step('a tenant pinned on shard 0 ingests 40 documents, Japanese among them', async () => {
    startedAt = Date.now();
    for (const t of [TENANT, BYSTANDER]) {
      const res = await admin(w.base, 'POST', '/v1/admin/tenants', { tenant_id: t, shard: 0, quotas: { requests_per_minute_max: 1_000_000 } });
      assert.equal(res.status, 201, res.text);
      assert.equal(res.body.shard, 0, res.text);
    }
    const mint = async (t) => {
      const res = await admin(w.base, 'POST', `/v1/admin/tenants/${t}/tokens`, { scopes: ['ingest', 'search'] });
      assert.equal(res.status, 201, res.text);
      return res.body.token;
    };
    token = await mint(TENANT);
    stayerToken = await mint(BYSTANDER);
    for (let i = 0; i < SEEDS; i++) {
      const res = await api(w.base, 'PUT', docPath(seedId(i)), { text: seedText(i), metadata: { seed: i } }, { token });
      assert.equal(res.status, 202, res.text);
      assert.equal(res.body.version, 1, res.text);
      docs.set(seedId(i), { version: 1, text: seedText(i), word: seedWord(i), deleted: false, oldWords: [] });
    }
    const stay = await api(w.base, 'PUT', docPath('kept'), { text: 'The stayer keeps its lighthouse logbook stayerword here.' }, { token: stayerToken });
    assert.equal(stay.status, 202, stay.text);
    for (const id of docs.keys()) await waitForState(w.base, id, 'indexed', { token, latestVersion: 1, liveVersion: 1 });
    await waitForState(w.base, 'kept', 'indexed', { token: stayerToken });
    const ja = await search(w.base, { query: '東京の港の帳簿', top_k: 5 }, { token });
    assert.equal(ja.status, 200, ja.text);
    assert.ok(ja.body.results.length > 0 && ja.body.results.every((h) => h.text.includes('東京の港の帳簿')), ja.text);
    const held = await heldIn(w, 'DB', TENANT);
    assert.equal(held.documents, SEEDS, JSON.stringify(held));
    assert.equal((await heldIn(w, 'DB_SHARD_1', TENANT)).documents, 0);
  });

  step('the move switches while a writer and a searcher keep going; refused writes are retried', async () => {
    let stop = false;

    /** Sends one write until it is acknowledged, honouring Retry-After on 503 tenant_moving. */
    async function send(method, urlPath, body) {
      for (;;) {
        const res = await api(w.base, method, urlPath, body, { token });
        if (res.status === 503 && res.body?.error?.code === 'tenant_moving') {
          stats.refusals++;
          const retryAfter = res.headers.get('retry-after');
          if (retryAfter !== '2') unexpected.push(`${method} ${urlPath}: 503 tenant_moving with Retry-After ${retryAfter}`);
          await sleep(Number(retryAfter ?? 2) * 1000);
          continue;
        }
        return res;
      }
    }

    function record(docId, version, text, word, deleted) {
      const prev = docs.get(docId);
      if (prev && version <= prev.version) {
        unexpected.push(`${docId}: version ${version} acknowledged after version ${prev.version}`);
      }
      const oldWords = prev ? [...prev.oldWords, ...(prev.deleted ? [] : [prev.word])] : [];
      docs.set(docId, { version, text, word, deleted, oldWords });
      stats.acks++;
      if (switchedSeen) stats.acksAfterSwitch++;
    }

    async function writer(n) {
      const owned = [...Array(SEEDS).keys()].filter((i) => i % 4 === n).map(seedId);
      const created = []; // this writer's new documents still live
      for (let seq = 0; !stop; seq++) {
        const word = `mvw${n}s${seq}z`;
        const ja = seq % 3 === 0 ? ` 東京の港の帳簿に${seq}行を足す。` : '';
        const text = `Writer ${n} wrote entry ${seq} in the harbour ledger, marked ${word}.${ja}`;
        const kind = seq % 10;
        if (kind === 9 && created.length > 2) {
          // Delete one of its own new documents (never written again).
          const docId = created.shift();
          const res = await send('DELETE', docPath(docId));
          if (res.status !== 202) unexpected.push(`DELETE ${docId}: ${res.status} ${res.text}`);
          else {
            record(docId, res.body.version, null, null, true);
            stats.deletes++;
          }
        } else if (kind === 6) {
          // A batch of two new documents: all or nothing.
          const items = [0, 1].map((k) => ({
            doc_id: `${'bdfhkmprtv'[(seq + k) % 10]}-batch-w${n}-${seq}-${k}`,
            text: `${text} Item ${k} of the batch, ${word}b${k}.`,
            word: `${word}b${k}`,
          }));
          const res = await send('POST', '/v1/documents', { documents: items.map(({ doc_id, text: t }) => ({ doc_id, text: t })) });
          if (res.status !== 200 || !res.body.results.every((r) => r.status === 202)) {
            unexpected.push(`POST batch: ${res.status} ${res.text}`);
          } else {
            res.body.results.forEach((r, k) => {
              assert.equal(r.doc_id, items[k].doc_id);
              record(items[k].doc_id, r.version, `${text} Item ${k} of the batch, ${items[k].word}.`, items[k].word, false);
              created.push(items[k].doc_id);
            });
            stats.batches++;
          }
        } else if (kind % 2 === 1 || created.length === 0) {
          // A new document; its ID sorts before or after the move's cursor.
          const docId = `${'acegjlnqsuwy'[(seq * 7 + n) % 12]}-new-w${n}-${seq}`;
          const res = await send('PUT', docPath(docId), { text });
          if (res.status !== 202) unexpected.push(`PUT ${docId}: ${res.status} ${res.text}`);
          else {
            record(docId, res.body.version, text, word, false);
            created.push(docId);
            stats.news++;
          }
        } else {
          // An edit: of an owned seed document, or of one of its own.
          const pool = seq % 4 === 0 ? created : owned;
          const docId = pool[seq % pool.length];
          const res = await send('PUT', docPath(docId), { text });
          if (res.status !== 202) unexpected.push(`PUT ${docId} (edit): ${res.status} ${res.text}`);
          else {
            record(docId, res.body.version, text, word, false);
            stats.edits++;
          }
        }
        await sleep(120);
      }
    }

    async function searcher() {
      for (let k = 0; !stop; k++) {
        const i = stableSeeds[k % stableSeeds.length];
        const mode = ['keyword', 'hybrid'][k % 2];
        const res = await search(w.base, { query: seedWord(i), mode, top_k: 5 }, { token });
        searches++;
        if (res.status !== 200) searchFailures.push(`${mode} ${seedWord(i)} (move ${moveState}): ${res.status} ${res.text}`);
        else if (!res.body.results.some((h) => h.doc_id === seedId(i) && h.text === seedText(i))) {
          searchMisses.push(`${mode} ${seedWord(i)} (move ${moveState}): ${res.text}`);
        }
        const ja = await search(w.base, { query: '東京の港の帳簿', top_k: 5 }, { token });
        searches++;
        if (ja.status !== 200) searchFailures.push(`hybrid 東京の港の帳簿 (move ${moveState}): ${ja.status} ${ja.text}`);
        else if (ja.body.results.length === 0) searchMisses.push(`hybrid 東京の港の帳簿 (move ${moveState}): no result`);
        await sleep(50);
      }
    }

    const res = await admin(w.base, 'POST', `/v1/admin/tenants/${TENANT}/move`, { shard: 1 });
    assert.equal(res.status, 202, res.text);
    assert.deepEqual(Object.keys(res.body).sort(), [...MOVE_FIELDS].sort(), res.text);
    assert.equal(res.body.tenant_id, TENANT);
    assert.equal(res.body.from_shard, 0);
    assert.equal(res.body.to_shard, 1);
    assert.equal(res.body.state, 'copying');
    moveId = res.body.move_id;
    const listed = await admin(w.base, 'GET', '/v1/admin/moves');
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.moves.map((m) => m.move_id), [moveId]);
    // A second move of the same tenant is refused while this one is open.
    const again = await admin(w.base, 'POST', `/v1/admin/tenants/${TENANT}/move`, { shard: 1 });
    assert.equal(again.status, 503, again.text);
    assert.equal(again.body?.error?.code, 'tenant_moving', again.text);

    const tasks = [...Array(WRITERS).keys()].map(writer);
    tasks.push(searcher());
    const running = Promise.all(tasks);
    let driverError;
    try {
      await sleep(500); // some writes before the first copy page
      const deadline = Date.now() + 120_000;
      for (;;) {
        await triggerCron(w.base);
        runs++;
        const m = await getMove(w.base, moveId);
        moveState = m.state;
        if (statesSeen.at(-1) !== m.state) statesSeen.push(m.state);
        assert.ok(['copying', 'catching_up', 'switched', 'cleaning'].includes(m.state), JSON.stringify(m));
        if (m.state === 'switched' || m.state === 'cleaning') {
          switchedSeen = true;
          break;
        }
        if (m.state === 'catching_up' && stats.refusals === 0) {
          // Fenced: let the writers meet the fence before it is lifted.
          await waitFor(() => stats.refusals > 0, { timeoutMs: 15_000, intervalMs: 50, what: 'a write refused with 503 tenant_moving' });
        }
        if (Date.now() > deadline) throw new Error(`the move did not switch in 120 s (${runs} cron runs): ${JSON.stringify(m)}`);
        await sleep(200);
      }
      // Writes after the switch land on shard 1 (through a stale cache too).
      const acked = stats.acks;
      await waitFor(() => stats.acks >= acked + 6, { timeoutMs: 30_000, intervalMs: 50, what: 'writes after the switch' });
    } catch (e) {
      driverError = e;
    } finally {
      stop = true;
      await running;
    }
    if (driverError) throw driverError;
    process.stderr.write(
      `moves.test: switched after ${runs} cron runs (${statesSeen.join(' → ')}); ${stats.acks} writes acknowledged ` +
        `(${stats.news} new, ${stats.edits} edits, ${stats.batches} batches, ${stats.deletes} deletes, ${stats.acksAfterSwitch} after the switch), ` +
        `${stats.refusals} refused with tenant_moving; ${searches} searches\n`,
    );
    assert.deepEqual(unexpected, [], unexpected.join('\n'));
    assert.deepEqual(searchFailures, [], searchFailures.join('\n'));
    assert.deepEqual(searchMisses, [], searchMisses.join('\n'));
    assert.ok(statesSeen.includes('catching_up'), `the move was seen fenced: ${statesSeen.join(' → ')}`);
    assert.ok(stats.refusals > 0, 'a write met the fence');
    assert.ok(stats.acksAfterSwitch > 0);
    assert.ok(runs >= 3, `the copy took several cron runs: ${runs}`);
  });

  step('nothing acknowledged was lost: each document serves its latest acknowledged text, on shard 1', async () => {
    const m = await getMove(w.base, moveId);
    assert.ok(['switched', 'cleaning', 'completed'].includes(m.state), JSON.stringify(m));
    assert.equal(typeof m.switched_at, 'number', JSON.stringify(m));
    assert.ok(m.copied >= SEEDS, JSON.stringify(m));
    // Documents the writers changed after their copy were copied again.
    assert.ok(m.recopied > 0, JSON.stringify(m));
    assert.ok(m.vectors >= SEEDS, JSON.stringify(m));
    const tenant = await admin(w.base, 'GET', `/v1/admin/tenants/${TENANT}`);
    assert.equal(tenant.status, 200, tenant.text);
    assert.equal(tenant.body.shard, 1, tenant.text);
    if (m.state === 'switched') {
      // Within the cleanup delay the shard left keeps the tenant's rows.
      assert.equal(m.waiting_for, 'directory_caches', JSON.stringify(m));
      assert.equal(m.removed, 0, JSON.stringify(m));
      assert.equal((await heldIn(w, 'DB', TENANT)).documents, m.copied, JSON.stringify(m));
    }

    // The queue drains: the switch sends the jobs the copy carried (the
    // last step says how soon). The wait allows more than JOB_STALL_SECONDS
    // (20 s locally), so that a slow drain is told apart from a lost write.
    const drainStart = Date.now();
    const pending = new Set(docs.keys());
    let last = {};
    await waitFor(
      async () => {
        for (const id of [...pending]) {
          const d = docs.get(id);
          const res = await api(w.base, 'GET', docPath(id), undefined, { token });
          assert.equal(res.status, 200, `${id}: ${res.text}`);
          assert.notEqual(res.body.state, 'failed', `${id}: ${res.text}`);
          assert.ok(res.body.latest_version <= d.version, `${id}: a version past the last acknowledged one (${d.version}): ${res.text}`);
          last[id] = res.body;
          if (res.body.state === (d.deleted ? 'deleted' : 'indexed') && res.body.latest_version === d.version && res.body.live_version === d.version) {
            pending.delete(id);
          }
        }
        if (pending.size === 0) return true;
        if (process.env.MOVES_DEBUG) process.stderr.write(`drain +${Date.now() - drainStart} ms: ${[...pending].map((id) => `${id} v${docs.get(id).version} ${JSON.stringify(last[id])}`).join('\n')}\n`);
        await triggerCron(w.base);
        return false;
      },
      { timeoutMs: 60_000, intervalMs: 1_000, what: 'every acknowledged write served' },
    ).catch((e) => {
      e.message += `\n${[...pending].map((id) => `${id}: acknowledged v${docs.get(id).version}, served ${JSON.stringify(last[id])}`).join('\n')}`;
      throw e;
    });

    drainedIn = Date.now() - drainStart;
    // Every document's latest acknowledged text is what search serves, and
    // no text of an earlier version is.
    const wrong = [];
    for (const [id, d] of docs) {
      if (!d.deleted) {
        const res = await search(w.base, { query: d.word, mode: 'keyword', top_k: 5 }, { token });
        assert.equal(res.status, 200, res.text);
        const hits = res.body.results.filter((h) => h.doc_id === id);
        if (hits.length !== 1 || hits[0].version !== d.version || hits[0].text !== d.text) {
          wrong.push(`${id} v${d.version} "${d.word}": ${res.text}`);
        }
      }
      for (const old of d.oldWords) {
        const res = await search(w.base, { query: old, mode: 'keyword', top_k: 5 }, { token });
        assert.equal(res.status, 200, res.text);
        if (res.body.results.some((h) => h.doc_id === id)) wrong.push(`${id}: an earlier text ("${old}") is still served: ${res.text}`);
      }
    }
    assert.deepEqual(wrong, [], wrong.join('\n'));
    const ja = await search(w.base, { query: '東京の港の帳簿', top_k: 10 }, { token });
    assert.equal(ja.status, 200, ja.text);
    assert.ok(ja.body.results.length > 0, ja.text);
    for (const h of ja.body.results) {
      assert.equal(h.text, docs.get(h.doc_id)?.text, `a Japanese hit is the latest text: ${JSON.stringify(h)}`);
    }

    // The rows are on shard 1 now: every document, the tenant, its token.
    const held = await heldIn(w, 'DB_SHARD_1', TENANT);
    assert.equal(held.documents, docs.size, JSON.stringify(held));
    assert.equal(held.tenants, 1, JSON.stringify(held));
    assert.equal(held.tenant_tokens, 1, JSON.stringify(held));
    assert.ok(held.chunks >= [...docs.values()].filter((d) => !d.deleted).length, JSON.stringify(held));
    assert.ok((await vectorsIn(w, 'VECTORS_DB_SHARD_1', TENANT)) > 0);
    // Nothing of another tenant went along.
    assert.equal((await heldIn(w, 'DB_SHARD_1', BYSTANDER)).documents, 0);
    process.stderr.write(`moves.test: ${docs.size} documents served as acknowledged ${drainedIn} ms after the writers stopped; checked in ${Date.now() - drainStart - drainedIn} ms\n`);
  });

  step('after the cleanup delay, cron ends the move completed and shard 0 holds nothing of the tenant', async () => {
    // DIRECTORY_CACHE_SECONDS + JOB_LEASE_SECONDS = 25 s after the switch.
    let m = await getMove(w.base, moveId);
    const due = m.switched_at + CLEANUP_DELAY_MS;
    if (m.state === 'switched') {
      // Before the delay, the shard left keeps the rows.
      assert.equal(m.removed, 0, JSON.stringify(m));
      assert.ok((await heldIn(w, 'DB', TENANT)).documents > 0);
    }
    const deadline = Date.now() + CLEANUP_DELAY_MS + 45_000;
    for (;;) {
      m = await getMove(w.base, moveId);
      if (m.state === 'completed') break;
      assert.ok(['switched', 'cleaning'].includes(m.state), JSON.stringify(m));
      if (Date.now() > deadline) throw new Error(`the move did not complete: ${JSON.stringify(m)}`);
      await sleep(m.state === 'switched' && Date.now() < due - 1_000 ? 1_000 : 250);
      await triggerCron(w.base);
    }
    assert.ok(m.updated_at >= due, `cleaned no sooner than the delay: ${JSON.stringify(m)}`);
    assert.ok(m.removed >= SEEDS, JSON.stringify(m));
    const held = await heldIn(w, 'DB', TENANT);
    assert.deepEqual(held, Object.fromEntries(TENANT_TABLES.map((t) => [t, 0])), JSON.stringify(held));
    assert.equal(await vectorsIn(w, 'VECTORS_DB', TENANT), 0);

    // The tenant is still served (from shard 1), and so is the one that stayed.
    const live = [...docs].filter(([, d]) => !d.deleted);
    for (const [id, d] of [live[0], live[Math.floor(live.length / 2)], live.at(-1), [seedId(stableSeeds[0]), docs.get(seedId(stableSeeds[0]))]]) {
      const res = await search(w.base, { query: d.word, mode: 'hybrid', top_k: 5 }, { token });
      assert.equal(res.status, 200, res.text);
      assert.ok(res.body.results.some((h) => h.doc_id === id && h.text === d.text && h.version === d.version), `${id}: ${res.text}`);
    }
    const put = await api(w.base, 'PUT', docPath('after-cleanup'), { text: 'Written after the cleanup, marked cleanword.' }, { token });
    assert.equal(put.status, 202, put.text);
    await waitForState(w.base, 'after-cleanup', 'indexed', { token });
    assert.equal((await heldIn(w, 'DB', BYSTANDER)).documents, 1);
    const kept = await search(w.base, { query: 'stayerword', mode: 'keyword' }, { token: stayerToken });
    assert.equal(kept.status, 200, kept.text);
    assert.deepEqual(kept.body.results.map((h) => h.doc_id), ['kept']);
    const tenants = await admin(w.base, 'GET', '/v1/admin/tenants');
    const placed = Object.fromEntries(tenants.body.tenants.map((t) => [t.tenant_id, t.shard]));
    assert.equal(placed[TENANT], 1);
    assert.equal(placed[BYSTANDER], 0);
    process.stderr.write(`moves.test: completed ${JSON.stringify(m)}; ${((Date.now() - startedAt) / 1000).toFixed(1)} s since the first step\n`);
  });

  // The jobs a move copies while they are open run on the new shard as
  // soon as the copy is served: the switch sends them (MOVE_CARRIED_JOBS,
  // src/pipeline/moves.rs, after_switch), also those cron's repair of the
  // new shard already sent before the switch (which the consumer
  // acknowledged unrun, `tenant_moving`, and TOUCH_JOBS made look fresh):
  // none waits JOB_STALL_SECONDS (20 s locally, 900 s by default) for cron,
  // and a write acknowledged just before the fence is searchable in
  // seconds.
  it('the jobs the copy carried run as soon as the copy is served', () => {
    assert.equal(typeof drainedIn, 'number', 'the drain step ran');
    assert.ok(drainedIn < 10_000, `every acknowledged write was served ${drainedIn} ms after the writers stopped (JOB_STALL_SECONDS is 20 s)`);
  });
});
