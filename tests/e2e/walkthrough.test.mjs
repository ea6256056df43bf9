// End-to-end walkthrough of the built Worker in workerd (`wrangler dev --env
// local`): intake over HTTP, the Queue consumer indexing into the local
// vector index, search, deletion, the cron handler, batches, non-ASCII IDs,
// the error contract and metadata filters.
//
// Run from the repository root: node --test --test-concurrency=1 tests/e2e/

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { api, assertError, docPath, search, startWorker, waitForState, withLogs } from './helpers.mjs';

let worker;
let base;
const getWorker = () => worker;
/** `it` whose failures print the tail of the wrangler log. */
const step = (name, fn) => it(name, withLogs(getWorker, fn));

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

async function putDoc(docId, doc) {
  return api(base, 'PUT', docPath(docId), doc);
}

describe('health', () => {
  step('GET /healthz answers 200 {"ok":true} without auth', async () => {
    const res = await api(base, 'GET', '/healthz', undefined, { token: null });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body, { ok: true });
  });
});

describe('document lifecycle', () => {
  const DOC = 'walkthrough/lifecycle';
  const V1_TEXT = 'Emperor penguins waddle across Antarctic glaciers hunting krill beneath floating icebergs.';
  const V1_QUERY = 'penguins antarctic glaciers krill icebergs';
  const V2_TEXT = 'Quarterly invoices reconcile mortgage payments through automated ledger spreadsheets.';
  const V2_QUERY = 'quarterly invoices mortgage ledger spreadsheets';
  const META = { source: 'e2e', lang: 'en' };
  let v1;

  step('1. PUT → 202 queued → indexed → searchable → job succeeded', async () => {
    const res = await putDoc(DOC, { text: V1_TEXT, metadata: META, content_type: 'text/plain' });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.doc_id, DOC);
    assert.equal(res.body.version, 1);
    assert.equal(res.body.state, 'queued');
    assert.equal(typeof res.body.job_id, 'string');
    assert.ok(res.body.job_id.length > 0);
    v1 = res.body;

    const view = await waitForState(base, DOC, 'indexed');
    assert.equal(view.doc_id, DOC);
    assert.equal(view.latest_version, 1);
    assert.equal(view.live_version, 1);
    assert.equal(view.deleted, false);
    assert.ok(view.chunk_count >= 1, JSON.stringify(view));
    assert.equal(view.job_id, v1.job_id);
    assert.equal(view.job_state, 'succeeded');

    const s = await search(base, { query: V1_QUERY });
    assert.equal(s.status, 200, s.text);
    assert.ok(Array.isArray(s.body.results), s.text);
    assert.ok(s.body.results.length <= 5, 'default top_k is 5');
    const hit = s.body.results.find((r) => r.doc_id === DOC);
    assert.ok(hit, `no result for ${DOC}: ${s.text}`);
    assert.equal(hit.version, 1);
    assert.match(hit.text, /penguins/);
    assert.match(hit.text, /krill/);
    assert.equal(typeof hit.chunk, 'number');
    assert.equal(typeof hit.score, 'number');
    assert.equal(s.body.results[0].doc_id, DOC, `best hit should be ${DOC}: ${s.text}`);

    const job = await api(base, 'GET', `/v1/jobs/${encodeURIComponent(v1.job_id)}`);
    assert.equal(job.status, 200, job.text);
    assert.equal(job.body.job_id, v1.job_id);
    assert.equal(job.body.doc_id, DOC);
    assert.equal(job.body.version, 1);
    assert.equal(job.body.state, 'succeeded');
    assert.equal(typeof job.body.kind, 'string');
    assert.equal(typeof job.body.step, 'string');
    assert.ok(job.body.attempts >= 1, job.text);
  });

  step('2. PUT of identical content → 200 unchanged, no new version', async () => {
    const res = await putDoc(DOC, { text: V1_TEXT, metadata: META, content_type: 'text/plain' });
    assert.equal(res.status, 200, res.text);
    assert.equal(res.body.doc_id, DOC);
    assert.equal(res.body.version, 1);
    assert.equal(res.body.unchanged, true);
    assert.equal(res.body.state, 'indexed');

    const view = await api(base, 'GET', docPath(DOC));
    assert.equal(view.status, 200);
    assert.equal(view.body.latest_version, 1);
    assert.equal(view.body.job_id, v1.job_id, 'no new job for an unchanged document');
  });

  step('3. PUT of unrelated new text → version 2 indexed, old text no longer served', async () => {
    const res = await putDoc(DOC, { text: V2_TEXT, metadata: META, content_type: 'text/plain' });
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.version, 2);
    assert.equal(res.body.state, 'queued');
    assert.notEqual(res.body.job_id, v1.job_id);

    const view = await waitForState(base, DOC, 'indexed', { latestVersion: 2, liveVersion: 2 });
    assert.ok(view.chunk_count >= 1);

    const old = await search(base, { query: V1_QUERY, top_k: 50 });
    assert.equal(old.status, 200, old.text);
    for (const r of old.body.results) {
      assert.ok(!r.text.includes('penguins'), `old text still served: ${old.text}`);
      assert.ok(!(r.doc_id === DOC && r.version === 1), `version 1 still served: ${old.text}`);
    }

    const fresh = await search(base, { query: V2_QUERY });
    assert.equal(fresh.status, 200, fresh.text);
    const hit = fresh.body.results.find((r) => r.doc_id === DOC);
    assert.ok(hit, `new text not found: ${fresh.text}`);
    assert.equal(hit.version, 2);
    assert.match(hit.text, /invoices/);
  });

  step('4. DELETE → 202 tombstone → deleted, nothing served', async () => {
    const res = await api(base, 'DELETE', docPath(DOC));
    assert.equal(res.status, 202, res.text);
    assert.equal(res.body.doc_id, DOC);
    assert.equal(res.body.version, 3);
    assert.equal(typeof res.body.job_id, 'string');

    const view = await waitForState(base, DOC, 'deleted');
    assert.equal(view.deleted, true);
    assert.equal(view.chunk_count, 0);
    assert.equal(view.latest_version, 3);

    const job = await api(base, 'GET', `/v1/jobs/${encodeURIComponent(res.body.job_id)}`);
    assert.equal(job.status, 200, job.text);
    assert.equal(job.body.state, 'succeeded');
    assert.equal(job.body.version, 3);

    const filtered = await search(base, { query: V2_QUERY, filter: { doc_id: DOC } });
    assert.equal(filtered.status, 200, filtered.text);
    assert.deepEqual(filtered.body.results, []);

    const unfiltered = await search(base, { query: V2_QUERY, top_k: 50 });
    assert.equal(unfiltered.status, 200, unfiltered.text);
    assert.ok(!unfiltered.body.results.some((r) => r.doc_id === DOC), unfiltered.text);
  });

  step('5. the cron handler runs, and the API still works afterwards', async () => {
    const res = await fetch(`${base}/cdn-cgi/handler/scheduled?cron=*/5+*+*+*+*`, {
      signal: AbortSignal.timeout(60_000),
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    assert.equal(text.trim(), 'ok');

    const view = await api(base, 'GET', docPath(DOC));
    assert.equal(view.status, 200, view.text);
    assert.equal(view.body.state, 'deleted');
    assert.equal(view.body.latest_version, 3);

    const s = await search(base, { query: V2_QUERY, filter: { doc_id: DOC } });
    assert.equal(s.status, 200, s.text);
    assert.deepEqual(s.body.results, []);
  });
});

