//! Routed runs: with pools configured, each turn's worker is the router's pick for the
//! turn's seat; pins are written with their turns and replayed on resume.

use baton_core::router::{Allowance, PinReason, Pool, PoolId, SeatId, Window};
use baton_engine::StepOutcome;
use baton_engine::config::Floor;
use baton_store::{BenchChange, BenchTarget, PinFilter, RunStatus, StoredPin};

use super::providers::{anthropic_worker, chat, openai_worker, process, run_in};
use super::server::{TestServer, json as reply};
use super::*;

pub(super) fn pool(id: &str, tokens: Option<u64>) -> Pool {
    Pool {
        id: PoolId::new(id),
        allowance: Allowance {
            tokens,
            ..Allowance::default()
        },
        window: Window::default(),
    }
}

/// `spec` routed by `pools`, each worker `(worker, pool)` put in its pool.
pub(super) fn routed(mut spec: RunSpec, pools: Vec<Pool>, members: &[(&str, &str)]) -> RunSpec {
    for (id, p) in members {
        let w = spec
            .roster
            .workers
            .iter_mut()
            .find(|w| w.id.as_str() == *id)
            .unwrap();
        w.pool = Some(PoolId::new(*p));
    }
    spec.settings.floor = Floor {
        pools,
        seats: Vec::new(),
    };
    spec
}

pub(super) fn pins(store: &Arc<dyn Store>, run: &RunId) -> Vec<StoredPin> {
    store.pins(&PinFilter::run(run)).unwrap()
}

/// (turn, seat, worker, phase, reason) of every pin.
fn ledger(store: &Arc<dyn Store>, run: &RunId) -> Vec<(u32, String, String, String, String)> {
    pins(store, run)
        .into_iter()
        .map(|p| {
            (
                p.turn,
                p.pin.seat.to_string(),
                p.pin.worker.to_string(),
                p.pin.phase,
                p.pin.reason.to_string(),
            )
        })
        .collect()
}

fn row(
    turn: u32,
    seat: &str,
    worker: &str,
    phase: &str,
    reason: &str,
) -> (u32, String, String, String, String) {
    (
        turn,
        seat.into(),
        worker.into(),
        phase.into(),
        reason.into(),
    )
}

pub(super) fn workers_of(store: &Arc<dyn Store>, run: &RunId) -> Vec<String> {
    store
        .turns(run)
        .unwrap()
        .iter()
        .map(|t| t.worker.to_string())
        .collect()
}

/// Mock workers (deterministic, offline) of the given families.
pub(super) fn mock_spec(tasks: &[&str], families: &[(&str, &str)]) -> RunSpec {
    let workers = families
        .iter()
        .map(|(id, family)| {
            let mut w = WorkerConfig::mock(id, &format!("model-{id}"));
            w.family = family.to_string();
            w
        })
        .collect();
    let mut spec = spec(tasks, Roster { workers });
    spec.objective = baton_gateway::mock::demo::OBJECTIVE.into();
    spec
}

/// A pool whose allowance the first turn spends (its provider reported the usage) is off
/// the floor at the next hand-off: the step, still open, is re-seated from the next
/// coldest pool with a pin saying why, and the next step starts there too.
#[test]
fn a_pool_spent_mid_step_reseats_it_from_the_next_coldest_pool_at_the_next_handoff() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        // Unusable (the turn fails, its step stays open) but billed: 200 tokens of 150.
        chat(&json!("not a claim"), "stop", 150, 50),
        chat(&ok_result("migrated"), "stop", 100, 10),
        chat(&ok_result("tested"), "stop", 100, 10),
    ]);
    let mut w1 = openai_worker("w1", &server, 0);
    w1.family = "fa".into();
    let mut w2 = openai_worker("w2", &server, 0);
    w2.family = "fb".into();
    let spec = routed(
        spec(
            &["Migrate the billing module", "Test it"],
            Roster {
                workers: vec![w1, w2],
            },
        ),
        vec![pool("a", Some(150)), pool("b", Some(100_000))],
        &[("w1", "a"), ("w2", "b")],
    );
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    assert_eq!(workers_of(&store, &id), ["w1", "w2", "w2"]);
    assert_eq!(
        ledger(&store, &id),
        [
            // Both pools untouched: the tie goes to pool a by id.
            row(0, "build.step", "w1", "step T1", "at phase start"),
            row(1, "build.step", "w2", "step T1", "pool a exhausted"),
            row(2, "build.step", "w2", "step T2", "at phase start"),
        ]
    );
    let reseated = &pins(&store, &id)[1].pin;
    assert_eq!(
        reseated.reason,
        PinReason::PoolExhausted {
            pool: PoolId::new("a")
        }
    );
    assert!(
        reseated.fractions[&PoolId::new("a")] >= 1.0,
        "{:?}",
        reseated.fractions
    );
    assert_eq!(reseated.fractions[&PoolId::new("b")], 0.0);
}

