// Experiment (not a test): does a request sent while a long consume runs ever get an answer?
import { api, docPath, startWorker, waitForState, sleep } from './helpers.mjs';
import { Agent, fetch as ufetch } from 'undici';
const TEN_MB = 10_000_000;
function paragraph(i) {
  let x = (Math.imul(i + 1, 2654435761) >>> 0) || 1;
  const next = () => (x = (Math.imul(x, 1664525) + 1013904223) >>> 0);
  let text = `Paragraph ${i}`;
  while (text.length < 300) { let w = ''; for (let n = 3 + (next() % 6); n > 0; n--) w += String.fromCharCode(97 + ((next() >>> 16) % 26)); text += ` ${w}`; }
  return `${text.slice(0, 299)}.`;
}
function book(changed) {
  const parts = []; let bytes = 0;
  for (let i = 0; bytes < TEN_MB; i++) { let p = changed && changed.index === i ? changed.text : paragraph(i); const room = TEN_MB - bytes - (parts.length ? 2 : 0); if (p.length > room) p = p.slice(0, room); parts.push(p); bytes += p.length + (parts.length > 1 ? 2 : 0); }
  return parts.join('\n\n');
}
const w = await startWorker({ vars: { CONSUME_SUBREQUESTS_MAX: '25', EMBEDDING_DIMENSIONS: '128' } });
try {
  const t0 = Date.now();
  const r1 = await api(w.base, 'PUT', docPath('big'), { text: book() });
  console.log('v1', r1.status);
  await waitForState(w.base, 'big', 'indexed', { timeoutMs: 300_000 });
  console.log('v1 indexed', Date.now() - t0);
  const changed = 'Paragraph 17000 was rewritten: the lighthouse keeper moved the lantern. '.padEnd(299, 'x ') + '.';
  // Variant: the big v2 PUT on a connection of its own (closed after), then GETs.
  const own = new Agent();
  const r2res = await ufetch(`${w.base}${docPath('big')}`, { method: 'PUT', dispatcher: own, headers: { Authorization: 'Bearer dev-ingest-token', 'Content-Type': 'application/json' }, body: JSON.stringify({ text: book({ index: 17000, text: changed }) }) });
  const r2 = { status: r2res.status, body: await r2res.json() };
  console.log('v2', r2.status, r2.body.job_id);
  const sent = Date.now();
  const one = async (label, f) => { const at = Date.now() - sent; try { const r = await f(); return `${label} sent at ${at} ms: ${r.status} ${(await r.json()).state} after ${Date.now() - sent - at} ms`; } catch (e) { return `${label} sent at ${at} ms: ${e.name} after ${Date.now() - sent - at} ms`; } };
  const url = `${w.base}/v1/jobs/${r2.body.job_id}`;
  const H = { Authorization: 'Bearer dev-ingest-token' };
  const results = await Promise.all([
    one('same connection as the big PUT (keep-alive)', () => ufetch(url, { dispatcher: own, headers: H, signal: AbortSignal.timeout(60_000) })),
    one('a fresh keep-alive connection', () => ufetch(url, { dispatcher: new Agent(), headers: H, signal: AbortSignal.timeout(60_000) })),
    one('global fetch pool', () => fetch(url, { headers: H, signal: AbortSignal.timeout(60_000) })),
  ]);
  for (const r of results) console.log(r);
  const h = await fetch(`${w.base}/healthz`); console.log('healthz after', h.status);
  console.log(w.logs().split('\n').filter((l) => /QUEUE|jobs|consume_ack/.test(l)).slice(-20).join('\n'));
} finally {
  await w.stop();
}
