//! The cursor driven through the default route by scripted workers of three families,
//! offline: every lane's effect goes through the line's reconciler rules, as the
//! supervisor's turns will.

use super::*;
use crate::compiler::{Assignment, AssignmentKind, WorkerProfile};
use crate::ids::{RunId, Timestamp, WorkerId};
use crate::line::synthesis::{Report, synthesize};
use crate::line::{DraftStep, FindingClaim, FindingSeverity, PlanDraft};
use crate::reconciler::line::{
    LineTurn, claim_fixed, confirm_fixed, lock_plan, propose_plan, raise_findings, record_verdict,
};
use crate::reconciler::{ReconcileOutcome, TurnContext};

/// Where a scripted finding is raised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct At {
    kind: StationKind,
    role: Role,
    round: u32,
    /// The number of fix rounds taken when it is raised.
    fixes: u32,
    step: Option<usize>,
}

/// What the scripted workers do beyond the defaults (drafting, fixing what is open,
/// confirming what was claimed fixed).
#[derive(Default)]
struct Script {
    findings: Vec<(At, FindingClaim)>,
    /// Every scrutiny lane raises something new, so the plan loop never converges.
    endless_scrutiny: bool,
    /// The gates fail while fewer fix rounds than this were taken.
    gate_fails_until: u32,
    /// Serialize and reload state and progress between every two actions, as a crash
    /// and `--resume` would.
    reload: bool,
    /// A human's answers to the questions the line stops on, in turn; the run ends at
    /// the first question left unanswered.
    answers: Vec<&'static str>,
}

#[derive(Debug, Default)]
struct Run {
    /// Each batch of seat turns: station, round, step and its lanes' seats.
    batches: Vec<(String, u32, Option<String>, Vec<String>)>,
    seat_turns: u32,
    asked: Option<String>,
    /// The questions answered on the way.
    answered: Vec<String>,
    state: Option<ExecutionState>,
}

fn worker_for(lane: &Lane) -> WorkerProfile {
    // Three families, the cross-family rule kept by hand: opus builds and leads, glm
    // finds and reviews, gpt confirms and reviews; co-drafts are gpt's and opus's.
    let id = match (lane.role, lane.seat.as_str()) {
        (Role::Confirm, _) => "gpt",
        (Role::Find { .. }, _) => "glm",
        (Role::Build | Role::Merge | Role::Revise, _) => "opus",
        (Role::Work, "plan.co-draft") => ["gpt", "opus"][lane.index as usize % 2],
        (Role::Work, s) if s.starts_with("review.") || s == "plan.scrutiny" => {
            ["glm", "gpt"][lane.index as usize % 2]
        }
        _ => "opus",
    };
    WorkerProfile {
        id: WorkerId::new(id),
        model: format!("mock/{id}"),
        family: id.into(),
        role: None,
    }
}

fn plan(titles: &[(&str, &str)]) -> PlanDraft {
    PlanDraft {
        steps: titles
            .iter()
            .map(|(t, tag)| DraftStep {
                title: t.to_string(),
                tags: vec![tag.to_string()],
            })
            .collect(),
        rationale: None,
    }
}

