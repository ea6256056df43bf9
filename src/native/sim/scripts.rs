//! Scripts: the random script of a seed and the case it runs
//! ([`case_for_seed`], [`run_seed`]), and the fixed flows the exhaustive
//! enumeration faults at every port call ([`flow`], [`run_flow`],
//! [`count_calls`]).
//!
//! May import every other room of `sim/`.

use super::executor::{run, Mode, RunReport};
use super::faults::{FaultPlan, Outage, Port, Sched};
use super::rng::Rng;
use super::world::{sim_config_for_seed, tenants, DocClient, Op, Operator, Put, Script, Violation};
use super::wrappers::QUEUE_MAX_RETRIES;
use super::T0;
use crate::config::Config;
use crate::pipeline::bugs::Bugs;

/// One seed's case: the script, the configuration and the faults.
pub struct Case {
    pub script: Script,
    pub cfg: Config,
    pub plan: FaultPlan,
}

/// Random faults per mille of port calls, in most cases.
pub const RANDOM_FAULTS_PER_MILLE: u64 = 60;
/// In the cases with the production retry policy or a redrive, where a
/// job may really fail: rare enough that none fails but by the outage.
const RARE_FAULTS_PER_MILLE: u64 = 10;

/// The case a random seed runs.
pub fn case_for_seed(seed: u64) -> Case {
    let script = random_script(seed);
    let mut cfg = sim_config_for_seed(seed);
    let mut per_mille = RANDOM_FAULTS_PER_MILLE;
    if script.outage.is_some() {
        // Retries of a job a few minutes apart: an outage of under an hour
        // fits in its attempts (the production policy, below, has a window).
        cfg.retry_max_delay_seconds = 300;
    }
    if script.operator == Operator::Redrive {
        // Jobs give up a minute into the outage.
        cfg.job_retry_window_seconds = 60;
        per_mille = RARE_FAULTS_PER_MILLE;
    } else if script.outage.is_some() && seed.is_multiple_of(3) {
        // The production retry policy: a job outlives an outage shorter
        // than its window (an hour), with capped exponential backoff.
        let d = Config::default();
        cfg.job_attempts_max = d.job_attempts_max;
        cfg.job_retry_window_seconds = d.job_retry_window_seconds;
        cfg.retry_base_delay_seconds = d.retry_base_delay_seconds;
        cfg.retry_max_delay_seconds = d.retry_max_delay_seconds;
        per_mille = RARE_FAULTS_PER_MILLE;
    }
    Case {
        script,
        cfg,
        plan: FaultPlan::Random { per_mille },
    }
}

/// Runs the case of `seed` (the scheduler's faults seeded by it too).
pub fn run_seed(
    seed: u64,
    bugs: Bugs,
    verbose: bool,
) -> (Case, Sched, Result<RunReport, Violation>) {
    let case = case_for_seed(seed);
    let sched = Sched::new(seed, case.plan.clone());
    sched.verbose.set(verbose);
    let result = run(&case.script, &case.cfg, bugs, &sched, Mode::Random);
    (case, sched, result)
}

/// The word pools of the texts, one per tenant of [`tenants`] (in that
/// order), disjoint: no chunk of one tenant's texts can be taken for one
/// of the other's, so a search hit leaked across tenants is detectable
/// by its text (I11).
const WORDS: [[&str; 12]; 2] = [
    [
        "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
        "juliet", "kilo", "lima",
    ],
    [
        "mike", "november", "oscar", "papa", "quebec", "romeo", "sierra", "tango", "uniform",
        "victor", "whiskey", "xray",
    ],
];

/// A document of a random text: Markdown under a heading in a fifth of
/// them, with a `lang` in a third.
fn random_put(rng: &mut Rng, words: &[&str; 12]) -> Put {
    let body = text(rng, words);
    let markdown = rng.chance(200);
    let text = if markdown {
        let heading = words[rng.below(words.len() as u64) as usize];
        format!("# {heading}\n\n{body}")
    } else {
        body
    };
    let lang = rng
        .chance(333)
        .then(|| ["en", "ja"][rng.below(2) as usize].to_string());
    Put {
        text,
        markdown,
        lang,
    }
}

/// A text of a few sentences, from a word pool, long enough for several chunks.
fn text(rng: &mut Rng, words: &[&str; 12]) -> String {
    let first = words[rng.below(words.len() as u64) as usize];
    let n = 2 + rng.below(12);
    let mut s = String::from(first);
    for _ in 0..n {
        s.push(' ');
        s.push_str(words[rng.below(words.len() as u64) as usize]);
        if rng.chance(200) {
            s.push('.');
        }
    }
    s
}