describe('intake variants', () => {
  step('POST /v1/documents with a doc_id behaves like PUT', async () => {
    const doc = {
      doc_id: 'post/single',
      text: 'Volcanic basalt columns cool into hexagonal pillars along rugged coastlines.',
    };
    const first = await api(base, 'POST', '/v1/documents', doc);
    assert.equal(first.status, 202, first.text);
    assert.equal(first.body.doc_id, 'post/single');
    assert.equal(first.body.version, 1);
    assert.equal(first.body.state, 'queued');
    await waitForState(base, 'post/single', 'indexed');

    const again = await api(base, 'POST', '/v1/documents', doc);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.unchanged, true);
    assert.equal(again.body.version, 1);

    const s = await search(base, { query: 'basalt hexagonal pillars', filter: { doc_id: 'post/single' } });
    assert.equal(s.status, 200, s.text);
    assert.ok(s.body.results.length >= 1, s.text);
    assert.ok(s.body.results.every((r) => r.doc_id === 'post/single'), s.text);
  });

  step('6. batch POST: one invalid item does not sink the others', async () => {
    const res = await api(base, 'POST', '/v1/documents', {
      documents: [
        { doc_id: 'batch/a', text: 'Hummingbirds hover beside crimson trumpet flowers sipping nectar.' },
        { doc_id: 'batch/b', metadata: { note: 'no text' } },
        { doc_id: 'batch/c', text: 'Submarine sonar pings echo through abyssal trenches.', content_type: 'text/markdown' },
      ],
    });
    assert.equal(res.status, 200, res.text);
    const results = res.body.results;
    assert.equal(results.length, 3, res.text);

    assert.equal(results[0].status, 202, res.text);
    assert.equal(results[0].doc_id, 'batch/a');
    assert.equal(results[0].version, 1);
    assert.equal(results[0].state, 'queued');
    assert.equal(typeof results[0].job_id, 'string');

    assert.equal(results[1].status, 422, res.text);
    assert.equal(results[1].error.code, 'invalid_field', res.text);
    assert.equal(typeof results[1].error.message, 'string');
    assert.equal(results[1].doc_id, 'batch/b');

    assert.equal(results[2].status, 202, res.text);
    assert.equal(results[2].doc_id, 'batch/c');
    assert.equal(typeof results[2].job_id, 'string');

    await waitForState(base, 'batch/a', 'indexed');
    await waitForState(base, 'batch/c', 'indexed');

    const missing = await api(base, 'GET', docPath('batch/b'));
    assertError(missing, 404, 'document_not_found', 'invalid batch item was not written');

    const s = await search(base, { query: 'hummingbirds crimson nectar' });
    assert.equal(s.status, 200, s.text);
    assert.equal(s.body.results[0]?.doc_id, 'batch/a', s.text);
  });

  step('7. markdown document with a non-ASCII doc_id', async () => {
    const DOC = 'guides/日本語 #1';
    const text = [
      '# Sourdough guide',
      '',
      'Feed the starter with rye flour and lukewarm water every evening.',
      '',
      '## Baking',
      '',
      'Bake the loaf in a preheated cast-iron dutch oven until the crust crackles.',
      '',
      '- score the dough',
      '- steam the oven',
      '',
    ].join('\n');
    const put = await putDoc(DOC, { text, content_type: 'text/markdown', metadata: { kind: 'guide' } });
    assert.equal(put.status, 202, put.text);
    assert.equal(put.body.doc_id, DOC);

    const view = await waitForState(base, DOC, 'indexed');
    assert.equal(view.doc_id, DOC);
    assert.ok(view.chunk_count >= 1, JSON.stringify(view));

    const get = await api(base, 'GET', `/v1/documents/${encodeURIComponent(DOC)}`);
    assert.equal(get.status, 200, get.text);
    assert.equal(get.body.doc_id, DOC);
    assert.equal(get.body.state, 'indexed');

    const s = await search(base, { query: 'sourdough starter rye flour', filter: { doc_id: DOC } });
    assert.equal(s.status, 200, s.text);
    assert.ok(s.body.results.length >= 1, s.text);
    assert.ok(s.body.results.every((r) => r.doc_id === DOC), s.text);
    assert.ok(s.body.results.some((r) => r.text.includes('rye flour')), s.text);

    const again = await putDoc(DOC, { text, content_type: 'text/markdown', metadata: { kind: 'guide' } });
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.unchanged, true);
  });
});

