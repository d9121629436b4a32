//! PostgreSQL backend: many processes on many hosts share one database.
//!
//! Same layout and the same fences as SQLite's (see `crate::sqlite`), in one schema of
//! the database (`baton` unless the URL says `?schema=NAME`). What differs is how
//! concurrent writers are kept apart, since PostgreSQL has many at once where SQLite has
//! one:
//!
//! - A turn's fence is the `UPDATE … WHERE turns = N` on its run's row: a second commit
//!   of the same turn waits for the first one's row lock, then finds the count moved.
//! - A job's or a run's lease is checked with its row locked (`FOR UPDATE`) in the
//!   writing transaction, so no claim can slip in between the check and the commit.
//! - Claims take the oldest claimable job with `FOR UPDATE SKIP LOCKED`: claimers never
//!   wait for one another, and never take the same job.
//! - Events are written under one transaction-scoped advisory lock per schema, so their
//!   store-wide keys grow in commit order and `events_since` never misses one that
//!   commits late with a smaller key.
//! - Every lease is measured on the database server's clock.
//!
//! The client is the synchronous `postgres` crate (the engine is synchronous); each
//! store keeps a few connections, each with its own prepared statements.

mod archive;
mod conn;
mod jobs;
mod listen;
mod pools;
mod reserve;
mod runs;
mod schema;
mod url;

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use baton_core::ids::{RunId, Timestamp};
use baton_core::router::{PoolId, PoolUsage};
use baton_core::state::{ExecutionState, RecordChange};
use baton_core::turn::TurnRecord;
use baton_protocol::EventMsg as Event;

use crate::codec::{EncodedRun, EncodedTurn, encode_events, to_json};
use crate::{
    Bench, BenchChange, BenchOutcome, CancelOutcome, CancelTarget, ClaimOutcome, Error,
    EventCursor, EventPage, JobInfo, JobSignal, JobStatus, JudgementRecord, LeaseFence,
    LeaseHolder, LiveReservation, ManualUsage, NewJob, PinFilter, ReservationId, ReserveOutcome,
    ReserveRequest, RunInfo, RunStatus, SpentBy, SpentCall, Store, StoredEvent, StoredPin,
    TurnCommit, WorkerHold,
};

use conn::Conn;
pub(crate) use conn::{Result, Tx, fail, get, to_u32};
pub use schema::SCHEMA_VERSION;
pub use url::PostgresUrl;

/// The PostgreSQL store. `Send + Sync`; share it as `Arc<dyn Store>`.
pub struct PostgresStore {
    url: PostgresUrl,
    idle: Mutex<Vec<Conn>>,
    /// Added to the database's clock; 0 except in tests (see `set_clock_offset`).
    clock_offset_ms: AtomicI64,
    /// Bumped by the `LISTEN` thread, started on first use (`Store::job_signal`).
    signal: OnceLock<Arc<JobSignal>>,
    /// The same for committed events (`Store::event_signal`).
    event_signal: OnceLock<Arc<JobSignal>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// What `PostgresStore::migrate` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Migrated {
    pub from: i64,
    pub to: i64,
}

impl PostgresStore {
    /// Connects and brings the schema up to this build's version (creating it when it
    /// does not exist). A schema holding another application's tables is refused.
    pub fn open(url: &PostgresUrl) -> crate::Result<PostgresStore> {
        let store = Self::unmigrated(url);
        store.migrate()?;
        Ok(store)
    }

    /// Connects only to read: never creates or migrates. `NoDatabase` when the schema
    /// holds no baton tables, `SchemaTooOld` when a writer must migrate it first.
    pub fn open_read_only(url: &PostgresUrl) -> crate::Result<PostgresStore> {
        let store = Self::unmigrated(url);
        let found = store.read("open", |tx| schema::found(&mut tx.tx, &url.schema))?;
        match found {
            schema::Found::Empty => Err(Error::NoDatabase {
                path: url.to_string(),
            }),
            schema::Found::Foreign(detail) => Err(Error::NotBaton {
                path: url.to_string(),
                detail,
            }),
            schema::Found::Baton(v) if v > SCHEMA_VERSION => Err(Error::SchemaTooNew {
                found: v,
                supported: SCHEMA_VERSION,
            }),
            schema::Found::Baton(v) if v < SCHEMA_VERSION => Err(Error::SchemaTooOld {
                path: url.to_string(),
                found: v,
                supported: SCHEMA_VERSION,
            }),
            schema::Found::Baton(_) => Ok(store),
        }
    }

    pub(crate) fn unmigrated(url: &PostgresUrl) -> PostgresStore {
        PostgresStore {
            url: url.clone(),
            idle: Mutex::new(Vec::new()),
            clock_offset_ms: AtomicI64::new(0),
            signal: OnceLock::new(),
            event_signal: OnceLock::new(),
        }
    }

