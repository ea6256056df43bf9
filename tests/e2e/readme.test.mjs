// The README's shell examples, run as a new user runs them: every command of
// its `sh` blocks in "Walk-through", "Tenants" and "Syncing a directory", in
// order, in one bash session, against the built Worker on a fresh state. A
// comment right after a command that starts with `{`, `[` or `source ` (and
// the lines that continue it) is the output the README promises; the run
// fails when an answer's fields, values or statuses stop matching it, so the
// README cannot drift from the code again.
//
// How a promise is read: `…` stands for anything (`,…`: perhaps more);
// `<…>` for one value
// (e.g. `tkn_<16 hex>_<48 hex>`); a number with a fraction or an exponent
// (a score) matches one that rounds to it at the same precision; the rest is
// literal. A read-only command (a GET, or a search) is tried again for up to
// 30 s until it matches, as a reader who waits "a second or two" would.
//
// What the runner changes in a command: `localhost:8787` becomes this test's
// Worker, `./handbook` a directory prepared so that the CLI example's
// summary holds (synced once, then one file changed and one removed), and
// `<job_id>` the last job ID an answer showed.
//
// Run from the repository root: node --test tests/e2e/readme.test.mjs

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { REPO_ROOT, runChild, startWorker, withLogs } from './helpers.mjs';

const SECTIONS = ['Walk-through', 'Tenants', 'Syncing a directory'];
const RETRY_MS = 30_000;

/** The `sh` blocks of the README's `## <title>` sections, in order. */
export function readmeBlocks(text, titles) {
  const blocks = [];
  let section = null;
  let block = null;
  for (const line of text.split('\n')) {
    if (block) {
      if (line.startsWith('```')) {
        blocks.push(block);
        block = null;
      } else block.lines.push(line);
    } else if (line.startsWith('## ')) section = line.slice(3).trim();
    else if (line.startsWith('```sh') && titles.includes(section)) block = { section, lines: [] };
  }
  return blocks;
}

/** A block's commands, each with the output its comment promises (or null). */
export function commandsOf(lines) {
  const steps = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (line.trim() === '' || line.startsWith('#')) {
      i++;
      continue;
    }
    let cmd = line;
    while (cmd.endsWith('\\') && i + 1 < lines.length) cmd = `${cmd}\n${lines[++i]}`;
    i++;
    let expect = null;
    if (i < lines.length && /^# (\{|\[|source )/.test(lines[i])) {
      expect = lines[i++].slice(2);
      while (i < lines.length && /^#\s{2,}\S/.test(lines[i])) expect += lines[i++].replace(/^#\s+/, '');
    }
    steps.push({ cmd, expect });
  }
  return steps;
}

/** Whether `actual` keeps the promise `expect` (see the head of the file). */
export function matches(expect, actual) {
  const numbers = [];
  let re = '';
  const token = /,…|…|<[^<>]+>|-?\d+(?:\.\d+(?:e[-+]?\d+)?|e[-+]?\d+)|[^…<,\-\d]+|./gi;
  for (const [t] of expect.matchAll(token)) {
    if (t === ',…') re += '(?:,[\\s\\S]*?)?';
    else if (t === '…') re += '[\\s\\S]*?';
    else if (/^<[^<>]+>$/.test(t)) re += '[^",{}\\[\\]]+?';
    else if (/^-?\d+(\.\d+(e[-+]?\d+)?|e[-+]?\d+)$/i.test(t)) {
      numbers.push(t);
      re += '(-?\\d+(?:\\.\\d+)?(?:e[-+]?\\d+)?)';
    } else re += t.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');
  }
  const m = new RegExp(`^${re}$`, 'i').exec(actual.trim());
  if (!m) return false;
  return numbers.every((want, k) => {
    const digits = want.replace(/^-/, '').replace(/e.*$/i, '').replace('.', '').replace(/^0+/, '').length || 1;
    return Number(m[k + 1]).toPrecision(digits) === Number(want).toPrecision(digits);
  });
}

