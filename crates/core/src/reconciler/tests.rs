use super::*;
use crate::claims::{
    ArtifactClaim, ArtifactMention, DecisionClaim, FailedAttemptClaim, IssueClaim,
    ResolutionClaimInput, parse_worker_result,
};
use crate::compiler::AssignmentKind;
use crate::ids::{RunId, WorkerId};
use crate::state::Severity;

fn worker(id: &str) -> WorkerProfile {
    WorkerProfile {
        id: WorkerId::new(id),
        model: format!("mock/{id}"),
        family: "mock".into(),
        role: None,
    }
}

fn step(id: &str) -> Assignment {
    Assignment {
        kind: AssignmentKind::Step,
        step_id: Some(id.into()),
        task: "do it".into(),
    }
}

fn state() -> ExecutionState {
    ExecutionState::new(
        RunId("r1".into()),
        "Build an API",
        &["one".into(), "two".into()],
    )
}

fn result(last: &str) -> WorkerResult {
    WorkerResult {
        summary: "did it".into(),
        last_action: last.into(),
        ..WorkerResult::default()
    }
}

fn report(last: &str, next: &str) -> HandoffReport {
    HandoffReport {
        notes: "notes".into(),
        last_action: last.into(),
        next_action: next.into(),
        ..HandoffReport::default()
    }
}

fn run_turn(
    s: &mut ExecutionState,
    who: &str,
    turn: u32,
    res: &WorkerResult,
    rep: &HandoffReport,
    verifier: &dyn Verifier,
) -> ReconcileOutcome {
    let w = worker(who);
    let a = step("T1");
    let ctx = TurnContext {
        worker: &w,
        turn,
        at: Timestamp(1000 + i64::from(turn)),
        assignment: &a,
        seen: Default::default(),
    };
    reconcile(s, &ctx, res, rep, Vec::new(), verifier)
}

#[test]
fn provenance_is_stamped_by_the_engine_not_the_claim() {
    let mut s = state();
    let raw = r#"{"summary":"s","last_action":"wrote schema",
        "decisions":[{"text":"Use PostgreSQL","reason":"relational data","recorded_by":"the-model"}]}"#;
    let parsed = parse_worker_result(raw).unwrap();
    let w = worker("w7");
    let a = step("T1");
    let ctx = TurnContext {
        worker: &w,
        turn: 3,
        at: Timestamp(42),
        assignment: &a,
        seen: Default::default(),
    };
    let out = reconcile(
        &mut s,
        &ctx,
        &parsed.claim,
        &report("wrote schema", "next"),
        parsed.refusals,
        &NoVerifier,
    );
    let d = &s.decisions[0];
    assert_eq!(d.provenance.recorded_by, WorkerId::new("w7"));
    assert_eq!(d.provenance.model, "mock/w7");
    assert_eq!(d.provenance.turn, 3);
    assert_eq!(d.provenance.recorded_at, Timestamp(42));
    assert_eq!(out.refusals.len(), 1);
    assert!(out.refusals[0].claim.ends_with("recorded_by"));
}

#[test]
fn a_claimed_resolution_never_closes_an_issue() {
    let mut s = state();
    let mut r = result("found a bug");
    r.issues.push(IssueClaim {
        title: "Refresh token rotation is not specified".into(),
        severity: Severity::High,
        detail: None,
        gate: None,
    });
    run_turn(
        &mut s,
        "w1",
        0,
        &r,
        &report("found a bug", "fix"),
        &NoVerifier,
    );

    let mut r2 = result("fixed");
    r2.resolved_issues.push(ResolutionClaimInput {
        issue: "I1".into(),
        note: Some("done".into()),
    });
    let out = run_turn(
        &mut s,
        "w2",
        1,
        &r2,
        &report("fixed", "review"),
        &NoVerifier,
    );
    let issue = &s.issues[0];
    assert_eq!(issue.status, IssueStatus::Open);
    assert_eq!(
        issue.resolution_claimed_by.as_ref().unwrap().by,
        WorkerId::new("w2")
    );
    assert!(issue.verified_by.is_none());
    assert_eq!(out.count(Action::ResolutionClaimed), 1);
    assert!(out.warnings.iter().any(|w| w.contains("stays open")));
}

