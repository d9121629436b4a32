//! The assembly line's supervisor, first part: a lane the cursor names
//! (`line::cursor::next`) runs as one engine turn. Its seat is filled by the router, its
//! briefing is the record with the lane's block (`compiler::compile_with_line`), its
//! answer is the station's (an intake, a plan, a check) or the usual claims (discovery,
//! a build step), folded in through the line's reconciler rules, and the unit's progress
//! moves on in the same commit, so a resumed unit asks for no lane twice.
//!
//! The line's own actions that call no model are the engine's turns (worker `baton`, no
//! call), committed the same way: the plan lock (the locked plan becomes the run's
//! steps), the synthesis and its verdict, and, for a unit with no workspace, the gate and
//! the merge it says it skipped. The lanes of a batch make their calls at once and
//! commit in lane order (`run_lanes`); a question for a human, the end, and a
//! workspace's merge are handed back to the caller (see the README's "Assembly line").

use baton_core::line::answers::{
    self, CheckAnswer, IntakeAnswer, PlanAnswer, reconcile_check, reconcile_intake, reconcile_plan,
};
use baton_core::line::ask::{self, AnswerKind, LaneAt, SeatAsk};
use baton_core::line::cursor::{self, Happened, Lane, LineProgress, Next, Reply, Role, Stop};
use baton_core::line::synthesis::{Report, synthesize};
use baton_core::line::{Route, StationKind};
use baton_core::prompt::{Prompt, SYSTEM_PROMPT};
use baton_core::reconciler::line::{LineTurn, record_verdict};
use baton_core::reconciler::{ReconcileOutcome, TurnContext};
use baton_core::turn::CallKind;
use serde_json::Value;

use super::station::{Station, Unread};
use super::step::Planned;
use super::turn::Called;
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

impl LaneTurn {
    /// The lane as its turn's record keeps it.
    pub fn record(&self) -> baton_core::turn::LaneRecord {
        baton_core::turn::LaneRecord {
            station: self.station.clone(),
            seat: self.lane.seat.clone(),
            index: self.lane.index,
            round: self.round,
            step: self.step.clone(),
            work: self.work.clone(),
        }
    }
}

/// What a committed lane wrote, for the cross-family rule: its unit of work; a build
/// step's writer also wrote the build that the review checks.
pub(super) fn authored(
    lane: &baton_core::turn::LaneRecord,
    worker: &baton_core::ids::WorkerId,
    family: &str,
) -> Vec<baton_core::router::Authored> {
    let entry = |step: &str| baton_core::router::Authored {
        step: step.to_string(),
        seat: lane.seat.clone(),
        worker: worker.clone(),
        family: family.to_string(),
    };
    let mut out = vec![entry(&lane.work)];
    if lane.step.is_some() && !lane.seat.reviews_work() && lane.work != BUILD_WORK {
        out.push(entry(BUILD_WORK));
    }
    out
}

/// The unit of work a review checks: everything the build stations built.
const BUILD_WORK: &str = "build";

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
        (StationKind::Build | StationKind::Review, _, _) => BUILD_WORK.into(),
        _ => station.into(),
    }
}

/// Adds the change so far to a checking seat's block, as many whole lines of the diff as
/// its budget leaves room for, saying how many more there are.
fn show_change(
    block: &mut baton_core::line::brief::LineBrief,
    change: &crate::hook::Change,
    budget: usize,
    estimator: &dyn baton_core::tokens::TokenEstimator,
) {
    let short = |s: &str| s[..s.len().min(12)].to_string();
    let heading = format!(
        "## The change under review (`git diff {} {}`)\n",
        short(&change.base),
        short(&change.head)
    );
    if change.patch.trim().is_empty() {
        block.text.push_str(&format!("\n{heading}No change yet.\n"));
        block.tokens = estimator.count(&block.text);
        return;
    }
    // Room for the diff's lines after the block, the heading and the fences and note.
    let room = budget.saturating_sub(block.tokens + estimator.count(&heading) + 40);
    let lines: Vec<&str> = change.patch.lines().collect();
    let (mut used, mut shown) = (0, 0);
    for line in &lines {
        let cost = estimator.count(line) + 1;
        if used + cost > room {
            break;
        }
        used += cost;
        shown += 1;
    }
    let mut text = format!("\n{heading}```diff\n");
    for line in &lines[..shown] {
        text.push_str(line);
        text.push('\n');
    }
    text.push_str("```\n");
    let left = lines.len() - shown;
    if left > 0 {
        text.push_str(&format!(
            "{left} more line(s) of the diff are not shown here (the budget); the whole change is on the unit's branch at {}.\n",
            short(&change.head)
        ));
        block.omitted.push(baton_core::line::brief::Omitted {
            item: format!("{left} diff line(s)"),
            reason: baton_core::line::brief::OmitReason::Budget,
        });
    }
    block.text.push_str(&text);
    block.tokens = estimator.count(&block.text);
    block.shown.push(format!(
        "git diff {}..{}",
        short(&change.base),
        short(&change.head)
    ));
}