fn drive(script: &Script) -> Run {
    let route = Route::default_route().unwrap();
    let mut state = ExecutionState::new(RunId("unit".into()), "Add rate limiting", &[]);
    state.line = Some(LineProgress::start());
    let mut run = Run::default();
    let mut out = ReconcileOutcome::default();
    let a = Assignment {
        kind: AssignmentKind::Step,
        step_id: None,
        task: "t".into(),
    };
    for _ in 0..400 {
        if script.reload {
            let text = serde_json::to_string(&state).unwrap();
            state = serde_json::from_str(&text).unwrap();
        }
        let progress = state.line.clone().unwrap();
        let happened = match next(&route, &progress, &state) {
            Next::Done => {
                run.state = Some(state);
                return run;
            }
            Next::Ask { question, .. } => match script.answers.get(run.answered.len()) {
                Some(answer) => {
                    run.answered.push(question);
                    Happened::Answered(Reply::read(answer))
                }
                None => {
                    run.asked = Some(question);
                    run.state = Some(state);
                    return run;
                }
            },
            Next::Seats {
                station,
                kind,
                round,
                step,
                lanes,
            } => {
                run.batches.push((
                    station.clone(),
                    round,
                    step.clone(),
                    lanes.iter().map(|l| l.seat.to_string()).collect(),
                ));
                for lane in &lanes {
                    run.seat_turns += 1;
                    let w = worker_for(lane);
                    let ctx = TurnContext {
                        worker: &w,
                        turn: state.turns,
                        at: Timestamp(i64::from(state.turns)),
                        assignment: &a,
                        seen: Default::default(),
                    };
                    let turn = LineTurn {
                        ctx: &ctx,
                        station: &station,
                        seat: &lane.seat,
                        round,
                        step: step.as_deref(),
                    };
                    let at = At {
                        kind,
                        role: lane.role,
                        round,
                        fixes: progress.fixes,
                        step: progress.step,
                    };
                    act(&mut state, &turn, lane, at, script, &mut out);
                    state.turns += 1;
                }
                Happened::Committed(lanes)
            }
            Next::LockPlan { .. } => {
                let latest = state.plan_versions.last().unwrap().id.clone();
                let w = worker_for(&Lane {
                    seat: SeatId::new("lead.plan"),
                    index: 0,
                    role: Role::Merge,
                    blind: false,
                });
                let ctx = TurnContext {
                    worker: &w,
                    turn: state.turns,
                    at: Timestamp(0),
                    assignment: &a,
                    seen: Default::default(),
                };
                assert!(lock_plan(&mut state, &ctx, &latest, &mut out));
                Happened::Locked
            }
            Next::Synthesize { station } => {
                let findings: Vec<_> = state
                    .findings
                    .iter()
                    .filter(|f| f.station == "review")
                    .collect();
                let reports = vec![Report {
                    seat: SeatId::new("review.breadth"),
                    worker: WorkerId::new("glm"),
                    done: true,
                }];
                let synthesis = synthesize(&findings, &reports);
                let w = WorkerProfile {
                    id: WorkerId::new("engine"),
                    model: "synthesis".into(),
                    family: "engine".into(),
                    role: None,
                };
                let ctx = TurnContext {
                    worker: &w,
                    turn: state.turns,
                    at: Timestamp(0),
                    assignment: &a,
                    seen: Default::default(),
                };
                record_verdict(&mut state, &ctx, &station, &synthesis, &mut out);
                Happened::Verdict(synthesis.verdict)
            }
            Next::Gate { .. } => Happened::Gate {
                passed: progress.fixes >= script.gate_fails_until,
            },
            Next::Merge { .. } => Happened::Merged,
        };
        let mut progress = progress;
        advance(&route, &mut progress, &state, happened);
        state.line = Some(progress);
    }
    panic!("the line did not finish in 400 actions: {:#?}", run.batches);
}

fn act(
    state: &mut ExecutionState,
    turn: &LineTurn<'_>,
    lane: &Lane,
    at: At,
    script: &Script,
    out: &mut ReconcileOutcome,
) {
    let scripted: Vec<FindingClaim> = script
        .findings
        .iter()
        .filter(|(when, _)| *when == at)
        .map(|(_, c)| c.clone())
        .collect();
    match (at.kind, lane.role) {
        (StationKind::Plan, Role::Work) => {
            let mine = if turn.ctx.worker.id.as_str() == "gpt" {
                plan(&[
                    ("token bucket per key", "heavy"),
                    ("429 with Retry-After", "light"),
                ])
            } else {
                plan(&[("middleware", "standard")])
            };
            propose_plan(state, turn, &mine, &[], out);
        }
        (StationKind::Plan, Role::Merge) | (StationKind::PlanLoop, Role::Revise) => {
            let from: Vec<String> = state.plan_versions.iter().map(|p| p.id.clone()).collect();
            let merged = plan(&[
                ("token bucket per key", "heavy"),
                ("429 with Retry-After", "light"),
            ]);
            propose_plan(state, turn, &merged, &from, out);
        }
        (StationKind::PlanLoop, Role::Work) if script.endless_scrutiny => {
            let n = state.findings.len();
            let claim = FindingClaim {
                severity: FindingSeverity::Minor,
                what: format!("objection number {n} about burst size {n}"),
                location: format!("plan step {n}"),
            };
            raise_findings(state, turn, &[claim], out);
        }
        (_, Role::Build) => {
            let open: Vec<String> = state
                .findings
                .iter()
                .filter(|f| f.is_open() && f.fix_claimed.is_none())
                .filter(|f| f.step.as_deref() == turn.step || turn.step.is_none())
                .map(|f| f.id.clone())
                .collect();
            for id in open {
                claim_fixed(state, turn, &id, Some("fixed"), out);
            }
        }
        (_, Role::Confirm) => {
            let claimed: Vec<String> = state
                .findings
                .iter()
                .filter(|f| f.is_open() && f.fix_claimed.is_some())
                .map(|f| f.id.clone())
                .collect();
            for id in claimed {
                confirm_fixed(state, turn, &id, None, out);
            }
        }
        // Finds, scrutinies and reviews raise what the script gives them.
        _ => {
            raise_findings(state, turn, &scripted, out);
        }
    }
}

