//! The offline index (`adapters::local_index`, issue 36 item 6) on native
//! SQLite with its real migrations: exact below the threshold, its blocks
//! above it (recall against an exhaustive scan, one copy per ID, deletes,
//! namespaces, filters, limits), the write guard, and the upgrade of an
//! index written before migration 0003. After every step, the blocks are
//! checked against the rows (`consistent`).

use futures::executor::block_on;
use ingest_pipeline::adapters::local_index::{LocalIndex, LocalIndexTuning};
use ingest_pipeline::adapters::IndexLimits;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::core::local_embed::cosine;
use ingest_pipeline::core::vector_codes;
use ingest_pipeline::native::sim::Rng;
use ingest_pipeline::native::{SqliteDb, LOCAL_INDEX_MIGRATIONS};
use ingest_pipeline::ports::{
    Database, MetadataFilter, SqlValue, Stmt, VectorIndex, VectorMatch, VectorMetadata,
    VectorRecord,
};
use ingest_pipeline::store::sql;
use serde::Deserialize;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};

const DIMS: usize = 32;

fn limits() -> IndexLimits {
    IndexLimits {
        dimensions: DIMS,
        upsert_batch_max: 1000,
        delete_batch_max: 100,
        get_batch_max: 100,
        id_bytes_max: 64,
        top_k_max: 100,
        filter_bytes_max: 2048,
    }
}

/// Small blocks, so that a few hundred vectors span several.
fn tuning(exhaustive_max: usize) -> LocalIndexTuning {
    LocalIndexTuning {
        exhaustive_max,
        block_vectors: 64,
        query_dims_max: DIMS,
        rerank: 40,
        maintain_rows_max: 256,
    }
}

fn index(db: &SqliteDb, tuning: LocalIndexTuning) -> LocalIndex<&SqliteDb> {
    LocalIndex {
        db,
        limits: limits(),
        tuning,
        json_param_bytes_max: 20_000,
        reject_doc_prefix: None,
    }
}

fn record(id: &str, namespace: &str, doc: &str, values: Vec<f32>) -> VectorRecord {
    let mut metadata = VectorMetadata::new();
    metadata.insert("doc_id".into(), json!(doc));
    // From the ID's number: half the vectors have parity 1, one in 50 is rare.
    let n: usize = id.get(1..).and_then(|n| n.parse().ok()).unwrap_or(1);
    metadata.insert("parity".into(), json!(n % 2));
    metadata.insert("rare".into(), json!(n.is_multiple_of(50)));
    VectorRecord {
        id: id.into(),
        namespace: namespace.into(),
        values,
        metadata,
    }
}