/// What one step of the line did.
#[derive(Debug)]
pub enum LineStep {
    /// The lanes of a batch ran, a turn each, in lane order (each committed, or
    /// failed and to be run again); an engine action is a batch of one.
    Lanes(Vec<TurnSummary>),
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
        let (station, kind, round, step, lanes) = match cursor::next(
            route,
            &progress,
            &session.state,
        ) {
            Next::Seats {
                station,
                kind,
                round,
                step,
                lanes,
            } => (station, kind, round, step, lanes),
            Next::LockPlan { station } => {
                let task = format!("Lock the plan at {station}");
                let summary =
                    self.engine_turn(session, route, progress, task, LINE_ENGINE, lock)?;
                return Ok(LineStep::Lanes(vec![summary]));
            }
            Next::Synthesize { station } => {
                let reports = self.review_reports(session, route)?;
                let task = format!("Synthesize the review at {station}");
                let reviews: Vec<String> = route
                    .stations
                    .iter()
                    .filter(|s| s.kind == StationKind::Review)
                    .map(|s| s.id.clone())
                    .collect();
                let summary = self.engine_turn(
                    session,
                    route,
                    progress,
                    task,
                    LINE_ENGINE,
                    |next, ctx, out| {
                        let findings: Vec<&baton_core::line::Finding> = next
                            .findings
                            .iter()
                            .filter(|f| reviews.contains(&f.station))
                            .collect();
                        let synthesis = synthesize(&findings, &reports);
                        let verdict = synthesis.verdict;
                        record_verdict(next, ctx, &station, &synthesis, out);
                        Happened::Verdict(verdict)
                    },
                )?;
                return Ok(LineStep::Lanes(vec![summary]));
            }
            // A unit in a repository runs its gates on the last turn's commit.
            Next::Gate { station } if session.workspace.is_some() => {
                let summary = self.gate_unit(session, route, progress, &station)?;
                return Ok(LineStep::Lanes(vec![summary]));
            }
            // A unit with no workspace (API workers writing documents) has no gate
            // to run and nothing to merge: said so, on record, and the line goes on.
            Next::Gate { station } if session.workspace.is_none() => {
                let task = format!("Gates at {station}");
                let summary = self.engine_turn(session, route, progress, task, LINE_ENGINE, |_, _, out| {
                        out.warnings.push(format!(
                            "{station}: the unit has no workspace, so no gate ran; nothing was checked mechanically"
                        ));
                        Happened::Gate { passed: true }
                    })?;
                return Ok(LineStep::Lanes(vec![summary]));
            }
            // A unit in a repository: its outbox is the caller's to write
            // (`jobs::unit::merge`), which then records the merge's turn.
            Next::Merge { station } if session.workspace.is_some() => {
                return Ok(LineStep::Waiting(Next::Merge { station }));
            }
            Next::Merge { station } if session.workspace.is_none() => {
                let task = format!("Merge at {station}");
                let summary = self.engine_turn(session, route, progress, task, LINE_ENGINE, |_, _, out| {
                        out.warnings.push(format!(
                            "{station}: the unit has no workspace, so there is no branch to merge; its record is the result"
                        ));
                        Happened::Merged
                    })?;
                return Ok(LineStep::Lanes(vec![summary]));
            }
            // The unit is done: the run is finished, once.
            Next::Done => {
                if session.status != baton_store::RunStatus::Finished {
                    self.finish_unit(session)?;
                }
                return Ok(LineStep::Waiting(Next::Done));
            }
            other => return Ok(LineStep::Waiting(other)),
        };
        // The batch's lanes are seated one after another (a later lane of a seat of
        // several keeps out whoever holds an earlier one), each pin kept beside the
        // committed ones until the lanes' turns write them.
        let committed_pins = session.seats.pins.len();
        let mut plans: Vec<Planned> = Vec::with_capacity(lanes.len());
        let mut asked = None;
        for lane in lanes {
            let planned = self.plan_lane(
                session,
                route,
                &progress,
                &station,
                kind,
                round,
                step.as_deref(),
                lane,
                session.state.turns + plans.len() as u32,
            );
            let plan = match planned {
                Ok(Ok(plan)) => plan,
                // Nobody may take this lane: asked when it is the first, else the lanes
                // before it run and it is asked for again on its own.
                Ok(Err(question)) => {
                    asked = Some(question);
                    break;
                }
                Err(e) => {
                    session.seats.pins.truncate(committed_pins);
                    return Err(e);
                }
            };
            // A coding agent works in the unit's one worktree: its lane runs alone.
            let agent = session.gateways[plan.worker]
                .as_ref()
                .is_some_and(|g| g.needs_workspace());
            if agent && !plans.is_empty() {
                break;
            }
            if let Some(Seating::Seated { pin }) = &plan.seating {
                session.seats.pins.push(pin.clone());
            }
            plans.push(plan);
            if agent {
                break;
            }
        }
        session.seats.pins.truncate(committed_pins);
        match plans.len() {
            0 => Ok(LineStep::Waiting(Next::Ask {
                station,
                question: asked.unwrap_or_default(),
            })),
            1 => {
                let end = self.run_turn(session, &plans[0]).inspect_err(|e| {
                    self.abandon_turn(session, session.state.turns, e.to_string());
                })?;
                Ok(LineStep::Lanes(vec![end.summary]))
            }
            _ => self.run_lanes(session, plans).map(LineStep::Lanes),
        }
    }

    /// Seats one lane of the batch and asks it what its station asks; `Ok(Err(q))` when
    /// nobody may take it (`q` the router's question).
    #[allow(clippy::too_many_arguments)]
    fn plan_lane(
        &self,
        session: &Session,
        route: &Route,
        progress: &LineProgress,
        station: &str,
        kind: StationKind,
        round: u32,
        step: Option<&str>,
        lane: Lane,
        turn: u32,
    ) -> Result<std::result::Result<Planned, String>> {
        let work = work_of(kind, lane.role, station, step);
        let spec = route
            .stations
            .iter()
            .find(|s| s.id == station)
            .and_then(|s| s.seats.iter().find(|seat| seat.seat == lane.seat));
        let lanes_of_seat = spec.map_or(1, |seat| seat.count);
        // A pin holds for its phase: a station's round (a builder keeps the build's
        // steps, a checker its checkpoints).
        let mut phase = format!("{station} round {round}");
        // Each lane of a seat of several is a seating of its own (a pin holds within its
        // phase), never held by a worker holding another lane of it this round, nor by
        // its family when the lanes must be of different families.
        let mut apart = Vec::new();
        if lanes_of_seat > 1 {
            // The other lanes' pins, not this lane's own (a lane run again after a
            // failure keeps its worker while it may).
            let own = format!("{phase} lane {}", lane.index + 1);
            let others: Vec<&baton_core::router::Pin> = session
                .seats
                .pins
                .iter()
                .filter(|p| {
                    p.seat == lane.seat
                        && p.phase.starts_with(&format!("{phase} lane "))
                        && p.phase != own
                })
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
                    apart.push((w.id.clone(), "holds_another_lane", why));
                }
            }
            phase = format!("{phase} lane {}", lane.index + 1);
        }
        // A build lane carries its step's tags (a fix round's, every step's) for the
        // seats' policies: a `credentials` step is never built or checked by a family
        // its seat denies it.
        let tags: Vec<baton_core::step_tag::StepTag> = if kind == StationKind::Build {
            let mut tags = Vec::new();
            for s in session
                .state
                .plan
                .iter()
                .filter(|s| step.is_none_or(|id| s.id == id))
            {
                for t in &s.tags {
                    if !tags.contains(t) {
                        tags.push(t.clone());
                    }
                }
            }
            tags
        } else {
            Vec::new()
        };
        let unit = Unit {
            seat: lane.seat.clone(),
            phase,
            tags,
            work: Some(work.clone()),
            apart,
        };
        // A build's later writer (a step's rework, a fix round: new seatings, which the
        // coldest pool could give to anyone) keeps to the families that built it so far
        // when one of them may take the seat: each family that writes the build is one
        // fewer that may review it.
        let built_by: std::collections::BTreeSet<&str> = session
            .seats
            .history
            .iter()
            .filter(|a| a.step == BUILD_WORK && !a.seat.reviews_work())
            .map(|a| a.family.as_str())
            .collect();
        let budget = session.config.settings.budget;
        let mut seating = None;
        if lane.role == Role::Build && !built_by.is_empty() {
            let families = built_by.iter().copied().collect::<Vec<_>>().join(", ");
            let mut keep = unit.clone();
            for w in &session.config.roster.workers {
                let kept_out = keep.apart.iter().any(|(id, _, _)| *id == w.id);
                if !built_by.contains(w.family.as_str()) && !kept_out {
                    keep.apart.push((
                        w.id.clone(),
                        "keeps_the_build_to_its_families",
                        format!(
                            "the build is written by {families} so far; another family writing it would leave fewer to review it"
                        ),
                    ));
                }
            }
            match self.seat_reserved(session, &session.state, &keep, turn, budget)? {
                (Seating::Nobody { .. }, _) => {}
                kept => seating = Some(kept),
            }
        }
        // Each lane holds its pool's headroom as it is seated, so the batch's next
        // lane (and any other process) reads it as held.
        let (seating, reservation) = match seating {
            Some(s) => s,
            None => self.seat_reserved(session, &session.state, &unit, turn, budget)?,
        };
        let pin_worker = match &seating {
            Seating::Nobody { question, .. } => return Ok(Err(question.clone())),
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
        let at = LaneAt {
            kind,
            station,
            round,
            step,
            lanes_of_seat,
        };
        // The block gets up to half the budget; the record's sections fill the rest.
        let mut asked = ask::ask(
            &session.state,
            &at,
            &lane,
            &pin_worker,
            budget / 2,
            &*session.estimator,
        );
        // A seat that checks the build (a checkpoint, a review) is shown the change
        // itself in a unit with a repository: the diff from the base to the last turn.
        let checks_the_build =
            kind == StationKind::Review || matches!(lane.role, Role::Find { .. } | Role::Confirm);
        if checks_the_build
            && let Some(change) = session.workspace.as_ref().and_then(|w| w.change())
        {
            show_change(&mut asked.block, &change?, budget / 2, &*session.estimator);
        }
        Ok(Ok(Planned {
            worker,
            assignment: asked.assignment.clone(),
            budget,
            gates: false,
            seating: Some(seating),
            reservation,
            line: Some(Box::new(LaneTurn {
                route: route.clone(),
                progress: progress.clone(),
                station: station.to_string(),
                work,
                round,
                step: step.map(str::to_string),
                lane,
                ask: asked,
            })),
        }))
    }

    /// Runs the lanes of a batch at once: each briefing compiled from the same committed
    /// state (so no lane sees another's output), the calls made on threads of their own,
    /// then each lane reconciled and committed in lane order, as turns `t`, `t+1`, … —
    /// the order a replay of the unit gives, whatever call returned first.
    fn run_lanes(
        &self,
        session: &mut Session,
        mut plans: Vec<Planned>,
    ) -> Result<Vec<TurnSummary>> {
        let first = session.state.turns;
        let mut briefed = Vec::with_capacity(plans.len());
        for (k, plan) in plans.iter().enumerate() {
            match self.brief_turn(session, plan, first + k as u32) {
                Ok(b) => briefed.push(b),
                Err(e) => {
                    for turn in first..=first + k as u32 {
                        self.abandon_turn(session, turn, e.to_string());
                    }
                    return Err(e);
                }
            }
        }
        let called: Vec<Called> = {
            let session = &*session;
            std::thread::scope(|scope| {
                let lanes: Vec<_> = plans
                    .iter()
                    .zip(&briefed)
                    .map(|(plan, b)| scope.spawn(move || self.call_turn(session, plan, b)))
                    .collect();
                lanes
                    .into_iter()
                    .map(|lane| {
                        lane.join()
                            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
                    })
                    .collect()
            })
        };
        let mut ends = Vec::with_capacity(plans.len());
        let mut lanes = plans.iter_mut().zip(briefed).zip(called);
        while let Some(((plan, briefed), called)) = lanes.next() {
            let turn = session.state.turns;
            // Each lane is folded into the progress the lanes before it left.
            if let Some(line) = plan.line.as_mut() {
                line.progress = session
                    .state
                    .line
                    .clone()
                    .unwrap_or_else(LineProgress::start);
            }
            match self.finish_turn(session, plan, briefed, called) {
                Ok(end) => ends.push(end.summary),
                Err(e) => {
                    self.abandon_turn(session, turn, e.to_string());
                    // The lanes after it are not committed either; what their calls
                    // spent is counted all the same.
                    for ((_, briefed), called) in lanes {
                        self.drop_turn(session, &briefed, &called, e.to_string());
                    }
                    return Err(e);
                }
            }
        }
        Ok(ends)
    }
}