/// A provider's answer that the quota is spent (Anthropic's spend limit) is not a dead
/// end for a routed run: the pool is marked exhausted, and the next hand-off seats the
/// step from the other pool, where an unrouted run with this worker stops.
#[test]
fn a_spent_quota_answer_reseats_the_step_from_another_pool() {
    let dir = tempfile::tempdir().unwrap();
    let claude = TestServer::start(vec![reply(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2050-01-01 at 00:00 UTC."}}"#,
    )]);
    let openai = TestServer::start(vec![chat(&ok_result("migrated"), "stop", 100, 10)]);
    let spec = routed(
        spec(
            &["Migrate the billing module"],
            Roster {
                workers: vec![
                    anthropic_worker("sonnet", &claude),
                    openai_worker("gpt", &openai, 0),
                ],
            },
        ),
        vec![pool("claude", None), pool("codex", None)],
        &[("sonnet", "claude"), ("gpt", "codex")],
    );
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    assert_eq!(workers_of(&store, &id), ["sonnet", "gpt"]);
    assert_eq!(
        ledger(&store, &id),
        [
            row(0, "build.step", "sonnet", "step T1", "at phase start"),
            row(1, "build.step", "gpt", "step T1", "pool claude exhausted"),
        ]
    );
}

/// A pool benched between two runs: the second run's seats are the same seats, filled by
/// the other pool's workers; no seat or worker is renamed.
#[test]
fn a_pool_benched_between_runs_fills_the_same_seats_with_other_models() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = routed(
        mock_spec(
            &["Add a health check", "Document it"],
            &[("w1", "fa"), ("w2", "fb")],
        ),
        vec![pool("a", None), pool("b", None)],
        &[("w1", "a"), ("w2", "b")],
    );
    let (first, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    store
        .set_bench(&BenchChange {
            target: BenchTarget::Pool(PoolId::new("a")),
            benched: true,
            by: "ada".into(),
            at: Timestamp(1),
            reason: Some("weekly cap".into()),
        })
        .unwrap();
    let (second, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    let seats = |run: &RunId| -> Vec<(String, String, String)> {
        pins(&store, run)
            .into_iter()
            .map(|p| (p.pin.seat.to_string(), p.pin.phase, p.pin.pool.to_string()))
            .collect()
    };
    let before = seats(&first);
    let after = seats(&second);
    assert_eq!(
        before.iter().map(|s| (&s.0, &s.1)).collect::<Vec<_>>(),
        after.iter().map(|s| (&s.0, &s.1)).collect::<Vec<_>>(),
        "the same seats and phases"
    );
    assert!(before.iter().all(|s| s.2 == "a"), "{before:?}");
    assert!(after.iter().all(|s| s.2 == "b"), "{after:?}");
    assert_eq!(workers_of(&store, &second), ["w2", "w2"]);
    let models: Vec<String> = pins(&store, &second)
        .into_iter()
        .map(|p| p.pin.model)
        .collect();
    assert_eq!(models, ["mock/model-w2", "mock/model-w2"]);
}

/// A bench made by another process between two turns takes effect at the next
/// hand-off: the store's kept reading of the floor must see what others wrote since.
#[test]
fn a_pool_benched_by_another_process_mid_run_is_skipped_at_the_next_hand_off() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = routed(
        mock_spec(
            &["Add a health check", "Document it"],
            &[("w1", "fa"), ("w2", "fb")],
        ),
        // Metered by requests, which the mock's calls spend: the pool not used by the
        // first step is the colder one at the second hand-off.
        ["a", "b"]
            .map(|id| Pool {
                allowance: Allowance {
                    requests: Some(1_000),
                    ..Allowance::default()
                },
                ..pool(id, None)
            })
            .to_vec(),
        &[("w1", "a"), ("w2", "b")],
    );
    let id = engine.create_run(&spec).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    assert!(matches!(
        engine.step(&mut session).unwrap(),
        StepOutcome::Turn(_)
    ));
    let first = pins(&store, &id)[0].pin.pool.to_string();
    // The other pool, now the colder one, would take the next step: bench it from a
    // connection of its own, as `baton pool bench` in another process does.
    let other = if first == "a" { "b" } else { "a" };
    store_in(dir.path())
        .set_bench(&BenchChange {
            target: BenchTarget::Pool(PoolId::new(other)),
            benched: true,
            by: "ada".into(),
            at: Timestamp(1),
            reason: None,
        })
        .unwrap();
    assert!(matches!(
        engine.step(&mut session).unwrap(),
        StepOutcome::Turn(_)
    ));
    let pools: Vec<String> = pins(&store, &id)
        .into_iter()
        .map(|p| p.pin.pool.to_string())
        .collect();
    assert_eq!(pools, [first.clone(), first]);
}

