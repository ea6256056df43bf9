//! The reference run of I6: the same clients' writes, each as its tenant
//! (in a world with the same tenants), fault-free and sequential, with the outcome of what the operator did (a reindex that
//! switched, or a cancelled one), run to quiescence; its canonical dump is
//! what a faulty run's ledger must equal. Cached per script, reference,
//! configuration and bugs (a seed's case repeats across runs).
//!
//! May import `faults`, `wrappers`, `world`, the invariants' constants and
//! the oracle; not the actors or the executor.

use super::faults::{FaultPlan, Sched};
use super::invariants::QUIESCENCE_TICKS_MAX;
use super::world::{reindex_config, Op, Reference, Script, Simulated, World};
use super::wrappers::{Broker, Held};
use crate::config::Config;
use crate::core::chunk::ContentType;
use crate::native::oracle;
use crate::pipeline::bugs::Bugs;
use crate::pipeline::IntakeItem;
use futures::executor::block_on;
use std::cell::RefCell;
use std::collections::BTreeMap;

/// The canonical dump of a fault-free, sequential run of `script`'s clients
/// with the `reference` outcome.
pub(super) fn reference_dump(
    script: &Script,
    reference: Reference,
    cfg: &Config,
    bugs: Bugs,
) -> String {
    thread_local! {
        static CACHE: RefCell<BTreeMap<String, String>> =
            const { RefCell::new(BTreeMap::new()) };
    }
    let key = format!("{:?}{reference:?}{cfg:?}{bugs:?}", script.docs);
    if let Some(d) = CACHE.with(|c| c.borrow().get(&key).cloned()) {
        return d;
    }
    let w = World::new(cfg.clone(), bugs);
    let sched = Sched::new(0, FaultPlan::None);
    let p = w.simulated(&sched);
    write_in_order(&w, &sched, &p, script);
    if matches!(reference, Reference::Reindexed | Reference::RolledBack) {
        let p2 = w.simulated_with(reindex_config(cfg), &sched);
        block_on(p2.start_backfill(&crate::pipeline::BackfillScope::Config, 1))
            .expect("no fault")
            .expect("the backfill starts");
    }
    if reference == Reference::Synced {
        quiesce(&w, &sched, &p, cfg);
        block_on(super::actors::sync_source(&p, &sched, &script.docs));
    }
    quiesce(&w, &sched, &p, cfg);
    if reference == Reference::RolledBack {
        let p2 = w.simulated_with(reindex_config(cfg), &sched);
        block_on(p2.activate_generation(1))
            .expect("no fault")
            .expect("generation 1 is complete");
        block_on(p2.retire_generation(2))
            .expect("no fault")
            .expect("generation 2 retires");
        quiesce(&w, &sched, &p, cfg);
    }
    if reference == Reference::Cancelled {
        record_cancelled_generation(&w, cfg);
    }
    let d = oracle::canonical_dump(&w.db);
    CACHE.with(|c| c.borrow_mut().insert(key, d.clone()));
    d
}

/// `script` with the clients of a document several of them wrote at once
/// (a race) replaced by one client writing, in order, the versions the run
/// recorded: whichever way the race went, the rest of the ledger must be
/// what a fault-free run of those writes leaves (I6). That the versions
/// are what the clients sent and were told is I16's.
pub(super) fn serialized(script: &Script, w: &World) -> Script {
    let log = oracle::version_log(&w.db);
    let mut writers: BTreeMap<String, usize> = BTreeMap::new();
    for c in &script.docs {
        *writers.entry(c.key().as_str().to_string()).or_default() += 1;
    }
    // With quotas, which writes were refused depends on their order: every
    // document is replayed from the ledger (the reference has no quotas).
    if script.operator == super::world::Operator::TenantLimits {
        for c in &script.docs {
            writers.insert(c.key().as_str().to_string(), 2);
        }
    }
    // A document with a re-run (a version with the content of the one
    // before it) is replayed from the ledger too, the re-run as one.
    for pair in log.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        if a.0 == b.0 && a.2 == b.2 && !b.3 {
            writers.insert(b.0.clone(), 2);
        }
    }
    let sent = super::world::sent_texts(script);
    let mut docs = Vec::new();
    let mut done = std::collections::BTreeSet::new();
    for c in &script.docs {
        let key = c.key().as_str().to_string();
        if writers.get(&key).copied().unwrap_or(0) < 2 {
            docs.push(c.clone());
            continue;
        }
        if !done.insert(key.clone()) {
            continue;
        }
        let mut ops = Vec::new();
        let mut previous: Option<&str> = None;
        for (_, version, hash, is_delete) in log.iter().filter(|(k, ..)| *k == key) {
            ops.push(match (is_delete, previous == Some(hash.as_str())) {
                (true, _) => Op::Delete,
                (false, true) => Op::Rerun,
                (false, false) => Op::Put(recorded_put(w, &key, *version, hash, &sent)),
            });
            previous = Some(hash);
        }
        docs.push(super::world::DocClient { ops, ..c.clone() });
    }
    Script {
        docs,
        ..script.clone()
    }
}

