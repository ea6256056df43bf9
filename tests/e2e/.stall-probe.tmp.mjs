// Experiment (not a test): does a request sent while a long consume runs ever get an answer?
import { api, docPath, startWorker, waitForState, sleep } from './helpers.mjs';
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
  const r2 = await api(w.base, 'PUT', docPath('big'), { text: book({ index: 17000, text: changed }) });
  console.log('v2', r2.status, r2.body.job_id);
  const sent = Date.now();
  // Several probes at once, each on its own connection, sent at 0, 2, 4, ... s.
  const probes = [];
  for (let k = 0; k < 10; k++) {
    probes.push((async () => {
      await sleep(k * 2000);
      const at = Date.now() - sent;
      try {
        const res = await fetch(`${w.base}/v1/jobs/${r2.body.job_id}`, { headers: { Authorization: 'Bearer dev-ingest-token', Connection: 'close' }, signal: AbortSignal.timeout(90_000) });
        const b = await res.json();
        return `probe ${k} sent at ${at} ms: ${res.status} ${b.state} after ${Date.now() - sent - at} ms`;
      } catch (e) { return `probe ${k} sent at ${at} ms: ${e.name} after ${Date.now() - sent - at} ms`; }
    })());
  }
  for (const p of probes) console.log(await p);
  const h = await fetch(`${w.base}/healthz`); console.log('healthz after', h.status);
  console.log(w.logs().split('\n').filter((l) => /QUEUE|jobs|consume_ack/.test(l)).slice(-20).join('\n'));
} finally {
  await w.stop();
}
