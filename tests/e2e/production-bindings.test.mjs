// The production backends (INDEX_BACKEND=vectorize, EMBEDDER_BACKEND=workers-ai)
// of the BUILT Worker, in workerd (Miniflare), over strict fakes of the
// Vectorize and Workers AI bindings (fakes/vectorize-ai-fakes.mjs):
//
//   1. the fakes refuse what the real services refuse (from Node, and from a
//      JS Worker in workerd);
//   2. the full flow (ingest, update, delete, search, cron) with mutations
//      visible only after 1.5 s, and no search ever serving stale text;
//   3. with 20 % of binding calls failing transiently (a timeout may have
//      taken effect), twenty documents, updates and deletes all end as
//      asked, every search answers exactly as the failures injected into
//      its own calls decide (200, or 503 with the bucket of a call that
//      failed all its tries), after cron the index holds exactly the
//      vectors of live chunks, and no raw error text reaches the logs;
//   4. an index whose dimensions (or metric) disagree with the configuration
//      is refused: /healthz?deep=1 says so, nothing is written, jobs retry,
//      and they succeed once the index is fixed; a deep check whose
//      description of the index fails answers 503 with the failure's bucket;
//   5. tenants: each tenant's vectors are written into its own namespace
//      (the tenant ID; INGEST_TOKEN's into `default`), every search names
//      its tenant's namespace, and a delete removes only that tenant's;
//   6. a configuration that does not validate: /healthz answers, the deep
//      check and every route answer 503 config_invalid, no binding is called;
//   7. two shards: the deep check describes each shard's index and names
//      the shard whose index disagrees with the configuration.
//
// Run from the repository root after `make build`:
//   node --test --test-concurrency=1 tests/e2e/

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { INGEST_TOKEN, api, assertErrorCode, docPath, search, sleep, waitFor, waitForState } from './helpers.mjs';
import { ADMIN_TOKEN, startProbeWorker, startProductionWorker } from './miniflare-env.mjs';
import {
  FakeVectorizeIndex,
  FakeWorkersAi,
  decode,
  encode,
  fakeEmbedding,
  mulberry32,
} from './fakes/vectorize-ai-fakes.mjs';

const DIMS = 768;
const unit = (dims = DIMS) => new Float32Array(dims).fill(1 / Math.sqrt(dims));
const vec = (id, metadata = { doc_id: 'd', version: 1 }, dims = DIMS) => ({ id, values: unit(dims), metadata });

async function rejects(promise, pattern) {
  await assert.rejects(promise, (e) => {
    assert.match(e.message, pattern);
    return true;
  });
}

/** `it` whose failures print the tail of the Worker's log. */
function stepWith(getWorker) {
  return (name, fn) =>
    it(name, async () => {
      try {
        await fn();
      } catch (err) {
        const w = getWorker();
        if (w) process.stderr.write(`\n--- worker log (tail) ---\n${w.logs().slice(-4000)}\n--- end ---\n`);
        throw err;
      }
    });
}

// Raw texts the fakes put in their errors: none may reach the Worker's logs.
const RAW_ERROR_TEXTS = [
  'Too Many Requests',
  'Status + 503',
  'Status + 504',
  'No more data centers',
  'Request timeout',
  'Internal server error',
  'dimension mismatch',
  '_ERROR',
];

