//! Scripted workers that try to get around the reconciler. Each attempt is contained.

use baton_core::state::IssueStatus;
use baton_core::turn::TurnStatus;
use baton_protocol::EventKind;
use serde_json::json;

use super::*;

#[test]
fn engine_only_fields_in_claims_are_refused_and_the_rest_is_merged() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            line(
                0,
                "execute",
                json!({
                    "summary": "wrote the spec", "last_action": "wrote spec.md", "verified": true,
                    "decisions": [{"text": "Use SQLite for tests", "reason": "fast", "recorded_by": "root", "recorded_at": 0}],
                    "artifacts": [{"name": "spec.md", "description": "the spec", "verified": true, "verified_by": "me"}]
                }),
            ),
            line(
                0,
                "handoff",
                json!({"notes": "n", "last_action": "wrote spec.md", "next_action": "review", "provenance": {"recorded_by": "root"}}),
            ),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, _) = run_all(
        &engine,
        &spec(&["write the spec"], scripted_roster(1, &script)),
    );

    let state = store.load_state(&id).unwrap();
    assert_eq!(state.decisions[0].provenance.recorded_by.as_str(), "w1");
    assert!(!state.artifacts[0].latest().verified);
    assert!(state.artifacts[0].latest().verified_by.is_none());
    let turn = store.turn(&id, 0).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Committed);
    let refused: Vec<&str> = turn
        .outcome
        .refusals
        .iter()
        .map(|r| r.claim.as_str())
        .collect();
    for field in [
        "result.verified",
        "result.decisions[0].recorded_by",
        "result.decisions[0].recorded_at",
        "result.artifacts[0].verified",
        "result.artifacts[0].verified_by",
        "report.provenance",
    ] {
        assert!(refused.contains(&field), "{field} not refused: {refused:?}");
    }
    let events = store.events(&id, 0).unwrap();
    let refusal_events = events
        .iter()
        .filter(|e| matches!(e.event.kind, EventKind::ClaimRefused { .. }))
        .count();
    assert_eq!(refusal_events, refused.len());
}

#[test]
fn claims_cannot_close_issues_delete_failed_attempts_or_invent_artifacts() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            line(
                0,
                "execute",
                json!({
                    "summary": "s", "last_action": "tried redis",
                    "issues": [{"title": "Session store is undecided", "severity": "high"}],
                    "failed_attempts": [{"what": "Redis for sessions", "why": "no persistence configured"}]
                }),
            ),
            line(0, "handoff", ok_report("tried redis")),
            // Turn 1: closes the issue by status, claims it resolved, invents an artifact.
            line(
                1,
                "execute",
                json!({
                    "summary": "s", "last_action": "closed things",
                    "issues": [{"title": "Session store is undecided", "severity": "high", "status": "resolved"}],
                    "resolved_issues": [{"issue": "I1", "note": "trust me"}]
                }),
            ),
            line(
                1,
                "handoff",
                json!({"notes": "n", "last_action": "closed things", "next_action": "x",
            "artifacts": [{"name": "ghost.md", "note": "I wrote this"}]}),
            ),
            // Turn 2: tries to delete the failed attempt with a field that does not exist
            // (dropped, with a warning), in a claim that breaks the schema (an unknown
            // severity), so nothing of it is merged.
            line(
                2,
                "execute",
                json!({"summary": "s", "last_action": "cleanup", "delete_failed_attempts": ["F1"],
            "decisions": [{"text": "Half-formed decision", "reason": "r"}],
            "issues": [{"title": "t", "severity": "urgent"}]}),
            ),
            line(3, "execute", ok_result("continued")),
            line(3, "handoff", ok_report("continued")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, _) = run_all(
        &engine,
        &spec(&["a", "b", "c"], scripted_roster(3, &script)),
    );

    let state = store.load_state(&id).unwrap();
    let issue = &state.issues[0];
    assert_eq!(
        issue.status,
        IssueStatus::Open,
        "a claim never closes an issue"
    );
    assert_eq!(
        issue.resolution_claimed_by.as_ref().unwrap().by.as_str(),
        "w2"
    );
    assert!(
        state.artifacts.is_empty(),
        "a report cannot invent an artifact"
    );
    assert_eq!(
        state.failed_attempts.len(),
        1,
        "failed attempts are append-only"
    );
    assert!(
        state.decisions.is_empty(),
        "a rejected claim is never merged half-formed"
    );

    let t1 = store.turn(&id, 1).unwrap().unwrap();
    assert!(
        t1.outcome
            .refusals
            .iter()
            .any(|r| r.claim.ends_with(".status"))
    );
    assert!(
        t1.outcome
            .refusals
            .iter()
            .any(|r| r.reason.contains("ghost.md"))
    );
    let t2 = store.turn(&id, 2).unwrap().unwrap();
    assert_eq!(t2.status, TurnStatus::Failed);
    assert!(
        t2.error
            .as_deref()
            .unwrap()
            .contains("unknown variant `urgent`"),
        "{:?}",
        t2.error
    );
}