    /// Brings the schema to this build's version; says from which.
    pub fn migrate(&self) -> crate::Result<Migrated> {
        let schema = self.url.schema.clone();
        let from = self.write("migrate", |tx| schema::migrate(&mut tx.tx, &schema))?;
        Ok(Migrated {
            from,
            to: SCHEMA_VERSION,
        })
    }

    pub fn url(&self) -> &PostgresUrl {
        &self.url
    }

    /// Test hook: this handle reads the database's clock `offset_ms` later than it is
    /// (see `SqliteStore::set_clock_offset`).
    pub fn set_clock_offset(&self, offset_ms: i64) {
        self.clock_offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    /// The database server's clock, in milliseconds since the Unix epoch.
    fn db_now(&self, tx: &mut Tx<'_>) -> Result<i64> {
        let row = tx.one(
            "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint",
            &[],
        )?;
        let now: i64 = get(&row, 0)?;
        Ok(now.saturating_add(self.clock_offset_ms.load(Ordering::Relaxed)))
    }
}

impl Store for PostgresStore {
    fn job_signal(&self) -> Option<Arc<JobSignal>> {
        Some(
            (self.signal)
                .get_or_init(|| listen::start(&self.url, listen::JOBS))
                .clone(),
        )
    }

    fn event_signal(&self) -> Option<Arc<JobSignal>> {
        Some(
            (self.event_signal)
                .get_or_init(|| listen::start(&self.url, listen::EVENTS))
                .clone(),
        )
    }

    fn create_run(
        &self,
        info: &RunInfo,
        state: &ExecutionState,
        events: &[Event],
    ) -> crate::Result<()> {
        let run = EncodedRun::new(info, state, events)?;
        self.write("create_run", |tx| runs::create_run(tx, &run))
    }

    fn list_runs(&self) -> crate::Result<Vec<RunInfo>> {
        self.read("list_runs", runs::list_runs)
    }

    fn resolve_run(&self, prefix: &str) -> crate::Result<RunId> {
        self.read("resolve_run", |tx| runs::resolve_run(tx, prefix))
    }

    fn run_info(&self, run: &RunId) -> crate::Result<RunInfo> {
        self.read("run_info", |tx| runs::run_info(tx, run))
    }

    fn load_state(&self, run: &RunId) -> crate::Result<ExecutionState> {
        self.read("load_state", |tx| runs::load_state(tx, run))
    }

    fn commit_turn(&self, commit: &TurnCommit) -> crate::Result<Vec<u64>> {
        let turn = EncodedTurn::new(commit)?;
        self.write("commit_turn", |tx| runs::commit_turn(tx, &turn))
    }

    fn update_run(
        &self,
        run: &RunId,
        status: RunStatus,
        events: &[Event],
    ) -> crate::Result<Vec<u64>> {
        let events = encode_events(events)?;
        self.write("update_run", |tx| {
            runs::update_run(tx, run, status, &events)
        })
    }

    fn append_events(&self, run: &RunId, events: &[Event]) -> crate::Result<Vec<u64>> {
        let events = encode_events(events)?;
        self.write("append_events", |tx| runs::append_events(tx, run, &events))
    }

    fn set_run_config(
        &self,
        run: &RunId,
        config: &serde_json::Value,
        events: &[Event],
    ) -> crate::Result<Vec<u64>> {
        let text = to_json(config, || format!("configuration of run {run}"))?;
        let events = encode_events(events)?;
        self.write("set_run_config", |tx| {
            runs::set_run_config(tx, run, &text, &events)
        })
    }

    fn turns(&self, run: &RunId) -> crate::Result<Vec<TurnRecord>> {
        self.read("turns", |tx| runs::turns(tx, run, None))
    }

    fn turn(&self, run: &RunId, turn: u32) -> crate::Result<Option<TurnRecord>> {
        self.read("turn", |tx| Ok(runs::turns(tx, run, Some(turn))?.pop()))
    }

    fn turn_changes(&self, run: &RunId, turn: u32) -> crate::Result<Vec<RecordChange>> {
        self.read("turn_changes", |tx| runs::turn_changes(tx, run, turn))
    }

    fn events(&self, run: &RunId, after: u64) -> crate::Result<Vec<StoredEvent>> {
        self.read("events", |tx| runs::events(tx, run, after))
    }

    fn events_since(&self, cursor: EventCursor, limit: usize) -> crate::Result<EventPage> {
        self.read("events_since", |tx| runs::events_since(tx, cursor, limit))
    }

    fn worker_holds(&self, run: &RunId) -> crate::Result<Vec<WorkerHold>> {
        self.read("worker_holds", |tx| runs::worker_holds(tx, run))
    }

    fn put_worker_holds(&self, run: &RunId, holds: &[WorkerHold]) -> crate::Result<()> {
        self.write("put_worker_holds", |tx| runs::put_holds(tx, run, holds))
    }

