//! The conformance suite against `SqliteStore` on a real file.

use std::path::PathBuf;

use baton_core::ids::RunId;
use baton_store::{SqliteStore, Store};
use rusqlite::{Connection, params};
use tempfile::TempDir;

use super::{Backend, Damage, Table};

pub struct Sqlite {
    store: SqliteStore,
    path: PathBuf,
    // Dropped last: removes the database file.
    _dir: TempDir,
}

impl Sqlite {
    pub fn new() -> Sqlite {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs").join("baton.db");
        Sqlite {
            store: SqliteStore::open(&path).unwrap(),
            path,
            _dir: dir,
        }
    }

    fn raw(&self) -> Connection {
        Connection::open(&self.path).unwrap()
    }

    fn scalar(&self, sql: &str, run: &RunId, turn: Option<u32>) -> i64 {
        self.raw()
            .query_row(sql, params![run.0, turn], |row| row.get(0))
            .unwrap()
    }
}

impl Backend for Sqlite {
    fn store(&self) -> &dyn Store {
        &self.store
    }

    fn reopen(&self) -> Box<dyn Store> {
        Box::new(SqliteStore::open(&self.path).unwrap())
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
            &format!("SELECT count(*) FROM {table} WHERE run_id = ?1 AND ?2 IS NULL"),
            run,
            None,
        )
    }

    fn turn_bytes(&self, run: &RunId, turn: u32) -> i64 {
        self.scalar(
            "SELECT (SELECT coalesce(sum(length(record)), 0) FROM turns
                     WHERE run_id = ?1 AND turn = ?2)
                  + (SELECT coalesce(sum(length(body)), 0) FROM record_changes
                     WHERE run_id = ?1 AND turn = ?2)
                  + (SELECT coalesce(sum(length(output)), 0) FROM call_outputs
                     WHERE run_id = ?1 AND turn = ?2)
                  + (SELECT coalesce(sum(length(body)), 0) FROM events
                     WHERE run_id = ?1 AND turn = ?2)",
            run,
            Some(turn),
        )
    }

    fn record_bytes(&self, run: &RunId) -> i64 {
        self.scalar(
            "SELECT coalesce(sum(length(body)), 0) FROM records WHERE run_id = ?1 AND ?2 IS NULL",
            run,
            None,
        )
    }

    fn damage(&self, damage: &Damage) {
        let conn = self.raw();
        // Damage comes from outside baton (a disk, a hand edit), which the append-only
        // triggers do not stop; drop them to simulate it.
        conn.execute_batch(
            "DROP TRIGGER IF EXISTS events_never_change; DROP TRIGGER IF EXISTS turns_never_change;",
        )
        .unwrap();
        let changed = match damage {
            Damage::RecordBody { run, kind, ordinal } => conn.execute(
                "UPDATE records SET body = '{\"id\": truncated' WHERE run_id = ?1 AND kind = ?2 AND ordinal = ?3",
                params![run.0, kind, ordinal],
            ),
            Damage::TurnRecord { run, turn } => conn.execute(
                "UPDATE turns SET record = '{\"turn\": 1' WHERE run_id = ?1 AND turn = ?2",
                params![run.0, turn],
            ),
            Damage::EventBody { run, seq } => conn.execute(
                "UPDATE events SET body = '[]' WHERE run_id = ?1 AND run_seq = ?2",
                params![run.0, *seq as i64],
            ),
            Damage::Header { run } => conn.execute(
                "UPDATE runs SET header = 'null' WHERE id = ?1",
                params![run.0],
            ),
        }
        .unwrap();
        assert_eq!(changed, 1, "{damage:?} matched no row");
    }

    fn set_clock_offset(&self, offset_ms: i64) {
        self.store.set_clock_offset(offset_ms);
    }
}

super::conformance_tests!(Sqlite::new());

