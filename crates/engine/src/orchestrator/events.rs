//! Event construction: every event is stamped by the engine (run, turn, engine clock)
//! and published as it happens; the events of a turn are also kept for its commit.

use std::sync::PoisonError;

use baton_core::ids::Timestamp;
use baton_protocol::{EventKind, EventMsg};

use super::calls::TurnStream;
use super::{Engine, Session};

impl Engine {
    /// An event of the turn under way: published live now, committed with the turn.
    pub(super) fn emit(&self, session: &Session, turn: u32, at: Timestamp, kind: EventKind) {
        self.turn_stream(session).emit(turn, at, kind);
    }

    /// The turn's stream as its calls see it (one place publishes and keeps events).
    pub(super) fn turn_stream<'a>(&'a self, session: &'a Session) -> TurnStream<'a> {
        TurnStream {
            publisher: &self.publisher,
            run: &session.run,
            kept: &session.turn_events,
            in_turn: true,
        }
    }

    /// The events the turn under way emitted so far, taken for its commit (or dropped
    /// with it).
    pub(super) fn take_turn_events(&self, session: &Session) -> Vec<EventMsg> {
        self.take_events_of(session, session.state.turns)
    }

    /// The events kept for turn `turn`: the lanes of a batch (see `line_batch`) keep
    /// theirs side by side until each commits in its turn.
    fn take_events_of(&self, session: &Session, turn: u32) -> Vec<EventMsg> {
        let mut kept = session
            .turn_events
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        kept.extract_if(.., |e| e.turn.is_none_or(|t| t == turn))
            .collect()
    }

    /// Says the turn under way will not be committed: its live events are void.
    pub(super) fn abandon_turn(&self, session: &Session, turn: u32, reason: String) {
        self.take_events_of(session, turn);
        self.publisher.live(&EventMsg {
            run_id: session.run.clone(),
            turn: Some(turn),
            at: self.clock.now(),
            kind: EventKind::TurnAbandoned { reason },
        });
    }

    /// Events just stored outside a turn, with the numbers the store gave them.
    pub(super) fn published(&self, seqs: &[u64], events: &[EventMsg]) {
        self.publisher.stored(seqs, events);
    }
}
