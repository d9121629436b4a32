//! What the line's tests share: a turn of a given worker in a given seat.

use crate::compiler::{Assignment, AssignmentKind, WorkerProfile};
use crate::ids::{Timestamp, WorkerId};
use crate::reconciler::TurnContext;
use crate::reconciler::line::LineTurn;
use crate::router::SeatId;

/// Runs `f` as `who` (family = who) in `seat` at `station`, turn `turn`, on `step`.
pub(crate) fn as_seat<R>(
    who: &str,
    seat: &str,
    station: &str,
    turn: u32,
    step: Option<&str>,
    f: impl FnOnce(&LineTurn<'_>) -> R,
) -> R {
    let w = WorkerProfile {
        id: WorkerId::new(who),
        model: format!("{who}/m"),
        family: who.into(),
        role: None,
    };
    let a = Assignment {
        kind: AssignmentKind::Step,
        step_id: None,
        task: "t".into(),
    };
    let ctx = TurnContext {
        worker: &w,
        turn,
        at: Timestamp(i64::from(turn)),
        assignment: &a,
        seen: Default::default(),
    };
    let seat = SeatId::new(seat);
    f(&LineTurn {
        ctx: &ctx,
        station,
        seat: &seat,
        round: 1,
        step,
    })
}