/// Regression: the README said committed turns refuse deletes, but only an UPDATE
/// trigger existed, so `DELETE FROM turns` on the file erased history silently.
#[test]
fn events_and_committed_turns_cannot_be_rewritten_or_deleted() {
    let backend = Sqlite::new();
    let store = backend.store();
    let state = super::fixtures::create(store, "run-1", 1);
    let (_, commit) = super::fixtures::next_turn(&state);
    store.commit_turn(&commit).unwrap();
    let conn = backend.raw();
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
        let err = conn.execute(sql, []).unwrap_err().to_string();
        assert!(err.contains(message), "{sql}: {err}");
    }
    // Still all there, and baton itself keeps working on the run.
    for table in [Table::Turns, Table::RecordChanges, Table::CallOutputs] {
        assert!(
            backend.count(table, &RunId("run-1".into())) > 0,
            "{table:?}"
        );
    }
    let (_, next) = super::fixtures::next_turn(&store.load_state(&RunId("run-1".into())).unwrap());
    store.commit_turn(&next).unwrap();
}

/// A turn row as a baton from before `ErrorClass` wrote it (classes as bare strings,
/// one this build does not know) loads: the known names as their classes, the
/// unknown one kept word for word rather than making the run unreadable.
#[test]
fn call_records_with_class_strings_from_older_rows_load_typed() {
    use baton_core::ErrorClass;
    let backend = Sqlite::new();
    let store = backend.store();
    let state = super::fixtures::create(store, "run-1", 1);
    let (_, commit) = super::fixtures::next_turn(&state);
    store.commit_turn(&commit).unwrap();
    let number = commit.record.turn;
    let conn = backend.raw();
    conn.execute_batch("DROP TRIGGER IF EXISTS turns_never_change;")
        .unwrap();
    let changed = conn
        .execute(
            "UPDATE turns SET record = json_set(record,
                 '$.calls[0].error_class', 'context_too_long',
                 '$.calls[0].attempts', json('[{\"error\":\"rate_limited\",\"waited_ms\":5},{\"error\":\"melted\"}]'))
             WHERE run_id = 'run-1'",
            [],
        )
        .unwrap();
    assert_eq!(changed, 1);
    let turn = backend
        .reopen()
        .turn(&RunId("run-1".into()), number)
        .unwrap()
        .unwrap();
    let call = &turn.calls[0];
    assert_eq!(call.error_class, Some(ErrorClass::ContextTooLong));
    assert_eq!(call.attempts[0].error, Some(ErrorClass::RateLimited));
    assert_eq!(call.attempts[0].waited_ms, Some(5));
    assert_eq!(
        call.attempts[1].error,
        Some(ErrorClass::Other("melted".into()))
    );
}

/// Several processes started at once in an empty directory (`baton work` twice, a
/// `baton serve` beside a `baton run`) all open, create and migrate the same new file:
/// every one of them must get a working store, none "database is locked".
#[test]
fn many_first_opens_of_one_new_file_at_once_all_succeed() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let start = std::sync::Barrier::new(8);
        let results: Vec<Result<(), String>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    s.spawn(|| {
                        start.wait();
                        SqliteStore::open(&path)
                            .and_then(|store| store.list_runs().map(|_| ()))
                            .map_err(|e| e.to_string())
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            assert_eq!(r, Ok(()), "round {round}");
        }
        let mode: String = Connection::open(&path)
            .unwrap()
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal", "round {round}");
    }
}

/// Reading commands (`baton runs`, `baton state`) started while another process creates
/// the database see either no database yet or a baton one, never "busy" or "not
/// baton's": a file caught half-made is not another application's.
#[test]
fn readers_racing_the_first_open_see_no_database_or_a_baton_one() {
    for round in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let start = std::sync::Barrier::new(8);
        let results: Vec<Result<(), baton_store::Error>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|k| {
                    let (path, start) = (&path, &start);
                    s.spawn(move || {
                        start.wait();
                        if k % 2 == 0 {
                            SqliteStore::open(path).and_then(|store| store.list_runs().map(|_| ()))
                        } else {
                            SqliteStore::open_read_only(path)
                                .and_then(|store| store.list_runs().map(|_| ()))
                        }
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for r in results {
            match r {
                Ok(()) | Err(baton_store::Error::NoDatabase { .. }) => {}
                Err(e) => panic!("round {round}: {e}"),
            }
        }
    }
}
