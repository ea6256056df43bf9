// The Worker's JS entry point (copied next to worker-build's output by
// scripts/build-worker.sh; wrangler.toml's `main`). It forwards every event
// to the Rust Worker (`./index.js`) and adds one thing Rust cannot do for
// itself: noticing that a queue consume panicked.
//
// A panic aborts the Wasm instance; the consume's promise then never
// settles, and worker-build's glue starts a fresh instance for the next
// call. The Rust panic hook (src/wasm/panic.rs) calls
// `globalThis.__ingestConsume.panicked(messageId)` for the message being
// consumed. This entry point waits for either the consume or that signal;
// on the signal (or if the consume throws), it calls the Rust queue handler
// again with `CONSUME_CRASHED_MESSAGE` set, and the fresh instance ends that
// job `failed` (`internal_error`) and dead-letters it
// (`Pipeline::end_crashed`). Both calls carry the delivery's token
// (`CONSUME_DELIVERY`): the claim records it, and the second call ends the
// job only if this delivery holds it, never one a duplicate delivery of the
// message is running. No business logic lives here.

import { WorkerEntrypoint } from 'cloudflare:workers';
import RustWorker from './index.js';

const state = (globalThis.__ingestConsume ??= { waiting: new Map() });
state.panicked = (messageId) => state.waiting.get(messageId)?.(messageId);

export default class Entry extends WorkerEntrypoint {
  #rust(env = this.env) {
    return new RustWorker(this.ctx, env);
  }

  fetch(request) {
    return this.#rust().fetch(request);
  }

  scheduled(controller) {
    return this.#rust().scheduled(controller);
  }

  async queue(batch) {
    const ids = batch.messages.map((m) => m.id);
    const delivery = { value: crypto.randomUUID(), enumerable: true };
    let crashed;
    const signal = new Promise((resolve) => {
      for (const id of ids) state.waiting.set(id, resolve);
    });
    try {
      const env = Object.create(this.env, { CONSUME_DELIVERY: delivery });
      crashed = await Promise.race([this.#rust(env).queue(batch).then(() => undefined), signal]);
    } catch {
      // The consume threw instead of settling its messages: the same as a
      // panic for the first message (a batch holds one; max_batch_size = 1).
      crashed = ids[0];
    } finally {
      for (const id of ids) state.waiting.delete(id);
    }
    if (crashed === undefined) return;
    const env = Object.create(this.env, {
      CONSUME_CRASHED_MESSAGE: { value: crashed, enumerable: true },
      CONSUME_DELIVERY: delivery,
    });
    await this.#rust(env).queue(batch);
  }
}