// ---------------------------------------------------------------------------
describe('1a. the fakes refuse what the real services refuse (called from Node)', () => {
  it('Vectorize: Map metadata, over-limit batches, long IDs, wrong dimensions, big metadata', async () => {
    const idx = new FakeVectorizeIndex({ dimensions: DIMS });
    await rejects(idx.upsert([vec('a', new Map([['doc_id', 'd']]))]), /\(code = 40012\).*Map/);
    await rejects(idx.upsert([new Map([['id', 'a']])]), /\(code = 40012\)/);
    class Meta {
      constructor() {
        this.doc_id = 'd';
      }
    }
    await rejects(idx.upsert([vec('a', new Meta())]), /Meta, not a plain object/);
    await rejects(idx.upsert(Array.from({ length: 1001 }, (_, i) => vec(`v${i}`))), /\(code = 40006\).*1001 > 1000/);
    await rejects(idx.upsert([vec('é'.repeat(33))]), /\(code = 40008\).*66 bytes/);
    await rejects(idx.upsert([vec('a', {}, 384)]), /\(code = 40005\).*dimension/);
    await rejects(idx.upsert([{ id: 'a', values: new Map(), metadata: {} }]), /\(code = 40002\)/);
    await rejects(idx.upsert([vec('a', { blob: 'x'.repeat(10 * 1024) })]), /\(code = 40023\)/);
    await rejects(idx.upsert([vec('a', { 'a.b': 1 })]), /\(code = 40018\)/);
    await rejects(idx.deleteByIds(Array.from({ length: 101 }, (_, i) => `v${i}`)), /\(code = 40007\).*101 > 100/);
    await rejects(idx.getByIds(Array.from({ length: 101 }, (_, i) => `v${i}`)), /\(code = 40007\)/);
    await rejects(idx.query(unit(), { topK: 101 }), /\(code = 40010\)/);
    await rejects(idx.query(unit(), { topK: 51, returnValues: true }), /\(code = 40010\)/);
    await rejects(idx.query(unit(), { topK: 3, filter: new Map([['doc_id', 'd']]) }), /\(code = 40011\)/);
    // The limits themselves pass.
    await idx.upsert(Array.from({ length: 1000 }, (_, i) => vec(`v${i}`)));
    await idx.upsert([vec('x'.repeat(64))]);
    await idx.deleteByIds(Array.from({ length: 100 }, (_, i) => `v${i}`));
    assert.equal((await idx.getByIds(Array.from({ length: 100 }, (_, i) => `v${100 + i}`))).length, 100);
    assert.equal(idx.stats().visibleCount, 901);
    assert.equal(idx.stats().rejections.length, 14);
  });

  it('Workers AI: Map input, more than 100 texts, unknown model; shapes and pooling', async () => {
    const ai = new FakeWorkersAi();
    const model = '@cf/baai/bge-base-en-v1.5';
    await rejects(ai.run(model, new Map([['text', ['a']]])), /^5006: inputs are a Map/);
    await rejects(ai.run(model, { text: Array.from({ length: 101 }, () => 'x') }), /^5006: .*more than 100/);
    await rejects(ai.run('@cf/nope/none', { text: ['a'] }), /^5007: No such model/);
    await rejects(ai.run(model, { text: ['a'], pooling: 'max' }), /^5006: pooling/);
    const out = await ai.run(model, { text: Array.from({ length: 100 }, (_, i) => `text ${i}`), pooling: 'mean' });
    assert.deepEqual(out.shape, [100, 768]);
    assert.equal(out.data.length, 100);
    assert.equal(out.data[0].length, 768);
    const small = await ai.run('@cf/baai/bge-small-en-v1.5', { text: ['a'] });
    assert.deepEqual(small.shape, [1, 384]);
    const cls = await ai.run(model, { text: ['text 0'], pooling: 'cls' });
    assert.notDeepEqual(cls.data[0], out.data[0], 'cls and mean vectors differ');
  });

  it('mutations become visible only after the configured delay', async () => {
    let now = 1_000;
    const idx = new FakeVectorizeIndex({ dimensions: 8, visibilityDelayMs: 1500, now: () => now });
    await idx.upsert([vec('a', { doc_id: 'd' }, 8)]);
    assert.equal((await idx.query(unit(8), { topK: 5 })).count, 0, 'not visible at once');
    assert.deepEqual(await idx.getByIds(['a']), []);
    now += 1499;
    assert.equal((await idx.describe()).vectorCount, 0);
    now += 1;
    assert.equal((await idx.query(unit(8), { topK: 5 })).matches[0].id, 'a');
    await idx.deleteByIds(['a']);
    assert.equal((await idx.getByIds(['a'])).length, 1, 'the delete is not visible yet');
    assert.equal(idx.eventualState().size, 0);
    now += 1500;
    assert.deepEqual(await idx.getByIds(['a']), []);
  });

  it('failures are injected deterministically from the seed', async () => {
    const run = async (seed) => {
      const idx = new FakeVectorizeIndex({ dimensions: 8, failureRate: 0.3, seed, timeoutMs: 1 });
      const outcomes = [];
      for (let i = 0; i < 40; i++) {
        try {
          await idx.upsert([vec(`v${i}`, {}, 8)]);
          outcomes.push('ok');
        } catch (e) {
          outcomes.push(e.message.replace(/^VECTOR_UPSERT_ERROR/, ''));
        }
      }
      return { outcomes, injected: idx.stats().injected };
    };
    const a = await run(7);
    assert.deepEqual(await run(7), a, 'same seed, same failures');
    assert.notDeepEqual((await run(8)).outcomes, a.outcomes, 'another seed, other failures');
    const total = Object.values(a.injected).reduce((x, y) => x + y, 0);
    assert.ok(total >= 5 && total <= 20, `about 30 % of 40 calls fail: ${total}`);
    assert.ok(a.outcomes.includes(' (code = 40029): Too Many Requests'));
    assert.ok(a.outcomes.includes(': Status + 503'));
    const r = mulberry32(1);
    assert.notEqual(r(), r());
  });

  it('query ranks by cosine similarity and filters by metadata equality', async () => {
    const idx = new FakeVectorizeIndex({ dimensions: DIMS, metadataIndexes: ['doc_id', 'lang'] });
    const doc = (id, text, metadata) => ({ id, values: fakeEmbedding(text, DIMS), metadata });
    await idx.upsert([
      doc('p', 'penguins waddle on antarctic ice', { doc_id: 'p', lang: 'en', shelf: 1 }),
      doc('b', 'bakers knead sourdough bread', { doc_id: 'b', lang: 'en', shelf: 1 }),
      doc('f', 'les boulangers petrissent le pain', { doc_id: 'f', lang: 'fr', shelf: 1 }),
    ]);
    const q = fakeEmbedding('antarctic penguins', DIMS);
    const all = await idx.query(q, { topK: 3, returnMetadata: 'none' });
    assert.equal(all.matches[0].id, 'p');
    assert.ok(all.matches[0].score > all.matches[1].score);
    assert.equal(all.matches[0].metadata, undefined, 'returnMetadata none');
    const fr = await idx.query(q, { topK: 3, filter: { lang: 'fr' } });
    assert.deepEqual(fr.matches.map((m) => m.id), ['f']);
    const unindexed = await idx.query(q, { topK: 3, filter: { shelf: 1 } });
    assert.deepEqual(unindexed.matches, [], 'filtering needs a metadata index');
  });

  it('namespaces: a query with one searches only it; IDs are unique across namespaces; 64 bytes, 50,000', async () => {
    const idx = new FakeVectorizeIndex({ dimensions: DIMS });
    const doc = (id, text, namespace) => ({ id, values: fakeEmbedding(text, DIMS), metadata: { doc_id: id }, namespace });
    await idx.upsert([
      doc('a1', 'penguins waddle on antarctic ice', 'tenant-a'),
      doc('b1', 'penguins nest on antarctic ice', 'tenant-b'),
      doc('n1', 'penguins on antarctic ice floes', undefined),
    ]);
    const q = fakeEmbedding('antarctic penguins', DIMS);
    assert.deepEqual((await idx.query(q, { topK: 10, namespace: 'tenant-a' })).matches.map((m) => m.id), ['a1']);
    assert.deepEqual((await idx.query(q, { topK: 10, namespace: 'tenant-b' })).matches.map((m) => m.id), ['b1']);
    assert.deepEqual((await idx.query(q, { topK: 10, namespace: 'nobody' })).matches, []);
    assert.equal((await idx.query(q, { topK: 10 })).count, 3, 'no namespace: the whole index');
    assert.deepEqual(idx.queryNamespaces, ['tenant-a', 'tenant-b', 'nobody', null]);
    assert.deepEqual(idx.namespaces(), ['tenant-a', 'tenant-b']);
    // One ID, one vector: an upsert into another namespace moves it.
    await idx.upsert([doc('a1', 'penguins waddle on antarctic ice', 'tenant-b')]);
    assert.deepEqual((await idx.query(q, { topK: 10, namespace: 'tenant-a' })).matches, []);
    assert.deepEqual((await idx.query(q, { topK: 10, namespace: 'tenant-b' })).matches.map((m) => m.id).sort(), ['a1', 'b1']);
    assert.equal((await idx.getByIds(['a1']))[0].namespace, 'tenant-b');
    await idx.deleteByIds(['a1', 'n1']);
    assert.equal(idx.stats().visibleCount, 1);
    // Names up to 64 bytes; at most namespacesMax of them.
    await rejects(idx.upsert([doc('x', 'x', 'n'.repeat(65))]), /\(code = 40003\).*namespace/);
    await rejects(idx.query(q, { topK: 1, namespace: 'é'.repeat(33) }), /\(code = 40003\).*namespace/);
    await idx.upsert([doc('x', 'x', 'n'.repeat(64))]);
    const small = new FakeVectorizeIndex({ dimensions: DIMS, namespacesMax: 2 });
    await small.upsert([doc('1', 'one', 'n1'), doc('2', 'two', 'n2')]);
    await small.upsert([doc('3', 'three', 'n1')]);
    await rejects(small.upsert([doc('4', 'four', 'n3')]), /too many namespaces/);
    assert.deepEqual(small.namespaces(), ['n1', 'n2']);
  });

  it('the shim transport keeps Maps, typed arrays and class instances', () => {
    class Thing {}
    const round = decode(JSON.parse(JSON.stringify(encode([new Map([['a', 1]]), new Float32Array([0.5]), new Thing(), { x: [1, undefined] }]))));
    assert.ok(round[0] instanceof Map);
    assert.ok(round[1] instanceof Float32Array);
    assert.equal(Object.getPrototypeOf(round[2]).constructor.name, 'Thing');
    assert.deepEqual(round[3], { x: [1, undefined] });
    assert.equal(Object.getPrototypeOf(round[3]), Object.prototype);
  });
});

