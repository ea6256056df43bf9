//! The offline vector index's arithmetic and encodings
//! (`adapters::local_index`): pure functions of their arguments.
//!
//! - A vector is stored as text: the base64 of its `f32`s, little-endian
//!   (2,048 characters at 384 dimensions), with its norm beside it.
//!   Measured in local D1 (workerd through Miniflare, 5,000 rows of 384
//!   dimensions, the `.all()` call alone, in JS, median of 5:
//!   `node scripts/bench-dev-index.mjs d1-columns`): a BLOB column 379 ms,
//!   since D1 hands a BLOB to the Worker as an array of numbers (which
//!   `serde_wasm_bindgen` would then read number by number); the same
//!   bytes as base64 text 39 ms; the JSON text it replaces 228 ms.
//! - For the first pass of a query, each vector is also quantized to one
//!   signed byte per dimension, with one factor (its scale over its norm),
//!   and stored by dimension: a row holds one dimension of a block of
//!   vectors. A query reads only the rows of its largest dimensions: a
//!   query of a few words, embedded by the local embedder, has a few dozen
//!   non-zero dimensions of 384.

/// The factor of a free slot (a live vector's is zero or positive).
pub const FREE: f32 = -1.0;

/// The norm of `v`, summed in the same order as [`super::local_embed::cosine`],
/// so a score from a stored norm is that function's, bit for bit.
pub fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Cosine similarity from the two norms; 0 when either vector is zero
/// (as [`super::local_embed::cosine`], which recomputes the norms).
pub fn cosine_normed(a: &[f32], norm_a: f32, b: &[f32], norm_b: f32) -> f32 {
    if norm_a == 0.0 || norm_b == 0.0 {
        0.0
    } else {
        dot(a, b) / (norm_a * norm_b)
    }
}

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Each byte's value in [`ALPHABET`], or 255 for a byte outside it.
// Evaluated at compile time: an index out of range fails the build, it
// cannot panic at run time.
#[allow(clippy::indexing_slicing)]
const DECODE: [u8; 256] = {
    let mut t = [255u8; 256];
    let mut i = 0;
    while i < 64 {
        t[ALPHABET[i] as usize] = i as u8;
        i += 1;
    }
    t
};

/// `bytes` as base64 (standard alphabet, padded).
pub fn encode_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    let symbol = |n: u32, shift: u32| {
        let i = ((n >> shift) & 63) as usize;
        char::from(ALPHABET.get(i).copied().unwrap_or(b'A'))
    };
    for chunk in bytes.chunks(3) {
        let byte = |i: usize| u32::from(chunk.get(i).copied().unwrap_or(0));
        let n = (byte(0) << 16) | (byte(1) << 8) | byte(2);
        out.push(symbol(n, 18));
        out.push(symbol(n, 12));
        out.push(if chunk.len() > 1 { symbol(n, 6) } else { '=' });
        out.push(if chunk.len() > 2 { symbol(n, 0) } else { '=' });
    }
    out
}

/// The bytes [`encode_bytes`] wrote, if `text` is its output: `None` for
/// anything else (a bad character or length, misplaced padding), never a
/// panic.
pub fn decode_bytes(text: &str) -> Option<Vec<u8>> {
    let text = text.as_bytes();
    if !text.len().is_multiple_of(4) {
        return None;
    }
    let quads = text.len() / 4;
    let mut bytes = Vec::with_capacity(quads * 3);
    for (q, quad) in text.chunks_exact(4).enumerate() {
        let mut n = 0u32;
        let mut pad = 0usize;
        for &c in quad {
            let v = if c == b'=' {
                pad += 1;
                0
            } else if pad > 0 {
                return None; // data after padding
            } else {
                DECODE.get(usize::from(c)).copied().filter(|v| *v < 64)?
            };
            n = (n << 6) | u32::from(v);
        }
        if pad > 2 || (pad > 0 && q + 1 != quads) {
            return None; // padding is one or two `=`, at the very end
        }
        let [_, b0, b1, b2] = n.to_be_bytes();
        bytes.extend_from_slice(&[b0, b1, b2]);
        bytes.truncate(bytes.len() - pad);
    }
    Some(bytes)
}

/// `v` as the base64 of its `f32`s, little-endian.
pub fn encode_vector(v: &[f32]) -> String {
    let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
    encode_bytes(&bytes)
}

/// The vector [`encode_vector`] wrote, if `text` is one (a whole number of
/// `f32`s); `None` for anything else.
pub fn decode_vector(text: &str) -> Option<Vec<f32>> {
    let bytes = decode_bytes(text)?;
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    Some(
        bytes
            .chunks_exact(4)
            .filter_map(|b| <[u8; 4]>::try_from(b).ok())
            .map(f32::from_le_bytes)
            .collect(),
    )
}

/// `v` quantized for the first pass: one signed byte per dimension,
/// round(v_d / scale) with scale = max |v_d| / 127, and the factor
/// scale / |v|, so that factor × Σ q_d·code_d ≈ q·v / |v|: the cosine's
/// ranking without |q|. A zero vector is all zeros with factor 0.
pub fn quantize(v: &[f32]) -> (f32, Vec<i8>) {
    let max = v.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    let n = norm(v);
    if max == 0.0 || n == 0.0 || !max.is_finite() || !n.is_finite() {
        return (0.0, vec![0; v.len()]);
    }
    let scale = max / 127.0;
    let codes = v
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    (scale / n, codes)
}

