// The operator's console: plain DOM over the admin API (/v1/admin/*).
// The admin token is entered once and kept in sessionStorage (this tab
// only); every value shown is set as text, never as markup. Every action
// that changes something says what it will do first and asks to confirm.
'use strict';

const TOKEN_KEY = 'ingest-console-admin-token';
// A view refreshes every REFRESH_MS while what it shows changes; each
// refresh that finds it unchanged doubles the wait, up to REFRESH_MAX_MS,
// and a hidden tab asks nothing until it is shown again (issue 36: every
// refresh reads the summary, the timeline and a page of documents).
const REFRESH_MS = 2000;
const REFRESH_MAX_MS = 30000;
const JOB_STATES = ['queued', 'running', 'up_for_retry', 'succeeded', 'failed', 'superseded', 'dead'];
const JOB_COLORS = {
  queued: '#90a4ae', running: '#42a5f5', up_for_retry: '#ffa726', succeeded: '#66bb6a',
  failed: '#ef5350', superseded: '#bdbdbd', dead: '#6d4c41',
};

const $ = (id) => document.getElementById(id);

/** An element with attributes and children (strings become text nodes). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') node.className = v;
    else if (k.startsWith('on')) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v);
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    node.append(c instanceof Node ? c : String(c));
  }
  return node;
}

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, String(v));
  for (const c of children.flat()) node.append(c instanceof Node ? c : String(c));
  return node;
}

function when(ms) {
  return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '';
}

function stateCell(state) {
  return el('td', { class: `state-${state}` }, state ?? '');
}

/** A table of `rows` with `columns`: [header, (row) => cell content | <td>]. */
function table(columns, rows, testid) {
  const head = el('tr', {}, columns.map(([h]) => el('th', {}, h)));
  const body = rows.map((r) => el('tr', {}, columns.map(([, f]) => {
    const v = f(r);
    if (v instanceof HTMLTableCellElement) return v;
    return el('td', typeof v === 'number' ? { class: 'num' } : {}, v ?? '');
  })));
  return el('table', testid ? { 'data-testid': testid } : {}, el('thead', {}, head), el('tbody', {}, body));
}

function show(target, ...nodes) {
  $(target).replaceChildren(...nodes);
}

// ------------------------------------------------------------------ API

class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message ?? `HTTP ${status}`);
    this.status = status;
    this.code = body?.error?.code ?? 'http_error';
  }
}

// Shards (issue 37): the deployment's shards (GET shards), and the one the
// per-shard views read and act on (the selector, shown with more than one).
let shards = [];
let shard = 0;

/**
 * `path` on the chosen shard: with more than one shard, every admin route
 * but tenants and shards (the deployment's) carries `shard=N`; with one,
 * the path is unchanged.
 */
function onShard(path) {
  if (shards.length <= 1 || /^(tenants|shards)([/?]|$)/.test(path)) return path;
  return `${path}${path.includes('?') ? '&' : '?'}shard=${shard}`;
}

async function api(method, path, body) {
  const headers = { Authorization: `Bearer ${sessionStorage.getItem(TOKEN_KEY) ?? ''}` };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await fetch(`/v1/admin/${onShard(path)}`, {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await res.json().catch(() => null);
  if (res.status === 401) {
    signOut('The token was refused (401 unauthorized).');
    throw new ApiError(401, json);
  }
  if (!res.ok) throw new ApiError(res.status, json);
  return json;
}

function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== '' && v !== null && v !== undefined) q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : '';
}

const tenant = () => $('tenant').value.trim();

function reportError(e) {
  $('error').textContent = e instanceof ApiError ? `${e.status} ${e.code}: ${e.message}` : String(e.message ?? e);
}

// ------------------------------------------------------------------ confirm

/**
 * Shows what an action will do (and, with more than one shard, on which:
 * every action acts on the chosen shard); resolves true when the operator
 * confirms.
 */
function confirmAction(title, lines) {
  const dialog = $('confirm');
  $('confirm-title').textContent = title;
  const where = shards.length > 1 ? [`On shard ${shard} (its ledger and its index) only.`] : [];
  show('confirm-body', ...[...lines, ...where].map((l) => (l instanceof Node ? l : el('p', {}, l))));
  return new Promise((resolve) => {
    dialog.addEventListener('close', () => resolve(dialog.returnValue === 'ok'), { once: true });
    dialog.returnValue = 'cancel';
    dialog.showModal();
  });
}