impl Engine {
    /// Who reported at the review stations since the last synthesis: each review lane's
    /// turn, done when it committed (a reviewer that found nothing reported too).
    fn review_reports(&self, session: &Session, route: &Route) -> Result<Vec<Report>> {
        let reviews: Vec<&str> = route
            .stations
            .iter()
            .filter(|s| s.kind == StationKind::Review)
            .map(|s| s.id.as_str())
            .collect();
        let turns = self.store.turns(&session.run)?;
        let since = turns
            .iter()
            .rposition(|t| {
                t.worker.as_str() == LINE_ENGINE && t.assignment.task.starts_with("Synthesize")
            })
            .map_or(0, |i| i + 1);
        Ok(turns[since..]
            .iter()
            .filter_map(|t| {
                let lane = t.lane.as_ref()?;
                reviews.contains(&lane.station.as_str()).then(|| Report {
                    seat: lane.seat.clone(),
                    worker: t.worker.clone(),
                    done: t.status == baton_core::turn::TurnStatus::Committed,
                })
            })
            .collect())
    }
}

/// Who the line's own commits (the plan lock) are recorded as: no worker, no model.
pub const LINE_ENGINE: &str = "baton";

impl Engine {
    /// One of the line's own actions that calls no model, committed as a turn of its
    /// own (worker `baton`, no calls) with the unit's progress moved on: what `act`
    /// did to the state, and what it means for the line.
    fn engine_turn(
        &self,
        session: &mut Session,
        route: &Route,
        progress: LineProgress,
        task: String,
        who: &str,
        act: impl FnOnce(
            &mut baton_core::state::ExecutionState,
            &TurnContext<'_>,
            &mut ReconcileOutcome,
        ) -> Happened,
    ) -> Result<TurnSummary> {
        self.engine_turn_in(session, route, progress, task, who, |next, ctx, out| {
            (act(next, ctx, out), None)
        })
    }

