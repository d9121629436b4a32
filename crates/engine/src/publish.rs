//! The one live event stream: every event the engine stores is also published here, as
//! it happens, to whoever subscribed (the CLI's progress output, a test, later the
//! server's SSE stream).
//!
//! How a subscriber tells provisional from durable is the protocol's rule (see
//! `baton_protocol::Envelope`): the events of a turn arrive as they happen with no
//! `seq`, and the turn's `TurnCommitted`, published after its transaction committed,
//! carries a `seq` and makes them all durable; a turn that is not committed ends with
//! `TurnAbandoned` and none of its events were stored. Events outside a turn are stored
//! first and arrive with their `seq`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use baton_core::ids::RunId;

use baton_protocol::{Envelope, EventMsg};

/// Receives every published event, on the engine's thread: it must return quickly (a
/// slow subscriber hands events to its own thread, as the CLI's waiting line does).
pub trait Subscriber: Send + Sync {
    fn receive(&self, event: &Envelope);
}

impl<F: Fn(&Envelope) + Send + Sync> Subscriber for F {
    fn receive(&self, event: &Envelope) {
        self(event)
    }
}

/// Fans events out to the subscribers. Cheap to clone (clones share subscribers), and
/// free when nobody subscribed: no event is copied.
#[derive(Clone, Default)]
pub struct Publisher {
    subscribers: Arc<RwLock<Vec<Arc<dyn Subscriber>>>>,
}

impl std::fmt::Debug for Publisher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publisher")
            .field("subscribers", &self.read().len())
            .finish()
    }
}

impl Publisher {
    pub fn subscribe(&self, subscriber: Arc<dyn Subscriber>) {
        self.subscribers
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(subscriber);
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, Vec<Arc<dyn Subscriber>>> {
        self.subscribers
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// An event of a turn in flight: provisional until its turn commits.
    pub fn live(&self, event: &EventMsg) {
        self.send(None, event);
    }

    /// An event the store holds as number `seq` of its run.
    pub fn durable(&self, seq: u64, event: &EventMsg) {
        self.send(Some(seq), event);
    }

    /// Events just stored, with the numbers the store gave them.
    pub fn stored(&self, seqs: &[u64], events: &[EventMsg]) {
        for (seq, event) in seqs.iter().zip(events) {
            self.durable(*seq, event);
        }
    }

    fn send(&self, seq: Option<u64>, event: &EventMsg) {
        let subscribers = self.read();
        if subscribers.is_empty() {
            return;
        }
        let envelope = Envelope {
            seq,
            event: event.clone(),
        };
        for s in subscribers.iter() {
            s.receive(&envelope);
        }
    }
}

/// A subscriber that keeps everything it receives (tests, and anything that wants the
/// stream after the fact).
#[derive(Debug, Default)]
pub struct Recorder {
    events: Mutex<Vec<Envelope>>,
}

impl Recorder {
    pub fn new() -> Arc<Recorder> {
        Arc::new(Recorder::default())
    }

    pub fn events(&self) -> Vec<Envelope> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// What a subscriber can rely on: every event received, except those of turns that
    /// were abandoned (and the `TurnAbandoned` notes themselves). An abandoned turn
    /// voids its own run's provisional events only: runs (and a judge, whose events
    /// carry its group as their run) publish interleaved on one stream.
    pub fn durable(&self) -> Vec<EventMsg> {
        // Slots, not a list that shrinks: a run's turn start stays a valid index.
        let mut kept: Vec<Option<Envelope>> = Vec::new();
        let mut turn_start: HashMap<RunId, usize> = HashMap::new();
        for e in self.events() {
            match &e.event.kind {
                baton_protocol::EventKind::TurnAbandoned { .. } => {
                    let run = &e.event.run_id;
                    let start = turn_start.get(run).copied().unwrap_or(0);
                    for slot in &mut kept[start..] {
                        if slot
                            .as_ref()
                            .is_some_and(|k| &k.event.run_id == run && k.seq.is_none())
                        {
                            *slot = None;
                        }
                    }
                }
                baton_protocol::EventKind::TurnStarted { .. } => {
                    turn_start.insert(e.event.run_id.clone(), kept.len());
                    kept.push(Some(e));
                }
                _ => kept.push(Some(e)),
            }
        }
        kept.into_iter().flatten().map(|e| e.event).collect()
    }
}

impl Subscriber for Recorder {
    fn receive(&self, event: &Envelope) {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
    }
}

#[cfg(test)]
mod tests {
    use baton_core::ids::{RunId, Timestamp, WorkerId};
    use baton_protocol::{EventKind, EventMsg};

    use super::*;

    fn event(run: &str, kind: EventKind) -> EventMsg {
        EventMsg {
            run_id: RunId(run.into()),
            turn: Some(1),
            at: Timestamp(0),
            kind,
        }
    }

    fn started(run: &str) -> EventMsg {
        event(
            run,
            EventKind::TurnStarted {
                worker: WorkerId::new("w"),
                model: "mock/m".into(),
                assignment: "T1".into(),
                task: None,
            },
        )
    }

    fn warning(run: &str, text: &str) -> EventMsg {
        event(
            run,
            EventKind::Warning {
                worker: WorkerId::new("w"),
                text: text.into(),
            },
        )
    }

    /// Regression: `durable` truncated from the last `TurnStarted` of any run, so run
    /// a's abandoned turn voided run b's committed one (which started later) and kept
    /// its own start.
    #[test]
    fn an_abandoned_turn_voids_its_own_runs_events_only_when_runs_interleave() {
        let recorder = Recorder::new();
        let publisher = Publisher::default();
        publisher.subscribe(recorder.clone());
        publisher.live(&started("a"));
        publisher.live(&warning("a", "a1"));
        publisher.live(&started("b"));
        publisher.live(&warning("b", "b1"));
        publisher.live(&warning("a", "a2"));
        publisher.live(&event(
            "a",
            EventKind::TurnAbandoned {
                reason: "cancelled".into(),
            },
        ));
        publisher.durable(
            7,
            &event(
                "b",
                EventKind::TurnCommitted {
                    worker: WorkerId::new("w"),
                    status: "committed".into(),
                    changes: 1,
                    error: None,
                    step_left_open: false,
                    steps: None,
                },
            ),
        );
        let kept: Vec<(String, &str)> = recorder
            .durable()
            .iter()
            .map(|e| (e.run_id.0.clone(), e.kind.name()))
            .collect();
        assert_eq!(
            kept,
            [
                ("b".to_string(), "turn_started"),
                ("b".to_string(), "warning"),
                ("b".to_string(), "turn_committed"),
            ]
        );
    }
}
