//! The line's cursor: where a unit is on its route, and what the supervisor does next.
//!
//! `next` reads the route, the unit's `LineProgress` and its records and says what comes
//! next: a batch of seat turns (lanes that may run at once, in the order they commit),
//! the plan lock, a synthesis, the gates, the merge, a question for a human, or nothing.
//! `advance` moves the progress on once that happened. Both are pure, and the progress is
//! part of the run's state (committed with the turn that moved it), so a resumed unit
//! continues from the same point and asks for no seat turn twice.
//!
//! The engine's supervisor (not written yet) executes what `next` says: every seat turn
//! as one generic engine turn, the lock and the verdict through the reconciler.

use serde::{Deserialize, Serialize};

use super::{Route, SeatSpec, Station, StationKind, VerdictKind, round_converged};
use crate::router::SeatId;
use crate::state::ExecutionState;

/// Rework rounds of one build step (its checkpoint still finds something) before the
/// line asks a human.
pub const STEP_ROUNDS: u32 = 3;
/// Fix rounds of a unit (a verdict or a gate sending it back) before the line asks a
/// human.
pub const FIX_ROUNDS: u32 = 3;
/// Failed turns in a row at one seat before the line asks a human.
pub const SEAT_FAILURES: u32 = 3;

/// What a lane does at its station.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The station's own work: a lane of discovery, a co-draft, a scrutiny, a review.
    Work,
    /// The lead merging the lanes' output (or picking a draft).
    Merge,
    /// The plan's lead revising the plan between scrutiny rounds.
    Revise,
    /// A build step (or a fix round's build).
    Build,
    /// A checkpoint find pass, from 1.
    Find { pass: u32 },
    /// The checkpoint's confirmation.
    Confirm,
}

/// One seat turn the line asks for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lane {
    pub seat: SeatId,
    /// Which of the seat's lanes (`discovery.deep` ×2 has 0 and 1).
    pub index: u32,
    pub role: Role,
    /// The lane must not see the other lanes' output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blind: bool,
}

/// Where a unit is on its route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LineProgress {
    /// The station, by its index in the route.
    pub station: usize,
    /// The station's round (scrutiny, review) or the step's rework round, from 1, in
    /// this pass through the station (its round limit counts these).
    pub round: u32,
    /// The rounds earlier passes through each station used (by station index): a fix
    /// round's second review goes on numbering where the first stopped, so a round's
    /// findings are never mistaken for another pass's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_rounds: Vec<u32>,
    /// At a build: the locked plan's step being built (from 0); none in a fix round.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<usize>,
    /// Fix rounds taken so far.
    #[serde(default)]
    pub fixes: u32,
    /// The lanes committed in this station, round and step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub done: Vec<Lane>,
    /// The question the line stopped on, until a human answers it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asked: Option<String>,
    /// What stopped the line, when an answer can act on it (a limit that was reached);
    /// absent for a question whose answer is only recorded (an ambiguous intake).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<Stop>,
    /// Rounds a human allowed beyond the station's (or the step's) limit, this pass.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_rounds: u32,
    /// Fix rounds a human allowed beyond [`FIX_ROUNDS`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_fixes: u32,
    /// Each seat whose last turns failed, one after another, and how many (a seat's
    /// count ends when one of its turns commits).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failing: Vec<(SeatId, u32)>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A limit the line stopped at, for a human to lift or accept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The station's rounds ran out, each raising something new.
    RoundLimit,
    /// A build step's checkpoint still finds something after its rework rounds.
    StepRounds,
    /// The fix rounds are spent and the unit is sent back again.
    FixRounds,
    /// The synthesis blocked the unit on an open BLOCKER.
    Blocked,
    /// A seat's turns failed [`SEAT_FAILURES`] times in a row.
    SeatFailures,
}