struct ConfirmAll;
impl Verifier for ConfirmAll {
    fn verify_artifact(&self, _: &Artifact, _: &ArtifactVersion) -> Verification {
        Verification::Verified {
            by: "test-verifier".into(),
            content_hash: None,
        }
    }
    fn verify_resolution(&self, _: &Issue, _: &ResolutionClaim) -> Verification {
        Verification::Verified {
            by: "gate:tests".into(),
            content_hash: None,
        }
    }
}

#[test]
fn only_a_verifier_sets_verified_and_closes_issues() {
    let mut s = state();
    let mut r = result("x");
    r.issues.push(IssueClaim {
        title: "Flaky test".into(),
        severity: Severity::Low,
        detail: None,
        gate: None,
    });
    r.artifacts.push(ArtifactClaim {
        name: "a.md".into(),
        kind: None,
        description: "d".into(),
        content: None,
    });
    run_turn(&mut s, "w1", 0, &r, &report("x", "y"), &NoVerifier);
    assert!(!s.artifacts[0].latest().verified);

    let mut r2 = result("x");
    r2.resolved_issues.push(ResolutionClaimInput {
        issue: "Flaky test".into(),
        note: None,
    });
    r2.artifacts.push(ArtifactClaim {
        name: "a.md".into(),
        kind: None,
        description: "d2".into(),
        content: None,
    });
    run_turn(&mut s, "w2", 1, &r2, &report("x", "y"), &ConfirmAll);
    assert_eq!(s.issues[0].status, IssueStatus::Resolved);
    assert_eq!(s.issues[0].verified_by.as_deref(), Some("gate:tests"));
    assert!(s.artifacts[0].latest().verified);
    assert!(
        !s.artifacts[0].versions[0].verified,
        "old versions keep their own status"
    );
}

#[test]
fn artifacts_gain_versions_and_mentions_never_overwrite() {
    let mut s = state();
    let claim = |d: &str| ArtifactClaim {
        name: "schema.sql".into(),
        kind: Some("sql".into()),
        description: d.into(),
        content: Some(d.into()),
    };
    let mut r = result("x");
    r.artifacts.push(claim("v1"));
    run_turn(&mut s, "w1", 0, &r, &report("x", "y"), &NoVerifier);
    let mut r = result("x");
    r.artifacts.push(claim("v2"));
    run_turn(&mut s, "w2", 1, &r, &report("x", "y"), &NoVerifier);

    let mut rep = report("x", "y");
    rep.artifacts.push(ArtifactMention {
        name: "SCHEMA.sql".into(),
        note: Some("totally rewritten".into()),
    });
    let out = run_turn(&mut s, "w3", 2, &result("x"), &rep, &NoVerifier);
    let art = &s.artifacts[0];
    assert_eq!(art.versions.len(), 2);
    assert_eq!(art.latest().description, "v2");
    assert_eq!(art.versions[0].description, "v1");
    assert_eq!(art.creator(), &WorkerId::new("w1"));
    assert_eq!(art.modifiers(), vec![&WorkerId::new("w2")]);
    assert_eq!(art.mentions.len(), 1);
    assert!(out.warnings.iter().any(|w| w.contains("did not list")));
}

#[test]
fn a_report_cannot_invent_an_artifact() {
    let mut s = state();
    let mut rep = report("x", "y");
    rep.artifacts.push(ArtifactMention {
        name: "ghost.md".into(),
        note: None,
    });
    let out = run_turn(&mut s, "w1", 0, &result("x"), &rep, &NoVerifier);
    assert!(s.artifacts.is_empty());
    assert_eq!(out.refusals.len(), 1);
}

