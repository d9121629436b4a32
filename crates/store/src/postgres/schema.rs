//! The PostgreSQL schema, versioned like SQLite's: `MIGRATIONS[i]` takes a schema from
//! version `i` to `i + 1`, released entries are never edited, and the version lives in
//! the one-row table `baton_schema`. Migrations run under an advisory lock, so two
//! processes opening a fresh schema at once do not both create it.
//!
//! Version 1 is the whole of SQLite's schema at its version 15 (and version 2 its 16), written for PostgreSQL:
//! integers are `BIGINT` (milliseconds, counts, ordinals), JSON is `TEXT` (kept byte for
//! byte, so a run moves between the backends unchanged; `jsonb` would reorder keys),
//! keys compare bytewise (`COLLATE "C"`, as SQLite's do), and the append-only tables
//! refuse an update or a delete by trigger, with the same messages.

use postgres::Transaction;

use super::{Result, fail};
use crate::Error;

const MIGRATIONS: &[&str] = &[
    // 1: runs, records, turns and their deltas, outputs, events, jobs, holds, cancel
    // requests, judgements, pools (calls, spend, declared usage, benches) and pins.
    r#"
    CREATE FUNCTION baton_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION '%', TG_ARGV[0]; END $$;

    CREATE TABLE runs (
        id                TEXT COLLATE "C" PRIMARY KEY,
        objective         TEXT NOT NULL,
        status            TEXT NOT NULL,
        turns             BIGINT NOT NULL,
        created_at        BIGINT NOT NULL,
        updated_at        BIGINT NOT NULL,
        config            TEXT NOT NULL,
        header            TEXT NOT NULL,
        lease_token       TEXT,
        lease_owner       TEXT,
        lease_expires_at  BIGINT
    );
    CREATE INDEX runs_by_created ON runs (created_at DESC, id DESC);

    CREATE TABLE records (
        run_id   TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
        kind     TEXT COLLATE "C" NOT NULL,
        ordinal  BIGINT NOT NULL,
        id       TEXT NOT NULL,
        body     TEXT NOT NULL,
        turn     BIGINT,
        PRIMARY KEY (run_id, kind, ordinal)
    );

    CREATE TABLE turns (
        run_id       TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
        turn         BIGINT NOT NULL,
        worker       TEXT NOT NULL,
        model        TEXT NOT NULL,
        status       TEXT NOT NULL,
        started_at   BIGINT NOT NULL,
        finished_at  BIGINT NOT NULL,
        record       TEXT NOT NULL,
        PRIMARY KEY (run_id, turn)
    );

    CREATE TABLE record_changes (
        run_id   TEXT COLLATE "C" NOT NULL,
        turn     BIGINT NOT NULL,
        kind     TEXT COLLATE "C" NOT NULL,
        ordinal  BIGINT NOT NULL,
        id       TEXT NOT NULL,
        body     TEXT NOT NULL,
        PRIMARY KEY (run_id, turn, kind, ordinal),
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn)
    );

    CREATE TABLE call_outputs (
        run_id  TEXT COLLATE "C" NOT NULL,
        turn    BIGINT NOT NULL,
        call    BIGINT NOT NULL,
        output  TEXT NOT NULL,
        PRIMARY KEY (run_id, turn, call),
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn)
    );

    -- `seq` is the store-wide cursor: keys are taken under the event lock (see
    -- `runs::insert_events`), so they grow in commit order. `run_seq` numbers each
    -- run's events without gaps.
    CREATE TABLE events (
        seq      BIGSERIAL PRIMARY KEY,
        run_id   TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
        turn     BIGINT,
        at       BIGINT NOT NULL,
        type     TEXT NOT NULL,
        body     TEXT NOT NULL,
        run_seq  BIGINT NOT NULL,
        UNIQUE (run_id, run_seq)
    );

    CREATE TABLE jobs (
        id                TEXT COLLATE "C" PRIMARY KEY,
        grp               TEXT COLLATE "C" NOT NULL,
        status            TEXT NOT NULL,
        spec              TEXT NOT NULL,
        run_id            TEXT COLLATE "C",
        attempts          BIGINT NOT NULL DEFAULT 0,
        lease_token       TEXT,
        lease_owner       TEXT,
        lease_expires_at  BIGINT,
        created_at        BIGINT NOT NULL,
        updated_at        BIGINT NOT NULL,
        outbox            TEXT,
        error             TEXT,
        judgement         TEXT
    );
    CREATE INDEX jobs_claimable ON jobs (status, created_at, id);
    CREATE INDEX jobs_by_group ON jobs (grp);
    CREATE INDEX jobs_by_run ON jobs (run_id);

    CREATE TABLE worker_holds (
        run_id      TEXT COLLATE "C" NOT NULL REFERENCES runs(id),
        worker      TEXT COLLATE "C" NOT NULL,
        not_before  BIGINT NOT NULL,
        asked_ms    BIGINT NOT NULL,
        PRIMARY KEY (run_id, worker)
    );

    CREATE TABLE cancel_requests (
        kind          TEXT COLLATE "C" NOT NULL,
        target        TEXT COLLATE "C" NOT NULL,
        lease_token   TEXT,
        requested_at  BIGINT NOT NULL,
        PRIMARY KEY (kind, target)
    );

    CREATE TABLE judgements (
        seq          BIGSERIAL PRIMARY KEY,
        grp          TEXT COLLATE "C" NOT NULL,
        outcome      TEXT NOT NULL,
        recorded_at  BIGINT NOT NULL,
        body         TEXT NOT NULL
    );
    CREATE INDEX judgements_by_group ON judgements (grp, seq);

    CREATE TABLE pool_calls (
        seq              BIGSERIAL PRIMARY KEY,
        pool             TEXT COLLATE "C" NOT NULL,
        run_id           TEXT COLLATE "C" NOT NULL,
        turn             BIGINT NOT NULL,
        call             BIGINT NOT NULL,
        at               BIGINT NOT NULL,
        tokens           BIGINT NOT NULL,
        cost_micro_usd   BIGINT NOT NULL,
        requests         BIGINT NOT NULL,
        exhausted        BOOLEAN NOT NULL,
        exhausted_until  BIGINT,
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn)
    );
    CREATE INDEX pool_calls_by_pool ON pool_calls (pool, at);

    CREATE TABLE pool_spend (
        seq              BIGSERIAL PRIMARY KEY,
        pool             TEXT COLLATE "C" NOT NULL,
        by_kind          TEXT NOT NULL,
        of_id            TEXT COLLATE "C" NOT NULL,
        turn             BIGINT,
        call             BIGINT NOT NULL,
        at               BIGINT NOT NULL,
        tokens           BIGINT NOT NULL,
        cost_micro_usd   BIGINT NOT NULL,
        requests         BIGINT NOT NULL,
        exhausted        BOOLEAN NOT NULL,
        exhausted_until  BIGINT,
        recorded_at      BIGINT NOT NULL
    );
    CREATE INDEX pool_spend_by_pool ON pool_spend (pool, at);

    CREATE TABLE pool_usage (
        seq             BIGSERIAL PRIMARY KEY,
        pool            TEXT COLLATE "C" NOT NULL,
        mode            TEXT NOT NULL,
        at              BIGINT NOT NULL,
        tokens          BIGINT NOT NULL,
        cost_micro_usd  BIGINT NOT NULL,
        requests        BIGINT NOT NULL,
        note            TEXT NOT NULL,
        recorded_by     TEXT NOT NULL,
        recorded_at     BIGINT NOT NULL
    );
    CREATE INDEX pool_usage_by_pool ON pool_usage (pool, at);

    CREATE TABLE benches (
        seq      BIGSERIAL PRIMARY KEY,
        kind     TEXT COLLATE "C" NOT NULL,
        target   TEXT COLLATE "C" NOT NULL,
        benched  BOOLEAN NOT NULL,
        by       TEXT NOT NULL,
        at       BIGINT NOT NULL,
        reason   TEXT
    );
    CREATE INDEX benches_by_target ON benches (kind, target, seq);

    CREATE TABLE pins (
        seq        BIGSERIAL PRIMARY KEY,
        run_id     TEXT COLLATE "C" NOT NULL,
        turn       BIGINT NOT NULL,
        seat       TEXT COLLATE "C" NOT NULL,
        worker     TEXT NOT NULL,
        model      TEXT NOT NULL,
        family     TEXT NOT NULL,
        pool       TEXT COLLATE "C" NOT NULL,
        phase      TEXT NOT NULL,
        at         BIGINT NOT NULL,
        fractions  TEXT NOT NULL,
        reason     TEXT NOT NULL,
        excluded   TEXT,
        FOREIGN KEY (run_id, turn) REFERENCES turns(run_id, turn)
    );
    CREATE INDEX pins_by_run ON pins (run_id, seq);

    CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('events are append-only');
    CREATE TRIGGER turns_never_change BEFORE UPDATE ON turns
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('committed turns are never rewritten');
    CREATE TRIGGER turns_never_vanish BEFORE DELETE ON turns
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('committed turns are never deleted');
    CREATE TRIGGER record_changes_never_change BEFORE UPDATE ON record_changes
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('committed turns are never rewritten');
    CREATE TRIGGER record_changes_never_vanish BEFORE DELETE ON record_changes
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('committed turns are never deleted');
    CREATE TRIGGER call_outputs_never_change BEFORE UPDATE ON call_outputs
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('committed turns are never rewritten');
    CREATE TRIGGER call_outputs_never_vanish BEFORE DELETE ON call_outputs
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('committed turns are never deleted');
    CREATE TRIGGER runs_never_vanish BEFORE DELETE ON runs
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('runs are never deleted: their turns and events are append-only');
    CREATE TRIGGER judgements_append_only BEFORE UPDATE OR DELETE ON judgements
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('judgements are append-only');
    CREATE TRIGGER pool_calls_append_only BEFORE UPDATE OR DELETE ON pool_calls
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('pool usage is append-only');
    CREATE TRIGGER pool_spend_append_only BEFORE UPDATE OR DELETE ON pool_spend
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('pool usage is append-only');
    CREATE TRIGGER pool_usage_append_only BEFORE UPDATE OR DELETE ON pool_usage
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('pool usage is append-only');
    CREATE TRIGGER benches_append_only BEFORE UPDATE OR DELETE ON benches
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('benches are append-only');
    CREATE TRIGGER pins_append_only BEFORE UPDATE OR DELETE ON pins
        FOR EACH ROW EXECUTE FUNCTION baton_refuse('pins are append-only');
    "#,
    // 2 (SQLite's 16): headroom held by turns in flight (`Store::try_reserve`). Live
    // state, not a record: a row goes when its turn commits, is released, or expires.
    // Reservers of one pool are serialised by an advisory lock on the pool's key, not
    // by this table, so it needs no per-pool row.
    r#"
    CREATE TABLE pool_reservations (
        id              BIGSERIAL PRIMARY KEY,
        pool            TEXT COLLATE "C" NOT NULL,
        run_id          TEXT COLLATE "C" NOT NULL,
        turn            BIGINT NOT NULL,
        lease_token     TEXT,
        at              BIGINT NOT NULL,
        tokens          BIGINT NOT NULL,
        cost_micro_usd  BIGINT NOT NULL,
        requests        BIGINT NOT NULL,
        created_at      BIGINT NOT NULL,
        expires_at      BIGINT NOT NULL
    );
    CREATE INDEX pool_reservations_by_pool ON pool_reservations (pool, expires_at);
    CREATE INDEX pool_reservations_by_lease ON pool_reservations (lease_token)
        WHERE lease_token IS NOT NULL;
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// What the schema holds before any migration.
pub(crate) enum Found {
    /// No schema, or one with no tables: baton creates its own.
    Empty,
    /// Baton's, at this version.
    Baton(i64),
    /// Tables baton did not create, named.
    Foreign(String),
}