fn major(what: &str, location: &str) -> FindingClaim {
    FindingClaim {
        severity: FindingSeverity::Major,
        what: what.into(),
        location: location.into(),
    }
}

fn stations(run: &Run) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for (s, ..) in &run.batches {
        if out.last() != Some(&s.as_str()) {
            out.push(s);
        }
    }
    out
}

#[test]
fn a_clean_unit_runs_the_whole_default_route_to_an_approval() {
    let run = drive(&Script::default());
    assert_eq!(run.asked, None);
    let state = run.state.as_ref().unwrap();
    assert_eq!(
        stations(&run),
        [
            "intake",
            "discovery",
            "plan",
            "plan-loop",
            "build",
            "review"
        ]
    );
    // intake 1, discovery 4 + merge, 2 co-drafts + merge, 2 scrutinies, build: a heavy
    // step (build, 2 finds, confirm) and a light one (build, find, confirm), review 5.
    assert_eq!(run.seat_turns, 1 + 5 + 3 + 2 + 4 + 3 + 5);
    assert_eq!(state.plan_lock.as_ref().unwrap().plan, "P3");
    assert_eq!(state.verdicts.len(), 1);
    assert_eq!(state.verdicts[0].verdict, VerdictKind::Approved);
    assert_eq!(state.line.as_ref().unwrap().station, 9);
}

#[test]
fn lanes_run_in_parallel_batches_of_at_most_k_and_a_merge_waits_for_its_lanes() {
    let run = drive(&Script::default());
    let of = |station: &str| -> Vec<Vec<String>> {
        run.batches
            .iter()
            .filter(|b| b.0 == station)
            .map(|b| b.3.clone())
            .collect()
    };
    assert_eq!(
        of("discovery"),
        [
            vec![
                "discovery.deep",
                "discovery.deep",
                "discovery.breadth",
                "discovery.invariant-map"
            ],
            vec!["lead.discovery"]
        ]
    );
    assert_eq!(
        of("plan"),
        [vec!["plan.co-draft", "plan.co-draft"], vec!["lead.plan"]]
    );
    // Scrutiny takes turns.
    assert_eq!(
        of("plan-loop"),
        [vec!["plan.scrutiny"], vec!["plan.scrutiny"]]
    );
    // At most 3 review seats at once.
    assert_eq!(
        of("review"),
        [
            vec![
                "review.fresh-eyes",
                "review.fresh-eyes",
                "review.fresh-eyes"
            ],
            vec!["review.breadth", "review.deep-rounds"]
        ]
    );
    // A heavy step gets two find passes; each lane of a step waits for the one before.
    let build: Vec<(Option<String>, Vec<String>)> = run
        .batches
        .iter()
        .filter(|b| b.0 == "build")
        .map(|b| (b.2.clone(), b.3.clone()))
        .collect();
    let t1: Vec<&str> = build
        .iter()
        .filter(|b| b.0.as_deref() == Some("T1"))
        .map(|b| b.1[0].as_str())
        .collect();
    assert_eq!(
        t1,
        [
            "build.hard-step",
            "checkpoint.find",
            "checkpoint.find",
            "checkpoint.confirm"
        ]
    );
    let t2: Vec<&str> = build
        .iter()
        .filter(|b| b.0.as_deref() == Some("T2"))
        .map(|b| b.1[0].as_str())
        .collect();
    assert_eq!(
        t2,
        ["build.rote-step", "checkpoint.find", "checkpoint.confirm"]
    );
}

#[test]
fn a_plan_loop_that_raises_something_new_every_round_asks_a_human_at_its_limit() {
    let run = drive(&Script {
        endless_scrutiny: true,
        ..Script::default()
    });
    let question = run.asked.unwrap();
    assert!(
        question.starts_with("plan-loop (plan.scrutiny) did not converge in 4 rounds: each raised something new; answer `accept` to lock the plan as it stands, `more N` for N more rounds, or anything else"),
        "{question}"
    );
    let loop_batches: Vec<_> = run.batches.iter().filter(|b| b.0 == "plan-loop").collect();
    // 4 rounds of 2 scrutinies, and the lead's revision before rounds 2, 3 and 4.
    assert_eq!(loop_batches.len(), 4 * 2 + 3);
    assert_eq!(loop_batches[2].3, ["lead.plan"]);
    assert_eq!(loop_batches[2].1, 2);
    assert!(
        run.state.unwrap().plan_lock.is_none(),
        "an unconverged plan is not locked"
    );
}