describe('error contract', () => {
  const TARGET = 'errors/target';
  const NEVER = 'errors/never-created';
  const TARGET_TEXT = 'Lighthouse keepers polish brass lenses before stormy nights.';

  step('8. bad input is rejected with the right status and code, and changes nothing', async () => {
    const put = await putDoc(TARGET, { text: TARGET_TEXT });
    assert.equal(put.status, 202, put.text);
    const initial = await waitForState(base, TARGET, 'indexed');
    assert.equal(initial.latest_version, 1);

    const target = docPath(TARGET);
    const never = docPath(NEVER);
    const raw = (method, path, body, headers = {}) => api(base, method, path, body, { headers });
    const cases = [
      // authentication
      ['no Authorization', () => api(base, 'PUT', target, { text: 'x' }, { token: null }), 401, 'unauthorized'],
      ['wrong token', () => api(base, 'PUT', target, { text: 'x' }, { token: 'nope' }), 401, 'unauthorized'],
      ['not a bearer token', () => api(base, 'GET', target, undefined, { token: null, headers: { Authorization: 'Basic ZGV2LWluZ2VzdC10b2tlbg==' } }), 401, 'unauthorized'],
      ['GET document without auth', () => api(base, 'GET', target, undefined, { token: null }), 401, 'unauthorized'],
      ['DELETE without auth', () => api(base, 'DELETE', target, undefined, { token: null }), 401, 'unauthorized'],
      ['search without auth', () => api(base, 'POST', '/v1/search', { query: 'lighthouse' }, { token: null }), 401, 'unauthorized'],
      ['job without auth', () => api(base, 'GET', `/v1/jobs/${initial.job_id}`, undefined, { token: null }), 401, 'unauthorized'],
      // routing
      ['unknown /v1 route', () => api(base, 'GET', '/v1/nope'), 404, 'not_found'],
      ['unknown route outside /v1', () => api(base, 'GET', '/nope'), 404, 'not_found'],
      ['PATCH a document', () => raw('PATCH', target, { text: 'patched' }), 405, 'method_not_allowed'],
      ['GET /v1/search', () => api(base, 'GET', '/v1/search'), 405, 'method_not_allowed'],
      ['unknown document', () => api(base, 'GET', never), 404, 'document_not_found'],
      ['DELETE unknown document', () => api(base, 'DELETE', never), 404, 'document_not_found'],
      ['unknown job', () => api(base, 'GET', '/v1/jobs/00000000-0000-0000-0000-000000000000'), 404, 'job_not_found'],
      // body
      ['malformed JSON', () => raw('PUT', target, '{"text": "unterminated'), 400, 'invalid_json'],
      ['malformed JSON (new doc)', () => raw('PUT', never, '{"text": '), 400, 'invalid_json'],
      ['malformed JSON search', () => raw('POST', '/v1/search', '{query'), 400, 'invalid_json'],
      ['text over DOCUMENT_BYTES_MAX', () => raw('PUT', target, { text: 'a'.repeat(10_000_001) }), 413, 'document_too_large'],
      ['Content-Type text/plain', () => raw('PUT', target, JSON.stringify({ text: 'plain body' }), { 'Content-Type': 'text/plain' }), 415, 'unsupported_media_type'],
      ['content_type application/pdf', () => raw('PUT', target, { text: 'pdf?', content_type: 'application/pdf' }), 415, 'unsupported_content_type'],
      ['text missing', () => raw('PUT', target, { metadata: { a: 1 } }), 422, 'invalid_field'],
      ['text missing (new doc)', () => raw('PUT', never, {}), 422, 'invalid_field'],
      ['text a number', () => raw('PUT', target, { text: 42 }), 422, 'invalid_field'],
      ['text blank', () => raw('PUT', target, { text: '  \n\t ' }), 422, 'invalid_field'],
      ['metadata a string', () => raw('PUT', target, { text: 'meta', metadata: 'lang=en' }), 422, 'invalid_field'],
      ['metadata nested object', () => raw('PUT', target, { text: 'meta', metadata: { a: { b: 1 } } }), 422, 'invalid_field'],
      ['content_type a number', () => raw('PUT', target, { text: 'ct', content_type: 7 }), 422, 'invalid_field'],
      ['body doc_id differs from path', () => raw('PUT', target, { doc_id: 'other', text: 'mismatch' }), 422, 'invalid_field'],
      ['doc_id with a control character', () => raw('PUT', '/v1/documents/bad%0Aid', { text: 'control' }), 422, 'invalid_field'],
      ['unknown body key', () => raw('PUT', target, { text: 'extra', colour: 'blue' }), 422, 'unknown_field'],
      ['unknown body key (new doc)', () => raw('PUT', never, { text: 'extra', tags: ['a'] }), 422, 'unknown_field'],
      ['POST without doc_id', () => raw('POST', '/v1/documents', { text: 'no id' }), 422, 'invalid_field'],
      ['empty batch', () => raw('POST', '/v1/documents', { documents: [] }), 422, 'invalid_field'],
      // search
      ['search top_k 0', () => raw('POST', '/v1/search', { query: 'lighthouse', top_k: 0 }), 422, 'invalid_field'],
      ['search top_k 51', () => raw('POST', '/v1/search', { query: 'lighthouse', top_k: 51 }), 422, 'invalid_field'],
      ['search top_k a string', () => raw('POST', '/v1/search', { query: 'lighthouse', top_k: '5' }), 422, 'invalid_field'],
      ['search query missing', () => raw('POST', '/v1/search', { top_k: 5 }), 422, 'invalid_field'],
      ['search query blank', () => raw('POST', '/v1/search', { query: '   ' }), 422, 'invalid_field'],
      ['search unknown key', () => raw('POST', '/v1/search', { query: 'lighthouse', limit: 5 }), 422, 'unknown_field'],
      ['search unknown filter key', () => raw('POST', '/v1/search', { query: 'lighthouse', filter: { lang: 'en' } }), 422, 'unknown_field'],
      ['search filter.metadata a string', () => raw('POST', '/v1/search', { query: 'lighthouse', filter: { metadata: 'en' } }), 422, 'invalid_field'],
    ];

    const failures = [];
    for (const [what, send, status, code] of cases) {
      const res = await send();
      if (res.status !== status || res.body?.error?.code !== code || typeof res.body?.error?.message !== 'string') {
        failures.push(`${what}: expected ${status} ${code}, got ${res.status} ${res.text.slice(0, 300)}`);
      }
    }
    assert.deepEqual(failures, [], `unexpected answers:\n${failures.join('\n')}`);

    // Nothing changed.
    const now = await api(base, 'GET', target);
    assert.equal(now.status, 200, now.text);
    assert.equal(now.body.latest_version, initial.latest_version, now.text);
    assert.equal(now.body.live_version, initial.live_version, now.text);
    assert.equal(now.body.job_id, initial.job_id, now.text);
    assert.equal(now.body.state, 'indexed');
    assertError(await api(base, 'GET', never), 404, 'document_not_found', 'rejected PUTs created nothing');
    assertError(await api(base, 'GET', docPath('other')), 404, 'document_not_found', 'mismatched doc_id created nothing');
    const s = await search(base, { query: 'lighthouse keepers brass lenses', filter: { doc_id: TARGET } });
    assert.equal(s.status, 200, s.text);
    assert.ok(s.body.results.length >= 1, s.text);
    assert.ok(s.body.results.every((r) => r.version === 1 && r.text.includes('Lighthouse')), s.text);
  });
});

