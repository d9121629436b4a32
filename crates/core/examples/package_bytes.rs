//! Every package of a fixed grid of inputs, one JSON line each, for comparing two builds
//! byte for byte (a change to scoring or counting must not change a single package):
//!
//! `cargo run --release -p baton-core --example package_bytes > new.jsonl`, the same with
//! the other build, then `cmp old.jsonl new.jsonl`.
//!
//! The grid: synthetic states from 0 to 10,000 items (and the same states with texts
//! in capitals, mixed case and non-ASCII words, which the scoring scan treats apart),
//! four assignments (a step, another step, one with non-ASCII words, a continuation),
//! budgets 300 to 3,000, both estimators. Each assignment is compiled both on a fresh
//! copy of the state (what a new process computes) and on one state that every
//! assignment before it was compiled on (what a long-running engine has memoised).

use baton_core::compiler::{Assignment, AssignmentKind, WorkerProfile, compile};
use baton_core::ids::WorkerId;
use baton_core::state::ExecutionState;
use baton_core::synthetic;
use baton_core::tokens::EstimatorKind;

fn main() -> Result<(), String> {
    let worker = WorkerProfile {
        id: WorkerId::new("w2"),
        model: "mock/beta".into(),
        family: "beta".into(),
        role: None,
    };
    let step = |id: &str, task: &str| Assignment {
        kind: AssignmentKind::Step,
        step_id: Some(id.into()),
        task: task.into(),
    };
    let assignments = [
        step(
            "T3",
            "Implement token authentication with refresh token rotation",
        ),
        step(
            "T2",
            "Design the PostgreSQL schema for users, projects and tasks",
        ),
        step("T5", "Paginate the Ünïcode task names; añadir índices"),
        Assignment {
            kind: AssignmentKind::Continuation,
            step_id: None,
            task: "Advance the objective from the open issues".into(),
        },
    ];
    let mut lines = 0;
    for items in [0, 10, 100, 1_000, 3_000, 10_000] {
        for (variant, state) in [
            ("plain", synthetic::state_with_items(items, 1)),
            ("cased", recased(synthetic::state_with_items(items, 2))),
        ] {
            for kind in [EstimatorKind::Bpe, EstimatorKind::Heuristic] {
                let estimator = kind.build();
                let shared = state.clone();
                for (a, assignment) in assignments.iter().enumerate() {
                    for budget in [300, 800, 2_000, 3_000] {
                        let fresh = state.clone();
                        for (how, on) in [("fresh", &fresh), ("shared", &shared)] {
                            let package = compile(on, assignment, &worker, budget, &*estimator);
                            let json =
                                serde_json::to_string(&package).map_err(|e| e.to_string())?;
                            println!(
                                "{items} {variant} {} a{a} {budget} {how} {json}",
                                kind.name()
                            );
                            lines += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!("{lines} packages");
    Ok(())
}

/// Some record texts in capitals, some in mixed case, some with non-ASCII words.
fn recased(mut state: ExecutionState) -> ExecutionState {
    let change = |i: usize, text: &mut String| match i % 5 {
        0 => *text = text.to_uppercase(),
        1 => {
            *text = (text.char_indices())
                .map(|(k, c)| {
                    if k % 3 == 0 {
                        c.to_ascii_uppercase()
                    } else {
                        c
                    }
                })
                .collect()
        }
        2 => text.push_str(" — café TOKEN-rotación"),
        _ => {}
    };
    for (i, d) in state.decisions.iter_mut().enumerate() {
        change(i, &mut d.text);
    }
    for (i, c) in state.completed.iter_mut().enumerate() {
        change(i, &mut c.text);
    }
    for (i, f) in state.failed_attempts.iter_mut().enumerate() {
        change(i, &mut f.what);
        change(i + 1, &mut f.why);
    }
    for (i, issue) in state.issues.iter_mut().enumerate() {
        change(i, &mut issue.title);
    }
    for (i, a) in state.assumptions.iter_mut().enumerate() {
        change(i, &mut a.text);
    }
    state
}