#[test]
fn a_plan_loop_converges_when_a_round_raises_nothing_new_and_then_locks() {
    let at = At {
        kind: StationKind::PlanLoop,
        role: Role::Work,
        round: 1,
        fixes: 0,
        step: None,
    };
    let run = drive(&Script {
        findings: vec![(at, major("no limit for internal callers", "plan step 1"))],
        ..Script::default()
    });
    assert_eq!(run.asked, None);
    let rounds: Vec<u32> = run
        .batches
        .iter()
        .filter(|b| b.0 == "plan-loop")
        .map(|b| b.1)
        .collect();
    // Round 1 raised it (both scrutinies: the second restates, no new record), the
    // lead revised, round 2 raised nothing new.
    assert_eq!(rounds, [1, 1, 2, 2, 2]);
    let state = run.state.unwrap();
    assert_eq!(state.plan_lock.as_ref().unwrap().plan, "P4");
}

#[test]
fn a_checkpoint_finding_sends_its_step_back_until_another_worker_confirms_the_fix() {
    let at = At {
        kind: StationKind::Build,
        role: Role::Find { pass: 1 },
        round: 1,
        fixes: 0,
        step: Some(0),
    };
    let run = drive(&Script {
        findings: vec![(
            at,
            major("buckets of expired keys are never freed", "src/limit.rs"),
        )],
        ..Script::default()
    });
    assert_eq!(run.asked, None);
    let t1: Vec<(u32, &str)> = run
        .batches
        .iter()
        .filter(|b| b.0 == "build" && b.2.as_deref() == Some("T1"))
        .map(|b| (b.1, b.3[0].as_str()))
        .collect();
    // The confirm of round 1 finds nothing claimed fixed: the step is built again.
    assert_eq!(
        t1,
        [
            (1, "build.hard-step"),
            (1, "checkpoint.find"),
            (1, "checkpoint.find"),
            (1, "checkpoint.confirm"),
            (2, "build.hard-step"),
            (2, "checkpoint.find"),
            (2, "checkpoint.find"),
            (2, "checkpoint.confirm"),
        ]
    );
    let state = run.state.unwrap();
    let f = &state.findings[0];
    assert_eq!(f.status, crate::line::FindingStatus::Fixed);
    assert_eq!(f.fix_claimed.as_ref().unwrap().by.as_str(), "opus");
    assert_eq!(state.verdicts[0].verdict, VerdictKind::Approved);
}

#[test]
fn a_major_review_finding_forces_a_fix_round_back_to_the_build() {
    let at = At {
        kind: StationKind::Review,
        role: Role::Work,
        round: 1,
        fixes: 0,
        step: None,
    };
    let run = drive(&Script {
        findings: vec![(
            at,
            major("no test covers a burst of requests", "tests/limit.rs"),
        )],
        ..Script::default()
    });
    assert_eq!(run.asked, None);
    let state = run.state.unwrap();
    let verdicts: Vec<VerdictKind> = state.verdicts.iter().map(|v| v.verdict).collect();
    assert_eq!(verdicts, [VerdictKind::NeedsChanges, VerdictKind::Approved]);
    assert!(state.verdicts[0].fix_round);
    assert_eq!(state.line.as_ref().unwrap().fixes, 1);
    assert_eq!(
        stations(&Run {
            batches: run.batches.clone(),
            ..Run::default()
        })[4..],
        ["build", "review", "build", "review"]
    );
    // The second review numbers its rounds on from the first's (1, 2): its round 3
    // raised nothing new, so it converged at once.
    let review_rounds: Vec<u32> = run
        .batches
        .iter()
        .filter(|b| b.0 == "review")
        .map(|b| b.1)
        .collect();
    assert_eq!(review_rounds, [1, 1, 2, 3, 3]);
    // The fix round is one build (no step) with its checkpoint.
    let fix: Vec<&str> = run
        .batches
        .iter()
        .filter(|b| b.0 == "build" && b.2.is_none())
        .map(|b| b.3[0].as_str())
        .collect();
    assert_eq!(
        fix,
        ["build.hard-step", "checkpoint.find", "checkpoint.confirm"]
    );
    assert!(state.findings.iter().all(|f| !f.is_open()));
}