#[test]
fn restatements_are_reaffirmations_not_new_records() {
    let mut s = state();
    let mut r = result("x");
    r.decisions.push(DecisionClaim {
        text: "Use PostgreSQL 16 as the primary datastore".into(),
        reason: Some("relational".into()),
    });
    r.failed_attempts.push(FailedAttemptClaim {
        what: "Storing sessions in process memory".into(),
        why: "lost on restart".into(),
    });
    // Raising a failed attempt, a worker must name the step for its summary to count.
    r.steps_completed.push("T1".into());
    run_turn(&mut s, "w1", 0, &r, &report("x", "y"), &NoVerifier);

    let mut r2 = result("x");
    r2.steps_completed.push("T1".into());
    r2.decisions.push(DecisionClaim {
        text: "use postgresql 16 as the primary datastore.".into(),
        reason: None,
    });
    let mut rep2 = report("x", "y");
    rep2.failed_attempts.push(FailedAttemptClaim {
        what: "Sessions stored in process memory".into(),
        why: "they vanish on restart".into(),
    });
    let out = run_turn(&mut s, "w2", 1, &r2, &rep2, &NoVerifier);
    assert_eq!(s.decisions.len(), 1);
    assert_eq!(s.failed_attempts.len(), 1);
    assert_eq!(s.decisions[0].reaffirmed.len(), 1);
    assert_eq!(
        s.failed_attempts[0].reaffirmed[0].wording.as_deref(),
        Some("Sessions stored in process memory")
    );
    // The decision, the failed attempt, and the step's completed work (both turns'
    // summary, "did it", on T1).
    assert_eq!(out.count(Action::Reaffirmed), 3);
    assert_eq!(s.completed.len(), 1);
    assert_eq!(s.completed[0].reaffirmed.len(), 1);
    assert!(
        out.warnings.is_empty(),
        "a restatement without reason is not a reasonless decision: {:?}",
        out.warnings
    );
}

#[test]
fn discrepancies_become_warnings() {
    let mut s = state();
    let mut r = result("wrote the schema");
    r.decisions.push(DecisionClaim {
        text: "Use UUID primary keys".into(),
        reason: None,
    });
    r.steps_completed.push("T2".into());
    let mut rep = report("designed the login endpoint", "next");
    rep.notes = String::new();
    let out = run_turn(&mut s, "w1", 0, &r, &rep, &NoVerifier);
    let joined = out.warnings.join("\n");
    assert!(joined.contains("without a reason"), "{joined}");
    assert!(joined.contains("last action differs"), "{joined}");
    assert!(joined.contains("no notes"), "{joined}");
    assert!(joined.contains("T2 which was not assigned"), "{joined}");
    assert_eq!(s.last_action.as_ref().unwrap().text, "wrote the schema");
}

