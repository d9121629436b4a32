//! The assembly line's lanes as engine turns: each lane the cursor names is one
//! committed turn, seated by the router, briefed with its line block, its answer folded
//! in by the line's rules and the unit's progress moved on in the same commit.

use baton_core::line::Route;
use baton_core::line::cursor::Next;
use baton_engine::LineStep;
use baton_engine::bench::three_pools;
use baton_store::PinFilter;

use super::*;

/// A unit of mock workers of three families (`n` of them, in turn), routed by three
/// pools.
fn unit(store: &Arc<dyn Store>, n: usize) -> (Engine, RunId) {
    unit_for(store, n, "Add rate limiting to the public API")
}

/// A unit of the given objective, as [`unit`].
fn unit_for(store: &Arc<dyn Store>, n: usize, objective: &str) -> (Engine, RunId) {
    unit_with(store, n, objective, |_, _| {})
}

/// A unit as [`unit_for`], each worker (by its index) set up by `tweak`.
fn unit_with(
    store: &Arc<dyn Store>,
    n: usize,
    objective: &str,
    tweak: impl Fn(usize, &mut WorkerConfig),
) -> (Engine, RunId) {
    let mut roster = Roster::mock(n);
    let families = ["anthropic", "openai", "zhipu"];
    for (i, w) in roster.workers.iter_mut().enumerate() {
        w.family = families[i % 3].into();
        tweak(i, w);
    }
    let mut spec = spec(&[objective], roster);
    spec.objective = objective.into();
    spec.settings.floor = three_pools(&mut spec.roster);
    let engine = engine(store);
    let id = engine.create_run(&spec).unwrap();
    (engine, id)
}

/// Runs lanes until the cursor names something that is not a lane.
fn lanes(engine: &Engine, session: &mut baton_engine::Session, route: &Route) -> (Vec<u32>, Next) {
    lanes_upto(engine, session, route, 40).expect("no end to the lanes")
}

/// Runs at most `most` lanes; `None` when they did not reach something that is not a
/// lane.
fn lanes_upto(
    engine: &Engine,
    session: &mut baton_engine::Session,
    route: &Route,
    most: usize,
) -> Option<(Vec<u32>, Next)> {
    let mut turns = Vec::new();
    for _ in 0..most {
        match engine.line_step(session, route).unwrap() {
            LineStep::Lanes(summaries) => {
                for summary in summaries {
                    assert!(summary.error.is_none(), "{:?}", summary.error);
                    turns.push(summary.turn);
                }
            }
            LineStep::Waiting(next) => return Some((turns, next)),
        }
    }
    None
}