    /// `engine_turn` whose action also says what the turn's record keeps of the
    /// unit's worktree (the commit its gates ran on, the branch's head at the merge).
    fn engine_turn_in(
        &self,
        session: &mut Session,
        route: &Route,
        progress: LineProgress,
        task: String,
        who: &str,
        act: impl FnOnce(
            &mut baton_core::state::ExecutionState,
            &TurnContext<'_>,
            &mut ReconcileOutcome,
        ) -> (Happened, Option<baton_core::turn::WorkspaceTurn>),
    ) -> Result<TurnSummary> {
        use baton_core::compiler::{Assignment, AssignmentKind, HandoffPackage, WorkerProfile};
        use baton_core::ids::WorkerId;
        use baton_core::turn::{TransferAudit, TurnRecord, TurnStatus};
        use baton_protocol::{EventKind, EventMsg as Event};
        use baton_store::{RunStatus, TurnCommit};

        let turn = session.state.turns;
        let now = self.clock.now();
        let engine = WorkerProfile {
            id: WorkerId::new(who),
            model: LINE_ENGINE.into(),
            family: who.into(),
            role: None,
        };
        let assignment = Assignment {
            kind: AssignmentKind::Continuation,
            step_id: None,
            task,
        };
        let ctx = TurnContext {
            worker: &engine,
            turn,
            at: now,
            assignment: &assignment,
            seen: Default::default(),
        };
        let scoring = std::mem::take(&mut session.state.scoring);
        let mut next = session.state.clone();
        next.scoring = scoring;
        let mut outcome = ReconcileOutcome::default();
        let (happened, workspace) = act(&mut next, &ctx, &mut outcome);
        let mut moved = progress;
        cursor::advance(route, &mut moved, &next, happened);
        next.line = Some(moved);
        next.turns += 1;
        let changes = next.diff(&session.state);
        let event = |kind| Event {
            run_id: session.run.clone(),
            turn: Some(turn),
            at: now,
            kind,
        };
        let mut events = vec![event(EventKind::TurnStarted {
            worker: engine.id.clone(),
            model: engine.model.clone(),
            assignment: "continuation".into(),
            task: Some(assignment.task.clone()),
        })];
        // What the turn emitted as it ran (its gates' starts and finishes).
        events.extend(self.take_turn_events(session));
        for w in &outcome.warnings {
            events.push(event(EventKind::Warning {
                worker: engine.id.clone(),
                text: w.clone(),
            }));
        }
        events.push(event(EventKind::TurnCommitted {
            worker: engine.id.clone(),
            status: TurnStatus::Committed.as_str().into(),
            changes: changes.len(),
            error: None,
            step_left_open: false,
            steps: Some((next.steps_done(), next.plan.len())),
        }));
        let summary = TurnSummary {
            turn,
            worker: engine.id.clone(),
            model: engine.model.clone(),
            assignment: assignment.clone(),
            status: TurnStatus::Committed,
            package_tokens: 0,
            budget: 0,
            sections_omitted: Vec::new(),
            items_dropped: 0,
            tokens_sent: 0,
            tokens_received: 0,
            warnings: outcome.warnings.clone(),
            refusals: outcome.refusals.clone(),
            error: None,
            step_left_open: false,
            changes: changes.len(),
            conversations_passed: 0,
            engine_time: std::time::Duration::ZERO,
        };
        let commit = TurnCommit {
            record: TurnRecord {
                run_id: session.run.clone(),
                turn,
                worker: engine.id.clone(),
                model: engine.model.clone(),
                family: engine.family.clone(),
                assignment,
                status: TurnStatus::Committed,
                package: HandoffPackage::empty(engine.id.clone()),
                calls: Vec::new(),
                result: None,
                report: None,
                outcome,
                audit: TransferAudit::default(),
                error: None,
                workspace,
                started_at: now,
                finished_at: now,
                lane: None,
            },
            header: next.header(),
            changes,
            events,
            status: RunStatus::Active,
            lease: session.lease.clone(),
            run_lease: session.run_lease.as_ref().map(|l| l.token.clone()),
            holds: Vec::new(),
            pool: None,
            pins: Vec::new(),
            reservation: None,
        };
        let seqs = self.commit(&commit)?;
        self.published(&seqs, &commit.events);
        session.state = next;
        Ok(summary)
    }
}

