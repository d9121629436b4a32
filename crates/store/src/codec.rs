//! What both backends store, encoded and decoded the same way: records, turns and
//! events as JSON text (so a run moves between backends byte for byte), and the rows
//! read back, decoded into the engine's types with `Error::Corrupt` naming what did
//! not decode.

use baton_core::ids::{RunId, Timestamp};
use baton_core::state::{ExecutionState, RecordChange, RecordKind};
use baton_protocol::EventMsg as Event;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::jobs::{JobInfo, JobStatus};
use crate::{Error, RunInfo, RunStatus, TurnCommit};

pub(crate) fn to_json<T: Serialize + ?Sized>(
    value: &T,
    what: impl FnOnce() -> String,
) -> crate::Result<String> {
    serde_json::to_string(value).map_err(|e| Error::Corrupt {
        what: what(),
        detail: format!("cannot be encoded: {e}"),
    })
}

pub(crate) fn from_json<T: DeserializeOwned>(
    text: &str,
    what: impl FnOnce() -> String,
) -> crate::Result<T> {
    serde_json::from_str(text).map_err(|e| Error::Corrupt {
        what: what(),
        detail: e.to_string(),
    })
}

pub(crate) struct EncodedRecord {
    pub(crate) kind: &'static str,
    pub(crate) ordinal: u32,
    pub(crate) id: String,
    pub(crate) body: String,
}

pub(crate) struct EncodedEvent {
    pub(crate) run_id: String,
    pub(crate) turn: Option<u32>,
    pub(crate) at: i64,
    pub(crate) kind: &'static str,
    pub(crate) body: String,
}

pub(crate) struct EncodedRun<'a> {
    pub(crate) info: &'a RunInfo,
    /// From the state, not `info`: the fence compares against the state's turn count.
    pub(crate) turns: u32,
    pub(crate) config: String,
    pub(crate) header: String,
    pub(crate) records: Vec<EncodedRecord>,
    pub(crate) events: Vec<EncodedEvent>,
}

impl<'a> EncodedRun<'a> {
    pub(crate) fn new(
        info: &'a RunInfo,
        state: &ExecutionState,
        events: &[Event],
    ) -> crate::Result<EncodedRun<'a>> {
        let run = &info.id;
        // Diffing against an empty state yields every record with its ordinal.
        let empty = ExecutionState::new(state.run_id.clone(), state.objective.clone(), &[]);
        Ok(EncodedRun {
            info,
            turns: state.turns,
            config: to_json(&info.config, || format!("config of run {run}"))?,
            header: to_json(&state.header(), || format!("state header of run {run}"))?,
            records: encode_records(run, &state.diff(&empty))?,
            events: encode_events(events)?,
        })
    }
}

pub(crate) struct EncodedTurn<'a> {
    pub(crate) commit: &'a TurnCommit,
    /// The `TurnRecord` without its calls' raw outputs, which are stored apart.
    pub(crate) record: String,
    /// `(call index, raw output)` for the calls that returned one.
    pub(crate) outputs: Vec<(u32, String)>,
    pub(crate) header: String,
    pub(crate) changes: Vec<EncodedRecord>,
    pub(crate) events: Vec<EncodedEvent>,
}

impl<'a> EncodedTurn<'a> {
    pub(crate) fn new(commit: &'a TurnCommit) -> crate::Result<EncodedTurn<'a>> {
        let rec = &commit.record;
        let (run, turn) = (&rec.run_id, rec.turn);
        let mut stripped = rec.clone();
        let outputs = stripped
            .calls
            .iter_mut()
            .enumerate()
            .filter_map(|(i, call)| call.output.take().map(|out| (i as u32, out)))
            .collect();
        Ok(EncodedTurn {
            commit,
            record: to_json(&stripped, || format!("turn {turn} of run {run}"))?,
            outputs,
            header: to_json(&commit.header, || {
                format!("state header after turn {turn} of run {run}")
            })?,
            changes: encode_records(run, &commit.changes)?,
            events: encode_events(&commit.events)?,
        })
    }
}

fn encode_records(run: &RunId, changes: &[RecordChange]) -> crate::Result<Vec<EncodedRecord>> {
    changes
        .iter()
        .map(|c| {
            Ok(EncodedRecord {
                kind: c.kind.as_str(),
                ordinal: c.ordinal,
                id: c.id.clone(),
                body: to_json(&c.body, || {
                    format!("{} record {} of run {run}", c.kind.as_str(), c.id)
                })?,
            })
        })
        .collect()
}

pub(crate) fn encode_events(events: &[Event]) -> crate::Result<Vec<EncodedEvent>> {
    events
        .iter()
        .map(|e| {
            Ok(EncodedEvent {
                run_id: e.run_id.0.clone(),
                turn: e.turn,
                at: e.at.0,
                kind: e.kind.name(),
                body: to_json(e, || format!("{} event of run {}", e.kind.name(), e.run_id))?,
            })
        })
        .collect()
}

/// A `runs` row before its JSON and enum columns are decoded.
pub(crate) struct RawRun {
    pub(crate) id: String,
    pub(crate) objective: String,
    pub(crate) status: String,
    pub(crate) turns: u32,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) config: String,
}