/** A bash session whose variables last from one command to the next. */
function bashSession(cwd) {
  const child = spawn('bash', ['--noprofile', '--norc'], { cwd, stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c) => (out += c));
  child.stderr.on('data', (c) => (err += c));
  let n = 0;
  return {
    async run(cmd, timeoutMs = 60_000) {
      const marker = `__readme_step_${++n}__`;
      out = '';
      err = '';
      child.stdin.write(`${cmd}\nprintf '\\n${marker} %s\\n' "$?"\n`);
      const deadline = Date.now() + timeoutMs;
      while (!out.includes(marker)) {
        if (Date.now() > deadline) throw new Error(`no end of ${JSON.stringify(cmd)} after ${timeoutMs} ms; output: ${out}${err}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      const [body, tail] = out.split(marker);
      return { stdout: body.replace(/\n$/, ''), stderr: err, status: Number(tail.trim()) };
    },
    close: () => child.kill('SIGKILL'),
  };
}

const readOnly = (cmd) => !/-X\s+(PUT|POST|DELETE)/.test(cmd) || /\/v1\/search\b/.test(cmd);

/** The CLI example's directory: synced once, then one file changed and one removed. */
async function prepareHandbook(dir, base) {
  fs.mkdirSync(dir, { recursive: true });
  const write = (name, text) => fs.writeFileSync(path.join(dir, name), text);
  write('intro.md', '# Intro\n\nWelcome aboard.\n');
  write('faq.md', '# FAQ\n\nAsk the lighthouse keeper.\n');
  write('tides.txt', 'High water at noon.\n');
  write('old.md', '# Old\n\nSoon gone.\n');
  const r = await runChild(process.execPath, ['cli/ingest-sync.mjs', '--url', base, '--token', 'dev-ingest-token', '--source', 'handbook', '--dir', dir, '--glob', '**/*.{md,txt}']);
  assert.equal(r.status, 0, `the first sync: ${r.stdout}${r.stderr}`);
  write('tides.txt', 'High water at one.\n');
  fs.rmSync(path.join(dir, 'old.md'));
}

let worker;
let bash;
let tmp;
const getWorker = () => worker;

before(
  async () => {
    worker = await startWorker();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'e2e-readme-'));
    bash = bashSession(REPO_ROOT);
  },
  { timeout: 300_000 },
);

after(async () => {
  bash?.close();
  await worker?.stop();
  if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
});

describe('the README, run as written', () => {
  it('parses what it promises', () => {
    assert.ok(matches('{"a":1,"b":"…","s":0.033}', '{"a":1,"b":"xyz","s":0.0328}'));
    assert.ok(matches('[{"a":1},…]', '[{"a":1}]') && matches('[{"a":1},…]', '[{"a":1},{"a":2}]'));
    assert.ok(!matches('{"a":1,"b":"…","s":0.033}', '{"a":2,"b":"xyz","s":0.0328}'), 'a literal');
    assert.ok(!matches('{"a":1,"s":0.033}', '{"a":1,"s":0.031}'), 'a rounded number');
    assert.ok(matches('{"t":"tkn_<16 hex>_<48 hex>"}', '{"t":"tkn_ab_cd"}'));
    assert.ok(!matches('{"t":"tkn_<16 hex>"}', '{"t":"tkn_ab","u":1}'), 'a placeholder is one value');
    const steps = commandsOf(['x=1', 'curl a \\', '  -d b', '# {"ok":', '#   true}', '# prose', 'y']);
    assert.deepEqual(steps, [
      { cmd: 'x=1', expect: null },
      { cmd: 'curl a \\\n  -d b', expect: '{"ok":true}' },
      { cmd: 'y', expect: null },
    ]);
  });

  const blocks = readmeBlocks(fs.readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8'), SECTIONS);

  it('has the blocks it is meant to run', () => {
    assert.deepEqual([...new Set(blocks.map((b) => b.section))], SECTIONS);
    const promised = blocks.flatMap((b) => commandsOf(b.lines)).filter((s) => s.expect).length;
    assert.ok(promised >= 15, `only ${promised} promised outputs`);
  });

  for (const [k, block] of blocks.entries()) {
    it(
      `${block.section}, block ${k + 1}`,
      withLogs(getWorker, async () => {
        const host = worker.base.replace(/^http:\/\//, '');
        let jobId = null;
        for (const step of commandsOf(block.lines)) {
          let cmd = step.cmd.replaceAll('localhost:8787', host).replaceAll('./handbook', path.join(tmp, 'handbook'));
          if (cmd.includes('./handbook') || step.cmd.includes('./handbook')) await prepareHandbook(path.join(tmp, 'handbook'), worker.base);
          if (cmd.includes('<job_id>')) {
            assert.ok(jobId, 'a command names <job_id> before any answer showed one');
            cmd = cmd.replaceAll('<job_id>', jobId);
          }
          const deadline = Date.now() + (step.expect && readOnly(cmd) ? RETRY_MS : 0);
          let r;
          for (;;) {
            r = await bash.run(cmd);
            if (!step.expect || matches(step.expect, r.stdout) || Date.now() > deadline) break;
            await new Promise((res) => setTimeout(res, 300));
          }
          assert.equal(r.status, 0, `${step.cmd}\nexit ${r.status}: ${r.stdout}${r.stderr}`);
          if (step.expect) {
            assert.ok(matches(step.expect, r.stdout), `${step.cmd}\nthe README promises:\n  ${step.expect}\nthe Worker answered:\n  ${r.stdout}\n${r.stderr}`);
          }
          jobId = /"job_id":"([^"]+)"/.exec(r.stdout)?.[1] ?? jobId;
        }
      }),
    );
  }
});