fn gauss(rng: &mut Rng) -> f32 {
    let u1 = ((rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64).max(1e-12);
    let u2 = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
}

/// `n` vectors around `clusters` centres (noise about as large as a
/// centre), IDs `{prefix}{i:05}`, 10 per document.
fn clustered(
    rng: &mut Rng,
    n: usize,
    clusters: usize,
    prefix: &str,
    ns: &str,
) -> Vec<VectorRecord> {
    let centres: Vec<Vec<f32>> = (0..clusters)
        .map(|_| (0..DIMS).map(|_| gauss(rng)).collect())
        .collect();
    (0..n)
        .map(|i| {
            let c = &centres[rng.below(clusters as u64) as usize];
            let v = c.iter().map(|x| x + 0.7 * gauss(rng)).collect();
            record(&format!("{prefix}{i:05}"), ns, &format!("doc{}", i / 10), v)
        })
        .collect()
}

fn upsert_all(idx: &LocalIndex<&SqliteDb>, records: &[VectorRecord], batch: usize) {
    for b in records.chunks(batch) {
        block_on(idx.upsert(b)).unwrap();
    }
}

/// The exhaustive answer: every record of `ns` matching `filter`, by
/// cosine, ties by ID.
fn exhaustive(
    records: &[VectorRecord],
    q: &[f32],
    ns: &str,
    filter: &MetadataFilter,
    k: usize,
) -> Vec<VectorMatch> {
    let mut all: Vec<VectorMatch> = records
        .iter()
        .filter(|r| r.namespace == ns)
        .filter(|r| ingest_pipeline::adapters::filter_matches(&r.metadata, filter))
        .map(|r| VectorMatch {
            id: r.id.clone(),
            score: cosine(q, &r.values),
        })
        .collect();
    all.sort_by(|a, b| b.score.total_cmp(&a.score).then_with(|| a.id.cmp(&b.id)));
    all.truncate(k);
    all
}

fn query(
    idx: &LocalIndex<&SqliteDb>,
    q: &[f32],
    k: usize,
    ns: &str,
    filter: &MetadataFilter,
) -> Vec<VectorMatch> {
    block_on(idx.query(q, k, ns, filter)).unwrap()
}

#[derive(Deserialize)]
struct SlotRow {
    id: String,
    namespace: String,
    vec: String,
    norm: Option<f64>,
    slot: Option<i64>,
}

#[derive(Deserialize)]
struct Block {
    namespace: String,
    dim: i64,
    block: i64,
    codes: String,
}

#[derive(Deserialize)]
struct SpaceRow {
    namespace: String,
    vectors: i64,
    unplaced: i64,
    slots: i64,
}

fn rows<T: serde::de::DeserializeOwned>(db: &SqliteDb, sql: &'static str) -> Vec<T> {
    block_on(db.query(Stmt::new(sql, vec![]))).unwrap()
}

/// One slot of `s`'s blocks: free (factor -1) if no row holds it, else
/// the factor and codes of the row's values quantized; its block's rows of
/// the length the block holds.
fn check_slot(
    s: &SpaceRow,
    slot: i64,
    block_vectors: i64,
    blocks: &[Block],
    codes: &BTreeMap<(String, i64, i64), Vec<u8>>,
    holder: Option<&&SlotRow>,
) {
    let (block, at) = (slot / block_vectors, (slot % block_vectors) as usize);
    let len = (s.slots - block * block_vectors).min(block_vectors) as usize;
    let head = blocks
        .iter()
        .find(|b| b.namespace == s.namespace && b.block == block && b.dim == -1)
        .unwrap();
    let factors = vector_codes::decode_vector(&head.codes).unwrap();
    assert_eq!(factors.len(), len, "{}: block {block} length", s.namespace);
    let Some(r) = holder else {
        assert_eq!(
            factors[at],
            vector_codes::FREE,
            "{}: slot {slot} free",
            s.namespace
        );
        return;
    };
    let values = vector_codes::decode_vector(&r.vec).unwrap();
    let (factor, want) = vector_codes::quantize(&values);
    assert_eq!(factors[at], factor, "{}: slot {slot} factor", r.id);
    for (d, code) in want.iter().enumerate() {
        let row = &codes[&(s.namespace.clone(), block, d as i64)];
        assert_eq!(row.len(), len);
        assert_eq!(row[at] as i8, *code, "{}: dim {d}", r.id);
    }
}

/// The blocks hold exactly the rows: each namespace's counts are right;
/// a slot is live (factor ≥ 0) if and only if one row holds it, and then
/// its codes are the row's values quantized; every block row has the
/// length its block holds.
fn consistent(db: &SqliteDb, block_vectors: i64) {
    let vectors: Vec<SlotRow> = rows(db, "SELECT id, namespace, vec, norm, slot FROM vectors");
    let blocks: Vec<Block> = rows(db, "SELECT namespace, dim, block, codes FROM vector_blocks");
    let spaces: Vec<SpaceRow> = rows(
        db,
        "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
    );
    let mut held: BTreeMap<(String, i64), &SlotRow> = BTreeMap::new();
    for r in &vectors {
        if let Some(s) = r.slot {
            assert!(
                held.insert((r.namespace.clone(), s), r).is_none(),
                "slot held twice"
            );
        }
    }
    let codes: BTreeMap<(String, i64, i64), Vec<u8>> = blocks
        .iter()
        .map(|b| {
            (
                (b.namespace.clone(), b.block, b.dim),
                vector_codes::decode_bytes(&b.codes).unwrap(),
            )
        })
        .collect();
    for s in &spaces {
        let mine: Vec<&SlotRow> = vectors
            .iter()
            .filter(|r| r.namespace == s.namespace)
            .collect();
        assert_eq!(s.vectors, mine.len() as i64, "{}: vectors", s.namespace);
        let unplaced = mine.iter().filter(|r| r.slot.is_none()).count() as i64;
        assert_eq!(s.unplaced, unplaced, "{}: unplaced", s.namespace);
        for slot in 0..s.slots {
            check_slot(
                s,
                slot,
                block_vectors,
                &blocks,
                &codes,
                held.get(&(s.namespace.clone(), slot)),
            );
        }
        assert!(
            mine.iter().all(|r| r.slot.is_none_or(|x| x < s.slots)),
            "{}: slot past the blocks",
            s.namespace
        );
    }
    assert!(
        vectors
            .iter()
            .filter(|r| r.slot.is_some())
            .all(|r| r.norm.is_some()),
        "a placed row is base64"
    );
}

#[test]
fn local_index_is_exact_below_the_threshold() {
    let db = SqliteDb::local_index();
    let idx = index(&db, tuning(10_000));
    let mut rng = Rng::new(1);
    let records = clustered(&mut rng, 300, 6, "v", "acme");
    upsert_all(&idx, &records, 70);
    let none = MetadataFilter::new();
    for _ in 0..20 {
        let q: Vec<f32> = (0..DIMS).map(|_| gauss(&mut rng)).collect();
        // The same IDs and the same scores, bit for bit, as a scan.
        assert_eq!(
            query(&idx, &q, 10, "acme", &none),
            exhaustive(&records, &q, "acme", &none, 10)
        );
    }
    let blocks: Vec<Block> = rows(
        &db,
        "SELECT namespace, dim, block, codes FROM vector_blocks",
    );
    assert!(blocks.is_empty(), "no blocks below the threshold");
    // Values come back exactly.
    let got = block_on(idx.get_by_ids(&["v00007".into()])).unwrap();
    assert_eq!(got, vec![records[7].clone()]);
    consistent(&db, 64);
}

#[test]
fn local_index_finds_the_nearest_through_its_blocks() {
    let db = SqliteDb::local_index();
    let idx = index(&db, tuning(100));
    let mut rng = Rng::new(2);
    let records = clustered(&mut rng, 1500, 30, "v", "acme");
    upsert_all(&idx, &records, 97);
    let spaces: Vec<SpaceRow> = rows(
        &db,
        "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
    );
    assert_eq!(
        (spaces[0].vectors, spaces[0].unplaced, spaces[0].slots),
        (1500, 0, 1500)
    );
    consistent(&db, 64);
    let none = MetadataFilter::new();
    let (mut found, mut wanted) = (0, 0);
    for i in 0..50 {
        // Queries near the data: a record's vector, moved a little.
        let q: Vec<f32> = records[i * 29]
            .values
            .iter()
            .map(|x| x + 0.3 * gauss(&mut rng))
            .collect();
        let got = query(&idx, &q, 10, "acme", &none);
        let want = exhaustive(&records, &q, "acme", &none, 10);
        // Scores are exact: each result's is its cosine.
        for m in &got {
            let r = records.iter().find(|r| r.id == m.id).unwrap();
            assert_eq!(m.score.to_bits(), cosine(&q, &r.values).to_bits());
        }
        let ids: BTreeSet<&str> = got.iter().map(|m| m.id.as_str()).collect();
        found += want.iter().filter(|m| ids.contains(m.id.as_str())).count();
        wanted += want.len();
    }
    let recall = found as f64 / wanted as f64;
    assert!(recall >= 0.95, "recall@10 {recall}");
    // With every dimension and every candidate read, the answer is exact.
    let all = index(
        &db,
        LocalIndexTuning {
            rerank: 1500,
            ..tuning(100)
        },
    );
    let q: Vec<f32> = (0..DIMS).map(|_| gauss(&mut rng)).collect();
    assert_eq!(
        query(&all, &q, 20, "acme", &none),
        exhaustive(&records, &q, "acme", &none, 20)
    );
}

#[test]
fn local_index_keeps_one_copy_of_an_id_wherever_it_moves() {
    let db = SqliteDb::local_index();
    let idx = index(&db, tuning(50));
    let mut rng = Rng::new(3);
    let mut records = clustered(&mut rng, 200, 5, "v", "acme");
    records.extend(clustered(&mut rng, 120, 5, "w", "other"));
    upsert_all(&idx, &records, 64);
    consistent(&db, 64);
    let count = |id: &str| -> i64 {
        let r: Vec<SlotRow> = rows(&db, "SELECT id, namespace, vec, norm, slot FROM vectors");
        r.iter().filter(|r| r.id == id).count() as i64
    };
    let none = MetadataFilter::new();
    let slot_of = |id: &str| {
        let r: Vec<SlotRow> = rows(&db, "SELECT id, namespace, vec, norm, slot FROM vectors");
        r.into_iter().find(|r| r.id == id).and_then(|r| r.slot)
    };
    // Unchanged, same namespace: the same slot.
    let before = slot_of("v00010");
    block_on(idx.upsert(&records[10..11])).unwrap();
    assert_eq!(slot_of("v00010"), before);
    // Changed values: a new slot, the old one freed, found by its new values.
    let moved = record(
        "v00010",
        "acme",
        "doc1",
        records[150].values.iter().map(|x| -x).collect(),
    );
    block_on(idx.upsert(std::slice::from_ref(&moved))).unwrap();
    assert_ne!(slot_of("v00010"), before);
    assert_eq!(count("v00010"), 1);
    consistent(&db, 64);
    let hits = query(&idx, &moved.values, 5, "acme", &none);
    assert_eq!(hits[0].id, "v00010");
    assert_eq!(hits.iter().filter(|m| m.id == "v00010").count(), 1);
    // To another namespace: gone from the first, found in the second, once.
    let away = record("v00010", "other", "doc1", moved.values.clone());
    block_on(idx.upsert(&[away.clone(), away.clone()])).unwrap();
    assert_eq!(count("v00010"), 1);
    consistent(&db, 64);
    assert!(query(&idx, &moved.values, 100, "acme", &none)
        .iter()
        .all(|m| m.id != "v00010"));
    assert_eq!(
        query(&idx, &moved.values, 1, "other", &none)[0].id,
        "v00010"
    );
}

#[test]
fn local_index_deletes_free_slots_that_new_vectors_reuse() {
    let db = SqliteDb::local_index();
    let idx = index(&db, tuning(50));
    let mut rng = Rng::new(4);
    let records = clustered(&mut rng, 256, 4, "v", "acme");
    upsert_all(&idx, &records, 64);
    let ids: Vec<String> = records[64..128].iter().map(|r| r.id.clone()).collect();
    block_on(idx.delete_by_ids(&ids[..50])).unwrap();
    block_on(idx.delete_by_ids(&ids[50..])).unwrap();
    consistent(&db, 64);
    let none = MetadataFilter::new();
    for r in &records[64..128] {
        assert!(query(&idx, &r.values, 10, "acme", &none)
            .iter()
            .all(|m| m.id != r.id));
    }
    assert!(block_on(idx.get_by_ids(&ids[..3])).unwrap().is_empty());
    // Deleting what is not there changes nothing.
    block_on(idx.delete_by_ids(&ids[..3])).unwrap();
    // Block 1 is now all free: the next vectors go there, not after slot 256.
    let fresh = clustered(&mut rng, 40, 4, "n", "acme");
    block_on(idx.upsert(&fresh)).unwrap();
    let spaces: Vec<SpaceRow> = rows(
        &db,
        "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
    );
    assert_eq!((spaces[0].vectors, spaces[0].slots), (232, 256));
    consistent(&db, 64);
    assert_eq!(
        query(&idx, &fresh[7].values, 1, "acme", &none)[0].id,
        fresh[7].id
    );
}

#[test]
fn local_index_keeps_namespaces_and_filters_apart() {
    let db = SqliteDb::local_index();
    let idx = index(&db, tuning(50));
    let mut rng = Rng::new(5);
    let mut records = clustered(&mut rng, 300, 5, "v", "acme");
    records.extend(clustered(&mut rng, 300, 5, "w", "other"));
    upsert_all(&idx, &records, 100);
    consistent(&db, 64);
    for i in 0..10 {
        let q = records[i * 31].values.clone();
        for ns in ["acme", "other", "nobody"] {
            let got = query(&idx, &q, 10, ns, &MetadataFilter::new());
            assert!(got
                .iter()
                .all(|m| records.iter().any(|r| r.id == m.id && r.namespace == ns)));
            assert_eq!(got.is_empty(), ns == "nobody");
        }
        // A metadata filter: only matches, as many as asked (widening past
        // the first candidates), the best of them.
        let mut parity = MetadataFilter::new();
        parity.insert("parity".into(), json!(0));
        parity.insert("doc_id".into(), json!(format!("doc{}", i)));
        let got = query(&idx, &q, 5, "acme", &parity);
        assert_eq!(
            got,
            exhaustive(&records, &q, "acme", &parity, 5),
            "doc and parity"
        );
        let mut doc = MetadataFilter::new();
        doc.insert("doc_id".into(), json!("doc3"));
        assert_eq!(
            query(&idx, &q, 4, "other", &doc),
            exhaustive(&records, &q, "other", &doc, 4)
        );
    }
    // A filter that one vector in 50 matches: the first candidates hold
    // too few, so more are read, round after round, until three match.
    let mut rare = MetadataFilter::new();
    rare.insert("rare".into(), json!(true));
    for i in 0..10 {
        let q = records[i * 17 + 1].values.clone();
        let got = query(&idx, &q, 3, "acme", &rare);
        assert_eq!(got, exhaustive(&records, &q, "acme", &rare, 3));
    }
}

#[test]
fn local_index_still_refuses_what_vectorize_refuses() {
    let db = SqliteDb::local_index();
    let idx = LocalIndex {
        limits: IndexLimits {
            upsert_batch_max: 3,
            delete_batch_max: 2,
            get_batch_max: 2,
            ..limits()
        },
        ..index(&db, tuning(2))
    };
    let mut rng = Rng::new(6);
    let records = clustered(&mut rng, 3, 1, "v", "acme");
    block_on(idx.upsert(&records)).unwrap();
    let code = |r: Result<(), ingest_pipeline::ports::PortError>| {
        let e = r.unwrap_err();
        assert_eq!(e.bucket, FailureBucket::IndexRejected);
        e.code
    };
    let four = clustered(&mut rng, 4, 1, "x", "acme");
    assert_eq!(code(block_on(idx.upsert(&four))), "upsert_batch_too_large");
    let long = record(&"x".repeat(65), "acme", "d", vec![0.5; DIMS]);
    assert_eq!(code(block_on(idx.upsert(&[long]))), "vector_id_length");
    assert_eq!(
        code(block_on(idx.upsert(&[record(
            "a",
            "acme",
            "d",
            vec![0.5; 3]
        )]))),
        "dimensions"
    );
    let mut big = record("a", "acme", "d", vec![0.5; DIMS]);
    big.metadata
        .insert("blob".into(), json!("x".repeat(10 * 1024)));
    assert_eq!(code(block_on(idx.upsert(&[big]))), "metadata_too_large");
    let mut bare = record("a", "acme", "d", vec![0.5; DIMS]);
    bare.metadata.remove("doc_id");
    assert_eq!(code(block_on(idx.upsert(&[bare]))), "metadata_doc_id");
    let ids: Vec<String> = vec!["a".into(), "b".into(), "c".into()];
    assert_eq!(
        code(block_on(idx.delete_by_ids(&ids))),
        "delete_batch_too_large"
    );
    let q = vec![0.5; DIMS];
    let none = MetadataFilter::new();
    for (k, v) in [(0, q.clone()), (101, q.clone()), (5, vec![0.5; 3])] {
        let e = block_on(idx.query(&v, k, "acme", &none)).unwrap_err();
        assert_eq!(e.bucket, FailureBucket::IndexRejected);
    }
    assert_eq!(
        block_on(idx.get_by_ids(&ids)).unwrap_err().code,
        "get_batch_too_large"
    );
    // Nothing refused was written; what was accepted is in blocks.
    consistent(&db, 64);
    let spaces: Vec<SpaceRow> = rows(
        &db,
        "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
    );
    assert_eq!((spaces[0].vectors, spaces[0].slots), (3, 3));
}

#[test]
fn local_index_guard_fails_a_write_that_another_came_between() {
    let db = SqliteDb::local_index();
    let guard = |rev: i64| {
        Stmt::new(
            sql::LOCAL_INDEX_GUARD,
            vec!["acme".into(), SqlValue::Int(rev)],
        )
    };
    let slots = |n: i64| {
        Stmt::new(
            sql::LOCAL_INDEX_SLOTS_SET,
            vec!["acme".into(), SqlValue::Int(n)],
        )
    };
    // A namespace never written is read as revision 0.
    block_on(db.batch(vec![guard(0), slots(5)])).unwrap();
    let spaces: Vec<SpaceRow> = rows(
        &db,
        "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
    );
    assert_eq!(spaces[0].slots, 5);
    // Another write moved it on to 1: a batch that read 0 fails whole.
    let e = block_on(db.batch(vec![guard(0), slots(9)])).unwrap_err();
    assert_eq!(e.code, "db_constraint");
    let spaces: Vec<SpaceRow> = rows(
        &db,
        "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
    );
    assert_eq!(spaces[0].slots, 5, "nothing of the failed batch");
    block_on(db.batch(vec![guard(1), slots(9)])).unwrap();
}

/// The statements of a migration, one by one (a trigger's body whole).
fn statements(migration: &'static str) -> Vec<&'static str> {
    let mut out = Vec::new();
    let mut cur = String::new();
    // This migration has no `--` inside a string: a comment runs to the line's end.
    for line in migration
        .lines()
        .map(|l| l.split("--").next().unwrap_or(""))
    {
        if line.trim().is_empty() {
            continue;
        }
        cur.push_str(line);
        cur.push('\n');
        let in_trigger = cur.trim_start().starts_with("CREATE TRIGGER");
        if line.trim_end().ends_with(';') && (!in_trigger || line.trim() == "END;") {
            out.push(&*Box::leak(std::mem::take(&mut cur).into_boxed_str()));
        }
    }
    out
}

#[test]
fn local_index_written_before_migration_0003_is_read_then_placed() {
    // An index as the previous release left it: JSON text, no slots.
    let db = SqliteDb::open(&LOCAL_INDEX_MIGRATIONS[..2]);
    let mut rng = Rng::new(7);
    let records = clustered(&mut rng, 700, 8, "v", "acme");
    for r in &records {
        let row = json!([{
            "id": r.id, "namespace": r.namespace, "doc_id": r.metadata["doc_id"],
            "vec": serde_json::to_string(&r.values).unwrap(),
            "metadata": serde_json::to_string(&r.metadata).unwrap(),
        }]);
        let old = "INSERT INTO vectors (id, namespace, doc_id, vec, metadata) \
                   SELECT json_extract(value, '$.id'), json_extract(value, '$.namespace'), json_extract(value, '$.doc_id'), json_extract(value, '$.vec'), json_extract(value, '$.metadata') FROM json_each(?1)";
        block_on(db.execute(Stmt::new(old, vec![row.to_string().into()]))).unwrap();
    }
    let (name, migration) = LOCAL_INDEX_MIGRATIONS[2];
    assert_eq!(name, "0003_compact_vectors.sql");
    let upgrade: Vec<Stmt> = statements(migration)
        .into_iter()
        .map(|s| Stmt::new(s, vec![]))
        .collect();
    block_on(db.batch(upgrade)).unwrap();
    consistent(&db, 64);
    // Readable as they are: values exact, queries exact while not placed.
    let exhaustive_idx = index(&db, tuning(10_000));
    assert_eq!(
        block_on(exhaustive_idx.get_by_ids(&["v00003".into()])).unwrap(),
        vec![records[3].clone()]
    );
    let none = MetadataFilter::new();
    let q = records[5].values.clone();
    assert_eq!(
        query(&exhaustive_idx, &q, 10, "acme", &none),
        exhaustive(&records, &q, "acme", &none, 10)
    );
    // Past the threshold, each query places a bounded number (256 here)
    // and answers; three place them all, as base64.
    let idx = index(&db, tuning(100));
    for placed in [256, 512, 700] {
        let got = query(&idx, &q, 10, "acme", &none);
        assert_eq!(got[0].id, "v00005");
        let spaces: Vec<SpaceRow> = rows(
            &db,
            "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
        );
        assert_eq!((spaces[0].vectors, spaces[0].unplaced), (700, 700 - placed));
        consistent(&db, 64);
    }
    assert_eq!(
        block_on(idx.get_by_ids(&["v00003".into()])).unwrap(),
        vec![records[3].clone()]
    );
    let mut found = 0;
    for i in 0..30 {
        let q = records[i * 23].values.clone();
        let want = exhaustive(&records, &q, "acme", &none, 10);
        let got: BTreeSet<String> = query(&idx, &q, 10, "acme", &none)
            .into_iter()
            .map(|m| m.id)
            .collect();
        found += want.iter().filter(|m| got.contains(&m.id)).count();
    }
    assert!(found as f64 / 300.0 >= 0.95, "{found} of 300");
}

/// A database on which another write lands between a write's reads and its
/// batch: the first batch that checks a revision runs `rival`'s upsert of
/// `pending` first.
struct Racing<'a> {
    db: &'a SqliteDb,
    rival: LocalIndex<&'a SqliteDb>,
    pending: std::cell::RefCell<Vec<VectorRecord>>,
}

impl Database for Racing<'_> {
    async fn query_billed<T: serde::de::DeserializeOwned>(
        &self,
        stmt: Stmt,
    ) -> Result<(Vec<T>, ingest_pipeline::ports::Rows), ingest_pipeline::ports::PortError> {
        self.db.query_billed(stmt).await
    }
    async fn execute_billed(
        &self,
        stmt: Stmt,
    ) -> Result<(u64, ingest_pipeline::ports::Rows), ingest_pipeline::ports::PortError> {
        self.db.execute_billed(stmt).await
    }
    async fn batch_billed(
        &self,
        stmts: Vec<Stmt>,
    ) -> Result<(Vec<u64>, ingest_pipeline::ports::Rows), ingest_pipeline::ports::PortError> {
        let guarded = stmts
            .first()
            .is_some_and(|s| s.sql == sql::LOCAL_INDEX_GUARD);
        let rival = std::mem::take(&mut *self.pending.borrow_mut());
        if guarded && !rival.is_empty() {
            self.rival.upsert(&rival).await?;
        }
        self.db.batch_billed(stmts).await
    }
}

