//! The deterministic simulation (see `src/native/sim/`): every single
//! crash point of the seven flows (`FLOWS`: single version, update, delete,
//! overtake, reindex, cancel, sync), exhaustively, then random seeds with
//! interleavings, duplicates, reordering, cron at arbitrary points, random
//! faults, concurrent operators, lasting outages and the queue's
//! `max_retries` → dead-letter path, their clients writing as two tenants.
//!
//! `SIM_SEEDS=N` sets the number of random seeds (default 2,000);
//! `make sim SEEDS=N` runs more. A failing case prints the command that
//! replays it.

use ingest_pipeline::config::Config;
use ingest_pipeline::core::failure::FailureBucket;
use ingest_pipeline::native::sim::{
    count_calls, run_flow, run_seed, sim_config, sim_configs, CallKind, FaultKind, FaultPlan,
    Operator, RunReport, Sched, FLOWS,
};
use ingest_pipeline::pipeline::bugs::Bugs;
use std::collections::BTreeSet;

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().map(|v| {
        v.parse()
            .unwrap_or_else(|_| panic!("{name} must be a number"))
    })
}

#[derive(Default)]
struct Summary {
    runs: u64,
    calls: u64,
    faults: u64,
    crashes: u64,
    duplicates: u64,
    max_concurrency: usize,
    max_ticks: u32,
    pairs: BTreeSet<String>,
    kinds: BTreeSet<String>,
    operators: std::collections::BTreeMap<String, u64>,
    outage_faults: u64,
    dead_letters: u64,
    redriven: u64,
    cancelled: u64,
    panics: u64,
    races: u64,
    conflicts: u64,
    paused: u64,
    invisible_reads: u64,
    repaired: u64,
    cleanup_passes: u64,
    quota_refusals: u64,
    batches: u64,
    rate_limited: u64,
    disabled: u64,
    buckets_injected: BTreeSet<FailureBucket>,
    buckets_recorded: BTreeSet<FailureBucket>,
    endings: BTreeSet<String>,
}

impl Summary {
    fn add(&mut self, r: &RunReport) {
        self.runs += 1;
        self.calls += r.calls;
        self.faults += r.faults;
        self.crashes += r.crashes;
        self.duplicates += r.duplicates;
        self.max_concurrency = self.max_concurrency.max(r.max_concurrency);
        self.max_ticks = self.max_ticks.max(r.cron_ticks_to_quiesce);
        self.pairs.extend(
            r.injected
                .iter()
                .map(|(c, f)| format!("{c:?}/{}", f.name())),
        );
        self.kinds
            .extend(r.kinds_seen.iter().map(|c| format!("{c:?}")));
        if let Some(op) = r.operator.filter(|o| *o != Operator::None) {
            *self.operators.entry(format!("{op:?}")).or_default() += 1;
        }
        self.outage_faults += r.outage_faults;
        self.dead_letters += r.dead_letters;
        self.redriven += r.redriven;
        self.cancelled += r.cancelled;
        self.panics += r.panics;
        self.races += r.races;
        self.conflicts += r.conflicts;
        self.paused += r.paused;
        self.invisible_reads += r.invisible_reads;
        self.repaired += r.repaired;
        self.cleanup_passes += r.cleanup_passes;
        self.quota_refusals += r.quota_refusals;
        self.batches += r.batches;
        self.rate_limited += r.rate_limited;
        self.disabled += r.disabled;
        self.buckets_injected
            .extend(r.buckets_injected.iter().copied());
        self.buckets_recorded
            .extend(r.buckets_recorded.iter().copied());
        self.endings.extend(r.endings.iter().cloned());
    }

