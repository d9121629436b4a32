//! Pins: the router's record of one seating.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Fractions, PoolId, SeatId};
use crate::ids::{Timestamp, WorkerId};

/// Who took a seat, when, from which pool, how spent every pool was at that moment,
/// and why. A pin holds until its phase ends, unless its pool is benched or exhausted
/// (or its worker can no longer take the seat), which re-seats at the next hand-off with
/// a new pin saying so.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pin {
    pub seat: SeatId,
    pub worker: WorkerId,
    pub model: String,
    pub family: String,
    pub pool: PoolId,
    /// The phase the pin holds for (a station's name, as the engine gives it).
    pub phase: String,
    pub at: Timestamp,
    /// Every configured pool's used fraction (0.0 = untouched, 1.0 = allowance spent).
    pub fractions: Fractions,
    pub reason: PinReason,
    /// Every worker the router left out of this seating, and why (in worker-id order):
    /// what `baton pins --why` shows. `None` when not recorded: a pin written before
    /// baton kept them (store migration 14), or one `route` made, which the engine fills
    /// in when it writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded: Option<Vec<PassedOver>>,
}

/// A worker the router left out of a seating: its [`Exclusion`](super::Exclusion), owned,
/// as a pin keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PassedOver {
    pub worker: WorkerId,
    /// The exclusion's kind, as `baton route --json` names it (`same_family_as_writer`,
    /// `no_headroom`, …).
    pub reason: String,
    /// The reason in words ("same family (anthropic) as the writer, opus").
    pub why: String,
}

/// The owned record of `excluded`, for the pin of a new seating.
pub fn passed_over(excluded: &[super::Excluded<'_>]) -> Vec<PassedOver> {
    excluded
        .iter()
        .map(|e| PassedOver {
            worker: e.worker.clone(),
            reason: e.reason.kind().to_string(),
            why: e.reason.to_string(),
        })
        .collect()
}

/// Why a seating happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum PinReason {
    /// The seat's first seating in this phase.
    AtPhaseStart,
    /// The pinned worker could no longer take the seat (benched, switched off, excluded
    /// by this step's tags or writer), so the seat was filled again at hand-off (turn)
    /// `handoff`.
    ReseatedAtHandoff { handoff: u32 },
    /// The seat stays with the worker already running the lead, as the station asked.
    InheritedFromLead,
    /// The pinned worker's pool was benched.
    PoolBenched { pool: PoolId },
    /// The pinned worker's pool ran out (a provider said so, or its allowance is spent).
    PoolExhausted { pool: PoolId },
}

impl fmt::Display for PinReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinReason::AtPhaseStart => f.write_str("at phase start"),
            PinReason::ReseatedAtHandoff { handoff } => {
                write!(f, "re-seated at hand-off {handoff}")
            }
            PinReason::InheritedFromLead => f.write_str("inherited from the running lead"),
            PinReason::PoolBenched { pool } => write!(f, "pool {pool} benched"),
            PinReason::PoolExhausted { pool } => write!(f, "pool {pool} exhausted"),
        }
    }
}