#[test]
fn the_lanes_up_to_the_plan_lock_run_as_committed_turns_and_resume_where_they_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let (engine, id) = unit(&store, 3);
    let route = Route::default_route().unwrap();
    // Stopped after the lead's merge (a crash, a new process): the rest runs on a
    // session opened from the store, whose seatings know who wrote the plan.
    let mut first = engine.open(&id, None).unwrap();
    // The intake, the four discovery lanes (one batch), the lead's merge, the two
    // co-drafts (one batch) and the lead's merge.
    assert!(lanes_upto(&engine, &mut first, &route, 5).is_none());
    assert_eq!(first.state.turns, 9);
    drop(first);
    let mut session = engine.open(&id, None).unwrap();
    assert!(lanes_upto(&engine, &mut session, &route, 2).is_none());
    let turns: Vec<u32> = (0..session.state.turns).collect();
    let next = baton_core::line::cursor::next(
        &route,
        session.state.line.as_ref().unwrap(),
        &session.state,
    );
    // The intake, four discovery lanes and the lead's merge, two blind co-drafts and the
    // lead's merge, two scrutinies that found nothing: the plan is due to lock.
    let records = store.turns(&id).unwrap();
    let asked: Vec<String> = records
        .iter()
        .map(|r| {
            r.assignment
                .task
                .split(':')
                .next()
                .unwrap_or("")
                .to_string()
        })
        .collect();
    assert_eq!(turns, (0..11).collect::<Vec<_>>(), "{asked:#?} {next:?}");
    assert!(
        matches!(next, Next::LockPlan { ref station } if station == "plan-loop"),
        "{next:?}"
    );

    // Every lane is a turn on record, with its seat's pin and its progress.
    let records = store.turns(&id).unwrap();
    assert_eq!(records.len(), 11);
    let pins = store.pins(&PinFilter::run(&id)).unwrap();
    let seats: Vec<&str> = pins.iter().map(|p| p.pin.seat.as_str()).collect();
    for seat in [
        "lead.intake",
        "discovery.deep",
        "plan.co-draft",
        "lead.plan",
        "plan.scrutiny",
    ] {
        assert!(seats.contains(&seat), "{seat}: {seats:?}");
    }
    // The co-drafts are of two families; the scrutiny is by neither the lead's family
    // (it wrote the plan under review) nor one worker twice.
    let held = |seat: &str| -> Vec<(String, String)> {
        pins.iter()
            .filter(|p| p.pin.seat.as_str() == seat)
            .map(|p| (p.pin.worker.to_string(), p.pin.family.clone()))
            .collect()
    };
    let drafts = held("plan.co-draft");
    assert_eq!(drafts.len(), 2);
    assert_ne!(drafts[0].1, drafts[1].1, "{drafts:?}");
    let lead = held("lead.plan");
    let scrutiny = held("plan.scrutiny");
    assert_eq!(scrutiny.len(), 2);
    assert_ne!(scrutiny[0].0, scrutiny[1].0);
    assert!(
        scrutiny.iter().all(|(_, f)| *f != lead[0].1),
        "{scrutiny:?} {lead:?}"
    );
    // Not by luck: each scrutiny's seating left the lead out for its family, in the
    // process opened after the merge too.
    for p in pins
        .iter()
        .filter(|p| p.pin.seat.as_str() == "plan.scrutiny")
    {
        let left_out = p.pin.excluded.as_ref().unwrap();
        let lead_left_out = left_out
            .iter()
            .any(|e| e.worker.as_str() == lead[0].0 && e.reason == "same_family_as_writer");
        assert!(lead_left_out, "{left_out:?}");
    }
    let second = pins
        .iter()
        .rfind(|p| p.pin.seat.as_str() == "plan.co-draft")
        .unwrap();
    let apart = second.pin.excluded.as_ref().unwrap();
    assert!(
        apart.iter().any(|e| e.reason == "holds_another_lane"
            && e.why.contains("holds another lane of plan.co-draft")),
        "{apart:?}"
    );
    // The intake's acceptance criterion is a decision every later briefing carries.
    let last = &records[10].package.text;
    assert!(
        last.contains("Acceptance: A test shows: Add rate limiting"),
        "{last}"
    );
    // The lead merged both drafts into the third version.
    let state = store.load_state(&id).unwrap();
    let versions: Vec<(&str, &[String])> = state
        .plan_versions
        .iter()
        .map(|p| (p.id.as_str(), &p.from[..]))
        .collect();
    assert_eq!(versions.len(), 3, "{versions:?}");
    assert_eq!(versions[2].1, ["P1", "P2"]);
    // Blind co-drafts, run at once: neither was shown a draft, and neither briefing
    // holds the other's.
    let drafts: Vec<&baton_core::turn::TurnRecord> = records
        .iter()
        .filter(|r| r.assignment.task.contains("plan.co-draft"))
        .collect();
    assert_eq!(drafts.len(), 2);
    for draft in drafts {
        let line = draft.package.line.as_ref().unwrap();
        assert!(line.shown.iter().all(|s| !s.starts_with('P')), "{line:?}");
        assert!(
            !draft.package.text.contains("P1") && !draft.package.text.contains("P2"),
            "{}",
            draft.package.text
        );
    }

    // A resumed unit asks for no lane twice: its progress is the committed one, and
    // what comes next is the lock, the engine's own turn (no worker, no call).
    let mut resumed = engine.open(&id, None).unwrap();
    assert_eq!(resumed.state.line, session.state.line);
    match engine.line_step(&mut resumed, &route).unwrap() {
        LineStep::Lanes(s) => assert_eq!(
            s.iter()
                .map(|s| (s.turn, s.worker.as_str()))
                .collect::<Vec<_>>(),
            [(11, "baton")]
        ),
        other => panic!("{other:?}"),
    }
    assert!(resumed.state.plan_lock.is_some());
}