// ------------------------------------------------------------------ views

const views = {};
let current = 'overview';
let timer = null;

let delay = REFRESH_MS;
let lastShown = null;

/** Shows the current view; `auto`: a timed refresh (not an operator's action). */
async function refresh(auto = false) {
  clearTimeout(timer);
  timer = null;
  try {
    await views[current]();
    $('error').textContent = '';
    const shown = $(`view-${current}`).textContent;
    delay = auto && shown === lastShown ? Math.min(delay * 2, REFRESH_MAX_MS) : REFRESH_MS;
    lastShown = shown;
    $('status').textContent = `updated ${new Date().toLocaleTimeString()} · next in ${delay / 1000} s`;
  } catch (e) {
    reportError(e);
  }
  schedule();
}

/** The next timed refresh, unless signed out or the tab is hidden. */
function schedule() {
  clearTimeout(timer);
  timer = null;
  if (!sessionStorage.getItem(TOKEN_KEY) || document.hidden) return;
  timer = setTimeout(() => refresh(true), delay);
}

document.addEventListener('visibilitychange', () => {
  if (document.hidden) {
    clearTimeout(timer);
    timer = null;
    $('status').textContent = 'paused while the tab is hidden';
  } else if (sessionStorage.getItem(TOKEN_KEY)) {
    refresh();
  }
});

function select(view) {
  current = view;
  for (const b of document.querySelectorAll('nav button')) b.classList.toggle('active', b.dataset.view === view);
  for (const s of document.querySelectorAll('.view')) s.hidden = s.id !== `view-${view}`;
  refresh();
}

// Overview: documents by state, failures, jobs over time, the document list.
let docCursor = null;
views.overview = async () => {
  const t = tenant();
  // From a bucket's start, so that the chart stays the same while no job
  // changes (an unchanged view backs the refresh off).
  const since = Math.floor((Date.now() - 6 * 3600 * 1000) / 900000) * 900000;
  const [summary, timeline, page] = await Promise.all([
    api('GET', `documents/summary${query({ tenant_id: t })}`),
    api('GET', `jobs/timeline${query({ tenant_id: t, since, bucket_seconds: 900 })}`),
    api('GET', `documents${query({ tenant_id: t, state: $('doc-state-filter').value, cursor: docCursor, limit: 50 })}`),
  ]);
  show('doc-states', el('div', { class: 'tile', 'data-testid': 'documents-total' }, el('b', {}, summary.documents), 'documents'),
    ...Object.entries(summary.by_state).map(([state, n]) =>
      el('div', { class: `tile state-${state}`, 'data-testid': `state-${state}` }, el('b', {}, n), state)));
  show('doc-failures', summary.failures.length
    ? table([['State', (f) => stateCell(f.state)], ['Failure bucket', (f) => f.bucket], ['Documents', (f) => f.documents]], summary.failures, 'failures')
    : el('p', {}, 'None.'));
  show('jobs-chart', chart(timeline));
  show('doc-list', table([
    ['Tenant', (d) => d.tenant_id], ['Document', (d) => d.doc_id], ['State', (d) => stateCell(d.state)],
    ['Latest', (d) => d.latest_version], ['Live', (d) => d.live_version ?? '—'], ['Chunks', (d) => d.chunk_count],
    ['Job', (d) => d.job_state ?? ''], ['Failure bucket', (d) => d.last_failure_bucket ?? ''], ['Updated', (d) => when(d.updated_at)],
  ], page.documents, 'documents'));
  $('doc-more').hidden = !page.next_cursor;
  $('doc-more').onclick = () => { docCursor = page.next_cursor; refresh(); };
};

