//! The assembly line's supervisor, first part: a lane the cursor names
//! (`line::cursor::next`) runs as one engine turn. Its seat is filled by the router, its
//! briefing is the record with the lane's block (`compiler::compile_with_line`), its
//! answer is the station's (an intake, a plan, a check) or the usual claims (discovery,
//! a build step), folded in through the line's reconciler rules, and the unit's progress
//! moves on in the same commit, so a resumed unit asks for no lane twice.
//!
//! Lanes run one at a time here. The plan lock, the synthesis, the gates, the merge and
//! a question for a human are the cursor's other answers: `line_step` hands them back to
//! the caller unexecuted (see the README's "Assembly line").

use baton_core::line::answers::{
    self, CheckAnswer, IntakeAnswer, PlanAnswer, reconcile_check, reconcile_intake, reconcile_plan,
};
use baton_core::line::ask::{self, AnswerKind, LaneAt, SeatAsk};
use baton_core::line::cursor::{self, Happened, Lane, LineProgress, Next, Role};
use baton_core::line::{Route, StationKind};
use baton_core::prompt::{Prompt, SYSTEM_PROMPT};
use baton_core::reconciler::line::LineTurn;
use baton_core::reconciler::{ReconcileOutcome, TurnContext};
use baton_core::turn::CallKind;
use serde_json::Value;

use super::station::{Station, Unread};
use super::step::Planned;
use super::{Engine, Session, TurnSummary};
use crate::seating::{Seating, Unit};
use crate::{Error, Result};

/// A lane of the line, as the turn that runs it needs it.
#[derive(Debug, Clone)]
pub(super) struct LaneTurn {
    pub route: Route,
    /// The unit's progress before this lane.
    pub progress: LineProgress,
    pub station: String,
    /// The unit of work the lane writes or checks (see `work_of`).
    pub work: String,
    pub round: u32,
    pub step: Option<String>,
    pub lane: Lane,
    pub ask: SeatAsk,
}

/// A station's answer, read.
#[derive(Debug, Clone)]
pub(super) enum LineAnswer {
    Intake(IntakeAnswer),
    Plan(PlanAnswer),
    Check(CheckAnswer),
}

impl LineAnswer {
    /// The answer as the turn's record keeps it.
    pub fn to_json(&self) -> Value {
        // Plain data structs: serialising them cannot fail.
        match self {
            LineAnswer::Intake(a) => serde_json::to_value(a),
            LineAnswer::Plan(a) => serde_json::to_value(a),
            LineAnswer::Check(a) => serde_json::to_value(a),
        }
        .unwrap_or(Value::Null)
    }
}

/// The station a lane's call answers: the schema of its kind, read by the line's parser.
pub(super) struct LineStation {
    pub kind: AnswerKind,
}

impl Station for LineStation {
    type Answer = (LineAnswer, Vec<baton_core::claims::Refusal>, Vec<String>);

    fn schema(&self, _call: CallKind) -> &Value {
        // Claims lanes take the usual claims path; only the stations' kinds come here.
        self.kind.schema().unwrap_or(&Value::Null)
    }

    fn read(&self, raw: &str) -> std::result::Result<Self::Answer, Unread> {
        fn unread(e: baton_core::Error) -> Unread {
            Unread {
                problem: e.to_string(),
                repairable: e.is_model_output_error(),
            }
        }
        Ok(match self.kind {
            AnswerKind::Intake => {
                let p = answers::parse_intake(raw).map_err(unread)?;
                (LineAnswer::Intake(p.claim), p.refusals, p.warnings)
            }
            AnswerKind::Plan => {
                let p = answers::parse_plan(raw).map_err(unread)?;
                (LineAnswer::Plan(p.claim), p.refusals, p.warnings)
            }
            AnswerKind::Check | AnswerKind::Claims => {
                let p = answers::parse_check(raw).map_err(unread)?;
                (LineAnswer::Check(p.claim), p.refusals, p.warnings)
            }
        })
    }
}

/// The prompt of a station's answer: the briefing, then the answer it must give.
pub(super) fn line_prompt(
    package: &baton_core::compiler::HandoffPackage,
    kind: AnswerKind,
) -> Prompt {
    let schema = kind.schema().map(|s| s.to_string()).unwrap_or_default();
    let mut user = String::with_capacity(package.text.len() + schema.len() + 256);
    user.push_str(&package.text);
    user.push_str("\n\n---\n## Your answer\n");
    user.push_str(
        "Do what your seat is asked above, then answer with one JSON object matching this \
         JSON Schema, and nothing else; leave out optional fields you have nothing for.\n",
    );
    user.push_str(&schema);
    user.push('\n');
    Prompt {
        system: SYSTEM_PROMPT.to_string(),
        user,
    }
}

/// Folds a station's answer into `next` for `lane`, and says what happened to the line.
pub(super) fn fold(
    next: &mut baton_core::state::ExecutionState,
    ctx: &TurnContext<'_>,
    lane: &LaneTurn,
    answer: &LineAnswer,
    out: &mut ReconcileOutcome,
) -> Happened {
    let turn = LineTurn {
        ctx,
        station: &lane.station,
        seat: &lane.lane.seat,
        round: lane.round,
        step: lane.step.as_deref(),
    };
    match answer {
        LineAnswer::Intake(a) => match reconcile_intake(next, &turn, a, out) {
            Some(question) => Happened::Asked(question),
            None => Happened::Committed(vec![lane.lane.clone()]),
        },
        LineAnswer::Plan(a) => {
            reconcile_plan(next, &turn, a, out);
            Happened::Committed(vec![lane.lane.clone()])
        }
        LineAnswer::Check(a) => {
            reconcile_check(next, &turn, a, out);
            Happened::Committed(vec![lane.lane.clone()])
        }
    }
}

