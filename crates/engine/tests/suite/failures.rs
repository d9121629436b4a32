//! Failure semantics: failed calls are recorded, the next worker continues from
//! canonical state, and three failures in a row stop the line with a question.

use baton_core::turn::TurnStatus;
use baton_engine::StepOutcome;
use baton_store::RunStatus;
use serde_json::{Value, json};

use super::*;

#[test]
fn a_failed_call_is_recorded_and_the_next_worker_continues() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            error_line(0, "execute", "rate_limited"),
            line(1, "execute", ok_result("did it")),
            line(1, "handoff", ok_report("did it")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, end) = run_all(&engine, &spec(&["only step"], scripted_roster(2, &script)));
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0].status, TurnStatus::Failed);
    assert!(
        turns[0].calls[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("rate_limited"),
        "{:?}",
        turns[0].calls[0].error
    );
    assert_eq!(turns[1].worker.as_str(), "w2");
    assert_eq!(turns[1].assignment.step_id.as_deref(), Some("T1"));
    // No duplicate rows: one turn per number, one step completion.
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.turns, 2);
    // Only the committed turn's summary is recorded as the step's work.
    assert_eq!(state.completed.len(), 1);
    assert_eq!(state.completed[0].provenance.recorded_by.as_str(), "w2");
    assert_eq!(state.plan[0].done_at_turn, Some(1));
    assert_eq!(
        state.workers.len(),
        1,
        "a failed turn merged nothing, not even participation"
    );
}

#[test]
fn three_failures_in_a_row_block_the_run_with_a_concrete_question() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            error_line(0, "execute", "server_error"),
            error_line(1, "execute", "auth"),
            line(2, "execute", "{}"),
            line(3, "execute", ok_result("recovered")),
            line(3, "handoff", ok_report("recovered")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = spec(&["fragile step"], scripted_roster(3, &script));
    let (id, end) = run_all(&engine, &spec);
    let RunEnd::Blocked { question } = end else {
        panic!("{end:?}")
    };
    assert!(
        question.contains("3 turns in a row failed on step T1"),
        "{question}"
    );
    assert!(question.contains("baton resume"), "{question}");
    assert_eq!(store.run_info(&id).unwrap().status, RunStatus::Blocked);

    // A blocked run does not advance until a human resumes it.
    let mut session = engine.open(&id, None).unwrap();
    assert!(matches!(
        engine.step(&mut session).unwrap(),
        StepOutcome::Blocked { .. }
    ));
    engine.unblock(&mut session).unwrap();
    assert_eq!(
        engine.run(&mut session, None, &mut |_, _| {}).unwrap(),
        RunEnd::Finished
    );
    assert_eq!(store.load_state(&id).unwrap().steps_done(), 1);
}

#[test]
fn a_failure_no_retry_can_fix_blocks_at_once_when_the_same_worker_is_next() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(dir.path(), &[error_line(0, "execute", "auth")]);
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, end) = run_all(&engine, &spec(&["step"], scripted_roster(1, &script)));
    let RunEnd::Blocked { question } = end else {
        panic!("{end:?}")
    };
    assert!(
        question.starts_with("worker w1 cannot work: auth"),
        "{question}"
    );
    assert!(question.contains("baton resume"), "{question}");
    assert_eq!(
        store.turns(&id).unwrap().len(),
        1,
        "blocked after one turn, not three"
    );
    assert_eq!(
        store.turn(&id, 0).unwrap().unwrap().calls[0]
            .error_class
            .as_ref()
            .map(|c| c.as_str()),
        Some("auth")
    );
}

/// What a worker that could not do its step says: no completed work, an issue saying so.
fn did_nothing() -> Value {
    json!({
        "summary": "I could not do this step at all; nothing was produced.",
        "issues": [{"title": "The spec for step T1 is missing, so it cannot be written", "severity": "high"}],
        "last_action": "read the briefing",
        "next_action": "someone must supply the spec"
    })
}

fn did_the_work() -> Value {
    json!({
        "summary": "Wrote the spec.",
        "completed": ["Wrote spec.md with the three endpoints"],
        "last_action": "wrote spec.md",
        "next_action": "continue with T2"
    })
}

/// Regression (issue 9, item 3): a worker that reported it did nothing still completed
/// its step: the step was marked done and the cursor moved on with no warning.
#[test]
fn a_turn_without_evidence_of_work_leaves_its_step_open_and_three_block_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            line(0, "execute", did_nothing()),
            line(0, "handoff", ok_report("read the briefing")),
            line(1, "execute", did_nothing()),
            line(1, "handoff", ok_report("read the briefing")),
            line(2, "execute", did_nothing()),
            line(2, "handoff", ok_report("read the briefing")),
            line(3, "execute", did_the_work()),
            line(3, "handoff", ok_report("wrote spec.md")),
            line(4, "execute", did_the_work()),
            line(4, "handoff", ok_report("wrote it")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = spec(
        &["Write the spec", "Review the spec"],
        scripted_roster(3, &script),
    );
    let (id, end) = run_all(&engine, &spec);
    let RunEnd::Blocked { question } = end else {
        panic!("{end:?}")
    };
    assert!(
        question.contains("step T1") && question.contains("no evidence of work"),
        "{question}"
    );
    assert!(question.contains("baton resume"), "{question}");

    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 3, "blocked by the breaker after three turns");
    for t in &turns {
        // The claims were merged (nothing is lost), but the step was not completed.
        assert_eq!(t.status, TurnStatus::Committed);
        assert_eq!(t.assignment.step_id.as_deref(), Some("T1"));
        assert!(
            t.outcome
                .warnings
                .iter()
                .any(|w| w.contains("T1 stays open") && w.contains("no evidence of work")),
            "turn {}: {:?}",
            t.turn,
            t.outcome.warnings
        );
    }
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.steps_done(), 0);
    assert_eq!(state.cursor(), Some(0), "the cursor did not move");
    assert_eq!(state.consecutive_failures, 3);
    assert!(
        state.completed.is_empty(),
        "a report of failure is not recorded as the step's work: {:?}",
        state.completed
    );
    assert_eq!(state.issues.len(), 1, "the worker's issue is on record");
    let warned = store
        .events(&id, 0)
        .unwrap()
        .into_iter()
        .filter(|e| {
            matches!(&e.event.kind, baton_protocol::EventKind::Warning { text, .. }
                if text.contains("no evidence of work"))
        })
        .count();
    assert_eq!(warned, 3, "each turn's warning is an event");

    // A worker that does the work on the retry moves the cursor on.
    let mut session = engine.open(&id, None).unwrap();
    engine.unblock(&mut session).unwrap();
    assert_eq!(
        engine.run(&mut session, None, &mut |_, _| {}).unwrap(),
        RunEnd::Finished
    );
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.steps_done(), 2);
    assert_eq!(state.plan[0].done_at_turn, Some(3));
    assert_eq!(state.consecutive_failures, 0);
}