describe('search filters', () => {
  step('9. filter.metadata selects documents by metadata', async () => {
    const en = await putDoc('meta/en', {
      text: 'Our bakery sells warm croissants and baguettes every morning.',
      metadata: { lang: 'en', shelf: 3 },
    });
    const fr = await putDoc('meta/fr', {
      text: 'Notre boulangerie vend des croissants chauds chaque matin.',
      metadata: { lang: 'fr', shelf: 3 },
    });
    assert.equal(en.status, 202, en.text);
    assert.equal(fr.status, 202, fr.text);
    await waitForState(base, 'meta/en', 'indexed');
    await waitForState(base, 'meta/fr', 'indexed');

    const onlyFr = await search(base, { query: 'croissants', top_k: 50, filter: { metadata: { lang: 'fr' } } });
    assert.equal(onlyFr.status, 200, onlyFr.text);
    assert.ok(onlyFr.body.results.length >= 1, onlyFr.text);
    assert.ok(onlyFr.body.results.every((r) => r.doc_id === 'meta/fr'), onlyFr.text);

    const onlyEn = await search(base, { query: 'croissants', top_k: 50, filter: { metadata: { lang: 'en' } } });
    assert.equal(onlyEn.status, 200, onlyEn.text);
    assert.ok(onlyEn.body.results.length >= 1, onlyEn.text);
    assert.ok(onlyEn.body.results.every((r) => r.doc_id === 'meta/en'), onlyEn.text);

    const both = await search(base, { query: 'croissants', top_k: 50, filter: { metadata: { shelf: 3 } } });
    assert.equal(both.status, 200, both.text);
    const ids = new Set(both.body.results.map((r) => r.doc_id));
    assert.deepEqual([...ids].sort(), ['meta/en', 'meta/fr'], both.text);

    const none = await search(base, { query: 'croissants', filter: { metadata: { lang: 'de' } } });
    assert.equal(none.status, 200, none.text);
    assert.deepEqual(none.body.results, []);

    const combined = await search(base, {
      query: 'croissants',
      filter: { doc_id: 'meta/en', metadata: { lang: 'fr' } },
    });
    assert.equal(combined.status, 200, combined.text);
    assert.deepEqual(combined.body.results, []);
  });
});
