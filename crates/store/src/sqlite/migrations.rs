//! Schema migrations, keyed on `PRAGMA user_version`.
//!
//! `MIGRATIONS[i]` takes a database from version `i` to `i + 1`. Released migrations are
//! never edited; a schema change is a new entry at the end.

use rusqlite::{Connection, TransactionBehavior};

use super::{Result, fail};
use crate::Error;

const MIGRATIONS: &[&str] = &[
    // 1: runs, current records, per-turn rows and deltas, raw call outputs, events.
    r#"
    CREATE TABLE runs (
        id          TEXT PRIMARY KEY NOT NULL,
        objective   TEXT NOT NULL,
        status      TEXT NOT NULL,
        -- Committed turns; the fence of `commit_turn`.
        turns       INTEGER NOT NULL,
        created_at  INTEGER NOT NULL,
        updated_at  INTEGER NOT NULL,
        config      TEXT NOT NULL,
        -- StateHeader JSON: small, rewritten by every turn.
        header      TEXT NOT NULL
    ) STRICT;

    -- The current version of every state record. A turn upserts only what it changed.
    CREATE TABLE records (
        run_id   TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        kind     TEXT NOT NULL,
        ordinal  INTEGER NOT NULL,
        id       TEXT NOT NULL,
        body     TEXT NOT NULL,
        -- The turn that last wrote the record; NULL for the run's initial state.
        turn     INTEGER,
        PRIMARY KEY (run_id, kind, ordinal)
    ) STRICT;

    -- One row per committed turn: the TurnRecord JSON without its calls' raw outputs,
    -- which live in `call_outputs`.
    CREATE TABLE turns (
        run_id       TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        turn         INTEGER NOT NULL,
        worker       TEXT NOT NULL,
        model        TEXT NOT NULL,
        status       TEXT NOT NULL,
        started_at   INTEGER NOT NULL,
        finished_at  INTEGER NOT NULL,
        record       TEXT NOT NULL,
        PRIMARY KEY (run_id, turn)
    ) STRICT;

    -- The per-turn snapshot as a delta: the records a turn created or changed.
    CREATE TABLE record_changes (
        run_id   TEXT NOT NULL,
        turn     INTEGER NOT NULL,
        kind     TEXT NOT NULL,
        ordinal  INTEGER NOT NULL,
        id       TEXT NOT NULL,
        body     TEXT NOT NULL,
        PRIMARY KEY (run_id, turn, kind, ordinal),
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn) ON DELETE CASCADE
    ) STRICT;

    -- Raw model outputs, kept apart so the transfer audit reads them without parsing
    -- every earlier turn's record.
    CREATE TABLE call_outputs (
        run_id  TEXT NOT NULL,
        turn    INTEGER NOT NULL,
        call    INTEGER NOT NULL,
        output  TEXT NOT NULL,
        PRIMARY KEY (run_id, turn, call),
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn) ON DELETE CASCADE
    ) STRICT;

    -- Append-only. AUTOINCREMENT so a seq is never reused, even after deletes.
    CREATE TABLE events (
        seq     INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id  TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        turn    INTEGER,
        at      INTEGER NOT NULL,
        type    TEXT NOT NULL,
        body    TEXT NOT NULL
    ) STRICT;
    CREATE INDEX events_by_run ON events(run_id, seq);
    "#,
    // 2: jobs — a queue with leases; spec, outbox and judgement are engine JSON.
    r#"
    CREATE TABLE jobs (
        id                TEXT PRIMARY KEY NOT NULL,
        grp               TEXT NOT NULL,
        status            TEXT NOT NULL,
        spec              TEXT NOT NULL,
        run_id            TEXT,
        attempts          INTEGER NOT NULL DEFAULT 0,
        lease_token       TEXT,
        lease_owner       TEXT,
        lease_expires_at  INTEGER,
        created_at        INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        outbox            TEXT,
        error             TEXT,
        judgement         TEXT
    ) STRICT;
    CREATE INDEX jobs_claimable ON jobs(status, created_at);
    CREATE INDEX jobs_by_group ON jobs(grp);
    "#,
    // 3: the event log and the per-turn rows are append-only, enforced by the database.
    r#"
    CREATE TRIGGER events_never_change BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER events_never_vanish BEFORE DELETE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    CREATE TRIGGER turns_never_change BEFORE UPDATE ON turns
    BEGIN SELECT RAISE(ABORT, 'committed turns are never rewritten'); END;
    "#,
    // 4: a run is advanced by one process at a time, under a lease.
    r#"
    ALTER TABLE runs ADD COLUMN lease_token TEXT;
    ALTER TABLE runs ADD COLUMN lease_owner TEXT;
    ALTER TABLE runs ADD COLUMN lease_expires_at INTEGER;
    "#,
    // 5: the delay a provider asked for, per worker, so it outlives the turn and the
    // process that met it.
    r#"
    CREATE TABLE worker_holds (
        run_id      TEXT NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
        worker      TEXT NOT NULL,
        not_before  INTEGER NOT NULL,
        asked_ms    INTEGER NOT NULL,
        PRIMARY KEY (run_id, worker)
    ) STRICT;
    "#,
    // 6: cancel requests from outside the process that holds the work (`baton cancel`).
    // A run's or job's request names the lease it stops, so it never outlives it.
    r#"
    CREATE TABLE cancel_requests (
        kind          TEXT NOT NULL,
        target        TEXT NOT NULL,
        lease_token   TEXT,
        requested_at  INTEGER NOT NULL,
        PRIMARY KEY (kind, target)
    ) STRICT;
    "#,
    // 7: every event gets its run's own gap-free sequence number, assigned in the
    // writing transaction (`seq` stays the store's cursor across runs). Existing rows
    // are numbered in the order they were written; the append-only trigger is lifted
    // for that one update only.
    r#"
    DROP TRIGGER events_never_change;
    ALTER TABLE events ADD COLUMN run_seq INTEGER NOT NULL DEFAULT 0;
    UPDATE events SET run_seq =
        (SELECT COUNT(*) FROM events e WHERE e.run_id = events.run_id AND e.seq <= events.seq);
    -- Unique, so an insert that forgot its number (0) or took a taken one fails.
    CREATE UNIQUE INDEX events_by_run_seq ON events(run_id, run_seq);
    CREATE TRIGGER events_never_change BEFORE UPDATE ON events
    BEGIN SELECT RAISE(ABORT, 'events are append-only'); END;
    "#,
    // 8: a committed turn is never deleted, and no part of it rewritten: its row, its
    // per-turn delta and its raw outputs (migration 3 guarded only the row's updates).
    // Runs are never deleted either: their turns and events would go with them. baton
    // itself only ever inserts into these tables (`gc` removes worktrees, not rows).
    r#"
    CREATE TRIGGER turns_never_vanish BEFORE DELETE ON turns
    BEGIN SELECT RAISE(ABORT, 'committed turns are never deleted'); END;
    CREATE TRIGGER record_changes_never_change BEFORE UPDATE ON record_changes
    BEGIN SELECT RAISE(ABORT, 'committed turns are never rewritten'); END;
    CREATE TRIGGER record_changes_never_vanish BEFORE DELETE ON record_changes
    BEGIN SELECT RAISE(ABORT, 'committed turns are never deleted'); END;
    CREATE TRIGGER call_outputs_never_change BEFORE UPDATE ON call_outputs
    BEGIN SELECT RAISE(ABORT, 'committed turns are never rewritten'); END;
    CREATE TRIGGER call_outputs_never_vanish BEFORE DELETE ON call_outputs
    BEGIN SELECT RAISE(ABORT, 'committed turns are never deleted'); END;
    CREATE TRIGGER runs_never_vanish BEFORE DELETE ON runs
    BEGIN SELECT RAISE(ABORT, 'runs are never deleted: their turns and events are append-only'); END;
    "#,
    // 9: every judge of a group, with a verdict or without one (its calls, cost and
    // events are kept either way; `jobs.judgement` keeps only the latest verdict).
    // Append-only, like the events a judge has no run to be stored in.
    r#"
    CREATE TABLE judgements (
        seq          INTEGER PRIMARY KEY AUTOINCREMENT,
        grp          TEXT NOT NULL,
        outcome      TEXT NOT NULL,
        recorded_at  INTEGER NOT NULL,
        body         TEXT NOT NULL
    ) STRICT;
    CREATE INDEX judgements_by_group ON judgements(grp, seq);
    CREATE TRIGGER judgements_never_change BEFORE UPDATE ON judgements
    BEGIN SELECT RAISE(ABORT, 'judgements are append-only'); END;
    CREATE TRIGGER judgements_never_vanish BEFORE DELETE ON judgements
    BEGIN SELECT RAISE(ABORT, 'judgements are append-only'); END;
    "#,
    // 10: pools. What each committed call spent, counted against the pool its worker
    // belonged to when the turn was committed (calls from before pools existed count
    // against none); usage the owner declares for work done outside baton; benches of a
    // pool or a worker, the latest row per target in force. All append-only: a
    // correction is a new row, and who benched what stays on record.
    r#"
    CREATE TABLE pool_calls (
        pool             TEXT NOT NULL,
        run_id           TEXT NOT NULL,
        turn             INTEGER NOT NULL,
        call             INTEGER NOT NULL,
        -- The call's start, engine clock: the window it counts in.
        at               INTEGER NOT NULL,
        tokens           INTEGER NOT NULL,
        cost_micro_usd   INTEGER NOT NULL,
        requests         INTEGER NOT NULL,
        -- 1 when the provider said the quota is spent; until the reset it named, or
        -- (NULL) until the pool's window ends.
        exhausted        INTEGER NOT NULL,
        exhausted_until  INTEGER,
        PRIMARY KEY (run_id, turn, call),
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn)
    ) STRICT;
    CREATE INDEX pool_calls_by_pool ON pool_calls(pool, at);
    CREATE TABLE pool_usage (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        pool            TEXT NOT NULL,
        mode            TEXT NOT NULL,
        at              INTEGER NOT NULL,
        tokens          INTEGER NOT NULL,
        cost_micro_usd  INTEGER NOT NULL,
        requests        INTEGER NOT NULL,
        note            TEXT NOT NULL,
        recorded_by     TEXT NOT NULL,
        recorded_at     INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX pool_usage_by_pool ON pool_usage(pool, at);
    CREATE TABLE benches (
        seq      INTEGER PRIMARY KEY AUTOINCREMENT,
        kind     TEXT NOT NULL,
        target   TEXT NOT NULL,
        benched  INTEGER NOT NULL,
        by       TEXT NOT NULL,
        at       INTEGER NOT NULL,
        reason   TEXT
    ) STRICT;
    CREATE INDEX benches_by_target ON benches(kind, target, seq);
    CREATE TRIGGER pool_calls_never_change BEFORE UPDATE ON pool_calls
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    CREATE TRIGGER pool_calls_never_vanish BEFORE DELETE ON pool_calls
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    CREATE TRIGGER pool_usage_never_change BEFORE UPDATE ON pool_usage
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    CREATE TRIGGER pool_usage_never_vanish BEFORE DELETE ON pool_usage
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    CREATE TRIGGER benches_never_change BEFORE UPDATE ON benches
    BEGIN SELECT RAISE(ABORT, 'benches are append-only'); END;
    CREATE TRIGGER benches_never_vanish BEFORE DELETE ON benches
    BEGIN SELECT RAISE(ABORT, 'benches are append-only'); END;
    "#,
    // 11: a run's events are read and numbered by `run_seq` (migration 7) and the
    // store's cursor is `seq`, the primary key: the index of migration 1 on
    // (run_id, seq) serves no query, and every event wrote it.
    r#"
    DROP INDEX IF EXISTS events_by_run;
    "#,
    // 12: pins, the router's record of each seating of a routed run, written in the
    // transaction of the turn it seats (hence the foreign key: no pin without its
    // turn). Append-only: a re-seating is a new row, the old one stays on record.
    r#"
    CREATE TABLE pins (
        seq        INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id     TEXT NOT NULL,
        turn       INTEGER NOT NULL,
        seat       TEXT NOT NULL,
        worker     TEXT NOT NULL,
        model      TEXT NOT NULL,
        family     TEXT NOT NULL,
        pool       TEXT NOT NULL,
        phase      TEXT NOT NULL,
        -- Engine clock, when the router seated the worker.
        at         INTEGER NOT NULL,
        -- JSON: every pool's used fraction at that moment.
        fractions  TEXT NOT NULL,
        -- JSON: the PinReason.
        reason     TEXT NOT NULL,
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn)
    ) STRICT;
    CREATE INDEX pins_by_run ON pins(run_id, seq);
    CREATE TRIGGER pins_never_change BEFORE UPDATE ON pins
    BEGIN SELECT RAISE(ABORT, 'pins are append-only'); END;
    CREATE TRIGGER pins_never_vanish BEFORE DELETE ON pins
    BEGIN SELECT RAISE(ABORT, 'pins are append-only'); END;
    "#,
    // 13: calls no committed turn carries, counted against the pool of whoever made
    // them (`Store::record_spend`): a judge's, a stopped or fenced-off turn's. Apart
    // from `pool_calls`, whose rows are keyed by (and refer to) their committed turn.
    r#"
    CREATE TABLE pool_spend (
        seq              INTEGER PRIMARY KEY AUTOINCREMENT,
        pool             TEXT NOT NULL,
        -- 'judge' (of the group `of_id`) or 'turn' (of the run `of_id`, turn `turn`).
        by_kind          TEXT NOT NULL,
        of_id            TEXT NOT NULL,
        turn             INTEGER,
        call             INTEGER NOT NULL,
        -- The call's start, engine clock: the window it counts in.
        at               INTEGER NOT NULL,
        tokens           INTEGER NOT NULL,
        cost_micro_usd   INTEGER NOT NULL,
        requests         INTEGER NOT NULL,
        exhausted        INTEGER NOT NULL,
        exhausted_until  INTEGER,
        recorded_at      INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX pool_spend_by_pool ON pool_spend(pool, at);
    CREATE TRIGGER pool_spend_never_change BEFORE UPDATE ON pool_spend
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    CREATE TRIGGER pool_spend_never_vanish BEFORE DELETE ON pool_spend
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    "#,
    // 14: each pin keeps the workers the router left out of its seating, and why (JSON,
    // `[PassedOver]`); NULL in pins written before, which did not record them.
    r#"
    ALTER TABLE pins ADD COLUMN excluded TEXT;
    "#,
    // 15: `pool_calls` keyed by an integer `seq` (its rowid, in the order rows were
    // committed, never renumbered) instead of (run_id, turn, call). That key was a second
    // B-tree every routed turn wrote for each call; no read needs it (a call is found by
    // its pool and start, which `pool_calls_by_pool` serves), and a committed call is
    // written once, with its turn, whose own key already refuses a second commit. The
    // floor's reading catches up by `seq`. Rows are copied in the order they were
    // written.
    r#"
    CREATE TABLE pool_calls_15 (
        seq              INTEGER PRIMARY KEY,
        pool             TEXT NOT NULL,
        run_id           TEXT NOT NULL,
        turn             INTEGER NOT NULL,
        call             INTEGER NOT NULL,
        at               INTEGER NOT NULL,
        tokens           INTEGER NOT NULL,
        cost_micro_usd   INTEGER NOT NULL,
        requests         INTEGER NOT NULL,
        exhausted        INTEGER NOT NULL,
        exhausted_until  INTEGER,
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn)
    ) STRICT;
    INSERT INTO pool_calls_15 (pool, run_id, turn, call, at, tokens, cost_micro_usd, requests,
                               exhausted, exhausted_until)
        SELECT pool, run_id, turn, call, at, tokens, cost_micro_usd, requests, exhausted,
               exhausted_until
        FROM pool_calls ORDER BY rowid;
    DROP TABLE pool_calls;
    ALTER TABLE pool_calls_15 RENAME TO pool_calls;
    CREATE INDEX pool_calls_by_pool ON pool_calls(pool, at);
    CREATE TRIGGER pool_calls_never_change BEFORE UPDATE ON pool_calls
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    CREATE TRIGGER pool_calls_never_vanish BEFORE DELETE ON pool_calls
    BEGIN SELECT RAISE(ABORT, 'pool usage is append-only'); END;
    "#,
    // 16: headroom held by turns in flight (`Store::try_reserve`), so that processes
    // seating at once cannot both spend the last of a pool. Live state, not a record: a
    // row goes when its turn commits (its calls count instead), is released, or
    // expires; the calls and spend tables stay the record of what was spent.
    // AUTOINCREMENT: an id is never given again, so a late release of an expired
    // reservation can never release another turn's.
    r#"
    CREATE TABLE pool_reservations (
        id              INTEGER PRIMARY KEY AUTOINCREMENT,
        pool            TEXT NOT NULL,
        run_id          TEXT NOT NULL,
        turn            INTEGER NOT NULL,
        lease_token     TEXT,
        at              INTEGER NOT NULL,
        tokens          INTEGER NOT NULL,
        cost_micro_usd  INTEGER NOT NULL,
        requests        INTEGER NOT NULL,
        created_at      INTEGER NOT NULL,
        expires_at      INTEGER NOT NULL
    ) STRICT;
    CREATE INDEX pool_reservations_by_pool ON pool_reservations(pool, expires_at);
    CREATE INDEX pool_reservations_by_lease ON pool_reservations(lease_token)
        WHERE lease_token IS NOT NULL;
    "#,
];

