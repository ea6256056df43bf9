// The production configuration deploys: `wrangler deploy --dry-run` of the
// top-level environment builds the Worker and binds D1, the queue, Vectorize
// and Workers AI, without network or credentials. The offline profile
// (`--env local`) binds neither Vectorize nor Workers AI.

import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, wranglerDryRun } from './helpers.mjs';

/** Each file of build/ (what the other test files' wrangler dev serve) and its mtime. */
function buildStamps() {
  const dir = path.join(REPO_ROOT, 'build');
  return Object.fromEntries(fs.readdirSync(dir).map((f) => [f, fs.statSync(path.join(dir, f)).mtimeMs]));
}


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
    const before = buildStamps();
    const { output, files } = wranglerDryRun('');
    // Its build went elsewhere: a rewritten build/ reloads every running
    // wrangler dev of the other test files, and their local queues lose
    // the messages they held.
    assert.deepEqual(buildStamps(), before, 'the dry run rewrote build/');
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
