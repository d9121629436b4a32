//! The write paths: creating a run, committing a turn (fenced), updating a run.
//!
//! Values are encoded to JSON before the connection is locked (`crate::codec`), so the
//! lock and the write transaction cover only database work.

use baton_core::ids::{RunId, Timestamp};
use rusqlite::{Connection, OptionalExtension, params};

use super::{Result, fail};
use crate::codec::{EncodedEvent, EncodedRecord, EncodedRun, EncodedTurn};
use crate::{Error, RunStatus, WorkerHold};

pub(super) fn create_run(tx: &Connection, run: &EncodedRun<'_>) -> Result<()> {
    let info = run.info;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            info.id.0,
            info.objective,
            info.status.as_str(),
            run.turns,
            info.created_at.0,
            info.updated_at.0,
            run.config,
            run.header,
        ])?;
    if inserted == 0 {
        return fail(Error::RunExists {
            run: info.id.0.clone(),
        });
    }
    upsert_records(tx, &info.id, None, &run.records)?;
    insert_events(tx, &run.events).map(drop)
}

/// One transaction: the fence, then the turn row, its outputs, its changed records (both
/// as current versions and as the turn's delta) and its events. Any failure returns
/// before the caller commits, so the transaction rolls back and nothing is written.
pub(super) fn commit_turn(tx: &Connection, turn: &EncodedTurn<'_>) -> Result<Vec<u64>> {
    let commit = turn.commit;
    let rec = &commit.record;
    let run = &rec.run_id;
    // A job's turn commits only while its worker still holds the job's lease, and a
    // run's only while its process still holds the run's.
    if let Some(fence) = &commit.lease {
        super::jobs::check_fence(tx, fence)?;
    }
    if let Some(token) = &commit.run_lease {
        check_run_lease(tx, run, token)?;
    }
    let fenced = tx
        .prepare_cached(
            "UPDATE runs SET turns = turns + 1, header = ?1, status = ?2, updated_at = ?3
             WHERE id = ?4 AND turns = ?5",
        )?
        .execute(params![
            turn.header,
            commit.status.as_str(),
            rec.finished_at.0,
            run.0,
            rec.turn,
        ])?;
    if fenced == 0 {
        let committed: Option<u32> = tx
            .prepare_cached("SELECT turns FROM runs WHERE id = ?1")?
            .query_row([&run.0], |row| row.get(0))
            .optional()?;
        return fail(match committed {
            None => Error::RunNotFound {
                prefix: run.0.clone(),
            },
            Some(n) => Error::TurnConflict {
                run: run.0.clone(),
                turn: rec.turn,
                reason: format!("the run has {n} committed turns, so the next turn is {n}"),
            },
        });
    }

    tx.prepare_cached(
        "INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at, record)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        run.0,
        rec.turn,
        rec.worker.as_str(),
        rec.model,
        rec.status.as_str(),
        rec.started_at.0,
        rec.finished_at.0,
        turn.record,
    ])?;

    let mut output = tx.prepare_cached(
        "INSERT INTO call_outputs (run_id, turn, call, output) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for (call, text) in &turn.outputs {
        output.execute(params![run.0, rec.turn, call, text])?;
    }

    upsert_records(tx, run, Some(rec.turn), &turn.changes)?;
    // A plain INSERT: a turn that lists one record twice is a bug upstream, and the
    // primary key turns it into a failed (rolled back) commit.
    let mut change = tx.prepare_cached(
        "INSERT INTO record_changes (run_id, turn, kind, ordinal, id, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for c in &turn.changes {
        change.execute(params![run.0, rec.turn, c.kind, c.ordinal, c.id, c.body])?;
    }

    put_holds(tx, run, &commit.holds)?;
    if let Some(pool) = &commit.pool {
        super::pools::insert_calls(tx, pool, rec)?;
    }
    // The turn's calls now count in place of what it held, in one transaction.
    if let Some(id) = commit.reservation {
        super::reserve::release(tx, id)?;
    }
    super::pools::insert_pins(tx, run, rec.turn, &commit.pins)?;
    insert_events(tx, &turn.events)
}