/// A review step whose every candidate shares the writer's family: the run stops with
/// the router's question (which seat, why each worker is out, what would unblock it) and
/// the rule is not broken; nothing is pinned for the seat nobody took.
#[test]
fn the_cross_family_rule_leaving_nobody_stops_the_run_with_the_question() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let mut spec = routed(
        mock_spec(
            &["Add a health check", "Review it"],
            &[("w1", "fa"), ("w2", "fa")],
        ),
        vec![pool("a", None), pool("b", None)],
        &[("w1", "a"), ("w2", "b")],
    );
    spec.step_seats = vec![None, Some(SeatId::new("review.code"))];
    let (id, end) = run_all(&engine, &spec);
    let RunEnd::Blocked { question } = end else {
        panic!("the run should stop: {end:?}")
    };
    assert!(
        question.contains("Nobody can take seat review.code"),
        "{question}"
    );
    assert!(
        question.contains("w1 (same family (fa) as the writer, w1)"),
        "{question}"
    );
    assert!(
        question.contains("w2 (same family (fa) as the writer, w1)"),
        "{question}"
    );
    assert!(
        question.contains("qualify a worker of another family than fa"),
        "{question}"
    );
    assert!(
        question.contains(&format!("baton resume {id}")),
        "{question}"
    );
    assert_eq!(store.run_info(&id).unwrap().status, RunStatus::Blocked);
    assert_eq!(workers_of(&store, &id), ["w1"]);
    assert_eq!(
        ledger(&store, &id),
        [row(0, "build.step", "w1", "step T1", "at phase start")]
    );
}

/// A fresh process continues a routed run with the pin the last one wrote: the step
/// whose first turn failed stays with its worker (a roster rotation would have moved
/// it), and no second "at phase start" pin is written for a phase already seated.
#[test]
fn pins_are_replayed_on_resume_and_a_seated_phase_is_not_seated_again() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        chat(&json!("not a claim"), "stop", 10, 5),
        chat(&ok_result("migrated"), "stop", 10, 5),
    ]);
    let spec = routed(
        spec(
            &["Migrate the billing module"],
            Roster {
                workers: vec![
                    openai_worker("w1", &server, 0),
                    openai_worker("w2", &server, 0),
                ],
            },
        ),
        vec![pool("a", Some(1_000_000)), pool("b", Some(1_000_000))],
        &[("w1", "a"), ("w2", "b")],
    );
    let id = {
        let (_, engine) = process(dir.path());
        let id = engine.create_run(&spec).unwrap();
        let mut session = engine
            .open_with_keys(&id, None, Some(&spec.roster))
            .unwrap();
        assert_eq!(
            engine.run(&mut session, Some(1), &mut |_, _| {}).unwrap(),
            RunEnd::Paused
        );
        id
    };
    let (store, engine) = process(dir.path());
    let before = pins(&store, &id);
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    assert_eq!(
        engine.run(&mut session, None, &mut |_, _| {}).unwrap(),
        RunEnd::Finished
    );
    assert_eq!(workers_of(&store, &id), ["w1", "w1"]);
    let after = pins(&store, &id);
    assert_eq!(after, before, "the resumed turn held the pin");
    assert_eq!(
        ledger(&store, &id),
        [row(0, "build.step", "w1", "step T1", "at phase start")]
    );
}

/// A turn seated but never committed (another process committed that turn first) leaves
/// no pin: the pin lives and dies with its turn's transaction.
#[test]
fn a_turn_that_does_not_commit_leaves_no_orphan_pin() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = routed(
        mock_spec(
            &["Add a health check", "Document it"],
            &[("w1", "fa"), ("w2", "fb")],
        ),
        // Metered by requests, which the mock's calls spend: the pool not used by the
        // first step is the colder one at the second hand-off.
        ["a", "b"]
            .map(|id| Pool {
                allowance: Allowance {
                    requests: Some(1_000),
                    ..Allowance::default()
                },
                ..pool(id, None)
            })
            .to_vec(),
        &[("w1", "a"), ("w2", "b")],
    );
    let id = engine.create_run(&spec).unwrap();
    let mut stale = engine.open(&id, None).unwrap();
    let mut fresh = engine.open(&id, None).unwrap();
    engine.step(&mut fresh).unwrap();
    // The stale session seats turn 0 again (it has not seen the pin) and is fenced off.
    let err = engine.step(&mut stale).unwrap_err();
    assert!(err.to_string().contains("turn 0"), "{err}");
    assert_eq!(
        ledger(&store, &id),
        [row(0, "build.step", "w1", "step T1", "at phase start")]
    );
}

/// Without pools or seats nothing is routed: turns take the roster in order and no pin
/// is written.
#[test]
fn a_roster_without_pools_takes_turns_in_order_and_writes_no_pin() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = mock_spec(
        &["Add a health check", "Document it"],
        &[("w1", "fa"), ("w2", "fb")],
    );
    let (id, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    assert_eq!(workers_of(&store, &id), ["w1", "w2"]);
    assert!(pins(&store, &id).is_empty());
    let config = store.run_info(&id).unwrap().config;
    assert!(config["settings"].get("floor").is_none(), "{config}");
}
