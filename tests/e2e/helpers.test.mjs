// The end-to-end helpers themselves (helpers.mjs), without a Worker: they
// must not hide what they see.
//
// 1. `waitFor` throws a failed assertion (or any error) of its callback at
//    once, not at its timeout after later polls succeeded; only a falsy
//    value means "not yet".
// 2. `waitForState` fails on the first answer that is not 200, unless the
//    caller names that status in `tolerate`.
// 3. `api` sends a request once: a request with no answer fails with a
//    message that says so, and the server saw it exactly once.
//
// A tiny local HTTP server plays the Worker.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import { api, docPath, waitFor, waitForState } from './helpers.mjs';

/** A local server whose answers `handler(req, res, n)` decides (n: the request's 1-based number per path). */
function server(handler) {
  const seen = new Map();
  const sockets = new Set();
  const srv = http.createServer((req, res) => {
    const n = (seen.get(req.url) ?? 0) + 1;
    seen.set(req.url, n);
    handler(req, res, n);
  });
  srv.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  return {
    seen,
    async start() {
      await new Promise((resolve) => srv.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${srv.address().port}`;
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => srv.close(() => resolve()));
    },
  };
}

function json(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify(body));
}

describe('waitFor fails fast', () => {
  it('an assertion that fails inside the callback is thrown at once, not after later polls', async () => {
    let calls = 0;
    const started = Date.now();
    await assert.rejects(
      waitFor(
        async () => {
          calls += 1;
          // The first poll sees a wrong answer; a later poll would see a right one.
          assert.equal(calls === 1 ? 503 : 200, 200, 'a 5xx while waiting');
          return true;
        },
        { timeoutMs: 30_000, intervalMs: 50, what: 'a right answer' },
      ),
      (err) => {
        assert.equal(err.name, 'AssertionError', String(err));
        assert.match(err.message, /a 5xx while waiting/);
        return true;
      },
    );
    assert.equal(calls, 1, 'the callback was not called again after its assertion failed');
    assert.ok(Date.now() - started < 5_000, `thrown at once, not at the timeout (${Date.now() - started} ms)`);
  });

  it('any other error of the callback is thrown at once too', async () => {
    let calls = 0;
    await assert.rejects(
      waitFor(
        async () => {
          calls += 1;
          return null.body; // a TypeError, as reading a field of a missing answer would throw
        },
        { timeoutMs: 30_000, intervalMs: 50 },
      ),
      TypeError,
    );
    assert.equal(calls, 1);
  });

  it('a falsy value waits; the first truthy value is returned', async () => {
    let calls = 0;
    const got = await waitFor(async () => (++calls >= 3 ? { done: calls } : null), { timeoutMs: 5_000, intervalMs: 10 });
    assert.deepEqual(got, { done: 3 });
  });

  it('times out with the last value and what it waited for', async () => {
    await assert.rejects(
      waitFor(async () => 0, { timeoutMs: 100, intervalMs: 10, what: 'something that never comes' }),
      /timed out after 100 ms waiting for something that never comes; last value: 0/,
    );
  });
});

describe('waitForState fails on an answer that is not 200', () => {
  let srv;
  let base;
  before(async () => {
    srv = server((req, res, n) => {
      const id = decodeURIComponent(req.url.split('/').pop());
      // `flaky`: 503 once, then indexed; `late`: 404 twice, then indexed.
      if (id === 'flaky' && n === 1) return json(res, 503, { error: { code: 'db_unavailable', message: 'x' } });
      if (id === 'late' && n <= 2) return json(res, 404, { error: { code: 'document_not_found', message: 'x' } });
      if (id === 'queued') return json(res, 200, { doc_id: id, state: n === 1 ? 'queued' : 'indexing' });
      return json(res, 200, { doc_id: id, state: 'indexed', latest_version: 1, live_version: 1 });
    });
    base = await srv.start();
  });
  after(async () => {
    await srv.stop();
  });

  it('a transient 503 while waiting fails the wait, though the next poll would succeed', async () => {
    await assert.rejects(waitForState(base, 'flaky', 'indexed', { timeoutMs: 10_000 }), /GET answered 503 while waiting for indexed/);
    assert.equal(srv.seen.get(docPath('flaky')), 1, 'not polled again');
  });

  it('a 404 fails too, unless the caller tolerates it', async () => {
    await assert.rejects(waitForState(base, 'late', 'indexed', { timeoutMs: 10_000 }), /GET answered 404/);
    const v = await waitForState(base, 'late', 'indexed', { timeoutMs: 10_000, tolerate: [404] });
    assert.equal(v.state, 'indexed');
  });

  it('another state is "not yet" until the timeout', async () => {
    await assert.rejects(waitForState(base, 'queued', 'indexed', { timeoutMs: 400 }), /not indexed after 400 ms; last answer 200/);
  });
});

describe('api sends a request once', () => {
  let srv;
  let base;
  before(async () => {
    // Never answers `/stall`; answers anything else at once.
    srv = server((req, res) => {
      if (req.url === '/stall') return;
      json(res, 200, { ok: true });
    });
    base = await srv.start();
  });
  after(async () => {
    await srv.stop();
  });

  it('a GET with no answer fails with a message that says so, and was sent once', async () => {
    await assert.rejects(api(base, 'GET', '/stall', undefined, { timeoutMs: 300 }), (err) => {
      assert.match(err.message, /GET \/stall: no complete answer within 300 ms; the request is not sent again/);
      return true;
    });
    // Give a retry, if there were one, the time to arrive.
    const r = await api(base, 'GET', '/other');
    assert.equal(r.status, 200);
    assert.equal(srv.seen.get('/stall'), 1, 'the stalled GET was not sent again');
  });
});
