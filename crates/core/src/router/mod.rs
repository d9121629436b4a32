//! The router: who works each seat is decided at run time, on evidence, and logged.
//!
//! A **seat** is a named role at a station (`lead.build`, `checkpoint.find`); a **pool**
//! is one subscription's worth of models with an allowance per window; the **router**
//! fills a seat from `qualified ∩ allowed by policy ∩ headroom`, picking the coldest pool
//! (lowest fraction of its allowance used), ties broken deterministically; a **pin** is
//! its record of one seating. No model ever picks another model.
//!
//! Everything here is pure: usage, benches, pins and the clock are passed in by the
//! engine, so a decision can be replayed and tested exhaustively.

use thiserror::Error;

use crate::ids::Timestamp;

mod glob;
mod pin;
mod pool;
mod question;
mod route;
mod seat;
mod spend;
mod window;

pub use glob::Glob;
pub use pin::{PassedOver, Pin, PinReason, passed_over};
pub use pool::{Allowance, Benches, Dimension, Fractions, Pool, PoolId, PoolUsage};
pub use route::{Authored, Excluded, Exclusion, Pick, RouteInput, Routed, route};
pub use seat::{CHECKPOINT_CONFIRM, CHECKPOINT_FIND, Candidate, SEAT_GROUPS, Seat, SeatId};
pub use spend::CallSpend;
pub use window::{ClockTime, Window};

/// What is wrong with a pool or seat as written; each message says what to write instead.
#[derive(Debug, Clone, PartialEq, Error)]
pub enum RouterError {
    #[error(
        "pool {pool}: a {dimension} allowance of zero leaves nothing to spend; give a positive amount, or leave {dimension} out to not meter it"
    )]
    ZeroAllowance { pool: PoolId, dimension: Dimension },
    #[error(
        "window {spec:?}: {detail} (the form is PERIOD [RESET], e.g. \"weekly\", \"weekly mon 09:00\", \"daily 06:00\", \"monthly 1 00:00\", or a period and an RFC 3339 anchor)"
    )]
    BadWindow { spec: String, detail: String },
    #[error("a {what} needs a non-empty id")]
    EmptyName { what: &'static str },
    #[error("{at} is outside the calendar (years -9999 to 9999); check the clock that produced it")]
    OutOfRange { at: Timestamp },
}

#[cfg(test)]
mod tests;