// ---------------------------------------------------------------------------
describe('1b. the fakes refuse the same from inside workerd (a JS probe Worker)', () => {
  let probe;
  before(async () => {
    probe = await startProbeWorker();
  });
  after(async () => {
    await probe?.stop();
  });

  it('plain calls pass; Maps and over-limit calls are refused', async () => {
    const cases = {
      'upsert-plain': /^ok$/,
      'upsert-map-metadata': /\(code = 40012\): metadata of vector 0 is a Map/,
      'upsert-map-vector': /\(code = 40012\): vector 0 is a Map/,
      'upsert-1001': /\(code = 40006\)/,
      'upsert-long-id': /\(code = 40008\)/,
      'upsert-wrong-dims': /\(code = 40005\)/,
      'upsert-big-metadata': /\(code = 40023\)/,
      'delete-101': /\(code = 40007\)/,
      'get-101': /\(code = 40007\)/,
      'query-map-filter': /\(code = 40011\)/,
      'ai-plain': /^ok$/,
      'ai-map-input': /^5006: inputs are a Map/,
      'ai-101-texts': /^5006: .*more than 100/,
      'ai-unknown-model': /^5007/,
    };
    for (const [name, pattern] of Object.entries(cases)) {
      const r = await probe.probe(name);
      assert.match(r.ok ? 'ok' : r.message, pattern, `${name}: ${JSON.stringify(r)}`);
    }
    assert.equal(probe.fakes.vectorize.stats().visibleCount, 1, 'only the plain upsert was written');
    assert.equal(probe.fakes.ai.stats().texts, 1);
  });
});

