//! Runs, turns, records, events, holds and run leases: SQLite's `read` and `write`
//! paths in PostgreSQL's SQL, with the same checks and the same errors.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::state::{ExecutionState, RecordChange, RecordKind, StateHeader};
use baton_core::turn::TurnRecord;
use baton_protocol::EventMsg as Event;

use super::{Result, Tx, fail, get, to_u32};
use crate::codec::{
    EncodedEvent, EncodedRecord, EncodedRun, EncodedTurn, RawRecord, RawRun, decode_run, from_json,
    is_suffix_worth_trying, push_record,
};
use crate::{
    Error, EventCursor, EventPage, LeaseHolder, RunInfo, RunStatus, StoredEvent, WorkerHold,
};

const RUN_COLUMNS: &str = "id, objective, status, turns, created_at, updated_at, config";

fn raw_run(row: &postgres::Row) -> Result<RawRun> {
    let id: String = get(row, 0)?;
    let turns = to_u32(get(row, 3)?, || format!("turn count of run {id}"))?;
    Ok(RawRun {
        objective: get(row, 1)?,
        status: get(row, 2)?,
        turns,
        created_at: get(row, 4)?,
        updated_at: get(row, 5)?,
        config: get(row, 6)?,
        id,
    })
}

pub(super) fn list_runs(tx: &mut Tx<'_>) -> Result<Vec<RunInfo>> {
    let rows = tx.query(
        &format!("SELECT {RUN_COLUMNS} FROM runs ORDER BY created_at DESC, id DESC"),
        &[],
    )?;
    rows.iter()
        .map(|row| Ok(decode_run(raw_run(row)?)?))
        .collect()
}

pub(super) fn run_info(tx: &mut Tx<'_>, run: &RunId) -> Result<RunInfo> {
    let row = tx
        .opt(
            &format!("SELECT {RUN_COLUMNS} FROM runs WHERE id = $1"),
            &[&run.0],
        )?
        .ok_or_else(|| not_found(run))?;
    Ok(decode_run(raw_run(&row)?)?)
}