#[test]
fn failed_attempts_are_append_only() {
    let mut s = state();
    let mut r = result("x");
    r.failed_attempts.push(FailedAttemptClaim {
        what: "Tried SQLite".into(),
        why: "no row locks".into(),
    });
    run_turn(&mut s, "w1", 0, &r, &report("x", "y"), &NoVerifier);
    let before = s.failed_attempts.clone();
    // No claim type can express deletion; a later turn with none leaves them intact.
    run_turn(
        &mut s,
        "w2",
        1,
        &result("x"),
        &report("x", "y"),
        &NoVerifier,
    );
    assert_eq!(s.failed_attempts, before);
    // A claim that tries to smuggle a deletion field has it dropped, with a warning,
    // and deletes nothing.
    let parsed =
        parse_worker_result(r#"{"summary":"s","last_action":"a","delete_failed_attempts":["F1"]}"#)
            .unwrap();
    assert!(parsed.warnings[0].contains("delete_failed_attempts"));
    run_turn(
        &mut s,
        "w2",
        2,
        &parsed.claim,
        &report("a", "b"),
        &NoVerifier,
    );
    assert_eq!(s.failed_attempts, before);
}

#[test]
fn a_summary_with_no_completed_list_is_recorded_as_the_steps_completed_work() {
    // A real model filled only the required fields: after six steps the record had
    // no completed work at all.
    let mut s = state();
    let mut r = result("wrote the schema");
    r.summary = "Designed the users and tasks tables".into();
    run_turn(
        &mut s,
        "w1",
        0,
        &r,
        &report("wrote the schema", "next"),
        &NoVerifier,
    );
    assert_eq!(s.completed.len(), 1);
    assert_eq!(s.completed[0].text, "Designed the users and tasks tables");
    assert_eq!(s.completed[0].step.as_deref(), Some("T1"));
    // An explicit list is the record; the summary is not added beside it.
    let mut r = result("x");
    r.completed.push("Added the index".into());
    run_turn(&mut s, "w1", 1, &r, &report("x", "y"), &NoVerifier);
    let texts: Vec<&str> = s.completed.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(
        texts,
        ["Designed the users and tasks tables", "Added the index"]
    );
    // A long final message: its first paragraph, clipped.
    let mut r = result("x");
    r.summary = format!(
        "{}\n\nMore detail that is not the entry.",
        "Rewrote the parser. ".repeat(40)
    );
    run_turn(&mut s, "w1", 2, &r, &report("x", "y"), &NoVerifier);
    let last = &s.completed.last().unwrap().text;
    assert!(
        last.starts_with("Rewrote the parser.") && last.ends_with('…'),
        "{last}"
    );
    assert!(last.chars().count() <= 400 && !last.contains("More detail"));
}

#[test]
fn a_step_claimed_with_its_title_counts_as_the_step() {
    let mut s = state();
    let mut r = result("x");
    r.steps_completed = vec!["T1 one".into(), "T1: one".into()];
    let out = run_turn(&mut s, "w1", 0, &r, &report("x", "y"), &NoVerifier);
    assert!(
        !out.warnings
            .iter()
            .any(|w| w.contains("claimed completion")),
        "{:?}",
        out.warnings
    );
    // Another step named with its title is still named as that step.
    let mut r = result("x");
    r.steps_completed = vec!["T2 two".into()];
    let out = run_turn(&mut s, "w1", 1, &r, &report("x", "y"), &NoVerifier);
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("completion of T2 which")),
        "{:?}",
        out.warnings
    );
}

fn gate(name: &str, passed: bool, commit: &str) -> crate::turn::GateResult {
    crate::turn::GateResult {
        name: name.into(),
        command: "cargo test".into(),
        commit: commit.into(),
        exit_code: Some(if passed { 0 } else { 101 }),
        passed,
        duration_ms: 5,
        output_tail: if passed {
            "ok".into()
        } else {
            "test parse ... FAILED".into()
        },
        output_file: None,
    }
}

#[test]
fn a_failing_gate_is_a_fact_for_the_next_worker_and_a_passing_gate_closes_what_names_it() {
    let mut s = state();
    // A worker names the gate that proves its issue resolved.
    let mut r = result("wrote code");
    r.issues.push(IssueClaim {
        title: "Input validation is untested".into(),
        severity: Severity::Medium,
        detail: None,
        gate: Some("tests".into()),
    });
    r.resolved_issues.push(ResolutionClaimInput {
        issue: "I1".into(),
        note: Some("tests pass, trust me".into()),
    });
    run_turn(
        &mut s,
        "w1",
        0,
        &r,
        &report("wrote code", "test"),
        &NoVerifier,
    );
    assert_eq!(
        s.issues[0].status,
        IssueStatus::Open,
        "a claimed pass closes nothing"
    );

    let w = worker("w1");
    let a = step("T1");
    let ctx = TurnContext {
        worker: &w,
        turn: 1,
        at: Timestamp(9),
        assignment: &a,
        seen: Default::default(),
    };
    let mut out = ReconcileOutcome::default();
    apply_gates(
        &mut s,
        &ctx,
        &[gate("tests", false, "abc123def4567890")],
        &mut out,
    );
    assert_eq!(s.issues.len(), 2);
    let failing = &s.issues[1];
    assert_eq!(failing.gate.as_deref(), Some("tests"));
    assert_eq!(failing.provenance.recorded_by.as_str(), "gate:tests");
    assert!(failing.detail.contains("exit code 101") && failing.detail.contains("FAILED"));
    assert_eq!(s.issues[0].status, IssueStatus::Open);

    let ctx = TurnContext {
        worker: &w,
        turn: 2,
        at: Timestamp(10),
        assignment: &a,
        seen: Default::default(),
    };
    let mut out = ReconcileOutcome::default();
    apply_gates(
        &mut s,
        &ctx,
        &[gate("tests", true, "fedcba9876543210")],
        &mut out,
    );
    for issue in &s.issues {
        assert_eq!(issue.status, IssueStatus::Resolved, "{}", issue.id);
        assert_eq!(
            issue.verified_by.as_deref(),
            Some("gate:tests@fedcba987654")
        );
    }
    assert_eq!(out.count(Action::Verified), 2);
}

