#!/usr/bin/env python3
"""Generates the `exact` slice of the eval queries (queries-exact.tsv)
from the corpus (corpus.tsv), deterministically (seeded): each query is a
string copied from one document, and it is its own anchor: the relevant
chunks are those of that document whose text contains it.

English: half identifiers or codes (a word with `_`, `::`, a digit or an
inner capital: `calculate_length`, `E0382`, `HashMap::new`), half phrases
of 3–6 words from a line of prose. Japanese: 4–12 characters from a run of
kana and kanji. A candidate is kept only if it is specific: it occurs (case
folded) in that one document only, at most twice. Run from anywhere:
`python3 tests/data/eval/gen_exact.py`.
"""

import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "../../..")
SEED = 15
PER_LANGUAGE = 32

IDENT = re.compile(r"(?<![\w:])[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*(?![\w:])")
JA_RUN = re.compile(r"[\u3041-\u3096\u30a1-\u30fa\u30fc\u3005\u4e00-\u9fff]+")
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*")
STOP = set("""that this with from have will shall must them then than there their these those
which when what where while each other such into upon also only being been were does your""".split())


def load():
    docs = []
    with open(os.path.join(HERE, "corpus.tsv"), encoding="utf-8") as f:
        next(f)
        for line in f:
            doc_id, lang, path, _source, _license = line.rstrip("\n").split("\t")
            with open(os.path.join(ROOT, path), encoding="utf-8") as d:
                docs.append((doc_id, lang, d.read()))
    return docs


def is_identifier(w):
    if len(w) < 4:
        return False
    inner_cap = any(c.isupper() for c in w[1:]) and any(c.islower() for c in w)
    return "_" in w.strip("_") or "::" in w or any(c.isdigit() for c in w) or inner_cap


def prose(line):
    return not re.search(r"[{};=<>]|//|^\s{4}", line) and len(WORD.findall(line)) >= 6


def specific(q, doc_id, docs):
    ql = q.lower()
    total = 0
    for d, _lang, text in docs:
        n = text.lower().count(ql)
        if n and d != doc_id:
            return False
        total += n
    return 1 <= total <= 2


def candidates_en(rng, text):
    lines = text.splitlines()
    if rng.random() < 0.5:
        idents = sorted({w for w in IDENT.findall(text) if is_identifier(w)})
        return rng.choice(idents) if idents else None
    lines = [l for l in lines if prose(l)]
    if not lines:
        return None
    line = rng.choice(lines)
    words = list(WORD.finditer(line))
    n = rng.randint(3, 6)
    if len(words) < n:
        return None
    i = rng.randint(0, len(words) - n)
    ws = [m.group(0) for m in words[i:i + n]]
    if sum(1 for w in ws if len(w) >= 4 and w.lower() not in STOP) < 2:
        return None
    # The words as written, with what separates them in the line (within
    # one clause: no sentence punctuation or brackets between them).
    phrase = line[words[i].start():words[i + n - 1].end()]
    return phrase if re.fullmatch(r"[A-Za-z' ,-]+", phrase) else None


def hiragana(c):
    return "\u3041" <= c <= "\u3096"


def candidates_ja(rng, text):
    """A phrase cut where a word likely starts and ends: it starts on a
    kanji or katakana that follows kana of the other kind (or starts the
    run), and ends at the run's end or before such a start; it holds at
    least two kanji or katakana."""
    runs = [r for r in JA_RUN.findall(text) if len(r) >= 4]
    if not runs:
        return None
    run = rng.choice(runs)
    starts = [i for i, c in enumerate(run) if not hiragana(c) and (i == 0 or hiragana(run[i - 1]))]
    ends = starts[1:] + [len(run)]
    if not starts:
        return None
    i = rng.choice(starts)
    fits = [e for e in ends if 4 <= e - i <= 12]
    if not fits:
        return None
    q = run[i:rng.choice(fits)]
    return q if sum(1 for c in q if not hiragana(c)) >= 2 else None


def main():
    docs = load()
    rng = random.Random(SEED)
    rows = []
    for lang, pick in (("en", candidates_en), ("ja", candidates_ja)):
        mine = [d for d in docs if d[1] == lang]
        seen = set()
        tries = 0
        while len([r for r in rows if r[1] == lang]) < PER_LANGUAGE:
            tries += 1
            assert tries < 100_000, "not enough specific candidates"
            doc_id, _, text = rng.choice(mine)
            q = pick(rng, text)
            if not q or q.lower() in seen or q not in text or not specific(q, doc_id, docs):
                continue
            seen.add(q.lower())
            n = len([r for r in rows if r[1] == lang]) + 1
            rows.append((f"{lang}-exact-{n:02}", lang, "exact", doc_id, q, q))
    with open(os.path.join(HERE, "queries-exact.tsv"), "w", encoding="utf-8") as f:
        f.write("id\tlang\tslice\tdoc\tanchor\tquery\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


if __name__ == "__main__":
    main()
