//! Seating a routed run's turns (see `crate::seating`): what the store says at each
//! hand-off, and the pins and history the session keeps between turns.

use baton_core::ids::RunId;
use baton_core::router::{Authored, Candidate, Pin};
use baton_core::state::ExecutionState;
use baton_core::turn::TurnStatus;
use baton_store::{PinFilter, Store, bench_set};

use super::{Engine, RunConfig, Session};
use crate::config::Floor;
use crate::seating::{self, Reading, SeatInput, Seating, Unit};
use crate::{Error, Result};

/// A routed run's pins and its history of who wrote what, as committed: read when the
/// run is opened, extended by each turn that commits, so a resumed process seats the
/// next turn from exactly what the last one left.
#[derive(Debug, Clone, Default)]
pub(super) struct Seats {
    pub pins: Vec<Pin>,
    pub history: Vec<Authored>,
}

impl Seats {
    pub fn open(
        store: &dyn Store,
        run: &RunId,
        config: &RunConfig,
        state: &ExecutionState,
    ) -> Result<Seats> {
        if config.settings.floor.is_empty() {
            return Ok(Seats::default());
        }
        let pins = store
            .pins(&PinFilter::run(run))?
            .into_iter()
            .map(|p| p.pin)
            .collect();
        let history = store
            .turns(run)?
            .iter()
            .filter(|t| t.status == TurnStatus::Committed)
            .flat_map(|t| {
                // A lane of the line wrote (or checked) its own unit of work.
                if let Some(lane) = &t.lane {
                    return super::line::authored(lane, &t.worker, &t.family);
                }
                let step = match &t.assignment.step_id {
                    Some(id) => match state.plan.iter().find(|s| &s.id == id) {
                        Some(step) => Some(step),
                        None => return Vec::new(),
                    },
                    // A turn after the plan (a gate fix).
                    None => None,
                };
                vec![seating::authored(step, &t.worker, &t.family)]
            })
            .collect();
        Ok(Seats { pins, history })
    }
}

impl Engine {
    /// What the router reads at this hand-off: every pool's usage in its window now and
    /// the benches in force, in one read of the store.
    pub(super) fn reading(&self, floor: &Floor) -> Result<Reading> {
        let now = self.clock.now();
        let windows = floor
            .pools
            .iter()
            .map(|p| {
                let (start, end) = p
                    .window
                    .bounds(now)
                    .map_err(|e| Error::Config(format!("pool {}: {e}", p.id)))?;
                Ok((p.id.clone(), start, end))
            })
            .collect::<Result<Vec<_>>>()?;
        let (usage, benches) = self.store.floor_reading(&windows)?;
        Ok(Reading {
            usage,
            benches: bench_set(&benches),
            now,
        })
    }

    /// Fills the seat of `unit` for the turn after `state`, holding nothing: who would
    /// take it (a preview, the worker after a failed turn). A turn about to run is
    /// seated by `seat_reserved`.
    pub(super) fn seat_unit(
        &self,
        session: &Session,
        state: &ExecutionState,
        unit: &Unit,
    ) -> Result<Seating> {
        let reading = self.reading(&session.config.settings.floor)?;
        Ok(self.seat_from(session, state, unit, &reading))
    }

    /// Fills the seat of `unit` from `reading`.
    pub(super) fn seat_from(
        &self,
        session: &Session,
        state: &ExecutionState,
        unit: &Unit,
        reading: &Reading,
    ) -> Seating {
        let candidates: Vec<Candidate> = session
            .config
            .roster
            .workers
            .iter()
            .map(|w| w.candidate())
            .collect();
        seating::seat(&SeatInput {
            state,
            unit,
            candidates: &candidates,
            floor: &session.config.settings.floor,
            reading,
            pins: &session.seats.pins,
            history: &session.seats.history,
        })
    }
}

impl Session {
    /// Whether the run's turns are seated by the router (it has pools or seats).
    pub(super) fn routed(&self) -> bool {
        !self.config.settings.floor.is_empty()
    }

    /// Keeps what a committed turn adds to the seats: its new pin, and (when it
    /// committed its claims) who wrote in which seat.
    /// `seated` for a lane of the line: its history entry is the lane's seat on the
    /// lane's unit of work (`super::line::work_of`), what a later checking seat of that
    /// work is compared against.
    pub(super) fn seated_lane(
        &mut self,
        pin: Option<&Pin>,
        lane: &super::line::LaneTurn,
        worker: usize,
        status: TurnStatus,
    ) {
        if let Some(pin) = pin {
            self.seats.pins.push(pin.clone());
        }
        if status != TurnStatus::Committed {
            return;
        }
        let w = &self.config.roster.workers[worker];
        let wrote = super::line::authored(&lane.record(), &w.id, &w.family);
        self.seats.history.extend(wrote);
    }

    pub(super) fn seated(
        &mut self,
        pin: Option<&Pin>,
        step: Option<&str>,
        worker: usize,
        status: TurnStatus,
    ) {
        if !self.routed() {
            return;
        }
        if let Some(pin) = pin {
            self.seats.pins.push(pin.clone());
        }
        let w = &self.config.roster.workers[worker];
        if status != TurnStatus::Committed {
            return;
        }
        let step = match step {
            Some(id) => match self.state.plan.iter().find(|s| s.id == id) {
                Some(step) => Some(step),
                None => return,
            },
            // A turn after the plan (a gate fix).
            None => None,
        };
        self.seats
            .history
            .push(seating::authored(step, &w.id, &w.family));
    }
}
