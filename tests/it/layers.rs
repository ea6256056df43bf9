//! The crate's dependencies point one way:
//! config, bugs, log ← core ← ports ← store ← pipeline, adapters ← api ← wasm, native, bin.
//! A module may name (`crate::x`, `use crate::x`) only modules of a lower
//! layer (and itself). Comments are not code; doc links are allowed.

use std::collections::BTreeMap;
use std::path::Path;

/// The layer of each top-level module of `src/`.
fn layer(module: &str) -> Option<u32> {
    Some(match module {
        "config" | "bugs" | "log" => 0,
        "core" => 1,
        "ports" => 2,
        "store" => 3,
        "pipeline" | "adapters" => 4,
        "api" => 5,
        "wasm" | "native" | "bin" | "lib" => 6,
        _ => return None,
    })
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The modules `line` names through `crate::`.
fn named(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("crate::") {
        let after = &rest[i + "crate::".len()..];
        let name: String = after
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.push(name);
        }
        rest = after;
    }
    out
}

#[test]
fn dependencies_point_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut all = Vec::new();
    files(&src, &mut all);
    let mut wrong: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut checked = 0;
    for path in &all {
        let rel = path.strip_prefix(&src).unwrap();
        let top = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_string();
        let Some(own) = layer(&top) else {
            panic!(
                "src/{} is in no layer: add its module to `layer`",
                rel.display()
            );
        };
        let text = std::fs::read_to_string(path).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            let code = code.split(" //").next().unwrap_or(code);
            for m in named(code) {
                if m == top || m == "self" {
                    continue;
                }
                match layer(&m) {
                    Some(l) if l < own => {}
                    _ => wrong
                        .entry(format!("src/{}", rel.display()))
                        .or_default()
                        .push(format!("line {}: crate::{m}", n + 1)),
                }
                checked += 1;
            }
        }
    }
    assert!(
        checked > 50,
        "the check read the crate's imports ({checked})"
    );
    assert!(wrong.is_empty(), "imports against the layers:\n{wrong:#?}");
}

#[test]
fn the_check_sees_an_upward_import() {
    assert_eq!(
        named("use crate::pipeline::Foo; let x = crate::store::sql::X;"),
        vec!["pipeline", "store"]
    );
    assert!(layer("store") < layer("pipeline"));
}