#[test]
fn a_gate_that_keeps_failing_shows_its_newest_output_to_the_next_worker() {
    let mut s = state();
    let w = worker("w1");
    let a = step("T1");
    for (turn, tail) in [
        (0u32, "first failure: 3 tests"),
        (1, "second failure: only test_login"),
    ] {
        let ctx = TurnContext {
            worker: &w,
            turn,
            at: Timestamp(9),
            assignment: &a,
            seen: Default::default(),
        };
        let mut g = gate("tests", false, "abc123def4567890");
        g.output_tail = tail.into();
        apply_gates(&mut s, &ctx, &[g], &mut ReconcileOutcome::default());
    }
    assert_eq!(s.issues.len(), 1, "one issue per failing gate, reaffirmed");
    let p = crate::compiler::compile(&s, &a, &w, 2000, &crate::tokens::HeuristicEstimator);
    assert!(
        p.text.contains("second failure: only test_login"),
        "{}",
        p.text
    );
    assert!(!p.text.contains("first failure"), "{}", p.text);
    assert!(p.text.contains("still failing at turn 1"), "{}", p.text);
}

/// One committed turn on T1, reconciled and completed as the engine does it.
fn complete_turn(
    s: &mut ExecutionState,
    turn: u32,
    res: &WorkerResult,
    seen: WorkSeen,
) -> (StepEnd, ReconcileOutcome) {
    let w = worker("w1");
    let a = step("T1");
    let ctx = TurnContext {
        worker: &w,
        turn,
        at: Timestamp(1000 + i64::from(turn)),
        assignment: &a,
        seen,
    };
    let rep = report("x", "y");
    let mut out = reconcile(s, &ctx, res, &rep, Vec::new(), &NoVerifier);
    let end = complete_step(s, &ctx, res, &rep, &mut out);
    (end, out)
}

