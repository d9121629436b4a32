//! The line's reconciler rules under the invariants.

use super::*;
use crate::compiler::{Assignment, AssignmentKind, WorkerProfile};
use crate::ids::{RunId, WorkerId};
use crate::line::{DraftStep, FindingSeverity, VerdictKind, synthesis};
use crate::reconciler::WorkSeen;

fn worker(id: &str, family: &str) -> WorkerProfile {
    WorkerProfile {
        id: WorkerId::new(id),
        model: format!("{family}/{id}"),
        family: family.into(),
        role: None,
    }
}

fn assignment() -> Assignment {
    Assignment {
        kind: AssignmentKind::Step,
        step_id: Some("T1".into()),
        task: "check it".into(),
    }
}

/// Runs `f` with a line turn of `who` (family `family`) in `seat`, at turn `turn`.
fn at<R>(who: &str, family: &str, seat: &str, turn: u32, f: impl FnOnce(&LineTurn<'_>) -> R) -> R {
    let w = worker(who, family);
    let a = assignment();
    let ctx = TurnContext {
        worker: &w,
        turn,
        at: Timestamp(100 + i64::from(turn)),
        assignment: &a,
        seen: WorkSeen::default(),
    };
    let seat = SeatId::new(seat);
    let station = if seat.as_str().starts_with("checkpoint.") {
        "build"
    } else {
        "review"
    };
    f(&LineTurn {
        ctx: &ctx,
        station,
        seat: &seat,
        round: turn,
        step: station.eq("build").then_some("T1"),
    })
}

fn claim(severity: FindingSeverity, what: &str, location: &str) -> FindingClaim {
    FindingClaim {
        severity,
        what: what.into(),
        location: location.into(),
    }
}

fn state() -> ExecutionState {
    ExecutionState::new(RunId("r".into()), "add rate limiting", &["limit".into()])
}

const LEAK: &str = "the limiter never frees the bucket of an expired key";

#[test]
fn a_finding_is_stamped_by_the_engine_and_a_restatement_is_a_voice_whose_stricter_severity_wins() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    let created = at("gpt", "openai", "review.breadth", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Minor, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    assert_eq!(created, ["N1"]);
    let f = &s.findings[0];
    assert_eq!(f.provenance.recorded_by.as_str(), "gpt");
    assert_eq!(f.provenance.recorded_at, Timestamp(101));
    assert_eq!((f.family.as_str(), f.round), ("openai", 1));

    let created = at("glm", "zhipu", "review.deep-rounds", 2, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(
                FindingSeverity::Major,
                "The limiter never frees the bucket of an expired key.",
                "src/limit.rs",
            )],
            &mut out,
        )
    });
    assert!(created.is_empty(), "a restatement is not new");
    let f = &s.findings[0];
    assert_eq!(s.findings.len(), 1);
    assert_eq!(f.severity, FindingSeverity::Major);
    assert_eq!(f.raised_as, FindingSeverity::Minor);
    assert_eq!(f.voices[0].by.as_str(), "glm");
    assert_eq!(out.count(Action::Reaffirmed), 1);
    // A milder restatement never lowers it.
    at("opus", "anthropic", "review.fresh-eyes", 3, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Nit, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    assert_eq!(s.findings[0].severity, FindingSeverity::Major);
}

#[test]
fn a_seat_that_does_not_check_work_cannot_raise_a_finding() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("gpt", "openai", "build.hard-step", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "x")],
            &mut out,
        )
    });
    assert!(s.findings.is_empty());
    assert!(
        out.refusals[0].reason.contains("not by build.hard-step"),
        "{out:?}"
    );
}