/// What `schema` holds, read in `tx`. The tables are read from `pg_catalog`: the same
/// question put to `information_schema.tables` took 5-9 ms of the 11 ms a fresh
/// process spent opening the store and loading a 100-turn run (its views check
/// privileges on every relation); this takes about 0.3 ms. It also names tables the
/// user may not read, which are as foreign as the others.
pub(crate) fn found(tx: &mut Transaction<'_>, schema: &str) -> Result<Found> {
    let tables: Vec<String> = tx
        .query(
            "SELECT c.relname::text FROM pg_catalog.pg_class c
             JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'v', 'f', 'p')
             ORDER BY c.relname",
            &[&schema],
        )?
        .iter()
        .map(|r| r.try_get(0))
        .collect::<std::result::Result<_, _>>()?;
    if tables.is_empty() {
        return Ok(Found::Empty);
    }
    if !tables.iter().any(|t| t == "baton_schema") {
        let mut named = tables;
        named.truncate(5);
        return Ok(Found::Foreign(format!(
            "its schema \"{schema}\" holds tables baton did not create: {}",
            named.join(", ")
        )));
    }
    let version: Option<i64> = tx
        .query_opt("SELECT version FROM baton_schema", &[])?
        .map(|r| r.try_get(0))
        .transpose()?;
    Ok(Found::Baton(version.unwrap_or(0)))
}

