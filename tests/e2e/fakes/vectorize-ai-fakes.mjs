// Strict fakes of the Vectorize (V2) and Workers AI bindings, in plain
// JavaScript (no Node or workerd API beyond Date.now and setTimeout).
//
// They refuse what the real services refuse (batch sizes, ID length,
// dimensions, metadata size and keys, topK), and more strictly than the real
// bindings they refuse arguments that would be LOST on the way: the real
// bindings JSON.stringify their arguments, which turns a JS `Map` into `{}`
// silently; here a Map (or any object that is not a plain object) is an
// error. Mutations become visible only after `visibilityDelayMs` (eventual
// consistency), and failures are injected at `failureRate` from a seeded
// PRNG (rate limit, unavailable, timeout; a timeout may have committed).
//
// Namespaces as in Vectorize (developers.cloudflare.com/vectorize: "Insert
// vectors" § Namespaces, "Vectorize API" § Vectors, "Limits"): a vector
// may carry a `namespace` (at most 64 bytes; at most 50,000 namespaces per
// index on Workers Paid); a query with `namespace` searches only the
// vectors of that namespace; IDs are unique in the whole index, so an
// upsert of an existing ID into another namespace replaces (moves) the
// vector, and getByIds / deleteByIds take IDs alone. The docs do not say
// what a query WITHOUT a namespace searches; here it searches the whole
// index (`queryNamespaces` records what each query asked for, so a test can
// assert that the Worker never relies on that case).
//
// Errors are shaped like the real ones, since the Worker classifies them by
// their text:
//   Vectorize: Error("VECTOR_UPSERT_ERROR (code = 40007): …") or
//              Error("VECTOR_QUERY_ERROR: Status + 503")
//   AI:        InferenceUpstreamError("3040: No more data centers …")
//
// In workerd the bindings are `fakes/binding-shim.mjs` (wrapped bindings)
// forwarding each call, with its argument types preserved (the shim's
// `encode`, `decode` below), to these classes running in the test process,
// where the tests read their state directly.

import { encode, isPlainObject, kindOf } from './binding-shim.mjs';

export { encode, isPlainObject };

export const VECTORIZE_LIMITS = Object.freeze({
  upsertMax: 1000,
  deleteMax: 100,
  getMax: 100,
  idBytesMax: 64,
  metadataBytesMax: 10 * 1024,
  dimensionsMax: 1536,
  topKMax: 100,
  topKMaxWithValuesOrAllMetadata: 50,
  filterBytesMax: 2048,
  namespaceBytesMax: 64,
  namespacesMax: 50_000,
});

export const AI_LIMITS = Object.freeze({ textsMax: 100 });

/** Output dimensions of the embedding models the fake AI serves. */
export const MODEL_DIMENSIONS = Object.freeze({
  '@cf/baai/bge-small-en-v1.5': 384,
  '@cf/baai/bge-base-en-v1.5': 768,
  '@cf/baai/bge-large-en-v1.5': 1024,
  '@cf/baai/bge-m3': 1024,
});

const FAILURE_KINDS = ['rate_limit', 'unavailable', 'timeout'];

