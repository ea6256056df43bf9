// Real-world text never breaks indexing, against `make dev`'s configuration
// (`wrangler dev --env local`: local D1, local queues, the offline index and
// embedder). Every document below ends `indexed`, and a phrase from each is
// found by search:
//
//   - one document per Unicode White_Space character, with a run of more
//     than half a chunk joined by it (the no-break-space report:
//     "abcdefghi\u00a0" × 300), and a long run of the character itself;
//   - the project's two seed documents, in Japanese;
//   - emoji (ZWJ sequences, flags, skin tones, keycaps);
//   - mixed scripts (Latin, Japanese, Chinese, Korean, Arabic, Hebrew,
//     Cyrillic, Devanagari, combining marks) in one document, as Markdown.

import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { REPO_ROOT, api, docPath, search, startWorker, waitForState, withLogs } from './helpers.mjs';

const SPACES = [
  0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x20, 0x85, 0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
  0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000,
];
const hex = (cp) => cp.toString(16).padStart(4, '0');
// Two words no other document has, per whitespace character, spelled in
// letters only (the offline embedder splits words on anything else) and
// sharing no prefix: syllables for the code point's hex digits.
const SYLLABLES = ['ba', 'ke', 'di', 'mo', 'fu', 'ga', 'hi', 'jo', 'lu', 'ne', 'pi', 'ro', 'sa', 'tu', 'vi', 'zo'];
const word = (digits) => [...digits].map((d) => SYLLABLES[parseInt(d, 16)]).join('');
const markers = (cp) => [word(hex(cp)), word([...hex(cp)].reverse().join('')) + 'x'];

function whitespaceDoc(cp) {
  const s = String.fromCodePoint(cp);
  const [a, b] = markers(cp);
  return {
    id: `ws-${hex(cp)}`,
    text:
      'x'.repeat(10) +
      `abcdefghi${s}`.repeat(300) +
      ` The harbour ${a} keeps its ${b} burning. ` +
      s.repeat(700) +
      `Then words again${s}`.repeat(40),
    query: `${a} ${b}`,
    phrase: a,
  };
}

const seed = (name) => fs.readFileSync(path.join(REPO_ROOT, 'tests', 'data', 'seeds', name), 'utf8');

const DOCS = [
  ...SPACES.map(whitespaceDoc),
  { id: 'seed-000', text: seed('000_23c333604504c1bd.txt'), query: 'DLQ は障害解析の一次証拠', phrase: '障害解析の一次証拠' },
  { id: 'seed-002', text: seed('002_d1dd9a78ce7dea22.txt'), query: '論理日付とDAGラン', phrase: '論理日付とDAGラン' },
  {
    id: 'emoji',
    text:
      'Family 👩‍👩‍👧‍👦 and flags 🇯🇵🇫🇷🏳️‍🌈 with skin tones 👍🏽👋🏿 and keycaps 1️⃣#️⃣. '.repeat(60) +
      'The emoji report mentions the word quokkasmile exactly here. ' +
      '🧑‍🚀🧑‍🔬'.repeat(400),
    query: 'emoji report quokkasmile',
    phrase: 'quokkasmile',
  },
  {
    id: 'mixed',
    content_type: 'text/markdown',
    text: [
      '# Mixed scripts 混在する文字',
      'English prose about queues. 日本語の文章：キューは少なくとも一度配信する。中文：队列至少投递一次。',
      '## 한국어',
      '큐는 메시지를 적어도 한 번 전달합니다. '.repeat(30),
      '## العربية و עברית',
      'الرسائل تصل مرة واحدة على الأقل. ' + 'ההודעות מגיעות לפחות פעם אחת. '.repeat(20),
      '```rust\nfn main() { println!("コード内の # は見出しではない"); }\n```',
      'Русский текст, हिन्दी पाठ, e\u0301\u0302 combining marks, and the rare word zephyrquill.',
      '冪等なコンシューマーは再配信に耐える。'.repeat(50),
    ].join('\n\n'),
    query: '冪等なコンシューマー',
    phrase: '冪等なコンシューマー',
  },
];

describe('texts of every script and whitespace index and are found (make dev configuration)', () => {
  let w;
  before(async () => {
    w = await startWorker();
  });
  after(async () => {
    await w?.stop();
  });

  it(
    'ingests every document',
    withLogs(() => w, async () => {
      for (const d of DOCS) {
        const body = { text: d.text, ...(d.content_type ? { content_type: d.content_type } : {}) };
        const res = await api(w.base, 'PUT', docPath(d.id), body);
        assert.equal(res.status, 202, `${d.id}: ${JSON.stringify(res.body)}`);
      }
    }),
  );

  it(
    'indexes every one of them',
    withLogs(() => w, async () => {
      for (const d of DOCS) {
        const doc = await waitForState(w.base, d.id, 'indexed', { timeoutMs: 120_000 });
        assert.ok(doc.chunk_count >= 1, `${d.id}: ${JSON.stringify(doc)}`);
        assert.equal(doc.index_config?.chunker, 'unicode-v2', JSON.stringify(doc.index_config));
      }
    }),
  );

  it(
    'finds a phrase of each by search',
    withLogs(() => w, async () => {
      const missed = [];
      for (const d of DOCS) {
        const res = await search(w.base, { query: d.query, top_k: 5 });
        assert.equal(res.status, 200, `${d.id}: ${JSON.stringify(res.body)}`);
        const hit = res.body.results.find((r) => r.doc_id === d.id && r.text.includes(d.phrase));
        if (!hit) missed.push(`${d.id}: ${JSON.stringify(res.body.results.map((r) => [r.doc_id, r.score]))}`);
      }
      assert.deepEqual(missed, [], 'documents whose phrase search did not find');
    }),
  );

  it(
    'refuses a query over the model limit with 422 and takes one at the limit',
    withLogs(() => w, async () => {
      // bge-base: 512 tokens, 2 of them special: 510 ideographs are taken, 511 are not.
      const ok = await search(w.base, { query: '語'.repeat(510) });
      assert.equal(ok.status, 200, JSON.stringify(ok.body));
      const long = await search(w.base, { query: '語'.repeat(511) });
      assert.equal(long.status, 422, JSON.stringify(long.body));
      assert.equal(long.body.error.code, 'query_too_long');
    }),
  );
});
