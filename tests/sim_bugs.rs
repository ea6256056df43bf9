//! Testing the tester: with each deliberate protocol bug of
//! `src/bugs.rs` switched on, the simulation must report a
//! violated invariant. The bugs are in every native build, inert unless a
//! test switches one on (`src/bugs.rs`); `make test` runs this.

use ingest_pipeline::config::Config;
use ingest_pipeline::native::sim::{
    case_for_seed, count_calls, run_flow, run_move_seed, run_seed, sim_configs, FaultKind,
    FaultPlan, Operator, Sched, Violation, FLOWS,
};
use ingest_pipeline::pipeline::bugs::{Bug, Bugs};

/// Random seeds tried per bug before giving up.
const SEEDS_MAX: u64 = 3_000;

/// Random seeds tried before the exhaustive single faults: most bugs that
/// need a concurrent schedule show within these, and the exhaustive pass
/// (about as long as 500 seeds) is then not paid for them.
const SEEDS_FIRST: usize = 400;

/// Returns how the simulation caught `bug`: the fault-free flows first,
/// then the first random seeds (those with an operator first), every single fault of every flow but
/// `sync`, the rest of the random seeds, and the `sync` flow's faults. The search covers the same cases in any order;
/// this one finds every seeded bug soonest.
fn catch(bug: Bug) -> Option<(String, Violation)> {
    let bugs = Bugs::only(bug);
    // A bug of the moves between shards: the simulation of moves, whose
    // invariants are M1-M4 (the single-shard runs never move a tenant).
    if bug.invariant().starts_with('M') {
        return (0..SEEDS_MAX).find_map(|seed| match run_move_seed(seed, bugs) {
            Err(v) if v.invariant == bug.invariant() => Some((format!("move seed {seed}"), v)),
            _ => None,
        });
    }
    // Only a violation of the invariant that names the bug counts: one of
    // another (a consequence further down) does not end the search.
    let named = |v: &Violation| v.invariant == bug.invariant();
    let configs = sim_configs();
    let cases = || {
        configs
            .iter()
            .flat_map(|c| FLOWS.iter().map(move |f| (c, f)))
    };
    // The sync flow's faults come last: no seeded bug is of the sync
    // protocol, and its runs are the longest (two sessions and commits).
    let exhaustive = |cfg: &Config, flow: &str| {
        let n = count_calls(flow, cfg, bugs);
        for at in 0..n {
            for kind in FaultKind::ALL {
                if let Err(v) =
                    run_flow(flow, cfg, bugs, &Sched::new(0, FaultPlan::At { at, kind }))
                {
                    if named(&v) {
                        return Some((format!("flow {flow}, {} at call {at}", kind.name()), v));
                    }
                }
            }
        }
        None
    };
    let mut broken: Vec<(u64, &str)> = Vec::new();
    for (cfg, flow) in cases() {
        if let Err(v) = run_flow(flow, cfg, bugs, &Sched::new(0, FaultPlan::None)) {
            if named(&v) {
                return Some((format!("flow {flow}, no fault"), v));
            }
            broken.push((cfg.consume_subrequests_max, flow));
        }
    }
    // Seeds whose script runs an operator (a backfill, a cancel, a redrive)
    // first: they exercise all that the others do and an operator's
    // protocol besides. Each seed up to SEEDS_MAX is still tried once.
    // Seeds whose script has two writers of one document come before
    // them: their versions overtake each other most.
    let operator = |seed: &u64| case_for_seed(*seed).script.operator != Operator::None;
    let raced = |seed: &u64| {
        let docs = case_for_seed(*seed).script.docs;
        let keys: std::collections::BTreeSet<_> = docs.iter().map(|c| c.key()).collect();
        keys.len() < docs.len()
    };
    let order: Vec<u64> = (0..SEEDS_MAX)
        .filter(raced)
        .chain((0..SEEDS_MAX).filter(|s| !raced(s) && operator(s)))
        .chain((0..SEEDS_MAX).filter(|s| !raced(s) && !operator(s)))
        .collect();
    let seeds = |range: std::ops::Range<usize>| {
        order
            .get(range)
            .unwrap_or_default()
            .iter()
            .copied()
            .find_map(|seed| match run_seed(seed, bugs, false) {
                (case, _, Err(v)) if named(&v) => Some((
                    format!("random seed {seed} ({:?})", case.script.operator),
                    v,
                )),
                _ => None,
            })
    };
    if let Some(found) = seeds(0..SEEDS_FIRST) {
        return Some(found);
    }
    // The fault-free flows that hold can be counted.
    let holds = |cfg: &Config, flow: &str| !broken.contains(&(cfg.consume_subrequests_max, flow));
    for (cfg, flow) in cases().filter(|(c, f)| **f != SYNC_FLOW && holds(c, f)) {
        if let Some(found) = exhaustive(cfg, flow) {
            return Some(found);
        }
    }
    if let Some(found) = seeds(SEEDS_FIRST..order.len()) {
        return Some(found);
    }
    configs
        .iter()
        .filter(|c| holds(c, SYNC_FLOW))
        .find_map(|cfg| exhaustive(cfg, SYNC_FLOW))
}

