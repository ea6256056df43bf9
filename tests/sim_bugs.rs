//! Testing the tester: with each deliberate protocol bug of
//! `src/pipeline/bugs.rs` switched on, the simulation must report a
//! violated invariant. Built only with `--features protocol-bugs`
//! (`make test` runs it).
#![cfg(feature = "protocol-bugs")]

use ingest_pipeline::native::sim::{
    count_calls, random_script, run, run_flow, sim_config_for_seed, sim_configs, FaultKind,
    FaultPlan, Mode, Sched, Violation, FLOWS,
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
        let sched = Sched::new(seed, FaultPlan::Random { per_mille: 60 });
        if let Err(v) = run(
            &random_script(seed),
            &sim_config_for_seed(seed),
            bugs,
            &sched,
            Mode::Random,
        ) {
            return Some((format!("random seed {seed}"), v));
        }
    }
    None
}

#[test]
fn the_simulation_catches_every_seeded_bug() {
    let mut missed = Vec::new();
    for bug in Bug::ALL {
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