    fn merge(&mut self, o: Summary) {
        self.runs += o.runs;
        self.calls += o.calls;
        self.faults += o.faults;
        self.crashes += o.crashes;
        self.duplicates += o.duplicates;
        self.max_concurrency = self.max_concurrency.max(o.max_concurrency);
        self.max_ticks = self.max_ticks.max(o.max_ticks);
        self.pairs.extend(o.pairs);
        self.kinds.extend(o.kinds);
        for (k, n) in o.operators {
            *self.operators.entry(k).or_default() += n;
        }
        self.outage_faults += o.outage_faults;
        self.dead_letters += o.dead_letters;
        self.redriven += o.redriven;
        self.cancelled += o.cancelled;
        self.panics += o.panics;
        self.races += o.races;
        self.conflicts += o.conflicts;
        self.paused += o.paused;
        self.invisible_reads += o.invisible_reads;
        self.repaired += o.repaired;
        self.cleanup_passes += o.cleanup_passes;
        self.quota_refusals += o.quota_refusals;
        self.batches += o.batches;
        self.rate_limited += o.rate_limited;
        self.disabled += o.disabled;
        self.buckets_injected.extend(o.buckets_injected);
        self.buckets_recorded.extend(o.buckets_recorded);
        self.endings.extend(o.endings);
    }

    /// What the runs did not reach: operators, call kinds, call/fault
    /// pairs, failure buckets (injected, and recorded by the ledger) and
    /// endings, each against everything there is. Empty: full coverage.
    fn missing(&self) -> Vec<String> {
        let mut out = Vec::new();
        for op in Operator::ALL {
            if !self.operators.contains_key(&format!("{op:?}")) && op != Operator::None {
                out.push(format!("operator {op:?}"));
            }
        }
        for kind in CallKind::ALL {
            if !self.kinds.contains(&format!("{kind:?}")) {
                out.push(format!("call kind {kind:?}"));
            }
            for fault in FaultKind::ALL {
                let pair = format!("{kind:?}/{}", fault.name());
                if !self.pairs.contains(&pair) {
                    out.push(format!("call/fault pair {pair}"));
                }
            }
        }
        for b in FailureBucket::ALL {
            if !self.buckets_injected.contains(&b) {
                out.push(format!("bucket {} injected", b.as_str()));
            }
            if !self.buckets_recorded.contains(&b) {
                out.push(format!("bucket {} recorded", b.as_str()));
            }
        }
        for e in ENDINGS {
            if !self.endings.contains(e) {
                out.push(format!("ending {e}"));
            }
        }
        if self.races == 0 {
            out.push("a document two clients write at once".into());
        }
        if self.invisible_reads == 0 {
            out.push("an index read missing a vector not visible yet".into());
        }
        if self.repaired == 0 {
            out.push("a document re-run for a vector the index lost".into());
        }
        if self.cleanup_passes == 0 {
            out.push("a cron run's cleanup pass on the rest of its budget".into());
        }
        for (n, what) in [
            (self.quota_refusals, "a write refused at a quota"),
            (self.batches, "a batch of several documents"),
            (self.rate_limited, "a request refused by the rate limit"),
            (self.disabled, "a request of a disabled tenant"),
        ] {
            if n == 0 {
                out.push(what.into());
            }
        }
        if self.paused == 0 {
            out.push("a backfill paused and resumed".into());
        }
        out
    }
}

/// Every way a job or a backfill ends.
const ENDINGS: [&str; 6] = [
    "job:succeeded",
    "job:failed",
    "job:dead",
    "job:superseded",
    "backfill:completed",
    "backfill:cancelled",
];

/// Runs `run` on every case, the cases spread over the machine's cores
/// (each is an independent run), and sums what the runs report. A
/// violation panics in `run`, with the command that replays it.
fn on_every_core<T: Sync>(cases: &[T], run: impl Fn(&T) -> RunReport + Sync) -> Summary {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let parts: Vec<Summary> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let run = &run;
                scope.spawn(move || {
                    let mut summary = Summary::default();
                    for case in cases.iter().skip(t).step_by(threads) {
                        summary.add(&run(case));
                    }
                    summary
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a simulation thread failed"))
            .collect()
    });
    let mut summary = Summary::default();
    for p in parts {
        summary.merge(p);
    }
    summary
}

