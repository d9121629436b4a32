//! The first compile of a large state in a fresh process (what a resume pays, issue 9)
//! must give exactly the package it gave before the cold path was made cheaper: the
//! digests below are of the packages compiled by the code before that change
//! (`d929233`), serialised as JSON. A warm compile of the same state must match too.

use baton_core::compiler::{Assignment, AssignmentKind, WorkerProfile, compile};
use baton_core::ids::WorkerId;
use baton_core::synthetic;
use baton_core::tokens::{BpeEstimator, HeuristicEstimator, TokenEstimator};
use sha2::{Digest, Sha256};

/// The worker of `examples/cold_compile.rs` and the compile bench.
fn worker() -> WorkerProfile {
    WorkerProfile {
        id: WorkerId::new("w2"),
        model: "mock/beta".into(),
        family: "beta".into(),
        role: None,
    }
}

fn assignment(step: Option<&str>, task: &str) -> Assignment {
    Assignment {
        kind: match step {
            Some(_) => AssignmentKind::Step,
            None => AssignmentKind::Continuation,
        },
        step_id: step.map(Into::into),
        task: task.into(),
    }
}

/// A compile to check: the synthetic state of `items` records from `seed`, a step (or a
/// continuation, `None`) with `task`, and the digest of the package's JSON.
struct Case {
    items: usize,
    seed: u64,
    step: Option<&'static str>,
    task: &'static str,
    budget: usize,
    bpe: bool,
    digest: &'static str,
}

const CASES: &[Case] = &[
    // `cold_compile`'s and the `10k` bench's: a user's defaults.
    Case {
        items: 10_000,
        seed: 1,
        step: Some("T3"),
        task: "Implement token authentication with refresh token rotation",
        budget: 2000,
        bpe: true,
        digest: "ca8351b77fce607a133152c7cbbcb133516743cfcd7071b4fc0476877127de10",
    },
    // The same with the heuristic estimator.
    Case {
        items: 10_000,
        seed: 1,
        step: Some("T3"),
        task: "Implement token authentication with refresh token rotation",
        budget: 2000,
        bpe: false,
        digest: "8dea3a84bcd972263f5ba6170110b39646fe187786817d2f5f11a8b9e57e359d",
    },
    Case {
        items: 10_000,
        seed: 2,
        step: Some("T6"),
        task: "Add cursor pagination to list endpoints",
        budget: 4000,
        bpe: true,
        digest: "606c44f1230732c93f9e9bb6ea1093d606d656a81dafc603efb5c51e8dbce62d",
    },
    // A continuation, and a task with non-ASCII words.
    Case {
        items: 3_000,
        seed: 5,
        step: None,
        task: "Review error responses for consistency; handle the OpenAPI Ünïcode cases",
        budget: 1500,
        bpe: true,
        digest: "edc4ffc104242a79ca02bf7e7931edc1c49828ca12879e665c25974fa8bc243f",
    },
];

fn digest(json: &str) -> String {
    hex::encode(Sha256::digest(json.as_bytes()))
}

#[test]
fn the_first_compile_of_a_large_state_gives_the_package_it_gave_before() {
    let mut failures = Vec::new();
    for case in CASES {
        let Case {
            items,
            seed,
            step,
            task,
            budget,
            bpe,
            digest: expected,
        } = *case;
        let state = synthetic::state_with_items(items, seed);
        let a = assignment(step, task);
        let estimator: &dyn TokenEstimator = if bpe {
            &BpeEstimator
        } else {
            &HeuristicEstimator
        };
        let cold = compile(&state, &a, &worker(), budget, estimator);
        let warm = compile(&state, &a, &worker(), budget, estimator);
        assert_eq!(
            cold, warm,
            "{items} items, seed {seed}: cold and warm differ"
        );
        let json = serde_json::to_string(&cold).expect("serialises");
        let got = digest(&json);
        if got != expected {
            failures.push(format!("{items} items, seed {seed}, {task:?}: {got}"));
        }
    }
    assert!(
        failures.is_empty(),
        "packages changed:\n{}",
        failures.join("\n")
    );
}