/// The schema version this build writes.
pub(crate) const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Brings the database up to `SCHEMA_VERSION`, or refuses one written by a newer baton.
pub(crate) fn migrate(conn: &mut Connection) -> Result<()> {
    if user_version(conn)? == SCHEMA_VERSION {
        return Ok(());
    }
    // IMMEDIATE takes the write lock before reading the version, so two processes
    // opening a fresh file do not both run migration 1.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found = user_version(&tx)?;
    if found > SCHEMA_VERSION {
        return fail(Error::SchemaTooNew {
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (from, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        tx.execute_batch(sql)?;
        // user_version lives in the database header and is written by this transaction.
        tx.pragma_update(None, "user_version", from as i64 + 1)?;
    }
    tx.commit()?;
    Ok(())
}

pub(crate) fn user_version(conn: &Connection) -> Result<i64> {
    Ok(conn.pragma_query_value(None, "user_version", |row| row.get(0))?)
}

#[cfg(test)]
mod tests {
    use super::super::Fail;
    use super::*;

    /// A database as the baton of schema `version` left it.
    fn at_version(version: usize) -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        for sql in &MIGRATIONS[..version] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", version as i64)
            .unwrap();
        conn
    }

    #[test]
    fn migrating_twice_is_a_no_op_and_newer_schemas_are_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);

        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        let err = migrate(&mut conn).unwrap_err();
        assert!(
            matches!(err, Fail::Store(Error::SchemaTooNew { found, supported })
                if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION),
            "{err:?}"
        );
    }

    /// A database of schema 9 (before pools) is upgraded through 10: its runs and turns are
    /// kept, its old calls count against no pool (none was recorded for them), and the
    /// new tables take rows and refuse to change them.
    #[test]
    fn a_schema_9_database_is_upgraded_to_pools() {
        let mut conn = at_version(9);
        conn.execute_batch(
            "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
             VALUES ('a', 'o', 'active', 1, 1, 1, '{}', '{}');
             INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at, record)
             VALUES ('a', 0, 'w', 'm', 'committed', 1, 2, '{}');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(count("SELECT count(*) FROM turns"), 1);
        assert_eq!(count("SELECT count(*) FROM pool_calls"), 0);
        conn.execute_batch(
            "INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd,
                                     requests, exhausted, exhausted_until)
             VALUES ('claude', 'a', 0, 0, 1, 10, 0, 1, 0, NULL);
             INSERT INTO pool_usage (pool, mode, at, tokens, cost_micro_usd, requests, note,
                                     recorded_by, recorded_at)
             VALUES ('claude', 'add', 1, 1, 1, 1, '', 'ada', 1);
             INSERT INTO benches (kind, target, benched, by, at) VALUES ('pool', 'claude', 1, 'ada', 1);",
        )
        .unwrap();
        // A call row must belong to a committed turn.
        assert!(
            conn.execute_batch(
                "INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd,
                                         requests, exhausted) VALUES ('c', 'a', 7, 0, 1, 1, 1, 1, 0)"
            )
            .is_err()
        );
        for table in ["pool_calls", "pool_usage", "benches"] {
            for sql in [
                format!("UPDATE {table} SET at = 5"),
                format!("DELETE FROM {table}"),
            ] {
                let err = conn.execute(&sql, []).unwrap_err().to_string();
                assert!(err.contains("append-only"), "{sql}: {err}");
            }
        }
    }

    /// A database of schema 11 (before pins) is upgraded through 12: its turns and pool
    /// usage are kept, and the pins table takes a pin of a committed turn, refuses one of
    /// a turn that does not exist, and refuses to change or lose a row.
    #[test]
    fn a_schema_11_database_is_upgraded_to_pins() {
        let mut conn = at_version(11);
        conn.execute_batch(
            "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
             VALUES ('a', 'o', 'active', 1, 1, 1, '{}', '{}');
             INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at, record)
             VALUES ('a', 0, 'w', 'm', 'committed', 1, 2, '{}');
             INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd,
                                     requests, exhausted, exhausted_until)
             VALUES ('claude', 'a', 0, 0, 1, 10, 0, 1, 0, NULL);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let count = |sql: &str| -> i64 { conn.query_row(sql, [], |r| r.get(0)).unwrap() };
        assert_eq!(count("SELECT count(*) FROM turns"), 1);
        assert_eq!(count("SELECT count(*) FROM pool_calls"), 1);
        assert_eq!(count("SELECT count(*) FROM pins"), 0);
        let pin = |turn: u32| {
            format!(
                "INSERT INTO pins (run_id, turn, seat, worker, model, family, pool, phase, at, fractions, reason)
                 VALUES ('a', {turn}, 'build.step', 'w', 'm', 'f', 'claude', 'step T1', 1, '{{}}', '{{\"kind\":\"at_phase_start\"}}')"
            )
        };
        conn.execute_batch(&pin(0)).unwrap();
        assert!(
            conn.execute_batch(&pin(7)).is_err(),
            "a pin without its turn"
        );
        for sql in ["UPDATE pins SET at = 5", "DELETE FROM pins"] {
            let err = conn.execute(sql, []).unwrap_err().to_string();
            assert!(err.contains("append-only"), "{sql}: {err}");
        }
    }

    /// A database of schema 13 (pins without their exclusions) is upgraded through 14:
    /// its pins are kept, their exclusions not recorded (NULL), and stay append-only.
    #[test]
    fn a_schema_13_pin_is_kept_with_no_exclusions() {
        let mut conn = at_version(13);
        conn.execute_batch(
            "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
             VALUES ('a', 'o', 'active', 1, 1, 1, '{}', '{}');
             INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at, record)
             VALUES ('a', 0, 'w', 'm', 'committed', 1, 2, '{}');
             INSERT INTO pins (run_id, turn, seat, worker, model, family, pool, phase, at, fractions, reason)
             VALUES ('a', 0, 'build.step', 'w', 'm', 'f', 'claude', 'step T1', 1, '{}', '{\"kind\":\"at_phase_start\"}');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let excluded: Option<String> = conn
            .query_row("SELECT excluded FROM pins", [], |r| r.get(0))
            .unwrap();
        assert_eq!(excluded, None);
        let err = conn
            .execute("UPDATE pins SET excluded = '[1]'", [])
            .unwrap_err()
            .to_string();
        assert!(err.contains("append-only"), "{err}");
    }

    /// A database of schema 14 is upgraded through 15: its pool calls are kept in the
    /// order they were committed, numbered by `seq` from 1, found by pool, and still
    /// append-only and tied to their turn.
    #[test]
    fn a_schema_14_databases_pool_calls_are_kept_in_order_under_seq() {
        let mut conn = at_version(14);
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        conn.execute_batch(
            "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
             VALUES ('a', 'o', 'active', 2, 1, 1, '{}', '{}');
             INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at, record)
             VALUES ('a', 0, 'w', 'm', 'committed', 1, 2, '{}'), ('a', 1, 'w', 'm', 'committed', 3, 4, '{}');
             INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd,
                                     requests, exhausted, exhausted_until)
             VALUES ('codex', 'a', 1, 0, 3, 7, 0, 1, 1, 99), ('claude', 'a', 0, 0, 1, 10, 5, 1, 0, NULL);",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        assert_eq!(user_version(&conn).unwrap(), SCHEMA_VERSION);
        let rows: Vec<(i64, String, i64, i64, Option<i64>)> = conn
            .prepare("SELECT seq, pool, turn, tokens, exhausted_until FROM pool_calls ORDER BY seq")
            .unwrap()
            .query_map([], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .unwrap()
            .map(Result::unwrap)
            .collect();
        assert_eq!(
            rows,
            [
                (1, "codex".to_string(), 1, 7, Some(99)),
                (2, "claude".to_string(), 0, 10, None)
            ]
        );
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT 1 FROM pool_calls WHERE pool = 'claude' AND at = 1",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("pool_calls_by_pool"), "{plan}");
        for sql in ["UPDATE pool_calls SET tokens = 0", "DELETE FROM pool_calls"] {
            let err = conn.execute(sql, []).unwrap_err().to_string();
            assert!(err.contains("append-only"), "{sql}: {err}");
        }
        let orphan = conn.execute_batch(
            "INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd,
                                     requests, exhausted, exhausted_until)
             VALUES ('claude', 'a', 7, 0, 1, 1, 0, 1, 0, NULL)",
        );
        assert!(orphan.is_err(), "a call without its turn");
    }

    /// A database written before events had per-run numbers: its rows are numbered in
    /// the order they were written, each run from 1, and still load.
    #[test]
    fn events_written_before_per_run_numbers_are_numbered_and_load() {
        let mut conn = at_version(5);
        for run in ["a", "b"] {
            conn.execute(
                "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
                 VALUES (?1, 'o', 'active', 0, 1, 1, '{}', '{}')",
                [run],
            )
            .unwrap();
        }
        // As the baton of schema 5 wrote them: interleaved runs, the old JSON shape.
        let rows = [
            (
                "a",
                r#"{"run_id":"a","at":1,"type":"run_created","objective":"o","steps":1}"#,
            ),
            (
                "b",
                r#"{"run_id":"b","at":1,"type":"run_created","objective":"o","steps":1}"#,
            ),
            (
                "a",
                r#"{"run_id":"a","turn":0,"at":2,"type":"turn_started","worker":"w","model":"m","assignment":"s1"}"#,
            ),
            (
                "a",
                r#"{"run_id":"a","turn":0,"at":3,"type":"turn_committed","worker":"w","status":"committed","changes":2}"#,
            ),
            (
                "b",
                r#"{"run_id":"b","at":4,"type":"run_blocked","question":"q"}"#,
            ),
        ];
        for (run, body) in rows {
            conn.execute(
                "INSERT INTO events (run_id, turn, at, type, body) VALUES (?1, NULL, 1, 'x', ?2)",
                [run, body],
            )
            .unwrap();
        }
        migrate(&mut conn).unwrap();
        let a = crate::sqlite::read::events(&conn, &baton_core::ids::RunId("a".into()), 0).unwrap();
        let b = crate::sqlite::read::events(&conn, &baton_core::ids::RunId("b".into()), 0).unwrap();
        assert_eq!(a.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(b.iter().map(|e| e.seq).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(a[2].event.kind.name(), "turn_committed");
        // Still append-only after the migration lifted the trigger for its one update.
        assert!(conn.execute("UPDATE events SET body = '{}'", []).is_err());
    }

    /// Every way the store reads the events is served by an index that is kept, so
    /// the one dropped by migration 11 was written for nothing.
    #[test]
    fn the_events_are_read_through_the_indexes_that_are_kept() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        let plan = |sql: &str| -> String {
            let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let rows = stmt
                .query_map([], |r| r.get::<_, String>(3))
                .unwrap()
                .map(|r| r.unwrap())
                .collect::<Vec<_>>();
            rows.join("; ")
        };
        for (sql, index) in [
            (
                "SELECT run_seq, body FROM events WHERE run_id = 'r' AND run_seq > 0 ORDER BY run_seq",
                "events_by_run_seq",
            ),
            (
                "SELECT coalesce(max(run_seq), 0) FROM events WHERE run_id = 'r'",
                "events_by_run_seq",
            ),
            (
                "SELECT seq, run_seq, run_id, body FROM events WHERE seq > 0 ORDER BY seq LIMIT 5",
                "INTEGER PRIMARY KEY",
            ),
        ] {
            let plan = plan(sql);
            assert!(
                plan.contains(index) && !plan.contains("SCAN"),
                "{sql}: {plan}"
            );
        }
        let indexes: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND tbl_name = 'events'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 1, "events_by_run_seq alone");
    }
}