#[test]
fn a_claimed_fix_does_not_close_a_finding_until_another_checking_worker_confirms_it() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("glm", "zhipu", "checkpoint.find", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    // Confirming before anyone claims a fix is refused.
    at("gpt", "openai", "checkpoint.confirm", 2, |t| {
        confirm_fixed(&mut s, t, "N1", None, &mut out)
    });
    assert!(s.findings[0].is_open());
    assert!(
        out.refusals
            .last()
            .unwrap()
            .reason
            .starts_with("nothing claims finding N1 fixed yet")
    );

    at("opus", "anthropic", "build.hard-step", 3, |t| {
        claim_fixed(
            &mut s,
            t,
            "N1",
            Some("buckets expire with their key"),
            &mut out,
        )
    });
    assert!(s.findings[0].is_open(), "a claim never closes a finding");
    assert_eq!(
        s.findings[0].fix_claimed.as_ref().unwrap().by.as_str(),
        "opus"
    );

    // The fixer, a builder seat and the finder cannot confirm it.
    at("opus", "anthropic", "checkpoint.confirm", 4, |t| {
        confirm_fixed(&mut s, t, "N1", None, &mut out)
    });
    at("gpt", "openai", "build.rote-step", 4, |t| {
        confirm_fixed(&mut s, t, "N1", None, &mut out)
    });
    at("glm", "zhipu", "checkpoint.confirm", 4, |t| {
        confirm_fixed(&mut s, t, "N1", None, &mut out)
    });
    assert!(s.findings[0].is_open());
    let reasons: Vec<&str> = out.refusals.iter().map(|r| r.reason.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("opus claimed the fix of N1 and cannot confirm it"))
    );
    assert!(reasons.iter().any(|r| r.contains("not by build.rote-step")));
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("glm found N1 at checkpoint.find"))
    );

    at("gpt", "openai", "checkpoint.confirm", 5, |t| {
        confirm_fixed(&mut s, t, "N1", Some("bucket dropped in test"), &mut out)
    });
    let f = &s.findings[0];
    assert_eq!(f.status, FindingStatus::Fixed);
    let closed = f.closed.as_ref().unwrap();
    assert_eq!(
        closed.by,
        ClosedBy::Confirmed {
            seat: SeatId::new("checkpoint.confirm"),
            worker: WorkerId::new("gpt")
        }
    );
    assert_eq!(closed.turn, 5);
    assert_eq!(out.count(Action::Verified), 1);
}

#[test]
fn a_builders_resolved_issues_naming_findings_are_claimed_fixes_and_the_rest_stay_issues() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("glm", "zhipu", "checkpoint.find", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    let mut result = crate::claims::WorkerResult {
        resolved_issues: ["N1", "I3", "N9"]
            .map(|id| crate::claims::ResolutionClaimInput {
                issue: format!(" {id} "),
                note: Some(format!("fixed {id}")),
            })
            .to_vec(),
        ..Default::default()
    };
    at("opus", "anthropic", "build.hard-step", 2, |t| {
        take_finding_fixes(&mut s, t, &mut result, &mut out)
    });
    let f = &s.findings[0];
    assert!(f.is_open(), "a claim never closes a finding");
    let claimed = f.fix_claimed.as_ref().unwrap();
    assert_eq!(
        (claimed.by.as_str(), claimed.note.as_deref()),
        ("opus", Some("fixed N1"))
    );
    // An issue's id, and an id no finding has, are left to the issue rules.
    let left: Vec<&str> = result
        .resolved_issues
        .iter()
        .map(|r| r.issue.trim())
        .collect();
    assert_eq!(left, ["I3", "N9"]);
}

#[test]
fn a_gate_confirms_a_claimed_fix_and_only_a_claimed_one() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("glm", "zhipu", "review.breadth", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        );
        confirm_by_gate(&mut s, t.ctx, "N1", "tests", &mut out);
    });
    assert!(s.findings[0].is_open());
    at("opus", "anthropic", "build.hard-step", 2, |t| {
        claim_fixed(&mut s, t, "N1", None, &mut out);
        confirm_by_gate(&mut s, t.ctx, "N1", "tests", &mut out);
    });
    assert_eq!(s.findings[0].status, FindingStatus::Fixed);
    assert_eq!(
        s.findings[0].closed.as_ref().unwrap().by,
        ClosedBy::Gate {
            gate: "tests".into()
        }
    );
}

#[test]
fn only_the_lead_or_a_human_dismisses_a_finding_and_with_a_reason() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("glm", "zhipu", "review.breadth", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[
                claim(FindingSeverity::Minor, LEAK, "src/limit.rs"),
                claim(FindingSeverity::Nit, "the name is vague", "src/api.rs"),
            ],
            &mut out,
        );
        dismiss(&mut s, t, "N1", "not an issue", &mut out);
    });
    assert!(s.findings[0].is_open());
    at("opus", "anthropic", "lead.review", 2, |t| {
        dismiss(&mut s, t, "N1", "  ", &mut out);
        dismiss(&mut s, t, "N1", "keys never expire in this API", &mut out);
    });
    assert_eq!(s.findings[0].status, FindingStatus::Dismissed);
    assert_eq!(
        s.findings[0].closed.as_ref().unwrap().note.as_deref(),
        Some("keys never expire in this API")
    );
    dismiss_by_human(&mut s, 3, Timestamp(7), "N2", "fine as is", &mut out);
    assert_eq!(s.findings[1].closed.as_ref().unwrap().by, ClosedBy::Human);
    let reasons: Vec<&str> = out.refusals.iter().map(|r| r.reason.as_str()).collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(reasons[0].starts_with("only the lead or a human dismisses a finding"));
    assert_eq!(reasons[1], "a dismissal needs a reason");
    // A closed finding stays closed.
    at("opus", "anthropic", "build.step", 4, |t| {
        claim_fixed(&mut s, t, "N1", None, &mut out)
    });
    assert_eq!(
        out.refusals.last().unwrap().reason,
        "finding N1 is already dismissed"
    );
}