#[test]
fn a_failing_gate_sends_the_work_back_and_spent_fix_rounds_ask_a_human() {
    let run = drive(&Script {
        gate_fails_until: 1,
        ..Script::default()
    });
    assert_eq!(run.asked, None);
    assert_eq!(run.state.unwrap().verdicts.len(), 2);

    let run = drive(&Script {
        gate_fails_until: 10,
        ..Script::default()
    });
    let question = run.asked.unwrap();
    assert!(
        question.starts_with("gate sends the unit back again after 3 fix rounds; look at the open findings and decide; answer `accept` to go on past this station as things stand, `more N` for N more fix rounds"),
        "{question}"
    );
}

#[test]
fn a_human_answers_a_plan_loop_that_would_not_converge_with_more_rounds_then_accepts_it() {
    let run = drive(&Script {
        endless_scrutiny: true,
        answers: vec!["more 2", "accept: the objections are about tuning"],
        ..Script::default()
    });
    assert_eq!(run.asked, None, "{:?}", run.answered);
    assert_eq!(run.answered.len(), 2);
    assert!(
        run.answered[1].contains("did not converge in 6 rounds"),
        "{:?}",
        run.answered
    );
    // Six rounds of two scrutinies and five revisions, then the lock, the build and the
    // rest of the route to the end.
    let loop_batches = run.batches.iter().filter(|b| b.0 == "plan-loop").count();
    assert_eq!(loop_batches, 6 * 2 + 5);
    let state = run.state.unwrap();
    assert!(state.plan_lock.is_some());
    assert_eq!(
        state.verdicts.last().unwrap().verdict,
        VerdictKind::Approved
    );
}

#[test]
fn guidance_for_a_spent_fix_round_gives_one_more_and_accept_goes_on_past_the_gate() {
    let run = drive(&Script {
        gate_fails_until: 10,
        answers: vec!["Check the limiter's clock source first", "accept"],
        ..Script::default()
    });
    assert_eq!(run.asked, None, "{:?}", run.answered);
    assert_eq!(run.answered.len(), 2);
    assert!(
        run.answered[1].contains("after 4 fix rounds"),
        "{:?}",
        run.answered
    );
    let state = run.state.unwrap();
    assert_eq!(state.line.as_ref().unwrap().fixes, 4);
    // Past the gate, which never passed, through the merge to the end: the human's call.
    let route = Route::default_route().unwrap();
    assert_eq!(state.line.as_ref().unwrap().station, route.stations.len());
}

#[test]
fn a_unit_reloaded_between_every_two_actions_ends_byte_identical() {
    let at = At {
        kind: StationKind::Review,
        role: Role::Work,
        round: 1,
        fixes: 0,
        step: None,
    };
    let findings = vec![(
        at,
        major("no test covers a burst of requests", "tests/limit.rs"),
    )];
    let straight = drive(&Script {
        findings: findings.clone(),
        ..Script::default()
    });
    let reloaded = drive(&Script {
        findings,
        reload: true,
        ..Script::default()
    });
    assert_eq!(straight.batches, reloaded.batches);
    assert_eq!(
        serde_json::to_string(&straight.state).unwrap(),
        serde_json::to_string(&reloaded.state).unwrap()
    );
}

#[test]
fn a_question_stops_the_line_until_it_is_answered() {
    let route = Route::default_route().unwrap();
    let state = ExecutionState::new(RunId("u".into()), "something vague", &[]);
    let mut progress = LineProgress::start();
    advance(
        &route,
        &mut progress,
        &state,
        Happened::Asked("per key or per IP?".into()),
    );
    assert_eq!(
        next(&route, &progress, &state),
        Next::Ask {
            station: "intake".into(),
            question: "per key or per IP?".into()
        }
    );
    advance(
        &route,
        &mut progress,
        &state,
        Happened::Answered(Reply::Guidance),
    );
    assert!(
        matches!(next(&route, &progress, &state), Next::Seats { ref station, .. } if station == "intake")
    );
}

#[test]
fn progress_the_line_did_not_write_asks_instead_of_finishing() {
    let route = Route::default_route().unwrap();
    let state = ExecutionState::new(RunId("u".into()), "o", &[]);
    let mut progress = LineProgress::start();
    progress.done.push(Lane {
        seat: SeatId::new("lead.intake"),
        index: 0,
        role: Role::Work,
        blind: false,
    });
    assert!(
        matches!(next(&route, &progress, &state), Next::Ask { ref question, .. } if question.contains("did not move on"))
    );
}

