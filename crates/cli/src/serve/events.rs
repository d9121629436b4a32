//! The live event stream: one thread follows the store's event log (whoever wrote it:
//! this server's work, a `baton run` in a shell, a `baton work` on another host sharing
//! the PostgreSQL database) and hands each event to every connected client; a client
//! that reconnects with `Last-Event-ID` is first given, from the store, exactly what it
//! missed.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use baton_store::{EventCursor, EventPage, Store};
use futures_util::Stream;
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc};

use super::App;
use super::api::ApiError;

/// How often the follower asks the store for new events when the last ask found none
/// and a client is connected, where the store cannot say when events are committed
/// (SQLite): an indexed range read of about 20 µs, so the stream's latency is this.
const POLL: Duration = Duration::from_millis(10);
/// The same where the store says so (PostgreSQL's `NOTIFY` on every commit that writes
/// events): the follower waits for that, and reads this often only in case a
/// notification was lost (its listener reconnecting says so too).
const POLL_NOTIFIED: Duration = Duration::from_secs(1);
/// The same with no client connected.
const POLL_IDLE: Duration = Duration::from_millis(250);

/// Events read from the store at once (a reconnect's replay, the follower's catch-up).
const PAGE: usize = 500;
/// Events a slow client may fall behind the live stream before it is caught up from
/// the store instead.
const LAG: usize = 4096;

/// One event as the stream sends it.
#[derive(Debug)]
pub(crate) struct Wire {
    /// The event's position in the store's log: its SSE id.
    pub cursor: i64,
    pub run: String,
    /// The event as JSON: the protocol's event, with `seq` (its number in its run) and
    /// `cursor`.
    pub data: String,
}

/// The follower's output: every event committed after the server started.
pub(crate) struct Hub {
    tx: broadcast::Sender<Arc<Wire>>,
    /// The position of the last event handed out.
    head: AtomicI64,
}

impl Hub {
    /// Starts following `store` from its end: events committed from now on are sent
    /// live; earlier ones are replayed to a client that asks for them.
    /// `poll`: the read's interval while a client is connected, in place of `POLL` or
    /// `POLL_NOTIFIED` (more database reads for a lower latency, or fewer).
    pub(crate) fn start(store: Arc<dyn Store>, poll: Option<Duration>) -> anyhow::Result<Arc<Hub>> {
        let cursor = EventCursor(end_of_log(store.as_ref(), 0)?);
        let (tx, _) = broadcast::channel(LAG);
        let hub = Arc::new(Hub {
            tx,
            head: AtomicI64::new(cursor.0),
        });
        let follower = hub.clone();
        std::thread::Builder::new()
            .name("baton-serve-events".into())
            .spawn(move || follower.follow(store, cursor, poll))?;
        Ok(hub)
    }

    /// A hub that follows nothing: for an [`App`] that serves no event stream
    /// (`baton mcp` over stdio), so no thread polls the store.
    pub(crate) fn idle() -> Arc<Hub> {
        let (tx, _) = broadcast::channel(1);
        Arc::new(Hub {
            tx,
            head: AtomicI64::new(0),
        })
    }

