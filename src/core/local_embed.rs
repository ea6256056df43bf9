//! The deterministic local embedder used offline (`EMBEDDER_BACKEND=local-hash`).
//!
//! Feature hashing, signed, L2-normalized, with sublinear term frequency
//! (a feature seen n times weighs 1 + ln n, so a word repeated through a
//! chunk does not drown the rest of it). Spaced scripts give lowercase
//! word unigrams and character trigrams (with word-boundary markers);
//! unspaced scripts (Han, kana, Thai, Lao, Khmer, Myanmar), where a run of
//! letters is a phrase rather than a word, give character bigrams and
//! unigrams, so that a Japanese or Chinese query matches the passages that
//! share its words. It gives lexical similarity: texts sharing words score
//! high under cosine. It is not a semantic model; it exists so the whole
//! pipeline runs on a laptop with no network and so tests are reproducible.

/// The embedder's name in index configurations: vectors of another version
/// are not comparable, so a change of features is a new name.
pub const EMBEDDER_ID: &str = "local-hash-v2";

/// Weights of the features.
const WORD_WEIGHT: f32 = 1.0;
const TRIGRAM_WEIGHT: f32 = 0.35;
const BIGRAM_WEIGHT: f32 = 1.0;
const UNIGRAM_WEIGHT: f32 = 0.3;

/// Scripts written without spaces between words.
fn is_unspaced(c: char) -> bool {
    matches!(u32::from(c),
        0x3040..=0x30FF // Hiragana, Katakana
        | 0x31F0..=0x31FF // Katakana phonetic extensions
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified ideographs
        | 0xF900..=0xFAFF // CJK compatibility ideographs
        | 0xFF66..=0xFF9F // halfwidth Katakana
        | 0x20000..=0x3FFFF // CJK extensions B and later
        | 0x0E00..=0x0EFF // Thai, Lao
        | 0x1000..=0x109F // Myanmar
        | 0x1780..=0x17FF // Khmer
    )
}

/// Embeds `text` into a unit vector of `dims` dimensions (all zeros for a
/// text with no alphanumeric character, or for `dims == 0`).
pub fn embed(text: &str, dims: usize) -> Vec<f32> {
    // Feature hash → (weight, occurrences); ordered, so sums are deterministic.
    let mut features: std::collections::BTreeMap<u64, (f32, u32)> =
        std::collections::BTreeMap::new();
    let mut add = |feature: &[u8], weight: f32| {
        let e = features.entry(fnv1a64(feature)).or_insert((weight, 0));
        e.1 += 1;
    };
    let runs = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty());
    for run in runs.flat_map(script_runs) {
        let lower = run.to_lowercase();
        let chars: Vec<char> = lower.chars().collect();
        if chars.first().copied().is_some_and(is_unspaced) {
            let mut buf = [0u8; 8];
            for c in &chars {
                add(c.encode_utf8(&mut buf).as_bytes(), UNIGRAM_WEIGHT);
            }
            for pair in chars.windows(2) {
                let s: String = pair.iter().collect();
                add(format!("b:{s}").as_bytes(), BIGRAM_WEIGHT);
            }
            continue;
        }
        add(format!("w:{lower}").as_bytes(), WORD_WEIGHT);
        let marked: Vec<char> = std::iter::once('^')
            .chain(chars)
            .chain(std::iter::once('$'))
            .collect();
        for tri in marked.windows(3) {
            let s: String = tri.iter().collect();
            add(s.as_bytes(), TRIGRAM_WEIGHT);
        }
    }
    let mut v = vec![0.0f32; dims];
    for (h, (weight, n)) in features {
        let slot = usize::try_from(h % dims.max(1) as u64).unwrap_or(0);
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        if let Some(x) = v.get_mut(slot) {
            *x += sign * weight * (1.0 + (n as f32).ln());
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

/// Splits a run of letters where it passes between an unspaced script and
/// any other ("Vectorizeのインデックス" → "Vectorize", "のインデックス").
fn script_runs(word: &str) -> impl Iterator<Item = &str> {
    let mut rest = word;
    std::iter::from_fn(move || {
        let first = rest.chars().next()?;
        let unspaced = is_unspaced(first);
        let end = rest
            .char_indices()
            .find(|&(_, c)| is_unspaced(c) != unspaced)
            .map_or(rest.len(), |(i, _)| i);
        let (run, tail) = rest.split_at(end);
        rest = tail;
        Some(run)
    })
}

/// Cosine similarity; 0 when either vector is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let dot: f32 = a.iter().zip(b).map(|(x, y)| x * y).sum();
    let na = a.iter().map(|x| x * x).sum::<f32>().sqrt();
    let nb = b.iter().map(|x| x * x).sum::<f32>().sqrt();
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na * nb)
    }
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_length_and_deterministic() {
        let a = embed("The quick brown fox", 384);
        assert_eq!(a.len(), 384);
        assert!((a.iter().map(|x| x * x).sum::<f32>() - 1.0).abs() < 1e-4);
        assert_eq!(a, embed("The quick brown fox", 384));
        assert!(embed("  ... ", 64).iter().all(|x| *x == 0.0));
        assert!(embed("anything", 0).is_empty());
    }

    #[test]
    fn a_repeated_word_does_not_drown_the_rest() {
        // Without sublinear term frequency this scored 0.006 (the repeated word
        // is 99% of the vector), below unrelated text sharing a trigram.
        let chunk = format!(
            "{} The harbour lanternbcde keeps its light burning.",
            "abcdefghi\u{a0}".repeat(300)
        );
        let query = embed("harbour lanternbcde light", 384);
        let score = cosine(&embed(&chunk, 384), &query);
        assert!(score > 0.2, "{score}");
    }

    #[test]
    fn unspaced_scripts_match_on_shared_words() {
        let doc = embed("キューは少なくとも一度メッセージを配信するので、コンシューマーは冪等でなければならない。", 384);
        let close = embed("冪等なコンシューマー", 384);
        let far = embed("バナナは黄色い果物です。", 384);
        assert!(
            cosine(&doc, &close) > cosine(&doc, &far) + 0.1,
            "{} vs {}",
            cosine(&doc, &close),
            cosine(&doc, &far)
        );
        assert_eq!(
            script_runs("Vectorizeのインデックス").collect::<Vec<_>>(),
            ["Vectorize", "のインデックス"]
        );
    }

    #[test]
    fn lexical_overlap_scores_higher() {
        let doc = embed("Cloudflare Queues deliver messages at least once", 384);
        let close = embed("queues deliver at least once", 384);
        let far = embed("bananas are yellow fruit", 384);
        assert!(cosine(&doc, &close) > 0.5);
        assert!(cosine(&doc, &close) > cosine(&doc, &far) + 0.3);
        assert_eq!(cosine(&doc, &vec![0.0; 384]), 0.0);
    }
}