pub(crate) fn decode_run(raw: RawRun) -> crate::Result<RunInfo> {
    let status = RunStatus::parse(&raw.status).ok_or_else(|| Error::Corrupt {
        what: format!("status of run {}", raw.id),
        detail: format!("unknown status {:?}", raw.status),
    })?;
    let config = from_json(&raw.config, || format!("config of run {}", raw.id))?;
    Ok(RunInfo {
        id: RunId(raw.id),
        objective: raw.objective,
        status,
        turns: raw.turns,
        created_at: Timestamp(raw.created_at),
        updated_at: Timestamp(raw.updated_at),
        config,
    })
}

/// A `records` or `record_changes` row: `kind, ordinal, id, body` (the first four
/// columns), and the turn that wrote it.
pub(crate) struct RawRecord {
    pub(crate) kind: String,
    pub(crate) ordinal: u32,
    pub(crate) id: String,
    pub(crate) body: String,
    /// `None` for records of the run's initial state.
    pub(crate) turn: Option<u32>,
}

impl RawRecord {
    pub(crate) fn what(&self, run: &RunId) -> String {
        let by = self
            .turn
            .map_or_else(|| "the initial state".to_string(), |t| format!("turn {t}"));
        format!(
            "{} record {} (#{}) of run {run}, written by {by}",
            self.kind, self.id, self.ordinal
        )
    }

    pub(crate) fn kind(&self, run: &RunId) -> crate::Result<RecordKind> {
        RecordKind::parse(&self.kind).ok_or_else(|| Error::Corrupt {
            what: self.what(run),
            detail: format!("unknown record kind {:?}", self.kind),
        })
    }
}
/// Appends one record, decoded from its JSON, to its category.
pub(crate) fn push_record(
    state: &mut ExecutionState,
    kind: RecordKind,
    body: &str,
) -> serde_json::Result<()> {
    use serde_json::from_str;
    match kind {
        RecordKind::Decision => state.decisions.push(from_str(body)?),
        RecordKind::Completed => state.completed.push(from_str(body)?),
        RecordKind::Artifact => state.artifacts.push(from_str(body)?),
        RecordKind::Issue => state.issues.push(from_str(body)?),
        RecordKind::FailedAttempt => state.failed_attempts.push(from_str(body)?),
        RecordKind::Assumption => state.assumptions.push(from_str(body)?),
        RecordKind::Handoff => state.handoffs.push(from_str(body)?),
        RecordKind::Finding => state.findings.push(from_str(body)?),
        RecordKind::Verdict => state.verdicts.push(from_str(body)?),
        RecordKind::PlanVersion => state.plan_versions.push(from_str(body)?),
    }
    Ok(())
}

/// UUIDv7 ids begin with their creation time, so ids made in the same minute share
/// their first dozen digits while their last ones are random: an id's end names it as
/// well as its start. Tried only when no id starts with what was typed, and only for
/// four characters or more, so a short typo does not pick a run at random.
pub(crate) fn is_suffix_worth_trying(typed: &str) -> bool {
    typed.chars().count() >= 4
}

pub(crate) struct RawJob {
    pub(crate) id: String,
    pub(crate) group: String,
    pub(crate) status: String,
    pub(crate) spec: String,
    pub(crate) run_id: Option<String>,
    pub(crate) attempts: u32,
    pub(crate) lease_owner: Option<String>,
    pub(crate) lease_expires_at: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
    pub(crate) outbox: Option<String>,
    pub(crate) error: Option<String>,
    pub(crate) judgement: Option<String>,
}

impl RawJob {
    pub(crate) fn decode(self) -> crate::Result<JobInfo> {
        let id = self.id;
        let what = |field: &str| format!("{field} of job {id}");
        let status = JobStatus::parse(&self.status).ok_or_else(|| Error::Corrupt {
            what: what("status"),
            detail: format!("unknown status \"{}\"", self.status),
        })?;
        let spec = from_json(&self.spec, || what("spec"))?;
        let outbox = match self.outbox {
            Some(t) => Some(from_json(&t, || what("outbox"))?),
            None => None,
        };
        let judgement = match self.judgement {
            Some(t) => Some(from_json(&t, || what("judgement"))?),
            None => None,
        };
        Ok(JobInfo {
            group: self.group,
            status,
            spec,
            run_id: self.run_id.map(RunId),
            attempts: self.attempts,
            lease_owner: self.lease_owner,
            lease_expires_at: self.lease_expires_at.map(Timestamp),
            created_at: Timestamp(self.created_at),
            updated_at: Timestamp(self.updated_at),
            outbox,
            error: self.error,
            judgement,
            id,
        })
    }
}