/** Stacked bars of jobs by state per time bucket. */
function chart(timeline) {
  const W = 720; const H = 160; const pad = 24;
  const n = timeline.buckets.length || 1;
  const totals = timeline.buckets.map((b) => JOB_STATES.reduce((s, k) => s + (b.counts[k] ?? 0), 0));
  const max = Math.max(1, ...totals);
  const bw = (W - pad) / n;
  const root = svg('svg', { viewBox: `0 0 ${W} ${H + 20}`, width: W, height: H + 20, role: 'img', 'aria-label': 'jobs by state over time', 'data-testid': 'jobs-chart' });
  root.append(svg('text', { x: 0, y: 10 }, String(max)), svg('text', { x: 0, y: H }, '0'));
  timeline.buckets.forEach((b, i) => {
    let y = H;
    for (const state of JOB_STATES) {
      const v = b.counts[state] ?? 0;
      if (!v) continue;
      const h = (v / max) * (H - 12);
      y -= h;
      root.append(svg('rect', { x: pad + i * bw + 1, y, width: Math.max(1, bw - 2), height: h, fill: JOB_COLORS[state], 'data-state': state },
        svg('title', {}, `${when(b.start)} ${state}: ${v}`)));
    }
  });
  root.append(svg('text', { x: pad, y: H + 14 }, when(timeline.since)), svg('text', { x: W - 130, y: H + 14 }, when(timeline.until)));
  const legend = el('div', { class: 'legend' }, JOB_STATES.map((s) => el('span', {}, el('i', {}), s)));
  legend.querySelectorAll('i').forEach((i, k) => { i.style.background = JOB_COLORS[JOB_STATES[k]]; });
  return el('div', {}, root, legend);
}

// Dead letters: the summary, and pages of one group's letters.
let letterGroup = null;
let letterCursor = null;
views['dead-letters'] = async () => {
  const { groups } = await api('GET', `dead-letters/summary${query({ tenant_id: tenant() })}`);
  show('letter-groups', groups.length ? table([
    ['Tenant', (g) => g.tenant_id], ['Failure bucket', (g) => g.failure_bucket], ['Version still latest', (g) => (g.version_is_latest ? 'yes' : 'no')],
    ['Chunks', (g) => g.chunk_count_bucket], ['Letters', (g) => g.letters], ['Deliveries', (g) => g.deliveries],
    ['First seen', (g) => when(g.first_seen)], ['Last seen', (g) => when(g.last_seen)],
    ['', (g) => el('td', {}, el('button', { type: 'button', onclick: () => { letterGroup = g; letterCursor = null; refresh(); } }, 'Letters'))],
  ], groups, 'letter-groups') : el('p', {}, 'No dead letters.'));
  $('letters-title').hidden = !letterGroup;
  if (!letterGroup) return;
  $('letters-title').textContent = `Letters of ${letterGroup.tenant_id}, ${letterGroup.failure_bucket}`;
  const page = await api('GET', `dead-letters${query({ tenant_id: letterGroup.tenant_id, bucket: letterGroup.failure_bucket, cursor: letterCursor, limit: 20 })}`);
  show('letter-page', table([
    ['Document', (l) => l.doc_id], ['Version', (l) => l.version], ['Job', (l) => l.job_id],
    ['Bucket', (l) => l.failure_bucket ?? ''], ['Attempts', (l) => l.attempts ?? ''], ['Chunks', (l) => l.chunk_count ?? ''],
    ['Job state', (l) => l.job_state ?? ''], ['First seen', (l) => when(l.first_seen)], ['Last seen', (l) => when(l.last_seen)],
  ], page.letters, 'letters'));
  $('letters-more').hidden = !page.next_cursor;
  $('letters-more').onclick = () => { letterCursor = page.next_cursor; refresh(); };
};