// ---------------------------------------------------------------------------
describe('2. full flow with a 1.5 s visibility delay: never a stale result', () => {
  const DELAY = 1500;
  const DOC = 'flow/penguins';
  const OTHER = 'flow/boulangerie';
  const QUERY = 'emperor penguins krill research';
  const TEXT = {
    1: 'Emperor penguins waddle across Antarctic glaciers hunting krill beneath floating icebergs.',
    2: 'Emperor penguins now nest on sea ice near research stations during the polar winter.',
  };
  let w;
  const step = stepWith(() => w);
  // A vector carries no version (one may serve several versions): each
  // version's vector IDs are recorded as the version is written.
  const idsOf = { 1: new Set(), 2: new Set() };
  const vectorsOf = (docId, version) =>
    w.fakes.vectorize.visibleVectors().filter((v) => v.metadata.doc_id === docId && (version === undefined || idsOf[version].has(v.id)));

  before(async () => {
    w = await startProductionWorker({
      vectorize: { visibilityDelayMs: DELAY, metadataIndexes: ['doc_id', 'generation', 'lang'] },
    });
  });
  after(async () => {
    await w?.stop();
  });

  /**
   * Polls search while `until()` is false (and for at least `minMs`). Every
   * result of DOC must be the version D1 serves (GET before/after the
   * search) with that version's text. Returns how many polls met a stale
   * candidate in the index (answered by the fake, dropped by the Worker).
   */
  async function pollNoStale(until, { minMs, timeoutMs = 20_000 }) {
    const start = Date.now();
    let staleCandidates = 0;
    let polls = 0;
    for (;;) {
      const before = (await api(w.base, 'GET', docPath(DOC))).body;
      const s = await search(w.base, { query: QUERY, top_k: 10 });
      const candidates = w.fakes.vectorize.lastMatches.slice();
      const afterView = (await api(w.base, 'GET', docPath(DOC))).body;
      polls++;
      assert.equal(s.status, 200, s.text);
      const allowed = new Set([before.live_version, afterView.live_version]);
      for (const hit of s.body.results.filter((r) => r.doc_id === DOC)) {
        assert.ok(allowed.has(hit.version), `served version ${hit.version}, live ${[...allowed]}: ${s.text}`);
        assert.ok(TEXT[hit.version]?.includes(hit.text.trim().slice(0, 40)), `text of another version: ${s.text}`);
        assert.ok(!before.deleted || !afterView.deleted, `a deleted document was served: ${s.text}`);
      }
      if (before.live_version === afterView.live_version) {
        const stale = vectorsIds.filter(({ version }) => version !== before.live_version).map(({ id }) => id);
        if (candidates.some((id) => stale.includes(id))) staleCandidates++;
      }
      if (Date.now() - start >= minMs && (await until())) return { staleCandidates, polls };
      assert.ok(Date.now() - start < timeoutMs, 'the index never caught up');
      await sleep(100);
    }
  }
  let vectorsIds = []; // { id, version } of every vector DOC ever had

  step('plain /healthz makes no subrequest; /healthz?deep=1 checks the index', async () => {
    const plain = await api(w.base, 'GET', '/healthz', undefined, { token: null });
    assert.equal(plain.status, 200);
    assert.deepEqual(plain.body, { ok: true });
    assert.equal(w.fakes.vectorize.stats().calls.describe, 0, 'plain /healthz must not describe the index');

    const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assert.equal(deep.status, 200, deep.text);
    assert.deepEqual(deep.body.index, { backend: 'vectorize', dimensions: 768, metric: 'cosine', metric_verified: false, ok: true });
    assert.deepEqual(deep.body.embedder, { backend: 'workers-ai', model: '@cf/baai/bge-base-en-v1.5', pooling: 'mean', dimensions: 768 });
    assert.equal(w.fakes.vectorize.stats().calls.describe, 1);
  });

  step('ingest: indexed in D1 at once, searchable once the index shows it', async () => {
    const put = await api(w.base, 'PUT', docPath(DOC), { text: TEXT[1], metadata: { lang: 'en' } });
    assert.equal(put.status, 202, put.text);
    const other = await api(w.base, 'PUT', docPath(OTHER), {
      text: 'Notre boulangerie vend des croissants chauds chaque matin.',
      metadata: { lang: 'fr' },
    });
    assert.equal(other.status, 202, other.text);
    await waitForState(w.base, DOC, 'indexed', { liveVersion: 1 });
    await waitForState(w.base, OTHER, 'indexed');

    // What reached the index: plain metadata, the configured dimensions, a
    // content-derived ID; the metadata is the document's own, its doc_id
    // and the generation, never the version or the chunk's position (a
    // vector may be shared by versions, at other positions).
    const stored = Array.from(w.fakes.vectorize.eventualState().values()).filter((v) => v.metadata.doc_id === DOC);
    assert.ok(stored.length >= 1);
    for (const v of stored) {
      assert.equal(v.values.length, 768);
      assert.match(v.id, /^[0-9a-f]{32}\.[0-9a-f]{24}$/);
      assert.deepEqual(v.metadata, { doc_id: DOC, generation: 1, lang: 'en' });
      idsOf[1].add(v.id);
    }
    vectorsIds = stored.map((v) => ({ id: v.id, version: 1 }));

    const { polls } = await pollNoStale(async () => vectorsOf(DOC, 1).length > 0, { minMs: 0 });
    assert.ok(polls >= 1);
    const s = await search(w.base, { query: QUERY });
    assert.equal(s.body.results[0]?.doc_id, DOC, s.text);
    assert.equal(s.body.results[0].version, 1);

    const fr = await waitFor(
      async () => {
        const r = await search(w.base, { query: 'croissants boulangerie', filter: { metadata: { lang: 'fr' } } });
        assert.equal(r.status, 200, r.text);
        return r.body.results.length ? r : null;
      },
      { what: 'the French document to be searchable', timeoutMs: 15_000 },
    );
    assert.ok(fr.body.results.every((r) => r.doc_id === OTHER), fr.text);
  });

  step('update: while the index still holds version 1, only version 2 is served', async () => {
    const put = await api(w.base, 'PUT', docPath(DOC), { text: TEXT[2], metadata: { lang: 'en' } });
    assert.equal(put.status, 202, put.text);
    assert.equal(put.body.version, 2);
    await waitForState(w.base, DOC, 'indexed', { liveVersion: 2 });
    // Version 2's vectors: its text is new, so are their IDs.
    for (const v of w.fakes.vectorize.eventualState().values()) {
      if (v.metadata.doc_id === DOC && !idsOf[1].has(v.id)) idsOf[2].add(v.id);
    }
    assert.ok(idsOf[2].size >= 1, 'version 2 wrote vectors of its own');
    vectorsIds.push(...[...idsOf[2]].map((id) => ({ id, version: 2 })));
    assert.ok(vectorsOf(DOC, 1).length > 0, 'version 1 is still visible in the index right after the commit');
    const { staleCandidates } = await pollNoStale(
      async () => vectorsOf(DOC, 1).length === 0 && vectorsOf(DOC, 2).length > 0,
      { minMs: DELAY },
    );
    assert.ok(staleCandidates > 0, 'the index answered with version 1 while version 2 was live (and it was dropped)');
    const s = await search(w.base, { query: QUERY });
    const hit = s.body.results.find((r) => r.doc_id === DOC);
    assert.equal(hit?.version, 2, s.text);
    assert.match(hit.text, /research stations/);
  });

  step('delete: nothing of the document is served, then its vectors go', async () => {
    const del = await api(w.base, 'DELETE', docPath(DOC));
    assert.equal(del.status, 202, del.text);
    await waitForState(w.base, DOC, 'deleted');
    assert.ok(vectorsOf(DOC).length > 0, 'the vectors are still visible right after the delete');
    const { staleCandidates } = await pollNoStale(async () => vectorsOf(DOC).length === 0, { minMs: DELAY });
    assert.ok(staleCandidates > 0, 'the index answered with deleted vectors (and they were dropped)');
    const s = await search(w.base, { query: QUERY, top_k: 50 });
    assert.ok(!s.body.results.some((r) => r.doc_id === DOC), s.text);
    assert.equal(w.fakes.vectorize.eventualState().size, vectorsOf(OTHER).length, 'only the other document remains');
  });

  step('cron: the scheduled handler runs cleanly and the API still answers', async () => {
    const result = await w.scheduled();
    assert.equal(result.outcome, 'ok');
    const runs = await waitFor(() => w.events('repair_run').length > 0 && w.events('repair_run'), { what: 'repair_run' });
    assert.deepEqual(runs.at(-1).failures, []);
    const view = await api(w.base, 'GET', docPath(DOC));
    assert.equal(view.body.state, 'deleted');
    assert.equal(w.fakes.vectorize.stats().rejections.length, 0, JSON.stringify(w.fakes.vectorize.stats().rejections));
    assert.equal(w.fakes.ai.stats().rejections.length, 0);
  });
});

