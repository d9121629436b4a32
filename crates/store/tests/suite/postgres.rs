//! The conformance suite against `PostgresStore` on the real server.
//!
//! The server is `BATON_TEST_POSTGRES` (default `postgres://postgres@127.0.0.1:5432/test`,
//! trust auth, as on every development and CI machine). Each test works in a schema of
//! its own, dropped when it ends. A server that cannot be reached fails the test, saying
//! so: nothing is skipped.

use std::sync::atomic::{AtomicU32, Ordering};

use baton_core::ids::RunId;
use baton_store::{Error, PostgresStore, PostgresUrl, Store};
use postgres::{Client, NoTls};

use super::{Backend, Damage, Table};

pub const DEFAULT_SERVER: &str = "postgres://postgres@127.0.0.1:5432/test";

/// The server the tests use.
pub fn server() -> String {
    std::env::var("BATON_TEST_POSTGRES").unwrap_or_else(|_| DEFAULT_SERVER.to_string())
}

/// A raw connection to the test server, or a panic that says what to do.
pub fn raw_client() -> Client {
    let server = server();
    Client::connect(&server, NoTls).unwrap_or_else(|e| {
        panic!(
            "PostgreSQL is not reachable at {server}: {e}. These tests need it (every \
             development and CI machine runs one: `pg_ctlcluster 15 main start`), or set \
             BATON_TEST_POSTGRES to another server's URL"
        )
    })
}

/// A schema name no other test (in this process or another) uses.
pub fn unique_schema(tag: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!(
        "t_{tag}_{}_{}_{nanos}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A schema of its own on the test server, dropped with it.
pub struct Postgres {
    store: PostgresStore,
    url: PostgresUrl,
    pub schema: String,
}

impl Postgres {
    pub fn new() -> Postgres {
        Self::tagged("c")
    }

    pub fn tagged(tag: &str) -> Postgres {
        let schema = unique_schema(tag);
        let url = PostgresUrl::parse(&format!("{}?schema={schema}", server())).unwrap();
        let store = PostgresStore::open(&url).unwrap_or_else(|e| {
            panic!("cannot open a test schema on {}: {e}", server());
        });
        Postgres { store, url, schema }
    }

    pub fn url(&self) -> &PostgresUrl {
        &self.url
    }

    /// A raw connection with baton's schema first on its search path.
    pub fn raw(&self) -> Client {
        let mut client = raw_client();
        client
            .batch_execute(&format!("SET search_path TO \"{}\"", self.schema))
            .unwrap();
        client
    }

    fn scalar(&self, sql: &str, run: &RunId, turn: Option<u32>) -> i64 {
        let turn = turn.map(i64::from);
        self.raw()
            .query_one(sql, &[&run.0, &turn])
            .unwrap()
            .get::<_, i64>(0)
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Ok(mut client) = Client::connect(&server(), NoTls) {
            let _ = client.batch_execute(&format!(
                "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
                self.schema
            ));
        }
    }
}

impl Backend for Postgres {
    fn store(&self) -> &dyn Store {
        &self.store
    }

    fn reopen(&self) -> Box<dyn Store> {
        Box::new(PostgresStore::open(&self.url).unwrap())
    }

    fn count(&self, table: Table, run: &RunId) -> i64 {
        let table = match table {
            Table::Turns => "turns",
            Table::Records => "records",
            Table::RecordChanges => "record_changes",
            Table::CallOutputs => "call_outputs",
            Table::Events => "events",
        };
        self.scalar(
            &format!("SELECT count(*) FROM {table} WHERE run_id = $1 AND $2::bigint IS NULL"),
            run,
            None,
        )
    }

    fn turn_bytes(&self, run: &RunId, turn: u32) -> i64 {
        self.scalar(
            "SELECT ((SELECT coalesce(sum(octet_length(record)), 0) FROM turns
                      WHERE run_id = $1 AND turn = $2)
                   + (SELECT coalesce(sum(octet_length(body)), 0) FROM record_changes
                      WHERE run_id = $1 AND turn = $2)
                   + (SELECT coalesce(sum(octet_length(output)), 0) FROM call_outputs
                      WHERE run_id = $1 AND turn = $2)
                   + (SELECT coalesce(sum(octet_length(body)), 0) FROM events
                      WHERE run_id = $1 AND turn = $2))::bigint",
            run,
            Some(turn),
        )
    }

    fn record_bytes(&self, run: &RunId) -> i64 {
        self.scalar(
            "SELECT coalesce(sum(octet_length(body)), 0)::bigint FROM records
             WHERE run_id = $1 AND $2::bigint IS NULL",
            run,
            None,
        )
    }

    fn damage(&self, damage: &Damage) {
        let mut conn = self.raw();
        // Damage comes from outside baton (a hand edit, a bad restore), which the
        // append-only triggers do not stop: a replica-role session fires no triggers.
        conn.batch_execute("SET session_replication_role = replica")
            .unwrap();
        let changed = match damage {
            Damage::RecordBody { run, kind, ordinal } => conn.execute(
                "UPDATE records SET body = '{\"id\": truncated' WHERE run_id = $1 AND kind = $2 AND ordinal = $3",
                &[&run.0, kind, &i64::from(*ordinal)],
            ),
            Damage::TurnRecord { run, turn } => conn.execute(
                "UPDATE turns SET record = '{\"turn\": 1' WHERE run_id = $1 AND turn = $2",
                &[&run.0, &i64::from(*turn)],
            ),
            Damage::EventBody { run, seq } => conn.execute(
                "UPDATE events SET body = '[]' WHERE run_id = $1 AND run_seq = $2",
                &[&run.0, &(*seq as i64)],
            ),
            Damage::Header { run } => conn.execute(
                "UPDATE runs SET header = 'null' WHERE id = $1",
                &[&run.0],
            ),
        }
        .unwrap();
        assert_eq!(changed, 1, "{damage:?} matched no row");
    }

    fn set_clock_offset(&self, offset_ms: i64) {
        self.store.set_clock_offset(offset_ms);
    }
}