/// Version `version` of document `key` as the run recorded it (its text
/// from the script's puts if retention pruned it).
fn recorded_put(
    w: &World,
    key: &str,
    version: u32,
    hash: &str,
    sent: &BTreeMap<String, String>,
) -> super::world::Put {
    let metadata = oracle::version_metadata(&w.db, key, version).unwrap_or_default();
    let text = oracle::version_text(&w.db, key, version)
        .or_else(|| sent.get(hash).cloned())
        .unwrap_or_else(|| panic!("no text for version {version} of {key}"));
    super::world::Put {
        text,
        markdown: oracle::version_content_type(&w.db, key, version).as_deref()
            == Some(ContentType::Markdown.as_str()),
        lang: metadata
            .get("lang")
            .and_then(|l| l.as_str())
            .map(str::to_string),
    }
}

/// Every client's operations, as its document's tenant, one document after
/// the other; an `Op::Settle` delivers every message first.
fn write_in_order(w: &World, sched: &Sched, p: &Simulated<'_>, script: &Script) {
    for client in &script.docs {
        let doc = client.doc();
        for op in &client.ops {
            let item = match op {
                Op::Settle => {
                    deliver_all(w, sched, p);
                    continue;
                }
                Op::Put(t) => IntakeItem::Put(t.input(doc.clone())),
                Op::Delete => IntakeItem::Delete(doc.clone()),
                Op::Batch(puts) => {
                    let items = super::world::batch_items(&doc, puts);
                    block_on(p.intake(&client.tenant, &items)).unwrap();
                    continue;
                }
                Op::Rerun => {
                    deliver_all(w, sched, p);
                    block_on(p.reindex_document(&client.key()))
                        .expect("no fault")
                        .expect("the re-run of a live version");
                    continue;
                }
            };
            block_on(p.intake(&client.tenant, &[item])).unwrap();
        }
    }
}

/// Delivers every message, in order, each when it is due.
fn deliver_all(w: &World, sched: &Sched, p: &Simulated<'_>) {
    while let Some(at) = w.broker.earliest(w.clock.0.get()) {
        if at > w.clock.0.get() {
            w.clock.0.set(at);
        }
        let i = w.broker.available(w.clock.0.get())[0];
        let q = Broker::take(&w.broker.pending, i, false);
        let o = block_on(p.consume(&q.msg));
        let settled = block_on(p.settle(&q.msg.job_id, &q.msg, o));
        w.broker
            .settle(sched, Held::Ingest(q), settled, w.clock.0.get());
    }
}

/// Delivers everything, lets every lease and stall deadline pass and runs
/// cron, until a cron run finds nothing to do with no message and no
/// backfill left (at most `QUIESCENCE_TICKS_MAX` + 1 times).
fn quiesce(w: &World, sched: &Sched, p: &Simulated<'_>, cfg: &Config) {
    for _ in 0..=QUIESCENCE_TICKS_MAX {
        deliver_all(w, sched, p);
        w.clock
            .advance_ms(i64::from(cfg.job_lease_seconds.max(cfg.job_stall_seconds)) * 1000 + 1);
        if !block_on(p.repair()).did_work()
            && w.broker.is_empty()
            && oracle::open_backfills(&w.db) == 0
        {
            break;
        }
    }
}

/// A cancelled backfill leaves its generation retired, with no rows, and
/// everything else as if it had never started: the reference records that
/// generation row.
fn record_cancelled_generation(w: &World, cfg: &Config) {
    let cfg2 = reindex_config(cfg).index_config();
    crate::native::testkit::record_retired_generation(&w.db, 2, cfg2);
}