    fn follow(&self, store: Arc<dyn Store>, mut cursor: EventCursor, poll: Option<Duration>) {
        let mut failing = false;
        let signal = store.event_signal();
        let poll = poll.unwrap_or(if signal.is_some() {
            POLL_NOTIFIED
        } else {
            POLL
        });
        loop {
            // Read before the log: a commit between the two is not missed.
            let seen = signal.as_ref().map(|s| s.generation());
            match store.events_since(cursor, PAGE) {
                Ok(page) => {
                    if failing {
                        log("the event log is readable again; the stream continues");
                        failing = false;
                    }
                    let full = page.events.len() == PAGE;
                    for wire in wires(&page) {
                        self.head.store(wire.cursor, Ordering::SeqCst);
                        // No receiver: nobody is connected; the event stays in the store.
                        let _ = self.tx.send(Arc::new(wire));
                    }
                    cursor = page.next;
                    if !full {
                        // Nobody connected: nobody waits for the next event (a client
                        // that connects reads up to the store's end itself).
                        let idle = self.tx.receiver_count() == 0;
                        let wait = if idle { POLL_IDLE } else { poll };
                        match (&signal, seen) {
                            (Some(signal), Some(seen)) => {
                                signal.wait_past(seen, wait);
                            }
                            _ => std::thread::sleep(wait),
                        }
                    }
                }
                Err(e) => {
                    if !failing {
                        log(&format!(
                            "cannot read the event log ({e}); live clients wait, and catch up from the store when it is back"
                        ));
                        failing = true;
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    }

    /// Event streams open now.
    pub(crate) fn clients(&self) -> usize {
        self.tx.receiver_count()
    }

    pub(crate) fn head(&self) -> i64 {
        self.head.load(Ordering::SeqCst)
    }
}

/// The position of the last event in the store's log, read forward from `from`.
fn end_of_log(store: &dyn Store, from: i64) -> baton_store::Result<i64> {
    let mut cursor = EventCursor(from);
    loop {
        let page = store.events_since(cursor, 10_000)?;
        if page.events.is_empty() {
            return Ok(cursor.0);
        }
        cursor = page.next;
    }
}

/// The page's events as the stream sends them.
pub(crate) fn wires(page: &EventPage) -> Vec<Wire> {
    page.events
        .iter()
        .zip(&page.cursors)
        .map(|(e, cursor)| {
            let mut data = serde_json::to_value(&e.event).unwrap_or_default();
            if let Some(map) = data.as_object_mut() {
                map.insert("seq".into(), e.seq.into());
                map.insert("cursor".into(), cursor.0.into());
            }
            Wire {
                cursor: cursor.0,
                run: e.event.run_id.to_string(),
                data: data.to_string(),
            }
        })
        .collect()
}

/// Who the log's lines say they are from: `baton serve` unless set (`baton mcp`).
pub(crate) static LOG_AS: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// A line of the server's log, on stderr (stdout is `baton mcp`'s protocol).
pub(crate) fn log(line: &str) {
    use std::io::Write;
    let who = LOG_AS.get().copied().unwrap_or("baton serve");
    // A server whose terminal went away keeps serving.
    let _ = writeln!(std::io::stderr(), "{who}: {line}");
}

#[derive(Debug, Deserialize)]
pub(crate) struct EventsQuery {
    /// Only this run's (or unit's) events: its id or a unique prefix.
    run: Option<String>,
    /// Replay from after this position (as `Last-Event-ID` does; the header wins).
    after: Option<i64>,
}

/// `GET /api/events`: the live stream, as server-sent events. Each event's `id` is its
/// position in the store's log; a client reconnecting with `Last-Event-ID` (or
/// `?after=`) is sent every event after it, from the store, then the live ones.
/// Without either, the stream starts at the live end.
pub(crate) async fn stream(
    State(app): State<Arc<App>>,
    Query(q): Query<EventsQuery>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<i64>().ok())
        .or(q.after);
    let run = match q.run {
        Some(prefix) => Some(
            super::api::blocking(&app, move |app| Ok(app.store.resolve_run(&prefix)?))
                .await?
                .to_string(),
        ),
        None => None,
    };
    // Subscribed before the replay reads the store: an event committed in between is
    // in one or the other (both, at worst: the cursor drops the second).
    let live = app.hub.tx.subscribe();
    let start = match after {
        Some(after) => after,
        // The store's end now (the follower may be a poll behind it).
        None => {
            let head = app.hub.head();
            super::api::blocking(&app, move |app| Ok(end_of_log(app.store.as_ref(), head)?)).await?
        }
    };
    let (tx, rx) = mpsc::channel::<Event>(256);
    tokio::spawn(forward(app.clone(), live, start, run, tx));
    let stream =
        futures_util::stream::unfold(
            rx,
            |mut rx| async move { rx.recv().await.map(|e| (Ok(e), rx)) },
        );
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Sends the client everything after `sent`: from the store until the live stream
/// covers it, then live; from the store again if it fell too far behind. Ends when the
/// client goes away (whether or not anything was being sent to it).
async fn forward(
    app: Arc<App>,
    mut live: broadcast::Receiver<Arc<Wire>>,
    mut sent: i64,
    run: Option<String>,
    tx: mpsc::Sender<Event>,
) {
    let wanted = |w: &Wire| run.as_ref().is_none_or(|r| *r == w.run);
    let event = |w: &Wire| Event::default().id(w.cursor.to_string()).data(&w.data);
    // Where the stream starts, as its first id (an event of type `start`, which a
    // browser's `onmessage` does not see): a client that drops before any event of its
    // run came reconnects from here, and misses nothing in between.
    let start = Event::default()
        .event("start")
        .id(sent.to_string())
        .data(format!("{{\"cursor\":{sent}}}"));
    if tx.send(start).await.is_err() {
        return;
    }
    'catch_up: loop {
        // From the store, up to the live stream's position. A store that cannot be read
        // now is asked again: going live first would skip what it holds.
        loop {
            let from = EventCursor(sent);
            let store = app.store.clone();
            let read = tokio::task::spawn_blocking(move || store.events_since(from, PAGE));
            let page = tokio::select! {
                page = read => page,
                () = tx.closed() => return,
            };
            let Ok(Ok(page)) = page else {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(500)) => continue,
                    () = tx.closed() => return,
                }
            };
            let empty = page.events.is_empty();
            for w in wires(&page) {
                sent = w.cursor;
                if wanted(&w) && tx.send(event(&w)).await.is_err() {
                    return;
                }
            }
            if empty || sent >= app.hub.head() {
                break;
            }
        }
        loop {
            let next = tokio::select! {
                next = live.recv() => next,
                () = tx.closed() => return,
            };
            match next {
                Ok(w) => {
                    if w.cursor <= sent {
                        continue;
                    }
                    sent = w.cursor;
                    if wanted(&w) && tx.send(event(&w)).await.is_err() {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue 'catch_up,
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }
}