/// The whole default route offline: past the lock the locked plan is the run's plan,
/// each step built and stopped at its checkpoint (found and confirmed by other families
/// than the builder's, and never by the finder), the review's lanes by families that
/// built nothing, the synthesis approves, and a unit without a workspace says it ran no
/// gate and merged nothing.
#[test]
fn a_clean_unit_runs_the_whole_default_route_offline_to_an_approval() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let (engine, id) = unit(&store, 6);
    let route = Route::default_route().unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let (turns, next) = lanes(&engine, &mut session, &route);
    assert!(matches!(next, Next::Done), "{next:?}");
    let records = store.turns(&id).unwrap();
    assert_eq!(records.len(), turns.len());
    // The review's lanes came before the synthesis; then the engine's own turns: the
    // synthesis, and the gate and merge a unit with no workspace says it skipped.
    let engine_turns: Vec<&str> = records
        .iter()
        .filter(|r| r.worker.as_str() == "baton")
        .map(|r| r.assignment.task.as_str())
        .collect();
    assert_eq!(
        engine_turns,
        [
            "Lock the plan at plan-loop",
            "Synthesize the review at synthesis",
            "Gates at gate",
            "Merge at merge"
        ]
    );
    assert_eq!(records.len(), 29);
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.verdicts.len(), 1);
    assert_eq!(
        state.verdicts[0].verdict,
        baton_core::line::VerdictKind::Approved
    );
    let gate = &records[27].outcome.warnings;
    assert!(
        gate.iter()
            .any(|w| w.contains("no gate ran; nothing was checked")),
        "{gate:?}"
    );
    let lock = records
        .iter()
        .find(|r| r.worker.as_str() == "baton")
        .unwrap();
    assert!(lock.calls.is_empty() && lock.assignment.task.contains("Lock the plan"));
    assert!(state.plan_lock.is_some());
    let titles: Vec<&str> = state.plan.iter().map(|s| s.title.as_str()).collect();
    assert_eq!(titles.len(), 3, "{titles:?}");
    assert!(
        titles[1].starts_with("Implement: Add rate limiting"),
        "{titles:?}"
    );
    assert_eq!(state.steps_done(), 3, "{:?}", state.plan);

    let pins = store.pins(&PinFilter::run(&id)).unwrap();
    let families_of = |seat: &str| -> Vec<String> {
        pins.iter()
            .filter(|p| p.pin.seat.as_str() == seat)
            .map(|p| p.pin.family.clone())
            .collect()
    };
    let builders = families_of("build.rote-step");
    assert!(!builders.is_empty());
    for seat in [
        "checkpoint.find",
        "checkpoint.confirm",
        "review.fresh-eyes",
        "review.breadth",
    ] {
        let held = families_of(seat);
        assert!(!held.is_empty(), "{seat}");
        assert!(
            held.iter().all(|f| !builders.contains(f)),
            "{seat}: {held:?} built by {builders:?}"
        );
    }
    let holder = |seat: &str| {
        pins.iter()
            .find(|p| p.pin.seat.as_str() == seat)
            .unwrap()
            .pin
            .worker
            .clone()
    };
    assert_ne!(holder("checkpoint.find"), holder("checkpoint.confirm"));
    // Three fresh-eyes lanes, three workers.
    let mut fresh: Vec<String> = pins
        .iter()
        .filter(|p| p.pin.seat.as_str() == "review.fresh-eyes")
        .map(|p| p.pin.worker.to_string())
        .collect();
    fresh.sort();
    fresh.dedup();
    assert_eq!(fresh.len(), 3, "{fresh:?}");
}

#[test]
fn a_planted_bug_is_caught_at_its_checkpoint_and_in_review_and_each_fix_is_confirmed_by_another_worker()
 {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let (engine, id) = unit_for(
        &store,
        6,
        "Add rate limiting to the public API, with a planted bug",
    );
    let route = Route::default_route().unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let (_, next) = lanes_upto(&engine, &mut session, &route, 80).expect("no end to the lanes");
    assert!(matches!(next, Next::Done), "{next:?}");
    let state = store.load_state(&id).unwrap();
    let pins = store.pins(&PinFilter::run(&id)).unwrap();
    let builder_of = |step: &str| {
        let turn = store
            .turns(&id)
            .unwrap()
            .into_iter()
            .find(|r| r.assignment.task.contains(&format!("build step {step} ")))
            .unwrap();
        (turn.worker.to_string(), turn.family.clone())
    };
    assert_eq!(state.findings.len(), 2, "{:#?}", state.findings);

    // The checkpoint's first find pass on the implementation step raised it; a worker of
    // another family than the builder's.
    let n1 = &state.findings[0];
    assert_eq!((n1.id.as_str(), n1.station.as_str()), ("N1", "build"));
    assert_eq!(n1.seat.as_str(), "checkpoint.find");
    assert_eq!(n1.severity, baton_core::line::FindingSeverity::Major);
    let step = n1
        .step
        .clone()
        .expect("a checkpoint finding names its step");
    let (builder, builder_family) = builder_of(&step);
    assert_ne!(n1.family, builder_family);
    // The builder claimed the fix; a third worker confirmed it.
    let fix = n1
        .fix_claimed
        .as_ref()
        .expect("the builder claimed the fix");
    assert_eq!(fix.by.as_str(), builder);
    let closed = n1.closed.as_ref().expect("confirmed");
    let baton_core::line::ClosedBy::Confirmed { worker, .. } = &closed.by else {
        panic!("{closed:?}");
    };
    assert_ne!(worker, &n1.provenance.recorded_by);
    assert_ne!(worker.as_str(), builder);
    assert!(!n1.is_open());

    // The review raised another MAJOR one: the synthesis sent the unit back; the second
    // synthesis, after the fix round, approved it.
    let n2 = &state.findings[1];
    assert_eq!((n2.id.as_str(), n2.station.as_str()), ("N2", "review"));
    assert_eq!(n2.severity, baton_core::line::FindingSeverity::Major);
    assert!(!n2.is_open(), "{n2:?}");
    let verdicts: Vec<_> = state
        .verdicts
        .iter()
        .map(|v| (v.verdict, v.fix_round))
        .collect();
    assert_eq!(
        verdicts,
        [
            (baton_core::line::VerdictKind::NeedsChanges, true),
            (baton_core::line::VerdictKind::Approved, false)
        ]
    );
    assert_eq!(state.verdicts[0].findings, ["N2"]);
    assert_eq!(state.line.as_ref().unwrap().fixes, 1);
    // Nobody checked their own family's work.
    let confirmers: Vec<_> = pins
        .iter()
        .filter(|p| p.pin.seat.as_str() == "checkpoint.confirm")
        .map(|p| p.pin.family.clone())
        .collect();
    assert!(!confirmers.is_empty());
}

