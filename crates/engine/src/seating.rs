//! The seat policy: in a run whose configuration has pools or seats, each turn's worker
//! is the router's pick for the turn's seat, not the next worker of the roster.
//!
//! In a plain run (a plan of steps, no assembly line yet):
//! - a **seat** is what the step names (`--step-seat review.code`), else
//!   [`DEFAULT_SEAT`] (`build.step`);
//! - a **phase** is one plan step (`step T2`): its pin is written with the step's first
//!   turn and holds, through failed turns too, until the step is done. Only a pinned
//!   worker that is no longer eligible (its pool benched or exhausted, the worker benched
//!   or switched off) re-seats the step, at the next hand-off, with a pin saying why;
//! - the **work under review** is the whole run (one objective): a reviewing seat
//!   (`review.*`, `checkpoint.*`, `plan.scrutiny`, `judge`) never goes to the family of a
//!   worker that committed a turn in a seat that does not review, and
//!   `checkpoint.confirm` never to a worker that held `checkpoint.find` in the run;
//! - a step's **tags** (`--step-tags credentials`) are read against its seat's
//!   `deny_tags`: a family denied a tag never takes a step carrying it.
//!
//! The steps are taken in plan order, as the rotating policy takes them, but a routed
//! run has no continuation turns: it is done when its steps are (continuation turns give
//! every worker of a rotation a turn, which a seat does not promise), apart from what
//! the engine's policy asks for after the plan (`SwitchPolicy::after_plan`: a job's gate
//! fixes), seated as [`Unit::after_plan`] says.
//!
//! The decision is the router's (pure, in core); this module only says what it is asked.

use baton_core::compiler::{Assignment, AssignmentKind};
use baton_core::ids::{Timestamp, WorkerId};
use baton_core::router::{
    self, Authored, Benches, Candidate, PassedOver, Pick, Pin, PoolUsage, RouteInput, SEAT_GROUPS,
    Seat, SeatId,
};
use baton_core::state::{ExecutionState, PlanStep};
use baton_core::step_tag::StepTag;

use crate::config::{Floor, RunSettings};
use crate::policy::step_budget;
use crate::{Error, Result};

/// The seat a plan step fills when it names none.
pub const DEFAULT_SEAT: &str = "build.step";

/// The unit of work of a plain run's history (see the module's doc): the whole run.
pub const RUN_UNIT: &str = "run";

/// The seat `step` fills.
pub fn seat_of(step: &PlanStep) -> SeatId {
    step.seat
        .clone()
        .unwrap_or_else(|| SeatId::new(DEFAULT_SEAT))
}

/// The phase `step` is: its pin holds until the step is done.
pub fn phase_of(step: &PlanStep) -> String {
    phase_of_step(&step.id)
}

/// The phase of the plan step whose id is `step_id`.
pub fn phase_of_step(step_id: &str) -> String {
    format!("step {step_id}")
}

/// Refuses a step seat no station asks for, or more seats than steps, with what to write.
pub fn check_step_seats(seats: &[Option<SeatId>], steps: usize) -> Result<()> {
    if seats.len() > steps {
        return Err(Error::Config(format!(
            "{} step seats for {steps} tasks; give at most one per task",
            seats.len()
        )));
    }
    for seat in seats.iter().flatten() {
        if !seat.in_known_group() {
            return Err(Error::Config(format!(
                "step seat \"{seat}\" is not a seat any station asks for: a seat's name starts with one of {}; fix the name (e.g. \"review.code\", or \"{DEFAULT_SEAT}\" for a step that builds)",
                SEAT_GROUPS.join(", ")
            )));
        }
    }
    Ok(())
}

/// What the router reads at a hand-off besides the run: read by the engine from the
/// store, on its clock.
#[derive(Debug, Clone)]
pub struct Reading {
    /// Each pool's usage in its current window, in the floor's order.
    pub usage: Vec<PoolUsage>,
    pub benches: Benches,
    pub now: Timestamp,
}

/// The next step of a routed run: its index in the plan, assignment and budget; `None`
/// when every step is done.
pub fn next_step(
    state: &ExecutionState,
    settings: &RunSettings,
) -> Option<(usize, Assignment, usize)> {
    let cursor = state.cursor()?;
    let step = &state.plan[cursor];
    Some((
        cursor,
        Assignment {
            kind: AssignmentKind::Step,
            step_id: Some(step.id.clone()),
            task: step.title.clone(),
        },
        step_budget(state, settings, cursor),
    ))
}

/// How a routed turn's seat is filled.
#[derive(Debug, Clone, PartialEq)]
pub enum Seating {
    /// The phase's pin holds: nothing new to write.
    Held { pin: Pin },
    /// A new seating: its pin is written with the turn it seats.
    Seated { pin: Pin },
    /// Nobody may take the seat: the run stops with this question.
    Nobody { seat: SeatId, question: String },
}

