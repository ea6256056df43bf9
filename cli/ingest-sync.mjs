#!/usr/bin/env node
// ingest-sync: syncs a local directory into the pipeline as one source.
//
// It opens a sync session, hashes every file the glob matches, asks the
// pipeline which ones it already holds unchanged (`POST /v1/syncs/{id}/seen`,
// by content hash: no text sent), sends the others (`POST /v1/documents`),
// then commits: every document of the source the session did not see (a
// file removed from the directory) gets a tombstone. If any file could not
// be sent, it does not commit (the session expires and deletes nothing), so
// a failed upload never deletes a document.
//
// A document's ID is the file's path relative to the directory, with `/`.
// See the README, "Syncing a directory".

import { Command, InvalidArgumentError } from 'commander';
import cliProgress from 'cli-progress';
import fg from 'fast-glob';
import { createHash } from 'node:crypto';
import fs from 'node:fs/promises';
import path from 'node:path';

const EXIT_FAILED = 1;
const EXIT_REFUSED = 2;

/** What the API accepts (the pipeline's defaults; see docs/configuration.md). */
const DOC_ID_BYTES_MAX = 256;
const SOURCE_BYTES_MAX = 128;

function positiveInt(v) {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError('must be a positive integer');
  return n;
}

function parseArgs(argv) {
  const program = new Command()
    .name('ingest-sync')
    .description('Sync a local directory into the ingestion pipeline: send changed files, delete removed ones.')
    .requiredOption('--url <url>', 'base URL of the pipeline, e.g. http://localhost:8787')
    .requiredOption('--token <token>', 'a token with the ingest scope (or set INGEST_TOKEN)', process.env.INGEST_TOKEN)
    .requiredOption('--source <name>', 'the source name (1 to 128 bytes)')
    .option('--glob <pattern>', 'files to sync, relative to --dir', '**/*.{txt,md,markdown}')
    .option('--dir <path>', 'the directory to sync', '.')
    .option('--batch <n>', 'documents per request', positiveInt, 50)
    .option('--batch-bytes <n>', 'text bytes per request at most (a larger file travels alone)', positiveInt, 4_000_000)
    .option('--max-file-bytes <n>', 'larger files are skipped (the pipeline accepts 10 MB by default)', positiveInt, 10_000_000)
    .option('--allow-mass-delete', 'commit even if it deletes more than the pipeline\'s share of the source', false)
    .option('--no-progress', 'no progress bars')
    .option('--json', 'print the summary as JSON', false)
    .showHelpAfterError();
  program.parse(argv);
  const o = program.opts();
  if (Buffer.byteLength(o.source) > SOURCE_BYTES_MAX || o.source.length === 0) {
    program.error(`--source must be 1 to ${SOURCE_BYTES_MAX} bytes`, { exitCode: EXIT_REFUSED });
  }
  let base;
  try {
    base = new URL(o.url);
  } catch {
    program.error('--url must be a URL', { exitCode: EXIT_REFUSED });
  }
  return { ...o, base: base.href.replace(/\/$/, '') };
}

/** The pipeline's content hash of a document (`pipeline::content_hash`): no metadata. */
export function contentHash(contentType, text) {
  return createHash('sha256')
    .update(contentType)
    .update('\0')
    .update('{}')
    .update('\0')
    .update(text, 'utf8')
    .digest('hex');
}

function contentTypeOf(file) {
  return /\.(md|markdown)$/i.test(file) ? 'text/markdown' : 'text/plain';
}

const decoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The files to sync, each read, checked and hashed; the rest skipped with a reason. */
async function scan(opts, bar) {
  const names = (await fg(opts.glob, { cwd: opts.dir, onlyFiles: true, dot: false, followSymbolicLinks: false })).sort();
  const files = [];
  const skipped = [];
  bar.start(names.length, 0, { phase: 'hashing' });
  for (const name of names) {
    const docId = name.split(path.sep).join('/');
    const full = path.join(opts.dir, name);
    bar.increment();
    const stat = await fs.stat(full);
    if (Buffer.byteLength(docId) > DOC_ID_BYTES_MAX || /[\u0000-\u001f\u007f]/.test(docId)) {
      skipped.push({ file: docId, reason: 'path_not_a_doc_id' });
      continue;
    }
    if (stat.size > opts.maxFileBytes) {
      skipped.push({ file: docId, reason: 'too_large' });
      continue;
    }
    let text;
    try {
      text = decoder.decode(await fs.readFile(full));
    } catch {
      skipped.push({ file: docId, reason: 'not_utf8' });
      continue;
    }
    if (text.trim().length === 0) {
      skipped.push({ file: docId, reason: 'blank' });
      continue;
    }
    const contentType = contentTypeOf(name);
    files.push({ docId, text, contentType, hash: contentHash(contentType, text) });
  }
  bar.stop();
  return { files, skipped };
}