/// A random script: 1–3 documents (4–5 for a redrive), each with 1–4
/// operations (puts and deletes), so versions of one document and a delete
/// run interleaved; an operator in some; an outage of one port in some; in
/// some, queues that give up on a message after a few deliveries (so that
/// live jobs' messages reach the dead-letter queue).
///
/// The documents alternate between the two [`tenants`] (the first one's
/// tenant drawn), each tenant numbering its own `doc-0`, `doc-1`, …: with
/// two documents or more both tenants write, and `doc-0` (with `doc-1` in
/// a redrive) is a document of each, with different texts (each tenant's
/// from its own word pool).
pub fn random_script(seed: u64) -> Script {
    let mut rng = Rng::new(seed.wrapping_mul(31).wrapping_add(7));
    let operator = match rng.below(100) {
        0..=29 => Operator::None,
        30..=37 => Operator::Reindex,
        38..=42 => Operator::ReindexTwice,
        43..=50 => Operator::ReindexCancel,
        51..=55 => Operator::ReindexPause,
        56..=62 => Operator::Rollback,
        63..=67 => Operator::ReindexAll,
        68..=71 => Operator::ReindexFilter,
        72..=76 => Operator::ReindexDocuments,
        77..=80 => Operator::IndexLoss,
        81..=84 => Operator::TenantLimits,
        85..=90 => Operator::Sync,
        _ => Operator::Redrive,
    };
    // A redrive has letters beyond its canaries (3), to send in batches.
    let docs = if operator == Operator::Redrive {
        4 + rng.below(2)
    } else {
        1 + rng.below(3)
    };
    let tenants = tenants();
    let first = rng.below(2) as usize;
    let mut numbered = [0usize; 2];
    let mut out = Vec::new();
    // Batches of several documents where the reference replays the
    // clients' operations themselves (not a document's recorded versions,
    // which would leave a batch's other documents out), and not by the
    // first client, which a race may join.
    let batches = matches!(
        operator,
        Operator::None
            | Operator::Reindex
            | Operator::ReindexTwice
            | Operator::ReindexCancel
            | Operator::ReindexPause
            | Operator::Rollback
    );
    for d in 0..docs as usize {
        let t = (first + d) % 2;
        out.push(DocClient {
            tenant: tenants[t].clone(),
            doc_id: format!("doc-{}", numbered[t]),
            ops: random_ops(&mut rng, operator, &WORDS[t], batches && d > 0),
        });
        numbered[t] += 1;
    }
    // A race in a fifth of the scripts whose operator does not write
    // documents itself: a second client writes the first document at the
    // same time as its own client (version numbers taken concurrently).
    let races = !matches!(operator, Operator::Sync | Operator::Redrive);
    if races && rng.chance(200) {
        let first_doc = out[0].clone();
        let t = if first_doc.tenant == tenants[0] { 0 } else { 1 };
        out.push(DocClient {
            ops: random_ops(&mut rng, operator, &WORDS[t], false),
            ..first_doc
        });
    }
    let outage = random_outage(&mut rng, operator);
    let queue_max_retries = if rng.chance(300) {
        3
    } else {
        QUEUE_MAX_RETRIES
    };
    // An index whose writes become visible late in a third of the
    // scripts: up to two minutes (Vectorize's p99).
    let index_delay_ms = if rng.chance(333) {
        rng.below(120_000) as i64
    } else {
        0
    };
    Script {
        docs: out,
        operator,
        outage,
        queue_max_retries,
        index_delay_ms,
    }
}

/// One document's operations: 1–4 (1 for a redrive, whose documents are
/// written once: any later version is a re-run), a put first (of a text
/// from `words`), then puts and deletes, some after a `Settle`.
fn random_ops(rng: &mut Rng, operator: Operator, words: &[&str; 12], batches: bool) -> Vec<Op> {
    let n = if operator == Operator::Redrive {
        1
    } else {
        1 + rng.below(4)
    };
    let mut ops = Vec::new();
    for i in 0..n {
        if i > 0 && rng.chance(300) {
            ops.push(Op::Settle);
        }
        if i > 0 && rng.chance(250) {
            ops.push(Op::Delete);
        } else if batches && rng.chance(150) {
            let n = 2 + rng.below(2);
            ops.push(Op::Batch((0..n).map(|_| random_put(rng, words)).collect()));
        } else {
            ops.push(Op::Put(random_put(rng, words)));
        }
    }
    ops
}