#[test]
fn every_single_crash_point_of_every_flow() {
    // The sync flow runs under the default budget only: what it adds is
    // the sync protocol (sessions, commits, pages of tombstones), while its
    // consumer work (two short versions and a tombstone) is what the other
    // flows fault under both budgets.
    let configs = sim_configs();
    let tight = configs[1].consume_subrequests_max;
    let pairs: Vec<(&Config, &str)> = configs
        .iter()
        .flat_map(|c| FLOWS.iter().map(move |f| (c, *f)))
        .filter(|(c, f)| !(*f == "sync" && c.consume_subrequests_max == tight))
        .collect();
    let flow_budgets = pairs.len();
    // Every (flow, budget, call, fault kind), in order.
    let mut cases: Vec<(&Config, &str, u64, FaultKind)> = Vec::new();
    for &(cfg, flow) in &pairs {
        let n = count_calls(flow, cfg, Bugs::default());
        assert!(n > 10, "{flow} makes only {n} port calls");
        for at in 0..n {
            cases.extend(FaultKind::ALL.iter().map(|&kind| (cfg, flow, at, kind)));
        }
    }
    let points = cases.len() as u64;
    // (This test alone took over 5 minutes on one core.)
    let summary = on_every_core(&cases, |&(cfg, flow, at, kind)| {
        let budget = cfg.consume_subrequests_max;
        let sched = Sched::new(0, FaultPlan::At { at, kind });
        // `count_calls` above ran this flow under this budget without
        // faults, every step checked.
        sched.prefix_checked.set(true);
        run_flow(flow, cfg, Bugs::default(), &sched).unwrap_or_else(|v| {
            panic!(
                "{} violated in flow {flow} (budget {budget}), fault {} at call {at}: {}\nreplay: SIM_FLOW={flow} SIM_BUDGET={budget} SIM_CALL={at} SIM_FAULT={} cargo test --test sim replay -- --ignored --nocapture",
                v.invariant,
                kind.name(),
                v.detail,
                kind.name()
            )
        })
    });
    println!(
        "exhaustive: {} flows, {flow_budgets} (flow, budget) pairs, {points} crash points ({} port calls x {} fault kinds), {} faults injected, {} invocations killed; call/fault pairs covered: {}; max cron ticks to quiesce: {}",
        FLOWS.len(),
        points / 3,
        FaultKind::ALL.len(),
        summary.faults,
        summary.crashes,
        summary.pairs.len(),
        summary.max_ticks
    );
    assert_eq!(summary.runs, points);
    assert_eq!(summary.faults, points, "every run injected its one fault");
    // Every operator but none has a flow, and every call the flows make
    // was faulted each way.
    for op in Operator::ALL.into_iter().filter(|o| *o != Operator::None) {
        assert!(
            summary.operators.contains_key(&format!("{op:?}")),
            "no flow runs operator {op:?}"
        );
    }
    let unfaulted: Vec<String> = CallKind::ALL
        .iter()
        .flat_map(|k| {
            FaultKind::ALL
                .iter()
                .map(move |f| format!("{k:?}/{}", f.name()))
        })
        .filter(|pair| !summary.pairs.contains(pair))
        .collect();
    assert!(
        unfaulted.is_empty(),
        "call/fault pairs no flow reaches: {unfaulted:?}"
    );
}