impl Engine {
    /// The gate station of a unit in a repository: every gate on the last committed
    /// turn's commit, folded in as a turn's gates are (a failing gate opens its issue,
    /// which the fix round's builder is briefed with); a failing one sends the unit
    /// back to the build. A unit with no gates says that nothing was checked.
    fn gate_unit(
        &self,
        session: &mut Session,
        route: &Route,
        progress: LineProgress,
        station: &str,
    ) -> Result<TurnSummary> {
        let task = format!("Gates at {station}");
        let workspace = session.workspace.clone();
        let Some(gates) = workspace.as_deref().and_then(|w| w.gates()) else {
            return self.engine_turn(session, route, progress, task, LINE_ENGINE, |_, _, out| {
                out.warnings.push(format!(
                    "{station}: no gates were given (`baton line --gate NAME=COMMAND`), so nothing was checked mechanically"
                ));
                Happened::Gate { passed: true }
            });
        };
        let commit = workspace
            .as_deref()
            .and_then(|w| w.last_commit())
            .ok_or_else(|| {
                Error::Config(format!(
                    "unit {}: its worktree has no commit to gate",
                    session.run
                ))
            })?;
        let turn = session.state.turns;
        let gated = gates.run(&super::station::GateInput {
            turn,
            commit: &commit,
            emit: &|kind| self.emit(session, turn, self.clock.now(), kind),
        })?;
        if session.cancel.is_cancelled() {
            self.take_turn_events(session);
            return Err(Error::Cancelled { turn });
        }
        let passed = gated.results.iter().all(|r| r.passed);
        let mut record = baton_core::turn::WorkspaceTurn {
            commit,
            changed: false,
            files: Vec::new(),
            gates: Vec::new(),
        };
        self.engine_turn_in(
            session,
            route,
            progress,
            task,
            LINE_ENGINE,
            |next, ctx, out| {
                gated.fold(next, ctx, out, &mut record);
                (Happened::Gate { passed }, Some(record))
            },
        )
    }

