// The operator's console in a real headless browser (Debian's chromium,
// driven by puppeteer-core; nothing is downloaded), against the built
// Worker in workerd (`wrangler dev --env local`, make dev's configuration):
//
// 1. the page comes with its Content-Security-Policy, and a wrong token is
//    refused at sign-in;
// 2. signed in with the admin token, the operator sees documents change
//    state after they are ingested (one indexed, one the local index
//    rejects: `LOCAL_INDEX_REJECT_DOC_PREFIX=poison-`), and the jobs chart;
// 3. the dead-letter summary drills down to the letters;
// 4. a redrive preflight shows its plan and changes nothing; cancelling
//    the confirmation executes nothing;
// 5. a backfill started from the console is paused and resumed, each
//    after a confirmation that says what it will do;
// 6. generations and repair runs are shown;
// 7. the refresh backs off while the view does not change, and a hidden
//    tab asks nothing until it is shown again;
// 8. the Worker has two shards (SHARDS=2): the Shards view shows the rows
//    of GET /v1/admin/shards, and the shard selector makes the views read
//    the shard it picks (`shard=1` on every per-shard call: a tenant pinned
//    to shard 1 has its document there); told of one shard (its answer
//    intercepted: another worker would cost its migrations), the console
//    hides the selector and sends no shard parameter.
//
// Screenshots go to CONSOLE_SCREENSHOTS_DIR (default
// target/console-screenshots; `make screenshots` writes docs/console/).
// No console error and no CSP violation may happen on the page.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { ADMIN_TOKEN, REPO_ROOT, admin, api, docPath, startWorker, triggerCron, waitFor, waitForState, withLogs } from './helpers.mjs';

const CHROMIUM = process.env.CHROMIUM_PATH ?? ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => fs.existsSync(p));
const SHOTS = path.resolve(REPO_ROOT, process.env.CONSOLE_SCREENSHOTS_DIR ?? 'target/console-screenshots');
const JA = '東京の図書館では、古い資料をデジタル化して検索できるようにしています。利用者は日本語でも英語でも探せます。';

let worker;
let browser;
let page;
const problems = [];
const getWorker = () => worker;
const step = (name, fn) => it(name, withLogs(getWorker, fn));

before(
  async () => {
    assert.ok(CHROMIUM, 'chromium is installed (scripts/setup.sh installs it)');
    // Two shards, the default tenant (the ingest token's) on shard 0, which
    // the console shows first: steps 1-7 run there.
    worker = await startWorker({ vars: { LOCAL_INDEX_REJECT_DOC_PREFIX: 'poison-', SHARDS: '2' } });
    browser = await puppeteer.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
    });
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 900 });
    // A refused sign-in's 401 is expected; any other failed request, script
    // error or CSP violation ("Refused to …") is a problem.
    page.on('console', (m) => {
      if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) problems.push(`console: ${m.text()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400 && r.status() !== 401) problems.push(`${r.status()} ${r.request().method()} ${new URL(r.url()).pathname}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    fs.mkdirSync(SHOTS, { recursive: true });
  },
  { timeout: 300_000 },
);

after(async () => {
  await browser?.close();
  await worker?.stop();
});

async function shot(name) {
  await page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });
}

/** The text of `selector`, once `test(text)` holds (the console refreshes every 2 s). */
async function textWhen(selector, test, what) {
  let last = '';
  await waitFor(async () => {
    last = await page.$eval(selector, (e) => e.textContent).catch(() => '');
    return test(last);
  }, { timeoutMs: 30_000, what: `${what} (last: ${JSON.stringify(last.slice(0, 200))})` });
  return last;
}

/** Clicks `selector`, then confirms (or cancels) the dialog that opens, returning its text. */
async function clickAndAnswer(selector, answer) {
  await page.click(selector);
  await page.waitForSelector('#confirm[open]');
  const text = await page.$eval('#confirm', (d) => d.textContent);
  await page.click(answer === 'ok' ? '#confirm-ok' : '#confirm-cancel');
  await page.waitForSelector('#confirm:not([open])');
  return text;
}

const tile = (state) => `[data-testid="state-${state}"] b`;