/// What a human's answer to a stop asks of the line, read from its first word:
/// `accept` (go on as things stand), `more [N]` (N more rounds, 1 if unsaid), or
/// anything else: guidance, recorded as a decision, with one more round to act on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    Accept,
    More(u32),
    Guidance,
}

impl Reply {
    pub fn read(answer: &str) -> Reply {
        let mut words = answer
            .split(|c: char| c.is_whitespace() || c == ':' || c == ',')
            .filter(|w| !w.is_empty());
        match words.next().map(str::to_ascii_lowercase).as_deref() {
            Some("accept") => Reply::Accept,
            Some("more") => Reply::More(
                words
                    .next()
                    .and_then(|n| n.parse().ok())
                    .filter(|n| *n > 0)
                    .unwrap_or(1),
            ),
            _ => Reply::Guidance,
        }
    }
}

/// What a human may answer at `stop`, as the question says it.
fn options(stop: Stop, station: &Station) -> String {
    if stop == Stop::SeatFailures {
        return "fix its worker (the model, key or server) or bench it (`baton worker bench ID`), then answer anything (`retry`) to run the seat again".into();
    }
    let accept = match (stop, station.kind) {
        (Stop::RoundLimit, StationKind::PlanLoop) => "lock the plan as it stands",
        (Stop::RoundLimit, _) => "go on with the findings as they stand",
        (Stop::StepRounds, _) => "dismiss the step's open findings and go on to the next step",
        (Stop::FixRounds | Stop::SeatFailures, _) => "go on past this station as things stand",
        (Stop::Blocked, _) => "go on as things stand, the BLOCKER left open",
    };
    let more = match stop {
        Stop::RoundLimit => "N more rounds",
        Stop::StepRounds => "N more rework rounds of the step",
        Stop::FixRounds | Stop::Blocked | Stop::SeatFailures => "N more fix rounds",
    };
    format!(
        "answer `accept` to {accept}, `more N` for {more}, or anything else to have it taken as guidance (a decision every later briefing carries) for one more round"
    )
}

impl LineProgress {
    /// The current round numbered across every pass through the station: what its
    /// lanes' findings are recorded with.
    pub fn absolute_round(&self) -> u32 {
        self.earlier_rounds.get(self.station).copied().unwrap_or(0) + self.round
    }

    /// A unit at the start of its route.
    pub fn start() -> Self {
        LineProgress {
            station: 0,
            round: 1,
            earlier_rounds: Vec::new(),
            step: None,
            fixes: 0,
            done: Vec::new(),
            asked: None,
            stopped: None,
            more_rounds: 0,
            more_fixes: 0,
            failing: Vec::new(),
        }
    }
}

/// What the supervisor does next.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "next", rename_all = "snake_case")]
pub enum Next {
    /// Seat turns that may run at once; they commit in this order.
    Seats {
        station: String,
        kind: StationKind,
        round: u32,
        /// The plan step (`T2`) a build or checkpoint lane works on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        step: Option<String>,
        lanes: Vec<Lane>,
    },
    /// Freeze the latest plan version.
    LockPlan {
        station: String,
    },
    /// Synthesize the review's findings and record the verdict.
    Synthesize {
        station: String,
    },
    Gate {
        station: String,
    },
    Merge {
        station: String,
    },
    /// The line stops with this question (unit, station, seat and options are the
    /// supervisor's to add).
    Ask {
        station: String,
        question: String,
    },
    /// The route is done.
    Done,
}

/// What happened, for `advance`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Happened {
    /// These lanes' turns committed.
    Committed(Vec<Lane>),
    Locked,
    Verdict(VerdictKind),
    Gate {
        passed: bool,
    },
    Merged,
    /// The line must stop with this question (an ambiguous intake, a contradiction).
    Asked(String),
    /// A human answered the question it stopped on.
    Answered(Reply),
    /// A lane's turn failed (no usable answer); the lane runs again.
    Failed {
        seat: SeatId,
        error: String,
    },
}

