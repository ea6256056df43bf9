// The queue handler tells the dead-letter queue's batches from the ingest
// queue's by the Worker variable DEAD_LETTER_QUEUE (src/wasm/mod.rs). In every
// environment that consumes a dead-letter queue, that variable must be bound
// and equal to the dead-letter queue's name; otherwise the DLQ's batches are
// consumed as ingest messages, a failed job's message is sent back to the DLQ,
// and every letter goes round for ever (times_seen climbs, every redrive
// execution answers 409 plan_changed).
//
// Checked on `wrangler deploy --dry-run` (no network, no credentials).

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { wranglerDryRun } from './helpers.mjs';


/** `env.NAME (resource)   Type` lines of wrangler's binding table. */
function bindings(output) {
  return output
    .split('\n')
    .map((l) => /^env\.(\w+)(?:\s+\((.*)\))?\s{2,}(\S.*?)\s*$/.exec(l.trim()))
    .filter(Boolean)
    .map(([, name, resource, type]) => ({ name, resource, type }));
}

function checkDeadLetterQueueVariable(envName, dlqName) {
  const { output } = wranglerDryRun(envName);
  const b = bindings(output);
  const producer = b.find((x) => x.name === 'DLQ');
  assert.equal(producer?.type, 'Queue', output);
  assert.equal(producer?.resource, dlqName, output);
  const variable = b.find((x) => x.name === 'DEAD_LETTER_QUEUE');
  assert.equal(variable?.type, 'Environment Variable', `DEAD_LETTER_QUEUE is not a Worker variable:\n${output}`);
  assert.equal(variable?.resource, JSON.stringify(dlqName), output);
  return output;
}

describe('DEAD_LETTER_QUEUE names the dead-letter queue the Worker consumes', () => {
  it('the offline profile (--env local)', () => {
    checkDeadLetterQueueVariable('local', 'ingest-jobs-local-dlq');
  });

  it(
    'production (top level)',
    () => {
      const output = checkDeadLetterQueueVariable('', 'ingest-jobs-dlq');
      assert.doesNotMatch(output, /Unexpected fields found in [^\n]*DEAD_LETTER_QUEUE/, output);
    },
  );
});
