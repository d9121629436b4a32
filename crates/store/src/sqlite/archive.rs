//! A run's archive read from SQLite's tables, and an archive written into them (see
//! `crate::archive`). Every column is read and written as stored: JSON as its text.
//!
//! Statements here are prepared afresh, not through the connection's cache: a process
//! archives or imports a run once, and they would push the turn's statements out.

use baton_core::ids::RunId;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{Result, fail};
use crate::Error;
use crate::archive::{
    ArchivedChange, ArchivedEvent, ArchivedHold, ArchivedJob, ArchivedOutput, ArchivedPin,
    ArchivedPoolCall, ArchivedRecord, ArchivedRun, ArchivedSpend, ArchivedTurn, Imported,
    RunArchive,
};

/// The rows of `run` in one table, in `order`, each made by `row`.
fn rows<T>(
    conn: &Connection,
    sql: &str,
    run: &RunId,
    row: impl FnMut(&Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    Ok(conn
        .prepare(sql)?
        .query_map([&run.0], row)?
        .collect::<rusqlite::Result<_>>()?)
}

pub(super) fn archive(conn: &Connection, run: &RunId) -> Result<RunArchive> {
    let head = conn
        .prepare(
            "SELECT id, objective, status, turns, created_at, updated_at, config, header
             FROM runs WHERE id = ?1",
        )?
        .query_row([&run.0], |r| {
            Ok(ArchivedRun {
                id: r.get(0)?,
                objective: r.get(1)?,
                status: r.get(2)?,
                turns: r.get(3)?,
                created_at: r.get(4)?,
                updated_at: r.get(5)?,
                config: r.get(6)?,
                header: r.get(7)?,
            })
        })
        .optional()?;
    let Some(head) = head else {
        return fail(Error::RunNotFound {
            prefix: run.0.clone(),
        });
    };
    let records = rows(
        conn,
        "SELECT kind, ordinal, id, body, turn FROM records WHERE run_id = ?1
         ORDER BY kind, ordinal",
        run,
        |r| {
            Ok(ArchivedRecord {
                kind: r.get(0)?,
                ordinal: r.get(1)?,
                id: r.get(2)?,
                body: r.get(3)?,
                turn: r.get(4)?,
            })
        },
    )?;
    let turns = rows(
        conn,
        "SELECT turn, worker, model, status, started_at, finished_at, record FROM turns
         WHERE run_id = ?1 ORDER BY turn",
        run,
        |r| {
            Ok(ArchivedTurn {
                turn: r.get(0)?,
                worker: r.get(1)?,
                model: r.get(2)?,
                status: r.get(3)?,
                started_at: r.get(4)?,
                finished_at: r.get(5)?,
                record: r.get(6)?,
            })
        },
    )?;
    let record_changes = rows(
        conn,
        "SELECT turn, kind, ordinal, id, body FROM record_changes WHERE run_id = ?1
         ORDER BY turn, kind, ordinal",
        run,
        |r| {
            Ok(ArchivedChange {
                turn: r.get(0)?,
                kind: r.get(1)?,
                ordinal: r.get(2)?,
                id: r.get(3)?,
                body: r.get(4)?,
            })
        },
    )?;
    let call_outputs = rows(
        conn,
        "SELECT turn, call, output FROM call_outputs WHERE run_id = ?1 ORDER BY turn, call",
        run,
        |r| {
            Ok(ArchivedOutput {
                turn: r.get(0)?,
                call: r.get(1)?,
                output: r.get(2)?,
            })
        },
    )?;
    let events = rows(
        conn,
        "SELECT run_seq, turn, at, type, body FROM events WHERE run_id = ?1 ORDER BY run_seq",
        run,
        |r| {
            Ok(ArchivedEvent {
                run_seq: r.get(0)?,
                turn: r.get(1)?,
                at: r.get(2)?,
                kind: r.get(3)?,
                body: r.get(4)?,
            })
        },
    )?;
    let worker_holds = rows(
        conn,
        "SELECT worker, not_before, asked_ms FROM worker_holds WHERE run_id = ?1
         ORDER BY worker",
        run,
        |r| {
            Ok(ArchivedHold {
                worker: r.get(0)?,
                not_before: r.get(1)?,
                asked_ms: r.get(2)?,
            })
        },
    )?;
    let pool_calls = rows(
        conn,
        "SELECT pool, turn, call, at, tokens, cost_micro_usd, requests, exhausted,
                exhausted_until
         FROM pool_calls WHERE run_id = ?1 ORDER BY seq",
        run,
        |r| {
            Ok(ArchivedPoolCall {
                pool: r.get(0)?,
                turn: r.get(1)?,
                call: r.get(2)?,
                at: r.get(3)?,
                tokens: r.get(4)?,
                cost_micro_usd: r.get(5)?,
                requests: r.get(6)?,
                exhausted: r.get(7)?,
                exhausted_until: r.get(8)?,
            })
        },
    )?;
    let pool_spend = rows(
        conn,
        "SELECT pool, turn, call, at, tokens, cost_micro_usd, requests, exhausted,
                exhausted_until, recorded_at
         FROM pool_spend WHERE by_kind = 'turn' AND of_id = ?1 ORDER BY seq",
        run,
        |r| {
            Ok(ArchivedSpend {
                pool: r.get(0)?,
                turn: r.get(1)?,
                call: r.get(2)?,
                at: r.get(3)?,
                tokens: r.get(4)?,
                cost_micro_usd: r.get(5)?,
                requests: r.get(6)?,
                exhausted: r.get(7)?,
                exhausted_until: r.get(8)?,
                recorded_at: r.get(9)?,
            })
        },
    )?;
    let pins = rows(
        conn,
        "SELECT turn, seat, worker, model, family, pool, phase, at, fractions, reason, excluded
         FROM pins WHERE run_id = ?1 ORDER BY seq",
        run,
        |r| {
            Ok(ArchivedPin {
                turn: r.get(0)?,
                seat: r.get(1)?,
                worker: r.get(2)?,
                model: r.get(3)?,
                family: r.get(4)?,
                pool: r.get(5)?,
                phase: r.get(6)?,
                at: r.get(7)?,
                fractions: r.get(8)?,
                reason: r.get(9)?,
                excluded: r.get(10)?,
            })
        },
    )?;
    // A run is one job's at most (`create_job_run`); the oldest wins should a database
    // written by hand hold two.
    let job = rows(
        conn,
        "SELECT id, grp, status, spec, attempts, created_at, updated_at, outbox, error,
                judgement
         FROM jobs WHERE run_id = ?1 ORDER BY created_at, id LIMIT 1",
        run,
        |r| {
            Ok(ArchivedJob {
                id: r.get(0)?,
                group: r.get(1)?,
                status: r.get(2)?,
                spec: r.get(3)?,
                attempts: r.get(4)?,
                created_at: r.get(5)?,
                updated_at: r.get(6)?,
                outbox: r.get(7)?,
                error: r.get(8)?,
                judgement: r.get(9)?,
            })
        },
    )?
    .pop()
    .map(ArchivedJob::unheld);
    Ok(RunArchive {
        run: head,
        records,
        turns,
        record_changes,
        call_outputs,
        events,
        worker_holds,
        pool_calls,
        pool_spend,
        pins,
        job,
    })
}

/// Writes `a` (already checked) in the caller's transaction: the run's row first, which
/// tells a run already here (compared, never overwritten) from a new one.
pub(super) fn import(tx: &Connection, a: &RunArchive) -> Result<Imported> {
    let run = a.run_id();
    let r = &a.run;
    let inserted = tx
        .prepare(
            "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
             ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            r.id,
            r.objective,
            r.status,
            r.turns,
            r.created_at,
            r.updated_at,
            r.config,
            r.header
        ])?;
    if inserted == 0 {
        let here = archive(tx, &run)?;
        if here == *a {
            return Ok(Imported::AlreadyPresent);
        }
        return fail(Error::ImportConflict {
            run: run.0,
            detail: here.difference(a),
        });
    }
    if let Some(job) = &a.job {
        let taken: Option<Option<String>> = tx
            .prepare("SELECT run_id FROM jobs WHERE id = ?1")?
            .query_row([&job.id], |r| r.get(0))
            .optional()?;
        if let Some(other) = taken {
            return fail(Error::ImportConflict {
                run: run.0,
                detail: format!(
                    "its job {} is already in this database, with {}",
                    job.id,
                    other.map_or_else(|| "no run".to_string(), |o| format!("run {o}"))
                ),
            });
        }
    }
    let mut stmt = tx.prepare(
        "INSERT INTO records (run_id, kind, ordinal, id, body, turn)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for x in &a.records {
        stmt.execute(params![r.id, x.kind, x.ordinal, x.id, x.body, x.turn])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at, record)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    for x in &a.turns {
        stmt.execute(params![
            r.id,
            x.turn,
            x.worker,
            x.model,
            x.status,
            x.started_at,
            x.finished_at,
            x.record
        ])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO record_changes (run_id, turn, kind, ordinal, id, body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for x in &a.record_changes {
        stmt.execute(params![r.id, x.turn, x.kind, x.ordinal, x.id, x.body])?;
    }
    let mut stmt = tx
        .prepare("INSERT INTO call_outputs (run_id, turn, call, output) VALUES (?1, ?2, ?3, ?4)")?;
    for x in &a.call_outputs {
        stmt.execute(params![r.id, x.turn, x.call, x.output])?;
    }
    // Their numbers in the run as the archive has them; `seq`, the store-wide cursor,
    // is this database's next (a live follower sees the run arrive).
    let mut stmt = tx.prepare(
        "INSERT INTO events (run_id, turn, at, type, body, run_seq) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    for x in &a.events {
        stmt.execute(params![r.id, x.turn, x.at, x.kind, x.body, x.run_seq])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO worker_holds (run_id, worker, not_before, asked_ms) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for x in &a.worker_holds {
        stmt.execute(params![r.id, x.worker, x.not_before, x.asked_ms])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd, requests,
                                 exhausted, exhausted_until)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?;
    for x in &a.pool_calls {
        stmt.execute(params![
            x.pool,
            r.id,
            x.turn,
            x.call,
            x.at,
            x.tokens,
            x.cost_micro_usd,
            x.requests,
            x.exhausted,
            x.exhausted_until
        ])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO pool_spend (pool, by_kind, of_id, turn, call, at, tokens, cost_micro_usd,
                                 requests, exhausted, exhausted_until, recorded_at)
         VALUES (?1, 'turn', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    for x in &a.pool_spend {
        stmt.execute(params![
            x.pool,
            r.id,
            x.turn,
            x.call,
            x.at,
            x.tokens,
            x.cost_micro_usd,
            x.requests,
            x.exhausted,
            x.exhausted_until,
            x.recorded_at
        ])?;
    }
    let mut stmt = tx.prepare(
        "INSERT INTO pins (run_id, turn, seat, worker, model, family, pool, phase, at, fractions,
                           reason, excluded)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)",
    )?;
    for x in &a.pins {
        stmt.execute(params![
            r.id,
            x.turn,
            x.seat,
            x.worker,
            x.model,
            x.family,
            x.pool,
            x.phase,
            x.at,
            x.fractions,
            x.reason,
            x.excluded
        ])?;
    }
    if let Some(j) = &a.job {
        tx.prepare(
            "INSERT INTO jobs (id, grp, status, spec, run_id, attempts, created_at, updated_at,
                               outbox, error, judgement)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        )?
        .execute(params![
            j.id,
            j.group,
            j.status,
            j.spec,
            r.id,
            j.attempts,
            j.created_at,
            j.updated_at,
            j.outbox,
            j.error,
            j.judgement
        ])?;
    }
    Ok(Imported::Written)
}
