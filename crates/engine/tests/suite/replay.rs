//! A recorded run replays byte for byte through the scripted gateway.

use baton_engine::{demo, export};

use super::*;

#[test]
fn a_recorded_run_replays_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (original, _) = run_all(&engine, &demo::spec());
    let script = dir.path().join("demo.jsonl");
    std::fs::write(&script, export::script(store.as_ref(), &original).unwrap()).unwrap();

    let mut replay_spec = demo::spec();
    for w in &mut replay_spec.roster.workers {
        w.options
            .insert("replay".into(), Value::String(script.display().to_string()));
    }
    // A different engine clock: only timestamps may differ.
    let replayer = Engine::new(store.clone())
        .with_clock(Arc::new(SteppingClock::new(Timestamp(1_900_000_000_000))));
    let (replayed, end) = run_all(&replayer, &replay_spec);
    assert_eq!(end, RunEnd::Finished);

    let a = store.turns(&original).unwrap();
    let b = store.turns(&replayed).unwrap();
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            x.package.text.replace(&original.0, "RUN"),
            y.package.text.replace(&replayed.0, "RUN"),
            "turn {}",
            x.turn
        );
        for (cx, cy) in x.calls.iter().zip(&y.calls) {
            assert_eq!(cx.output, cy.output);
        }
        assert_eq!(x.outcome, y.outcome);
        assert_eq!(x.result, y.result);
        assert_eq!(x.report, y.report);
    }
    let mut sa = store.load_state(&original).unwrap();
    let mut sb = store.load_state(&replayed).unwrap();
    for s in [&mut sa, &mut sb] {
        s.run_id = RunId("RUN".into());
    }
    let strip = |v: &mut Value| strip_times(v);
    let mut va = serde_json::to_value(&sa).unwrap();
    let mut vb = serde_json::to_value(&sb).unwrap();
    strip(&mut va);
    strip(&mut vb);
    assert_eq!(va, vb);
}

#[test]
fn a_replay_that_runs_past_its_script_fails_the_turn_clearly() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            line(0, "execute", ok_result("x")),
            line(0, "handoff", ok_report("x")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (id, end) = run_all(&engine, &spec(&["one", "two"], scripted_roster(1, &script)));
    assert!(matches!(end, RunEnd::Blocked { .. }), "{end:?}");
    let t1 = store.turn(&id, 1).unwrap().unwrap();
    let err = t1.error.unwrap();
    assert!(err.contains("no scripted response for turn 1"), "{err}");
}

fn strip_times(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("recorded_at");
            map.remove("at");
            for (_, x) in map.iter_mut() {
                strip_times(x);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_times),
        _ => {}
    }
}

/// Regression: replaying an exported run with failed calls doubled the error prefix
/// (`"bad_request: bad request: bad_request: …"`), so the replay was not identical.
#[test]
fn an_exported_run_with_failed_calls_replays_its_errors_word_for_word() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            error_line(0, "execute", "bad_request"),
            line(1, "execute", ok_result("did it")),
            line(1, "handoff", ok_report("did it")),
        ],
    );
    let store = store_in(dir.path());
    let engine = engine(&store);
    let (original, _) = run_all(&engine, &spec(&["only step"], scripted_roster(2, &script)));
    let exported = dir.path().join("exported.jsonl");
    std::fs::write(
        &exported,
        export::script(store.as_ref(), &original).unwrap(),
    )
    .unwrap();
    let (replayed, end) = run_all(
        &engine,
        &spec(&["only step"], scripted_roster(2, &exported)),
    );
    assert_eq!(end, RunEnd::Finished);
    let errors = |run: &RunId| -> Vec<Option<String>> {
        store
            .turns(run)
            .unwrap()
            .iter()
            .flat_map(|t| t.calls.iter().map(|c| c.error.clone()))
            .collect()
    };
    let (a, b) = (errors(&original), errors(&replayed));
    assert_eq!(
        a[0].as_deref(),
        Some("bad_request: bad request: scripted failure")
    );
    assert_eq!(a, b);
    // And a replay of the replay is the same again.
    let again = dir.path().join("again.jsonl");
    std::fs::write(&again, export::script(store.as_ref(), &replayed).unwrap()).unwrap();
    assert_eq!(
        std::fs::read_to_string(&again).unwrap(),
        std::fs::read_to_string(&exported).unwrap()
    );
}