/// The dimensions a first pass reads for query `q`: its non-zero ones,
/// the `max` of largest magnitude if there are more (ties: the lower
/// dimension first), in increasing order.
pub fn query_dims(q: &[f32], max: usize) -> Vec<usize> {
    let mut dims: Vec<(usize, f32)> = q
        .iter()
        .enumerate()
        .filter(|(_, x)| **x != 0.0 && x.is_finite())
        .map(|(d, x)| (d, x.abs()))
        .collect();
    dims.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    dims.truncate(max);
    let mut out: Vec<usize> = dims.into_iter().map(|(d, _)| d).collect();
    out.sort_unstable();
    out
}

/// Adds `weight` × each code of `codes` (one dimension of a block, as
/// stored) into `acc`, slot by slot.
pub fn accumulate(acc: &mut [f32], weight: f32, codes: &[u8]) {
    for (a, &c) in acc.iter_mut().zip(codes) {
        *a += weight * f32::from(c as i8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::local_embed::{cosine, embed};

    #[test]
    fn a_vector_round_trips_through_its_text() {
        let v = vec![0.0, -0.0, 1.5, -3.25e-8, f32::MAX, f32::MIN_POSITIVE, 0.1];
        let back = decode_vector(&encode_vector(&v)).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&v));
        // 384 dimensions: 2,048 characters, no padding.
        assert_eq!(encode_vector(&[0.25; 384]).len(), 2048);
        for n in 0..7 {
            let v: Vec<f32> = (0..n).map(|i| i as f32 - 2.5).collect();
            assert_eq!(decode_vector(&encode_vector(&v)), Some(v));
        }
        for n in 0..5u8 {
            let bytes: Vec<u8> = (0..n).map(|i| 250 - i).collect();
            assert_eq!(decode_bytes(&encode_bytes(&bytes)), Some(bytes));
        }
    }

    #[test]
    fn bad_text_is_refused_not_a_panic() {
        let good = encode_vector(&[1.0, 2.0]);
        assert_eq!(decode_vector(&good[1..]), None, "length");
        assert_eq!(decode_vector("AAAA"), None, "three bytes: not whole f32s");
        assert_eq!(decode_vector("AAAAAA=="), Some(vec![0.0]), "four bytes");
        assert_eq!(decode_vector("[1.0,2.0]"), None, "JSON");
        assert_eq!(decode_vector(&good.replace('A', "*")), None, "alphabet");
        assert_eq!(decode_bytes("AA=A"), None, "data after padding");
        assert_eq!(decode_bytes("A==="), None, "three pads");
        assert_eq!(decode_bytes("AA==AAAA"), None, "padding before the end");
        assert_eq!(decode_bytes("éé"), None);
        assert_eq!(decode_vector(""), Some(vec![]));
    }

    #[test]
    fn a_score_from_stored_norms_is_the_cosine() {
        let a = embed("queues deliver at least once", 64);
        let b = embed("at least once delivery", 64);
        let s = cosine_normed(&a, norm(&a), &b, norm(&b));
        assert_eq!(s.to_bits(), cosine(&a, &b).to_bits());
        assert_eq!(cosine_normed(&a, norm(&a), &[0.0; 64], 0.0), 0.0);
    }

    #[test]
    fn the_first_pass_approximates_the_cosine() {
        let q = embed("queues deliver at least once", 384);
        let docs = [
            "Cloudflare Queues deliver every message at least once.",
            "A consumer must be idempotent.",
            "Bananas are yellow.",
        ];
        for d in docs {
            let v: Vec<f32> = embed(d, 384).iter().map(|x| x * 3.0).collect();
            let (factor, codes) = quantize(&v);
            let bytes: Vec<u8> = codes.iter().map(|c| *c as u8).collect();
            let mut approx = 0.0;
            for dim in query_dims(&q, 384) {
                let mut acc = [0.0f32];
                accumulate(&mut acc, q[dim], &bytes[dim..=dim]);
                approx += acc[0];
            }
            let approx = approx * factor / norm(&q);
            let exact = cosine(&q, &v);
            assert!((approx - exact).abs() < 0.01, "{d}: {approx} vs {exact}");
        }
        assert_eq!(quantize(&[0.0, 0.0]), (0.0, vec![0, 0]));
        assert_eq!(quantize(&[0.5, -1.0]).1, vec![64, -127]);
    }

    #[test]
    fn a_query_reads_its_largest_dimensions() {
        let q = [0.0, 0.5, -0.9, 0.0, 0.1, -0.5];
        assert_eq!(query_dims(&q, 10), vec![1, 2, 4, 5]);
        assert_eq!(query_dims(&q, 2), vec![1, 2], "ties: the lower first");
        assert_eq!(query_dims(&q, 0), Vec::<usize>::new());
        assert_eq!(query_dims(&[f32::NAN, 1.0], 2), vec![1]);
    }
}