impl Seating {
    /// The pin of whoever takes the seat.
    pub fn pin(&self) -> Option<&Pin> {
        match self {
            Seating::Held { pin } | Seating::Seated { pin } => Some(pin),
            Seating::Nobody { .. } => None,
        }
    }
}

/// The phase of a routed run's turns after its plan is done (a job's gate fixes).
pub const AFTER_PLAN_PHASE: &str = "after the plan";

/// What a turn's seat is for: its seat, phase and tags.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub seat: SeatId,
    pub phase: String,
    pub tags: Vec<StepTag>,
    /// The unit of work whose writers a checking seat is compared against (a line's
    /// `plan`); none: the whole run (`RUN_UNIT`), as for a plain run.
    pub work: Option<String>,
    /// Workers kept out of this seating: the reason's kind (as a pin's "left out" list
    /// names it) and sentence. A line's other lanes of the same seat
    /// (`holds_another_lane`: independent lanes are held by different workers, or
    /// different families), or a build's later writer kept to the families that built
    /// it (`keeps_the_build_to_its_families`).
    pub apart: Vec<(WorkerId, &'static str, String)>,
}

impl Unit {
    /// Plan step `step`'s seat, in its own phase, with its tags.
    pub fn step(step: &PlanStep) -> Unit {
        Unit {
            seat: seat_of(step),
            phase: phase_of(step),
            tags: step.tags.clone(),
            work: None,
            apart: Vec::new(),
        }
    }

    /// A turn after the plan (a gate fix): it builds, so [`DEFAULT_SEAT`], in
    /// [`AFTER_PLAN_PHASE`], carrying every tag of the plan (it may change anything the
    /// job changed, so a family denied one of them never takes it).
    pub fn after_plan(state: &ExecutionState) -> Unit {
        let mut tags: Vec<StepTag> = Vec::new();
        for tag in state.plan.iter().flat_map(|s| &s.tags) {
            if !tags.contains(tag) {
                tags.push(tag.clone());
            }
        }
        Unit {
            seat: SeatId::new(DEFAULT_SEAT),
            phase: AFTER_PLAN_PHASE.into(),
            tags,
            work: None,
            apart: Vec::new(),
        }
    }
}

/// Everything one seating reads.
pub struct SeatInput<'a> {
    pub state: &'a ExecutionState,
    pub unit: &'a Unit,
    pub candidates: &'a [Candidate],
    pub floor: &'a Floor,
    pub reading: &'a Reading,
    /// The run's pins so far, oldest first.
    pub pins: &'a [Pin],
    pub history: &'a [Authored],
}

/// Fills the seat of `input.unit` for the next turn (hand-off `state.turns`).
pub fn seat(input: &SeatInput<'_>) -> Seating {
    let unit = input.unit;
    let configured = input.floor.seats.iter().find(|s| s.id == unit.seat);
    let unconfigured;
    let seat = match configured {
        Some(seat) => seat,
        None => {
            unconfigured = Seat::new(unit.seat.clone());
            &unconfigured
        }
    };
    let kept: Vec<Candidate>;
    let candidates = if unit.apart.is_empty() {
        input.candidates
    } else {
        kept = input
            .candidates
            .iter()
            .filter(|c| !unit.apart.iter().any(|(w, _, _)| *w == c.id))
            .cloned()
            .collect();
        &kept[..]
    };
    let routed = router::route(&RouteInput {
        seat,
        phase: &unit.phase,
        handoff: input.state.turns,
        now: input.reading.now,
        tags: &unit.tags,
        candidates,
        pools: &input.floor.pools,
        usage: &input.reading.usage,
        benches: &input.reading.benches,
        pins: input.pins,
        step: Some(unit.work.as_deref().unwrap_or(RUN_UNIT)),
        history: input.history,
        inherit_from: None,
    });
    match routed.pick {
        Pick::Held { pin } => Seating::Held { pin },
        Pick::Seated { mut pin } => {
            // Who was left out, and why, is kept with the pin it explains (only new
            // seatings are written; a held pin keeps the record of its own).
            let mut excluded = router::passed_over(&routed.excluded);
            excluded.extend(unit.apart.iter().map(|(worker, reason, why)| PassedOver {
                worker: worker.clone(),
                reason: (*reason).into(),
                why: why.clone(),
            }));
            pin.excluded = Some(excluded);
            Seating::Seated { pin }
        }
        Pick::Nobody { seat, question } => Seating::Nobody { seat, question },
    }
}

