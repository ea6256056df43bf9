// A redrive's plan is its blast radius: executing the same plan id a second
// time must not start a second redrive (which would send further "canaries"
// past a first redrive whose canaries failed). The second execution answers
// 409 plan_changed (the redrive's ID derives from the plan: a second one
// collides), and after a cron run and a poll of the redrive (what moves
// redrives on) only the first redrive's canaries were ever re-run.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { admin, api, assertErrorCode, docPath, lettersReceived, startWorker, triggerCron, waitFor, waitForState, withLogs } from './helpers.mjs';

const DOCS = Array.from({ length: 8 }, (_, i) => `poison-reuse-${i + 1}`);

let worker;
let base;
const getWorker = () => worker;

before(
  async () => {
    worker = await startWorker({ vars: { LOCAL_INDEX_REJECT_DOC_PREFIX: 'poison-' } });
    base = worker.base;
  },
  { timeout: 300_000 },
);

after(async () => {
  await worker?.stop();
});

describe('a redrive plan is executed at most once', () => {
  it(
    'executing the same plan id again (cause still there) re-runs no more than the first canaries',
    withLogs(getWorker, async () => {
      const res = await api(base, 'POST', '/v1/documents', {
        documents: DOCS.map((doc_id) => ({ doc_id, text: `Plan reuse check: ${doc_id} lists tides and gulls.` })),
      });
      assert.equal(res.status, 200, res.text);
      for (const id of DOCS) await waitForState(base, id, 'failed');
      await waitFor(
        async () => {
          const r = await admin(base, 'GET', '/v1/admin/dead-letters?limit=100');
          assert.equal(r.status, 200, r.text);
          return r.body.letters.length === DOCS.length && lettersReceived(worker.logs(), r.body.letters.map((l) => l.job_id));
        },
        { what: 'every letter archived and received by the DLQ consumer' },
      );

      // `until` keeps the canaries' own (later) letters out of the plan.
      const body = { filter: { bucket: 'index_rejected', until: Date.now() }, canary_size: 3 };
      const pf = await admin(base, 'POST', '/v1/admin/redrives', body);
      assert.equal(pf.status, 200, pf.text);
      assert.equal(pf.body.plan.eligible.length, DOCS.length, pf.text);
      const first = await admin(base, 'POST', '/v1/admin/redrives', { ...body, plan_id: pf.body.plan.plan_id });
      assert.equal(first.status, 202, first.text);
      const stopped = await waitFor(
        async () => {
          const r = await admin(base, 'GET', `/v1/admin/redrives/${first.body.redrive_id}`);
          assert.equal(r.status, 200, r.text);
          return r.body.state === 'stopped' ? r.body : null;
        },
        { timeoutMs: 30_000, what: 'the first redrive to stop on its failed canaries' },
      );
      assert.equal(stopped.stop_reason, 'canary_failed', JSON.stringify(stopped));

      const again = await admin(base, 'POST', '/v1/admin/redrives', { ...body, plan_id: pf.body.plan.plan_id });
      assertErrorCode(again, 409, 'plan_changed', 'a second execution of the same plan');
      // Whatever could send more canaries runs now, to its end: a cron run
      // and a poll of the redrive both move redrives on, and a re-run
      // writes its new version before they answer.
      assert.equal((await triggerCron(base)).trim(), 'ok');
      const later = await admin(base, 'GET', `/v1/admin/redrives/${first.body.redrive_id}`);
      assert.equal(later.status, 200, later.text);
      assert.equal(later.body.state, 'stopped', later.text);
      let rerun = 0;
      for (const id of DOCS) {
        const view = await api(base, 'GET', docPath(id));
        assert.equal(view.status, 200, view.text);
        if (view.body.latest_version > 1) rerun++;
      }
      assert.equal(rerun, 3, `documents re-run while the cause is still there: ${rerun}, the plan allowed 3 canaries`);
    }),
  );
});
