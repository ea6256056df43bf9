// A tiny JS Worker that calls the fake bindings from inside workerd the way a
// careless Worker would (a Map as metadata, oversized batches, …), to test
// that the fakes refuse it there too. `POST /<case>` runs one case and
// answers `{ok, result}` or `{ok: false, name, message}`.

const DIMS = 768;
const vector = (id, metadata) => ({ id, values: new Float32Array(DIMS).fill(0.5), metadata });

const CASES = {
  'upsert-plain': (env) => env.VECTORIZE.upsert([vector('probe-1', { doc_id: 'probe', version: 1 })]),
  'upsert-map-metadata': (env) => env.VECTORIZE.upsert([vector('probe-2', new Map([['doc_id', 'probe']]))]),
  'upsert-map-vector': (env) => env.VECTORIZE.upsert([new Map([['id', 'probe-3']])]),
  'upsert-1001': (env) => env.VECTORIZE.upsert(Array.from({ length: 1001 }, (_, i) => vector(`bulk-${i}`, {}))),
  'upsert-long-id': (env) => env.VECTORIZE.upsert([vector('x'.repeat(65), {})]),
  'upsert-wrong-dims': (env) => env.VECTORIZE.upsert([{ id: 'short', values: [1, 2, 3], metadata: {} }]),
  'upsert-big-metadata': (env) => env.VECTORIZE.upsert([vector('big', { blob: 'x'.repeat(10 * 1024) })]),
  'delete-101': (env) => env.VECTORIZE.deleteByIds(Array.from({ length: 101 }, (_, i) => `id-${i}`)),
  'get-101': (env) => env.VECTORIZE.getByIds(Array.from({ length: 101 }, (_, i) => `id-${i}`)),
  'query-map-filter': (env) =>
    env.VECTORIZE.query(new Float32Array(DIMS).fill(0.5), { topK: 3, filter: new Map([['doc_id', 'probe']]) }),
  'ai-plain': (env) => env.AI.run('@cf/baai/bge-base-en-v1.5', { text: ['hello world'], pooling: 'mean' }),
  'ai-map-input': (env) => env.AI.run('@cf/baai/bge-base-en-v1.5', new Map([['text', ['hello']]])),
  'ai-101-texts': (env) =>
    env.AI.run('@cf/baai/bge-base-en-v1.5', { text: Array.from({ length: 101 }, (_, i) => `text ${i}`) }),
  'ai-unknown-model': (env) => env.AI.run('@cf/nope/none', { text: ['hello'] }),
};

export default {
  async fetch(request, env) {
    const name = new URL(request.url).pathname.slice(1);
    const run = CASES[name];
    if (!run) return Response.json({ ok: false, name: 'NotFound', message: name }, { status: 404 });
    try {
      const result = await run(env);
      return Response.json({ ok: true, result: name.startsWith('ai-') ? { shape: result.shape } : result });
    } catch (e) {
      return Response.json({ ok: false, name: e.name, message: e.message });
    }
  },
};
