//! Durable storage of runs, turns and events.
//!
//! `Store` is object-safe and held as `Arc<dyn Store>`. A turn is committed in one
//! transaction (invariant 8): its record (package, calls, claims, outcome, audit), the
//! state records it changed, the new state header and its events, or nothing. The commit
//! is fenced on the turn number, so no turn is ever committed twice.
//!
//! Backends live in their own modules with their own SQL and migrations: `sqlite` (the
//! embedded default) and `postgres` (many hosts on one server), chosen by the database's
//! `Location`. Their shared encoding is `codec`; a run moves from one to the other as its
//! `RunArchive` (`archive_run`, then `import_run`), every row as stored. Nothing in the
//! trait or `Error` names a backend's types:
//! each backend maps its own failures to the variants callers act on (`Busy`,
//! `DiskFull`, `Corrupt`, …, else `Backend`), and decides lease expiry by its own
//! database's clock.

use baton_core::ids::{RunId, Timestamp, WorkerId};
use baton_core::router::{Pin, PoolId, PoolUsage};
use baton_core::state::{ExecutionState, RecordChange, StateHeader};
use baton_core::turn::TurnRecord;
use baton_protocol::EventMsg as Event;
use serde::{Deserialize, Serialize};
use thiserror::Error;

mod archive;
pub mod cancel;
mod codec;
pub mod jobs;
mod location;
pub mod pools;
pub mod postgres;
pub mod signal;
pub mod sqlite;

pub use archive::{
    ARCHIVE_FORMAT, ArchivedChange, ArchivedEvent, ArchivedHold, ArchivedJob, ArchivedOutput,
    ArchivedPin, ArchivedPoolCall, ArchivedRecord, ArchivedRun, ArchivedSpend, ArchivedTurn,
    Imported, RunArchive,
};
pub use cancel::{CancelOutcome, CancelTarget};
pub use jobs::{ClaimOutcome, JobInfo, JobStatus, JudgementOutcome, JudgementRecord, NewJob};
pub use location::{Location, sqlite_path};
pub use pools::{
    Bench, BenchChange, BenchOutcome, BenchTarget, Estimate, LiveReservation, ManualUsage,
    PinFilter, ReservationId, ReserveOutcome, ReserveRequest, SpentBy, SpentCall, StoredPin,
    UsageMode, bench_set,
};

pub use postgres::{Migrated, PostgresStore, PostgresUrl};
pub use signal::JobSignal;
pub use sqlite::SqliteStore;

