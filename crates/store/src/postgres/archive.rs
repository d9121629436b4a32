//! A run's archive read from PostgreSQL's tables, and an archive written into them (see
//! `crate::archive`): SQLite's `archive` in PostgreSQL's SQL. Every column is read and
//! written as stored: JSON as its text (`TEXT`, never `jsonb`, which would reorder it).

use baton_core::ids::RunId;
use postgres::Row;

use super::{Result, Tx, fail, get};
use crate::Error;
use crate::archive::{
    ArchivedChange, ArchivedEvent, ArchivedHold, ArchivedJob, ArchivedOutput, ArchivedPin,
    ArchivedPoolCall, ArchivedRecord, ArchivedRun, ArchivedSpend, ArchivedTurn, Imported,
    RunArchive,
};

/// The rows of `run` in one table, each made by `row`.
fn rows<T>(
    tx: &mut Tx<'_>,
    sql: &str,
    run: &RunId,
    row: impl Fn(&Row) -> Result<T>,
) -> Result<Vec<T>> {
    tx.query(sql, &[&run.0])?.iter().map(row).collect()
}

pub(super) fn archive(tx: &mut Tx<'_>, run: &RunId) -> Result<RunArchive> {
    let head = tx.opt(
        "SELECT id, objective, status, turns, created_at, updated_at, config, header
         FROM runs WHERE id = $1",
        &[&run.0],
    )?;
    let Some(r) = head else {
        return fail(Error::RunNotFound {
            prefix: run.0.clone(),
        });
    };
    let head = ArchivedRun {
        id: get(&r, 0)?,
        objective: get(&r, 1)?,
        status: get(&r, 2)?,
        turns: get(&r, 3)?,
        created_at: get(&r, 4)?,
        updated_at: get(&r, 5)?,
        config: get(&r, 6)?,
        header: get(&r, 7)?,
    };
    let records = rows(
        tx,
        "SELECT kind, ordinal, id, body, turn FROM records WHERE run_id = $1
         ORDER BY kind, ordinal",
        run,
        |r| {
            Ok(ArchivedRecord {
                kind: get(r, 0)?,
                ordinal: get(r, 1)?,
                id: get(r, 2)?,
                body: get(r, 3)?,
                turn: get(r, 4)?,
            })
        },
    )?;
    let turns = rows(
        tx,
        "SELECT turn, worker, model, status, started_at, finished_at, record FROM turns
         WHERE run_id = $1 ORDER BY turn",
        run,
        |r| {
            Ok(ArchivedTurn {
                turn: get(r, 0)?,
                worker: get(r, 1)?,
                model: get(r, 2)?,
                status: get(r, 3)?,
                started_at: get(r, 4)?,
                finished_at: get(r, 5)?,
                record: get(r, 6)?,
            })
        },
    )?;
    let record_changes = rows(
        tx,
        "SELECT turn, kind, ordinal, id, body FROM record_changes WHERE run_id = $1
         ORDER BY turn, kind, ordinal",
        run,
        |r| {
            Ok(ArchivedChange {
                turn: get(r, 0)?,
                kind: get(r, 1)?,
                ordinal: get(r, 2)?,
                id: get(r, 3)?,
                body: get(r, 4)?,
            })
        },
    )?;
    let call_outputs = rows(
        tx,
        "SELECT turn, call, output FROM call_outputs WHERE run_id = $1 ORDER BY turn, call",
        run,
        |r| {
            Ok(ArchivedOutput {
                turn: get(r, 0)?,
                call: get(r, 1)?,
                output: get(r, 2)?,
            })
        },
    )?;
    let events = rows(
        tx,
        "SELECT run_seq, turn, at, type, body FROM events WHERE run_id = $1 ORDER BY run_seq",
        run,
        |r| {
            Ok(ArchivedEvent {
                run_seq: get(r, 0)?,
                turn: get(r, 1)?,
                at: get(r, 2)?,
                kind: get(r, 3)?,
                body: get(r, 4)?,
            })
        },
    )?;
    let worker_holds = rows(
        tx,
        "SELECT worker, not_before, asked_ms FROM worker_holds WHERE run_id = $1
         ORDER BY worker",
        run,
        |r| {
            Ok(ArchivedHold {
                worker: get(r, 0)?,
                not_before: get(r, 1)?,
                asked_ms: get(r, 2)?,
            })
        },
    )?;
    let pool_calls = rows(
        tx,
        "SELECT pool, turn, call, at, tokens, cost_micro_usd, requests, exhausted,
                exhausted_until
         FROM pool_calls WHERE run_id = $1 ORDER BY seq",
        run,
        |r| {
            Ok(ArchivedPoolCall {
                pool: get(r, 0)?,
                turn: get(r, 1)?,
                call: get(r, 2)?,
                at: get(r, 3)?,
                tokens: get(r, 4)?,
                cost_micro_usd: get(r, 5)?,
                requests: get(r, 6)?,
                exhausted: get(r, 7)?,
                exhausted_until: get(r, 8)?,
            })
        },
    )?;
    let pool_spend = rows(
        tx,
        "SELECT pool, turn, call, at, tokens, cost_micro_usd, requests, exhausted,
                exhausted_until, recorded_at
         FROM pool_spend WHERE by_kind = 'turn' AND of_id = $1 ORDER BY seq",
        run,
        |r| {
            Ok(ArchivedSpend {
                pool: get(r, 0)?,
                turn: get(r, 1)?,
                call: get(r, 2)?,
                at: get(r, 3)?,
                tokens: get(r, 4)?,
                cost_micro_usd: get(r, 5)?,
                requests: get(r, 6)?,
                exhausted: get(r, 7)?,
                exhausted_until: get(r, 8)?,
                recorded_at: get(r, 9)?,
            })
        },
    )?;
    let pins = rows(
        tx,
        "SELECT turn, seat, worker, model, family, pool, phase, at, fractions, reason, excluded
         FROM pins WHERE run_id = $1 ORDER BY seq",
        run,
        |r| {
            Ok(ArchivedPin {
                turn: get(r, 0)?,
                seat: get(r, 1)?,
                worker: get(r, 2)?,
                model: get(r, 3)?,
                family: get(r, 4)?,
                pool: get(r, 5)?,
                phase: get(r, 6)?,
                at: get(r, 7)?,
                fractions: get(r, 8)?,
                reason: get(r, 9)?,
                excluded: get(r, 10)?,
            })
        },
    )?;
    let job = rows(
        tx,
        "SELECT id, grp, status, spec, attempts, created_at, updated_at, outbox, error,
                judgement
         FROM jobs WHERE run_id = $1 ORDER BY created_at, id LIMIT 1",
        run,
        |r| {
            Ok(ArchivedJob {
                id: get(r, 0)?,
                group: get(r, 1)?,
                status: get(r, 2)?,
                spec: get(r, 3)?,
                attempts: get(r, 4)?,
                created_at: get(r, 5)?,
                updated_at: get(r, 6)?,
                outbox: get(r, 7)?,
                error: get(r, 8)?,
                judgement: get(r, 9)?,
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

/// Writes `a` (already checked) in the caller's transaction. The run's row goes first:
/// an import of the same run committing meanwhile makes this one wait on its key, then
/// find it here and compare.
pub(super) fn import(tx: &mut Tx<'_>, a: &RunArchive) -> Result<Imported> {
    let run = a.run_id();
    let r = &a.run;
    let inserted = tx.exec(
        "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (id) DO NOTHING",
        &[
            &r.id,
            &r.objective,
            &r.status,
            &r.turns,
            &r.created_at,
            &r.updated_at,
            &r.config,
            &r.header,
        ],
    )?;
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
    let taken = match &a.job {
        Some(job) => tx.opt("SELECT run_id FROM jobs WHERE id = $1", &[&job.id])?,
        None => None,
    };
    if let (Some(job), Some(row)) = (&a.job, taken) {
        let other: Option<String> = get(&row, 0)?;
        return fail(Error::ImportConflict {
            run: run.0,
            detail: format!(
                "its job {} is already in this database, with {}",
                job.id,
                other.map_or_else(|| "no run".to_string(), |o| format!("run {o}"))
            ),
        });
    }
    for x in &a.records {
        tx.exec(
            "INSERT INTO records (run_id, kind, ordinal, id, body, turn)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[&r.id, &x.kind, &x.ordinal, &x.id, &x.body, &x.turn],
        )?;
    }
    for x in &a.turns {
        tx.exec(
            "INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at,
                                record)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            &[
                &r.id,
                &x.turn,
                &x.worker,
                &x.model,
                &x.status,
                &x.started_at,
                &x.finished_at,
                &x.record,
            ],
        )?;
    }
    for x in &a.record_changes {
        tx.exec(
            "INSERT INTO record_changes (run_id, turn, kind, ordinal, id, body)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[&r.id, &x.turn, &x.kind, &x.ordinal, &x.id, &x.body],
        )?;
    }
    for x in &a.call_outputs {
        tx.exec(
            "INSERT INTO call_outputs (run_id, turn, call, output) VALUES ($1, $2, $3, $4)",
            &[&r.id, &x.turn, &x.call, &x.output],
        )?;
    }
    for x in &a.worker_holds {
        tx.exec(
            "INSERT INTO worker_holds (run_id, worker, not_before, asked_ms)
             VALUES ($1, $2, $3, $4)",
            &[&r.id, &x.worker, &x.not_before, &x.asked_ms],
        )?;
    }
    for x in &a.pool_calls {
        tx.exec(
            "INSERT INTO pool_calls (pool, run_id, turn, call, at, tokens, cost_micro_usd,
                                     requests, exhausted, exhausted_until)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
            &[
                &x.pool,
                &r.id,
                &x.turn,
                &x.call,
                &x.at,
                &x.tokens,
                &x.cost_micro_usd,
                &x.requests,
                &x.exhausted,
                &x.exhausted_until,
            ],
        )?;
    }
    for x in &a.pool_spend {
        tx.exec(
            "INSERT INTO pool_spend (pool, by_kind, of_id, turn, call, at, tokens,
                                     cost_micro_usd, requests, exhausted, exhausted_until,
                                     recorded_at)
             VALUES ($1, 'turn', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &x.pool,
                &r.id,
                &x.turn,
                &x.call,
                &x.at,
                &x.tokens,
                &x.cost_micro_usd,
                &x.requests,
                &x.exhausted,
                &x.exhausted_until,
                &x.recorded_at,
            ],
        )?;
    }
    for x in &a.pins {
        tx.exec(
            "INSERT INTO pins (run_id, turn, seat, worker, model, family, pool, phase, at,
                               fractions, reason, excluded)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)",
            &[
                &r.id,
                &x.turn,
                &x.seat,
                &x.worker,
                &x.model,
                &x.family,
                &x.pool,
                &x.phase,
                &x.at,
                &x.fractions,
                &x.reason,
                &x.excluded,
            ],
        )?;
    }
    if let Some(j) = &a.job {
        tx.exec(
            "INSERT INTO jobs (id, grp, status, spec, run_id, attempts, created_at, updated_at,
                               outbox, error, judgement)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            &[
                &j.id,
                &j.group,
                &j.status,
                &j.spec,
                &r.id,
                &j.attempts,
                &j.created_at,
                &j.updated_at,
                &j.outbox,
                &j.error,
                &j.judgement,
            ],
        )?;
        // A queued job wakes an idle `baton work --follow`, as an enqueue does.
        tx.exec("SELECT pg_notify('baton_jobs', current_schema())", &[])?;
    }
    // Last, under the schema's event lock (see `runs::insert_events`): the store-wide
    // keys stay in commit order. Each event keeps its number in the run.
    if !a.events.is_empty() {
        tx.exec(
            "SELECT pg_advisory_xact_lock(hashtext('baton.events.' || current_schema())),
                    pg_notify('baton_events', current_schema())",
            &[],
        )?;
    }
    for x in &a.events {
        tx.exec(
            "INSERT INTO events (run_id, turn, at, type, body, run_seq)
             VALUES ($1, $2, $3, $4, $5, $6)",
            &[&r.id, &x.turn, &x.at, &x.kind, &x.body, &x.run_seq],
        )?;
    }
    Ok(Imported::Written)
}
