//! Headroom shared across processes: two processes seating the same seat at once, on a
//! pool with headroom for one turn, do not both spend it. Each process has its own
//! store on the one database (an SQLite file, or a PostgreSQL schema as two hosts
//! would share it) and its own engine; their model calls overlap, so both seat before
//! either commits.

use std::sync::Barrier;
use std::time::Duration;

use baton_core::router::{Allowance, Pool, PoolId, Window};
use baton_store::{PostgresStore, PostgresUrl};

use super::providers::{chat, openai_worker};
use super::seats::{pins, routed};
use super::server::{Action, TestServer};
use super::*;

/// A pool metering requests only.
fn pool(id: &str, requests: u64) -> Pool {
    Pool {
        id: PoolId::new(id),
        allowance: Allowance {
            requests: Some(requests),
            ..Allowance::default()
        },
        window: Window::default(),
    }
}

/// Every answer takes `delay`: long enough for the other process to seat meanwhile.
fn slow_server(answers: usize, delay: Duration) -> TestServer {
    TestServer::start(
        (0..answers)
            .map(|_| {
                Action::Delay(
                    delay,
                    Box::new(chat(&ok_result("migrated"), "stop", 100, 10)),
                )
            })
            .collect(),
    )
}

/// Runs one run of `spec` in each of two processes at once (each opening the database
/// with `open`), from one barrier; their ends, in order.
fn two_at_once(open: &(dyn Fn() -> Arc<dyn Store> + Sync), spec: &RunSpec) -> Vec<(RunId, RunEnd)> {
    let start = Barrier::new(2);
    // The database exists before the two start, as it would for two processes sharing
    // it (this test is about the pool, not about two first opens racing to create it).
    drop(open());
    std::thread::scope(|s| {
        let runs: Vec<_> = (0..2)
            .map(|_| {
                let start = &start;
                s.spawn(move || {
                    let ready = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let store = open();
                        let engine = Engine::new(store.clone());
                        let id = engine.create_run(spec).unwrap();
                        let mut session = engine
                            .open_with_keys(&id, None, Some(&spec.roster))
                            .unwrap();
                        // As `baton run` does: the lease's heartbeat keeps a reservation.
                        engine.lease(&mut session, Duration::from_secs(30)).unwrap();
                        (engine, id, session)
                    }));
                    // Reached whatever happened: a failure fails the test, never hangs it
                    // with the other thread waiting here.
                    start.wait();
                    let (engine, id, mut session) =
                        ready.unwrap_or_else(|e| std::panic::resume_unwind(e));
                    let end = engine.run(&mut session, None, &mut |_, _| {}).unwrap();
                    (id, end)
                })
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap()).collect()
    })
}

fn requests_used(store: &dyn Store, pool: &str) -> u64 {
    store
        .pool_usage(&PoolId::new(pool), Timestamp(i64::MIN), Timestamp(i64::MAX))
        .unwrap()
        .requests
}

/// Pool a has one request left (both pools untouched, the tie goes to a by id): one
/// process takes it, the other is routed to b, and neither pool ends over its
/// allowance. Without reservations both read a as the coldest and both spent it.
fn one_takes_the_last_of_a_pool_and_the_other_the_next_pool(
    open: &(dyn Fn() -> Arc<dyn Store> + Sync),
) {
    let server = slow_server(4, Duration::from_millis(400));
    let mut w1 = openai_worker("w1", &server, 0);
    w1.family = "fa".into();
    let mut w2 = openai_worker("w2", &server, 0);
    w2.family = "fb".into();
    let spec = routed(
        spec(
            &["Migrate the billing module"],
            Roster {
                workers: vec![w1, w2],
            },
        ),
        vec![pool("a", 1), pool("b", 100)],
        &[("w1", "a"), ("w2", "b")],
    );
    let ends = two_at_once(open, &spec);
    let store = open();
    let mut seated: Vec<String> = ends
        .iter()
        .map(|(id, end)| {
            assert_eq!(*end, RunEnd::Finished, "{id}");
            let pins = pins(&store, id);
            assert_eq!(pins.len(), 1, "{pins:?}");
            pins[0].pin.pool.to_string()
        })
        .collect();
    seated.sort();
    assert_eq!(seated, ["a", "b"]);
    assert_eq!(requests_used(store.as_ref(), "a"), 1);
    assert_eq!(requests_used(store.as_ref(), "b"), 1);
    assert!(store.live_reservations().unwrap().is_empty());
}