/// A demo run recorded by baton before one call per turn existed (75a9bea, `baton demo
/// --record`: an execute and a handoff call per turn) replays as it was recorded: two
/// calls per turn, the same outputs, claims and outcomes, and the briefings today's
/// compiler makes for a live two-call demo (the compiler has changed since the
/// recording: its briefings are not the recording's to fix).
#[test]
fn a_two_call_recording_from_before_one_call_per_turn_replays_byte_for_byte() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let script = fixtures.join("two-call-demo.jsonl");
    let expected: Value = serde_json::from_str(
        &std::fs::read_to_string(fixtures.join("two-call-demo.expected.json")).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let mut spec = demo::spec();
    for w in &mut spec.roster.workers {
        w.options
            .insert("replay".into(), Value::String(script.display().to_string()));
    }
    let (id, end) = run_all(&engine(&store), &spec);
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    let want = expected["turns"].as_array().unwrap();
    assert_eq!(turns.len(), want.len());
    let live_dir = tempfile::tempdir().unwrap();
    let live_store = store_in(live_dir.path());
    let mut live = demo::spec();
    for w in &mut live.roster.workers {
        w.calls = Some(baton_engine::config::Calls::Two);
    }
    let (live_id, _) = run_all(&engine(&live_store), &live);
    let live_turns = live_store.turns(&live_id).unwrap();
    assert_eq!(live_turns.len(), turns.len());
    for ((t, w), l) in turns.iter().zip(want).zip(&live_turns) {
        let kinds: Vec<&str> = t.calls.iter().map(|c| c.call.as_str()).collect();
        assert_eq!(json!(kinds), w["calls"], "turn {}", t.turn);
        let outputs: Vec<Option<String>> = t.calls.iter().map(|c| c.output.clone()).collect();
        assert_eq!(json!(outputs), w["outputs"], "turn {}", t.turn);
        assert_eq!(
            t.package.text.replace(&id.0, "RUN"),
            l.package.text.replace(&live_id.0, "RUN"),
            "turn {}",
            t.turn
        );
        assert_eq!(t.result.as_ref().unwrap(), &w["result"], "turn {}", t.turn);
        assert_eq!(t.report.as_ref().unwrap(), &w["report"], "turn {}", t.turn);
        assert_eq!(
            serde_json::to_value(&t.outcome).unwrap(),
            w["outcome"],
            "turn {}",
            t.turn
        );
    }
    // Exported again, the run is the recording it came from, byte for byte.
    assert_eq!(
        export::script(store.as_ref(), &id).unwrap(),
        std::fs::read_to_string(&script).unwrap()
    );
}

/// Both modes record and replay exactly: a run with two calls per turn (configured)
/// and one with the default single call, each exported and replayed.
#[test]
fn recordings_of_either_mode_replay_to_the_same_script() {
    for calls in [None, Some(baton_engine::config::Calls::Two)] {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path());
        let mut spec = demo::spec();
        for w in &mut spec.roster.workers {
            w.calls = calls;
        }
        let (original, _) = run_all(&engine(&store), &spec);
        let recorded = export::script(store.as_ref(), &original).unwrap();
        let per_turn = if calls.is_some() { 2 } else { 1 };
        assert_eq!(recorded.lines().count(), 5 * per_turn, "{calls:?}");
        let path = dir.path().join("run.jsonl");
        std::fs::write(&path, &recorded).unwrap();
        // The replaying roster says nothing about calls: the script decides.
        let mut replay = demo::spec();
        for w in &mut replay.roster.workers {
            w.options
                .insert("replay".into(), Value::String(path.display().to_string()));
        }
        let (replayed, end) = run_all(&engine(&store), &replay);
        assert_eq!(end, RunEnd::Finished);
        assert_eq!(export::script(store.as_ref(), &replayed).unwrap(), recorded);
        let a = store.turns(&original).unwrap();
        let b = store.turns(&replayed).unwrap();
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.outcome, y.outcome);
            assert_eq!(x.result, y.result);
            assert_eq!(x.report, y.report);
            assert_eq!(x.calls.len(), y.calls.len());
        }
    }
}