#[test]
fn a_field_the_claim_type_lacks_is_dropped_with_a_warning_and_deletes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            line(
                0,
                "execute",
                json!({"summary": "s", "last_action": "tried redis",
                    "completed": ["Moved sessions to PostgreSQL"],
                    "failed_attempts": [{"what": "Redis for sessions", "why": "no persistence"}]}),
            ),
            line(0, "handoff", ok_report("tried redis")),
            line(
                1,
                "execute",
                json!({"summary": "s", "last_action": "cleanup", "delete_failed_attempts": ["F1"]}),
            ),
            line(1, "handoff", ok_report("cleanup")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, end) = run_all(&engine, &spec(&["a", "b"], scripted_roster(2, &script)));
    assert_eq!(end, RunEnd::Finished);
    let state = store.load_state(&id).unwrap();
    assert_eq!(
        state.failed_attempts.len(),
        1,
        "failed attempts are append-only"
    );
    let t1 = store.turn(&id, 1).unwrap().unwrap();
    assert_eq!(t1.status, TurnStatus::Committed);
    assert!(
        t1.outcome
            .warnings
            .iter()
            .any(|w| w.starts_with("result.delete_failed_attempts: ")),
        "{:?}",
        t1.outcome.warnings
    );
}

#[test]
fn malformed_output_fails_the_turn_and_the_next_worker_retries_the_step() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            line(
                0,
                "execute",
                "Sure! Here is my answer: {\"summary\": \"oops",
            ),
            line(1, "execute", ok_result("did step one")),
            line(1, "handoff", "not json either"),
            line(2, "execute", ok_result("did step one")),
            line(2, "handoff", ok_report("did step one")),
            line(3, "execute", ok_result("did step two")),
            line(3, "handoff", ok_report("did step two")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, end) = run_all(&engine, &spec(&["one", "two"], scripted_roster(3, &script)));
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    let statuses: Vec<TurnStatus> = turns.iter().map(|t| t.status).collect();
    assert_eq!(
        statuses,
        [
            TurnStatus::Failed,
            TurnStatus::Failed,
            TurnStatus::Committed,
            TurnStatus::Committed
        ]
    );
    assert!(
        turns[0]
            .error
            .as_deref()
            .unwrap()
            .contains("not valid JSON"),
        "{:?}",
        turns[0].error
    );
    assert_eq!(
        turns[0].calls.len(),
        1,
        "no handoff call after a rejected result"
    );
    assert!(
        turns[1]
            .error
            .as_deref()
            .unwrap()
            .contains("handoff output rejected")
    );
    // The raw output of a failed call is kept for the record.
    assert!(
        turns[0].calls[0]
            .output
            .as_deref()
            .unwrap()
            .contains("oops")
    );
    let assigned: Vec<Option<String>> =
        turns.iter().map(|t| t.assignment.step_id.clone()).collect();
    assert_eq!(
        assigned,
        [
            Some("T1".into()),
            Some("T1".into()),
            Some("T1".into()),
            Some("T2".into())
        ]
    );
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.plan[0].done_by.as_ref().unwrap().as_str(), "w3");
    assert_eq!(
        state.handoffs.len(),
        2,
        "failed turns leave no handoff behind"
    );
}

#[test]
fn schema_violations_get_one_repair_call_quoting_the_error_then_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            // Turn 0: a schema violation, repaired.
            line(
                0,
                "execute",
                json!({"summary": "s", "lastAction": "wrong field name"}),
            ),
            line(0, "execute_repair", ok_result("did it")),
            line(
                0,
                "handoff",
                "```json\n{\"notes\": \"n\", \"last_action\": \"did it\", \"next_action\": \"x\"}\n```",
            ),
            // Turn 1: the repair is malformed too: the turn fails, nothing merged.
            line(
                1,
                "execute",
                json!({"summary": "s", "last_action": "a", "decisions": [{"text": "half", "reason": "formed"}], "issues": "none"}),
            ),
            line(1, "execute_repair", "still not json"),
            line(2, "execute", ok_result("again")),
            line(2, "handoff", ok_report("again")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let mut spec = spec(&["one", "two"], scripted_roster(2, &script));
    spec.settings.repair_attempts = 1;
    let (id, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    let kinds = |t: &baton_core::turn::TurnRecord| {
        t.calls.iter().map(|c| c.call.as_str()).collect::<Vec<_>>()
    };
    assert_eq!(turns[0].status, TurnStatus::Committed);
    assert_eq!(kinds(&turns[0]), ["execute", "execute_repair", "handoff"]);
    assert!(
        turns[0].calls[0]
            .error
            .as_deref()
            .unwrap()
            .contains("lastAction"),
        "{:?}",
        turns[0].calls[0].error
    );
    assert!(turns[0].audit.package_only && turns[0].audit.prior_outputs_leaked == 0);
    assert_eq!(turns[0].audit.messages_per_call, [2, 2, 2]);

    assert_eq!(turns[1].status, TurnStatus::Failed);
    assert_eq!(kinds(&turns[1]), ["execute", "execute_repair"]);
    assert!(
        turns[1]
            .error
            .as_deref()
            .unwrap()
            .contains("execute_repair output rejected"),
        "{:?}",
        turns[1].error
    );
    let state = store.load_state(&id).unwrap();
    assert!(
        state.decisions.iter().all(|d| d.text != "half"),
        "never merged half-formed"
    );
    assert_eq!(state.steps_done(), 2);
}