pub(super) fn resolve_run(tx: &mut Tx<'_>, prefix: &str) -> Result<RunId> {
    let not_found = || Error::RunNotFound {
        prefix: prefix.to_string(),
    };
    if prefix.is_empty() {
        return fail(not_found());
    }
    if tx
        .opt("SELECT id FROM runs WHERE id = $1", &[&prefix])?
        .is_some()
    {
        return Ok(RunId(prefix.to_string()));
    }
    let ids = |rows: Vec<postgres::Row>| -> Result<Vec<String>> {
        rows.iter().map(|r| get(r, 0)).collect()
    };
    // `left`, not LIKE: LIKE treats `%` and `_` as wildcards.
    let mut candidates = ids(tx.query(
        "SELECT id FROM runs WHERE left(id, length($1::text)) = $1::text ORDER BY id",
        &[&prefix],
    )?)?;
    if candidates.is_empty() && is_suffix_worth_trying(prefix) {
        candidates = ids(tx.query(
            "SELECT id FROM runs WHERE right(id, length($1::text)) = $1::text ORDER BY id",
            &[&prefix],
        )?)?;
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

fn raw_record(row: &postgres::Row, turn: Option<u32>, run: &RunId) -> Result<RawRecord> {
    let kind: String = get(row, 0)?;
    let ordinal = to_u32(get(row, 1)?, || {
        format!("ordinal of a {kind} record of run {run}")
    })?;
    Ok(RawRecord {
        kind,
        ordinal,
        id: get(row, 2)?,
        body: get(row, 3)?,
        turn,
    })
}

fn turn_of(n: Option<i64>, run: &RunId) -> Result<Option<u32>> {
    n.map(|n| to_u32(n, || format!("turn of a record of run {run}")))
        .transpose()
}

pub(super) fn load_state(tx: &mut Tx<'_>, run: &RunId) -> Result<ExecutionState> {
    let row = tx
        .opt("SELECT header FROM runs WHERE id = $1", &[&run.0])?
        .ok_or_else(|| not_found(run))?;
    let header: String = get(&row, 0)?;
    let header: StateHeader = from_json(&header, || format!("state header of run {run}"))?;
    let mut state = ExecutionState::from_parts(header, Vec::new()).map_err(|e| Error::Corrupt {
        what: format!("state header of run {run}"),
        detail: e.to_string(),
    })?;
    let rows = tx.query(
        "SELECT kind, ordinal, id, body, turn FROM records WHERE run_id = $1
         ORDER BY kind, ordinal",
        &[&run.0],
    )?;
    // Records keep their position forever, so each kind's ordinals must be 0, 1, 2, ...
    let mut expected: Option<(RecordKind, u32)> = None;
    for row in &rows {
        let raw = raw_record(row, turn_of(get(row, 4)?, run)?, run)?;
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

pub(super) fn turns(tx: &mut Tx<'_>, run: &RunId, only: Option<u32>) -> Result<Vec<TurnRecord>> {
    let only = only.map(i64::from);
    let rows = tx.query(
        "SELECT turn, record FROM turns WHERE run_id = $1 AND ($2::bigint IS NULL OR turn = $2)
         ORDER BY turn",
        &[&run.0, &only],
    )?;
    let mut records = Vec::with_capacity(rows.len());
    for row in &rows {
        let turn: i64 = get(row, 0)?;
        let text: String = get(row, 1)?;
        let record: TurnRecord = from_json(&text, || format!("turn {turn} of run {run}"))?;
        records.push(record);
    }
    let rows = tx.query(
        "SELECT turn, call, output FROM call_outputs
         WHERE run_id = $1 AND ($2::bigint IS NULL OR turn = $2) ORDER BY turn, call",
        &[&run.0, &only],
    )?;
    for row in &rows {
        let turn: i64 = get(row, 0)?;
        let call: i64 = get(row, 1)?;
        let slot = records
            .iter_mut()
            .find(|r| i64::from(r.turn) == turn)
            .and_then(|r| usize::try_from(call).ok().and_then(|c| r.calls.get_mut(c)))
            .ok_or_else(|| Error::Corrupt {
                what: format!("output of call {call} in turn {turn} of run {run}"),
                detail: "the turn has no such call".to_string(),
            })?;
        slot.output = Some(get(row, 2)?);
    }
    Ok(records)
}

pub(super) fn turn_changes(tx: &mut Tx<'_>, run: &RunId, turn: u32) -> Result<Vec<RecordChange>> {
    let rows = tx.query(
        "SELECT kind, ordinal, id, body FROM record_changes WHERE run_id = $1 AND turn = $2",
        &[&run.0, &i64::from(turn)],
    )?;
    let mut changes = Vec::with_capacity(rows.len());
    for row in &rows {
        let raw = raw_record(row, Some(turn), run)?;
        changes.push(RecordChange {
            kind: raw.kind(run)?,
            body: from_json(&raw.body, || raw.what(run))?,
            ordinal: raw.ordinal,
            id: raw.id,
        });
    }
    changes.sort_by_key(|c| (RecordKind::ALL.iter().position(|k| *k == c.kind), c.ordinal));
    Ok(changes)
}

pub(super) fn events(tx: &mut Tx<'_>, run: &RunId, after: u64) -> Result<Vec<StoredEvent>> {
    let after = i64::try_from(after).unwrap_or(i64::MAX);
    let rows = tx.query(
        "SELECT run_seq, body FROM events WHERE run_id = $1 AND run_seq > $2 ORDER BY run_seq",
        &[&run.0, &after],
    )?;
    rows.iter()
        .map(|row| {
            let seq: i64 = get(row, 0)?;
            let body: String = get(row, 1)?;
            let event: Event = from_json(&body, || format!("event {seq} of run {run}"))?;
            Ok(StoredEvent {
                seq: seq as u64,
                event,
            })
        })
        .collect()
}

/// The cursor is the events' key, which grows in commit order (see `insert_events`).
pub(super) fn events_since(
    tx: &mut Tx<'_>,
    cursor: EventCursor,
    limit: usize,
) -> Result<EventPage> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let rows = tx.query(
        "SELECT seq, run_seq, run_id, body FROM events WHERE seq > $1 ORDER BY seq LIMIT $2",
        &[&cursor.0, &limit],
    )?;
    let (mut events, mut next) = (Vec::with_capacity(rows.len()), cursor);
    let mut cursors = Vec::new();
    for row in &rows {
        let key: i64 = get(row, 0)?;
        let seq: i64 = get(row, 1)?;
        let run: String = get(row, 2)?;
        let body: String = get(row, 3)?;
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

pub(super) fn prior_outputs(tx: &mut Tx<'_>, run: &RunId, before_turn: u32) -> Result<Vec<String>> {
    let rows = tx.query(
        "SELECT output FROM call_outputs WHERE run_id = $1 AND turn < $2 ORDER BY turn, call",
        &[&run.0, &i64::from(before_turn)],
    )?;
    rows.iter().map(|r| get(r, 0)).collect()
}

pub(super) fn run_lease_holder(
    tx: &mut Tx<'_>,
    run: &RunId,
    db_now: i64,
) -> Result<Option<LeaseHolder>> {
    let row = tx
        .opt(
            "SELECT lease_owner, lease_expires_at FROM runs WHERE id = $1",
            &[&run.0],
        )?
        .ok_or_else(|| not_found(run))?;
    let owner: Option<String> = get(&row, 0)?;
    let until: Option<i64> = get(&row, 1)?;
    Ok(match (owner, until) {
        (Some(owner), Some(until)) if until >= db_now => Some(LeaseHolder {
            owner,
            expires_at: Timestamp(until),
        }),
        _ => None,
    })
}

pub(super) fn worker_holds(tx: &mut Tx<'_>, run: &RunId) -> Result<Vec<WorkerHold>> {
    let rows = tx.query(
        "SELECT worker, not_before, asked_ms FROM worker_holds WHERE run_id = $1 ORDER BY worker",
        &[&run.0],
    )?;
    rows.iter()
        .map(|row| {
            let worker: String = get(row, 0)?;
            let asked_ms: i64 = get(row, 2)?;
            let asked_ms = u64::try_from(asked_ms).map_err(|_| Error::Corrupt {
                what: format!("hold of worker {worker} in run {run}"),
                detail: format!("negative delay {asked_ms} ms"),
            })?;
            Ok(WorkerHold {
                not_before: Timestamp(get(row, 1)?),
                worker: WorkerId::new(worker),
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

pub(super) fn create_run(tx: &mut Tx<'_>, run: &EncodedRun<'_>) -> Result<()> {
    let info = run.info;
    let inserted = tx.exec(
        "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (id) DO NOTHING",
        &[
            &info.id.0,
            &info.objective,
            &info.status.as_str(),
            &i64::from(run.turns),
            &info.created_at.0,
            &info.updated_at.0,
            &run.config,
            &run.header,
        ],
    )?;
    if inserted == 0 {
        return fail(Error::RunExists {
            run: info.id.0.clone(),
        });
    }
    upsert_records(tx, &info.id, None, &run.records)?;
    insert_events(tx, &run.events).map(drop)
}

/// One transaction: the fences, then the turn row, its outputs, its records (current
/// versions and the turn's delta), holds, pool calls, pins and events.
pub(super) fn commit_turn(tx: &mut Tx<'_>, turn: &EncodedTurn<'_>) -> Result<Vec<u64>> {
    let commit = turn.commit;
    let rec = &commit.record;
    let run = &rec.run_id;
    // The job's row before the run's, as every write that takes both locks them.
    if let Some(fence) = &commit.lease {
        super::jobs::check_fence(tx, fence)?;
    }
    if let Some(token) = &commit.run_lease {
        check_run_lease(tx, run, token)?;
    }
    let fenced = tx.exec(
        "UPDATE runs SET turns = turns + 1, header = $1, status = $2, updated_at = $3
         WHERE id = $4 AND turns = $5",
        &[
            &turn.header,
            &commit.status.as_str(),
            &rec.finished_at.0,
            &run.0,
            &i64::from(rec.turn),
        ],
    )?;
    if fenced == 0 {
        let committed = tx.opt("SELECT turns FROM runs WHERE id = $1", &[&run.0])?;
        return fail(match committed {
            None => not_found(run),
            Some(row) => {
                let n: i64 = get(&row, 0)?;
                Error::TurnConflict {
                    run: run.0.clone(),
                    turn: rec.turn,
                    reason: format!("the run has {n} committed turns, so the next turn is {n}"),
                }
            }
        });
    }
    let number = i64::from(rec.turn);
    tx.exec(
        "INSERT INTO turns (run_id, turn, worker, model, status, started_at, finished_at, record)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &run.0,
            &number,
            &rec.worker.as_str(),
            &rec.model,
            &rec.status.as_str(),
            &rec.started_at.0,
            &rec.finished_at.0,
            &turn.record,
        ],
    )?;
    // Rows of one kind go in one statement each, as arrays unnested: a round trip per
    // row was most of a turn's commit (24 round trips for the typical turn, now 10).
    if !turn.outputs.is_empty() {
        let calls: Vec<i64> = turn.outputs.iter().map(|(c, _)| i64::from(*c)).collect();
        let texts: Vec<&str> = turn.outputs.iter().map(|(_, t)| t.as_str()).collect();
        tx.exec(
            "INSERT INTO call_outputs (run_id, turn, call, output)
             SELECT $1, $2, c, o FROM unnest($3::bigint[], $4::text[]) AS u(c, o)",
            &[&run.0, &number, &calls, &texts],
        )?;
    }
    upsert_records(tx, run, Some(rec.turn), &turn.changes)?;
    if !turn.changes.is_empty() {
        let c = RecordColumns::new(&turn.changes);
        tx.exec(
            "INSERT INTO record_changes (run_id, turn, kind, ordinal, id, body)
             SELECT $1, $2, k, o, i, b
             FROM unnest($3::text[], $4::bigint[], $5::text[], $6::text[]) AS u(k, o, i, b)",
            &[&run.0, &number, &c.kinds, &c.ordinals, &c.ids, &c.bodies],
        )?;
    }
    put_holds(tx, run, &commit.holds)?;
    if let Some(pool) = &commit.pool {
        // The turn's calls replace what it held, under the pool's lock, so that no
        // reserver on another host reads between the two (see `super::reserve`).
        if let Some(id) = commit.reservation {
            super::reserve::lock_pool(tx, pool)?;
            super::reserve::release(tx, id)?;
        }
        super::pools::insert_calls(tx, pool, rec)?;
    } else if let Some(id) = commit.reservation {
        super::reserve::release(tx, id)?;
    }
    super::pools::insert_pins(tx, run, rec.turn, &commit.pins)?;
    insert_events(tx, &turn.events)
}

pub(super) fn put_holds(tx: &mut Tx<'_>, run: &RunId, holds: &[WorkerHold]) -> Result<()> {
    for h in holds {
        let asked = i64::try_from(h.asked_ms).unwrap_or(i64::MAX);
        tx.exec(
            "INSERT INTO worker_holds (run_id, worker, not_before, asked_ms) VALUES ($1, $2, $3, $4)
             ON CONFLICT (run_id, worker)
             DO UPDATE SET not_before = EXCLUDED.not_before, asked_ms = EXCLUDED.asked_ms",
            &[&run.0, &h.worker.as_str(), &h.not_before.0, &asked],
        )?;
    }
    Ok(())
}

pub(super) fn update_run(
    tx: &mut Tx<'_>,
    run: &RunId,
    status: RunStatus,
    events: &[EncodedEvent],
) -> Result<Vec<u64>> {
    let at = events.iter().map(|e| e.at).max();
    let updated = tx.exec(
        "UPDATE runs SET status = $1,
                updated_at = GREATEST(updated_at, coalesce($2::bigint, updated_at))
         WHERE id = $3",
        &[&status.as_str(), &at, &run.0],
    )?;
    if updated == 0 {
        return fail(not_found(run));
    }
    insert_events(tx, events)
}

pub(super) fn append_events(
    tx: &mut Tx<'_>,
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
    tx: &mut Tx<'_>,
    run: &RunId,
    config: &str,
    events: &[EncodedEvent],
) -> Result<Vec<u64>> {
    let at = events.iter().map(|e| e.at).max();
    let updated = tx.exec(
        "UPDATE runs SET config = $1,
                updated_at = GREATEST(updated_at, coalesce($2::bigint, updated_at))
         WHERE id = $3",
        &[&config, &at, &run.0],
    )?;
    if updated == 0 {
        return fail(not_found(run));
    }
    insert_events(tx, events)
}

/// The columns of some records, as the arrays one statement unnests.
struct RecordColumns<'r> {
    kinds: Vec<&'static str>,
    ordinals: Vec<i64>,
    ids: Vec<&'r str>,
    bodies: Vec<&'r str>,
}

impl<'r> RecordColumns<'r> {
    fn new(records: &'r [EncodedRecord]) -> RecordColumns<'r> {
        RecordColumns {
            kinds: records.iter().map(|r| r.kind).collect(),
            ordinals: records.iter().map(|r| i64::from(r.ordinal)).collect(),
            ids: records.iter().map(|r| r.id.as_str()).collect(),
            bodies: records.iter().map(|r| r.body.as_str()).collect(),
        }
    }
}

/// One statement for all of them. A record appears at most once among `records` (a
/// turn's changes are keyed as `record_changes` is), as `ON CONFLICT DO UPDATE`
/// requires of the rows of one statement.
fn upsert_records(
    tx: &mut Tx<'_>,
    run: &RunId,
    turn: Option<u32>,
    records: &[EncodedRecord],
) -> Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let turn = turn.map(i64::from);
    let c = RecordColumns::new(records);
    tx.exec(
        "INSERT INTO records (run_id, kind, ordinal, id, body, turn)
         SELECT $1, k, o, i, b, $6
         FROM unnest($2::text[], $3::bigint[], $4::text[], $5::text[]) AS u(k, o, i, b)
         ON CONFLICT (run_id, kind, ordinal)
         DO UPDATE SET id = EXCLUDED.id, body = EXCLUDED.body, turn = EXCLUDED.turn",
        &[&run.0, &c.kinds, &c.ordinals, &c.ids, &c.bodies, &turn],
    )?;
    Ok(())
}

/// Events are written under the schema's event lock, held to the end of the
/// transaction: so the store-wide keys (`seq`) are taken in commit order, and a reader
/// of `events_since` that has seen a key has seen every smaller one. Each run's numbers
/// are read and written under it too, so they have no gaps and are never taken twice.
/// The lock is taken last in a turn's transaction, to hold it for as short as may be.
fn insert_events(tx: &mut Tx<'_>, events: &[EncodedEvent]) -> Result<Vec<u64>> {
    if events.is_empty() {
        return Ok(Vec::new());
    }
    // With it, the notification every `baton serve` following the log hears on commit
    // (`Store::event_signal`): one round trip for both.
    tx.exec(
        "SELECT pg_advisory_xact_lock(hashtext('baton.events.' || current_schema())),
                pg_notify('baton_events', current_schema())",
        &[],
    )?;
    let mut last: Vec<(&str, i64)> = Vec::new();
    let mut seqs = Vec::with_capacity(events.len());
    for e in events {
        let seq = match last.iter_mut().find(|(run, _)| *run == e.run_id) {
            Some((_, n)) => {
                *n += 1;
                *n
            }
            None => {
                let row = tx.one(
                    "SELECT coalesce(max(run_seq), 0)::bigint FROM events WHERE run_id = $1",
                    &[&e.run_id],
                )?;
                let n = get::<i64>(&row, 0)? + 1;
                last.push((&e.run_id, n));
                n
            }
        };
        seqs.push(seq);
    }
    let runs: Vec<&str> = events.iter().map(|e| e.run_id.as_str()).collect();
    let turns: Vec<Option<i64>> = events.iter().map(|e| e.turn.map(i64::from)).collect();
    let ats: Vec<i64> = events.iter().map(|e| e.at).collect();
    let kinds: Vec<&str> = events.iter().map(|e| e.kind).collect();
    let bodies: Vec<&str> = events.iter().map(|e| e.body.as_str()).collect();
    // In the given order, so the keys (`seq`) grow as the events were given.
    tx.exec(
        "INSERT INTO events (run_id, turn, at, type, body, run_seq)
         SELECT r, t, a, k, b, s
         FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[], $5::text[],
                     $6::bigint[]) WITH ORDINALITY AS u(r, t, a, k, b, s, n)
         ORDER BY n",
        &[&runs, &turns, &ats, &kinds, &bodies, &seqs],
    )?;
    Ok(seqs.into_iter().map(|s| s as u64).collect())
}

/// Fails with `RunLeaseLost` unless `token` holds the run's lease; the run's row stays
/// locked to the end of the transaction, so nobody takes the lease meanwhile.
pub(super) fn check_run_lease(tx: &mut Tx<'_>, run: &RunId, token: &str) -> Result<()> {
    let row = tx
        .opt(
            "SELECT lease_token FROM runs WHERE id = $1 FOR UPDATE",
            &[&run.0],
        )?
        .ok_or_else(|| not_found(run))?;
    let held: Option<String> = get(&row, 0)?;
    if held.as_deref() == Some(token) {
        return Ok(());
    }
    fail(Error::RunLeaseLost {
        run: run.0.clone(),
        reason: "another process took the run over after this one's lease expired".into(),
    })
}

pub(super) fn try_lease_run(
    tx: &mut Tx<'_>,
    run: &RunId,
    owner: &str,
    token: &str,
    db_now: i64,
    lease_ms: i64,
    take_over: bool,
) -> Result<std::result::Result<(), LeaseHolder>> {
    let taken = tx.exec(
        "UPDATE runs SET lease_token = $1, lease_owner = $2, lease_expires_at = $3
         WHERE id = $4 AND (lease_token IS NULL OR lease_expires_at < $5 OR $6)",
        &[
            &token,
            &owner,
            &db_now.saturating_add(lease_ms),
            &run.0,
            &db_now,
            &take_over,
        ],
    )?;
    if taken == 1 {
        return Ok(Ok(()));
    }
    let row = tx
        .opt(
            "SELECT lease_owner, lease_expires_at FROM runs WHERE id = $1",
            &[&run.0],
        )?
        .ok_or_else(|| not_found(run))?;
    let owner: Option<String> = get(&row, 0)?;
    let expires: Option<i64> = get(&row, 1)?;
    Ok(Err(LeaseHolder {
        owner: owner.unwrap_or_default(),
        expires_at: Timestamp(expires.unwrap_or(0)),
    }))
}

pub(super) fn renew_run_lease(
    tx: &mut Tx<'_>,
    run: &RunId,
    token: &str,
    db_now: i64,
    lease_ms: i64,
) -> Result<()> {
    check_run_lease(tx, run, token)?;
    tx.exec(
        "UPDATE runs SET lease_expires_at = $1 WHERE id = $2 AND lease_token = $3",
        &[&db_now.saturating_add(lease_ms), &run.0, &token],
    )?;
    Ok(())
}

pub(super) fn release_run_lease(tx: &mut Tx<'_>, run: &RunId, token: &str) -> Result<()> {
    tx.exec(
        "UPDATE runs SET lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL
         WHERE id = $1 AND lease_token = $2",
        &[&run.0, &token],
    )?;
    Ok(())
}