// ---------------------------------------------------------------------------
describe('3. 20 % transient failures: every document still ends indexed', () => {
  const DOCS = [
    ['chaos/volcano', 'Volcanic basalt columns cool into hexagonal pillars along rugged coastlines.'],
    ['chaos/bees', 'Honeybees dance in figure eights to share the location of clover meadows.'],
    ['chaos/tides', 'Spring tides surge when the moon and sun align over the estuary mudflats.'],
    ['chaos/violin', 'Luthiers carve spruce violin tops and varnish maple backs by hand.'],
    ['chaos/comet', 'A comet sheds a glowing tail of ice and dust as it rounds the sun.'],
    ['chaos/cheese', 'Alpine cheesemakers age wheels of gruyere in damp cellars for months.'],
    ['chaos/origami', 'Origami cranes fold from a single square sheet without scissors or glue.'],
    ['chaos/glacier', 'Glacier crevasses open as the ice sheet creeps over bedrock ridges.'],
    ['chaos/chess', 'Grandmasters sacrifice a bishop to open files for their rooks.'],
    ['chaos/kelp', 'Sea otters wrap themselves in kelp fronds to sleep without drifting.'],
    ['chaos/lantern', 'Paper lanterns drift over the river on the last night of the summer festival.'],
    ['chaos/falcon', 'Peregrine falcons stoop at great speed to strike pigeons in mid air.'],
    ['chaos/sourdough', 'A sourdough starter of wild yeast leavens rye loaves overnight.'],
    ['chaos/tram', 'Vintage trams rattle up the hill past tiled facades and tiny cafes.'],
    ['chaos/coral', 'Coral polyps build reefs from calcium carbonate in warm shallow seas.'],
    ['chaos/quilt', 'Quilters stitch patchwork squares of faded cotton into warm blankets.'],
    ['chaos/geyser', 'A geyser erupts every ninety minutes, throwing boiling water skyward.'],
    ['chaos/abacus', 'Merchants once tallied sums by sliding beads along the rods of an abacus.'],
    ['chaos/moss', '苔庭の手入れは、朝露が残るうちに落ち葉を竹箒でそっと掃くことから始まる。'],
    ['chaos/kite', '凧揚げの糸は、正月の河川敷で風を読みながら少しずつ繰り出していく。'],
  ];
  // Later versions: three documents change, two are deleted.
  const UPDATES = [
    ['chaos/bees', 'Bumblebees buzz-pollinate tomato flowers inside warm greenhouses.'],
    ['chaos/chess', 'Endgame studies show a lone king and pawn against a knight holding a draw.'],
    ['chaos/moss', '杉苔は日陰と湿り気を好み、夏の強い西日が当たると茶色く枯れてしまう。'],
  ];
  const DELETES = ['chaos/comet', 'chaos/tram'];
  let w;
  const step = stepWith(() => w);

  before(async () => {
    w = await startProductionWorker({
      vars: {
        RETRY_BASE_DELAY_SECONDS: '1',
        RETRY_MAX_DELAY_SECONDS: '2',
        CLAIM_BUSY_RETRY_SECONDS: '1',
        JOB_ATTEMPTS_MAX: '30',
      },
      vectorize: { failureRate: 0.2, seed: 20260401, timeoutMs: 50 },
      ai: { failureRate: 0.2, seed: 13, timeoutMs: 50 },
      consumer: { maxBatchSize: 1, maxRetries: 100 },
    });
  });
  after(async () => {
    await w?.stop();
  });

  step('twenty documents, all indexed despite the failures; the failures were real and retried', async () => {
    const res = await api(w.base, 'POST', '/v1/documents', {
      documents: DOCS.map(([doc_id, text]) => ({ doc_id, text, metadata: { topic: doc_id.split('/')[1] } })),
    });
    assert.equal(res.status, 200, res.text);
    const items = res.body.results;
    assert.equal(items.length, DOCS.length, res.text);
    assert.ok(items.every((r) => r.status === 202), res.text);

    const views = [];
    for (const [docId] of DOCS) views.push(await waitForState(w.base, docId, 'indexed', { timeoutMs: 180_000 }));
    for (const v of views) {
      assert.equal(v.live_version, 1);
      assert.equal(v.job_state, 'succeeded');
    }

    const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
    const injected = { vectorize: w.fakes.vectorize.stats().injected, ai: w.fakes.ai.stats().injected };
    assert.ok(sum(injected.vectorize) >= 1 && sum(injected.ai) >= 1, `failures were injected: ${JSON.stringify(injected)}`);
    assert.ok(injected.vectorize.timeout >= 1, `some index calls timed out (and may have taken effect): ${JSON.stringify(injected)}`);
    let retried = 0;
    for (const v of views) {
      const job = await api(w.base, 'GET', `/v1/jobs/${encodeURIComponent(v.job_id)}`);
      assert.equal(job.body.state, 'succeeded', job.text);
      if (job.body.attempts > 1) retried++;
    }
    assert.ok(retried >= 1, 'some job needed more than one attempt');

    // Every failure was classified into a transient bucket with a static code.
    const failed = w.events('job_attempt_failed');
    assert.ok(failed.some((e) => e.bucket.startsWith('index_')), JSON.stringify(failed));
    assert.ok(failed.some((e) => e.bucket.startsWith('embed_')), JSON.stringify(failed));
    const transient = new Set(['index_rate_limited', 'index_unavailable', 'embed_rate_limited', 'embed_unavailable']);
    for (const e of failed) {
      assert.ok(transient.has(e.bucket), JSON.stringify(e));
      assert.match(e.code, /^(vectorize|workers_ai)_[a-z_]+$/, JSON.stringify(e));
      assert.equal(e.decision, 'retry');
    }
    assert.equal(w.fakes.vectorize.stats().rejections.length, 0);
    assert.equal(w.fakes.ai.stats().rejections.length, 0);
  });

  step('updates and deletes end as asked despite the failures', async () => {
    for (const [docId, text] of UPDATES) {
      const r = await api(w.base, 'PUT', docPath(docId), { text, metadata: { topic: docId.split('/')[1] } });
      assert.equal(r.status, 202, r.text);
    }
    for (const docId of DELETES) {
      const r = await api(w.base, 'DELETE', docPath(docId));
      assert.equal(r.status, 202, r.text);
    }
    for (const [docId] of UPDATES) {
      const v = await waitForState(w.base, docId, 'indexed', { timeoutMs: 180_000, liveVersion: 2 });
      assert.equal(v.job_state, 'succeeded');
    }
    for (const docId of DELETES) await waitForState(w.base, docId, 'deleted', { timeoutMs: 180_000 });
  });

  step('every search answers as its injected failures decide: 200 with its document first, or 503 with the failing call\'s bucket', async () => {
    const live = DOCS.filter(([docId]) => !DELETES.includes(docId)).map(([docId, text]) => [
      docId,
      UPDATES.find(([d]) => d === docId)?.[1] ?? text,
    ]);
    // A search retries a transiently failing embedder or index call
    // SEARCH_RETRIES_MAX (2) times (src/pipeline/search.rs, `retrying`):
    // it fails only when three tries of one call in a row failed, and then
    // with that call's bucket. The fakes log every draw of their fault
    // injection, so each search's answer is predicted exactly from the
    // draws of the calls a search makes (the AI's `run`, the index's
    // `query`) while it ran; nothing else runs meanwhile (every job ended).
    const TRIES = 3;
    const BUCKET = { rate_limit: 'rate_limited', unavailable: 'unavailable', timeout: 'unavailable' };
    const predicted = (embedDraws, queryDraws) => {
      if (embedDraws.length >= TRIES && embedDraws.slice(0, TRIES).every((k) => k)) return `embed_${BUCKET[embedDraws[TRIES - 1]]}`;
      for (let i = 0; i + TRIES <= queryDraws.length; i++) {
        if (queryDraws.slice(i, i + TRIES).every((k) => k)) return `index_${BUCKET[queryDraws[i + TRIES - 1]]}`;
      }
      return null;
    };
    const SEARCHES = 100;
    const statuses = {};
    const wrong = [];
    const misses = [];
    let failedAsPredicted = 0;
    for (let i = 0; i < SEARCHES; i++) {
      const [docId, text] = live[i % live.length];
      const query = text.split(' ').length > 3 ? text.split(' ').slice(0, 5).join(' ') : text.slice(0, 20);
      const from = { ai: w.fakes.ai.faults.log.length, index: w.fakes.vectorize.faults.log.length };
      const r = await search(w.base, { query, top_k: 3 });
      const embedDraws = w.fakes.ai.faults.log.slice(from.ai).filter((d) => d.op === 'run').map((d) => d.kind);
      const queryDraws = w.fakes.vectorize.faults.log.slice(from.index).filter((d) => d.op === 'query').map((d) => d.kind);
      statuses[r.status] = (statuses[r.status] ?? 0) + 1;
      const want = predicted(embedDraws, queryDraws);
      const got = r.status === 200 ? null : `${r.status} ${r.body?.error?.code}`;
      if ((want === null ? null : `503 ${want}`) !== got) {
        wrong.push(`${query}: answered ${r.status} ${r.text.slice(0, 200)}, predicted ${want ?? 200} from the draws embed ${JSON.stringify(embedDraws)}, query ${JSON.stringify(queryDraws)}`);
        continue;
      }
      if (r.status !== 200) {
        failedAsPredicted++;
        continue;
      }
      if (r.body.results[0]?.doc_id !== docId) misses.push(`${query} → ${r.body.results[0]?.doc_id}`);
      for (const hit of r.body.results) {
        assert.ok(!DELETES.includes(hit.doc_id), `a deleted document was served: ${r.text}`);
        const changed = UPDATES.find(([d]) => d === hit.doc_id);
        if (changed) assert.equal(hit.version, 2, `an old version was served: ${r.text}`);
      }
    }
    process.stderr.write(`# searches under 20 % failures: ${JSON.stringify(statuses)}; ${failedAsPredicted} failed, each as its draws predicted\n`);
    assert.deepEqual(wrong, [], 'every search answered as the failures injected into its calls decide');
    assert.ok((statuses[200] ?? 0) > 0, `some search answered 200: ${JSON.stringify(statuses)}`);
    assert.deepEqual(misses, [], 'every answered search found its document first');
  });

  step('after cron the index holds exactly the vectors of live chunks', async () => {
    const db = await w.mf.getD1Database('DB');
    const liveIds = async () =>
      (
        await db
          .prepare(
            `SELECT c.vector_id FROM chunks c
             JOIN documents d ON d.doc_id = c.doc_id AND d.live_version = c.version
             JOIN generations g ON g.generation = c.generation AND g.state = 'active'
             ORDER BY c.vector_id`,
          )
          .all()
      ).results.map((r) => r.vector_id);
    const indexIds = () => [...w.fakes.vectorize.eventualState().keys()].sort();
    // Cron's own index calls fail 20 % of the time too: a failed cleanup is
    // kept (its intent stays in D1, backed off RETRY_BASE_DELAY_SECONDS) and
    // a later run retries it.
    const RUNS_MAX = 10;
    let runs = 0;
    let expected;
    let held;
    do {
      if (runs > 0) await sleep(1_100);
      const result = await w.scheduled();
      assert.equal(result.outcome, 'ok', JSON.stringify(result));
      runs++;
      expected = await liveIds();
      held = indexIds();
    } while (JSON.stringify(expected) !== JSON.stringify(held) && runs < RUNS_MAX);
    const { results: intents } = await db.prepare('SELECT count(*) AS n FROM cleanup_intents').all();
    process.stderr.write(`# index converged to the live chunks after ${runs} cron run(s); ${expected.length} vectors\n`);
    assert.ok(expected.length >= DOCS.length - DELETES.length, `every live document has chunks: ${expected.length}`);
    assert.deepEqual(held, expected, `after ${runs} cron runs the index differs from the live chunks`);
    assert.equal(intents[0].n, 0, 'no cleanup intent is left');
  });

  step('no raw error text reached the logs', async () => {
    const logs = w.logs();
    for (const raw of RAW_ERROR_TEXTS) assert.ok(!logs.includes(raw), `the log quotes "${raw}"`);
  });
});