#[derive(Debug, Error)]
pub enum Error {
    #[error("no run matches \"{prefix}\"; `baton runs` lists the runs in this database")]
    RunNotFound { prefix: String },
    #[error("\"{prefix}\" matches {} runs ({}); type more of the id", candidates.len(), candidates.join(", "))]
    AmbiguousRun {
        prefix: String,
        candidates: Vec<String>,
    },
    #[error("run {run} already exists")]
    RunExists { run: String },
    /// An archive that cannot be imported as it is: cut short, changed since it was
    /// written, not an archive, or rows that do not make a run. Nothing was written.
    #[error(
        "the archive cannot be imported: {detail}. Nothing was written; export the run again (`baton export RUN --format archive --out FILE`)"
    )]
    ArchiveCorrupt { detail: String },
    /// An archive of a format this build does not read (a newer baton's). Nothing was
    /// written.
    #[error(
        "the archive is {found}, and this baton reads {supported} only; nothing was written. Import it with a baton that reads {found} (upgrade this one), or export the run again with this baton's version"
    )]
    ArchiveVersion {
        found: String,
        supported: &'static str,
    },
    /// The run of an archive is already in the database, and not as the archive has it
    /// (it went on in one place or the other). Runs are never overwritten; nothing was
    /// written.
    #[error(
        "run {run} is already in this database, and not as the archive has it: {detail}. Nothing was written: a run is never overwritten. Continue it where it went further, or import the archive into another database (--db)"
    )]
    ImportConflict { run: String, detail: String },
    /// The fence: the turn was already committed, or the state moved on under us.
    #[error("turn {turn} of run {run} was not committed: {reason}")]
    TurnConflict {
        run: String,
        turn: u32,
        reason: String,
    },
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// The database could not be opened for a reason none of the variants below name.
    #[error(
        "cannot open the database {path}: {detail}; check the path, or point --db (BATON_DB) at another file"
    )]
    Open { path: String, detail: String },
    /// A read found no database file (or an empty one): nothing was created to answer it.
    #[error(
        "there is no baton database at {path} yet; a command that writes creates it (`baton demo`, `baton run --objective \"…\" --task \"…\"`, `baton enqueue …`), or point --db (BATON_DB) at an existing one"
    )]
    NoDatabase { path: String },
    /// The file belongs to something else; baton neither reads nor writes it.
    #[error(
        "{path} is not a baton database ({detail}); baton leaves it untouched: point --db (BATON_DB) at a baton database or at a new file"
    )]
    NotBaton { path: String, detail: String },
    /// SQLITE_FULL: the disk (or the database's size limit) is full. Nothing of the
    /// failed write was committed.
    #[error(
        "the disk holding the database {path} is full; nothing of the failed write was committed. Free space on that disk (or move the database and point --db at it), then run the command again: committed turns are intact, and `baton resume` (a run) or `baton work` (a job) continues from the last one"
    )]
    DiskFull { path: String },
    /// SQLITE_READONLY, or the file exists but SQLite cannot open it or its `-wal`/`-shm`
    /// companions for writing (read-only file system, permissions).
    #[error(
        "the database {path} cannot be written (read-only file system, or no permission to write it or its directory, where SQLite keeps its -wal and -shm files); commands that only read (runs, state, history, export, jobs …) still work. To write, make it writable, or copy it elsewhere and point --db at the copy"
    )]
    ReadOnly { path: String },
    /// `--db`/`BATON_DB` named a database URL of a kind this build cannot open.
    #[error(
        "cannot use the database \"{url}\": {reason}. Supported forms: a file path, sqlite://PATH (sqlite:///ABSOLUTE/PATH) or file:PATH, naming an SQLite file; or postgres://[USER@]HOST[:PORT]/DATABASE[?schema=NAME] for a PostgreSQL server"
    )]
    UnsupportedUrl { url: String, reason: String },
    #[error(
        "database schema version {found} is newer than this baton understands ({supported}); upgrade baton"
    )]
    SchemaTooNew { found: i64, supported: i64 },
    /// A read-only open found a database from an older baton; only a writer migrates.
    #[error(
        "the database {path} has schema version {found}, older than this baton's ({supported}); reading it needs the upgrade that any baton command able to write it makes"
    )]
    SchemaTooOld {
        path: String,
        found: i64,
        supported: i64,
    },
    #[error("no job matches \"{prefix}\"; `baton jobs` lists them")]
    JobNotFound { prefix: String },
    #[error("\"{prefix}\" matches {} jobs ({}); type more of the id", candidates.len(), candidates.join(", "))]
    AmbiguousJob {
        prefix: String,
        candidates: Vec<String>,
    },
    /// The fence of every job write: another worker holds the job now.
    #[error("lost the lease on job {job}: {reason}")]
    LeaseLost { job: String, reason: String },
    /// The fence of a run's turns: another process advances the run now.
    #[error(
        "lost the lease on run {run}: {reason}; this process stopped, and the one that took the run over continues it (`baton history {run}` shows its turns)"
    )]
    RunLeaseLost { run: String, reason: String },
    #[error(
        "job {job} is {status}: only a failed or cancelled job can be requeued (`baton jobs` shows each job's state)"
    )]
    JobNotRequeueable { job: String, status: &'static str },
    /// The database server could not be reached, or the connection to it broke (a
    /// server restart, a network cut). A write in flight is either wholly committed or
    /// not at all; the fences make running the command again safe.
    #[error(
        "the database server {url} cannot be reached ({op}): {detail}. Nothing is half-written: a turn in flight committed whole or not at all. Check that PostgreSQL is running and reachable from this host, then run the command again: it continues from the last committed turn (`baton work` keeps retrying by itself)"
    )]
    Unreachable {
        url: String,
        op: &'static str,
        detail: String,
    },
    /// Another process held the database's write lock for longer than the store waits.
    /// Nothing of the operation was written; trying again is safe.
    #[error(
        "the database is busy: another process held its lock for longer than baton waits ({op}); nothing was written, so running the command again is safe"
    )]
    Busy { op: &'static str },
    /// The backend failed in a way none of the variants above name (a constraint a
    /// buggy caller broke, an I/O error). `op` is the store operation that failed.
    // The cause is shown in the message rather than returned by `source()`: a backend's
    // error is its own source (rusqlite's is), so anyhow would print it three times.
    #[error("database error in {op}: {cause}")]
    Backend {
        op: &'static str,
        cause: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl Error {
    /// A failure that goes away by itself (a server restart, a network cut, a lock held
    /// a little too long): nothing was written, and trying again later is safe.
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Unreachable { .. } | Error::Busy { .. })
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Has steps or turns left to run.
    Active,
    /// Every turn the policy planned has committed.
    Finished,
    /// Stopped to ask a human (e.g. three consecutive failed turns).
    Blocked,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Active => "active",
            RunStatus::Finished => "finished",
            RunStatus::Blocked => "blocked",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(RunStatus::Active),
            "finished" => Some(RunStatus::Finished),
            "blocked" => Some(RunStatus::Blocked),
            _ => None,
        }
    }
}