    /// The merge station's turn of a unit in a repository, once its outbox is written
    /// (`jobs::unit::merge`): `task` says where it is, `head` is the branch's commit.
    pub fn record_merge(
        &self,
        session: &mut Session,
        task: String,
        head: &str,
    ) -> Result<TurnSummary> {
        let Some(route) = session.config.line.clone() else {
            return Err(Error::NotAUnit(format!(
                "run {} is not a unit of the assembly line",
                session.run
            )));
        };
        let progress = session
            .state
            .line
            .clone()
            .unwrap_or_else(LineProgress::start);
        let record = baton_core::turn::WorkspaceTurn {
            commit: head.to_string(),
            changed: false,
            files: Vec::new(),
            gates: Vec::new(),
        };
        self.engine_turn_in(session, &route, progress, task, LINE_ENGINE, |_, _, _| {
            (Happened::Merged, Some(record))
        })
    }
}

/// Locks the latest plan version and makes its steps the run's plan (both by the
/// reconciler's line rules), which the build's lanes then work on; a plan that cannot
/// be locked stops the line with the reason.
fn lock(
    next: &mut baton_core::state::ExecutionState,
    ctx: &TurnContext<'_>,
    out: &mut ReconcileOutcome,
) -> Happened {
    use baton_core::reconciler::line::{adopt_locked_plan, lock_plan};

    let Some(id) = next.plan_versions.last().map(|p| p.id.clone()) else {
        return Happened::Asked("the plan loop ended with no plan version to lock".into());
    };
    if !lock_plan(next, ctx, &id, out) {
        let why: Vec<String> = out.refusals.iter().map(|r| r.reason.clone()).collect();
        return Happened::Asked(format!("plan {id} could not be locked: {}", why.join("; ")));
    }
    adopt_locked_plan(next, out);
    Happened::Locked
}

