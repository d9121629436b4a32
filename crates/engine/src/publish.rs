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

use std::sync::{Arc, Mutex, PoisonError, RwLock};

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
    /// were abandoned (and the `TurnAbandoned` notes themselves).
    pub fn durable(&self) -> Vec<EventMsg> {
        let mut out: Vec<EventMsg> = Vec::new();
        let mut turn_start = 0;
        for e in self.events() {
            match &e.event.kind {
                baton_protocol::EventKind::TurnAbandoned { .. } => out.truncate(turn_start),
                baton_protocol::EventKind::TurnStarted { .. } => {
                    turn_start = out.len();
                    out.push(e.event);
                }
                _ => out.push(e.event),
            }
        }
        out
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
