//! The assembly line's lanes as engine turns: each lane the cursor names is one
//! committed turn, seated by the router, briefed with its line block, its answer folded
//! in by the line's rules and the unit's progress moved on in the same commit.

use baton_core::line::Route;
use baton_core::line::cursor::Next;
use baton_engine::LineStep;
use baton_engine::bench::three_pools;
use baton_store::PinFilter;

use super::*;

/// A unit of three mock workers of three families, routed by three pools.
fn unit(store: &Arc<dyn Store>) -> (Engine, RunId) {
    let mut roster = Roster::mock(3);
    for (w, family) in roster
        .workers
        .iter_mut()
        .zip(["anthropic", "openai", "zhipu"])
    {
        w.family = family.into();
    }
    let mut spec = spec(&["Add rate limiting to the public API"], roster);
    spec.objective = "Add rate limiting to the public API".into();
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
            LineStep::Lane(summary) => {
                assert!(summary.error.is_none(), "{:?}", summary.error);
                turns.push(summary.turn);
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
    let (engine, id) = unit(&store);
    let route = Route::default_route().unwrap();
    // Stopped after the lead's merge (a crash, a new process): the rest runs on a
    // session opened from the store, whose seatings know who wrote the plan.
    let mut first = engine.open(&id, None).unwrap();
    assert!(lanes_upto(&engine, &mut first, &route, 9).is_none());
    drop(first);
    let mut session = engine.open(&id, None).unwrap();
    let (rest, next) = lanes(&engine, &mut session, &route);
    let turns: Vec<u32> = (0..9).chain(rest).collect();
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
    // Blind co-drafts: the second was shown no other draft, and its briefing says so.
    let second_draft = records
        .iter()
        .filter(|r| r.assignment.task.contains("plan.co-draft"))
        .nth(1)
        .unwrap();
    let line = second_draft.package.line.as_ref().unwrap();
    assert!(line.shown.iter().all(|s| !s.starts_with('P')), "{line:?}");
    assert!(
        line.omitted.iter().any(|o| o.item == "P1"),
        "{:?}",
        line.omitted
    );

    // A resumed unit asks for no lane twice: its progress is the committed one.
    let mut resumed = engine.open(&id, None).unwrap();
    assert_eq!(resumed.state.line, session.state.line);
    let (again, next) = lanes(&engine, &mut resumed, &route);
    assert!(again.is_empty(), "{again:?}");
    assert!(matches!(next, Next::LockPlan { .. }));
}