impl Engine {
    /// `line_step` on the route the unit keeps with its configuration.
    pub fn unit_step(&self, session: &mut Session) -> Result<LineStep> {
        let Some(route) = session.config.line.clone() else {
            return Err(Error::NotAUnit(format!(
                "run {} is not a unit of the assembly line (it keeps no route); `baton line \"…\"` starts one",
                session.run
            )));
        };
        self.line_step(session, &route)
    }

    /// Stops the unit with `question` for a human: the run is blocked, and the question
    /// is on record (`baton line --status` shows it).
    pub fn block_unit(&self, session: &mut Session, question: String) -> Result<()> {
        self.block(session, question)
    }
}

impl Engine {
    /// Marks the unit's run finished, with its `run_finished` event.
    fn finish_unit(&self, session: &mut Session) -> Result<()> {
        let event = baton_protocol::EventMsg {
            run_id: session.run.clone(),
            turn: None,
            at: self.clock.now(),
            kind: baton_protocol::EventKind::RunFinished {
                turns: session.state.turns,
            },
        };
        let seqs = self.store.update_run(
            &session.run,
            baton_store::RunStatus::Finished,
            std::slice::from_ref(&event),
        )?;
        self.published(&seqs, std::slice::from_ref(&event));
        session.status = baton_store::RunStatus::Finished;
        Ok(())
    }
}

/// Who a human's answer is recorded as.
pub const HUMAN: &str = "human";