super::conformance_tests!(Postgres::new());

/// Committed history cannot be rewritten or deleted, by baton or by hand.
#[test]
fn events_and_committed_turns_cannot_be_rewritten_or_deleted() {
    let backend = Postgres::new();
    let store = backend.store();
    let state = super::fixtures::create(store, "run-1", 1);
    let (_, commit) = super::fixtures::next_turn(&state);
    store.commit_turn(&commit).unwrap();
    let mut conn = backend.raw();
    for (sql, message) in [
        ("UPDATE events SET body = '{}'", "events are append-only"),
        ("DELETE FROM events", "events are append-only"),
        (
            "UPDATE turns SET record = '{}'",
            "committed turns are never rewritten",
        ),
        ("DELETE FROM turns", "committed turns are never deleted"),
        (
            "UPDATE record_changes SET body = '{}'",
            "committed turns are never rewritten",
        ),
        (
            "DELETE FROM record_changes",
            "committed turns are never deleted",
        ),
        (
            "UPDATE call_outputs SET output = ''",
            "committed turns are never rewritten",
        ),
        (
            "DELETE FROM call_outputs",
            "committed turns are never deleted",
        ),
        ("DELETE FROM runs", "runs are never deleted"),
    ] {
        let err = conn.execute(sql, &[]).unwrap_err();
        let text = err
            .as_db_error()
            .map(|d| d.message().to_string())
            .unwrap_or_default();
        assert!(text.contains(message), "{sql}: {err}");
    }
    for table in [Table::Turns, Table::RecordChanges, Table::CallOutputs] {
        assert!(
            backend.count(table, &RunId("run-1".into())) > 0,
            "{table:?}"
        );
    }
    let (_, next) = super::fixtures::next_turn(&store.load_state(&RunId("run-1".into())).unwrap());
    store.commit_turn(&next).unwrap();
}

#[test]
fn a_schema_from_a_newer_baton_is_refused_and_an_older_one_asks_for_a_writer() {
    let backend = Postgres::new();
    let mut conn = backend.raw();
    conn.batch_execute("UPDATE baton_schema SET version = 99")
        .unwrap();
    let err = PostgresStore::open(backend.url()).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found: 99, .. }),
        "{err}"
    );
    let err = PostgresStore::open_read_only(backend.url()).unwrap_err();
    assert!(
        matches!(err, Error::SchemaTooNew { found: 99, .. }),
        "{err}"
    );

    conn.batch_execute("UPDATE baton_schema SET version = 0")
        .unwrap();
    let err = PostgresStore::open_read_only(backend.url()).unwrap_err();
    assert!(matches!(err, Error::SchemaTooOld { found: 0, .. }), "{err}");
}