/// Brings `schema` up to `SCHEMA_VERSION` (creating it when it does not exist), or
/// refuses one a newer baton wrote or another application owns. Returns the version it
/// found, so a caller can say what it did.
pub(crate) fn migrate(tx: &mut Transaction<'_>, schema: &str) -> Result<i64> {
    // Held to the end of the transaction: whoever migrates second finds it done.
    tx.execute(
        "SELECT pg_advisory_xact_lock(hashtext('baton.migrate.' || $1::text))",
        &[&schema],
    )?;
    let from = match found(tx, schema)? {
        Found::Foreign(detail) => {
            return fail(Error::NotBaton {
                path: String::new(),
                detail,
            });
        }
        Found::Empty => {
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {0};
                 SET LOCAL search_path TO {0};
                 CREATE TABLE baton_schema (version BIGINT NOT NULL);
                 INSERT INTO baton_schema VALUES (0);",
                quote_ident(schema)
            ))?;
            0
        }
        Found::Baton(version) => version,
    };
    if from > SCHEMA_VERSION {
        return fail(Error::SchemaTooNew {
            found: from,
            supported: SCHEMA_VERSION,
        });
    }
    if from == SCHEMA_VERSION {
        return Ok(from);
    }
    tx.batch_execute(&format!("SET LOCAL search_path TO {}", quote_ident(schema)))?;
    for sql in MIGRATIONS.iter().skip(from.max(0) as usize) {
        tx.batch_execute(sql)?;
    }
    tx.execute("UPDATE baton_schema SET version = $1", &[&SCHEMA_VERSION])?;
    Ok(from)
}

/// `name` as a PostgreSQL identifier, quoted.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