#[test]
fn local_index_write_that_another_came_between_starts_again() {
    let db = SqliteDb::local_index();
    let idx = index(&db, tuning(50));
    let mut rng = Rng::new(8);
    let records = clustered(&mut rng, 150, 4, "v", "acme");
    upsert_all(&idx, &records, 75);
    // Both append to the last block: without the guard, the later batch
    // would write that block's rows without the rival's vectors.
    let mine = clustered(&mut rng, 20, 4, "m", "acme");
    let theirs = clustered(&mut rng, 20, 4, "t", "acme");
    let racing = Racing {
        db: &db,
        rival: index(&db, tuning(50)),
        pending: std::cell::RefCell::new(theirs.clone()),
    };
    let raced = LocalIndex {
        db: &racing,
        limits: limits(),
        tuning: tuning(50),
        json_param_bytes_max: 20_000,
        reject_doc_prefix: None,
    };
    block_on(raced.upsert(&mine)).unwrap();
    assert!(racing.pending.borrow().is_empty(), "the rival wrote first");
    consistent(&db, 64);
    let none = MetadataFilter::new();
    for r in mine.iter().chain(&theirs) {
        assert_eq!(query(&idx, &r.values, 1, "acme", &none)[0].id, r.id);
    }
    // A delete that another write came between starts again too.
    racing
        .pending
        .replace(clustered(&mut rng, 5, 4, "r", "acme"));
    let gone: Vec<String> = mine.iter().take(10).map(|r| r.id.clone()).collect();
    block_on(raced.delete_by_ids(&gone)).unwrap();
    assert!(racing.pending.borrow().is_empty());
    consistent(&db, 64);
    let spaces: Vec<SpaceRow> = rows(
        &db,
        "SELECT namespace, vectors, unplaced, slots FROM vector_spaces",
    );
    assert_eq!(spaces[0].vectors, 150 + 20 + 20 + 5 - 10);
}
