// The Vectorize and Workers AI bindings the Worker sees in the workerd tests:
// Miniflare wrapped bindings (`wrappedBindings: {VECTORIZE: {scriptName,
// entrypoint: 'vectorize'}, AI: {…, entrypoint: 'ai'}}`). Each entrypoint
// receives the wrapped worker's env and returns the binding object.
//
// The binding objects run inside the Worker's isolate, so they see the very
// values the Worker passes (a Map is still a Map, a Float32Array still one).
// They forward every call, types preserved by `encode`, to the strict fakes
// of `vectorize-ai-fakes.mjs` living in the test process (the FAKE_BACKEND
// service binding), and rethrow their errors with the same name and message.
//
// A wrapped binding must be a single module: this file imports nothing.

export function isPlainObject(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

export function kindOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'Array';
  if (typeof v !== 'object') return typeof v;
  return Object.getPrototypeOf(v)?.constructor?.name ?? 'Object';
}

/**
 * Tagged JSON that keeps what plain JSON loses: undefined, non-finite
 * numbers, typed arrays, Maps, and whether an object is plain (`$o`) or a
 * class instance (`$class`). `decode` in vectorize-ai-fakes.mjs inverts it.
 */
export function encode(v) {
  if (v === undefined) return { $u: 1 };
  if (v === null || typeof v === 'boolean' || typeof v === 'string') return v;
  if (typeof v === 'number') return Number.isFinite(v) ? v : { $n: String(v) };
  if (typeof v === 'bigint') return { $big: String(v) };
  if (Array.isArray(v)) return v.map(encode);
  if (ArrayBuffer.isView(v)) return { $typed: v.constructor.name, v: Array.from(v) };
  if (v instanceof Map) return { $map: Array.from(v, ([k, x]) => [encode(k), encode(x)]) };
  if (typeof v === 'object') {
    const fields = Object.fromEntries(Object.entries(v).map(([k, x]) => [k, encode(x)]));
    return isPlainObject(v) ? { $o: fields } : { $class: kindOf(v), $o: fields };
  }
  return { $fn: typeof v };
}

async function call(env, binding, method, args) {
  const res = await env.FAKE_BACKEND.fetch(`http://fake-backend/${binding}/${method}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(args.map(encode)),
  });
  const body = await res.json();
  if (res.status !== 200) {
    const e = new Error(body.error.message);
    e.name = body.error.name;
    throw e;
  }
  return body.result;
}

// Named as the production classes are, for code that looks at the name.
class VectorizeIndexImpl {
  #env;
  #name;
  // `name`: which fake index the calls reach (`vectorize`, or
  // `vectorize1` for a second shard's).
  constructor(env, name = 'vectorize') {
    this.#env = env;
    this.#name = name;
  }
  describe() {
    return call(this.#env, this.#name, 'describe', []);
  }
  query(vector, options) {
    return call(this.#env, this.#name, 'query', [vector, options]);
  }
  insert(vectors) {
    return call(this.#env, this.#name, 'insert', [vectors]);
  }
  upsert(vectors) {
    return call(this.#env, this.#name, 'upsert', [vectors]);
  }
  getByIds(ids) {
    return call(this.#env, this.#name, 'getByIds', [ids]);
  }
  deleteByIds(ids) {
    return call(this.#env, this.#name, 'deleteByIds', [ids]);
  }
}

class Ai {
  #env;
  constructor(env) {
    this.#env = env;
  }
  run(model, inputs, options) {
    return call(this.#env, 'ai', 'run', options === undefined ? [model, inputs] : [model, inputs, options]);
  }
}

export function vectorize(env) {
  return new VectorizeIndexImpl(env);
}

/** A second shard's index (`VECTORIZE_SHARD_1`). */
export function vectorize1(env) {
  return new VectorizeIndexImpl(env, 'vectorize1');
}

export function ai(env) {
  return new Ai(env);
}

export default vectorize;