/// The unit of work a lane at `station` writes or checks: the plan (merged by the plan
/// station's lead, scrutinised and revised at the plan loop), a build step (built, then
/// checked at its checkpoint), else the station's own work. A checking seat is never filled by a family
/// that wrote the unit of work it checks.
fn work_of(kind: StationKind, role: Role, station: &str, step: Option<&str>) -> String {
    match (kind, role, step) {
        // The co-drafts are the lead's material; what the scrutiny checks is the plan
        // the lead merged (and revises).
        (StationKind::Plan, Role::Work, _) => "plan drafts".into(),
        (StationKind::Plan | StationKind::PlanLoop, _, _) => "plan".into(),
        (StationKind::Build, _, Some(step)) => step.into(),
        _ => station.into(),
    }
}

/// What one step of the line did.
#[derive(Debug)]
pub enum LineStep {
    /// One lane ran as a turn (committed, or failed and to be run again).
    Lane(Box<TurnSummary>),
    /// What the cursor says next is not a seat lane: this build does not execute it yet.
    Waiting(Next),
}

impl Engine {
    /// Runs the next lane of the unit `session` holds along `route`, as one turn.
    pub fn line_step(&self, session: &mut Session, route: &Route) -> Result<LineStep> {
        let progress = session
            .state
            .line
            .clone()
            .unwrap_or_else(LineProgress::start);
        let (station, kind, round, step, lanes) =
            match cursor::next(route, &progress, &session.state) {
                Next::Seats {
                    station,
                    kind,
                    round,
                    step,
                    lanes,
                } => (station, kind, round, step, lanes),
                other => return Ok(LineStep::Waiting(other)),
            };
        let lane = lanes[0].clone();
        let work = work_of(kind, lane.role, &station, step.as_deref());
        let spec = route
            .stations
            .iter()
            .find(|s| s.id == station)
            .and_then(|s| s.seats.iter().find(|seat| seat.seat == lane.seat));
        let lanes_of_seat = spec.map_or(1, |seat| seat.count);
        let mut phase = match &step {
            Some(s) => format!("{station} round {round} step {s}"),
            None => format!("{station} round {round}"),
        };
        // Each lane of a seat of several is a seating of its own (a pin holds within its
        // phase), never held by a worker holding another lane of it this round, nor by
        // its family when the lanes must be of different families.
        let mut apart = Vec::new();
        if lanes_of_seat > 1 {
            let others: Vec<&baton_core::router::Pin> = session
                .seats
                .pins
                .iter()
                .filter(|p| p.seat == lane.seat && p.phase.starts_with(&format!("{phase} lane ")))
                .collect();
            let distinct = spec.is_some_and(|s| s.distinct_families);
            for w in &session.config.roster.workers {
                let holder = others
                    .iter()
                    .find(|p| p.worker == w.id || (distinct && p.family == w.family));
                if let Some(p) = holder {
                    let why = if p.worker == w.id {
                        format!("holds another lane of {} this round", lane.seat)
                    } else {
                        format!(
                            "family {} holds another lane of {} this round ({})",
                            p.family, lane.seat, p.worker
                        )
                    };
                    apart.push((w.id.clone(), why));
                }
            }
            phase = format!("{phase} lane {}", lane.index + 1);
        }
        let unit = Unit {
            seat: lane.seat.clone(),
            phase,
            tags: Vec::new(),
            work: Some(work.clone()),
            apart,
        };
        let seating = self.seat_unit(session, &session.state, &unit)?;
        let pin_worker = match &seating {
            Seating::Nobody { question, .. } => {
                return Ok(LineStep::Waiting(Next::Ask {
                    station,
                    question: question.clone(),
                }));
            }
            Seating::Held { pin } | Seating::Seated { pin } => pin.worker.clone(),
        };
        let worker = session
            .config
            .roster
            .workers
            .iter()
            .position(|w| w.id == pin_worker)
            .ok_or_else(|| Error::NoSuchWorker {
                id: pin_worker.to_string(),
                known: session.config.roster.ids(),
            })?;
        let budget = session.config.settings.budget;
        let at = LaneAt {
            kind,
            station: &station,
            round,
            step: step.as_deref(),
            lanes_of_seat,
        };
        // The block gets up to half the budget; the record's sections fill the rest.
        let asked = ask::ask(
            &session.state,
            &at,
            &lane,
            &pin_worker,
            budget / 2,
            &*session.estimator,
        );
        let plan = Planned {
            worker,
            assignment: asked.assignment.clone(),
            budget,
            gates: false,
            seating: Some(seating),
            line: Some(Box::new(LaneTurn {
                route: route.clone(),
                progress,
                station,
                work,
                round,
                step,
                lane,
                ask: asked,
            })),
        };
        let end = self.run_turn(session, &plan).inspect_err(|e| {
            self.abandon_turn(session, session.state.turns, e.to_string());
        })?;
        Ok(LineStep::Lane(Box::new(end.summary)))
    }
}