/// What comes next for a unit at `progress` on `route`.
pub fn next(route: &Route, progress: &LineProgress, state: &ExecutionState) -> Next {
    let Some(station) = route.stations.get(progress.station) else {
        // Past the last station is the end; further than that is a record the line did
        // not write, and "done" would merge it.
        if progress.station == route.stations.len() {
            return Next::Done;
        }
        return Next::Ask {
            station: route.name.clone(),
            question: format!(
                "the unit's progress names station {} and route {} has {}; the record was not written by this route: check which route the unit ran",
                progress.station + 1,
                route.name,
                route.stations.len()
            ),
        };
    };
    if let Some(question) = &progress.asked {
        return Next::Ask {
            station: station.id.clone(),
            question: question.clone(),
        };
    }
    let id = station.id.clone();
    match station.kind {
        StationKind::Synthesis => return Next::Synthesize { station: id },
        StationKind::Gate => return Next::Gate { station: id },
        StationKind::Merge => return Next::Merge { station: id },
        _ => {}
    }
    if station.kind == StationKind::Build {
        return build_next(station, progress, state);
    }
    match pending(route, progress) {
        Some(lanes) => seats(station, progress, None, batch(station, lanes)),
        // Every lane of the round is done: the rounds' rule or the lock decide.
        None if station.lock && state.plan_lock.is_none() => Next::LockPlan { station: id },
        None => stuck(station),
    }
}

/// Progress that `advance` would have moved on (every lane of the station done): never
/// written by `advance` itself, so a record edited or written by something else. Asking
/// is safer than guessing, and far safer than `Done`, which would merge.
fn stuck(station: &Station) -> Next {
    Next::Ask {
        station: station.id.clone(),
        question: format!(
            "the unit's progress at {} has nothing left to run there and did not move on; the record was not written by the line: check it",
            station.id
        ),
    }
}

fn seats(
    station: &Station,
    progress: &LineProgress,
    step: Option<String>,
    lanes: Vec<Lane>,
) -> Next {
    Next::Seats {
        station: station.id.clone(),
        kind: station.kind,
        round: progress.absolute_round(),
        step,
        lanes,
    }
}

/// Every lane of a seat spec, in order.
fn lanes_of(spec: &SeatSpec, role: Role) -> impl Iterator<Item = Lane> + '_ {
    (0..spec.count).map(move |index| Lane {
        seat: spec.seat.clone(),
        index,
        role,
        blind: spec.blind,
    })
}

/// The lanes of the station's current round still to run: in the plan loop after the
/// first round the plan lead's revision, then the work lanes (in later rounds only the
/// repeating seats'), then the lead's merge; `None` when every one is done.
fn pending(route: &Route, progress: &LineProgress) -> Option<Vec<Lane>> {
    let station = &route.stations[progress.station];
    // After a round that raised something, the plan's lead revises the plan first.
    let revise = (station.kind == StationKind::PlanLoop && progress.round > 1)
        .then(|| plan_lead(route, progress.station))
        .flatten()
        .map(|seat| Lane {
            seat: seat.clone(),
            index: 0,
            role: Role::Revise,
            blind: false,
        });
    let any_repeat = station.seats.iter().any(|s| s.repeat);
    let works: Vec<Lane> = station
        .seats
        .iter()
        .filter(|s| progress.round == 1 || !any_repeat || s.repeat)
        .flat_map(|s| lanes_of(s, Role::Work))
        .collect();
    let todo: Vec<Lane> = revise
        .into_iter()
        .chain(works)
        .filter(|l| !progress.done.contains(l))
        .collect();
    if !todo.is_empty() {
        return Some(todo);
    }
    let lead = station.lead.as_ref().map(|seat| Lane {
        seat: seat.clone(),
        index: 0,
        role: Role::Merge,
        blind: false,
    });
    lead.filter(|l| !progress.done.contains(l)).map(|l| vec![l])
}