describe('the console in a headless browser', () => {
  step('serves the page under its policy and refuses a wrong token', async () => {
    const res = await page.goto(`${worker.base}/console`);
    assert.equal(res.status(), 200);
    const csp = res.headers()['content-security-policy'];
    assert.match(csp, /script-src 'self'/);
    assert.doesNotMatch(csp, /unsafe/);
    await page.type('#token', 'not-the-token');
    await page.click('#signin-form button[type=submit]');
    const err = await textWhen('#signin-error', (t) => t.includes('401'), 'the refusal');
    assert.match(err, /refused/);
    assert.equal(await page.$eval('#app', (e) => e.hidden), true);
    assert.equal(await page.evaluate(() => sessionStorage.length), 0, 'a refused token is not kept');
    await shot('sign-in');
  });

  step('signs in and shows documents changing state after ingest', async () => {
    await page.type('#token', ADMIN_TOKEN);
    await page.click('#signin-form button[type=submit]');
    await page.waitForSelector('#app:not([hidden])');
    await textWhen('[data-testid="documents-total"] b', (t) => t === '0', 'an empty pipeline');

    for (const [id, text] of [['guide-ja', JA], ['poison-1', 'A document the local index rejects.']]) {
      const r = await api(worker.base, 'PUT', docPath(id), { text });
      assert.equal(r.status, 202, r.text);
    }
    await waitForState(worker.base, 'guide-ja', 'indexed');
    await waitForState(worker.base, 'poison-1', 'failed');
    await textWhen(tile('indexed'), (t) => t === '1', 'one indexed document');
    await textWhen(tile('failed'), (t) => t === '1', 'one failed document');
    const failures = await textWhen('#doc-failures', (t) => t.includes('index_rejected'), 'the failure bucket');
    assert.match(failures, /failed/);
    const list = await textWhen('[data-testid="documents"]', (t) => t.includes('guide-ja') && t.includes('poison-1'), 'the listing');
    assert.doesNotMatch(list, /図書館/, 'no document text in the listing');
    const bars = await page.$$eval('[data-testid="jobs-chart"] rect[data-state]', (rs) => rs.map((r) => r.dataset.state));
    assert.ok(bars.includes('succeeded') && bars.includes('failed'), `chart bars: ${bars}`);
    await shot('overview');
  });

  step('shows the shards and reads the shard the selector picks', async () => {
    // A tenant pinned to shard 1, with a document there.
    let r = await admin(worker.base, 'POST', '/v1/admin/tenants', { tenant_id: 'right', shard: 1 });
    assert.equal(r.status, 201, r.text);
    assert.equal(r.body.shard, 1);
    r = await admin(worker.base, 'POST', '/v1/admin/tenants/right/tokens', { scopes: ['ingest', 'search'] });
    assert.equal(r.status, 201, r.text);
    const { token } = r.body;
    r = await api(worker.base, 'PUT', docPath('right-1'), { text: 'The right tenant keeps its harbour ledger on shard 1.' }, { token });
    assert.equal(r.status, 202, r.text);
    await waitForState(worker.base, 'right-1', 'indexed', { token });

    // The Shards view: one row per shard of the API's answer.
    const { shards } = (await admin(worker.base, 'GET', '/v1/admin/shards')).body;
    assert.deepEqual(shards.map((s) => [s.shard, s.tenants]), [[0, 1], [1, 1]]);
    await page.click('nav button[data-view="shards"]');
    const rowsOf = () => page.$$eval('[data-testid="shards"] tbody tr', (trs) => trs.map((tr) => [...tr.cells].map((td) => td.textContent)));
    const rows = await waitFor(async () => { const x = await rowsOf(); return x.length === shards.length && x; }, { what: 'one row per shard' });
    assert.deepEqual(
      rows.map(([s, , tenants, dedicated, takes]) => [s, tenants, dedicated, takes]),
      shards.map((s) => [String(s.shard), String(s.tenants), s.dedicated_to ?? '—', s.takes_new_tenants ? 'yes' : 'no']),
    );
    for (const [, size] of rows) assert.match(size, /^\d+(\.\d)? (B|KB|MB)$/, 'a readable size');
    assert.equal(rows[0][5], 'shown in the other views', 'shard 0 first');
    await shot('shards');

    // The selector: shard 1's documents, every per-shard call on shard 1.
    await page.click('nav button[data-view="overview"]');
    await page.waitForSelector('[data-testid="shard-select"]', { visible: true });
    await page.select('[data-testid="shard-select"]', '1');
    const list = await textWhen('[data-testid="documents"]', (t) => t.includes('right-1'), "shard 1's documents");
    assert.doesNotMatch(list, /guide-ja|poison-1/, "shard 0's documents are not on shard 1");
    await textWhen('[data-testid="documents-total"] b', (t) => t === '1', "shard 1's summary");
    const asked = [];
    const onRequest = (q) => { if (new URL(q.url()).pathname.startsWith('/v1/')) asked.push(new URL(q.url())); };
    page.on('request', onRequest);
    await page.click('nav button[data-view="overview"]');
    await waitFor(() => asked.length >= 3, { what: "the overview's three calls" });
    page.off('request', onRequest);
    for (const u of asked) assert.equal(u.searchParams.get('shard'), '1', `${u.pathname}${u.search}`);

    await page.select('[data-testid="shard-select"]', '0');
    await textWhen('[data-testid="documents"]', (t) => t.includes('guide-ja') && !t.includes('right-1'), "shard 0's documents again");
    assert.deepEqual(problems, [], 'no console error or CSP violation');
  });

  step('with one shard, shows no selector and sends no shard parameter', async () => {
    // The console told of one shard (GET shards answered with shard 0 only).
    const one = (await admin(worker.base, 'GET', '/v1/admin/shards')).body.shards.slice(0, 1);
    const asked = [];
    const onRequest = (q) => {
      const u = new URL(q.url());
      if (u.pathname === '/v1/admin/shards') {
        q.respond({ status: 200, contentType: 'application/json', body: JSON.stringify({ shards: one }) });
        return;
      }
      if (u.pathname.startsWith('/v1/')) asked.push(u);
      q.continue();
    };
    await page.setRequestInterception(true);
    page.on('request', onRequest);
    try {
      await page.reload(); // signed in still (sessionStorage)
      await textWhen('[data-testid="documents"]', (t) => t.includes('guide-ja'), 'the overview');
      assert.equal(await page.$eval('#shard-label', (e) => e.hidden), true, 'no selector');
      await page.click('nav button[data-view="shards"]');
      await waitFor(async () => (await page.$$('[data-testid="shards"] tbody tr')).length === 1, { what: 'one row' });
      assert.ok(asked.length >= 3);
      for (const u of asked) assert.equal(u.search.includes('shard='), false, `${u.pathname}${u.search}`);
    } finally {
      page.off('request', onRequest);
      await page.setRequestInterception(false);
    }
    await page.reload();
    await page.waitForSelector('[data-testid="shard-select"]', { visible: true });
    await page.click('nav button[data-view="overview"]');
    assert.deepEqual(problems, [], 'no console error or CSP violation');
  });

  step('drills down from the dead-letter summary to the letters', async () => {
    await page.click('nav button[data-view="dead-letters"]');
    await textWhen('#letter-groups', (t) => t.includes('index_rejected'), 'the summary');
    await page.click('[data-testid="letter-groups"] tbody button');
    await textWhen('[data-testid="letters"]', (t) => t.includes('poison-1'), 'the letters');
    await shot('dead-letters');
  });

  step('runs a redrive preflight that changes nothing', async () => {
    const before = await admin(worker.base, 'GET', '/v1/admin/dead-letters/summary');
    await page.click('nav button[data-view="redrives"]');
    await page.type('#redrive-bucket', 'index_rejected');
    await page.click('#redrive-form button[type=submit]');
    const plan = await textWhen('[data-testid="redrive-preflight"]', (t) => t.includes('1 eligible'), 'the plan');
    assert.match(plan, /nothing changed/);
    await shot('redrive-preflight');
    const said = await clickAndAnswer('[data-testid="redrive-execute"]', 'cancel');
    assert.match(said, /resend 1 dead letters/);
    const afterwards = await admin(worker.base, 'GET', '/v1/admin/dead-letters/summary');
    assert.deepEqual(afterwards.body, before.body, 'the preflight and the cancelled execution changed nothing');
    assert.equal(await page.$eval('#redrive-progress', (e) => e.textContent), '', 'no redrive was started');
    const doc = await api(worker.base, 'GET', docPath('poison-1'));
    assert.equal(doc.body.latest_version, 1, 'no new version was written');
  });

  step('starts, pauses and resumes a backfill', async () => {
    for (const id of ['en-1', 'en-2']) {
      const r = await api(worker.base, 'PUT', docPath(id), { text: `English document ${id} about tides and harbours.` });
      assert.equal(r.status, 202, r.text);
      await waitForState(worker.base, id, 'indexed');
    }
    await page.click('nav button[data-view="backfills"]');
    await page.type('#backfill-page', '1');
    const start = await clickAndAnswer('#backfill-form button[type=submit]', 'ok');
    assert.match(start, /re-enqueued, a page at a time/);
    await textWhen('[data-testid="backfills"]', (t) => t.includes('running'), 'a running backfill');
    const [b] = (await admin(worker.base, 'GET', '/v1/admin/reindex')).body.backfills;
    assert.equal(b.state, 'running');
    assert.equal(b.page_size, 1);

    const pause = await clickAndAnswer(`button[data-action="pause"][data-backfill="${b.backfill_id}"]`, 'ok');
    assert.match(pause, /stops enqueuing/);
    await textWhen('[data-testid="backfills"]', (t) => t.includes('paused'), 'the paused backfill');
    assert.equal((await admin(worker.base, 'GET', `/v1/admin/reindex/${b.backfill_id}`)).body.state, 'paused');
    await shot('backfill-paused');

    await clickAndAnswer(`button[data-action="resume"][data-backfill="${b.backfill_id}"]`, 'ok');
    await textWhen('[data-testid="backfills"]', (t) => t.includes('running'), 'the resumed backfill');
    assert.equal((await admin(worker.base, 'GET', `/v1/admin/reindex/${b.backfill_id}`)).body.state, 'running');
  });

  step('shows generations and the latest repair runs', async () => {
    await triggerCron(worker.base);
    const { runs } = (await admin(worker.base, 'GET', '/v1/admin/repair/runs?limit=20')).body;
    assert.ok(runs.length >= 1, 'the cron wrote a repair run');
    await page.click('nav button[data-view="generations"]');
    await textWhen('[data-testid="generations"]', (t) => t.includes('active'), 'the active generation');
    await shot('generations');
    await page.click('nav button[data-view="repair"]');
    await waitFor(async () => (await page.$$('[data-testid="repair-runs"] tbody tr')).length === runs.length, { what: 'one row per repair run' });
    const shown = await page.$eval('[data-testid="repair-runs"] tbody tr td', (td) => td.textContent);
    assert.equal(shown, String(runs[0].run_id), 'the latest run first');
    await shot('repair-runs');
    await page.click('nav button[data-view="overview"]');
    assert.deepEqual(problems, [], 'no console error or CSP violation');
  });

  step('backs its refresh off while nothing changes, and asks nothing while hidden', async () => {
    // The repair runs change no more (no cron runs here unless the test
    // triggers one): each timed refresh that finds the view unchanged
    // doubles the wait (2 s, 4 s, 8 s …, at most 30 s).
    await page.click('nav button[data-view="repair"]');
    await textWhen('#status', (t) => t.includes('next in 2 s'), 'a refresh at the operator’s click');
    await textWhen('#status', (t) => t.includes('next in 8 s'), 'backed off twice');
    // Hidden: no request until the tab is shown again, then one at once.
    const asked = [];
    const onRequest = (r) => { if (new URL(r.url()).pathname.startsWith('/v1/')) asked.push(r.url()); };
    page.on('request', onRequest);
    const setHidden = (hidden) => page.evaluate((h) => {
      Object.defineProperty(document, 'hidden', { value: h, configurable: true });
      Object.defineProperty(document, 'visibilityState', { value: h ? 'hidden' : 'visible', configurable: true });
      document.dispatchEvent(new Event('visibilitychange'));
    }, hidden);
    await setHidden(true);
    await textWhen('#status', (t) => t.includes('paused'), 'paused while hidden');
    await new Promise((r) => setTimeout(r, 9000));
    assert.deepEqual(asked, [], 'a hidden tab asks nothing, past the 8 s it would have waited');
    await setHidden(false);
    await textWhen('#status', (t) => t.includes('next in 2 s'), 'shown again: refreshed at once, from 2 s');
    assert.ok(asked.length >= 1, 'the refresh when shown again');
    page.off('request', onRequest);
    await page.click('nav button[data-view="overview"]');
    assert.deepEqual(problems, [], 'no console error or CSP violation');
  });
});