#[test]
fn progress_past_the_routes_end_asks_and_at_its_end_is_done() {
    let route = Route::default_route().unwrap();
    let state = ExecutionState::new(RunId("u".into()), "o", &[]);
    let mut progress = LineProgress::start();
    progress.station = route.stations.len();
    assert_eq!(next(&route, &progress, &state), Next::Done);
    progress.station += 1;
    assert!(
        matches!(next(&route, &progress, &state), Next::Ask { ref question, .. } if question.contains("names station 11 and route default has 9"))
    );
}

#[test]
fn three_failed_turns_in_a_row_at_a_seat_ask_a_human_and_an_answer_runs_it_again() {
    let route = Route::default_route().unwrap();
    let state = ExecutionState::new(RunId("u".into()), "o", &[]);
    let mut progress = LineProgress::start();
    let intake = SeatId::new("lead.intake");
    let failed = |seat: &SeatId| Happened::Failed {
        seat: seat.clone(),
        error: "connection refused".into(),
    };
    advance(&route, &mut progress, &state, failed(&intake));
    advance(&route, &mut progress, &state, failed(&intake));
    assert!(matches!(
        next(&route, &progress, &state),
        Next::Seats { .. }
    ));
    advance(&route, &mut progress, &state, failed(&intake));
    let Next::Ask { station, question } = next(&route, &progress, &state) else {
        panic!("no question")
    };
    assert_eq!(station, "intake");
    assert!(
        question.starts_with("lead.intake at intake failed 3 turns in a row (last: connection refused); fix its worker"),
        "{question}"
    );
    // Answered, the seat runs again, its failures counted anew.
    advance(
        &route,
        &mut progress,
        &state,
        Happened::Answered(Reply::read("retry")),
    );
    assert!(matches!(
        next(&route, &progress, &state),
        Next::Seats { .. }
    ));
    advance(&route, &mut progress, &state, failed(&intake));
    advance(&route, &mut progress, &state, failed(&intake));
    assert!(matches!(
        next(&route, &progress, &state),
        Next::Seats { .. }
    ));
    // A commit of the seat ends the run of failures; another seat's failure starts its own.
    let lane = Lane {
        seat: intake.clone(),
        index: 0,
        role: Role::Work,
        blind: false,
    };
    advance(
        &route,
        &mut progress,
        &state,
        Happened::Committed(vec![lane]),
    );
    assert_eq!(progress.failing, []);
    // Seats failing in turn (a batch whose server is down) each keep their own count.
    let (deep, breadth) = (
        SeatId::new("discovery.deep"),
        SeatId::new("discovery.breadth"),
    );
    for seat in [&deep, &breadth, &deep, &breadth] {
        advance(&route, &mut progress, &state, failed(seat));
    }
    assert_eq!(progress.failing, [(deep.clone(), 2), (breadth.clone(), 2)]);
    assert!(matches!(
        next(&route, &progress, &state),
        Next::Seats { .. }
    ));
    advance(&route, &mut progress, &state, failed(&deep));
    let Next::Ask { question, .. } = next(&route, &progress, &state) else {
        panic!("no question")
    };
    assert!(
        question.starts_with("discovery.deep at discovery failed 3 turns"),
        "{question}"
    );
}

#[test]
fn a_question_asked_where_the_line_stands_at_a_limit_is_asked_with_it() {
    let run = drive(&Script {
        endless_scrutiny: true,
        ..Script::default()
    });
    let state = run.state.unwrap();
    let route = Route::default_route().unwrap();
    let mut progress = state.line.clone().unwrap();
    assert_eq!(progress.stopped, Some(Stop::RoundLimit));
    advance(
        &route,
        &mut progress,
        &state,
        Happened::Asked("W2 recorded D5, which may contradict D3".into()),
    );
    let asked = progress.asked.clone().unwrap();
    assert!(
        asked.contains("did not converge")
            && asked.ends_with("; and: W2 recorded D5, which may contradict D3"),
        "{asked}"
    );
    // The answer still acts on the limit.
    advance(
        &route,
        &mut progress,
        &state,
        Happened::Answered(Reply::read("accept")),
    );
    assert!(matches!(
        next(&route, &progress, &state),
        Next::LockPlan { .. }
    ));
}