/// The lanes of a batch (the four discovery lanes, the two co-drafts) call their models
/// at once, each briefed from the same committed state, and commit in lane order
/// whichever answers first: with the workers' latencies reversed, the unit's record is
/// the same, turn for turn.
#[test]
fn a_batchs_lanes_call_at_once_and_commit_in_lane_order_whichever_answers_first() {
    let route = Route::default_route().unwrap();
    let run = |delays: [u64; 6]| {
        let dir = tempfile::tempdir().unwrap();
        let store = store_in(dir.path());
        let (engine, id) = unit_with(&store, 6, "Add rate limiting to the public API", |i, w| {
            w.options.insert("delay_ms".into(), json!(delays[i]));
        });
        let mut session = engine.open(&id, None).unwrap();
        let mut batches = Vec::new();
        // The intake, the discovery batch, the lead's merge, the co-drafts' batch.
        for _ in 0..4 {
            let started = std::time::Instant::now();
            let LineStep::Lanes(turns) = engine.line_step(&mut session, &route).unwrap() else {
                panic!("not a lane");
            };
            let wall = started.elapsed();
            let delay = |t: &baton_engine::TurnSummary| {
                let i = session
                    .config
                    .roster
                    .workers
                    .iter()
                    .position(|w| w.id == t.worker);
                delays[i.unwrap()]
            };
            let called: u64 = turns.iter().map(delay).sum();
            batches.push((
                turns.iter().map(|t| t.turn).collect::<Vec<_>>(),
                wall,
                called,
            ));
        }
        let records = store.turns(&id).unwrap();
        let kept: Vec<(u32, String, Option<baton_core::turn::LaneRecord>, String)> = records
            .iter()
            .map(|r| {
                (
                    r.turn,
                    r.worker.to_string(),
                    r.lane.clone(),
                    r.package.text.clone(),
                )
            })
            .collect();
        let state = serde_json::to_string(&store.load_state(&id).unwrap())
            .unwrap()
            .replace(&id.to_string(), "RUN");
        (batches, kept, state)
    };
    let (batches, first, state) = run([100, 150, 200, 250, 300, 350]);
    let turns: Vec<&[u32]> = batches.iter().map(|b| &b.0[..]).collect();
    assert_eq!(turns, [&[0][..], &[1, 2, 3, 4], &[5], &[6, 7]]);
    // Each batch took less wall time than its calls' latencies added up: one after
    // another it could not have.
    for (turns, wall, called) in &batches[..] {
        if turns.len() > 1 {
            assert!(
                wall.as_millis() < u128::from(*called),
                "lanes {turns:?} took {wall:?}, their calls {called} ms in all"
            );
        }
    }
    // The lanes' workers answer in the other order now; the record is the same.
    let (_, reversed, reversed_state) = run([350, 300, 250, 200, 150, 100]);
    assert_eq!(first.len(), 8);
    for (a, b) in first.iter().zip(&reversed) {
        assert_eq!(a, b);
    }
    assert_eq!(state, reversed_state);
    // Committed in lane order: the discovery turns are lanes 1–4 of the station.
    let lanes: Vec<(String, u32)> = first[1..5]
        .iter()
        .map(|(_, _, lane, _)| {
            let lane = lane.as_ref().unwrap();
            (lane.seat.to_string(), lane.index)
        })
        .collect();
    assert_eq!(
        lanes,
        [
            ("discovery.deep".to_string(), 0),
            ("discovery.deep".to_string(), 1),
            ("discovery.breadth".to_string(), 0),
            ("discovery.invariant-map".to_string(), 0)
        ]
    );
}