class ApiError extends Error {
  constructor(status, body) {
    super(`${status} ${body?.error?.code ?? 'error'}: ${body?.error?.message ?? ''}`);
    this.status = status;
    this.code = body?.error?.code;
    this.body = body;
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** One API call, retried on 429, 5xx and network errors (with Retry-After). */
async function api(opts, method, route, body) {
  for (let attempt = 0; ; attempt++) {
    let res;
    try {
      res = await fetch(`${opts.base}${route}`, {
        method,
        headers: { authorization: `Bearer ${opts.token}`, 'content-type': 'application/json' },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (e) {
      if (attempt >= 5) throw e;
      await sleep(500 * 2 ** attempt);
      continue;
    }
    const json = await res.json().catch(() => null);
    if (res.ok) return { status: res.status, body: json };
    const retryable = res.status === 429 || res.status >= 500;
    if (!retryable || attempt >= 5) throw new ApiError(res.status, json);
    const after = Number(res.headers.get('retry-after'));
    await sleep(Number.isFinite(after) && after > 0 ? Math.min(after, 60) * 1000 : 500 * 2 ** attempt);
  }
}

/** Groups `items` in runs of at most `n` items and `bytes` text bytes (a larger item alone). */
function batches(items, n, bytes, size) {
  const out = [];
  let cur = [];
  let curBytes = 0;
  for (const it of items) {
    const b = size(it);
    if (cur.length > 0 && (cur.length >= n || curBytes + b > bytes)) {
      out.push(cur);
      cur = [];
      curBytes = 0;
    }
    cur.push(it);
    curBytes += b;
  }
  if (cur.length > 0) out.push(cur);
  return out;
}

async function sync(opts) {
  // One bar per phase, on stderr, only on a terminal.
  const bar = (phase) => {
    if (!opts.progress || !process.stderr.isTTY) {
      return { start() {}, increment() {}, update() {}, stop() {}, setTotal() {} };
    }
    const b = new cliProgress.SingleBar(
      { format: ` ${phase.padEnd(8)} [{bar}] {value}/{total}`, stream: process.stderr, hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let started = false;
    const start = (total) => {
      if (!started) b.start(total, 0);
      else b.setTotal(total);
      started = true;
    };
    return {
      start,
      setTotal: start,
      increment: (n = 1) => b.increment(n),
      update: (v) => b.update(v),
      stop: () => started && b.stop(),
    };
  };
  const summary = { source: opts.source, files: 0, unchanged: 0, sent: 0, skipped: [], failed: [], sync_id: null, state: null, to_delete: 0, deleted: 0, kept: 0 };
  try {
    const { files, skipped } = await scan(opts, bar('hashing'));
    summary.files = files.length;
    summary.skipped = skipped;

    const open = await api(opts, 'POST', '/v1/syncs', { source: opts.source });
    const syncId = open.body.sync_id;
    summary.sync_id = syncId;
    const sending = bar('syncing');
    sending.start(files.length);
    for (const group of batches(files, opts.batch, Infinity, () => 0)) {
      const seen = await api(opts, 'POST', `/v1/syncs/${encodeURIComponent(syncId)}/seen`, {
        documents: group.map((f) => ({ doc_id: f.docId, content_hash: f.hash })),
      });
      const held = new Set(seen.body.results.filter((r) => r.seen).map((r) => r.doc_id));
      summary.unchanged += held.size;
      sending.increment(held.size);
      const changed = group.filter((f) => !held.has(f.docId));
      for (const part of batches(changed, opts.batch, opts.batchBytes, (f) => Buffer.byteLength(f.text))) {
        const r = await api(opts, 'POST', '/v1/documents', {
          documents: part.map((f) => ({ doc_id: f.docId, text: f.text, content_type: f.contentType, source: opts.source, sync_id: syncId })),
        });
        r.body.results.forEach((res, i) => {
          if (res.status === 202) summary.sent += 1;
          else if (res.status === 200) summary.unchanged += 1;
          else summary.failed.push({ file: part[i].docId, status: res.status, code: res.error?.code });
        });
        sending.increment(part.length);
      }
    }
    sending.stop();
    if (summary.failed.length > 0) {
      summary.state = 'not_committed';
      return { summary, exit: EXIT_FAILED, message: `${summary.failed.length} file(s) could not be sent: not committing (the session expires and deletes nothing)` };
    }

    const deleting = bar('deleting');
    let view;
    for (let attempt = 0; ; attempt++) {
      view = (await api(opts, 'POST', `/v1/syncs/${encodeURIComponent(syncId)}/commit`, { allow_mass_delete: opts.allowMassDelete })).body;
      deleting.setTotal(view.to_delete);
      deleting.update(view.deleted + view.kept);
      if (view.state === 'committed') break;
      if (attempt > 3600) throw new Error('the commit did not end');
      await sleep(1000);
    }
    deleting.stop();
    Object.assign(summary, { state: view.state, to_delete: view.to_delete, deleted: view.deleted, kept: view.kept });
    return { summary, exit: 0 };
  } catch (e) {
    if (e instanceof ApiError && e.code === 'sync_delete_guard') {
      summary.state = 'refused';
      return { summary, exit: EXIT_REFUSED, message: `${e.body.error.message} (pass --allow-mass-delete)` };
    }
    summary.state = 'error';
    return { summary, exit: EXIT_FAILED, message: e instanceof ApiError ? e.message : `request failed: ${e.message}` };
  }
}

function report({ summary, exit, message }, json) {
  if (json) {
    process.stdout.write(`${JSON.stringify({ ...summary, message: message ?? null })}\n`);
  } else {
    const s = summary;
    process.stdout.write(
      `source ${s.source}: ${s.files} files, ${s.unchanged} unchanged, ${s.sent} sent, ${s.skipped.length} skipped, ` +
        `${s.failed.length} failed; ${s.deleted} deleted, ${s.kept} kept of ${s.to_delete} to delete (${s.state})\n`,
    );
    for (const k of s.skipped) process.stdout.write(`  skipped ${k.file}: ${k.reason}\n`);
    for (const f of s.failed) process.stdout.write(`  failed ${f.file}: ${f.status} ${f.code}\n`);
  }
  if (message) process.stderr.write(`ingest-sync: ${message}\n`);
  process.exitCode = exit;
}

const opts = parseArgs(process.argv);
report(await sync(opts), opts.json);
