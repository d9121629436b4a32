//! A run's archive: every stored row that belongs to one run, as the store keeps it, so
//! the run moves from one database to another (SQLite ⇄ PostgreSQL) byte for byte.
//!
//! The rows are the tables' own columns. The JSON a column holds (a turn's record, an
//! event, a state record, the run's configuration) is carried as the text the store
//! wrote, never decoded and encoded again, so nothing in it is reordered, normalised or
//! rounded on the way. What an archive leaves out is what belongs to a process or a
//! database rather than to the run: leases (a moved run is held by nobody), cancel
//! requests, the store-wide event cursor and the row keys of the pool tables (the target
//! gives its own), and rows shared with other runs (declared pool usage, benches,
//! judgements of a job's group).
//!
//! On disk (`to_text`) it is one JSON document, `baton-archive/1`, with one row a line:
//! `{"format":…,"sha256":…,"archive":{"run":…,"records":[…],…}}`. `sha256` is the digest
//! of the archive's compact encoding, so a file cut short or changed after the export is
//! refused before anything is written.

use std::fmt::Write as _;

use baton_core::ids::RunId;
use baton_core::state::{ExecutionState, RecordKind, StateHeader};
use baton_core::turn::TurnRecord;
use baton_protocol::EventMsg as Event;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::codec::{from_json, push_record};
use crate::{Error, JobStatus, Result, RunStatus};

/// The format this build writes and reads.
pub const ARCHIVE_FORMAT: &str = "baton-archive/1";

/// Every stored row of one run. Rows are in the order the store reads them back (each
/// table by its key within the run), so two stores holding the same run give equal
/// archives, and equal text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunArchive {
    pub run: ArchivedRun,
    /// The current version of every state record.
    pub records: Vec<ArchivedRecord>,
    pub turns: Vec<ArchivedTurn>,
    /// The per-turn snapshots, as deltas.
    pub record_changes: Vec<ArchivedChange>,
    pub call_outputs: Vec<ArchivedOutput>,
    /// With their numbers in the run (`run_seq`), which the target keeps.
    pub events: Vec<ArchivedEvent>,
    pub worker_holds: Vec<ArchivedHold>,
    /// What the run's committed calls spent, against their pools.
    pub pool_calls: Vec<ArchivedPoolCall>,
    /// What calls of the run's uncommitted turns spent (`SpentBy::Turn`).
    pub pool_spend: Vec<ArchivedSpend>,
    pub pins: Vec<ArchivedPin>,
    /// The job whose run it is, if it is a job's.
    pub job: Option<ArchivedJob>,
}