/// A plan loop whose every scrutiny raises an objection of its own never converges: at
/// its round limit the line asks a human, whose `more 1` buys one more round and whose
/// `accept` locks the plan as it stands; the unit then runs to its end.
#[test]
fn a_plan_loop_that_will_not_converge_asks_a_human_who_allows_a_round_more_then_accepts_the_plan() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let route = Route::default_route().unwrap();
    let objective = "Add rate limiting to the public API, with a contested plan";
    let (engine, id) = line_unit(&store, &route, objective, |_, _| {});
    let mut session = engine.open(&id, None).unwrap();
    let objections = |session: &baton_engine::Session| {
        session
            .state
            .findings
            .iter()
            .filter(|f| f.station == "plan-loop")
            .count()
    };
    let (_, next) = lanes(&engine, &mut session, &route);
    let Next::Ask { station, question } = next else {
        panic!("{next:?}")
    };
    assert_eq!(station, "plan-loop");
    assert!(
        question.starts_with("plan-loop (plan.scrutiny) did not converge in 4 rounds")
            && question.contains("`accept` to lock the plan as it stands")
            && question.contains("`more N` for N more rounds"),
        "{question}"
    );
    // Two objections a round, none taken for a restatement of another.
    assert_eq!(
        objections(&session),
        8,
        "{:#?}",
        session
            .state
            .findings
            .iter()
            .map(|f| (&f.what, f.round))
            .collect::<Vec<_>>()
    );
    assert!(session.state.plan_lock.is_none());

    let answered = engine.answer_unit(&mut session, "more 1").unwrap();
    assert_eq!(answered.worker.as_str(), "human");
    let decision = session.state.decisions.last().unwrap();
    assert_eq!(decision.provenance.recorded_by.as_str(), "human");
    assert!(decision.text.ends_with(": more 1"), "{}", decision.text);
    let (_, next) = lanes(&engine, &mut session, &route);
    let Next::Ask { question, .. } = next else {
        panic!("{next:?}")
    };
    assert!(
        question.contains("did not converge in 5 rounds"),
        "{question}"
    );
    assert_eq!(objections(&session), 10);

    engine
        .answer_unit(
            &mut session,
            "accept: the objections are about tuning, not design",
        )
        .unwrap();
    let (_, next) = lanes(&engine, &mut session, &route);
    assert_eq!(next, Next::Done);
    assert!(session.state.plan_lock.is_some());
    // Nothing in the record was asked twice: each scrutiny lane of each round ran once.
    let scrutinies: Vec<(u32, u32)> = store
        .turns(&id)
        .unwrap()
        .iter()
        .filter_map(|t| t.lane.as_ref())
        .filter(|l| l.seat.as_str() == "plan.scrutiny")
        .map(|l| (l.round, l.index))
        .collect();
    let expected: Vec<(u32, u32)> = (1..=5).flat_map(|r| [(r, 0), (r, 1)]).collect();
    assert_eq!(scrutinies, expected);
}

/// A unit of the line (created with its route, so a human can answer it) of six mock
/// workers of three families, each set up by `tweak`, and any it adds.
fn line_unit(
    store: &Arc<dyn Store>,
    route: &Route,
    objective: &str,
    tweak: impl Fn(usize, &mut Roster),
) -> (Engine, RunId) {
    let mut roster = Roster::mock(6);
    for (i, w) in roster.workers.iter_mut().enumerate() {
        w.family = ["anthropic", "openai", "zhipu"][i % 3].into();
    }
    tweak(6, &mut roster);
    let mut spec = spec(&[objective], roster);
    spec.objective = objective.into();
    spec.settings.floor = three_pools(&mut spec.roster);
    let engine = engine(store);
    let id = engine.create_unit(&spec, route, None).unwrap();
    (engine, id)
}

/// The only worker qualified for `discovery.breadth` talks to a server nobody runs: its
/// lane fails, runs again, fails, and the third failure in a row stops the line with a
/// question naming the seat, the station, the error and what to do; the other discovery
/// lanes committed once each, and a human's answer runs the seat again.
#[test]
fn three_failed_turns_at_a_seat_stop_the_line_with_a_question_a_human_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let route = Route::default_route().unwrap();
    let (engine, id) = line_unit(
        &store,
        &route,
        "Add rate limiting to the public API",
        |n, roster| {
            for w in &mut roster.workers[..n] {
                w.qualified = ["lead.*", "plan.*", "checkpoint.*", "review.*", "build.*"]
                    .into_iter()
                    .chain(["discovery.deep", "discovery.invariant-map"])
                    .map(baton_core::router::Glob::new)
                    .collect();
            }
            let mut down = WorkerConfig::mock("down", "m-down");
            down.model = "llamacpp/m-down".into();
            down.family = "local".into();
            down.api_base = Some("http://127.0.0.1:9/v1".into());
            down.max_retries = 0;
            down.qualified = vec![baton_core::router::Glob::new("discovery.breadth")];
            roster.workers.push(down);
        },
    );
    let mut session = engine.open(&id, None).unwrap();
    // Lanes, failed or not, until the line says something else.
    let until_asked = |session: &mut baton_engine::Session| {
        let mut ran = Vec::new();
        for _ in 0..20 {
            match engine.line_step(session, &route).unwrap() {
                LineStep::Lanes(turns) => ran.extend(turns.into_iter().map(|t| t.status)),
                LineStep::Waiting(next) => return (ran, next),
            }
        }
        panic!("the line never stopped: {ran:?}");
    };
    let (_, next) = until_asked(&mut session);
    let Next::Ask { station, question } = next else {
        panic!("{next:?}")
    };
    assert_eq!(station, "discovery");
    assert!(
        question.starts_with("discovery.breadth at discovery failed 3 turns in a row (last: ")
            && question.contains("fix its worker (the model, key or server) or bench it"),
        "{question}"
    );
    let records = store.turns(&id).unwrap();
    let discovery: Vec<(String, String)> = records
        .iter()
        .filter_map(|t| t.lane.as_ref().map(|l| (l, t)))
        .filter(|(l, _)| l.station == "discovery")
        .map(|(l, t)| (l.seat.to_string(), t.status.as_str().to_string()))
        .collect();
    let breadth = |status: &str| {
        discovery
            .iter()
            .filter(|(seat, s)| seat == "discovery.breadth" && s == status)
            .count()
    };
    assert_eq!(breadth("failed"), 3, "{discovery:?}");
    assert_eq!(breadth("committed"), 0, "{discovery:?}");
    assert_eq!(discovery.len(), 6, "{discovery:?}");

    engine.answer_unit(&mut session, "retry").unwrap();
    let (ran, next) = until_asked(&mut session);
    assert!(matches!(next, Next::Ask { .. }), "{next:?}");
    // The seat ran again: three more failures, then the question again.
    assert_eq!(ran, [baton_core::turn::TurnStatus::Failed; 3]);
}