/// Records `holds` (the newest per worker wins).
pub(super) fn put_holds(tx: &Connection, run: &RunId, holds: &[WorkerHold]) -> Result<()> {
    let mut hold = tx.prepare_cached(
        "INSERT INTO worker_holds (run_id, worker, not_before, asked_ms) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (run_id, worker) DO UPDATE SET not_before = ?3, asked_ms = ?4",
    )?;
    for h in holds {
        // Clamped: SQLite integers are i64, and a delay is bounded long before that.
        let asked = i64::try_from(h.asked_ms).unwrap_or(i64::MAX);
        hold.execute(params![run.0, h.worker.as_str(), h.not_before.0, asked])?;
    }
    Ok(())
}

pub(super) fn update_run(
    tx: &Connection,
    run: &RunId,
    status: RunStatus,
    events: &[EncodedEvent],
) -> Result<Vec<u64>> {
    // Stamps are the engine's time (the database's clock decides leases only): the run
    // was last updated when its newest event happened; without events the time stays.
    let at = events.iter().map(|e| e.at).max();
    let updated = tx
        .prepare_cached(
            "UPDATE runs SET status = ?1, updated_at = max(updated_at, coalesce(?2, updated_at))
             WHERE id = ?3",
        )?
        .execute(params![status.as_str(), at, run.0])?;
    if updated == 0 {
        return fail(Error::RunNotFound {
            prefix: run.0.clone(),
        });
    }
    insert_events(tx, events)
}

pub(super) fn append_events(
    tx: &Connection,
    run: &RunId,
    events: &[EncodedEvent],
) -> Result<Vec<u64>> {
    if let Some(e) = events.iter().find(|e| e.run_id != run.0) {
        return fail(Error::Corrupt {
            what: format!("event for run {run}"),
            detail: format!("it names run {}", e.run_id),
        });
    }
    insert_events(tx, events)
}

pub(super) fn set_run_config(
    tx: &Connection,
    run: &RunId,
    config: &str,
    events: &[EncodedEvent],
) -> Result<Vec<u64>> {
    let at = events.iter().map(|e| e.at).max();
    let updated = tx
        .prepare_cached(
            "UPDATE runs SET config = ?1, updated_at = max(updated_at, coalesce(?2, updated_at))
             WHERE id = ?3",
        )?
        .execute(params![config, at, run.0])?;
    if updated == 0 {
        return fail(Error::RunNotFound {
            prefix: run.0.clone(),
        });
    }
    insert_events(tx, events)
}

fn upsert_records(
    tx: &Connection,
    run: &RunId,
    turn: Option<u32>,
    records: &[EncodedRecord],
) -> Result<()> {
    let mut upsert = tx.prepare_cached(
        "INSERT INTO records (run_id, kind, ordinal, id, body, turn)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (run_id, kind, ordinal)
         DO UPDATE SET id = excluded.id, body = excluded.body, turn = excluded.turn",
    )?;
    for r in records {
        upsert.execute(params![run.0, r.kind, r.ordinal, r.id, r.body, turn])?;
    }
    Ok(())
}

/// A run's last event number. `+?1`, not `?1`: on a bare parameter in an equality the
/// planner's truth-probability guess reads the bound value (is it 0 or 1?), which marks
/// the statement to be re-prepared whenever its bindings are cleared, and rusqlite's
/// statement cache clears them each time it takes a statement back: every turn parsed
/// and planned this query afresh (about 45,000 instructions). The index serves it alike.
pub(super) const LAST_RUN_SEQ: &str =
    "SELECT coalesce(max(run_seq), 0) FROM events WHERE run_id = +?1";

/// Events are stored under their own run id; the foreign key refuses an event for a run
/// that does not exist (and with it the whole transaction). Each gets the next number
/// of its run, read and written in this transaction, so a run's numbers have no gaps
/// and a rolled-back write takes none (a global sequence would lose some). A run's last
/// number is read once per write, not once per event: the write transaction holds the
/// database's only write lock, so nobody else numbers events meanwhile (and the unique
/// index refuses a number taken twice).
fn insert_events(tx: &Connection, events: &[EncodedEvent]) -> Result<Vec<u64>> {
    let mut last_of = tx.prepare_cached(LAST_RUN_SEQ)?;
    let mut insert = tx.prepare_cached(
        "INSERT INTO events (run_id, turn, at, type, body, run_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    // The runs written to and each one's last number; a write names one run or a few.
    let mut last: Vec<(&str, i64)> = Vec::new();
    let mut seqs = Vec::with_capacity(events.len());
    for e in events {
        let seq = match last.iter_mut().find(|(run, _)| *run == e.run_id) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                let n = last_of.query_row([&e.run_id], |r| r.get::<_, i64>(0))? + 1;
                last.push((&e.run_id, n));
                n
            }
        };
        insert.execute(params![e.run_id, e.turn, e.at, e.kind, e.body, seq])?;
        seqs.push(seq as u64);
    }
    Ok(seqs)
}

