// The offline profile's configuration: wrangler.toml without its [build]
// step and without the production-only remote bindings ([ai],
// [[vectorize]]), written next to it (paths in it are relative to it) under
// a git-ignored name, for the runs that build the Worker themselves and
// serve `--env local`: `make dev` (scripts/dev.mjs) and the end-to-end tests.
//
// Why: wrangler dev with a custom build runs the build at start, and its
// watcher runs it a second time as soon as it is ready ("The file src
// changed, restarting build…"), whatever changed; in a test it would also
// rebuild and restart the Worker under a request in flight when a file in
// src/ changes. The remote bindings are not inherited by [env.local] (it is
// offline on purpose), and wrangler warns about each one it leaves out.

import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** The top-level tables the offline profile leaves out. */
const LEFT_OUT = new Set(['[build]', '[ai]', '[[vectorize]]']);

/** Writes `name` (at the repository root) and returns its path. */
export function localConfig(name) {
  const out = path.join(REPO_ROOT, name);
  const lines = fs.readFileSync(path.join(REPO_ROOT, 'wrangler.toml'), 'utf8').split('\n');
  const kept = [];
  let leftOut = false;
  for (const line of lines) {
    if (/^\[/.test(line)) leftOut = LEFT_OUT.has(line.trim());
    if (!leftOut) kept.push(line);
  }
  const text = kept.join('\n');
  for (const table of LEFT_OUT) {
    if (text.includes(table)) throw new Error(`wrangler.toml has ${table} where it was not expected`);
  }
  if (!fs.existsSync(out) || fs.readFileSync(out, 'utf8') !== text) fs.writeFileSync(out, text);
  return out;
}