// ---------------------------------------------------------------------------
describe('4. an index that disagrees with the configuration is refused', () => {
  const DOC = 'misconfigured/doc';
  let w;
  const step = stepWith(() => w);

  before(async () => {
    w = await startProductionWorker({
      // The Worker embeds with bge-small (384 dims) but the index has 768.
      vars: {
        EMBEDDING_MODEL: '@cf/baai/bge-small-en-v1.5',
        EMBEDDING_DIMENSIONS: '384',
        INDEX_CHECK_TTL_SECONDS: '0',
        RETRY_BASE_DELAY_SECONDS: '1',
        RETRY_MAX_DELAY_SECONDS: '1',
        CLAIM_BUSY_RETRY_SECONDS: '1',
        JOB_ATTEMPTS_MAX: '50',
      },
      vectorize: { dimensions: 768 },
    });
  });
  after(async () => {
    await w?.stop();
  });

  step('/healthz stays 200 without a subrequest; /healthz?deep=1 answers 503 index_misconfigured', async () => {
    const plain = await api(w.base, 'GET', '/healthz', undefined, { token: null });
    assert.equal(plain.status, 200);
    assert.equal(w.fakes.vectorize.stats().calls.describe, 0);
    const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assertErrorCode(deep, 503, 'index_misconfigured', 'the deep check of a 768-dimension index for 384');
    assert.equal(deep.body.ok, false);
    assert.equal(deep.body.error.reason, 'index_dimensions_mismatch');
    assert.equal(deep.body.index.dimensions, 768);
    assert.equal(deep.body.index.expected_dimensions, 384);
  });

  step('a PUT never reaches indexed and no vector is written; the job keeps retrying', async () => {
    const put = await api(w.base, 'PUT', docPath(DOC), { text: 'Lighthouse keepers polish brass lenses before storms.' });
    assert.equal(put.status, 202, put.text);
    // Until the job has been tried three times (positive evidence that
    // its retries ran), every poll sees it neither indexed nor failed.
    let last;
    await waitFor(
      async () => {
        const res = await api(w.base, 'GET', docPath(DOC));
        assert.equal(res.status, 200, res.text);
        last = res.body;
        assert.notEqual(last.state, 'indexed', JSON.stringify(last));
        assert.notEqual(last.state, 'failed', JSON.stringify(last));
        assert.equal(last.live_version, null);
        const job = await api(w.base, 'GET', `/v1/jobs/${encodeURIComponent(put.body.job_id)}`);
        assert.equal(job.status, 200, job.text);
        return job.body.attempts >= 3;
      },
      { timeoutMs: 30_000, intervalMs: 200, what: 'the job to be tried three times' },
    );
    assert.equal(last.last_failure_bucket, 'index_misconfigured', JSON.stringify(last));
    const job = (await api(w.base, 'GET', `/v1/jobs/${encodeURIComponent(put.body.job_id)}`)).body;
    assert.ok(job.attempts >= 2, `the job is retried: ${JSON.stringify(job)}`);
    const stats = w.fakes.vectorize.stats();
    assert.equal(stats.calls.upsert, 0, 'no upsert reached the index');
    assert.equal(w.fakes.vectorize.eventualState().size, 0, 'no vector written');
    assert.ok(stats.calls.describe >= 2, 'each invocation checked the index (INDEX_CHECK_TTL_SECONDS=0)');
    const events = w.events('index_misconfigured');
    assert.ok(events.length >= 1 && events.every((e) => e.code === 'index_dimensions_mismatch'), JSON.stringify(events));

    const s = await search(w.base, { query: 'lighthouse' });
    assertErrorCode(s, 503, 'index_misconfigured', 'a search of an index of the wrong dimensions');

    assert.equal((await w.scheduled()).outcome, 'ok');
    assert.equal(w.fakes.vectorize.stats().calls.upsert, 0);
  });

  step('a metric mismatch (reported by a legacy-shaped describe) is refused too', async () => {
    Object.assign(w.fakes.vectorize, { dimensions: 384, describeShape: 'v1', metric: 'euclidean' });
    const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assert.equal(deep.status, 503, deep.text);
    assert.equal(deep.body.error.reason, 'index_metric_mismatch');
    assert.equal(deep.body.index.metric, 'euclidean');
    assert.equal(deep.body.index.expected_metric, 'cosine');
    // Positive evidence that the job was tried against the wrong metric:
    // an invocation logs the mismatch it refused.
    const seen = w.events('index_misconfigured').length;
    await waitFor(() => w.events('index_misconfigured').slice(seen).some((e) => e.code === 'index_metric_mismatch'), {
      timeoutMs: 30_000,
      what: 'an invocation to refuse the index for its metric',
    });
    const view = await api(w.base, 'GET', docPath(DOC));
    assert.equal(view.status, 200, view.text);
    assert.notEqual(view.body.state, 'indexed', view.text);
    assert.equal(view.body.live_version, null, view.text);
    assert.equal(view.body.last_failure_bucket, 'index_misconfigured', view.text);
    assert.equal(w.fakes.vectorize.stats().calls.upsert, 0);
  });

  step('once the index matches, the same job succeeds', async () => {
    w.fakes.vectorize.metric = 'cosine';
    const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assert.equal(deep.status, 200, deep.text);
    assert.deepEqual(deep.body.index, { backend: 'vectorize', dimensions: 384, metric: 'cosine', metric_verified: true, ok: true });
    const view = await waitForState(w.base, DOC, 'indexed', { timeoutMs: 30_000 });
    assert.equal(view.live_version, 1);
    const stored = w.fakes.vectorize.visibleVectors();
    assert.ok(stored.length >= 1 && stored.every((v) => v.values.length === 384));
    const s = await search(w.base, { query: 'lighthouse keepers brass' });
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.results[0]?.doc_id, DOC, s.text);
  });
  step('a deep check whose description of the index fails answers 503 with the failure\'s bucket', async () => {
    // Nothing else calls the index now (the job succeeded): each scripted
    // failure is met by the deep check itself (INDEX_CHECK_TTL_SECONDS=0:
    // every deep check describes the index).
    for (const [message, status, code] of [
      ['INDEX_GET_ERROR (code = 40003): invalid index name', 503, 'index_rejected'],
      ['INDEX_GET_ERROR (code = 40029): Too Many Requests', 503, 'index_rate_limited'],
      ['INDEX_GET_ERROR: Status + 503', 503, 'index_unavailable'],
      ['INDEX_GET_ERROR: Status + 404', 503, 'index_misconfigured'],
    ]) {
      const before = w.fakes.vectorize.stats().calls.describe;
      w.fakes.vectorize.failNext('describe', message);
      const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
      assertErrorCode(deep, status, code, `a deep check whose describe threw ${JSON.stringify(message)}`);
      assert.equal(deep.body.ok, false, deep.text);
      assert.equal(w.fakes.vectorize.stats().calls.describe, before + 1, 'the deep check described the index once');
      assert.deepEqual(w.fakes.vectorize.scripted, [], 'the scripted failure was met');
    }
    const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assert.equal(deep.status, 200, deep.text);
  });
});