/// The outage of a script: the embedder's, 30–60 minutes from the start,
/// for a redrive; else, in a quarter of the other scripts, one port's, starting
/// in the first 10 minutes and lasting 1–55 minutes.
fn random_outage(rng: &mut Rng, operator: Operator) -> Option<Outage> {
    let minute = 60_000;
    if operator == Operator::Redrive {
        Some(Outage {
            port: Port::Embed,
            from_ms: T0,
            until_ms: T0 + (30 + rng.below(30) as i64) * minute,
        })
    } else if rng.chance(250) {
        let port = Port::ALL[rng.below(4) as usize];
        let from_ms = T0 + rng.below(10 * minute as u64) as i64;
        // Under an hour (the production retry window), with a margin.
        let until_ms = from_ms + minute + rng.below(54 * minute as u64) as i64;
        Some(Outage {
            port,
            from_ms,
            until_ms,
        })
    } else {
        None
    }
}

/// The script of flow `name`, one of [`FLOWS`]: the flows the exhaustive
/// enumeration covers.
pub fn flow(name: &str) -> Script {
    let v1 =
        "alpha bravo charlie delta. echo foxtrot golf hotel. india juliet kilo lima alpha bravo"
            .to_string();
    let v2 = "kilo lima hotel. golf india. charlie echo delta".to_string();
    let ops = match name {
        "single" => vec![Op::Put(v1.into())],
        "update" => vec![Op::Put(v1.into()), Op::Settle, Op::Put(v2.into())],
        "delete" => vec![Op::Put(v1.into()), Op::Settle, Op::Delete],
        "overtake" => vec![Op::Put(v1.into()), Op::Put(v2.into())],
        "reindex" | "cancel" | "reindex-twice" | "pause" | "rollback" | "reindex-all" => {
            vec![Op::Put(v1.into()), Op::Settle, Op::Put(v2.into())]
        }
        "reindex-filter" => {
            let en = |text: String| {
                Op::Put(Put {
                    lang: Some("en".into()),
                    ..text.into()
                })
            };
            vec![en(v1), Op::Settle, en(v2)]
        }
        "reindex-document" | "index-loss" => vec![Op::Put(v1.into())],
        "tenant-limits" => return tenant_limits_flow(v1, v2),
        "sync" => return sync_flow(v1, v2),
        "redrive" => return redrive_flow(&v1, &v2),
        "race" => return race_flow(v1, v2),
        other => panic!("unknown flow {other}"),
    };
    // Two flows write as the created tenant, the others as `default`: the
    // other tenant's searches, views and jobs see nothing of them (I11).
    let [default, other] = tenants();
    let tenant = match name {
        "delete" | "overtake" => other,
        _ => default,
    };
    Script {
        operator: match name {
            "reindex" => Operator::Reindex,
            "reindex-twice" => Operator::ReindexTwice,
            "pause" => Operator::ReindexPause,
            "rollback" => Operator::Rollback,
            "cancel" => Operator::ReindexCancel,
            "reindex-all" => Operator::ReindexAll,
            "reindex-filter" => Operator::ReindexFilter,
            "reindex-document" => Operator::ReindexDocuments,
            "index-loss" => Operator::IndexLoss,
            _ => Operator::None,
        },
        ..Script::clients_of(vec![DocClient {
            tenant,
            doc_id: "doc".into(),
            ops,
        }])
    }
}

/// The `sync` flow: two documents of the `default` tenant, synced twice
/// (the second sync no longer sees `doc-b`, and deletes it).
fn sync_flow(v1: String, v2: String) -> Script {
    let tenant = crate::core::ids::TenantId::default_tenant();
    Script {
        operator: Operator::Sync,
        ..Script::clients_of(vec![
            DocClient {
                tenant: tenant.clone(),
                doc_id: "doc-a".into(),
                ops: vec![Op::Put(v1.into())],
            },
            DocClient {
                tenant,
                doc_id: "doc-b".into(),
                ops: vec![Op::Put(v2.into())],
            },
        ])
    }
}