/// A run's row: identity, status and the configuration it was created with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: RunId,
    pub objective: String,
    pub status: RunStatus,
    /// Committed turns (successful and failed).
    pub turns: u32,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// The run's settings (roster, budgets, policy) as the engine stored them.
    pub config: serde_json::Value,
}

/// A job's lease, proven by its token: every write for a claimed job carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseFence {
    pub job: String,
    pub token: String,
}

/// Everything one turn writes, committed atomically.
#[derive(Debug, Clone)]
pub struct TurnCommit {
    pub record: TurnRecord,
    /// State header after the turn (plan, counters, last/next action, workers).
    pub header: StateHeader,
    /// Records the turn created or changed (see `ExecutionState::diff`).
    pub changes: Vec<RecordChange>,
    pub events: Vec<Event>,
    /// Run status after the turn.
    pub status: RunStatus,
    /// For a job's run: the lease that must still be held for the turn to commit.
    pub lease: Option<LeaseFence>,
    /// The run's own lease token, when the process advancing it holds one.
    pub run_lease: Option<String>,
    /// Delays providers asked for during the turn, per worker. Each replaces the
    /// worker's earlier hold, in the turn's transaction.
    pub holds: Vec<WorkerHold>,
    /// The pool of the turn's worker when the turn was made: every call of the turn
    /// counts against it (see `Store::pool_usage`). `None` when the roster has no pools.
    pub pool: Option<PoolId>,
    /// The seating of the turn's worker when the router made a new one for it (a held
    /// pin writes nothing): written in the turn's transaction, so a turn that does not
    /// commit leaves no pin behind.
    pub pins: Vec<Pin>,
    /// The headroom reserved for the turn (`Store::try_reserve`), released in the
    /// turn's transaction: from the commit on, the turn's calls count in its place.
    pub reservation: Option<ReservationId>,
}

/// A worker a provider asked baton not to call again before `not_before` (a 429's
/// `Retry-After`, an overload's delay). Kept with the run, so the next turn — in this
/// process or another — waits for it, or says why it will not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerHold {
    pub worker: WorkerId,
    /// Engine clock, like every timestamp in the store.
    pub not_before: Timestamp,
    /// The delay the provider asked for, in milliseconds.
    pub asked_ms: u64,
}

/// Who holds a run's lease, when another process does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseHolder {
    pub owner: String,
    /// By the store's clock, which every lease is measured on.
    pub expires_at: Timestamp,
}

/// A stored event with its position in the run's append-only log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredEvent {
    /// The event's number in its run: 1, 2, 3 … with no gaps, assigned in the
    /// transaction that wrote it (so a backend whose global counters skip values, as
    /// PostgreSQL's sequences do on rollback, still numbers each run densely).
    pub seq: u64,
    pub event: Event,
}

/// A position in the store's whole event log, across runs: `events_since` returns what
/// was committed after it. Opaque to callers (a backend chooses what it holds); 0 is
/// the start.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct EventCursor(pub i64);

/// One page of `events_since`: the events, and the cursor to ask from next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventPage {
    pub events: Vec<StoredEvent>,
    /// Where the next read starts (the cursor given, when the page is empty).
    pub next: EventCursor,
    /// Each event's own position, in the order of `events`: a client that stops after
    /// event `i` (a browser's SSE `Last-Event-ID`) resumes from `cursors[i]`.
    #[serde(default)]
    pub cursors: Vec<EventCursor>,
}

/// The durable store. Object-safe: the engine holds `Arc<dyn Store>`.
pub trait Store: Send + Sync {
    /// Creates a run with its initial state (no turns yet) and its `RunCreated` events.
    fn create_run(&self, info: &RunInfo, state: &ExecutionState, events: &[Event]) -> Result<()>;

