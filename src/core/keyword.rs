//! STAND-IN (replaced by the keyword module being written on h3-keyword-core).
pub fn is_unspaced(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30ff | 0x3400..=0x9fff | 0xf900..=0xfaff | 0xff66..=0xff9f | 0x3005 | 0x3006 | 0x3007)
}
pub fn index_terms(text: &str) -> Option<String> {
    if !text.chars().any(is_unspaced) {
        return None;
    }
    let mut out = String::new();
    for c in text.chars() {
        if is_unspaced(c) {
            out.push(' ');
            out.push(c);
            out.push(' ');
        } else {
            out.push(c);
        }
    }
    Some(out)
}
pub fn match_expression(query: &str, phrases_max: usize) -> Option<String> {
    let mut phrases: Vec<String> = Vec::new();
    for term in query.split_whitespace() {
        if !term.chars().any(char::is_alphanumeric) {
            continue;
        }
        let t = index_terms(term).unwrap_or_else(|| term.to_string());
        phrases.push(format!("\"{}\"", t.replace('"', "\"\"")));
    }
    phrases.dedup();
    phrases.truncate(phrases_max);
    (!phrases.is_empty()).then(|| phrases.join(" OR "))
}
pub fn snippet(text: &str, _query: &str, chars_max: usize) -> String {
    text.chars().take(chars_max).collect()
}
pub fn fuse(lists: &[(f64, &[String])], k: f64) -> Vec<(String, f64)> {
    let mut acc: std::collections::BTreeMap<String, (f64, usize)> = Default::default();
    for (w, list) in lists {
        let mut seen = std::collections::BTreeSet::new();
        for (i, id) in list.iter().enumerate() {
            if !seen.insert(id) {
                continue;
            }
            let e = acc.entry(id.clone()).or_insert((0.0, usize::MAX));
            e.0 += w / (k + (i + 1) as f64);
            e.1 = e.1.min(i + 1);
        }
    }
    let mut v: Vec<(String, f64, usize)> = acc.into_iter().map(|(id, (s, r))| (id, s, r)).collect();
    v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.2.cmp(&b.2)).then(a.0.cmp(&b.0)));
    v.into_iter().map(|(id, s, _)| (id, s)).collect()
}