/// Regression (issue 9, item 3): "I could not do this step at all; nothing was
/// produced", with an issue saying so, completed the step and recorded the sentence as
/// the step's completed work.
#[test]
fn a_report_of_failure_is_no_evidence_of_work_and_is_not_recorded_as_work() {
    let mut s = state();
    let mut r = result("read the briefing");
    r.summary = "I could not do this step at all; nothing was produced.".into();
    r.issues.push(IssueClaim {
        title: "The spec is missing".into(),
        detail: None,
        severity: Severity::High,
        gate: None,
    });
    let (end, out) = complete_turn(&mut s, 0, &r, WorkSeen::Claims);
    assert_eq!(end, StepEnd::Open);
    assert_eq!(s.plan[0].status, crate::state::StepStatus::Pending);
    assert!(s.completed.is_empty(), "{:?}", s.completed);
    assert_eq!(s.issues.len(), 1, "the issue is still recorded");
    let warning = out
        .warnings
        .iter()
        .find(|w| w.contains("stays open"))
        .expect("a warning");
    assert!(
        warning.contains("the summary reports a failure (\"i could not\")"),
        "{warning}"
    );
    let attempt = &s.plan[0].attempts[0];
    assert_eq!(attempt.turn, 0);
    assert_eq!(attempt.outcome, crate::state::AttemptOutcome::NoEvidence);
    assert!(
        attempt.detail.contains("I could not do this step at all")
            && attempt.detail.contains("raised I1"),
        "{}",
        attempt.detail
    );

    // Without the phrase, the issue alone still keeps a bare summary from counting…
    let mut r = result("x");
    r.summary = "Looked into the spec.".into();
    r.issues.push(IssueClaim {
        title: "The spec is missing".into(),
        detail: None,
        severity: Severity::High,
        gate: None,
    });
    assert_eq!(
        complete_turn(&mut s, 1, &r, WorkSeen::Claims).0,
        StepEnd::Open
    );
    // …unless the worker says it finished the step.
    r.steps_completed = vec!["T1: one".into()];
    assert_eq!(
        complete_turn(&mut s, 2, &r, WorkSeen::Claims).0,
        StepEnd::Done
    );
    assert_eq!(s.plan[0].done_at_turn, Some(2));
    assert_eq!(s.plan[0].attempts.len(), 2, "attempts stay on record");

    // A continuation has no step to leave open: its summary is its work, issues or not,
    // but a report of failure is still not recorded as work.
    let w = worker("w1");
    let a = Assignment {
        kind: AssignmentKind::Continuation,
        step_id: None,
        task: "continue".into(),
    };
    for (turn, summary) in [
        (3, "Narrowed the open issues."),
        (4, "I could not reproduce it."),
    ] {
        let ctx = TurnContext {
            worker: &w,
            turn,
            at: Timestamp(1),
            assignment: &a,
            seen: WorkSeen::Claims,
        };
        r.summary = summary.into();
        r.steps_completed.clear();
        let rep = report("x", "y");
        let mut out = reconcile(&mut s, &ctx, &r, &rep, Vec::new(), &NoVerifier);
        assert_eq!(
            complete_step(&mut s, &ctx, &r, &rep, &mut out),
            StepEnd::NoStep
        );
    }
    let texts: Vec<&str> = s.completed.iter().map(|c| c.text.as_str()).collect();
    assert!(texts.contains(&"Narrowed the open issues."), "{texts:?}");
    assert!(!texts.contains(&"I could not reproduce it."), "{texts:?}");
}

#[test]
fn evidence_of_work_is_completed_work_a_new_artifact_a_decision_or_a_plain_summary() {
    let done = |r: &WorkerResult| {
        let mut s = state();
        complete_turn(&mut s, 0, r, WorkSeen::Claims).0
    };
    let mut r = result("x");
    r.summary = String::new();
    assert_eq!(done(&r), StepEnd::Open, "nothing at all");
    r.completed = vec!["Wrote the schema".into()];
    assert_eq!(done(&r), StepEnd::Done);
    let mut r = result("x");
    r.summary = "I was unable to reach the database.".into();
    r.artifacts.push(ArtifactClaim {
        name: "schema.sql".into(),
        kind: None,
        description: "the tables".into(),
        content: None,
    });
    assert_eq!(
        done(&r),
        StepEnd::Done,
        "an artifact is work, whatever the summary"
    );
    let mut r = result("x");
    r.summary = "I couldn’t settle it, so I decided.".into();
    r.decisions.push(DecisionClaim {
        text: "Use PostgreSQL".into(),
        reason: Some("relational data".into()),
    });
    assert_eq!(done(&r), StepEnd::Done, "a decision is work");
    // A plain summary still stands for the work (models fill the one required field).
    assert_eq!(done(&result("x")), StepEnd::Done);

    // A refused artifact claim is not evidence.
    struct Refuse;
    impl Verifier for Refuse {
        fn verify_artifact(&self, _: &Artifact, _: &ArtifactVersion) -> Verification {
            Verification::Rejected {
                reason: "schema.sql is not in the turn's commit".into(),
            }
        }
        fn verify_resolution(&self, _: &Issue, _: &ResolutionClaim) -> Verification {
            Verification::Unverified
        }
    }
    let mut s = state();
    let mut r = result("x");
    r.summary = "I could not write it.".into();
    r.artifacts.push(ArtifactClaim {
        name: "schema.sql".into(),
        kind: None,
        description: "the tables".into(),
        content: None,
    });
    let w = worker("w1");
    let a = step("T1");
    let ctx = TurnContext {
        worker: &w,
        turn: 0,
        at: Timestamp(1),
        assignment: &a,
        seen: WorkSeen::Claims,
    };
    let rep = report("x", "y");
    let mut out = reconcile(&mut s, &ctx, &r, &rep, Vec::new(), &Refuse);
    assert_eq!(
        complete_step(&mut s, &ctx, &r, &rep, &mut out),
        StepEnd::Open
    );
    assert!(
        s.plan[0].attempts[0]
            .detail
            .contains("1 claim(s) refused, first: schema.sql is not in the turn's commit"),
        "{}",
        s.plan[0].attempts[0].detail
    );
}