/** mulberry32: a small, seeded, deterministic PRNG in [0, 1). */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const encoder = new TextEncoder();
const utf8Bytes = (s) => encoder.encode(s).length;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function fnv1a(s) {
  let h = 0x811c9dc5;
  for (const b of encoder.encode(s)) {
    h ^= b;
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * A deterministic embedding: each word (lower-cased letters and digits)
 * hashed to a signed position, then L2-normalized. Texts sharing words are
 * close under cosine, so lexical search works. `pooling` changes the hash,
 * so mean and cls vectors are (as in reality) not comparable, and so does
 * `model` (the fake AI passes the model it runs): a query embedded by
 * another model than its document's vectors does not find it.
 */
export function fakeEmbedding(text, dims, pooling = 'mean', model = '') {
  const v = new Array(dims).fill(0);
  const words = String(text).toLowerCase().match(/[\p{L}\p{N}]+/gu) ?? [];
  const salt = model ? `${model}:${pooling}` : pooling;
  for (const w of words) {
    const h = fnv1a(`${salt}:${w}`);
    v[h % dims] += h & 0x80000000 ? -1 : 1;
  }
  let norm = Math.hypot(...v);
  if (norm === 0) {
    v[0] = 1;
    norm = 1;
  }
  return v.map((x) => x / norm);
}

function isFloatVector(v) {
  return Array.isArray(v) || v instanceof Float32Array || v instanceof Float64Array;
}

/** Fault injection from a seeded PRNG; counts what it injected, and logs every draw with its operation. */
class Faults {
  constructor({ failureRate = 0, seed = 1, failureKinds = FAILURE_KINDS, timeoutMs = 100, ops = null } = {}) {
    this.rate = failureRate;
    this.kinds = failureKinds;
    this.timeoutMs = timeoutMs;
    this.ops = ops; // null: every operation may fail
    this.random = mulberry32(seed);
    this.injected = Object.fromEntries(FAILURE_KINDS.map((k) => [k, 0]));
    this.log = []; // { op, kind } of every draw, in order (kind null: no failure injected)
  }

  /** The failure to inject into this call, or null. */
  draw(op) {
    if (this.rate <= 0 || (this.ops && !this.ops.includes(op))) return null;
    if (this.random() >= this.rate) {
      this.log.push({ op, kind: null });
      return null;
    }
    const kind = this.kinds[Math.floor(this.random() * this.kinds.length)];
    this.injected[kind] += 1;
    this.log.push({ op, kind });
    return { kind, committed: kind === 'timeout' && this.random() < 0.5 };
  }
}

const VECTORIZE_OPS = {
  describe: 'INDEX_GET',
  query: 'VECTOR_QUERY',
  insert: 'VECTOR_INSERT',
  upsert: 'VECTOR_UPSERT',
  getByIds: 'VECTOR_GET',
  deleteByIds: 'VECTOR_DELETE',
};

export class VectorizeRejection extends Error {}

function vectorizeError(op, code, text) {
  const e = new VectorizeRejection(`${VECTORIZE_OPS[op]}_ERROR (code = ${code}): ${text}`);
  e.name = 'Error';
  e.vectorizeCode = code;
  return e;
}

/**
 * The Vectorize index. Options: dimensions, metric, visibilityDelayMs,
 * failureRate, seed, failureKinds, timeoutMs, failureOps, describeShape
 * ('v2': {dimensions, vectorCount, …}; 'v1': {config: {dimensions, metric}, …}),
 * metadataIndexes (null: every property is filterable; else only these, as
 * in production where filtering needs a metadata index), namespacesMax
 * (distinct namespaces the index may hold; Vectorize's 50,000 by default).
 */
export class FakeVectorizeIndex {
  constructor({
    name = 'ingest-chunks',
    dimensions = 768,
    metric = 'cosine',
    visibilityDelayMs = 0,
    describeShape = 'v2',
    metadataIndexes = null,
    namespacesMax = VECTORIZE_LIMITS.namespacesMax,
    now = () => Date.now(),
    ...faults
  } = {}) {
    this.name = name;
    this.dimensions = dimensions;
    this.metric = metric;
    this.visibilityDelayMs = visibilityDelayMs;
    this.describeShape = describeShape;
    this.metadataIndexes = metadataIndexes;
    this.namespacesMax = namespacesMax;
    this.now = now;
    this.faults = new Faults({ ...faults, ops: faults.failureOps ?? null });
    this.visible = new Map(); // id → { id, values: number[], metadata }
    this.pending = []; // { at, seq, apply }
    this.seq = 0;
    this.processedUpTo = null;
    this.calls = Object.fromEntries(Object.keys(VECTORIZE_OPS).map((k) => [k, 0]));
    this.rejections = []; // { op, code }
    this.accepted = { upserted: 0, deleted: 0 };
    this.lastMatches = []; // IDs the last successful query returned
    this.queryNamespaces = []; // the `namespace` of each accepted query (null: none given)
    this.scripted = []; // { op, message }: failures `failNext` queued, thrown by the next calls of `op`
  }

  /** The next call of `op` fails with `Error(message)` (as the binding throws), before any effect. */
  failNext(op, message) {
    this.scripted.push({ op, message });
  }

  // ---- state, for tests -------------------------------------------------

  /** Applies the mutations whose visibility time has come, in order. */
  settle() {
    const now = this.now();
    while (this.pending.length && this.pending[0].at <= now) {
      const m = this.pending.shift();
      m.apply();
      this.processedUpTo = m;
    }
  }

  /** The vectors visible now, as `{id, values, metadata}`. */
  visibleVectors() {
    this.settle();
    return Array.from(this.visible.values());
  }

  /** Every vector, as it will be once all pending mutations are visible. */
  eventualState() {
    const copy = new Map(this.visible);
    const saved = this.visible;
    this.visible = copy;
    try {
      for (const m of this.pending) m.apply();
    } finally {
      this.visible = saved;
    }
    return copy;
  }

  /** The distinct namespaces of the vectors visible now, sorted (a vector without one is in none). */
  namespaces() {
    this.settle();
    return [...new Set(Array.from(this.visible.values(), (v) => v.namespace).filter((n) => n !== undefined))].sort();
  }

  stats() {
    this.settle();
    return {
      calls: { ...this.calls },
      injected: { ...this.faults.injected },
      rejections: this.rejections.slice(),
      accepted: { ...this.accepted },
      visibleCount: this.visible.size,
      pendingMutations: this.pending.length,
    };
  }

  // ---- helpers ----------------------------------------------------------

  reject(op, code, text) {
    this.rejections.push({ op, code });
    throw vectorizeError(op, code, text);
  }

  async enter(op) {
    this.calls[op] += 1;
    this.settle();
  }

  /** Injects a drawn failure; `commit` runs first when a timeout committed. */
  async maybeFail(op, commit) {
    const i = this.scripted.findIndex((x) => x.op === op);
    if (i >= 0) throw new Error(this.scripted.splice(i, 1)[0].message);
    const f = this.faults.draw(op);
    if (!f) return;
    const OP = VECTORIZE_OPS[op];
    if (f.kind === 'rate_limit') throw new Error(`${OP}_ERROR (code = 40029): Too Many Requests`);
    if (f.kind === 'unavailable') throw new Error(`${OP}_ERROR: Status + 503`);
    await sleep(this.faults.timeoutMs);
    if (f.committed && commit) commit();
    throw new Error(`${OP}_ERROR: Status + 504`);
  }

  mutate(apply) {
    const seq = ++this.seq;
    const mutationId = `mutation-${seq}`;
    this.pending.push({ at: this.now() + this.visibilityDelayMs, seq, mutationId, apply, namespaces: apply.namespaces });
    if (this.visibilityDelayMs <= 0) this.settle();
    return { mutationId };
  }

  checkIds(op, ids, max) {
    if (!Array.isArray(ids)) this.reject(op, 40003, `ids must be an array, got ${kindOf(ids)}`);
    if (ids.length > max) this.reject(op, 40007, `too many ids: ${ids.length} > ${max}`);
    for (const id of ids) {
      if (typeof id !== 'string' || id.length === 0) this.reject(op, 40003, `an id is not a non-empty string`);
    }
  }

  checkVector(op, v, i) {
    if (!isPlainObject(v)) this.reject(op, 40012, `vector ${i} is a ${kindOf(v)}, not a plain object`);
    const { id, values, metadata, namespace } = v;
    if (typeof id !== 'string' || id.length === 0) this.reject(op, 40003, `vector ${i} has no string id`);
    if (utf8Bytes(id) > VECTORIZE_LIMITS.idBytesMax) {
      this.reject(op, 40008, `vector id is ${utf8Bytes(id)} bytes, over ${VECTORIZE_LIMITS.idBytesMax}`);
    }
    if (!isFloatVector(values)) this.reject(op, 40002, `values of vector ${i} are a ${kindOf(values)}`);
    if (values.length !== this.dimensions) {
      this.reject(op, 40005, `vector dimension mismatch: index has ${this.dimensions}, got ${values.length}`);
    }
    for (const x of values) {
      if (typeof x !== 'number' || !Number.isFinite(x)) this.reject(op, 40002, `values of vector ${i} are not finite numbers`);
    }
    if (metadata !== undefined) {
      if (!isPlainObject(metadata)) {
        this.reject(op, 40012, `metadata of vector ${i} is a ${kindOf(metadata)}, not a plain object (the real binding would send {})`);
      }
      for (const [k, val] of Object.entries(metadata)) {
        if (k.length === 0 || k.startsWith('$') || k.includes('.') || k.includes('"')) {
          this.reject(op, 40018, `invalid metadata key`);
        }
        if (val !== null && typeof val === 'object' && !Array.isArray(val) && !isPlainObject(val)) {
          this.reject(op, 40012, `metadata value is a ${kindOf(val)}`);
        }
      }
      if (utf8Bytes(JSON.stringify(metadata)) > VECTORIZE_LIMITS.metadataBytesMax) {
        this.reject(op, 40023, `metadata over ${VECTORIZE_LIMITS.metadataBytesMax} bytes`);
      }
    }
    if (namespace !== undefined) this.checkNamespace(op, namespace);
    // What the real binding sends: JSON.
    return JSON.parse(JSON.stringify({ id, values: Array.from(values), metadata: metadata ?? {}, namespace }));
  }

  checkNamespace(op, namespace) {
    if (typeof namespace !== 'string' || utf8Bytes(namespace) > VECTORIZE_LIMITS.namespaceBytesMax) {
      this.reject(op, 40003, `invalid namespace: must be a string of at most ${VECTORIZE_LIMITS.namespaceBytesMax} bytes`);
    }
  }

  write(op, vectors, overwrite) {
    if (!Array.isArray(vectors)) this.reject(op, 40002, `vectors must be an array, got ${kindOf(vectors)}`);
    if (vectors.length === 0) this.reject(op, 40002, 'no vectors');
    if (vectors.length > VECTORIZE_LIMITS.upsertMax) {
      this.reject(op, 40006, `too many vectors: ${vectors.length} > ${VECTORIZE_LIMITS.upsertMax}`);
    }
    const clean = vectors.map((v, i) => this.checkVector(op, v, i));
    // Namespaces are created by the writes into them. (The error code of
    // the real limit is not documented; this one is the fake's.)
    const namespaces = [...new Set(clean.map((v) => v.namespace).filter((n) => n !== undefined))];
    const held = new Set(this.namespaces());
    for (const m of this.pending) for (const n of m.namespaces ?? []) held.add(n);
    const fresh = namespaces.filter((n) => !held.has(n));
    if (held.size + fresh.length > this.namespacesMax) {
      this.reject(op, 40099, `too many namespaces: the index holds ${held.size}, at most ${this.namespacesMax}`);
    }
    return Object.assign(() => {
      for (const v of clean) {
        if (overwrite || !this.visible.has(v.id)) this.visible.set(v.id, v);
      }
    }, { namespaces });
  }

  matchesFilter(metadata, filter) {
    for (const [key, cond] of Object.entries(filter)) {
      if (this.metadataIndexes && !this.metadataIndexes.includes(key)) return false;
      const value = metadata?.[key];
      if (isPlainObject(cond)) {
        for (const [opName, operand] of Object.entries(cond)) {
          const ok =
            opName === '$eq' ? value === operand
            : opName === '$ne' ? value !== operand
            : opName === '$in' ? operand.includes(value)
            : opName === '$nin' ? !operand.includes(value)
            : false;
          if (!ok) return false;
        }
      } else if (value !== cond) {
        return false;
      }
    }
    return true;
  }

  score(a, b) {
    let dot = 0;
    let na = 0;
    let nb = 0;
    for (let i = 0; i < a.length; i++) {
      dot += a[i] * b[i];
      na += a[i] * a[i];
      nb += b[i] * b[i];
    }
    if (this.metric === 'dot-product') return dot;
    if (this.metric === 'euclidean') return Math.sqrt(Math.max(0, na + nb - 2 * dot));
    return na && nb ? dot / Math.sqrt(na * nb) : 0;
  }

  // ---- the binding ------------------------------------------------------

  async describe() {
    await this.enter('describe');
    await this.maybeFail('describe');
    if (this.describeShape === 'v1') {
      return {
        id: `fake-${this.name}`,
        name: this.name,
        config: { dimensions: this.dimensions, metric: this.metric },
        vectorsCount: this.visible.size,
      };
    }
    return {
      dimensions: this.dimensions,
      vectorCount: this.visible.size,
      processedUpToDatetime: this.processedUpTo ? new Date(this.processedUpTo.at).toISOString() : null,
      processedUpToMutation: this.processedUpTo?.mutationId ?? null,
    };
  }

  async upsert(vectors) {
    await this.enter('upsert');
    const apply = this.write('upsert', vectors, true);
    await this.maybeFail('upsert', () => this.mutate(apply));
    this.accepted.upserted += vectors.length;
    return this.mutate(apply);
  }

  async insert(vectors) {
    await this.enter('insert');
    const apply = this.write('insert', vectors, false);
    await this.maybeFail('insert', () => this.mutate(apply));
    return this.mutate(apply);
  }

  async deleteByIds(ids) {
    await this.enter('deleteByIds');
    this.checkIds('deleteByIds', ids, VECTORIZE_LIMITS.deleteMax);
    const list = ids.slice();
    const apply = () => {
      for (const id of list) this.visible.delete(id);
    };
    await this.maybeFail('deleteByIds', () => this.mutate(apply));
    this.accepted.deleted += list.length;
    return this.mutate(apply);
  }

  async getByIds(ids) {
    await this.enter('getByIds');
    this.checkIds('getByIds', ids, VECTORIZE_LIMITS.getMax);
    await this.maybeFail('getByIds');
    return ids.filter((id) => this.visible.has(id)).map((id) => structuredClone(this.visible.get(id)));
  }

  async query(vector, options = {}) {
    await this.enter('query');
    const op = 'query';
    if (!isFloatVector(vector)) this.reject(op, 40002, `query vector is a ${kindOf(vector)}`);
    if (vector.length !== this.dimensions) {
      this.reject(op, 40005, `query vector dimension mismatch: index has ${this.dimensions}, got ${vector.length}`);
    }
    if (!isPlainObject(options)) this.reject(op, 40010, `options are a ${kindOf(options)}, not a plain object`);
    const { topK = 5, returnValues = false, returnMetadata = 'none', filter, namespace } = options;
    if (namespace !== undefined) this.checkNamespace(op, namespace);
    if (![true, false, 'none', 'indexed', 'all'].includes(returnMetadata)) this.reject(op, 40010, 'invalid returnMetadata');
    const heavy = returnValues === true || returnMetadata === 'all' || returnMetadata === true;
    const topKMax = heavy ? VECTORIZE_LIMITS.topKMaxWithValuesOrAllMetadata : VECTORIZE_LIMITS.topKMax;
    if (!Number.isInteger(topK) || topK < 1 || topK > topKMax) this.reject(op, 40010, `topK must be 1..${topKMax}`);
    if (filter !== undefined) {
      if (!isPlainObject(filter)) this.reject(op, 40011, `filter is a ${kindOf(filter)}, not a plain object`);
      if (utf8Bytes(JSON.stringify(filter)) > VECTORIZE_LIMITS.filterBytesMax) this.reject(op, 40011, 'filter too large');
      for (const [k, cond] of Object.entries(filter)) {
        if (k.length === 0 || k.startsWith('$') || k.includes('.') || k.includes('"')) this.reject(op, 40011, 'invalid filter key');
        if (cond !== null && typeof cond === 'object') {
          if (!isPlainObject(cond)) this.reject(op, 40011, `filter value is a ${kindOf(cond)}`);
          for (const o of Object.keys(cond)) {
            if (!['$eq', '$ne', '$in', '$nin'].includes(o)) this.reject(op, 40011, 'unsupported filter operator');
          }
        }
      }
    }
    await this.maybeFail('query');
    this.queryNamespaces.push(namespace ?? null);
    const q = Array.from(vector);
    const scored = [];
    for (const v of this.visible.values()) {
      // With a namespace, only its vectors are searched (before scoring).
      if (namespace !== undefined && v.namespace !== namespace) continue;
      if (filter && !this.matchesFilter(v.metadata, filter)) continue;
      scored.push({ v, score: this.score(q, v.values) });
    }
    const asc = this.metric === 'euclidean';
    scored.sort((a, b) => (asc ? a.score - b.score : b.score - a.score) || (a.v.id < b.v.id ? -1 : 1));
    const matches = scored.slice(0, topK).map(({ v, score }) => {
      const m = { id: v.id, score };
      if (returnValues) m.values = v.values.slice();
      if (returnMetadata === 'all' || returnMetadata === true || returnMetadata === 'indexed') m.metadata = structuredClone(v.metadata);
      return m;
    });
    this.lastMatches = matches.map((m) => m.id);
    return { count: matches.length, matches };
  }
}

export class InferenceUpstreamError extends Error {
  constructor(message) {
    super(message);
    this.name = 'InferenceUpstreamError';
  }
}

/** The Workers AI binding, for the bge embedding models only. */
export class FakeWorkersAi {
  constructor(faults = {}) {
    this.faults = new Faults(faults);
    this.calls = 0;
    this.texts = 0;
    this.models = {}; // model → calls answered
    this.rejections = [];
  }

  stats() {
    return { calls: this.calls, texts: this.texts, injected: { ...this.faults.injected }, rejections: this.rejections.slice() };
  }

  reject(code, text) {
    this.rejections.push({ code });
    throw new InferenceUpstreamError(`${code}: ${text}`);
  }

  async run(model, inputs, options = {}) {
    this.calls += 1;
    const dims = MODEL_DIMENSIONS[model];
    if (typeof model !== 'string' || dims === undefined) this.reject(5007, `No such model ${model} or task`);
    if (!isPlainObject(inputs)) {
      this.reject(5006, `inputs are a ${kindOf(inputs)}, not a plain object (the real binding would send {})`);
    }
    if (options !== undefined && !isPlainObject(options)) this.reject(5006, `options are a ${kindOf(options)}`);
    const { text, pooling } = inputs;
    const texts = typeof text === 'string' ? [text] : text;
    if (!Array.isArray(texts)) this.reject(5006, `must have required property 'text' (an array of strings), got ${kindOf(text)}`);
    if (texts.length === 0) this.reject(5006, 'text must NOT have fewer than 1 items');
    if (texts.length > AI_LIMITS.textsMax) this.reject(5006, `text must NOT have more than ${AI_LIMITS.textsMax} items`);
    for (const t of texts) {
      if (typeof t !== 'string' || t.length === 0) this.reject(5006, 'every text must be a non-empty string');
    }
    if (pooling !== undefined && pooling !== 'mean' && pooling !== 'cls') this.reject(5006, 'pooling must be "mean" or "cls"');
    const f = this.faults.draw('run');
    if (f?.kind === 'rate_limit') throw new InferenceUpstreamError('3040: No more data centers to forward the request to');
    if (f?.kind === 'unavailable') throw new InferenceUpstreamError('Internal server error');
    if (f?.kind === 'timeout') {
      await sleep(this.faults.timeoutMs);
      throw new InferenceUpstreamError('3007: Request timeout');
    }
    this.texts += texts.length;
    const p = pooling ?? 'mean';
    this.models[model] = (this.models[model] ?? 0) + 1;
    return { shape: [texts.length, dims], data: texts.map((t) => fakeEmbedding(t, dims, p, model)), pooling: p };
  }
}

// ---- transport between the workerd shim and these classes -----------------
//
// JSON loses exactly what the fakes must see (a Map, a Float32Array, a class
// instance), so the shim sends tagged JSON (`encode` in binding-shim.mjs):
// every object is wrapped with its kind, and `decode` rebuilds the same kinds.

const TYPED = { Float32Array, Float64Array, Int32Array, Uint8Array, Int8Array, Uint16Array, Int16Array, Uint32Array };

export function decode(v) {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decode);
  if ('$u' in v) return undefined;
  if ('$n' in v) return Number(v.$n);
  if ('$big' in v) return BigInt(v.$big);
  if ('$typed' in v) return new (TYPED[v.$typed] ?? Float64Array)(v.v);
  if ('$map' in v) return new Map(v.$map.map(([k, x]) => [decode(k), decode(x)]));
  if ('$fn' in v) return () => {};
  const fields = Object.fromEntries(Object.entries(v.$o).map(([k, x]) => [k, decode(x)]));
  if ('$class' in v) {
    const Named = { [v.$class]: class {} }[v.$class];
    return Object.assign(new Named(), fields);
  }
  return fields;
}

/**
 * The test-process side of the shim: a fetch handler (for a Miniflare
 * service binding) that calls `fakes.vectorize` / `fakes.ai`.
 * `ResponseClass` is Miniflare's `Response`.
 */
export function fakeBackendHandler(fakes, ResponseClass) {
  const methods = {
    vectorize: ['describe', 'query', 'insert', 'upsert', 'getByIds', 'deleteByIds'],
    vectorize1: ['describe', 'query', 'insert', 'upsert', 'getByIds', 'deleteByIds'],
    ai: ['run'],
  };
  return async (request) => {
    const [, binding, method] = new URL(request.url).pathname.split('/');
    const target = fakes[binding];
    if (!target || !methods[binding]?.includes(method)) {
      return ResponseClass.json({ error: { name: 'TypeError', message: `${binding}.${method} is not a function` } }, { status: 500 });
    }
    try {
      const args = decode(await request.json());
      const result = await target[method](...args);
      return ResponseClass.json({ result: result ?? null });
    } catch (e) {
      return ResponseClass.json({ error: { name: e?.name ?? 'Error', message: String(e?.message ?? e) } }, { status: 500 });
    }
  };
}