// Redrives: preflight, execute, and the progress with its audit trail.
let redriveId = null;
views.redrives = async () => {
  if (!redriveId) return;
  const r = await api('GET', `redrives/${encodeURIComponent(redriveId)}`);
  const c = r.counts;
  show('redrive-progress',
    el('p', { 'data-testid': 'redrive-state' }, `Redrive ${r.redrive_id}: `, el('b', { class: `state-${r.state}` }, r.state), r.stop_reason ? ` (${r.stop_reason})` : ''),
    progress(c.succeeded + c.failed + c.skipped, c.total, `${c.sent} sent, ${c.succeeded} succeeded, ${c.failed} failed, ${c.skipped} skipped, ${c.pending} pending of ${c.total}`),
    el('h3', {}, 'Items'),
    table([['Tenant', (i) => i.tenant_id], ['Document', (i) => i.doc_id], ['Version', (i) => i.version], ['Phase', (i) => i.phase],
      ['State', (i) => stateCell(i.state)], ['New job', (i) => i.new_job_id ?? ''], ['Job state', (i) => i.job_state ?? '']], r.items, 'redrive-items'),
    el('h3', {}, 'Audit trail'),
    table([['At', (a) => when(a.at)], ['Event', (a) => a.event], ['Detail', (a) => a.detail]], r.audit, 'redrive-audit'));
};

function progress(done, total, label) {
  const pct = total ? Math.round((100 * done) / total) : 100;
  const span = el('span', {});
  span.style.width = `${pct}%`;
  return el('p', {}, el('span', { class: 'bar', role: 'progressbar', 'aria-valuenow': pct, 'aria-valuemin': 0, 'aria-valuemax': 100 }, span), ` ${pct}% · ${label}`);
}

function redriveBody(planId) {
  const filter = {};
  if (tenant()) filter.tenant_id = tenant();
  if ($('redrive-bucket').value.trim()) filter.bucket = $('redrive-bucket').value.trim();
  const body = { filter };
  if ($('redrive-canaries').value) body.canary_size = Number($('redrive-canaries').value);
  if (planId) body.plan_id = planId;
  return body;
}

async function preflight(ev) {
  ev.preventDefault();
  try {
    const { plan } = await api('POST', 'redrives', redriveBody());
    const execute = el('button', { type: 'button', 'data-testid': 'redrive-execute' }, 'Execute…');
    execute.disabled = plan.eligible.length === 0;
    execute.onclick = () => executeRedrive(plan);
    show('redrive-plan',
      el('p', { 'data-testid': 'redrive-preflight' }, `Preflight (nothing changed): plan ${plan.plan_id} — ${plan.matched} letters matched, ${plan.eligible.length} eligible, ${plan.skipped.length} skipped, ${plan.canaries.length} canaries first.`),
      plan.skipped.length ? table([['Job', (s) => s.job_id], ['Document', (s) => s.doc_id], ['Version', (s) => s.version], ['Reason', (s) => s.reason]], plan.skipped, 'redrive-skipped') : '',
      execute);
    $('error').textContent = '';
  } catch (e) {
    reportError(e);
  }
}

async function executeRedrive(plan) {
  const ok = await confirmAction('Execute this redrive?', [
    `Plan ${plan.plan_id}: resend ${plan.eligible.length} dead letters, ${plan.canaries.length} canaries first (the rest wait for them).`,
    `${plan.skipped.length} letters are skipped (their version is no longer the latest, or they are already redriven).`,
    'A plan is executed at most once.',
  ]);
  if (!ok) return;
  try {
    const r = await api('POST', 'redrives', redriveBody(plan.plan_id));
    redriveId = r.redrive_id;
    $('redrive-id').value = redriveId;
    refresh();
  } catch (e) {
    reportError(e);
  }
}

// Backfills: progress bars, pause/resume/cancel, and a start form.
const BACKFILL_ACTIONS = {
  running: ['pause', 'cancel'],
  paused: ['resume', 'cancel'],
};
const ACTION_EFFECT = {
  pause: 'The cron stops enqueuing its pages; jobs already enqueued finish. Resume continues from its cursor.',
  resume: 'The cron enqueues its pages again, from its cursor.',
  cancel: 'It stops for good. A "config" backfill abandons the generation it was building; the cron deletes its vectors.',
};
views.backfills = async () => {
  const { backfills } = await api('GET', `reindex${query({ tenant_id: tenant() })}`);
  show('backfill-list', backfills.length ? table([
    ['Backfill', (b) => b.backfill_id], ['Scope', (b) => b.scope], ['Tenant', (b) => b.tenant_id ?? 'every tenant'],
    ['State', (b) => stateCell(b.state)],
    ['Generation', (b) => (b.generation ? `${b.generation.from} → ${b.generation.to}` : '')],
    ['Progress', (b) => el('td', {}, progress(b.progress.done, b.progress.total, `${b.progress.done}/${b.progress.total} done, ${b.progress.pending} pending, ${b.progress.failed} failed`))],
    ['Started', (b) => when(b.created_at)],
    ['', (b) => el('td', {}, (BACKFILL_ACTIONS[b.state] ?? []).map((a) =>
      el('button', { type: 'button', 'data-action': a, 'data-backfill': b.backfill_id, onclick: () => backfillAction(b, a) }, a)))],
  ], backfills, 'backfills') : el('p', {}, 'No backfills.'));
};