/// Pools of unequal sizes: the coldest pool changes hands as the unit goes, so each new
/// seating of a build lane (a step's rework, the fix round) could go to another family.
/// A new build writer keeps to the families that already built the unit: every family
/// that writes the build is one fewer that may review it, and with two of three
/// families building, the three blind fresh-eyes lanes (two workers a family) could not
/// be staffed. The unit ends, built by one family.
#[test]
fn a_builds_later_writers_keep_to_the_family_that_built_it_so_its_reviewers_can_be_found() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let route = Route::default_route().unwrap();
    let engine = engine(&store);
    let objective = "Add rate limiting to the public API, with a planted bug";
    let mut roster = Roster::mock(6);
    for (i, w) in roster.workers.iter_mut().enumerate() {
        w.family = ["alpha", "beta", "gamma"][i % 3].into();
    }
    let mut spec = spec(&[objective], roster);
    spec.objective = objective.into();
    spec.settings = baton_engine::config::RunSettings::default();
    spec.settings.floor = three_pools(&mut spec.roster);
    for (pool, requests) in spec.settings.floor.pools.iter_mut().zip([100, 150, 100]) {
        pool.allowance.requests = Some(requests);
    }
    let id = engine.create_unit(&spec, &route, None).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let (_, next) = lanes_upto(&engine, &mut session, &route, 60).unwrap();
    assert_eq!(next, Next::Done);
    let turns = store.turns(&id).unwrap();
    let family = |w: &baton_core::ids::WorkerId| {
        spec.roster
            .workers
            .iter()
            .find(|c| c.id == *w)
            .unwrap()
            .family
            .clone()
    };
    let builders: std::collections::BTreeSet<String> = turns
        .iter()
        .filter(|t| {
            t.lane
                .as_ref()
                .is_some_and(|l| l.seat.as_str().starts_with("build."))
        })
        .map(|t| family(&t.worker))
        .collect();
    assert_eq!(builders.len(), 1, "{builders:?}");
    // It was rebuilt (the planted bug's rework and fix round), and reviewed by three
    // workers of other families.
    let built = turns
        .iter()
        .filter(|t| {
            t.lane
                .as_ref()
                .is_some_and(|l| l.seat.as_str().starts_with("build."))
        })
        .count();
    assert!(built >= 5, "{built}");
    let fresh: Vec<String> = turns
        .iter()
        .filter(|t| {
            t.lane
                .as_ref()
                .is_some_and(|l| l.seat.as_str() == "review.fresh-eyes")
        })
        .map(|t| family(&t.worker))
        .collect();
    assert!(
        fresh.len() >= 3 && fresh.iter().all(|f| !builders.contains(f)),
        "{fresh:?}"
    );
}

/// The discovery's lead decides where the limiter keeps its counts; the builder of the
/// first step decides the opposite: both decisions are kept, the build lane's work
/// stands, and the line stops with a question naming both decisions and both workers;
/// the human's answer is a decision, and the unit goes on to its end. The discovery
/// lanes themselves only advise: what they would decide is kept as their seat's advice.
#[test]
fn two_workers_contradicting_each_other_on_a_decision_stop_the_line_for_a_human() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let route = Route::default_route().unwrap();
    let glob = |g: &[&str]| {
        g.iter()
            .map(|g| baton_core::router::Glob::new(*g))
            .collect()
    };
    let (engine, id) = line_unit(
        &store,
        &route,
        "Add rate limiting to the public API, with a disputed decision",
        |n, roster| {
            // worker-1 alone leads the discovery and never builds.
            for (i, w) in roster.workers[..n].iter_mut().enumerate() {
                w.qualified = if i == 0 {
                    glob(&[
                        "lead.*",
                        "discovery.*",
                        "plan.*",
                        "checkpoint.*",
                        "review.*",
                    ])
                } else {
                    glob(&[
                        "lead.intake",
                        "lead.plan",
                        "discovery.*",
                        "plan.*",
                        "checkpoint.*",
                        "review.*",
                        "build.*",
                    ])
                };
            }
        },
    );
    let mut session = engine.open(&id, None).unwrap();
    let (_, next) = lanes(&engine, &mut session, &route);
    let Next::Ask { question, .. } = next else {
        panic!(
            "{next:?} {:#?}",
            session
                .state
                .decisions
                .iter()
                .map(|d| (&d.id, &d.text, &d.provenance.recorded_by))
                .collect::<Vec<_>>()
        )
    };
    let decided = |text: &str| {
        session
            .state
            .decisions
            .iter()
            .find(|d| d.text == text)
            .unwrap_or_else(|| panic!("{text}: {:#?}", session.state.decisions))
            .clone()
    };
    let keep = decided("Keep the rate limit counters in Redis");
    let never = decided("Never keep the rate limit counters in Redis");
    assert_eq!(keep.provenance.recorded_by.as_str(), "worker-1");
    assert_ne!(never.provenance.recorded_by.as_str(), "worker-1");
    assert!(
        question.starts_with(&format!(
            "{} (build.rote-step) recorded {} \"Never keep the rate limit counters in Redis\", which may contradict {} \"Keep the rate limit counters in Redis\" by worker-1; answer which holds",
            never.provenance.recorded_by, never.id, keep.id
        )),
        "{question}"
    );
    // No discovery lane decided anything: their decisions are their seats' advice.
    let discovery_turns: Vec<u32> = store
        .turns(&id)
        .unwrap()
        .iter()
        .filter(|t| {
            t.lane
                .as_ref()
                .is_some_and(|l| l.station == "discovery" && !l.seat.as_str().starts_with("lead."))
        })
        .map(|t| t.turn)
        .collect();
    assert_eq!(discovery_turns.len(), 4);
    assert!(
        session
            .state
            .decisions
            .iter()
            .all(|d| !discovery_turns.contains(&d.provenance.turn)),
        "{:#?}",
        session.state.decisions
    );
    assert!(
        session
            .state
            .assumptions
            .iter()
            .any(|a| a.text.starts_with("Advice of discovery.deep: ")),
        "{:#?}",
        session.state.assumptions
    );

    engine
        .answer_unit(
            &mut session,
            "Keep them in Redis: the builder read a stale file",
        )
        .unwrap();
    let (_, next) = lanes(&engine, &mut session, &route);
    assert_eq!(next, Next::Done);
    let human = session
        .state
        .decisions
        .iter()
        .find(|d| d.provenance.recorded_by.as_str() == "human")
        .unwrap();
    assert!(
        human
            .text
            .ends_with("Keep them in Redis: the builder read a stale file")
    );
    assert!(
        human.text.contains("which may contradict"),
        "{}",
        human.text
    );
}