#[test]
fn the_same_words_after_a_confirmed_fix_are_a_new_finding() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("glm", "zhipu", "review.breadth", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    at("opus", "anthropic", "build.step", 2, |t| {
        claim_fixed(&mut s, t, "N1", None, &mut out)
    });
    at("gpt", "openai", "review.deep-rounds", 3, |t| {
        confirm_fixed(&mut s, t, "N1", None, &mut out)
    });
    let created = at("glm", "zhipu", "review.breadth", 4, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    assert_eq!(
        created,
        ["N2"],
        "a regression is raised again, not folded into the fixed one"
    );
}

fn steps(titles: &[&str]) -> PlanDraft {
    PlanDraft {
        steps: titles
            .iter()
            .map(|t| DraftStep {
                title: t.to_string(),
                tags: vec!["standard".into()],
            })
            .collect(),
        rationale: None,
    }
}

#[test]
fn nothing_changes_a_locked_plan() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    let p1 = at("gpt", "openai", "plan.co-draft", 1, |t| {
        propose_plan(
            &mut s,
            t,
            &steps(&["bucket per key", "429 with Retry-After"]),
            &[],
            &mut out,
        )
    });
    let p2 = at("opus", "anthropic", "plan.co-draft", 1, |t| {
        propose_plan(&mut s, t, &steps(&["middleware", "tests"]), &[], &mut out)
    });
    let merged = at("opus", "anthropic", "lead.plan", 2, |t| {
        let from = [p1.clone().unwrap(), p2.clone().unwrap()];
        propose_plan(
            &mut s,
            t,
            &steps(&["bucket per key", "middleware", "tests"]),
            &from,
            &mut out,
        )
    })
    .unwrap();
    assert_eq!(merged, "P3");
    assert_eq!(s.plan_versions[2].from, ["P1", "P2"]);
    at("opus", "anthropic", "lead.plan", 3, |t| {
        assert!(lock_plan(&mut s, t.ctx, &merged, &mut out));
    });
    let lock = s.plan_lock.clone().unwrap();
    assert_eq!(lock.content_hash, plan_hash(&s.plan_versions[2].steps));
    assert_eq!(s.locked_plan().unwrap().id, "P3");
    assert_eq!(lock_holds(&s), Ok(()));

    let before = s.clone();
    let mut after = ReconcileOutcome::default();
    at("glm", "zhipu", "plan.scrutiny", 4, |t| {
        assert_eq!(
            propose_plan(&mut s, t, &steps(&["something else"]), &[], &mut after),
            None
        );
        assert!(!lock_plan(&mut s, t.ctx, "P1", &mut after));
    });
    assert_eq!(s, before, "the locked plan and its versions are unchanged");
    assert_eq!(after.refusals.len(), 2);
    assert_eq!(after.warnings.len(), 2);
    assert!(
        after.warnings[0].starts_with(
            "glm (plan.scrutiny) proposed a plan after the lock; refused: the plan is locked at P3"
        ),
        "{:?}",
        after.warnings
    );

    // A locked version whose steps were changed behind the reconciler is caught.
    s.plan_versions[2].steps[0].title = "no limit at all".into();
    assert!(lock_holds(&s).unwrap_err().contains("no longer hashes"));
}

#[test]
fn an_empty_plan_or_an_unknown_source_version_is_refused() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("gpt", "openai", "plan.co-draft", 1, |t| {
        assert_eq!(propose_plan(&mut s, t, &steps(&[]), &[], &mut out), None);
        assert_eq!(
            propose_plan(&mut s, t, &steps(&["a"]), &["P9".into()], &mut out),
            None
        );
        assert!(!lock_plan(&mut s, t.ctx, "P1", &mut out));
    });
    assert!(s.plan_versions.is_empty() && s.plan_lock.is_none());
    assert_eq!(out.refusals.len(), 3);
}