#[test]
fn a_read_only_open_of_an_empty_schema_creates_nothing() {
    let schema = unique_schema("ro");
    let url = PostgresUrl::parse(&format!("{}?schema={schema}", server())).unwrap();
    let err = PostgresStore::open_read_only(&url).unwrap_err();
    assert!(matches!(err, Error::NoDatabase { .. }), "{err}");
    assert!(err.to_string().contains(&schema), "{err}");
    let exists = raw_client()
        .query_opt(
            "SELECT 1 FROM information_schema.schemata WHERE schema_name = $1",
            &[&schema],
        )
        .unwrap();
    assert!(exists.is_none());
}

#[test]
fn another_applications_schema_is_refused_and_left_alone() {
    let schema = unique_schema("app");
    let mut raw = raw_client();
    raw.batch_execute(&format!(
        "CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".users (id int, name text);
         INSERT INTO \"{schema}\".users VALUES (1, 'ada');"
    ))
    .unwrap();
    let url = PostgresUrl::parse(&format!("{}?schema={schema}", server())).unwrap();
    for err in [
        PostgresStore::open(&url).unwrap_err(),
        PostgresStore::open_read_only(&url).unwrap_err(),
    ] {
        assert!(matches!(err, Error::NotBaton { .. }), "{err}");
        assert!(err.to_string().contains("users"), "{err}");
    }
    let tables: i64 = raw
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        )
        .unwrap()
        .get(0);
    assert_eq!(tables, 1);
    raw.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .unwrap();
}

/// Two processes opening a fresh schema at once: one creates it, the other finds it.
#[test]
fn racing_first_opens_migrate_once() {
    let schema = unique_schema("race");
    let url = PostgresUrl::parse(&format!("{}?schema={schema}", server())).unwrap();
    let opened: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                s.spawn(|| PostgresStore::open(&url).map(|st| st.list_runs().map(|r| r.len())))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for result in opened {
        assert_eq!(result.unwrap().unwrap(), 0);
    }
    raw_client()
        .batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"))
        .unwrap();
}

/// A server that is not there is named as unreachable, with what to do, not as a
/// generic database error.
#[test]
fn an_unreachable_server_is_said_so_with_what_to_do() {
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = PostgresUrl::parse(&format!(
        "postgres://baton:hunter2@127.0.0.1:{port}/x?connect_timeout=2"
    ))
    .unwrap();
    let err = PostgresStore::open(&url).unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("cannot be reached"), "{text}");
    assert!(text.contains("PostgreSQL is running"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

/// A pooled connection the server dropped while it sat idle (a server restart, a
/// network blip) is replaced, not reported: the next write starts on a fresh
/// connection. Regression: a turn's commit right after a blip failed as
/// `Unreachable` although the server was back, and `baton work` failed the job for it.
#[test]
fn a_connection_dropped_while_idle_is_replaced_not_reported() {
    use super::cuttable::{Cuttable, server_addr};
    use super::fixtures::{T0, create, next_turn};

    let pg = Postgres::tagged("blip");
    let link = Cuttable::start_on("127.0.0.1", &server_addr(&server()));
    let url = PostgresUrl::parse(&format!(
        "postgres://postgres@{}/test?schema={}",
        link.addr, pg.schema
    ))
    .unwrap();
    let store = PostgresStore::open(&url).unwrap();
    let mut state = create(&store, "run-blip", T0);
    for _ in 0..3 {
        // Every connection through the link dies; the server is back at once.
        link.cut();
        link.restore();
        let (after, commit) = next_turn(&state);
        store
            .commit_turn(&commit)
            .unwrap_or_else(|e| panic!("the commit after a blip failed: {e}"));
        assert_eq!(store.run_info(&state.run_id).unwrap().turns, after.turns);
        state = after;
    }
    // While the server stays away, it is said so: nothing is retried forever.
    link.cut();
    let (_, commit) = next_turn(&state);
    let err = store.commit_turn(&commit).unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err}");
    link.restore();
    store.commit_turn(&commit).unwrap();
}

/// Processes started at once against a new schema (`baton work` on several hosts, a
/// `baton serve` beside them) all open it: one creates and migrates it, the others wait
/// for that and find it done.
#[test]
fn many_first_opens_of_one_new_schema_at_once_all_succeed() {
    for round in 0..5 {
        let schema = unique_schema("first");
        let url = PostgresUrl::parse(&format!("{}?schema={schema}", server())).unwrap();
        let start = std::sync::Barrier::new(6);
        let results: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..6)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        PostgresStore::open(&url)
                            .and_then(|store| store.list_runs().map(|_| ()))
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let _ = raw_client().batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        for r in results {
            assert_eq!(r, Ok(()), "round {round}");
        }
    }
}