/// The locked plan's implementation step is tagged `credentials`, which the build and
/// checkpoint seats deny family anthropic: that step is built, found and confirmed by
/// other families, the router having left anthropic out for the tag.
#[test]
fn a_credentials_step_is_never_built_or_checked_by_a_family_its_seats_deny_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let route = Route::default_route().unwrap();
    let objective = "Move the public API's credentials into the vault";
    let mut roster = Roster::mock(9);
    for (i, w) in roster.workers.iter_mut().enumerate() {
        w.family = ["anthropic", "openai", "zhipu"][i % 3].into();
    }
    let mut spec = spec(&[objective], roster);
    spec.objective = objective.into();
    spec.settings.floor = three_pools(&mut spec.roster);
    for seat in ["build.rote-step", "checkpoint.find", "checkpoint.confirm"] {
        let mut s = baton_core::router::Seat::new(baton_core::router::SeatId::new(seat));
        s.deny_tags
            .insert("credentials".into(), vec!["anthropic".into()]);
        spec.settings.floor.seats.push(s);
    }
    let engine = engine(&store);
    let id = engine.create_unit(&spec, &route, None).unwrap();
    let mut session = engine.open(&id, None).unwrap();
    let (_, next) = lanes_upto(&engine, &mut session, &route, 80).unwrap();
    assert_eq!(next, Next::Done);
    let locked = session.state.locked_plan().unwrap();
    assert_eq!(locked.steps[1].tags, ["standard", "credentials"]);
    let family = |w: &baton_core::ids::WorkerId| {
        spec.roster
            .workers
            .iter()
            .find(|c| c.id == *w)
            .unwrap()
            .family
            .clone()
    };
    let t2: Vec<(String, String)> = store
        .turns(&id)
        .unwrap()
        .iter()
        .filter_map(|t| t.lane.as_ref().map(|l| (l, t)))
        .filter(|(l, _)| l.step.as_deref() == Some("T2"))
        .map(|(l, t)| (l.seat.to_string(), family(&t.worker)))
        .collect();
    assert!(t2.len() >= 3, "{t2:?}");
    assert!(t2.iter().all(|(_, f)| f != "anthropic"), "{t2:?}");
    // Not by luck: the seating of T2's build left anthropic out for the tag.
    let pins = store.pins(&PinFilter::run(&id)).unwrap();
    let denied = pins.iter().any(|p| {
        p.pin.excluded.as_ref().is_some_and(|e| {
            e.iter()
                .any(|x| x.reason == "policy_denied" && x.why.contains("credentials"))
        })
    });
    assert!(denied, "{pins:#?}");
}

