//! The deterministic local embedder used offline (`EMBEDDER_BACKEND=local-hash`).
//!
//! Feature hashing of lowercase word unigrams and character trigrams (with
//! word-boundary markers), signed, L2-normalized. It gives lexical
//! similarity: texts sharing words score high under cosine. It is not a
//! semantic model; it exists so the whole pipeline runs on a laptop with no
//! network and so tests are reproducible.

/// Weight of a whole-word feature relative to a character trigram.
const WORD_WEIGHT: f32 = 1.0;
const TRIGRAM_WEIGHT: f32 = 0.35;

/// Embeds `text` into a unit vector of `dims` dimensions (all zeros for a
/// text with no alphanumeric character).
pub fn embed(text: &str, dims: usize) -> Vec<f32> {
    assert!(dims > 0);
    let mut v = vec![0.0f32; dims];
    let mut add = |feature: &[u8], weight: f32| {
        let h = fnv1a64(feature);
        let slot = (h % dims as u64) as usize;
        let sign = if h >> 63 == 0 { 1.0 } else { -1.0 };
        v[slot] += sign * weight;
    };
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        let mut feature = Vec::with_capacity(word.len() + 2);
        feature.extend_from_slice(b"w:");
        feature.extend_from_slice(word.as_bytes());
        add(&feature, WORD_WEIGHT);
        let chars: Vec<char> = std::iter::once('^')
            .chain(word.chars())
            .chain(std::iter::once('$'))
            .collect();
        for tri in chars.windows(3) {
            let s: String = tri.iter().collect();
            add(s.as_bytes(), TRIGRAM_WEIGHT);
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
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
