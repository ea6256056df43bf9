// The sync CLI (`cli/ingest-sync.mjs`) against the built Worker under
// `make dev`'s configuration (`wrangler dev --env local`, offline): a
// directory of real text files (Japanese and English, nested) synced as a
// source; synced again unchanged (nothing sent); one file removed and one
// changed, synced again: the removed file's text is no longer served; a
// sync that would remove most of the source is refused and deletes nothing.
//
// Run from the repository root: node --test --test-concurrency=1 tests/e2e/

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { INGEST_TOKEN, REPO_ROOT, api, runChild, docPath, search, startWorker, waitForState, withLogs } from './helpers.mjs';

let worker;
let base;
const getWorker = () => worker;
const step = (name, fn) => it(name, withLogs(getWorker, fn));

const CLI = path.join(REPO_ROOT, 'cli', 'ingest-sync.mjs');
const SOURCE = 'e2e-directory';

// Real texts from the repository's test data.
const FILES = {
  'ja/design.txt': 'tests/data/seeds/000_23c333604504c1bd.txt',
  'ja/dag.txt': 'tests/data/seeds/002_d1dd9a78ce7dea22.txt',
  'en/closures.txt': 'tests/data/eval/docs/en/rbe-fn-closures.txt',
  'en/e0277.txt': 'tests/data/eval/docs/en/rustc-E0277.txt',
};

let dir;

before(
  async () => {
    worker = await startWorker();
    base = worker.base;
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ingest-sync-'));
    for (const [name, from] of Object.entries(FILES)) {
      fs.mkdirSync(path.join(dir, path.dirname(name)), { recursive: true });
      fs.copyFileSync(path.join(REPO_ROOT, from), path.join(dir, name));
    }
    // Not matched by the glob, and a binary file that is: neither is sent.
    fs.writeFileSync(path.join(dir, 'notes.log'), 'not synced');
    fs.writeFileSync(path.join(dir, 'en', 'blob.txt'), Buffer.from([0xff, 0xfe, 0x00, 0x81]));
  },
  { timeout: 300_000 },
);

after(async () => {
  await worker?.stop();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

/** Runs the CLI to its end; its exit code and JSON summary. */
async function runCli(extra = []) {
  const r = await runChild(
    process.execPath,
    [CLI, '--url', base, '--token', INGEST_TOKEN, '--source', SOURCE, '--glob', '**/*.txt', '--dir', dir, '--json', ...extra],
  );
  let summary = null;
  try {
    summary = JSON.parse(r.stdout.trim().split('\n').pop());
  } catch {
    summary = null;
  }
  return { status: r.status, summary, stdout: r.stdout, stderr: r.stderr };
}

/** A phrase of a file's text that a search can look for: one of its lines. */
function phraseOf(name) {
  const text = fs.readFileSync(path.join(REPO_ROOT, FILES[name]), 'utf8');
  return text
    .split('\n')
    .map((l) => l.trim())
    .find((l) => l.length > 20)
    .slice(0, 60);
}

async function served(docId, query) {
  const res = await search(base, { query, top_k: 10, mode: 'keyword' });
  assert.equal(res.status, 200, res.text);
  return res.body.results.some((h) => h.doc_id === docId);
}

describe('ingest-sync', () => {
  step('the first sync sends every text file and skips the rest', async () => {
    const r = await runCli();
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.summary.files, 4, r.stdout);
    assert.equal(r.summary.sent, 4);
    assert.equal(r.summary.unchanged, 0);
    assert.deepEqual(r.summary.skipped, [{ file: 'en/blob.txt', reason: 'not_utf8' }]);
    assert.equal(r.summary.state, 'committed');
    assert.equal(r.summary.to_delete, 0);
    for (const name of Object.keys(FILES)) await waitForState(base, name, 'indexed', { timeoutMs: 120_000 });
    assert.ok(await served('ja/dag.txt', phraseOf('ja/dag.txt')), 'the Japanese file is served');
    const sync = await api(base, 'GET', `/v1/syncs/${r.summary.sync_id}`);
    assert.equal(sync.status, 200, sync.text);
    assert.equal(sync.body.state, 'committed');
    assert.equal(sync.body.seen, 4);
  });

  step('a second sync of the same directory sends nothing', async () => {
    const r = await runCli();
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.summary.unchanged, 4, r.stdout);
    assert.equal(r.summary.sent, 0);
    assert.equal(r.summary.deleted, 0);
    const doc = await api(base, 'GET', docPath('ja/design.txt'));
    assert.equal(doc.body.latest_version, 1, 'no new version was written');
  });

  step('a removed file is deleted and its text no longer served; a changed one is sent', async () => {
    const phrase = phraseOf('ja/dag.txt');
    assert.ok(await served('ja/dag.txt', phrase));
    fs.rmSync(path.join(dir, 'ja', 'dag.txt'));
    fs.appendFileSync(path.join(dir, 'en', 'closures.txt'), '\nA closing line added at the source.\n');
    const r = await runCli();
    assert.equal(r.status, 0, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.summary.files, 3, r.stdout);
    assert.equal(r.summary.unchanged, 2);
    assert.equal(r.summary.sent, 1);
    assert.equal(r.summary.to_delete, 1);
    assert.equal(r.summary.deleted, 1);
    await waitForState(base, 'ja/dag.txt', 'deleted', { timeoutMs: 120_000 });
    await waitForState(base, 'en/closures.txt', 'indexed', { latestVersion: 2, liveVersion: 2, timeoutMs: 120_000 });
    assert.equal(await served('ja/dag.txt', phrase), false, 'the removed file is not served');
    assert.ok(await served('ja/design.txt', phraseOf('ja/design.txt')), 'the kept files still are');
  });

  step('a sync that would delete most of the source is refused, then allowed', async () => {
    fs.rmSync(path.join(dir, 'en'), { recursive: true });
    const r = await runCli(['--no-progress']);
    assert.equal(r.status, 2, `${r.stdout}\n${r.stderr}`);
    assert.equal(r.summary.state, 'refused');
    assert.match(r.stderr, /--allow-mass-delete/);
    const kept = await api(base, 'GET', docPath('en/e0277.txt'));
    assert.equal(kept.body.state, 'indexed', 'nothing was deleted');
    const allowed = await runCli(['--allow-mass-delete']);
    assert.equal(allowed.status, 0, `${allowed.stdout}\n${allowed.stderr}`);
    assert.equal(allowed.summary.deleted, 2);
    await waitForState(base, 'en/e0277.txt', 'deleted', { timeoutMs: 120_000 });
  });
});
