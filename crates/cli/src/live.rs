//! The CLI's progress output, rendered from the engine's live event stream (the same
//! renderer `baton export --format events` uses on the stored stream), and the live
//! line while a model call is under way: a call to a slow or hung server says, on
//! stderr, what it waits for and for how long, instead of nothing.

use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use baton_engine::publish::Subscriber;
use baton_protocol::render::Renderer;
use baton_protocol::{Envelope, EventKind};

/// When the line is printed: after the first 10 s of waiting, then every 10 s up to
/// a minute, then every 30 s.
fn next_report(waited: Duration) -> Duration {
    if waited < Duration::from_secs(60) {
        Duration::from_secs((waited.as_secs() / 10 + 1) * 10)
    } else {
        Duration::from_secs((waited.as_secs() / 30 + 1) * 30)
    }
}

struct InFlight {
    what: String,
    since: Instant,
    timeout: Option<Duration>,
}

#[derive(Default)]
struct State {
    /// The calls waiting for their answer, by run and turn (the lanes of a unit's batch
    /// are in flight together).
    in_flight: std::collections::BTreeMap<(String, Option<u32>), InFlight>,
    /// Bumped on every change, so a waiting reporter knows its call is gone.
    generation: u64,
}

struct Progress {
    renderer: Mutex<Renderer>,
    shared: Arc<(Mutex<State>, Condvar)>,
}

/// The subscriber printing progress on stderr, with a line per model call when
/// `verbose`. The waiting line is printed from its own thread (the engine's thread is
/// blocked in the call).
pub fn progress(verbose: bool) -> Arc<dyn Subscriber> {
    let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
    let reporter = shared.clone();
    std::thread::spawn(move || report(&reporter));
    Arc::new(Progress {
        renderer: Mutex::new(Renderer::new(verbose)),
        shared,
    })
}

impl Subscriber for Progress {
    fn receive(&self, e: &Envelope) {
        {
            let (lock, changed) = &*self.shared;
            let mut state = lock.lock().unwrap_or_else(PoisonError::into_inner);
            state.track(&e.event);
            changed.notify_all();
        }
        let lines = self
            .renderer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .feed(&e.event);
        for line in lines {
            eprintln!("{line}");
        }
    }
}

fn report(shared: &(Mutex<State>, Condvar)) {
    let (lock, changed) = shared;
    let mut state = lock.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        // The call waiting longest is the one reported.
        let Some(call) = oldest(&state) else {
            state = changed.wait(state).unwrap_or_else(PoisonError::into_inner);
            continue;
        };
        let waited = call.since.elapsed();
        let due = next_report(waited);
        let generation = state.generation;
        let (s, _) = changed
            .wait_timeout(state, due.saturating_sub(waited))
            .unwrap_or_else(PoisonError::into_inner);
        state = s;
        if state.generation != generation {
            continue;
        }
        if let Some(call) = oldest(&state) {
            let limit = call
                .timeout
                .map(|t| format!("; gives up at {} s", t.as_secs()))
                .unwrap_or_default();
            let others = match state.in_flight.len() - 1 {
                0 => String::new(),
                n => format!(" ({n} more call(s) in flight)"),
            };
            eprintln!(
                "  … {}: waiting {} s for the answer{limit}{others} (Ctrl-C stops)",
                call.what,
                call.since.elapsed().as_secs()
            );
        }
    }
}

impl State {
    /// A call sent is waited for until its turn says anything else.
    fn track(&mut self, e: &baton_protocol::EventMsg) {
        self.generation += 1;
        let key = (e.run_id.0.clone(), e.turn);
        match &e.kind {
            EventKind::CallSent {
                call,
                worker,
                model,
                attempt,
                attempts,
                timeout_ms,
            } => {
                // A call outside any turn is the judge's, whose events carry its group.
                let of = match e.turn {
                    Some(turn) => format!("turn {turn}"),
                    None => format!("judge of group {}", e.run_id),
                };
                let call = InFlight {
                    what: format!(
                        "{of} · {worker} ({model}) {call}: attempt {attempt} of {attempts}"
                    ),
                    since: Instant::now(),
                    timeout: timeout_ms.map(Duration::from_millis),
                };
                self.in_flight.insert(key, call);
            }
            // Anything else the turn says ends its call's wait.
            _ => {
                self.in_flight.remove(&key);
            }
        }
    }
}

fn oldest(state: &State) -> Option<&InFlight> {
    state.in_flight.values().min_by_key(|c| c.since)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lanes of a unit's batch wait together: one answered leaves the others
    /// waiting, and the one waiting longest is reported.
    #[test]
    fn calls_in_flight_together_are_each_waited_for() {
        use baton_core::ids::{RunId, Timestamp, WorkerId};
        use baton_protocol::EventMsg;
        let ev = |turn: u32, kind: EventKind| EventMsg {
            run_id: RunId("u".into()),
            turn: Some(turn),
            at: Timestamp(0),
            kind,
        };
        let sent = |turn: u32| {
            ev(
                turn,
                EventKind::CallSent {
                    call: "combined".into(),
                    worker: WorkerId::new(format!("w{turn}")),
                    model: "mock/m".into(),
                    attempt: 1,
                    attempts: 1,
                    timeout_ms: None,
                },
            )
        };
        let mut state = State::default();
        state.track(&sent(5));
        state.track(&sent(6));
        state.track(&ev(
            5,
            EventKind::Warning {
                worker: WorkerId::new("w5"),
                text: "answered".into(),
            },
        ));
        assert_eq!(state.in_flight.len(), 1);
        assert!(oldest(&state).unwrap().what.starts_with("turn 6 · w6"));
    }

    #[test]
    fn reports_come_every_ten_seconds_then_every_thirty() {
        let at = |s| next_report(Duration::from_secs(s)).as_secs();
        assert_eq!(
            [at(0), at(9), at(10), at(59), at(60), at(95)],
            [10, 10, 20, 60, 90, 120]
        );
    }
}