    fn prior_outputs(&self, run: &RunId, before_turn: u32) -> crate::Result<Vec<String>> {
        self.read("prior_outputs", |tx| {
            runs::prior_outputs(tx, run, before_turn)
        })
    }

    fn enqueue_job(&self, job: &NewJob) -> crate::Result<()> {
        self.write("enqueue_job", |tx| jobs::enqueue(tx, job))
    }

    fn list_jobs(&self) -> crate::Result<Vec<JobInfo>> {
        self.read("list_jobs", jobs::list)
    }

    fn resolve_job(&self, prefix: &str) -> crate::Result<String> {
        self.read("resolve_job", |tx| jobs::resolve(tx, prefix))
    }

    fn job(&self, id: &str) -> crate::Result<JobInfo> {
        self.read("job", |tx| jobs::get_job(tx, id))
    }

    fn try_claim_job(
        &self,
        owner: &str,
        token: &str,
        now: Timestamp,
        lease_ms: i64,
    ) -> crate::Result<ClaimOutcome> {
        let offset = self.clock_offset_ms.load(Ordering::Relaxed);
        self.write("try_claim_job", |tx| {
            jobs::try_claim(tx, owner, token, now, offset, lease_ms)
        })
    }

    fn renew_lease(&self, fence: &LeaseFence, now: Timestamp, lease_ms: i64) -> crate::Result<()> {
        self.write("renew_lease", |tx| {
            let db_now = self.db_now(tx)?;
            jobs::renew(tx, fence, now, db_now, lease_ms)
        })
    }

    fn set_job_run(&self, fence: &LeaseFence, run: &RunId, now: Timestamp) -> crate::Result<()> {
        self.write("set_job_run", |tx| jobs::set_run(tx, fence, run, now))
    }

    fn create_job_run(
        &self,
        fence: &LeaseFence,
        info: &RunInfo,
        state: &ExecutionState,
        events: &[Event],
    ) -> crate::Result<()> {
        let run = EncodedRun::new(info, state, events)?;
        self.write("create_job_run", |tx| {
            jobs::check_fence(tx, fence)?;
            runs::create_run(tx, &run)?;
            jobs::set_run(tx, fence, &info.id, info.created_at)
        })
    }

    fn release_job(&self, fence: &LeaseFence, now: Timestamp) -> crate::Result<()> {
        self.write("release_job", |tx| jobs::release(tx, fence, now))
    }

    fn requeue_job(&self, id: &str, now: Timestamp) -> crate::Result<()> {
        self.write("requeue_job", |tx| jobs::requeue(tx, id, now))
    }

    fn expire_job_lease(&self, id: &str, owner: &str, now: Timestamp) -> crate::Result<bool> {
        self.write("expire_job_lease", |tx| {
            let db_now = self.db_now(tx)?;
            jobs::expire_lease(tx, id, owner, now, db_now)
        })
    }

    fn finish_job(
        &self,
        fence: &LeaseFence,
        status: JobStatus,
        outbox: Option<&serde_json::Value>,
        error: Option<&str>,
        now: Timestamp,
    ) -> crate::Result<()> {
        self.write("finish_job", |tx| {
            jobs::finish(tx, fence, status, outbox, error, now)
        })
    }

    fn try_lease_run(
        &self,
        run: &RunId,
        owner: &str,
        token: &str,
        lease_ms: i64,
        take_over: bool,
    ) -> crate::Result<std::result::Result<(), LeaseHolder>> {
        self.write("try_lease_run", |tx| {
            let db_now = self.db_now(tx)?;
            runs::try_lease_run(tx, run, owner, token, db_now, lease_ms, take_over)
        })
    }

    fn renew_run_lease(&self, run: &RunId, token: &str, lease_ms: i64) -> crate::Result<()> {
        self.write("renew_run_lease", |tx| {
            let db_now = self.db_now(tx)?;
            runs::renew_run_lease(tx, run, token, db_now, lease_ms)?;
            reserve::renew_with_lease(tx, token, db_now.saturating_add(lease_ms))
        })
    }

    fn release_run_lease(&self, run: &RunId, token: &str) -> crate::Result<()> {
        self.write("release_run_lease", |tx| {
            runs::release_run_lease(tx, run, token)?;
            reserve::release_with_lease(tx, token)
        })
    }

    fn run_lease_holder(&self, run: &RunId) -> crate::Result<Option<LeaseHolder>> {
        self.read("run_lease_holder", |tx| {
            let db_now = self.db_now(tx)?;
            runs::run_lease_holder(tx, run, db_now)
        })
    }

    fn record_judgement(
        &self,
        group: &str,
        judgement: &serde_json::Value,
        now: Timestamp,
    ) -> crate::Result<()> {
        self.write("record_judgement", |tx| {
            jobs::judge(tx, group, judgement, now)
        })
    }

