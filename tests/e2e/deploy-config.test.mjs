// The production configuration deploys: `wrangler deploy --dry-run` of the
// top-level environment builds the Worker and binds D1, the queue, Vectorize
// and Workers AI, without network or credentials. The offline profile
// (`--env local`) binds neither Vectorize nor Workers AI.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { wranglerDryRun } from './helpers.mjs';


/** The binding table wrangler prints: `env.NAME (resource)   Type`. */
function bindings(output) {
  return output
    .split('\n')
    .map((l) => /^env\.(\w+)(?:\s+\(([^)]*)\))?\s{2,}(.+?)\s*$/.exec(l.trim()))
    .filter(Boolean)
    .map(([, name, resource, type]) => ({ name, resource, type }));
}

describe('wrangler deploy --dry-run', () => {
  it('production (top level): builds, binds D1, the queue, Vectorize and Workers AI', () => {
    const { output, files } = wranglerDryRun('');
    const b = bindings(output);
    const find = (name) => b.find((x) => x.name === name);
    assert.equal(find('VECTORIZE')?.type, 'Vectorize Index', output);
    assert.equal(find('VECTORIZE')?.resource, 'ingest-chunks');
    assert.equal(find('AI')?.type, 'AI', output);
    assert.equal(find('DB')?.type, 'D1 Database');
    assert.equal(find('INGEST_QUEUE')?.type, 'Queue');
    assert.equal(find('INDEX_BACKEND')?.resource, '"vectorize"');
    assert.equal(find('EMBEDDER_BACKEND')?.resource, '"workers-ai"');
    assert.equal(find('EMBEDDING_MODEL')?.resource, '"@cf/baai/bge-m3"');
    assert.equal(find('EMBEDDING_DIMENSIONS')?.resource, '"1024"');
    assert.ok(files.includes('entry.js'), files.join(', '));
    assert.ok(files.some((f) => f.endsWith('.wasm')), files.join(', '));
  });

  it('the offline profile (--env local) binds neither Vectorize nor Workers AI', () => {
    const { output } = wranglerDryRun('local');
    const names = bindings(output).map((x) => x.name);
    assert.ok(names.includes('VECTORS_DB'), output);
    assert.ok(!names.includes('VECTORIZE'), output);
    assert.ok(!names.includes('AI'), output);
  });
});