/// At most `max_parallel` of `lanes`; a blind or merging station's lanes are
/// independent, a round of scrutiny takes turns.
fn batch(station: &Station, mut lanes: Vec<Lane>) -> Vec<Lane> {
    let k = match station.kind {
        // Scrutiny reviewers "take turns attacking the plan": one after another.
        StationKind::PlanLoop => 1,
        _ => station.max_parallel.unwrap_or(u32::MAX),
    };
    // A merge waits for the lanes it merges: `pending` only offers it once they are done.
    lanes.truncate(k.max(1) as usize);
    lanes
}

fn build_next(station: &Station, progress: &LineProgress, state: &ExecutionState) -> Next {
    let Some(plan) = state.locked_plan() else {
        return Next::Ask {
            station: station.id.clone(),
            question: format!(
                "station {} builds the locked plan, and the plan is not locked",
                station.id
            ),
        };
    };
    let (step_id, tags) = match progress.step {
        Some(i) => match plan.steps.get(i) {
            Some(step) => (Some(format!("T{}", i + 1)), step.tags.as_slice()),
            None => return stuck(station),
        },
        None => (None, &[][..]),
    };
    match build_lanes(station, tags)
        .into_iter()
        .find(|l| !progress.done.contains(l))
    {
        // A step's lanes depend on each other (find reads the build, confirm the find).
        Some(lane) => seats(station, progress, step_id, vec![lane]),
        None => stuck(station),
    }
}

/// A step's lanes: the build seat its tags pick, each find pass, the confirmation.
fn build_lanes(station: &Station, tags: &[String]) -> Vec<Lane> {
    let builder = station
        .seats
        .iter()
        .find(|s| s.tags.iter().any(|t| tags.contains(t)))
        .or_else(|| station.seats.iter().find(|s| s.tags.is_empty()))
        .or(station.seats.first());
    let mut lanes: Vec<Lane> = builder
        .map(|s| Lane {
            seat: s.seat.clone(),
            index: 0,
            role: Role::Build,
            blind: false,
        })
        .into_iter()
        .collect();
    if let Some(c) = &station.checkpoint {
        for pass in 1..=c.passes_for(tags) {
            lanes.push(Lane {
                seat: c.find.clone(),
                index: pass - 1,
                role: Role::Find { pass },
                blind: false,
            });
        }
        lanes.push(Lane {
            seat: c.confirm.clone(),
            index: 0,
            role: Role::Confirm,
            blind: false,
        });
    }
    lanes
}

/// Moves `progress` on after `happened`.
pub fn advance(
    route: &Route,
    progress: &mut LineProgress,
    state: &ExecutionState,
    happened: Happened,
) {
    let Some(station) = route.stations.get(progress.station) else {
        return;
    };
    match happened {
        // A question while the line already stands at one (a limit reached in the
        // same turn) is asked with it; the stop keeps what an answer does.
        Happened::Asked(question) => match progress.asked.take() {
            Some(first) => progress.asked = Some(format!("{first}; and: {question}")),
            None => {
                progress.asked = Some(question);
                progress.stopped = None;
            }
        },
        Happened::Answered(reply) => {
            progress.asked = None;
            if let Some(stop) = progress.stopped.take() {
                answered(route, progress, state, stop, reply);
            }
        }
        Happened::Committed(lanes) => {
            progress
                .failing
                .retain(|(seat, _)| !lanes.iter().any(|l| l.seat == *seat));
            progress.done.extend(lanes);
            settle(route, progress, state);
        }
        Happened::Failed { seat, error } => {
            let n = match progress.failing.iter_mut().find(|(s, _)| *s == seat) {
                Some((_, n)) => {
                    *n += 1;
                    *n
                }
                None => {
                    progress.failing.push((seat.clone(), 1));
                    1
                }
            };
            if n >= SEAT_FAILURES {
                let error: String = error.chars().take(300).collect();
                let question = format!(
                    "{seat} at {} failed {n} turns in a row (last: {error})",
                    station.id
                );
                stop(progress, station, Stop::SeatFailures, question);
            }
        }
        Happened::Locked | Happened::Merged => enter(route, progress, progress.station + 1, false),
        Happened::Gate { passed: true } | Happened::Verdict(VerdictKind::Approved) => {
            enter(route, progress, progress.station + 1, false);
        }
        Happened::Gate { passed: false } | Happened::Verdict(VerdictKind::NeedsChanges) => {
            fix_round(route, progress, station)
        }
        Happened::Verdict(VerdictKind::Blocked) => stop(
            progress,
            station,
            Stop::Blocked,
            format!(
                "the synthesis at {} blocked the unit: an open BLOCKER finding needs a decision",
                station.id
            ),
        ),
    }
}

