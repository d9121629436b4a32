//! The read paths. Every function runs inside the read transaction `SqliteStore::read`
//! opened, so multi-query reads see one snapshot.
//!
//! A row that does not decode is `Error::Corrupt` naming the run, turn and record; it is
//! never skipped.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::state::{ExecutionState, RecordChange, RecordKind, StateHeader};
use baton_core::turn::TurnRecord;
use baton_protocol::EventMsg as Event;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{Result, fail};
use crate::codec::{RawRecord, RawRun, decode_run, from_json, is_suffix_worth_trying, push_record};
use crate::{Error, EventCursor, EventPage, RunInfo, StoredEvent, WorkerHold};

const RUN_COLUMNS: &str = "id, objective, status, turns, created_at, updated_at, config";

pub(super) fn list_runs(conn: &Connection) -> Result<Vec<RunInfo>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id DESC"
    ))?;
    let rows = stmt.query_map([], raw_run)?;
    rows.map(|row| Ok(decode_run(row?)?)).collect()
}

pub(super) fn run_info(conn: &Connection, run: &RunId) -> Result<RunInfo> {
    let row = conn
        .prepare_cached(&format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = ?1"))?
        .query_row([&run.0], raw_run)
        .optional()?;
    Ok(decode_run(row.ok_or_else(|| not_found(run))?)?)
}

pub(super) fn resolve_run(conn: &Connection, prefix: &str) -> Result<RunId> {
    let not_found = || Error::RunNotFound {
        prefix: prefix.to_string(),
    };
    if prefix.is_empty() {
        return fail(not_found());
    }
    let exact: Option<String> = conn
        .prepare_cached("SELECT id FROM runs WHERE id = ?1")?
        .query_row([prefix], |row| row.get(0))
        .optional()?;
    if let Some(id) = exact {
        return Ok(RunId(id));
    }
    // substr, not LIKE: LIKE is case-insensitive and treats `%` and `_` as wildcards.
    let mut candidates = conn
        .prepare_cached("SELECT id FROM runs WHERE substr(id, 1, length(?1)) = ?1 ORDER BY id")?
        .query_map([prefix], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    if candidates.is_empty() && is_suffix_worth_trying(prefix) {
        candidates = conn
            .prepare_cached("SELECT id FROM runs WHERE substr(id, -length(?1)) = ?1 ORDER BY id")?
            .query_map([prefix], |row| row.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
    }
    match candidates.len() {
        0 => fail(not_found()),
        1 => Ok(RunId(candidates.remove(0))),
        _ => fail(Error::AmbiguousRun {
            prefix: prefix.to_string(),
            candidates,
        }),
    }
}

pub(super) fn load_state(conn: &Connection, run: &RunId) -> Result<ExecutionState> {
    let header: String = conn
        .prepare_cached("SELECT header FROM runs WHERE id = ?1")?
        .query_row([&run.0], |row| row.get(0))
        .optional()?
        .ok_or_else(|| not_found(run))?;
    let header: StateHeader = from_json(&header, || format!("state header of run {run}"))?;

    // The header alone: records are pushed below, decoded straight from their text.
    // `from_parts` would take them as `serde_json::Value`s, and building those trees
    // was half the cost of a load.
    let mut state = ExecutionState::from_parts(header, Vec::new()).map_err(|e| Error::Corrupt {
        what: format!("state header of run {run}"),
        detail: e.to_string(),
    })?;

    let mut stmt = conn.prepare_cached(
        "SELECT kind, ordinal, id, body, turn FROM records WHERE run_id = ?1
         ORDER BY kind, ordinal",
    )?;
    let mut rows = stmt.query([&run.0])?;
    // Records keep their position forever, so each kind's ordinals must be 0, 1, 2, ...
    // A gap would shift every later record into the wrong place.
    let mut expected: Option<(RecordKind, u32)> = None;
    while let Some(row) = rows.next()? {
        let raw = raw_record(row, row.get(4)?)?;
        let kind = raw.kind(run)?;
        let next = match expected {
            Some((k, n)) if k == kind => n,
            _ => 0,
        };
        if raw.ordinal != next {
            return fail(Error::Corrupt {
                what: format!("{} records of run {run}", kind.as_str()),
                detail: format!("record {next} is missing (found {})", raw.ordinal),
            });
        }
        expected = Some((kind, next + 1));
        push_record(&mut state, kind, &raw.body).map_err(|e| Error::Corrupt {
            what: raw.what(run),
            detail: e.to_string(),
        })?;
    }
    Ok(state)
}

/// Committed turns of `run` in order: all of them, or only turn `only`.
pub(super) fn turns(conn: &Connection, run: &RunId, only: Option<u32>) -> Result<Vec<TurnRecord>> {
    let mut records = Vec::new();
    let mut stmt = conn.prepare_cached(
        "SELECT turn, record FROM turns WHERE run_id = ?1 AND (?2 IS NULL OR turn = ?2)
         ORDER BY turn",
    )?;
    let mut rows = stmt.query(params![run.0, only])?;
    while let Some(row) = rows.next()? {
        let turn: u32 = row.get(0)?;
        let text: String = row.get(1)?;
        let record: TurnRecord = from_json(&text, || format!("turn {turn} of run {run}"))?;
        records.push(record);
    }

    let mut stmt = conn.prepare_cached(
        "SELECT turn, call, output FROM call_outputs
         WHERE run_id = ?1 AND (?2 IS NULL OR turn = ?2) ORDER BY turn, call",
    )?;
    let mut rows = stmt.query(params![run.0, only])?;
    while let Some(row) = rows.next()? {
        let turn: u32 = row.get(0)?;
        let call: u32 = row.get(1)?;
        let slot = records
            .iter_mut()
            .find(|r| r.turn == turn)
            .and_then(|r| r.calls.get_mut(call as usize))
            .ok_or_else(|| Error::Corrupt {
                what: format!("output of call {call} in turn {turn} of run {run}"),
                detail: "the turn has no such call".to_string(),
            })?;
        slot.output = Some(row.get(2)?);
    }
    Ok(records)
}

pub(super) fn turn_changes(conn: &Connection, run: &RunId, turn: u32) -> Result<Vec<RecordChange>> {
    let mut stmt = conn.prepare_cached(
        "SELECT kind, ordinal, id, body FROM record_changes WHERE run_id = ?1 AND turn = ?2",
    )?;
    let mut rows = stmt.query(params![run.0, turn])?;
    let mut changes = Vec::new();
    while let Some(row) = rows.next()? {
        let raw = raw_record(row, Some(turn))?;
        changes.push(RecordChange {
            kind: raw.kind(run)?,
            body: from_json(&raw.body, || raw.what(run))?,
            ordinal: raw.ordinal,
            id: raw.id,
        });
    }
    // The order `ExecutionState::diff` produces: by kind in declaration order, then
    // by position.
    changes.sort_by_key(|c| (RecordKind::ALL.iter().position(|k| *k == c.kind), c.ordinal));
    Ok(changes)
}

pub(super) fn events(conn: &Connection, run: &RunId, after: u64) -> Result<Vec<StoredEvent>> {
    let mut stmt = conn.prepare_cached(
        "SELECT run_seq, body FROM events WHERE run_id = ?1 AND run_seq > ?2 ORDER BY run_seq",
    )?;
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let mut rows = stmt.query(params![run.0, after])?;
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let body: String = row.get(1)?;
        let event: Event = from_json(&body, || format!("event {seq} of run {run}"))?;
        out.push(StoredEvent {
            seq: seq as u64,
            event,
        });
    }
    Ok(out)
}

/// The cursor is the table's AUTOINCREMENT key: SQLite has one writer at a time, so
/// keys grow in commit order and a reader never sees a smaller one appear later.
pub(super) fn events_since(
    conn: &Connection,
    cursor: EventCursor,
    limit: usize,
) -> Result<EventPage> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, run_seq, run_id, body FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut rows = stmt.query(params![cursor.0, limit])?;
    let (mut events, mut next) = (Vec::new(), cursor);
    let mut cursors = Vec::new();
    while let Some(row) = rows.next()? {
        let key: i64 = row.get(0)?;
        let seq: i64 = row.get(1)?;
        let run: String = row.get(2)?;
        let body: String = row.get(3)?;
        let event: Event = from_json(&body, || format!("event {seq} of run {run}"))?;
        events.push(StoredEvent {
            seq: seq as u64,
            event,
        });
        next = EventCursor(key);
        cursors.push(next);
    }
    Ok(EventPage {
        events,
        next,
        cursors,
    })
}

pub(super) fn prior_outputs(
    conn: &Connection,
    run: &RunId,
    before_turn: u32,
) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(
        "SELECT output FROM call_outputs WHERE run_id = ?1 AND turn < ?2 ORDER BY turn, call",
    )?;
    let rows = stmt.query_map(params![run.0, before_turn], |row| row.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

/// The run's lease holder while its lease holds at `db_now` (the database's clock).
pub(super) fn run_lease_holder(
    conn: &Connection,
    run: &RunId,
    db_now: i64,
) -> Result<Option<crate::LeaseHolder>> {
    let row: Option<(Option<String>, Option<i64>)> = conn
        .prepare_cached("SELECT lease_owner, lease_expires_at FROM runs WHERE id = ?1")?
        .query_row([&run.0], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    match row {
        None => fail(Error::RunNotFound {
            prefix: run.0.clone(),
        }),
        Some((Some(owner), Some(until))) if until >= db_now => Ok(Some(crate::LeaseHolder {
            owner,
            expires_at: Timestamp(until),
        })),
        Some(_) => Ok(None),
    }
}

pub(super) fn worker_holds(conn: &Connection, run: &RunId) -> Result<Vec<WorkerHold>> {
    let mut stmt = conn.prepare_cached(
        "SELECT worker, not_before, asked_ms FROM worker_holds WHERE run_id = ?1 ORDER BY worker",
    )?;
    let rows = stmt.query_map([&run.0], |row| {
        Ok((
            row.get::<_, String>(0)?,
            row.get::<_, i64>(1)?,
            row.get::<_, i64>(2)?,
        ))
    })?;
    rows.map(|row| {
        let (worker, not_before, asked_ms) = row?;
        let asked_ms = u64::try_from(asked_ms).map_err(|_| Error::Corrupt {
            what: format!("hold of worker {worker} in run {run}"),
            detail: format!("negative delay {asked_ms} ms"),
        })?;
        Ok(WorkerHold {
            worker: WorkerId::new(worker),
            not_before: Timestamp(not_before),
            asked_ms,
        })
    })
    .collect()
}

fn not_found(run: &RunId) -> Error {
    Error::RunNotFound {
        prefix: run.0.clone(),
    }
}

fn raw_run(row: &Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        id: row.get(0)?,
        objective: row.get(1)?,
        status: row.get(2)?,
        turns: row.get(3)?,
        created_at: row.get(4)?,
        updated_at: row.get(5)?,
        config: row.get(6)?,
    })
}

fn raw_record(row: &Row<'_>, turn: Option<u32>) -> Result<RawRecord> {
    Ok(RawRecord {
        kind: row.get(0)?,
        ordinal: row.get(1)?,
        id: row.get(2)?,
        body: row.get(3)?,
        turn,
    })
}