#[test]
fn a_verdict_records_the_synthesis_with_the_engines_provenance() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("glm", "zhipu", "review.breadth", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    let refs: Vec<&crate::line::Finding> = s.findings.iter().collect();
    let synthesis = synthesis::synthesize(&refs, &[]);
    let id = at("engine", "engine", "lead.synthesis", 2, |t| {
        record_verdict(&mut s, t.ctx, "synthesis", &synthesis, &mut out)
    });
    let v = &s.verdicts[0];
    assert_eq!((id.as_str(), v.round), ("V1", 1));
    assert_eq!(v.verdict, VerdictKind::NeedsChanges);
    assert!(v.fix_round);
    assert_eq!(v.findings, ["N1"]);
    assert_eq!(v.provenance.recorded_by.as_str(), "engine");
}

#[test]
fn line_records_survive_the_stores_diff_and_parts() {
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    let empty = s.clone();
    at("glm", "zhipu", "review.breadth", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        );
    });
    at("gpt", "openai", "plan.co-draft", 1, |t| {
        propose_plan(&mut s, t, &steps(&["a"]), &[], &mut out);
        lock_plan(&mut s, t.ctx, "P1", &mut out);
    });
    let changes = s.diff(&empty);
    let kinds: Vec<&str> = changes.iter().map(|c| c.kind.as_str()).collect();
    assert_eq!(kinds, ["finding", "plan_version"]);
    let rebuilt = ExecutionState::from_parts(s.header(), changes).unwrap();
    assert_eq!(rebuilt, s);
}

#[test]
fn a_state_without_line_records_serialises_as_before() {
    let s = state();
    let text = serde_json::to_string(&s).unwrap();
    for key in [
        "findings",
        "verdicts",
        "plan_versions",
        "plan_lock",
        "\"line\"",
    ] {
        assert!(!text.contains(key), "{key} in {text}");
    }
    let header = serde_json::to_string(&s.header()).unwrap();
    assert!(!header.contains("plan_lock"));
}

#[test]
fn a_round_converges_when_it_raised_nothing_new() {
    use crate::line::{Convergence, round_converged};
    let mut s = state();
    let mut out = ReconcileOutcome::default();
    at("glm", "zhipu", "review.breadth", 1, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Minor, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    // Round 2 only restates N1 (at MAJOR).
    at("gpt", "openai", "review.deep-rounds", 2, |t| {
        raise_findings(
            &mut s,
            t,
            &[claim(FindingSeverity::Major, LEAK, "src/limit.rs")],
            &mut out,
        )
    });
    assert!(!round_converged(&s, "review", 1, Convergence::NothingNew));
    assert!(round_converged(&s, "review", 1, Convergence::NoNewMajor));
    assert!(round_converged(&s, "review", 2, Convergence::NothingNew));
}

/// The locked plan becomes the run's plan, by the reconciler: its steps numbered `T1` …
/// with their titles and tags, a tag that is no step tag dropped with a warning; with no
/// lock nothing changes.
#[test]
fn the_locked_plan_becomes_the_runs_plan() {
    let mut s = state();
    let before = s.plan.clone();
    let mut out = ReconcileOutcome::default();
    assert!(!adopt_locked_plan(&mut s, &mut out));
    assert_eq!(s.plan, before);
    let mut draft = steps(&["bucket per key", "tests"]);
    draft.steps[1].tags = vec!["light".into(), "Not A Tag".into()];
    let id = at("opus", "anthropic", "lead.plan", 1, |t| {
        propose_plan(&mut s, t, &draft, &[], &mut out)
    })
    .unwrap();
    at("opus", "anthropic", "lead.plan", 2, |t| {
        assert!(lock_plan(&mut s, t.ctx, &id, &mut out));
    });
    assert!(adopt_locked_plan(&mut s, &mut out));
    let plan: Vec<(&str, &str, Vec<&str>)> = s
        .plan
        .iter()
        .map(|p| {
            (
                p.id.as_str(),
                p.title.as_str(),
                p.tags.iter().map(|t| t.as_str()).collect(),
            )
        })
        .collect();
    assert_eq!(
        plan,
        [
            ("T1", "bucket per key", vec!["standard"]),
            ("T2", "tests", vec!["light"])
        ]
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("step T2 of plan P1: tag \"Not A Tag\" dropped")),
        "{:?}",
        out.warnings
    );
}