/// Two writers of one document (the `race` flow), the second cutting in
/// at every port call of the first (then the first goes on), without and
/// with a fault at the call where it cuts in: the version numbers taken
/// concurrently, a lost race retried, the conflict answer.
#[test]
fn two_writers_of_one_document_at_every_interleaving() {
    let cfg = sim_config();
    let n = count_calls("race", &cfg, Bugs::default());
    let mut runs = 0;
    let mut lost_races = 0;
    for at in 0..n {
        for plan in std::iter::once(FaultPlan::None).chain(
            FaultKind::ALL
                .iter()
                .map(|&kind| FaultPlan::At { at, kind }),
        ) {
            let sched = Sched::new(0, plan.clone());
            sched.preempt_at.set(Some(at));
            if let Err(v) = run_flow("race", &cfg, Bugs::default(), &sched) {
                panic!(
                    "{} violated with the second writer cutting in at call {at} ({plan:?}): {}",
                    v.invariant, v.detail
                );
            }
            runs += 1;
            lost_races += u64::from(sched.constraint_refusals.get() > 0);
        }
    }
    println!(
        "race: {runs} runs, the second writer cutting in at each of {n} calls; {lost_races} with a lost race"
    );
    assert_eq!(runs, n * 4);
    assert!(
        lost_races > 0,
        "no interleaving made a writer lose the race"
    );
}

#[test]
fn random_seeds_hold_every_invariant() {
    let seeds = env_u64("SIM_SEEDS").unwrap_or(2_000);
    let start = env_u64("SIM_SEED_START").unwrap_or(0);
    let all: Vec<u64> = (start..start + seeds).collect();
    let summary = on_every_core(&all, |&seed| {
        match run_seed(seed, Bugs::default(), false) {
        (_, _, Ok(r)) => r,
        (case, _, Err(v)) => panic!(
            "{} violated with seed {seed}: {}\nscript: {:?}\nreplay: SIM_SEED={seed} cargo test --test sim replay -- --ignored --nocapture",
            v.invariant, v.detail, case.script
        ),
    }
    });
    println!(
        "random: {} seeds from {start}, {} port calls, {} faults injected, {} invocations killed (a crash fault or the wall-clock limit), {} duplicate deliveries, max {} concurrent tasks, max {} cron ticks to quiesce; call kinds: {}; call/fault pairs covered: {} {:?}",
        summary.runs,
        summary.calls,
        summary.faults,
        summary.crashes,
        summary.duplicates,
        summary.max_concurrency,
        summary.max_ticks,
        summary.kinds.len(),
        summary.pairs.len(),
        summary.pairs
    );
    println!(
        "operators: {:?} ({} backfills cancelled, {} letters redriven); {} calls failed by outages; {} messages reached the dead-letter queue; {} deliveries panicked",
        summary.operators, summary.cancelled, summary.redriven, summary.outage_faults, summary.dead_letters, summary.panics
    );
    println!(
        "races: {} documents written by two clients at once, {} writes answered conflict; {} backfills paused and resumed; {} index reads missed a vector not visible yet; {} documents re-run for a lost vector; {} cleanup passes on the rest of a cron run's budget; {} batches; {} writes refused at a quota, {} requests rate-limited, {} of a disabled tenant",
        summary.races, summary.conflicts, summary.paused, summary.invisible_reads, summary.repaired, summary.cleanup_passes, summary.batches, summary.quota_refusals, summary.rate_limited, summary.disabled
    );
    println!(
        "buckets recorded: {:?}; endings: {:?}",
        summary
            .buckets_recorded
            .iter()
            .map(|b| b.as_str())
            .collect::<Vec<_>>(),
        summary.endings
    );
    assert_eq!(summary.runs, seeds);
    assert!(summary.faults > seeds, "faults were injected");
    assert!(summary.max_concurrency >= 3, "tasks really interleaved");
    // Coverage is required, not printed: an operator, a call kind, a fault
    // of a call, a failure bucket or an ending that no seed reaches fails
    // the run (SIM_COVERAGE=0 skips this for a run of a few seeds, and says so).
    let missing = summary.missing();
    if std::env::var("SIM_COVERAGE").as_deref() == Ok("0") {
        println!("coverage not required (SIM_COVERAGE=0); missing: {missing:?}");
    } else {
        assert!(
            missing.is_empty(),
            "{} seeds from {start} did not reach: {missing:?}",
            seeds
        );
    }
}