/// Stops the line at a limit with `question`, saying what the human may answer.
fn stop(progress: &mut LineProgress, station: &Station, at: Stop, question: String) {
    progress.asked = Some(format!("{question}; {}", options(at, station)));
    progress.stopped = Some(at);
}

/// A human's reply to the stop the line was at.
fn answered(
    route: &Route,
    progress: &mut LineProgress,
    state: &ExecutionState,
    at: Stop,
    reply: Reply,
) {
    let station = &route.stations[progress.station];
    let more = match reply {
        Reply::Accept => 0,
        Reply::More(n) => n,
        Reply::Guidance => 1,
    };
    match (at, more) {
        // The seat's lane runs again, its count of failures started anew.
        (Stop::SeatFailures, _) => progress.failing.clear(),
        // The plan loop's lanes are all done: the lock comes next.
        (Stop::RoundLimit, 0) if station.lock && state.plan_lock.is_none() => {}
        (Stop::RoundLimit | Stop::FixRounds | Stop::Blocked, 0) => {
            enter(route, progress, progress.station + 1, false);
        }
        // The step's findings are dismissed by the engine's answer turn (which knows
        // them); the build goes on with the next step.
        (Stop::StepRounds, 0) => next_step(route, progress, state),
        (Stop::RoundLimit | Stop::StepRounds, n) => {
            progress.more_rounds = progress.more_rounds.saturating_add(n);
            progress.round += 1;
            progress.done.clear();
        }
        (Stop::FixRounds | Stop::Blocked, n) => {
            // A BLOCKED synthesis's answer adds fix rounds only when they are spent.
            if at == Stop::FixRounds
                || progress.fixes >= FIX_ROUNDS.saturating_add(progress.more_fixes)
            {
                progress.more_fixes = progress.more_fixes.saturating_add(n);
            }
            fix_round(route, progress, station);
        }
    }
}

/// After lanes committed: when the round (or the step) is complete, the station's rule
/// moves the unit on.
fn settle(route: &Route, progress: &mut LineProgress, state: &ExecutionState) {
    let station = &route.stations[progress.station];
    if station.kind == StationKind::Build {
        return settle_build(route, progress, state);
    }
    if pending(route, progress).is_some() {
        return;
    }
    let Some(rounds) = &station.rounds else {
        if !(station.lock && state.plan_lock.is_none()) {
            enter(route, progress, progress.station + 1, false);
        }
        return;
    };
    if round_converged(state, &station.id, progress.absolute_round(), rounds.until) {
        if !(station.lock && state.plan_lock.is_none()) {
            enter(route, progress, progress.station + 1, false);
        }
        return;
    }
    let limit = rounds.limit.saturating_add(progress.more_rounds);
    if progress.round >= limit {
        let seats: Vec<&str> = station.seats.iter().map(|s| s.seat.as_str()).collect();
        stop(
            progress,
            station,
            Stop::RoundLimit,
            format!(
                "{} ({}) did not converge in {limit} rounds: each raised something new",
                station.id,
                seats.join(", ")
            ),
        );
        return;
    }
    // The next round starts with the plan's lead revising the plan (see `pending`).
    progress.round += 1;
    progress.done.clear();
}