/// Fails with `RunLeaseLost` unless `token` holds the run's lease.
pub(super) fn check_run_lease(tx: &Connection, run: &RunId, token: &str) -> Result<()> {
    let held: Option<Option<String>> = tx
        .prepare_cached("SELECT lease_token FROM runs WHERE id = ?1")?
        .query_row([&run.0], |r| r.get(0))
        .optional()?;
    match held {
        None => fail(Error::RunNotFound {
            prefix: run.0.clone(),
        }),
        Some(Some(t)) if t == token => Ok(()),
        Some(_) => fail(Error::RunLeaseLost {
            run: run.0.clone(),
            reason: "another process took the run over after this one's lease expired".into(),
        }),
    }
}

pub(super) fn try_lease_run(
    tx: &Connection,
    run: &RunId,
    owner: &str,
    token: &str,
    db_now: i64,
    lease_ms: i64,
    take_over: bool,
) -> Result<std::result::Result<(), crate::LeaseHolder>> {
    let taken = tx
        .prepare_cached(
            "UPDATE runs SET lease_token = ?1, lease_owner = ?2, lease_expires_at = ?3
             WHERE id = ?4 AND (lease_token IS NULL OR lease_expires_at < ?5 OR ?6)",
        )?
        .execute(params![
            token,
            owner,
            db_now.saturating_add(lease_ms),
            run.0,
            db_now,
            take_over
        ])?;
    if taken == 1 {
        return Ok(Ok(()));
    }
    let holder: Option<(Option<String>, Option<i64>)> = tx
        .prepare_cached("SELECT lease_owner, lease_expires_at FROM runs WHERE id = ?1")?
        .query_row([&run.0], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match holder {
        None => fail(Error::RunNotFound {
            prefix: run.0.clone(),
        }),
        Some((owner, expires)) => Ok(Err(crate::LeaseHolder {
            owner: owner.unwrap_or_default(),
            expires_at: Timestamp(expires.unwrap_or(0)),
        })),
    }
}

pub(super) fn renew_run_lease(
    tx: &Connection,
    run: &RunId,
    token: &str,
    db_now: i64,
    lease_ms: i64,
) -> Result<()> {
    check_run_lease(tx, run, token)?;
    tx.prepare_cached("UPDATE runs SET lease_expires_at = ?1 WHERE id = ?2 AND lease_token = ?3")?
        .execute(params![db_now.saturating_add(lease_ms), run.0, token])?;
    Ok(())
}

pub(super) fn release_run_lease(tx: &Connection, run: &RunId, token: &str) -> Result<()> {
    tx.prepare_cached(
        "UPDATE runs SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
         WHERE id = ?1 AND lease_token = ?2",
    )?
    .execute(params![run.0, token])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use rusqlite::{Connection, StatementStatus};

    /// The query each turn's events run is planned once: used again through the
    /// statement cache, it is not re-prepared, and it still reads the run's index.
    #[test]
    fn a_runs_last_event_number_is_not_planned_again_at_each_turn() {
        let mut conn = Connection::open_in_memory().unwrap();
        super::super::migrations::migrate(&mut conn).unwrap();
        for run in ["a", "b", "a"] {
            let mut last = conn.prepare_cached(super::LAST_RUN_SEQ).unwrap();
            let n: i64 = last.query_row([run], |r| r.get(0)).unwrap();
            assert_eq!(n, 0);
        }
        let last = conn.prepare_cached(super::LAST_RUN_SEQ).unwrap();
        assert_eq!(last.get_status(StatementStatus::RePrepare), 0);
        drop(last);
        let plan: String = conn
            .query_row(
                &format!("EXPLAIN QUERY PLAN {}", super::LAST_RUN_SEQ),
                ["a"],
                |r| r.get(3),
            )
            .unwrap();
        assert!(
            plan.contains("INDEX events_by_run_seq (run_id=?)"),
            "{plan}"
        );
    }
}