async function backfillAction(b, action) {
  const ok = await confirmAction(`${action[0].toUpperCase()}${action.slice(1)} backfill ${b.backfill_id}?`, [
    `It is ${b.state}: ${b.progress.done} of ${b.progress.total} documents done, ${b.progress.remaining} remaining.`,
    ACTION_EFFECT[action],
  ]);
  if (!ok) return;
  try {
    await api('POST', `reindex/${encodeURIComponent(b.backfill_id)}/${action}`);
    refresh();
  } catch (e) {
    reportError(e);
  }
}

async function startBackfill(ev) {
  ev.preventDefault();
  const scope = $('backfill-scope').value;
  const body = { scope };
  if (tenant() && scope !== 'config') body.tenant_id = tenant();
  if ($('backfill-page').value) body.page_size = Number($('backfill-page').value);
  const ok = await confirmAction('Start a backfill?', [
    scope === 'config'
      ? 'Every document is indexed again into a new generation for the running configuration; search keeps serving the active one and switches when the new one is complete.'
      : `Every document${body.tenant_id ? ` of ${body.tenant_id}` : ''} is re-enqueued, a page at a time (the cron does the rest); unchanged chunks reuse their embeddings.`,
    el('pre', {}, JSON.stringify(body, null, 2)),
  ]);
  if (!ok) return;
  try {
    await api('POST', 'reindex', body);
    refresh();
  } catch (e) {
    reportError(e);
  }
}

// Generations: activate a retained one (rollback), retire one.
views.generations = async () => {
  const g = await api('GET', 'generations');
  show('generation-list', el('p', {}, `Active: ${g.active ?? 'none'}`), table([
    ['Generation', (x) => x.generation], ['State', (x) => stateCell(x.state)], ['Chunks', (x) => x.chunks],
    ['Model', (x) => x.index_config?.model ?? x.index_config?.embedding_model ?? ''],
    ['Created', (x) => when(x.created_at)],
    ['', (x) => el('td', {}, [
      x.state === 'retained' ? el('button', { type: 'button', 'data-action': 'activate', onclick: () => generationAction(x, 'activate', g.active) }, 'activate') : null,
      ['retained', 'abandoned'].includes(x.state) ? el('button', { type: 'button', 'data-action': 'retire', onclick: () => generationAction(x, 'retire', g.active) }, 'retire') : null,
    ])],
  ], g.generations, 'generations'));
};

async function generationAction(x, action, active) {
  const ok = await confirmAction(`${action === 'activate' ? 'Activate' : 'Retire'} generation ${x.generation}?`, [
    action === 'activate'
      ? `Search switches from generation ${active} to ${x.generation} at once (a rollback); ${active} is kept, retained.`
      : `Generation ${x.generation} (${x.chunks} chunks) is retired: the cron deletes its vectors. This cannot be undone.`,
  ]);
  if (!ok) return;
  try {
    await api('POST', `generations/${x.generation}/${action}`);
    refresh();
  } catch (e) {
    reportError(e);
  }
}

// Repair runs: the latest cron reports.
views.repair = async () => {
  const { runs } = await api('GET', `repair/runs${query({ tenant_id: tenant(), limit: 20 })}`);
  show('repair-list', runs.length ? table([
    ['Run', (r) => r.run_id], ['Started', (r) => when(r.started_at)], ['Took', (r) => `${r.finished_at - r.started_at} ms`],
    ['Budget hit', (r) => (r.budget_hit ? 'yes' : '')], ['Tenants', (r) => r.tenants.join(', ')],
    ['Report', (r) => el('td', {}, el('code', {}, Object.entries(r.report ?? {}).filter(([, v]) => typeof v === 'number' && v > 0).map(([k, v]) => `${k}: ${v}`).join(', ') || 'nothing to do'))],
  ], runs, 'repair-runs') : el('p', {}, 'No repair runs yet (the cron writes one every run).'));
};