fn plan_lead(route: &Route, at: usize) -> Option<&SeatId> {
    route.stations[..at]
        .iter()
        .rev()
        .find(|s| s.kind == StationKind::Plan)
        .and_then(|s| s.lead.as_ref())
}

fn settle_build(route: &Route, progress: &mut LineProgress, state: &ExecutionState) {
    let station = &route.stations[progress.station];
    let tags: Vec<String> = progress
        .step
        .and_then(|i| state.locked_plan().and_then(|p| p.steps.get(i)))
        .map(|s| s.tags.clone())
        .unwrap_or_default();
    if build_lanes(station, &tags)
        .iter()
        .any(|l| !progress.done.contains(l))
    {
        return;
    }
    let step = progress.step.map(|i| format!("T{}", i + 1));
    let open = state
        .findings
        .iter()
        .any(|f| f.is_open() && f.station == station.id && f.step == step && step.is_some());
    if open {
        let limit = STEP_ROUNDS.saturating_add(progress.more_rounds);
        if progress.round >= limit {
            let checkpoint = station
                .checkpoint
                .as_ref()
                .map_or_else(String::new, |c| format!(" ({})", c.find));
            stop(
                progress,
                station,
                Stop::StepRounds,
                format!(
                    "step {} still has open checkpoint findings{checkpoint} after {limit} rounds of rework",
                    step.unwrap_or_default()
                ),
            );
            return;
        }
        progress.round += 1;
        progress.done.clear();
        return;
    }
    next_step(route, progress, state);
}

/// The build goes on with the locked plan's next step, or on to the next station after
/// the last.
fn next_step(route: &Route, progress: &mut LineProgress, state: &ExecutionState) {
    let steps = state.locked_plan().map_or(0, |p| p.steps.len());
    match progress.step {
        Some(i) if i + 1 < steps => {
            progress.step = Some(i + 1);
            progress.round = 1;
            progress.more_rounds = 0;
            progress.done.clear();
        }
        _ => enter(route, progress, progress.station + 1, false),
    }
}

/// Sends the unit back to the station's `back_to` (else the route's build) for a fix
/// round, or asks a human when the fix rounds are spent.
fn fix_round(route: &Route, progress: &mut LineProgress, station: &Station) {
    let limit = FIX_ROUNDS.saturating_add(progress.more_fixes);
    if progress.fixes >= limit {
        return stop(
            progress,
            station,
            Stop::FixRounds,
            format!(
                "{} sends the unit back again after {limit} fix rounds; look at the open findings and decide",
                station.id
            ),
        );
    }
    let target = station
        .back_to
        .as_deref()
        .and_then(|t| route.stations.iter().position(|s| s.id == t))
        .or_else(|| {
            route
                .stations
                .iter()
                .position(|s| s.kind == StationKind::Build)
        });
    match target {
        Some(at) => {
            progress.fixes += 1;
            enter(route, progress, at, true);
        }
        None => {
            progress.asked = Some(format!(
                "{} needs changes and the route has no station to send them back to",
                station.id
            ));
        }
    }
}

fn enter(route: &Route, progress: &mut LineProgress, at: usize, fix: bool) {
    let leaving = progress.station;
    let used = progress.absolute_round();
    if progress.earlier_rounds.len() <= leaving {
        progress.earlier_rounds.resize(leaving + 1, 0);
    }
    progress.earlier_rounds[leaving] = used;
    progress.station = at;
    progress.round = 1;
    progress.more_rounds = 0;
    progress.done.clear();
    progress.step = match route.stations.get(at) {
        Some(s) if s.kind == StationKind::Build && !fix => Some(0),
        _ => None,
    };
}

#[cfg(test)]
#[path = "cursor_tests.rs"]
mod tests;