/// Replays one case with its full trace: `SIM_SEED=n` or
/// `SIM_FLOW=update SIM_CALL=17 SIM_FAULT=crash_after` (with `SIM_BUDGET=n`
/// for the consumer budget the failing run had); `cargo test --test sim
/// replay -- --ignored --nocapture`. Without either it fails: it would
/// replay nothing.
#[test]
#[ignore = "a replay of the case the variables name"]
fn replay() {
    assert!(
        std::env::var("SIM_SEED").is_ok() || std::env::var("SIM_FLOW").is_ok(),
        "set SIM_SEED, or SIM_FLOW with SIM_CALL and SIM_FAULT: nothing to replay"
    );
    let mut cfg = sim_config();
    if let Some(budget) = env_u64("SIM_BUDGET") {
        cfg.consume_subrequests_max = budget;
    }
    if let Some(seed) = env_u64("SIM_SEED") {
        let (case, sched, result) = run_seed(seed, Bugs::default(), true);
        println!("script: {:?}", case.script);
        for line in sched.trace.borrow().iter() {
            println!("{line}");
        }
        println!("{result:?}");
        assert!(result.is_ok());
    }
    if let Ok(flow) = std::env::var("SIM_FLOW") {
        let at = env_u64("SIM_CALL").expect("SIM_CALL");
        let kind = FaultKind::parse(&std::env::var("SIM_FAULT").expect("SIM_FAULT"))
            .expect("a fault kind");
        let sched = Sched::new(0, FaultPlan::At { at, kind });
        sched.verbose.set(true);
        let result = run_flow(&flow, &cfg, Bugs::default(), &sched);
        for line in sched.trace.borrow().iter() {
            println!("{line}");
        }
        println!("{result:?}");
        assert!(result.is_ok());
    }
}

/// Tenants moved between two shards (`sim::moves`): random seeds of
/// writes, deletes, searches, moves, pauses, cancels, cron and faults
/// before any statement of the protocol, the invariants M1–M4 after every
/// step. `SIM_MOVE_SEEDS=N` sets the number (default: a fortieth of
/// `SIM_SEEDS`, at least 50: about 12 s alone, `make test` keeps under its
/// time); `make sim` runs a tenth of `SEEDS`.
#[test]
fn random_move_seeds_hold_every_invariant() {
    use ingest_pipeline::native::sim::{run_move_seed, MoveRunReport};
    let start = env_u64("SIM_SEED_START").unwrap_or(0);
    let seeds = env_u64("SIM_MOVE_SEEDS")
        .unwrap_or_else(|| (env_u64("SIM_SEEDS").unwrap_or(2_000) / 40).max(50));
    let mut total = MoveRunReport::default();
    for seed in start..start + seeds {
        match run_move_seed(seed, Bugs::default()) {
            Ok(r) => {
                total.steps += r.steps;
                total.writes += r.writes;
                total.refused_writes += r.refused_writes;
                total.moves_started += r.moves_started;
                total.moves_completed += r.moves_completed;
                total.moves_cancelled += r.moves_cancelled;
                total.faults += r.faults;
            }
            Err(v) => panic!(
                "move seed {seed} violated {}: {}\nreplay: SIM_MOVE_SEEDS=1 SIM_SEED_START={seed} cargo test --profile sim --test sim random_move_seeds_hold_every_invariant",
                v.invariant, v.detail
            ),
        }
    }
    println!("move seeds {start}..{}: {total:?}", start + seeds);
    // The runs reach what they are for.
    assert!(total.moves_completed > seeds / 4, "{total:?}");
    assert!(total.moves_cancelled > 0, "{total:?}");
    assert!(total.refused_writes > 0, "{total:?}");
    assert!(total.faults > 0, "{total:?}");
}