// ---------------------------------------------------------------------------
describe("5. tenants: each tenant's vectors are written into its own namespace", () => {
  const DOC = 'shared/report';
  const TEXT = {
    'tenant-a': 'Emperor penguins waddle across Antarctic glaciers hunting krill beneath floating icebergs.',
    'tenant-b': 'Quarterly invoices reconcile mortgage payments through automated ledger spreadsheets.',
    default: 'Lighthouse keepers polish brass lenses before stormy nights on the rocky coast.',
  };
  const QUERY = {
    'tenant-a': 'penguins antarctic krill',
    'tenant-b': 'invoices mortgage ledger',
    default: 'lighthouse brass lenses',
  };
  const tokens = {};
  let w;
  const step = stepWith(() => w);

  before(async () => {
    w = await startProductionWorker();
  });
  after(async () => {
    await w?.stop();
  });

  step('two tenants and the default one write the same doc_id; each vector lands in its tenant’s namespace', async () => {
    for (const tenant of ['tenant-a', 'tenant-b']) {
      const created = await api(w.base, 'POST', '/v1/admin/tenants', { tenant_id: tenant }, { token: ADMIN_TOKEN });
      assert.equal(created.status, 201, created.text);
      const minted = await api(w.base, 'POST', `/v1/admin/tenants/${tenant}/tokens`, { scopes: ['ingest', 'search'] }, { token: ADMIN_TOKEN });
      assert.equal(minted.status, 201, minted.text);
      tokens[tenant] = minted.body.token;
    }
    tokens.default = INGEST_TOKEN;
    for (const [tenant, token] of Object.entries(tokens)) {
      const put = await api(w.base, 'PUT', docPath(DOC), { text: TEXT[tenant] }, { token });
      assert.equal(put.status, 202, put.text);
    }
    for (const token of Object.values(tokens)) await waitForState(w.base, DOC, 'indexed', { token, liveVersion: 1 });
    const stored = Array.from(w.fakes.vectorize.eventualState().values());
    const byNamespace = {};
    for (const v of stored) (byNamespace[v.namespace ?? '(none)'] ??= []).push(v);
    assert.deepEqual(Object.keys(byNamespace).sort(), ['default', 'tenant-a', 'tenant-b'], JSON.stringify(Object.keys(byNamespace)));
    for (const tenant of Object.keys(tokens)) {
      assert.ok(byNamespace[tenant].length >= 1, tenant);
      for (const v of byNamespace[tenant]) assert.equal(v.metadata.doc_id, DOC, JSON.stringify(v.metadata));
    }
    // One doc_id, three documents: three sets of vector IDs, none shared.
    const ids = stored.map((v) => v.id);
    assert.equal(new Set(ids).size, ids.length);
    assert.deepEqual(w.fakes.vectorize.namespaces(), ['default', 'tenant-a', 'tenant-b']);
  });

  step('each search asks the index for its own namespace only, and serves only its own text', async () => {
    await waitFor(() => w.fakes.vectorize.visibleVectors().length >= 3, { what: 'the vectors to be visible' });
    const before = w.fakes.vectorize.queryNamespaces.length;
    for (const [tenant, token] of Object.entries(tokens)) {
      for (const [other, query] of Object.entries(QUERY)) {
        const s = await search(w.base, { query, top_k: 10 }, { token });
        assert.equal(s.status, 200, s.text);
        assert.ok(s.body.results.length >= 1, `${tenant} finds its document: ${s.text}`);
        for (const hit of s.body.results) {
          assert.equal(hit.doc_id, DOC);
          assert.equal(hit.text, TEXT[tenant], `${tenant} searching for ${other}'s words got: ${s.text}`);
        }
      }
    }
    const asked = w.fakes.vectorize.queryNamespaces.slice(before);
    assert.deepEqual(asked, Object.keys(tokens).flatMap((t) => Array(Object.keys(QUERY).length).fill(t)), 'every query named the tenant’s namespace');
    assert.ok(!w.fakes.vectorize.queryNamespaces.includes(null), 'no query without a namespace');
  });

  step("a tenant's delete removes only its own vectors", async () => {
    const del = await api(w.base, 'DELETE', docPath(DOC), undefined, { token: tokens['tenant-b'] });
    assert.equal(del.status, 202, del.text);
    await waitForState(w.base, DOC, 'deleted', { token: tokens['tenant-b'] });
    await waitFor(() => !w.fakes.vectorize.namespaces().includes('tenant-b'), { what: "tenant-b's vectors to go" });
    assert.deepEqual(w.fakes.vectorize.namespaces(), ['default', 'tenant-a']);
    const a = await waitForState(w.base, DOC, 'indexed', { token: tokens['tenant-a'] });
    assert.equal(a.live_version, 1);
    assert.equal(w.fakes.vectorize.stats().rejections.length, 0, JSON.stringify(w.fakes.vectorize.stats().rejections));
  });
});