#[test]
fn an_agents_final_message_is_no_evidence_without_a_commit() {
    let mut s = state();
    let r = result("looked at it");
    let (end, out) = complete_turn(&mut s, 0, &r, WorkSeen::Agent { committed: false });
    assert_eq!(end, StepEnd::Open);
    assert!(
        s.completed.is_empty(),
        "talk about a commit never made is not work"
    );
    assert!(
        out.warnings
            .iter()
            .any(|w| w.contains("no commit") && w.contains("committing")),
        "{:?}",
        out.warnings
    );
    let (end, _) = complete_turn(&mut s, 1, &r, WorkSeen::Agent { committed: true });
    assert_eq!(end, StepEnd::Done);
    assert_eq!(s.completed.len(), 1, "the message describes the commit");
}

#[test]
fn a_failed_turn_is_recorded_on_its_step_once() {
    let mut s = state();
    let w = worker("w2");
    let a = step("T2");
    let ctx = TurnContext {
        worker: &w,
        turn: 4,
        at: Timestamp(1),
        assignment: &a,
        seen: WorkSeen::Claims,
    };
    let error = format!(
        "execute call failed: server_error: {}",
        "overloaded ".repeat(100)
    );
    record_failed_turn(&mut s, &ctx, &error);
    record_failed_turn(&mut s, &ctx, &error);
    let attempts = &s.plan[1].attempts;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].worker.as_str(), "w2");
    assert_eq!(attempts[0].outcome, crate::state::AttemptOutcome::Failed);
    assert!(
        attempts[0]
            .detail
            .starts_with("execute call failed: server_error: overloaded")
    );
    assert!(attempts[0].detail.chars().count() <= 300);
    assert!(s.plan[0].attempts.is_empty());
}

#[test]
fn only_first_person_failure_phrases_make_a_summary_a_report_of_failure() {
    assert_eq!(
        failure_phrase("I couldn’t find the spec."),
        Some("i couldn't")
    );
    assert_eq!(
        failure_phrase("Nothing was produced."),
        Some("nothing was produced")
    );
    assert_eq!(
        failure_phrase("Fixed the parser, which could not read empty files."),
        None
    );
    assert_eq!(
        failure_phrase("Done.\n\nI could not add tests: no runner."),
        None
    );
}

#[test]
fn a_resolution_by_title_never_lands_on_the_opposite_issue() {
    // Regression: "is rate limited" resolved matched the open issue "is not rate limited".
    let mut s = state();
    let mut r = result("found it");
    r.issues.push(IssueClaim {
        title: "Login endpoint is not rate limited".into(),
        severity: Severity::Critical,
        detail: None,
        gate: None,
    });
    run_turn(&mut s, "w1", 0, &r, &report("found it", "fix"), &NoVerifier);

    let mut r2 = result("checked");
    r2.resolved_issues.push(ResolutionClaimInput {
        issue: "Login endpoint is rate limited".into(),
        note: None,
    });
    let out = run_turn(
        &mut s,
        "w2",
        1,
        &r2,
        &report("checked", "next"),
        &NoVerifier,
    );
    assert!(s.issues[0].resolution_claimed_by.is_none());
    assert_eq!(out.count(Action::ResolutionClaimed), 0);
    let refusal = &out.refusals[0];
    assert!(
        refusal
            .reason
            .contains("I1 is alike but differs in polarity")
            && refusal.reason.contains("by its id"),
        "{refusal:?}"
    );
}
