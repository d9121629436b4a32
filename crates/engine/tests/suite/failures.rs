//! Failure semantics: failed calls are recorded, the next worker continues from
//! canonical state, and three failures in a row stop the line with a question.

use baton_core::turn::TurnStatus;
use baton_engine::StepOutcome;
use baton_store::RunStatus;

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
            .as_deref(),
        Some("auth")
    );
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