    /// Every run, newest first.
    fn list_runs(&self) -> Result<Vec<RunInfo>>;

    /// The run whose id is `prefix` or starts with it; an error when none or several do.
    fn resolve_run(&self, prefix: &str) -> Result<RunId>;

    fn run_info(&self, run: &RunId) -> Result<RunInfo>;

    /// The canonical state after the last committed turn.
    fn load_state(&self, run: &RunId) -> Result<ExecutionState>;

    /// Commits one turn atomically. Fenced: succeeds only if `record.turn` equals the
    /// number of turns committed so far; otherwise `Error::TurnConflict` and nothing
    /// is written. Returns the `seq` each of `commit.events` was given.
    fn commit_turn(&self, commit: &TurnCommit) -> Result<Vec<u64>>;

    /// Appends events outside a turn (run finished, blocked) and sets the run status.
    /// Returns the `seq` each event was given.
    fn update_run(&self, run: &RunId, status: RunStatus, events: &[Event]) -> Result<Vec<u64>>;

    /// Appends events about a run that change nothing else (a job claimed, a lease
    /// lost). Returns the `seq` each was given.
    fn append_events(&self, run: &RunId, events: &[Event]) -> Result<Vec<u64>>;

    /// Replaces the configuration a run is opened with (its roster and settings), with
    /// the events that record the change, in one transaction. Returns the `seq` each
    /// event was given.
    fn set_run_config(
        &self,
        run: &RunId,
        config: &serde_json::Value,
        events: &[Event],
    ) -> Result<Vec<u64>>;

    /// Every committed turn of a run, in order.
    fn turns(&self, run: &RunId) -> Result<Vec<TurnRecord>>;

    /// One committed turn.
    fn turn(&self, run: &RunId, turn: u32) -> Result<Option<TurnRecord>>;

    /// The state changes a turn made (its per-turn snapshot, as a delta).
    fn turn_changes(&self, run: &RunId, turn: u32) -> Result<Vec<RecordChange>>;

    /// The run's events with `seq > after`, in order.
    fn events(&self, run: &RunId, after: u64) -> Result<Vec<StoredEvent>>;

    /// At most `limit` events of every run, committed after `cursor`, in the order they
    /// were committed (a live feed: an SSE stream, a dashboard, a follower).
    fn events_since(&self, cursor: EventCursor, limit: usize) -> Result<EventPage>;

    /// The latest hold of every worker of the run that has one (see `WorkerHold`).
    fn worker_holds(&self, run: &RunId) -> Result<Vec<WorkerHold>>;

    /// Records holds outside a turn: a provider's delay learnt by a turn that was
    /// interrupted and not committed is still the provider's word.
    fn put_worker_holds(&self, run: &RunId, holds: &[WorkerHold]) -> Result<()>;

    /// Raw model outputs of all committed turns before `turn`, for the transfer audit.
    fn prior_outputs(&self, run: &RunId, before_turn: u32) -> Result<Vec<String>>;

    /// Puts a job on the queue.
    fn enqueue_job(&self, job: &NewJob) -> Result<()>;

    /// Every job, newest first.
    fn list_jobs(&self) -> Result<Vec<JobInfo>>;

    /// The job whose id is `prefix` or starts with it.
    fn resolve_job(&self, prefix: &str) -> Result<String>;

    fn job(&self, id: &str) -> Result<JobInfo>;

    /// Claims the oldest queued job, or else the oldest running job whose lease expired
    /// (its worker died), in one transaction: the job gets `token`, `owner` and a lease
    /// of `lease_ms`. `Skipped` when there is nothing to claim.
    ///
    /// Leases are measured on the database's clock, never the caller's: the lease runs
    /// `lease_ms` past the store's now, and "expired" means before the store's now, so
    /// processes whose clocks disagree still agree on who holds a job. `now` (the
    /// engine's clock) only stamps the job's `updated_at`.
    fn try_claim_job(
        &self,
        owner: &str,
        token: &str,
        now: Timestamp,
        lease_ms: i64,
    ) -> Result<ClaimOutcome>;

    /// Extends a held lease (the heartbeat) to `lease_ms` past the store's now.
    /// `LeaseLost` when the token no longer holds it. `now` stamps `updated_at`.
    fn renew_lease(&self, fence: &LeaseFence, now: Timestamp, lease_ms: i64) -> Result<()>;

    /// Records the run a job's turns belong to. Fenced.
    fn set_job_run(&self, fence: &LeaseFence, run: &RunId, now: Timestamp) -> Result<()>;

