//! The demonstration scenario, end to end on a real SQLite file.

use baton_core::state::IssueStatus;
use baton_core::turn::TurnStatus;
use baton_engine::config::Calls;
use baton_engine::{RunEnd, demo, report};

use super::*;

/// The demo with an execute and a handoff call per turn (`calls = "two"`): its handoff
/// reports restate, re-word and mention what the results said, as real models do.
fn two_call_spec() -> RunSpec {
    let mut spec = demo::spec();
    for w in &mut spec.roster.workers {
        w.calls = Some(Calls::Two);
    }
    spec
}

#[test]
fn the_demo_runs_five_workers_and_keeps_the_unverified_resolution_open() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, end) = run_all(&engine, &two_call_spec());
    assert_eq!(end, RunEnd::Finished);

    let state = store.load_state(&id).unwrap();
    assert_eq!(state.turns, 5);
    assert_eq!(state.steps_done(), 5);
    let workers: Vec<&str> = state.workers.iter().map(|w| w.id.as_str()).collect();
    assert_eq!(workers, ["analyst", "dba", "security", "api", "reviewer"]);

    // The review worker's claim is recorded with its claimant; the issue stays open.
    let rotation = state
        .issues
        .iter()
        .find(|i| i.title.starts_with("Refresh-token rotation"))
        .unwrap();
    assert_eq!(rotation.status, IssueStatus::Open);
    let claim = rotation.resolution_claimed_by.as_ref().unwrap();
    assert_eq!(claim.by.as_str(), "reviewer");
    assert!(rotation.verified_by.is_none());

    // One artifact reaches version 3 through later workers; nothing is verified.
    let arch = state
        .artifacts
        .iter()
        .find(|a| a.name == "architecture.md")
        .unwrap();
    assert_eq!(arch.versions.len(), 3);
    assert_eq!(arch.creator().as_str(), "analyst");
    assert!(
        state
            .artifacts
            .iter()
            .all(|a| a.versions.iter().all(|v| !v.verified))
    );

    // Restatements (exact and re-worded) are reaffirmations, not duplicates.
    let pg = state
        .decisions
        .iter()
        .find(|d| d.text.starts_with("Use PostgreSQL 16"))
        .unwrap();
    assert!(!pg.reaffirmed.is_empty());
    let jwt = state
        .decisions
        .iter()
        .find(|d| d.text.contains("JWT"))
        .unwrap();
    assert!(
        jwt.reaffirmed.iter().any(|r| r.wording.is_some()),
        "re-worded restatement recorded with its wording"
    );
    assert_eq!(
        state
            .decisions
            .iter()
            .filter(|d| d.text.contains("JWT"))
            .count(),
        1
    );
    let enum_attempts = state
        .failed_attempts
        .iter()
        .filter(|f| f.what.contains("ENUM"))
        .count();
    assert_eq!(
        enum_attempts, 1,
        "the re-worded failed attempt is the same attempt"
    );

    // Three reports named an artifact their result never listed.
    let (r, _, turns) = report::build(store.as_ref(), &id).unwrap();
    let mentions = r
        .turns
        .iter()
        .filter(|t| t.warnings.iter().any(|w| w.contains("did not list")))
        .count();
    assert_eq!(mentions, 3);
    assert!(r.turns.iter().all(|t| t.status == TurnStatus::Committed));

    // Measured, not printed: every call was [system, user] and nothing leaked.
    assert_eq!(r.conversations_passed, 0);
    assert_eq!(r.requests_audited, 10);
    assert!(
        turns
            .iter()
            .all(|t| t.audit.package_only && t.audit.messages_per_call == [2, 2])
    );
    assert!(r.prior_outputs_checked > 0);

    // The next reader is told the claim was not verified.
    let next = engine.open(&id, None).unwrap();
    let package = engine.preview(&next, None, Some(4000)).unwrap();
    assert!(
        package.text.contains("Refresh-token rotation"),
        "{}",
        package.text
    );
    assert!(package.text.contains("NOT verified"), "{}", package.text);
}

/// The demo as it runs by default: one call per turn, whose answer carries both
/// claims, for about half the input tokens of two calls.
#[test]
fn the_default_demo_makes_one_call_per_turn_for_half_the_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, end) = run_all(&engine, &demo::spec());
    assert_eq!(end, RunEnd::Finished);
    let (r, _, turns) = report::build(store.as_ref(), &id).unwrap();
    assert!(r.turns.iter().all(|t| t.status == TurnStatus::Committed));
    assert_eq!(r.requests_audited, 5);
    assert_eq!(r.conversations_passed, 0);
    assert!(
        turns
            .iter()
            .all(|t| t.audit.package_only && t.audit.messages_per_call == [2])
    );
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.steps_done(), 5);
    // Every handoff carries the notes and warnings of its turn's one answer.
    assert_eq!(state.handoffs.len(), 5);
    assert!(state.handoffs.iter().all(|h| !h.notes.is_empty()));
    let rotation = state
        .issues
        .iter()
        .find(|i| i.title.starts_with("Refresh-token rotation"))
        .unwrap();
    assert_eq!(rotation.status, IssueStatus::Open);
    assert!(rotation.resolution_claimed_by.is_some());

    let (two, _) = run_all(&engine, &two_call_spec());
    let (r2, _, _) = report::build(store.as_ref(), &two).unwrap();
    assert!(
        r.tokens_sent * 10 < r2.tokens_sent * 6,
        "one call per turn sent {} tokens, two calls {}",
        r.tokens_sent,
        r2.tokens_sent
    );
}

#[test]
fn the_demo_packages_match_their_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, _) = run_all(&engine, &demo::spec());
    for t in store.turns(&id).unwrap() {
        let text = t.package.text.replace(&id.0, "RUN");
        insta::assert_snapshot!(format!("demo_turn_{}", t.turn), text);
    }
}