/// A model behind a local server that speaks its provider's wire format: its text is the
/// offline mock's answer to the request as sent (system, user, and the answer's schema,
/// from OpenAI's `response_format` or Anthropic's forced tool), wrapped the way the
/// provider wraps it.
fn mock_model_server(anthropic: bool) -> super::server::TestServer {
    use baton_gateway::Gateway;
    super::server::TestServer::start(super::server::deciding(400, move |r| {
        let body = r.json();
        let (system, user, schema) = if anthropic {
            (
                body["system"].as_str().unwrap_or_default().to_string(),
                body.pointer("/messages/0/content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                body.pointer("/tools/0/input_schema")
                    .cloned()
                    .unwrap_or(Value::Null),
            )
        } else {
            (
                body.pointer("/messages/0/content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                body.pointer("/messages/1/content")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                body.pointer("/response_format/json_schema/schema")
                    .cloned()
                    .unwrap_or(Value::Null),
            )
        };
        let answered = baton_gateway::MockGateway::new()
            .complete(&baton_gateway::ModelRequest {
                model: "m",
                system: &system,
                user: &user,
                call: baton_core::turn::CallKind::Combined,
                turn: 0,
                schema: &schema,
                max_tokens: None,
                temperature: None,
                workspace: None,
                cancel: None,
                output: None,
                hashed: None,
            })
            .unwrap();
        let claim: Value = serde_json::from_str(&answered.text).unwrap();
        let wire = if anthropic {
            json!({
                "id": "msg_01", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [{"type": "tool_use", "id": "toolu_01", "name": "submit_claim", "input": claim}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 900, "output_tokens": 120}
            })
        } else {
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-mini",
                "choices": [{"index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": claim.to_string()}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 120}
            })
        };
        super::server::json(200, &wire.to_string())
    }))
}

/// The default route with API workers of three families behind servers speaking
/// OpenAI's and Anthropic's wire formats: every station's answer (an intake, plans,
/// checks, the usual claims) goes out with its schema and comes back parsed, and the
/// planted bug is caught, fixed and confirmed, to APPROVED.
#[test]
fn the_line_runs_with_api_workers_over_each_providers_wire_format() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let route = Route::default_route().unwrap();
    let (openai, anthropic) = (mock_model_server(false), mock_model_server(true));
    let mut workers = Vec::new();
    for i in 0..2 {
        workers.push(super::providers::openai_worker(
            &format!("gpt-{i}"),
            &openai,
            0,
        ));
        workers.push(super::providers::anthropic_worker(
            &format!("claude-{i}"),
            &anthropic,
        ));
        let mut glm = super::providers::openai_worker(&format!("glm-{i}"), &openai, 0);
        glm.family = "zhipu".into();
        glm.model = "openai/glm-4.6".into();
        workers.push(glm);
    }
    let objective = "Add rate limiting to the public API, with a planted bug";
    let mut spec = spec(&[objective], Roster { workers });
    spec.objective = objective.into();
    spec.settings.floor = three_pools(&mut spec.roster);
    let engine = engine(&store);
    let id = engine.create_unit(&spec, &route, None).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let (turns, next) = lanes_upto(&engine, &mut session, &route, 80).unwrap();
    assert_eq!(next, Next::Done);
    assert_eq!(turns.len(), 42);
    let verdict = session.state.verdicts.last().unwrap();
    assert_eq!(verdict.verdict, baton_core::line::VerdictKind::Approved);
    assert_eq!(session.state.findings.len(), 2);
    assert!(session.state.findings.iter().all(|f| !f.is_open()));
    // Both wire formats carried the line's schemas.
    let tools: Vec<String> = anthropic
        .requests()
        .iter()
        .filter_map(|r| {
            r.json()
                .pointer("/tools/0/input_schema/title")
                .and_then(Value::as_str)
                .map(str::to_string)
        })
        .collect();
    assert!(!tools.is_empty());
    assert!(
        openai
            .requests()
            .iter()
            .any(|r| r.json().pointer("/response_format/json_schema").is_some())
    );
}

/// A batch whose first commit is fenced off (another session committed those turns
/// first): none of its lanes is committed, the error names the turn, and what every
/// lane's call spent still counts against its pool.
#[test]
fn a_batch_fenced_off_at_its_first_commit_commits_nothing_and_bills_every_call() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let route = Route::default_route().unwrap();
    let (engine, id) = line_unit(
        &store,
        &route,
        "Add rate limiting to the public API",
        |_, _| {},
    );
    let mut first = engine.open(&id, None).unwrap();
    engine.line_step(&mut first, &route).unwrap(); // the intake
    let mut stale = engine.open(&id, None).unwrap();
    let LineStep::Lanes(batch) = engine.line_step(&mut first, &route).unwrap() else {
        panic!("no batch")
    };
    assert_eq!(batch.len(), 4);
    let requests = || -> u64 {
        ["a", "b", "c"]
            .iter()
            .map(|p| {
                store
                    .pool_usage(
                        &baton_core::router::PoolId::new(*p),
                        baton_core::ids::Timestamp(i64::MIN),
                        baton_core::ids::Timestamp(i64::MAX),
                    )
                    .unwrap()
                    .requests
            })
            .sum()
    };
    let before = requests();
    // The stale session still believes turn 1 is next: it runs the same batch again.
    let err = engine.line_step(&mut stale, &route).unwrap_err();
    assert!(err.to_string().contains("turn 1"), "{err}");
    assert_eq!(store.turns(&id).unwrap().len(), 5);
    assert_eq!(requests(), before + 4, "every lane's call is billed");
}