// ---------------------------------------------------------------------------
describe('6. a configuration that does not validate answers 503 config_invalid', () => {
  let w;
  const step = stepWith(() => w);

  before(async () => {
    w = await startProductionWorker({ vars: { EMBEDDING_DIMENSIONS: 'many' } });
  });
  after(async () => {
    await w?.stop();
  });

  step('liveness answers; the deep check and every route refuse with config_invalid; no binding is called', async () => {
    const plain = await api(w.base, 'GET', '/healthz', undefined, { token: null });
    assert.equal(plain.status, 200, plain.text);
    assert.deepEqual(plain.body, { ok: true });
    const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assertErrorCode(deep, 503, 'config_invalid', 'the deep check of an invalid configuration');
    for (const [method, urlPath, body, token] of [
      ['PUT', docPath('d'), { text: 'never written' }, INGEST_TOKEN],
      ['GET', docPath('d'), undefined, INGEST_TOKEN],
      ['POST', '/v1/search', { query: 'anything' }, INGEST_TOKEN],
      ['GET', '/v1/admin/generations', undefined, ADMIN_TOKEN],
      ['GET', docPath('d'), undefined, null],
    ]) {
      assertErrorCode(await api(w.base, method, urlPath, body, { token }), 503, 'config_invalid', `${method} ${urlPath} (token: ${token !== null})`);
    }
    const calls = Object.values(w.fakes.vectorize.stats().calls).reduce((a, b) => a + b, 0);
    assert.equal(calls, 0, 'no index call');
    assert.equal(w.fakes.ai.stats().calls, 0, 'no embedder call');
  });
});

// ---------------------------------------------------------------------------
describe("7. two shards: the deep check checks each shard's index and names the one that fails", () => {
  let w;
  const step = stepWith(() => w);

  before(async () => {
    // Shard 0's index agrees with the configuration (768 dimensions);
    // shard 1's has 384.
    w = await startProductionWorker({
      vars: { INDEX_CHECK_TTL_SECONDS: '0' },
      vectorizeShard1: { dimensions: 384 },
    });
  });
  after(async () => {
    await w?.stop();
  });

  step("/healthz?deep=1 answers 503 index_misconfigured with shard 1, then 200 with both once it is fixed", async () => {
    const deep = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assertErrorCode(deep, 503, 'index_misconfigured', "the deep check of shard 1's 384-dimension index");
    assert.equal(deep.body.error.shard, 1, deep.text);
    assert.equal(deep.body.error.reason, 'index_dimensions_mismatch', deep.text);
    assert.equal(deep.body.index.dimensions, 384, deep.text);
    assert.ok(w.fakes.vectorize.stats().calls.describe >= 1, "shard 0's index was described first");
    assert.ok(w.fakes.vectorize1.stats().calls.describe >= 1, "shard 1's index was described");
    Object.assign(w.fakes.vectorize1, { dimensions: 768 });
    const fixed = await api(w.base, 'GET', '/healthz?deep=1', undefined, { token: null });
    assert.equal(fixed.status, 200, fixed.text);
    assert.equal(fixed.body.shards, 2, fixed.text);
    assert.equal(fixed.body.error, undefined, fixed.text);
  });
});