/// Regression (issue 9, item 4): the briefing after a failed turn on the same step said
/// "this is its first attempt", and the failure and its error were not passed on.
#[test]
fn the_retry_briefing_says_which_attempt_it_is_and_what_happened_before() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            json!({"turn": 0, "call": "execute", "error": {"class": "server_error",
                "message": "upstream overloaded; retry later"}})
            .to_string(),
            // A claim that fails its schema (no summary).
            line(
                1,
                "execute",
                json!({"last_action": "x", "next_action": "y"}),
            ),
            line(2, "execute", did_nothing()),
            line(2, "handoff", ok_report("read the briefing")),
            line(3, "execute", did_the_work()),
            line(3, "handoff", ok_report("wrote spec.md")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = spec(&["Write the spec"], scripted_roster(4, &script));
    let id = engine.create_run(&spec).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    for _ in 0..4 {
        engine.step(&mut session).unwrap();
        if session.status != RunStatus::Active {
            engine.unblock(&mut session).unwrap();
        }
    }
    let briefing = |turn: u32| store.turn(&id, turn).unwrap().unwrap().package.text;
    let current = |turn: u32| {
        let text = briefing(turn);
        let start = text.find("## Current task state").expect("section");
        let rest = &text[start + 3..];
        let end = rest.find("\n## ").map_or(rest.len(), |e| e);
        rest[..end].to_string()
    };

    let first = current(0);
    assert!(first.contains("first attempt"), "{first}");

    let second = current(1);
    assert!(!second.contains("first attempt"), "{second}");
    assert!(second.contains("attempt 2 of this step"), "{second}");
    assert!(
        second.contains("turn 0 (w1): failed") && second.contains("upstream overloaded"),
        "{second}"
    );

    let third = current(2);
    assert!(third.contains("attempt 3 of this step"), "{third}");
    assert!(
        third.contains("turn 1 (w2): failed") && third.contains("summary"),
        "the rejected claim and what was wrong with it: {third}"
    );

    let fourth = current(3);
    assert!(fourth.contains("attempt 4 of this step"), "{fourth}");
    assert!(
        fourth.contains("turn 2 (w3): no evidence of work"),
        "{fourth}"
    );
    assert!(fourth.contains("turn 0 (w1)"), "{fourth}");
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.steps_done(), 1);
}

/// Issue 9 item 6: a budget of 60 was accepted and sent every briefing over budget.
#[test]
fn a_budget_below_the_smallest_briefing_is_refused_with_the_minimum_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let task = "Add cursor pagination to every list endpoint of the service, with opaque \
                cursors, stable ordering and tests against a real database";
    let mut s = spec(&[task], Roster::mock(2));
    s.settings.budget = 60;
    let err = engine.create_run(&s).unwrap_err().to_string();
    assert!(
        err.contains("budget 60") && err.contains("set budget to"),
        "{err}"
    );

    // Long worker names make the header, and so the smallest briefing, larger than the
    // static minimum: the run's own briefing is measured, and the minimum it names works.
    let mut roster = Roster::mock(1);
    roster.workers[0].id = baton_core::ids::WorkerId::new("the-night-shift-reviewer-".repeat(6));
    roster.workers[0].model = format!("mock/{}", "a-long-model-name-".repeat(6));
    let mut s = spec(&[task], roster);
    s.settings.budget = baton_engine::config::MIN_BUDGET;
    let err = engine.create_run(&s).unwrap_err().to_string();
    assert!(
        err.contains("step T1") && err.contains("estimator"),
        "{err}"
    );
    let needed: usize = err
        .split("set budget to ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no minimum in {err}"));
    assert!(needed > baton_engine::config::MIN_BUDGET, "{err}");
    s.settings.budget = needed;
    let id = engine.create_run(&s).unwrap();
    let session = engine.open(&id, None).unwrap();
    let p = engine.preview(&session, None, None).unwrap();
    assert!(
        !p.over_budget,
        "{} tokens at {needed}:\n{}",
        p.tokens, p.text
    );

    // A total budget too small for its first step names the total to set.
    let mut s = spec(&[task, task], Roster::mock(2));
    s.settings.total_budget = Some(200);
    let err = engine.create_run(&s).unwrap_err().to_string();
    assert!(err.contains("set total_budget"), "{err}");
}
