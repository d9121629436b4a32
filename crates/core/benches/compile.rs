//! Briefing compilation: demo-sized, 1k and 10k records (and 10k with a step on its
//! sixth attempt), heuristic and BPE estimators; and counting one briefing's text with
//! the BPE against tiktoken-rs, its reference. These are warm figures (the same
//! process, many iterations); the cold one, a fresh process's first compile, is
//! `cargo run --release -p baton-core --example cold_compile`.
//!
//! `cargo bench -p baton-core --bench compile -- --warm-up-time 1 --measurement-time 3`

#![allow(clippy::expect_used)]

use std::hint::black_box;

use baton_core::compiler::{Assignment, AssignmentKind, WorkerProfile, compile};
use baton_core::ids::WorkerId;
use baton_core::state::{AttemptOutcome, ExecutionState, StepAttempt, StepStatus};
use baton_core::synthetic;
use baton_core::tokens::{BpeEstimator, HeuristicEstimator, TokenEstimator};
use criterion::{Criterion, criterion_group, criterion_main};

/// A typical package budget.
const BUDGET: usize = 2000;

fn bench(c: &mut Criterion) {
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
    // A step on its sixth attempt: the retry briefing's attempt lines.
    let mut retried = synthetic::state_with_items(10_000, 1);
    if let Some(step) = retried.plan.iter_mut().find(|s| s.id == "T3") {
        step.status = StepStatus::Pending;
        for turn in 0..5 {
            step.attempts.push(StepAttempt {
                turn,
                worker: WorkerId::new(format!("w{turn}")),
                outcome: if turn % 2 == 0 {
                    AttemptOutcome::Failed
                } else {
                    AttemptOutcome::NoEvidence
                },
                detail: "execute call failed: server_error: upstream overloaded; retry later"
                    .into(),
            });
        }
    }
    let states: [(&str, ExecutionState); 4] = [
        ("demo", synthetic::demo_sized_state()),
        ("1k", synthetic::state_with_items(1_000, 1)),
        ("10k", synthetic::state_with_items(10_000, 1)),
        ("10k-retried", retried),
    ];
    let estimators: [&dyn TokenEstimator; 2] = [&HeuristicEstimator, &BpeEstimator];
    for (name, state) in &states {
        let mut group = c.benchmark_group(format!("compile/{name}"));
        for est in &estimators {
            group.bench_function(est.name(), |b| {
                b.iter(|| {
                    compile(
                        black_box(state),
                        black_box(&assignment),
                        &worker,
                        BUDGET,
                        *est,
                    )
                })
            });
        }
        group.finish();
    }

    // A state whose records were never scored, as a fresh process loads it: the
    // compile that a resume pays (in a warm process; the example adds page faults).
    let mut group = c.benchmark_group("compile/10k-unscored");
    for est in &estimators {
        group.bench_function(est.name(), |b| {
            b.iter_batched(
                || {
                    let mut fresh = states[2].1.clone();
                    fresh.scoring = Default::default();
                    fresh
                },
                |fresh| compile(&fresh, black_box(&assignment), &worker, BUDGET, *est),
                criterion::BatchSize::LargeInput,
            )
        });
    }
    group.finish();

    let briefing = compile(&states[2].1, &assignment, &worker, BUDGET, &BpeEstimator).text;
    let tiktoken = tiktoken_rs::o200k_base().expect("tiktoken-rs loads o200k_base");
    assert_eq!(
        BpeEstimator.count(&briefing),
        tiktoken.encode_ordinary(&briefing).len()
    );
    let mut group = c.benchmark_group("count/briefing");
    group.bench_function("bpe-o200k", |b| {
        b.iter(|| BpeEstimator.count(black_box(&briefing)))
    });
    group.bench_function("tiktoken-rs", |b| {
        b.iter(|| tiktoken.encode_ordinary(black_box(&briefing)).len())
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
