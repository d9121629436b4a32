//! `LISTEN baton_jobs`: hears other processes enqueue, release and requeue jobs (their
//! transactions `pg_notify('baton_jobs', <schema>)` on commit) and wakes this process's
//! idle claimers through a [`JobSignal`]. `LISTEN baton_events` does the same for every
//! commit that writes events, for `baton serve`'s follower of the event log.
//!
//! One thread per store and channel, with a connection of its own, started when the
//! signal is first asked for and ended soon after the last holder of the signal lets go. A lost
//! connection is reopened with backoff; until then claimers fall back to polling, and a
//! wake-up is sent on every reconnect, since what was said in between was not heard.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use postgres::NoTls;
use postgres::fallible_iterator::FallibleIterator;

use super::PostgresUrl;
use crate::JobSignal;

/// The channel enqueue, release and requeue notify on; the payload is the schema.
pub(crate) const JOBS: &str = "baton_jobs";
/// The channel every transaction that writes events notifies on; the payload is the
/// schema.
pub(crate) const EVENTS: &str = "baton_events";

/// How long one wait for a notification lasts before the thread checks whether anyone
/// still holds the signal.
const SLICE: Duration = Duration::from_millis(500);

/// How often a quiet connection is checked with a query: a peer that vanished without
/// closing the socket (a network cut) shows up here, not as a notification.
const CHECK_EVERY: Duration = Duration::from_secs(15);

const BACKOFF_START: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(10);

/// Starts the listener of `channel` for `url`'s schema and returns the signal it bumps.
pub(crate) fn start(url: &PostgresUrl, channel: &'static str) -> Arc<JobSignal> {
    let signal = Arc::new(JobSignal::new());
    let weak = Arc::downgrade(&signal);
    let url = url.clone();
    let spawned = std::thread::Builder::new()
        .name(format!(
            "baton-listen-{}",
            channel.trim_start_matches("baton_")
        ))
        .spawn(move || listen(&url, channel, &weak));
    if let Err(e) = spawned {
        // Waiters poll instead: slower to notice, never wrong.
        tracing::warn!(error = %e, channel, "cannot start a listener; its waiters poll");
    }
    signal
}

fn listen(url: &PostgresUrl, channel: &str, signal: &Weak<JobSignal>) {
    let mut backoff = BACKOFF_START;
    while signal.strong_count() > 0 {
        let mut client = match url.config.connect(NoTls) {
            Ok(client) => client,
            Err(e) => {
                tracing::debug!(error = %e, channel, retry_in = ?backoff, "listener cannot connect");
                sleep_while_held(signal, backoff);
                backoff = (backoff * 2).min(BACKOFF_MAX);
                continue;
            }
        };
        if let Err(e) = client.batch_execute(&format!("LISTEN {channel}")) {
            tracing::debug!(error = %e, channel, "listener cannot LISTEN");
            sleep_while_held(signal, backoff);
            backoff = (backoff * 2).min(BACKOFF_MAX);
            continue;
        }
        backoff = BACKOFF_START;
        tracing::debug!(schema = %url.schema, channel, "listener connected");
        // Anything said while the listener was away was not heard.
        wake(signal);
        let mut checked = Instant::now();
        loop {
            if signal.strong_count() == 0 {
                return;
            }
            let next = client.notifications().timeout_iter(SLICE).next();
            match next {
                Ok(Some(n)) => {
                    if n.payload() == url.schema {
                        wake(signal);
                    }
                    continue;
                }
                Ok(None) if client.is_closed() => break,
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(error = %e, channel, "listener lost its connection");
                    break;
                }
            }
            if checked.elapsed() >= CHECK_EVERY {
                checked = Instant::now();
                if let Err(e) = client.batch_execute("SELECT 1") {
                    tracing::debug!(error = %e, channel, "listener lost its connection");
                    break;
                }
            }
        }
    }
}

fn wake(signal: &Weak<JobSignal>) {
    if let Some(signal) = signal.upgrade() {
        signal.notify();
    }
}

fn sleep_while_held(signal: &Weak<JobSignal>, total: Duration) {
    let until = Instant::now() + total;
    while signal.strong_count() > 0 && Instant::now() < until {
        std::thread::sleep(SLICE.min(until.saturating_duration_since(Instant::now())));
    }
}