/// The history entry of a committed turn of `worker` (`family`) on plan step `step`,
/// or after the plan when `step` is `None` (a gate fix, which builds).
pub fn authored(
    step: Option<&PlanStep>,
    worker: &baton_core::ids::WorkerId,
    family: &str,
) -> Authored {
    Authored {
        step: RUN_UNIT.into(),
        seat: step.map_or_else(|| SeatId::new(DEFAULT_SEAT), seat_of),
        worker: worker.clone(),
        family: family.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use baton_core::ids::{RunId, WorkerId};
    use baton_core::router::{Allowance, Pool, PoolId, Window};

    fn state(seats: &[Option<&str>]) -> ExecutionState {
        let titles: Vec<String> = (0..seats.len()).map(|i| format!("step {i}")).collect();
        let mut s = ExecutionState::new(RunId("r".into()), "o", &titles);
        for (step, seat) in s.plan.iter_mut().zip(seats) {
            step.seat = seat.map(SeatId::new);
        }
        s
    }

    fn candidate(id: &str, family: &str, pool: &str) -> Candidate {
        Candidate {
            id: WorkerId::new(id),
            model: format!("{family}/{id}"),
            family: family.into(),
            pool: PoolId::new(pool),
            qualified: Vec::new(),
            enabled: true,
        }
    }

    fn floor() -> Floor {
        let pool = |id: &str| Pool {
            id: PoolId::new(id),
            allowance: Allowance {
                tokens: Some(1_000),
                ..Allowance::default()
            },
            window: Window::default(),
        };
        Floor {
            pools: vec![pool("a"), pool("b")],
            seats: Vec::new(),
        }
    }

    fn reading(a_used: u64) -> Reading {
        Reading {
            usage: vec![PoolUsage {
                tokens: a_used,
                ..PoolUsage::none(PoolId::new("a"))
            }],
            benches: Benches::default(),
            now: Timestamp(1_000),
        }
    }

    #[test]
    fn a_step_without_a_seat_fills_build_step_and_its_phase_is_the_step() {
        let s = state(&[None, Some("review.code")]);
        assert_eq!(seat_of(&s.plan[0]).as_str(), DEFAULT_SEAT);
        assert_eq!(seat_of(&s.plan[1]).as_str(), "review.code");
        assert_eq!(phase_of(&s.plan[1]), "step T2");
    }

    #[test]
    fn the_coldest_pool_is_seated_at_phase_start_and_the_pin_then_holds() {
        let s = state(&[None]);
        let candidates = [candidate("x", "fx", "a"), candidate("y", "fy", "b")];
        let floor = floor();
        let cold_b = reading(500);
        let unit = Unit::step(&s.plan[0]);
        let input = SeatInput {
            state: &s,
            unit: &unit,
            candidates: &candidates,
            floor: &floor,
            reading: &cold_b,
            pins: &[],
            history: &[],
        };
        let Seating::Seated { pin } = seat(&input) else {
            panic!("a new seating")
        };
        assert_eq!((pin.worker.as_str(), pin.phase.as_str()), ("y", "step T1"));
        assert_eq!(pin.reason, router::PinReason::AtPhaseStart);
        // Pool b gets hotter than a: the pin holds anyway, within its phase.
        let hot_b = Reading {
            usage: vec![PoolUsage {
                tokens: 900,
                ..PoolUsage::none(PoolId::new("b"))
            }],
            ..reading(0)
        };
        let pins = [pin.clone()];
        let held = seat(&SeatInput {
            reading: &hot_b,
            pins: &pins,
            ..input
        });
        assert_eq!(held, Seating::Held { pin });
    }

    #[test]
    fn a_review_step_never_goes_to_the_family_that_wrote_the_run() {
        let s = state(&[None, Some("review.code")]);
        let candidates = [candidate("x", "fx", "a"), candidate("y", "fy", "b")];
        let floor = floor();
        let r = reading(0);
        let history = [authored(Some(&s.plan[0]), &WorkerId::new("y"), "fy")];
        let unit = Unit::step(&s.plan[1]);
        let Seating::Seated { pin } = seat(&SeatInput {
            state: &s,
            unit: &unit,
            candidates: &candidates,
            floor: &floor,
            reading: &r,
            pins: &[],
            history: &history,
        }) else {
            panic!("x may review")
        };
        assert_eq!(pin.worker.as_str(), "x");
        let both = [
            authored(Some(&s.plan[0]), &WorkerId::new("y"), "fy"),
            authored(Some(&s.plan[0]), &WorkerId::new("x"), "fx"),
        ];
        let nobody = seat(&SeatInput {
            state: &s,
            unit: &unit,
            candidates: &candidates,
            floor: &floor,
            reading: &r,
            pins: &[],
            history: &both,
        });
        let Seating::Nobody { seat, question } = nobody else {
            panic!("nobody is left: {nobody:?}")
        };
        assert_eq!(seat.as_str(), "review.code");
        assert!(question.contains("same family (fx)"), "{question}");
        assert!(question.contains("another family"), "{question}");
    }

    #[test]
    fn step_seats_outside_every_station_are_refused_with_the_names() {
        let err = check_step_seats(&[Some(SeatId::new("reveiw.code"))], 1).unwrap_err();
        assert!(err.to_string().contains("review"), "{err}");
        assert!(check_step_seats(&[None, Some(SeatId::new("review.code"))], 2).is_ok());
        assert!(check_step_seats(&[None, None], 1).is_err());
    }
}