impl Engine {
    /// Records a human's `answer` to the question the unit stopped on, as a decision
    /// with provenance `human` (in a turn of its own, with the unit's progress: the
    /// question is answered), and re-opens the unit so `--resume` continues it. A unit
    /// that is not waiting for an answer is refused, with what it is waiting for.
    pub fn answer_unit(&self, session: &mut Session, answer: &str) -> Result<TurnSummary> {
        let Some(route) = session.config.line.clone() else {
            return Err(Error::NotAUnit(format!(
                "run {} is not a unit of the assembly line; nothing asked it a question (`baton resume {}` continues a run)",
                session.run, session.run
            )));
        };
        let progress = session
            .state
            .line
            .clone()
            .unwrap_or_else(LineProgress::start);
        let Some(question) = progress.asked.clone() else {
            return Err(Error::NotAsked(format!(
                "unit {} is not waiting for an answer{}",
                session.run,
                match &session.blocked {
                    Some(why) => format!(
                        " (it stopped on: {why}); fix what it names, then `baton line --resume {}`",
                        session.run
                    ),
                    None => String::new(),
                }
            )));
        };
        if answer.trim().is_empty() {
            return Err(Error::Config(
                "the answer is empty; say what the human decided".into(),
            ));
        }
        let task = format!("A human answers the question the line stopped on: {question}");
        let reply = Reply::read(answer);
        // Accepting a step whose checkpoint keeps finding something dismisses what it
        // found, in the human's words.
        let dismissed: Vec<String> = match (progress.stopped, reply) {
            (Some(Stop::StepRounds), Reply::Accept) => {
                let station = route.stations.get(progress.station).map(|s| s.id.as_str());
                let step = progress.step.map(|i| format!("T{}", i + 1));
                session
                    .state
                    .findings
                    .iter()
                    .filter(|f| {
                        f.is_open() && Some(f.station.as_str()) == station && f.step == step
                    })
                    .map(|f| f.id.clone())
                    .collect()
            }
            _ => Vec::new(),
        };
        let summary =
            self.engine_turn(session, &route, progress, task, HUMAN, |next, ctx, out| {
                baton_core::reconciler::line::record_answer(next, ctx, &question, answer, out);
                for id in &dismissed {
                    baton_core::reconciler::line::dismiss_by_human(
                        next, ctx.turn, ctx.at, id, answer, out,
                    );
                }
                Happened::Answered(reply)
            })?;
        self.unblock(session)?;
        Ok(summary)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::line::brief::LineBrief;
    use baton_core::tokens::{HeuristicEstimator, TokenEstimator};

    fn block() -> LineBrief {
        LineBrief {
            text: "## The locked plan\n- T1 Write a failing test\n".into(),
            tokens: 12,
            shown: vec!["P3".into()],
            omitted: Vec::new(),
            over_budget: false,
        }
    }

    /// A diff too long for the block is cut at whole lines within the budget, and the
    /// block says how many lines were left out and where the whole change is.
    #[test]
    fn a_checking_seat_is_shown_as_much_of_the_diff_as_its_budget_allows() {
        let patch: String = (0..2_000)
            .map(|i| format!("+line {i} of the limiter\n"))
            .collect();
        let change = crate::hook::Change {
            base: "a".repeat(40),
            head: "b".repeat(40),
            patch,
        };
        let mut b = block();
        show_change(&mut b, &change, 600, &HeuristicEstimator);
        assert!(b.tokens <= 600, "{}", b.tokens);
        assert_eq!(b.tokens, HeuristicEstimator.count(&b.text));
        assert!(b.text.contains("+line 0 of the limiter\n"));
        assert!(!b.text.contains("+line 1999 of"));
        let left = b.omitted.last().unwrap();
        assert!(left.item.ends_with("diff line(s)"), "{left:?}");
        assert!(
            b.text.contains("more line(s) of the diff are not shown here (the budget); the whole change is on the unit's branch at bbbbbbbbbbbb."),
            "{}",
            b.text
        );
        // A short one is shown whole.
        let mut b = block();
        let small = crate::hook::Change {
            patch: "+one line\n".into(),
            ..change
        };
        show_change(&mut b, &small, 600, &HeuristicEstimator);
        assert!(b.text.ends_with("```diff\n+one line\n```\n"), "{}", b.text);
        assert!(b.omitted.is_empty());
    }
}
