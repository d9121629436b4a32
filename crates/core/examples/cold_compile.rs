//! The cold figure: a fresh process's first briefing compile, which is what a resume pays.
//! Builds the synthetic state (not timed), then times choosing the estimator plus the
//! first compile, then a second compile of the same state for comparison.
//!
//! `cargo run --release -p baton-core --example cold_compile -- [ITEMS] [bpe|heuristic]`
//! (defaults: 10000 bpe). Run it several times: each run is one cold sample. Besides the
//! wall time it prints the thread's CPU time (Linux: `/proc/thread-self/schedstat`),
//! which a loaded machine inflates less, and the page faults the first compile took.
//! `BATON_COLD_PROBE=scored|counted|touched` does part of the first compile's work
//! before it is timed, to see what that part costs (see `main`).

use std::time::Instant;

use baton_core::compiler::{Assignment, AssignmentKind, WorkerProfile, compile};
use baton_core::ids::WorkerId;
use baton_core::state::ExecutionState;
use baton_core::synthetic;
use baton_core::tokens::{EstimatorKind, HeuristicEstimator};

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let items: usize = match args.next() {
        Some(n) => n.parse().map_err(|e| format!("ITEMS {n:?}: {e}"))?,
        None => 10_000,
    };
    let kind = args.next().unwrap_or_else(|| "bpe".into());
    let kind = EstimatorKind::parse(&kind).ok_or(format!("unknown estimator {kind:?}"))?;
    let state = synthetic::state_with_items(items, 1);
    let worker = WorkerProfile {
        id: WorkerId::new("w2"),
        model: "mock/beta".into(),
        family: "beta".into(),
        role: None,
    };
    let assignment = Assignment {
        kind: AssignmentKind::Step,
        step_id: Some("T3".into()),
        task: "Implement token authentication with refresh token rotation".into(),
    };

    // Probes of where the cold time goes (not what a resume pays): `scored` scores the
    // state first (a heuristic compile, which leaves the estimator's tables untouched);
    // `counted` counts a text with the estimator first (its tables touched, nothing
    // scored); `touched` reads every scored text once first (in the caches, not
    // scanned), and says how much text there is.
    match std::env::var("BATON_COLD_PROBE").as_deref() {
        Ok("scored") => {
            let _ = compile(&state, &assignment, &worker, 2000, &HeuristicEstimator);
        }
        Ok("counted") => {
            let _ = kind
                .build()
                .count("a warm-up text: Implement token authentication 42.");
        }
        Ok("touched") => {
            let t = Instant::now();
            let texts = scored_texts(&state);
            let sum: u64 = (texts.iter())
                .map(|s| s.bytes().map(u64::from).sum::<u64>())
                .sum();
            let bytes: usize = texts.iter().map(|s| s.len()).sum();
            eprintln!(
                "{} texts, {bytes} bytes, read in {:.3} ms (sum {sum})",
                texts.len(),
                t.elapsed().as_secs_f64() * 1e3
            );
        }
        _ => {}
    }
    let (t0, c0, f0) = (Instant::now(), cpu_ns(), minor_faults());
    let estimator = kind.build();
    let first = compile(&state, &assignment, &worker, 2000, &*estimator);
    let (cold, cold_cpu, faults) = (t0.elapsed(), cpu_ns() - c0, minor_faults() - f0);
    if std::env::var_os("BATON_COLD_ONCE").is_some() {
        // For instruction counts of the first compile alone (callgrind).
        println!("first compile {:.3} ms", cold.as_secs_f64() * 1e3);
        return Ok(());
    }
    let (t1, c1) = (Instant::now(), cpu_ns());
    let second = compile(&state, &assignment, &worker, 2000, &*estimator);
    let (warm, warm_cpu) = (t1.elapsed(), cpu_ns() - c1);
    assert_eq!(first, second, "compilation is deterministic");
    println!(
        "{items} items, {}: first compile {:.3} ms (cpu {:.3} ms, {faults} page faults), second {:.3} ms (cpu {:.3} ms), {} tokens",
        first.estimator,
        cold.as_secs_f64() * 1e3,
        cold_cpu as f64 / 1e6,
        warm.as_secs_f64() * 1e3,
        warm_cpu as f64 / 1e6,
        first.tokens
    );
    Ok(())
}

/// The texts the compiler scores a record by, every record.
fn scored_texts(state: &ExecutionState) -> Vec<&str> {
    let mut texts = Vec::new();
    for d in &state.decisions {
        texts.extend([d.text.as_str(), d.reason.as_deref().unwrap_or("")]);
    }
    texts.extend(state.completed.iter().map(|c| c.text.as_str()));
    for a in &state.artifacts {
        texts.push(&a.name);
        texts.extend(a.versions.last().map(|v| v.description.as_str()));
    }
    for i in &state.issues {
        texts.extend([i.title.as_str(), i.detail.as_str()]);
    }
    for f in &state.failed_attempts {
        texts.extend([f.what.as_str(), f.why.as_str()]);
    }
    texts.extend(state.assumptions.iter().map(|a| a.text.as_str()));
    texts
}

/// Minor page faults of the process so far (Linux: `/proc/self/stat`; 0 elsewhere): a
/// fresh process's first compile touches memory nothing touched before.
fn minor_faults() -> i64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            // Fields after the parenthesised command name; minflt is the tenth field.
            let rest = s.rsplit_once(')')?.1;
            rest.split_whitespace().nth(7)?.parse().ok()
        })
        .unwrap_or(0)
}

/// This thread's CPU time so far, in nanoseconds (0 where the kernel does not say).
fn cpu_ns() -> i64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}