    fn record_failed_judgement(
        &self,
        group: &str,
        failed: &serde_json::Value,
        now: Timestamp,
    ) -> crate::Result<()> {
        self.write("record_failed_judgement", |tx| {
            jobs::judge_failed(tx, group, failed, now)
        })
    }

    fn judgements(&self, group: &str) -> crate::Result<Vec<JudgementRecord>> {
        self.read("judgements", |tx| jobs::judgements(tx, group))
    }

    fn request_cancel(
        &self,
        target: &CancelTarget,
        now: Timestamp,
    ) -> crate::Result<CancelOutcome> {
        self.write("request_cancel", |tx| {
            let db_now = self.db_now(tx)?;
            jobs::request_cancel(tx, target, now, db_now)
        })
    }

    fn cancel_requested(&self, target: &CancelTarget, token: Option<&str>) -> crate::Result<bool> {
        self.read("cancel_requested", |tx| {
            jobs::cancel_requested(tx, target, token)
        })
    }

    fn clear_cancel(&self, target: &CancelTarget) -> crate::Result<()> {
        self.write("clear_cancel", |tx| jobs::clear_cancel(tx, target))
    }

    fn pool_usage(
        &self,
        pool: &PoolId,
        start: Timestamp,
        end: Timestamp,
    ) -> crate::Result<PoolUsage> {
        self.read("pool_usage", |tx| pools::usage(tx, pool, start.0, end.0))
    }

    fn record_spend(
        &self,
        pool: &PoolId,
        by: &SpentBy,
        calls: &[SpentCall],
        recorded_at: Timestamp,
    ) -> crate::Result<()> {
        self.write("record_spend", |tx| {
            pools::insert_spend(tx, pool, by, calls, recorded_at)
        })
    }

    fn record_usage(&self, usage: &ManualUsage) -> crate::Result<()> {
        self.write("record_usage", |tx| pools::record_usage(tx, usage))
    }

    fn declared_usage(&self, pool: &PoolId) -> crate::Result<Vec<ManualUsage>> {
        self.read("declared_usage", |tx| pools::declared_usage(tx, pool))
    }

    fn set_bench(&self, change: &BenchChange) -> crate::Result<BenchOutcome> {
        self.write("set_bench", |tx| pools::set_bench(tx, change))
    }

    fn benches(&self) -> crate::Result<Vec<Bench>> {
        self.read("benches", pools::benches)
    }

    /// Summed afresh at every reading, in one snapshot: with many writers at once, keys
    /// do not grow in commit order, so the SQLite backend's catching up from the last
    /// key read could miss a row that commits late.
    fn floor_reading(
        &self,
        windows: &[(PoolId, Timestamp, Timestamp)],
    ) -> crate::Result<(Vec<PoolUsage>, Vec<Bench>)> {
        self.read("floor_reading", |tx| {
            let db_now = self.db_now(tx)?;
            let mut usage = Vec::with_capacity(windows.len());
            for (pool, start, end) in windows {
                let used = pools::usage(tx, pool, start.0, end.0)?;
                // What turns in flight on any host hold counts as used.
                let held = reserve::held(tx, pool, start.0, end.0, db_now)?;
                usage.push(crate::pools::with_reserved(used, held));
            }
            Ok((usage, pools::benches(tx)?))
        })
    }

    fn try_reserve(&self, request: &ReserveRequest) -> crate::Result<ReserveOutcome> {
        let (start, end) = (request.window.0.0, request.window.1.0);
        self.write("try_reserve", |tx| {
            // First: every read below then sees what the last reserver of this pool,
            // on any host, committed.
            reserve::lock_pool(tx, &request.pool)?;
            let db_now = self.db_now(tx)?;
            let used = pools::usage(tx, &request.pool, start, end)?;
            reserve::try_reserve(tx, used, request, db_now)
        })
    }

    fn release_reservation(&self, id: ReservationId) -> crate::Result<()> {
        self.write("release_reservation", |tx| reserve::release(tx, id))
    }

    fn live_reservations(&self) -> crate::Result<Vec<LiveReservation>> {
        self.read("live_reservations", |tx| {
            let db_now = self.db_now(tx)?;
            reserve::live(tx, db_now)
        })
    }

    fn pins(&self, filter: &PinFilter) -> crate::Result<Vec<StoredPin>> {
        self.read("pins", |tx| pools::pins(tx, filter))
    }

    fn archive_run(&self, run: &RunId) -> crate::Result<crate::RunArchive> {
        self.read("archive_run", |tx| archive::archive(tx, run))
    }

    fn import_run(&self, run: &crate::RunArchive) -> crate::Result<crate::Imported> {
        run.check()?;
        self.write("import_run", |tx| archive::import(tx, run))
    }
}