/// The `runs` row, without its lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedRun {
    pub id: String,
    pub objective: String,
    pub status: String,
    pub turns: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub config: String,
    pub header: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedRecord {
    pub kind: String,
    pub ordinal: i64,
    pub id: String,
    pub body: String,
    /// The turn that last wrote it; `None` for the run's initial state.
    pub turn: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedTurn {
    pub turn: i64,
    pub worker: String,
    pub model: String,
    pub status: String,
    pub started_at: i64,
    pub finished_at: i64,
    pub record: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedChange {
    pub turn: i64,
    pub kind: String,
    pub ordinal: i64,
    pub id: String,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedOutput {
    pub turn: i64,
    pub call: i64,
    pub output: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedEvent {
    pub run_seq: i64,
    pub turn: Option<i64>,
    pub at: i64,
    #[serde(rename = "type")]
    pub kind: String,
    pub body: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedHold {
    pub worker: String,
    pub not_before: i64,
    pub asked_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedPoolCall {
    pub pool: String,
    pub turn: i64,
    pub call: i64,
    pub at: i64,
    pub tokens: i64,
    pub cost_micro_usd: i64,
    pub requests: i64,
    pub exhausted: bool,
    pub exhausted_until: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedSpend {
    pub pool: String,
    pub turn: Option<i64>,
    pub call: i64,
    pub at: i64,
    pub tokens: i64,
    pub cost_micro_usd: i64,
    pub requests: i64,
    pub exhausted: bool,
    pub exhausted_until: Option<i64>,
    pub recorded_at: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedPin {
    pub turn: i64,
    pub seat: String,
    pub worker: String,
    pub model: String,
    pub family: String,
    pub pool: String,
    pub phase: String,
    pub at: i64,
    pub fractions: String,
    pub reason: String,
    pub excluded: Option<String>,
}

/// The `jobs` row of a job's run, without its lease. A job a worker was running when
/// the archive was made is archived as the store gives a held job back (`release_job`):
/// `queued`, its run and attempts kept.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArchivedJob {
    pub id: String,
    pub group: String,
    pub status: String,
    pub spec: String,
    pub attempts: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub outbox: Option<String>,
    pub error: Option<String>,
    pub judgement: Option<String>,
}

impl ArchivedJob {
    /// As the archive carries it: nobody holds a moved job.
    pub(crate) fn unheld(mut self) -> ArchivedJob {
        if self.status == JobStatus::Running.as_str() {
            self.status = JobStatus::Queued.as_str().to_string();
        }
        self
    }
}

/// What `Store::import_run` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Imported {
    /// Every row of the archive was written, in one transaction.
    Written,
    /// The database already held the run, identical to the archive: nothing was written.
    AlreadyPresent,
}

/// The file's envelope: the format first, so a reader of another version is told so
/// rather than that the rows do not parse.
#[derive(Deserialize)]
struct Head {
    format: Option<serde_json::Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Doc {
    #[allow(dead_code)] // Checked through `Head`.
    format: String,
    sha256: String,
    archive: RunArchive,
}

fn corrupt(detail: impl Into<String>) -> Error {
    Error::ArchiveCorrupt {
        detail: detail.into(),
    }
}

fn compact<T: Serialize + ?Sized>(value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| corrupt(format!("cannot be encoded: {e}")))
}

impl RunArchive {
    pub fn run_id(&self) -> RunId {
        RunId(self.run.id.clone())
    }

    /// The digest that `to_text` records and `from_slice` checks.
    fn digest(&self) -> Result<String> {
        Ok(hex::encode(Sha256::digest(compact(self)?.as_bytes())))
    }

    /// The archive as a file: `baton-archive/1`, one row a line, ending in a newline.
    pub fn to_text(&self) -> Result<String> {
        let mut out = format!(
            "{{\"format\":\"{ARCHIVE_FORMAT}\",\"sha256\":\"{}\",\n\"archive\":{{\"run\":{}",
            self.digest()?,
            compact(&self.run)?
        );
        table(&mut out, "records", &self.records)?;
        table(&mut out, "turns", &self.turns)?;
        table(&mut out, "record_changes", &self.record_changes)?;
        table(&mut out, "call_outputs", &self.call_outputs)?;
        table(&mut out, "events", &self.events)?;
        table(&mut out, "worker_holds", &self.worker_holds)?;
        table(&mut out, "pool_calls", &self.pool_calls)?;
        table(&mut out, "pool_spend", &self.pool_spend)?;
        table(&mut out, "pins", &self.pins)?;
        let _ = write!(out, ",\n\"job\":{}}}}}\n", compact(&self.job)?);
        Ok(out)
    }

    /// Reads a file `to_text` wrote, and checks it whole (see `check`): one cut short,
    /// changed since, or of another format is refused, naming what is wrong.
    pub fn from_slice(bytes: &[u8]) -> Result<RunArchive> {
        let head: Head = serde_json::from_slice(bytes).map_err(|e| {
            corrupt(if e.is_eof() {
                format!("it ends before its last row ({e}): the file was cut short")
            } else {
                format!("it is not a JSON document ({e})")
            })
        })?;
        match head.format {
            Some(serde_json::Value::String(f)) if f == ARCHIVE_FORMAT => {}
            Some(serde_json::Value::String(f)) if f.starts_with("baton-run/") => {
                return Err(corrupt(format!(
                    "it is a report ({f}, what `baton export --format json` writes), which does not hold everything a run needs; export the run with `--format archive`"
                )));
            }
            Some(serde_json::Value::String(found)) => {
                return Err(Error::ArchiveVersion {
                    found,
                    supported: ARCHIVE_FORMAT,
                });
            }
            _ => {
                return Err(corrupt(
                    "it has no \"format\": it is not a baton archive".to_string(),
                ));
            }
        }
        let doc: Doc = serde_json::from_slice(bytes)
            .map_err(|e| corrupt(format!("its rows do not read as {ARCHIVE_FORMAT}: {e}")))?;
        if doc.archive.digest()? != doc.sha256 {
            return Err(corrupt(
                "its rows do not match its sha256: it was changed or damaged after the export",
            ));
        }
        doc.archive.check()?;
        Ok(doc.archive)
    }

    /// Whether the rows make a run this baton can load and continue: every JSON column
    /// decodes as what it holds, the turns are 0, 1, 2 … as the run's count says, every
    /// row names a turn that is there, each kind's records and the events are numbered
    /// without gaps, and everything names this run. A backend checks it before it writes.
    pub fn check(&self) -> Result<()> {
        let run = self.run_id();
        let r = &self.run;
        if r.id.is_empty() {
            return Err(corrupt("its run has no id"));
        }
        if RunStatus::parse(&r.status).is_none() {
            return Err(corrupt(format!(
                "run {run} has an unknown status {:?}",
                r.status
            )));
        }
        from_json::<serde_json::Value>(&r.config, || format!("configuration of run {run}"))?;
        let header: StateHeader = from_json(&r.header, || format!("state header of run {run}"))?;
        if header.run_id != run {
            return Err(corrupt(format!(
                "the state header of run {run} names run {}",
                header.run_id
            )));
        }
        self.check_records(&run, header)?;
        let calls = self.check_turns(&run)?;
        let known = |turn: i64| usize::try_from(turn).ok().filter(|t| *t < calls.len());
        for c in &self.record_changes {
            known(c.turn).ok_or_else(|| no_turn("a record change", c.turn))?;
            RecordKind::parse(&c.kind)
                .ok_or_else(|| corrupt(format!("unknown record kind {:?}", c.kind)))?;
            from_json::<serde_json::Value>(&c.body, || {
                format!("{} record {} changed by turn {}", c.kind, c.id, c.turn)
            })?;
        }
        for o in &self.call_outputs {
            let turn = known(o.turn).ok_or_else(|| no_turn("a call's output", o.turn))?;
            if usize::try_from(o.call).map_or(true, |c| c >= calls[turn]) {
                return Err(corrupt(format!(
                    "turn {} has no call {} for its output",
                    o.turn, o.call
                )));
            }
        }
        for (i, e) in self.events.iter().enumerate() {
            if e.run_seq != i as i64 + 1 {
                return Err(corrupt(format!(
                    "event {} of run {run} is missing (found {})",
                    i + 1,
                    e.run_seq
                )));
            }
            let event: Event = from_json(&e.body, || format!("event {} of run {run}", e.run_seq))?;
            if event.run_id != run || event.kind.name() != e.kind {
                return Err(corrupt(format!(
                    "event {} of run {run} is a {} event of run {}",
                    e.run_seq,
                    event.kind.name(),
                    event.run_id
                )));
            }
        }
        for p in &self.pool_calls {
            known(p.turn).ok_or_else(|| no_turn("a pool call", p.turn))?;
        }
        for p in &self.pins {
            known(p.turn).ok_or_else(|| no_turn("a pin", p.turn))?;
            let texts = [
                ("fractions", Some(&p.fractions)),
                ("reason", Some(&p.reason)),
                ("exclusions", p.excluded.as_ref()),
            ];
            for (what, text) in texts {
                if let Some(text) = text {
                    from_json::<serde_json::Value>(text, || {
                        format!("{what} of the pin of seat {} at turn {}", p.seat, p.turn)
                    })?;
                }
            }
        }
        if let Some(job) = &self.job {
            self.check_job(job)?;
        }
        Ok(())
    }

    /// The state records load into the state the header starts, as `load_state` does.
    fn check_records(&self, run: &RunId, header: StateHeader) -> Result<()> {
        let mut state = ExecutionState::from_parts(header, Vec::new())
            .map_err(|e| corrupt(format!("the state header of run {run}: {e}")))?;
        let mut expected: Option<(&str, i64)> = None;
        for rec in &self.records {
            let kind = RecordKind::parse(&rec.kind)
                .ok_or_else(|| corrupt(format!("unknown record kind {:?}", rec.kind)))?;
            let next = match expected {
                Some((k, n)) if k == rec.kind => n,
                _ => 0,
            };
            if rec.ordinal != next {
                return Err(corrupt(format!(
                    "{} record {next} of run {run} is missing (found {})",
                    rec.kind, rec.ordinal
                )));
            }
            expected = Some((&rec.kind, next + 1));
            push_record(&mut state, kind, &rec.body).map_err(|e| {
                corrupt(format!("{} record {} of run {run}: {e}", rec.kind, rec.id))
            })?;
        }
        Ok(())
    }

    /// The turns, numbered 0, 1, 2 … up to the run's count; returns each one's calls.
    fn check_turns(&self, run: &RunId) -> Result<Vec<usize>> {
        if self.run.turns != self.turns.len() as i64 {
            return Err(corrupt(format!(
                "run {run} counts {} committed turns, and the archive holds {}",
                self.run.turns,
                self.turns.len()
            )));
        }
        let mut calls = Vec::with_capacity(self.turns.len());
        for (i, t) in self.turns.iter().enumerate() {
            let record: TurnRecord =
                from_json(&t.record, || format!("turn {} of run {run}", t.turn))?;
            if t.turn != i as i64 || i64::from(record.turn) != t.turn || record.run_id != *run {
                return Err(corrupt(format!(
                    "turn {i} of run {run} is missing (found turn {} of run {})",
                    record.turn, record.run_id
                )));
            }
            calls.push(record.calls.len());
        }
        Ok(calls)
    }

    fn check_job(&self, job: &ArchivedJob) -> Result<()> {
        match JobStatus::parse(&job.status) {
            None => Err(corrupt(format!(
                "job {} has an unknown status {:?}",
                job.id, job.status
            ))),
            Some(JobStatus::Running) => Err(corrupt(format!(
                "job {} is running, and an archive's job is never held",
                job.id
            ))),
            Some(_) => {
                for (what, text) in [
                    ("spec", Some(&job.spec)),
                    ("outbox", job.outbox.as_ref()),
                    ("judgement", job.judgement.as_ref()),
                ] {
                    if let Some(text) = text {
                        from_json::<serde_json::Value>(text, || {
                            format!("{what} of job {}", job.id)
                        })?;
                    }
                }
                Ok(())
            }
        }
    }

    /// What a reader tells two versions of a run apart by.
    pub fn summary(&self) -> String {
        let count = |n: usize, one: &str| match n {
            1 => format!("1 {one}"),
            n => format!("{n} {one}s"),
        };
        format!(
            "{}, {}, {}",
            self.run.status,
            count(self.turns.len(), "turn"),
            count(self.events.len(), "event")
        )
    }

    /// Where `other` (another version of the same run) first differs from this one.
    pub(crate) fn difference(&self, other: &RunArchive) -> String {
        let (here, there) = (self.summary(), other.summary());
        if here != there {
            return format!("this database has it {here}, the archive {there}");
        }
        let tables: [(&str, bool); 11] = [
            ("the run's row", self.run == other.run),
            ("its records", self.records == other.records),
            ("its turns", self.turns == other.turns),
            (
                "its record changes",
                self.record_changes == other.record_changes,
            ),
            ("its call outputs", self.call_outputs == other.call_outputs),
            ("its events", self.events == other.events),
            ("its worker holds", self.worker_holds == other.worker_holds),
            ("its pool calls", self.pool_calls == other.pool_calls),
            ("its pool spend", self.pool_spend == other.pool_spend),
            ("its pins", self.pins == other.pins),
            ("its job", self.job == other.job),
        ];
        let differ: Vec<&str> = tables
            .iter()
            .filter(|(_, same)| !same)
            .map(|(name, _)| *name)
            .collect();
        format!("both {here}, but {} differ", differ.join(", "))
    }
}

fn no_turn(what: &str, turn: i64) -> Error {
    corrupt(format!(
        "{what} names turn {turn}, which the archive does not hold"
    ))
}

/// `,\n"name":[` then one row a line.
fn table<T: Serialize>(out: &mut String, name: &str, rows: &[T]) -> Result<()> {
    let _ = write!(out, ",\n\"{name}\":[");
    for (i, row) in rows.iter().enumerate() {
        out.push_str(if i == 0 { "\n" } else { ",\n" });
        out.push_str(&compact(row)?);
    }
    out.push_str(if rows.is_empty() { "]" } else { "\n]" });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn archive() -> RunArchive {
        let run = RunId("r1".into());
        let state = ExecutionState::new(run.clone(), "o", &[]);
        RunArchive {
            run: ArchivedRun {
                id: run.0.clone(),
                objective: "o".into(),
                status: "active".into(),
                turns: 0,
                created_at: 1,
                updated_at: 2,
                config: "{\"b\":1,\"a\":2.50}".into(),
                header: serde_json::to_string(&state.header()).unwrap(),
            },
            records: vec![],
            turns: vec![],
            record_changes: vec![],
            call_outputs: vec![],
            events: vec![],
            worker_holds: vec![ArchivedHold {
                worker: "w\n1".into(),
                not_before: 5,
                asked_ms: 3,
            }],
            pool_calls: vec![],
            pool_spend: vec![],
            pins: vec![],
            job: None,
        }
    }

    /// The file is the compact encoding with a line break between rows (JSON text
    /// holds none of its own), and reads back as the same archive, its JSON columns
    /// byte for byte (keys in their order, `2.50` not `2.5`).
    #[test]
    fn the_text_is_one_row_a_line_and_reads_back_the_same() {
        let a = archive();
        let text = a.to_text().unwrap();
        assert!(text.starts_with("{\"format\":\"baton-archive/1\",\"sha256\":\""));
        assert!(
            text.contains("\n\"worker_holds\":[\n{\"worker\":\"w\\n1\""),
            "{text}"
        );
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            doc["archive"].to_string().len(),
            compact(&a).unwrap().len(),
            "{text}"
        );
        assert_eq!(
            text.lines().skip(1).collect::<String>(),
            format!("\"archive\":{}}}", compact(&a).unwrap())
        );
        let back = RunArchive::from_slice(text.as_bytes()).unwrap();
        assert_eq!(back, a);
        assert_eq!(back.run.config, "{\"b\":1,\"a\":2.50}");
        assert_eq!(back.to_text().unwrap(), text);
    }

    #[test]
    fn a_cut_changed_foreign_or_newer_file_is_refused_saying_what_it_is() {
        let text = archive().to_text().unwrap();
        let refused = |bytes: &[u8]| RunArchive::from_slice(bytes).unwrap_err().to_string();

        let cut = refused(&text.as_bytes()[..text.len() - 10]);
        assert!(cut.contains("cut short"), "{cut}");
        let changed = refused(text.replace("\"w\\n1\"", "\"w\\n2\"").as_bytes());
        assert!(changed.contains("changed or damaged"), "{changed}");
        let newer = text.replace("baton-archive/1", "baton-archive/2");
        let err = RunArchive::from_slice(newer.as_bytes()).unwrap_err();
        assert!(
            matches!(&err, Error::ArchiveVersion { found, .. } if found == "baton-archive/2"),
            "{err}"
        );
        let report = refused(br#"{"format":"baton-run/1","run":{}}"#);
        assert!(report.contains("--format archive"), "{report}");
        assert!(refused(b"\xff\xfe").contains("not a JSON document"));
        assert!(refused(b"{}").contains("not a baton archive"));
    }

    /// An archive whose digest was made to match still has to be a run baton can load.
    #[test]
    fn rows_that_do_not_make_a_run_are_refused_even_with_a_matching_digest() {
        let mut a = archive();
        a.run.turns = 1;
        let err = RunArchive::from_slice(a.to_text().unwrap().as_bytes()).unwrap_err();
        assert!(
            err.to_string().contains("counts 1 committed turns"),
            "{err}"
        );
        let mut a = archive();
        a.run.header = a.run.header.replace("\"r1\"", "\"r2\"");
        let err = a.check().unwrap_err().to_string();
        assert!(err.contains("names run r2"), "{err}");
        let mut a = archive();
        a.job = Some(ArchivedJob {
            id: "j".into(),
            group: "g".into(),
            status: "running".into(),
            spec: "{}".into(),
            attempts: 1,
            created_at: 1,
            updated_at: 1,
            outbox: None,
            error: None,
            judgement: None,
        });
        assert!(a.check().unwrap_err().to_string().contains("never held"));
        assert!(a.job.take().unwrap().unheld().status == "queued");
    }
}