/// One pool with headroom for one turn and nobody else: one process takes it, the
/// other stops with the router's question (which names the pool) and spends nothing.
fn with_no_pool_left_the_other_stops_with_the_routers_question(
    open: &(dyn Fn() -> Arc<dyn Store> + Sync),
) {
    let server = slow_server(4, Duration::from_millis(400));
    let mut w1 = openai_worker("w1", &server, 0);
    w1.family = "fa".into();
    let mut w2 = openai_worker("w2", &server, 0);
    w2.family = "fb".into();
    let spec = routed(
        spec(
            &["Migrate the billing module"],
            Roster {
                workers: vec![w1, w2],
            },
        ),
        vec![pool("a", 1)],
        &[("w1", "a"), ("w2", "a")],
    );
    let ends = two_at_once(open, &spec);
    let finished = ends
        .iter()
        .filter(|(_, end)| *end == RunEnd::Finished)
        .count();
    assert_eq!(finished, 1, "{ends:?}");
    let question = ends
        .iter()
        .find_map(|(_, end)| match end {
            RunEnd::Blocked { question } => Some(question.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("one run stops: {ends:?}"));
    assert!(question.contains("pool a"), "{question}");
    let store = open();
    assert_eq!(requests_used(store.as_ref(), "a"), 1);
    assert_eq!(server.requests().len(), 1);
    assert!(store.live_reservations().unwrap().is_empty());
}

#[test]
fn two_processes_on_one_sqlite_file_do_not_both_spend_the_last_of_a_pool() {
    for _ in 0..2 {
        let dir = tempfile::tempdir().unwrap();
        one_takes_the_last_of_a_pool_and_the_other_the_next_pool(&|| store_in(dir.path()));
    }
    let dir = tempfile::tempdir().unwrap();
    with_no_pool_left_the_other_stops_with_the_routers_question(&|| store_in(dir.path()));
}

/// A schema of its own on the test server (`BATON_TEST_POSTGRES`, as the store's
/// suite), dropped with it.
struct Schema {
    url: PostgresUrl,
    name: String,
}

impl Schema {
    fn new(tag: &str) -> Schema {
        let server = std::env::var("BATON_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("e_{tag}_{}_{nanos}", std::process::id());
        let url = PostgresUrl::parse(&format!("{server}?schema={name}")).unwrap();
        Schema { url, name }
    }

    fn open(&self) -> Arc<dyn Store> {
        Arc::new(PostgresStore::open(&self.url).unwrap_or_else(|e| {
            panic!("PostgreSQL is not reachable ({e}): these tests need it, or BATON_TEST_POSTGRES")
        }))
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let server = std::env::var("BATON_TEST_POSTGRES")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
        if let Ok(mut client) = postgres::Client::connect(&server, postgres::NoTls) {
            let _ =
                client.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{}\" CASCADE", self.name));
        }
    }
}

#[test]
fn two_hosts_on_one_postgres_do_not_both_spend_the_last_of_a_pool() {
    for round in 0..2 {
        let schema = Schema::new(&format!("next{round}"));
        one_takes_the_last_of_a_pool_and_the_other_the_next_pool(&|| schema.open());
    }
    let schema = Schema::new("none");
    with_no_pool_left_the_other_stops_with_the_routers_question(&|| schema.open());
}