/// The `redrive` flow: four documents of the `default` tenant written
/// during a 10-minute outage of the embedder, longer than the retry window
/// of [`flow_config`]: their jobs end `dead` and are dead-lettered; once
/// the embedder is back the operator redrives them (a canary of three,
/// then a batch) and every document must end indexed (R).
fn redrive_flow(v1: &str, v2: &str) -> Script {
    let tenant = crate::core::ids::TenantId::default_tenant();
    let texts = [
        v1,
        v2,
        "golf hotel india. juliet kilo lima",
        "delta echo. foxtrot alpha",
    ];
    Script {
        operator: Operator::Redrive,
        outage: Some(Outage {
            port: Port::Embed,
            from_ms: T0,
            until_ms: T0 + 10 * 60_000,
        }),
        ..Script::clients_of(
            texts
                .iter()
                .enumerate()
                .map(|(i, t)| DocClient {
                    tenant: tenant.clone(),
                    doc_id: format!("r-{i}"),
                    ops: vec![Op::Put(t.to_string().into())],
                })
                .collect(),
        )
    }
}

/// The `race` flow: two clients write one document of the `default`
/// tenant at the same time, v1 and v2 (the version numbers are taken
/// concurrently; `tests/sim.rs` also runs it with the second cutting in at
/// every port call of the first).
fn race_flow(v1: String, v2: String) -> Script {
    let writer = |text: String| DocClient {
        tenant: crate::core::ids::TenantId::default_tenant(),
        doc_id: "doc".into(),
        ops: vec![Op::Put(text.into())],
    };
    Script::clients_of(vec![writer(v1), writer(v2)])
}

/// The `tenant-limits` flow: the other tenant (one document at most, three
/// requests a minute, disabled at the start for a minute) writes two
/// documents, the second refused at its quota; the `default` tenant
/// writes one.
fn tenant_limits_flow(v1: String, v2: String) -> Script {
    let [default, other] = tenants();
    let client = |tenant: &crate::core::ids::TenantId, doc: &str, text: &String| DocClient {
        tenant: tenant.clone(),
        doc_id: doc.into(),
        ops: vec![Op::Put(text.clone().into())],
    };
    Script {
        operator: Operator::TenantLimits,
        ..Script::clients_of(vec![
            client(&other, "doc", &v1),
            client(&other, "doc-b", &v2),
            client(&default, "doc", &v2),
        ])
    }
}

/// The configuration flow `name` runs under, from `cfg`: the `redrive`
/// flow's jobs give up a minute into the outage (as a redrive seed's).
pub fn flow_config(name: &str, cfg: &Config) -> Config {
    match name {
        "redrive" => Config {
            job_retry_window_seconds: 60,
            ..cfg.clone()
        },
        _ => cfg.clone(),
    }
}

/// `single`: one version; `update`: v1 indexed, then v2 replaces it;
/// `delete`: v1 indexed, then deleted; `overtake`: v2 arrives before v1 ran;
/// `reindex`: an update during a backfill to a new generation; `cancel`:
/// the same backfill, cancelled by the operator; `reindex-twice`: the
/// same update while two identical reindex requests start at once; `sync`:
/// two documents synced into a source, then synced again without the
/// second, which the commit deletes; `redrive`: four jobs dead-lettered
/// by an outage, then redriven; `race`: two clients write one document at
/// once; `pause`: the update while the backfill is paused and resumed;
/// `rollback`: the update, the backfill's switch, then a rollback to
/// generation 1 and generation 2 retired; `reindex-all`, `reindex-filter`:
/// the update while a backfill of scope `all` (`filter`, `{"lang":
/// "en"}`) re-runs the document; `reindex-document`: one version, then its
/// reindex; `index-loss`: one version whose vector the index loses, then
/// cron's repair; `tenant-limits`: `tenant_limits_flow`. `delete` and
/// `overtake` write as the created tenant (`acme`), the others as
/// `default`.
pub const FLOWS: [&str; 17] = [
    "single",
    "update",
    "delete",
    "overtake",
    "reindex",
    "reindex-twice",
    "cancel",
    "sync",
    "redrive",
    "race",
    "pause",
    "rollback",
    "reindex-all",
    "reindex-filter",
    "reindex-document",
    "index-loss",
    "tenant-limits",
];

/// Runs a flow sequentially (the exhaustive enumeration's schedule).
pub fn run_flow(
    name: &str,
    cfg: &Config,
    bugs: Bugs,
    sched: &Sched,
) -> Result<RunReport, Violation> {
    run(
        &flow(name),
        &flow_config(name, cfg),
        bugs,
        sched,
        Mode::Sequential,
    )
}

/// How many port calls a fault-free run of a flow makes.
pub fn count_calls(name: &str, cfg: &Config, bugs: Bugs) -> u64 {
    let sched = Sched::new(0, FaultPlan::None);
    run_flow(name, cfg, bugs, &sched).expect("the fault-free flow holds every invariant");
    sched.calls.get()
}