/// The flow whose faults `catch` tries last.
const SYNC_FLOW: &str = "sync";

#[test]
fn the_simulation_catches_every_seeded_bug() {
    // `SIM_BUGS=CancelInTwoSteps,...` tries only those.
    let only = std::env::var("SIM_BUGS").unwrap_or_default();
    let mut bugs: Vec<Bug> = Bug::ALL
        .into_iter()
        .filter(|b| only.is_empty() || only.split(',').any(|o| o == format!("{b:?}")))
        .collect();
    // The slowest to catch start first, so that the others run beside
    // them rather than after them: FlipWithoutCas takes 1,200 random seeds
    // and the exhaustive pass (146 s of the 146 that the whole test took
    // on 2 cores, 2026-12-06), each redrive bug most of the exhaustive pass.
    let slowest = [
        Bug::FlipWithoutCas,
        Bug::RedriveOverlaps,
        Bug::RedriveSendInTwoSteps,
    ];
    bugs.sort_by_key(|b| !slowest.contains(b));
    // The bugs are independent searches: one per core at a time, each
    // thread taking the next bug not yet taken.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut found: Vec<(usize, Option<(String, Violation)>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads.min(bugs.len()))
            .map(|_| {
                scope.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(&bug) = bugs.get(i) else { break mine };
                        let started = std::time::Instant::now();
                        let caught = catch(bug);
                        let secs = started.elapsed().as_secs_f64();
                        match &caught {
                            Some((how, v)) => {
                                let first_line = v.detail.lines().next().unwrap_or("");
                                println!(
                                    "{bug:?}: caught by {} ({how}) in {secs:.0} s: {first_line}",
                                    v.invariant
                                );
                            }
                            None => println!("{bug:?}: missed after {secs:.0} s"),
                        }
                        mine.push((i, caught));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a simulation thread failed"))
            .collect()
    });
    found.sort_by_key(|(i, _)| *i);
    assert_eq!(found.len(), bugs.len(), "every bug was tried");
    let missed: Vec<Bug> = found
        .iter()
        .filter(|(_, caught)| caught.is_none())
        .filter_map(|(i, _)| bugs.get(*i).copied())
        .collect();
    assert!(missed.is_empty(), "the simulation missed {missed:?}");
    // `catch` counts only the named invariant; this holds by construction
    // and says so if `catch` ever changes.
    let misnamed: Vec<String> = found
        .iter()
        .filter_map(|(i, caught)| Some((bugs.get(*i).copied()?, caught.as_ref()?)))
        .filter(|(bug, (_, v))| v.invariant != bug.invariant())
        .map(|(bug, (how, v))| {
            format!(
                "{bug:?} caught by {} ({how}), not {}",
                v.invariant,
                bug.invariant()
            )
        })
        .collect();
    assert!(
        misnamed.is_empty(),
        "caught by the wrong invariant: {misnamed:?}"
    );
}