// Shards: each shard's size, tenants and dedication; the selector's choices.
let shardChoices = '';
async function loadShards() {
  ({ shards } = await api('GET', 'shards'));
  if (!shards.some((s) => s.shard === shard)) shard = 0;
  const choices = JSON.stringify(shards.map((s) => [s.shard, s.dedicated_to]));
  if (choices !== shardChoices) {
    shardChoices = choices;
    $('shard').replaceChildren(...shards.map((s) =>
      el('option', { value: s.shard }, s.dedicated_to ? `${s.shard} (dedicated to ${s.dedicated_to})` : String(s.shard))));
  }
  $('shard').value = String(shard);
  $('shard-label').hidden = shards.length <= 1;
}

/** A size in bytes, readably (KB and MB of 1,024). */
function size(bytes) {
  if (bytes === null || bytes === undefined) return 'unknown';
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KB`;
  return `${(bytes / (1024 * 1024)).toFixed(1)} MB`;
}

views.shards = async () => {
  await loadShards();
  show('shard-list', table([
    ['Shard', (s) => s.shard],
    ['Size', (s) => el('td', s.size_bytes === null || s.size_bytes === undefined ? {} : { class: 'num', title: `${s.size_bytes} bytes` }, size(s.size_bytes))],
    ['Tenants', (s) => s.tenants], ['Dedicated to', (s) => s.dedicated_to ?? '—'],
    ['Takes new tenants', (s) => (s.takes_new_tenants ? 'yes' : 'no')],
    ['', (s) => (shards.length > 1 && s.shard === shard ? 'shown in the other views' : '')],
  ], shards, 'shards'));
};

function selectShard(n) {
  shard = n;
  // What the views held belongs to the other shard's ledger.
  docCursor = null;
  letterGroup = null;
  letterCursor = null;
  redriveId = null;
  $('redrive-id').value = '';
  show('redrive-plan');
  show('redrive-progress');
  refresh();
}

// ------------------------------------------------------------------ sign-in

function signOut(message) {
  sessionStorage.removeItem(TOKEN_KEY);
  clearTimeout(timer);
  $('app').hidden = true;
  $('signin').hidden = false;
  $('sign-out').hidden = true;
  $('signin-error').textContent = message ?? '';
  $('status').textContent = '';
}

async function signIn(ev) {
  ev.preventDefault();
  sessionStorage.setItem(TOKEN_KEY, $('token').value);
  $('token').value = '';
  try {
    await api('GET', 'generations');
  } catch (e) {
    if (e.status !== 401) signOut(`The admin API answered ${e.status ?? ''} ${e.code ?? e.message}.`);
    return;
  }
  enter();
}

async function enter() {
  $('signin').hidden = true;
  $('app').hidden = false;
  $('sign-out').hidden = false;
  try {
    await loadShards();
  } catch (e) {
    reportError(e);
  }
  if (sessionStorage.getItem(TOKEN_KEY)) select(current);
}

document.addEventListener('DOMContentLoaded', () => {
  $('signin-form').addEventListener('submit', signIn);
  $('sign-out').addEventListener('click', () => signOut('Signed out.'));
  for (const b of document.querySelectorAll('nav button')) b.addEventListener('click', () => select(b.dataset.view));
  $('tenant').addEventListener('change', () => { docCursor = null; refresh(); });
  $('doc-state-filter').addEventListener('change', () => { docCursor = null; refresh(); });
  $('shard').addEventListener('change', () => selectShard(Number($('shard').value)));
  $('redrive-form').addEventListener('submit', preflight);
  $('redrive-open').addEventListener('submit', (ev) => { ev.preventDefault(); redriveId = $('redrive-id').value.trim() || null; refresh(); });
  $('backfill-form').addEventListener('submit', startBackfill);
  if (sessionStorage.getItem(TOKEN_KEY)) enter();
});