    /// Creates a job's run and records it on the job in one transaction, so a process
    /// killed in between leaves neither an orphan run nor a job without its run. Fenced.
    fn create_job_run(
        &self,
        fence: &LeaseFence,
        info: &RunInfo,
        state: &ExecutionState,
        events: &[Event],
    ) -> Result<()>;

    /// Gives a held job back to the queue (a worker stopping on an interrupt): it is
    /// `queued` again at once, its run and attempts kept. Fenced.
    fn release_job(&self, fence: &LeaseFence, now: Timestamp) -> Result<()>;

    /// Puts a `failed` job back on the queue to continue from its last committed turn.
    /// `JobNotRequeueable` for a job in any other state.
    fn requeue_job(&self, id: &str, now: Timestamp) -> Result<()>;

    /// Ends the lease of a running job held by `owner` (a process known to be dead), so
    /// the next claim takes it at once (it expires by the store's clock). False when
    /// `owner` no longer holds it. `now` stamps `updated_at`.
    fn expire_job_lease(&self, id: &str, owner: &str, now: Timestamp) -> Result<bool>;

    /// Ends a job: `Outbox` with its result, or `Failed` with the reason. Fenced.
    fn finish_job(
        &self,
        fence: &LeaseFence,
        status: JobStatus,
        outbox: Option<&serde_json::Value>,
        error: Option<&str>,
        now: Timestamp,
    ) -> Result<()>;

    /// Takes the run's lease for `owner` for `lease_ms` past the store's now: granted
    /// when nobody holds it, it expired by the store's clock, or `take_over` (its holder
    /// is known to be dead). Otherwise returns who holds it.
    fn try_lease_run(
        &self,
        run: &RunId,
        owner: &str,
        token: &str,
        lease_ms: i64,
        take_over: bool,
    ) -> Result<Result<(), LeaseHolder>>;

    /// Extends a held run lease to `lease_ms` past the store's now, and with it the
    /// reservations held under it (see `try_reserve`). `RunLeaseLost` when the token no
    /// longer holds it.
    fn renew_run_lease(&self, run: &RunId, token: &str, lease_ms: i64) -> Result<()>;

    /// Gives a run lease up (a no-op when the token no longer holds it), and the
    /// reservations held under it.
    fn release_run_lease(&self, run: &RunId, token: &str) -> Result<()>;

    /// Who holds the run's lease now, by the store's clock (`None` when nobody does:
    /// released, or expired). `baton cancel` watches it to say when a run stopped.
    fn run_lease_holder(&self, run: &RunId) -> Result<Option<LeaseHolder>>;

    /// Records the judge's verdict on a group of candidate jobs and marks them judged
    /// (and appends it to the group's [`judgements`](Store::judgements)).
    fn record_judgement(
        &self,
        group: &str,
        judgement: &serde_json::Value,
        now: Timestamp,
    ) -> Result<()>;

    /// Records a judge of `group` that got no usable verdict (its calls, cost, events
    /// and error, as `failed` says): appended to the group's judgements, the jobs left
    /// as they are so the group can be judged again. `JobNotFound` for an unknown group.
    fn record_failed_judgement(
        &self,
        group: &str,
        failed: &serde_json::Value,
        now: Timestamp,
    ) -> Result<()>;

    /// Every judge of `group` recorded, with a verdict or without, oldest first.
    fn judgements(&self, group: &str) -> Result<Vec<JudgementRecord>>;

    /// Asks whoever holds `target` to stop it (see [`CancelOutcome`]). A run's or a
    /// job's request is for the lease held now; a job nobody holds is cancelled here.
    fn request_cancel(&self, target: &CancelTarget, now: Timestamp) -> Result<CancelOutcome>;

    /// Whether `target` is asked to stop: for a run or a job, under the lease `token`
    /// (a request for an earlier holder does not count); `None` for a process.
    fn cancel_requested(&self, target: &CancelTarget, token: Option<&str>) -> Result<bool>;

    /// Forgets the requests for `target` (the holder stopped; a process starting
    /// under an owner name a dead process used must not stop at once).
    fn clear_cancel(&self, target: &CancelTarget) -> Result<()>;

