//! Handoff fidelity (issue 9): on long offline runs, what the next worker must not
//! repeat or ignore reaches it, at every budget the targets name.

use baton_core::fidelity::{Category, FidelityCase, FidelityRow, run};
use baton_core::tokens::{BpeEstimator, TokenEstimator};

fn bpe() -> BpeEstimator {
    BpeEstimator
}

fn table(rows: &[FidelityRow]) -> String {
    let mut s = String::new();
    for r in rows {
        s.push_str(&format!(
            "steps {} budget {} volume {} (items {}, mean tokens {}, over budget {}):",
            r.case.steps, r.case.budget, r.case.volume, r.final_items, r.mean_tokens, r.over_budget
        ));
        for (c, t) in &r.tallies {
            s.push_str(&format!(
                " {}={:.3} ({}/{})",
                c.label(),
                t.fraction(),
                t.delivered,
                t.relevant
            ));
        }
        s.push('\n');
    }
    s
}

/// Issue 9's targets: at a budget of 800 or more, every warning of the predecessor,
/// at least 99% of the open high or critical issues and 95% of the relevant failed
/// attempts and decisions; at 300, the warnings and the assignment always.
fn misses(r: &FidelityRow) -> Vec<String> {
    let mut out = Vec::new();
    let mut need = |c: Category, min: f64| {
        let f = r.tally(c).fraction();
        if f < min {
            out.push(format!(
                "steps {} budget {} volume {}: {} {f:.3} < {min}",
                r.case.steps,
                r.case.budget,
                r.case.volume,
                c.label()
            ));
        }
    };
    need(Category::Warnings, 1.0);
    need(Category::Assignment, 1.0);
    if r.case.budget >= 800 {
        need(Category::OpenIssues, 0.99);
        need(Category::FailedAttempts, 0.95);
        need(Category::FoundingDecisions, 0.95);
        need(Category::ReversedDecisions, 0.95);
    }
    out
}

/// On 100-turn runs (the bench's length), the floors of the decisions, issues and
/// failed attempts together outgrew 800 tokens and 8–9% of the failed attempts in the
/// step's area were left out; records now come in a compact form until every floor fits.
#[test]
fn long_plans_still_deliver_warnings_issues_failed_attempts_and_decisions() {
    let est = bpe();
    let mut rows = Vec::new();
    for volume in [5, 40] {
        for steps in [10, 40] {
            for budget in [300, 800, 1600] {
                let case = FidelityCase {
                    turns: 100,
                    steps,
                    budget,
                    volume,
                };
                rows.push(run(&case, &est as &dyn TokenEstimator));
            }
        }
    }
    let misses: Vec<String> = rows.iter().flat_map(misses).collect();
    assert!(misses.is_empty(), "{}\n{}", misses.join("\n"), table(&rows));
}

#[test]
fn fidelity_runs_are_deterministic_and_measure_something() {
    let est = bpe();
    let case = FidelityCase {
        turns: 30,
        steps: 5,
        budget: 800,
        volume: 10,
    };
    let a = run(&case, &est);
    assert_eq!(a, run(&case, &est));
    for c in Category::ALL {
        assert!(
            a.tally(c).relevant > 0,
            "{c:?} never relevant:\n{}",
            table(std::slice::from_ref(&a))
        );
    }
    assert!(a.final_items > 300, "{}", a.final_items);
}
