// Loaded before Miniflare starts, in the test process (miniflare-env.mjs
// imports it) and in every `wrangler dev` the tests spawn (helpers.mjs puts
// it in NODE_OPTIONS as `--import`): every Node HTTP server created from now
// on gets `keepAliveTimeout = 0` (no idle timeout).
//
// Why: Miniflare's loopback server (the test process side of workerd's
// calls back into Node: the FAKE_BACKEND service binding of the strict
// fakes, and every Durable Object's log line, the queue broker's among them)
// keeps Node's default keepAliveTimeout of 5 s, while workerd pools and
// reuses those connections. A call on a connection idle for more than 5 s
// fails with "Network connection lost." (cloudflare/workers-sdk#14848, fixed
// in miniflare 4.20260730.0 by this same setting; this repository pins
// 4.20260426.0). In the queue broker that call is the "QUEUE … 1/1" log line
// after a consumer invocation: when it throws, the broker never schedules
// another flush, and every later message waits forever. A consumer
// invocation of more than 5 s with no other call into Node (a large
// document's staging; a version whose chunks are all kept) was enough.
import http from 'node:http';

const PATCHED = Symbol.for('ingest-e2e.loopback-keepalive');
if (!http.createServer[PATCHED]) {
  const create = http.createServer;
  const patched = function createServer(...args) {
    const server = create.apply(this, args);
    server.keepAliveTimeout = 0;
    return server;
  };
  patched[PATCHED] = true;
  http.createServer = patched;
}