    /// What `pool` used in the window `[start, end)` (the pool's `Window::bounds`):
    /// the provider-reported spend of every committed call made in it by a worker of
    /// the pool (`TurnCommit::pool`) and of the calls recorded by `record_spend`,
    /// plus the usage declared for it (the latest `Set`
    /// row in the window replaces everything before it). `exhausted_until` is the
    /// latest reset among the spent-quota marks that reach into the window; a mark
    /// that named no reset holds to the end of the window it was made in (`end`).
    fn pool_usage(&self, pool: &PoolId, start: Timestamp, end: Timestamp) -> Result<PoolUsage>;

    /// Counts `calls` that no committed turn carries against `pool` (see `SpentBy`),
    /// each in the window its start falls in. A call that reached no provider spent
    /// nothing (`CallSpend::of`) and leaves no row; one that the committed turn of the
    /// same number carries (same start and spend: its commit landed though it was
    /// reported failed) was counted with that turn and is not counted again.
    fn record_spend(
        &self,
        pool: &PoolId,
        by: &SpentBy,
        calls: &[SpentCall],
        recorded_at: Timestamp,
    ) -> Result<()>;

    /// Declares usage for a pool (work done outside baton, or a dashboard's reading).
    fn record_usage(&self, usage: &ManualUsage) -> Result<()>;

    /// Every usage row declared for `pool`, oldest first.
    fn declared_usage(&self, pool: &PoolId) -> Result<Vec<ManualUsage>>;

    /// Benches or unbenches a pool or a worker, with who and when; `Unchanged` (and
    /// nothing recorded) when it already was so.
    fn set_bench(&self, change: &BenchChange) -> Result<BenchOutcome>;

    /// The benches in force, pools first, each by id.
    fn benches(&self) -> Result<Vec<Bench>>;

    /// What a routed turn reads at its hand-off, in one read: each pool's usage in its
    /// window (as `pool_usage`, in the order given) plus the headroom that live
    /// reservations made in the window hold (`try_reserve`: turns in flight, in any
    /// process on any host), and the benches in force.
    fn floor_reading(
        &self,
        windows: &[(PoolId, Timestamp, Timestamp)],
    ) -> Result<(Vec<PoolUsage>, Vec<Bench>)>;

    /// Reserves headroom of `request.pool` for one turn, so that two processes (or two
    /// hosts, or two lanes) that seat at once cannot both spend the last of a pool.
    /// Under a lock that serialises every reserver of the pool on this database, it
    /// reads what the pool used in the window plus the live reservations of other turns
    /// and, while that leaves headroom on every metered dimension (the router's rule),
    /// records `request.estimate` as held until the turn commits (`TurnCommit::
    /// reservation`), is released (`release_reservation`, or with the run lease named)
    /// or expires (`ttl_ms` past the store's now, extended by the lease's heartbeat).
    /// `Short` otherwise, with the usage that made it so.
    fn try_reserve(&self, request: &ReserveRequest) -> Result<ReserveOutcome>;

    /// Gives a reservation's headroom back (its turn ended without committing; its calls,
    /// if any, are counted by `record_spend`). A no-op once it was committed, released
    /// or expired.
    fn release_reservation(&self, id: ReservationId) -> Result<()>;

    /// Every reservation that holds now by the store's clock, oldest first.
    fn live_reservations(&self) -> Result<Vec<LiveReservation>>;

    /// The pins that match `filter`, in the order they were written.
    fn pins(&self, filter: &PinFilter) -> Result<Vec<StoredPin>>;

    /// Every stored row of `run`, as the store keeps it (see `RunArchive`), read in one
    /// snapshot: what `import_run` writes into another database to move the run there.
    fn archive_run(&self, run: &RunId) -> Result<RunArchive>;

    /// Writes the run of `archive` (checked with `RunArchive::check` first) in one
    /// transaction, every row or none, keeping each event's number in its run. Only
    /// inserts: `AlreadyPresent` (nothing written) when the run is here exactly as the
    /// archive has it, `ImportConflict` when it is here otherwise. The run comes
    /// unheld: no lease, no cancel request.
    fn import_run(&self, archive: &RunArchive) -> Result<Imported>;

    /// What wakes an idle claimer when another process enqueues, releases or requeues a
    /// job, or `None` when this backend cannot hear that (the claimer polls).
    fn job_signal(&self) -> Option<std::sync::Arc<JobSignal>> {
        None
    }

    /// What wakes a follower of the event log (`baton serve`) when any process commits
    /// events, or `None` when this backend cannot hear that (the follower polls).
    fn event_signal(&self) -> Option<std::sync::Arc<JobSignal>> {
        None
    }
}
