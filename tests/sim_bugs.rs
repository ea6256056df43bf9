//! Testing the tester: with each deliberate protocol bug of
//! `src/bugs.rs` switched on, the simulation must report a
//! violated invariant. Built only with `--features protocol-bugs`
//! (`make test` runs it).
#![cfg(feature = "protocol-bugs")]

use ingest_pipeline::native::sim::{
    count_calls, run_flow, run_seed, sim_configs, FaultKind, FaultPlan, Sched, Violation, FLOWS,
};
use ingest_pipeline::pipeline::bugs::{Bug, Bugs};

/// Random seeds tried per bug before giving up.
const SEEDS_MAX: u64 = 3_000;

/// Returns how the simulation caught `bug`: the fault-free flows first,
/// then every single fault of every flow, then random seeds.
fn catch(bug: Bug) -> Option<(String, Violation)> {
    let bugs = Bugs::only(bug);
    let configs = sim_configs();
    let cases = || {
        configs
            .iter()
            .flat_map(|c| FLOWS.iter().map(move |f| (c, f)))
    };
    for (cfg, flow) in cases() {
        if let Err(v) = run_flow(flow, cfg, bugs, &Sched::new(0, FaultPlan::None)) {
            return Some((format!("flow {flow}, no fault"), v));
        }
    }
    for (cfg, flow) in cases() {
        // The fault-free flow holds (checked above), so it can be counted.
        let n = count_calls(flow, cfg, bugs);
        for at in 0..n {
            for kind in FaultKind::ALL {
                if let Err(v) =
                    run_flow(flow, cfg, bugs, &Sched::new(0, FaultPlan::At { at, kind }))
                {
                    return Some((format!("flow {flow}, {} at call {at}", kind.name()), v));
                }
            }
        }
    }
    for seed in 0..SEEDS_MAX {
        if let (case, _, Err(v)) = run_seed(seed, bugs, false) {
            return Some((
                format!("random seed {seed} ({:?})", case.script.operator),
                v,
            ));
        }
    }
    None
}

#[test]
fn the_simulation_catches_every_seeded_bug() {
    let mut missed = Vec::new();
    // `SIM_BUGS=CancelInTwoSteps,...` tries only those.
    let only = std::env::var("SIM_BUGS").unwrap_or_default();
    for bug in Bug::ALL
        .into_iter()
        .filter(|b| only.is_empty() || only.split(',').any(|o| o == format!("{b:?}")))
    {
        match catch(bug) {
            Some((how, v)) => {
                let first_line = v.detail.lines().next().unwrap_or("");
                println!("{bug:?}: caught by {} ({how}): {first_line}", v.invariant);
            }
            None => missed.push(bug),
        }
    }
    assert!(missed.is_empty(), "the simulation missed {missed:?}");
}
