//! SQLite backend (embedded default): one file, WAL journal, every commit synced.
//!
//! Layout: `runs` holds each run's row and its state header (rewritten per turn),
//! `records` the current version of every state record, and each turn adds one `turns`
//! row, its `record_changes` (the per-turn snapshot as a delta), its `call_outputs` and
//! its `events`. So a turn's storage cost is what it changed, never the whole state.
//!
//! The connection sits behind a `Mutex`: SQLite serialises writers anyway, and one
//! connection keeps the prepared-statement cache warm.

mod archive;
mod cancel;
mod floor;
mod jobs;
mod migrations;
pub(crate) use migrations::SCHEMA_VERSION;
mod open;
mod pools;
mod read;
mod reserve;
mod write;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use baton_core::ids::{RunId, Timestamp};
use baton_core::state::{ExecutionState, RecordChange};
use baton_core::turn::TurnRecord;
use baton_protocol::EventMsg as Event;
use rusqlite::Connection;

use crate::{
    ClaimOutcome, Error, EventCursor, EventPage, JobInfo, JobStatus, LeaseFence, NewJob, RunInfo,
    RunStatus, Store, StoredEvent, TurnCommit, WorkerHold,
};

/// What the SQLite code fails with until `SqliteStore::read`/`write` (or an opener)
/// turns it into a backend-neutral `Error` (`open::classify`): SQLite's error stays
/// typed up to that one place, and never reaches the public API.
#[derive(Debug)]
pub(crate) enum Fail {
    Sql(rusqlite::Error),
    Store(Error),
}

impl From<rusqlite::Error> for Fail {
    fn from(e: rusqlite::Error) -> Self {
        Fail::Sql(e)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Store(e)
    }
}

/// The SQLite code's result; the public API's is `crate::Result`.
pub(crate) type Result<T, E = Fail> = std::result::Result<T, E>;

/// `Err` of a store error, in the SQLite code's result.
pub(crate) fn fail<T>(e: Error) -> Result<T> {
    Err(Fail::Store(e))
}

/// How long a statement waits for another process's write lock before failing.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Distinct statements the store prepares; the cache must hold them all to stay warm.
const STATEMENT_CACHE: usize = 96;

/// The SQLite store. `Send + Sync`; share it as `Arc<dyn Store>`.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    /// The floor's last reading, brought up to date by the next (see `floor`). Locked
    /// only while `conn` is.
    floor: Mutex<floor::Floor>,
    /// `None` for an in-memory database.
    path: Option<PathBuf>,
    /// Added to the database's clock; 0 except in tests (see `set_clock_offset`).
    clock_offset_ms: AtomicI64,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating it and its parent directories if needed) the database at `path`
    /// and migrates it to the current schema. A file that holds another application's
    /// tables is refused before anything is written to it.
    pub fn open(path: &Path) -> crate::Result<SqliteStore> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open::directory_error(&e, path))?;
        }
        if path.is_dir() {
            return Err(Error::Open {
                path: path.display().to_string(),
                detail: "it is a directory; name a file in it".into(),
            });
        }
        let conn = Connection::open(path).map_err(|e| open::open_error(e.into(), path))?;
        Self::init(conn, Some(path.to_path_buf())).map_err(|e| open::open_error(e, path))
    }

    /// Opens the database at `path` only to read it: never creates, migrates or changes
    /// it, so it works on a read-only file system. `Error::NoDatabase` when there is no
    /// database (or an empty one), `Error::NotBaton` for another application's file,
    /// `Error::SchemaTooOld` for one a writer must migrate first.
    pub fn open_read_only(path: &Path) -> crate::Result<SqliteStore> {
        let mut conn = open::read_only(path).map_err(|e| open::open_error(e, path))?;
        Self::tune(&mut conn).map_err(|e| open::open_error(e, path))?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            floor: Mutex::default(),
            path: Some(path.to_path_buf()),
            clock_offset_ms: AtomicI64::new(0),
        })
    }

    /// A private database that lives as long as the store (tests, dry runs).
    pub fn open_in_memory() -> crate::Result<SqliteStore> {
        let conn =
            Connection::open_in_memory().map_err(|e| open::classify(e.into(), None, "open"))?;
        Self::init(conn, None).map_err(|e| open::classify(e, None, "open"))
    }

    /// The database file, or `None` in memory.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Test hook: this handle reads the database's clock `offset_ms` later than it is.
    /// Leases expire by the database's clock, not the caller's, so a test that checks
    /// an expired lease is reclaimed moves this clock rather than sleeping out the
    /// lease; baton itself never sets it.
    pub fn set_clock_offset(&self, offset_ms: i64) {
        self.clock_offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    /// The database's clock, in milliseconds since the Unix epoch: what every lease
    /// expires by, so processes whose own clocks disagree still agree on who holds one.
    fn db_now(&self, conn: &Connection) -> Result<i64> {
        let now: i64 = conn
            .prepare_cached("SELECT CAST(unixepoch('subsec') * 1000 AS INTEGER)")?
            .query_row([], |r| r.get(0))?;
        Ok(now.saturating_add(self.clock_offset_ms.load(Ordering::Relaxed)))
    }

    fn init(mut conn: Connection, path: Option<PathBuf>) -> Result<SqliteStore> {
        // Set first, so the pragmas below already wait for another process's lock.
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // Before the first write (switching to WAL is one): never into someone else's file.
        if let open::Schema::Foreign(detail) = open::schema(&conn)? {
            return fail(Error::NotBaton {
                path: path
                    .as_deref()
                    .map_or_else(|| ":memory:".into(), |p| p.display().to_string()),
                detail,
            });
        }
        // WAL: readers never block the writer. An in-memory database answers "memory",
        // and a file system without shared memory keeps its old mode; both are still
        // correct, only slower to share, so the answer is not checked.
        // Retried: SQLite answers BUSY here at once rather than wait (`retry_busy`).
        open::retry_busy(|| conn.pragma_update(None, "journal_mode", "WAL"))?;
        // FULL syncs the WAL on every commit: a committed turn survives power loss.
        // (NORMAL, the usual WAL setting, may lose the last commits.)
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", true)?;
        Self::tune(&mut conn)?;
        migrations::migrate(&mut conn)?;
        Ok(SqliteStore {
            conn: Mutex::new(conn),
            floor: Mutex::default(),
            path,
            clock_offset_ms: AtomicI64::new(0),
        })
    }

    /// Connection settings a reader and a writer share.
    fn tune(conn: &mut Connection) -> Result<()> {
        // A run's database is a few megabytes and is read mostly once per process (the
        // state on open); SQLite's default 2 MiB page cache is a fifth of the memory a
        // 100-turn run needs, for no gain.
        conn.pragma_update(None, "cache_size", -512)?;
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, Connection> {
        // A panic while the lock was held left no transaction open (an unfinished
        // `Open` rolls back when dropped during unwinding), so the connection is
        // still consistent and the poison flag carries no information.
        self.conn.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `f` in one read transaction, so queries spanning tables see one snapshot
    /// even while another process commits.
    fn read<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> crate::Result<T> {
        let conn = self.lock();
        Open::begin(&conn, "BEGIN DEFERRED")
            .and_then(|tx| {
                let out = f(tx.conn)?;
                tx.commit()?;
                Ok(out)
            })
            .map_err(|e| open::classify(e, self.path(), op))
    }

    /// Runs `f` in one write transaction: committed when `f` succeeds, rolled back when
    /// it fails.
    fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> crate::Result<T> {
        let conn = self.lock();
        // IMMEDIATE takes the write lock up front: a deferred transaction that reads and
        // then writes can fail with SQLITE_BUSY without waiting for the busy timeout.
        Open::begin(&conn, "BEGIN IMMEDIATE")
            .and_then(|tx| {
                let out = f(tx.conn)?;
                tx.commit()?;
                Ok(out)
            })
            .map_err(|e| open::classify(e, self.path(), op))
    }
}

impl SqliteStore {
    /// The floor's reading (committed usage and benches), brought up to date in `conn`'s
    /// transaction.
    fn floor_in(
        &self,
        conn: &Connection,
        windows: &[(baton_core::router::PoolId, i64, i64)],
    ) -> Result<(Vec<baton_core::router::PoolUsage>, Vec<crate::Bench>)> {
        // A panic mid-reading may have left it half brought up to date: start over.
        let mut floor = self.floor.lock().unwrap_or_else(|poisoned| {
            let mut floor = poisoned.into_inner();
            *floor = floor::Floor::default();
            self.floor.clear_poison();
            floor
        });
        let reading = floor.reading(conn, windows);
        if reading.is_err() {
            // Half brought up to date: the next reading starts over.
            *floor = floor::Floor::default();
        }
        reading
    }
}

impl SqliteStore {
    /// `write`, committed without syncing the WAL to disk: for rows whose loss in a
    /// power cut harms nobody, because every process that could hold them dies with the
    /// machine (a reservation of headroom). The commit is still atomic and seen at once
    /// by every process (WAL with `synchronous = NORMAL` loses durability, never
    /// consistency), and the next synced commit syncs it too. It saves a routed turn the
    /// cost of a second fsync, as much as the turn's own commit.
    fn write_unsynced<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Connection) -> Result<T>,
    ) -> crate::Result<T> {
        let conn = self.lock();
        // The level cannot change inside a transaction: set around it, and put back
        // whatever happened in it.
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(|e| open::classify(e.into(), self.path(), op))?;
        let out = Open::begin(&conn, "BEGIN IMMEDIATE")
            .and_then(|tx| {
                let out = f(tx.conn)?;
                tx.commit()?;
                Ok(out)
            })
            .map_err(|e| open::classify(e, self.path(), op));
        let restored = conn
            .pragma_update(None, "synchronous", "FULL")
            .map_err(|e| open::classify(e.into(), self.path(), op));
        let out = out?;
        restored?;
        Ok(out)
    }
}

/// An open transaction, rolled back when dropped uncommitted (by a failure or a panic,
/// so the connection is left with none open). Its `BEGIN`, `COMMIT` and `ROLLBACK` are
/// cached statements: `rusqlite::Transaction` parses them afresh each time (a routed
/// step parsed 6.5 statements on average, now 0.5; callgrind, 300 steps).
struct Open<'c> {
    conn: &'c Connection,
    done: bool,
}

impl<'c> Open<'c> {
    fn begin(conn: &'c Connection, begin: &'static str) -> Result<Self> {
        conn.prepare_cached(begin)?.execute([])?;
        Ok(Open { conn, done: false })
    }

    fn commit(mut self) -> Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.done = true;
        Ok(())
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.done && !self.conn.is_autocommit() {
            // Best effort: if the rollback fails too, the transaction stays open and
            // the next BEGIN on this connection says so (as with rusqlite's own).
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
    }
}

impl Store for SqliteStore {
    fn create_run(
        &self,
        info: &RunInfo,
        state: &ExecutionState,
        events: &[Event],
    ) -> crate::Result<()> {
        let run = crate::codec::EncodedRun::new(info, state, events)?;
        self.write("create_run", |tx| write::create_run(tx, &run))
    }

    fn list_runs(&self) -> crate::Result<Vec<RunInfo>> {
        self.read("list_runs", read::list_runs)
    }

    fn resolve_run(&self, prefix: &str) -> crate::Result<RunId> {
        self.read("resolve_run", |conn| read::resolve_run(conn, prefix))
    }

    fn run_info(&self, run: &RunId) -> crate::Result<RunInfo> {
        self.read("run_info", |conn| read::run_info(conn, run))
    }

    fn load_state(&self, run: &RunId) -> crate::Result<ExecutionState> {
        self.read("load_state", |conn| read::load_state(conn, run))
    }

    fn commit_turn(&self, commit: &TurnCommit) -> crate::Result<Vec<u64>> {
        // The lease fence runs inside the turn's transaction (see `write::commit_turn`).
        // Encoding happens before the lock: the lock covers database work only.
        let turn = crate::codec::EncodedTurn::new(commit)?;
        self.write("commit_turn", |tx| write::commit_turn(tx, &turn))
    }

    fn update_run(
        &self,
        run: &RunId,
        status: RunStatus,
        events: &[Event],
    ) -> crate::Result<Vec<u64>> {
        let events = crate::codec::encode_events(events)?;
        self.write("update_run", |tx| {
            write::update_run(tx, run, status, &events)
        })
    }

    fn append_events(&self, run: &RunId, events: &[Event]) -> crate::Result<Vec<u64>> {
        let events = crate::codec::encode_events(events)?;
        self.write("append_events", |tx| write::append_events(tx, run, &events))
    }

    fn set_run_config(
        &self,
        run: &RunId,
        config: &serde_json::Value,
        events: &[Event],
    ) -> crate::Result<Vec<u64>> {
        let text = crate::codec::to_json(config, || format!("configuration of run {run}"))?;
        let events = crate::codec::encode_events(events)?;
        self.write("set_run_config", |tx| {
            write::set_run_config(tx, run, &text, &events)
        })
    }

    fn turns(&self, run: &RunId) -> crate::Result<Vec<TurnRecord>> {
        self.read("turns", |conn| read::turns(conn, run, None))
    }

    fn turn(&self, run: &RunId, turn: u32) -> crate::Result<Option<TurnRecord>> {
        self.read("turn", |conn| Ok(read::turns(conn, run, Some(turn))?.pop()))
    }

    fn turn_changes(&self, run: &RunId, turn: u32) -> crate::Result<Vec<RecordChange>> {
        self.read("turn_changes", |conn| read::turn_changes(conn, run, turn))
    }

    fn events(&self, run: &RunId, after: u64) -> crate::Result<Vec<StoredEvent>> {
        self.read("events", |conn| read::events(conn, run, after))
    }

    fn events_since(&self, cursor: EventCursor, limit: usize) -> crate::Result<EventPage> {
        self.read("events_since", |conn| {
            read::events_since(conn, cursor, limit)
        })
    }

    fn enqueue_job(&self, job: &NewJob) -> crate::Result<()> {
        self.write("enqueue_job", |tx| jobs::enqueue(tx, job))
    }

    fn list_jobs(&self) -> crate::Result<Vec<JobInfo>> {
        self.read("list_jobs", jobs::list)
    }

    fn resolve_job(&self, prefix: &str) -> crate::Result<String> {
        self.read("resolve_job", |c| jobs::resolve(c, prefix))
    }

    fn job(&self, id: &str) -> crate::Result<JobInfo> {
        self.read("job", |c| jobs::get(c, id))
    }

    fn try_claim_job(
        &self,
        owner: &str,
        token: &str,
        now: Timestamp,
        lease_ms: i64,
    ) -> crate::Result<ClaimOutcome> {
        self.write("try_claim_job", |tx| {
            let db_now = self.db_now(tx)?;
            jobs::try_claim(tx, owner, token, now, db_now, lease_ms)
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
        let run = crate::codec::EncodedRun::new(info, state, events)?;
        self.write("create_job_run", |tx| {
            jobs::check_fence(tx, fence)?;
            write::create_run(tx, &run)?;
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
    ) -> crate::Result<std::result::Result<(), crate::LeaseHolder>> {
        self.write("try_lease_run", |tx| {
            let db_now = self.db_now(tx)?;
            write::try_lease_run(tx, run, owner, token, db_now, lease_ms, take_over)
        })
    }

    fn renew_run_lease(&self, run: &RunId, token: &str, lease_ms: i64) -> crate::Result<()> {
        self.write("renew_run_lease", |tx| {
            let db_now = self.db_now(tx)?;
            write::renew_run_lease(tx, run, token, db_now, lease_ms)?;
            reserve::renew_with_lease(tx, token, db_now.saturating_add(lease_ms))
        })
    }

    fn release_run_lease(&self, run: &RunId, token: &str) -> crate::Result<()> {
        self.write("release_run_lease", |tx| {
            write::release_run_lease(tx, run, token)?;
            reserve::release_with_lease(tx, token)
        })
    }

    fn run_lease_holder(&self, run: &RunId) -> crate::Result<Option<crate::LeaseHolder>> {
        self.read("run_lease_holder", |conn| {
            let db_now = self.db_now(conn)?;
            read::run_lease_holder(conn, run, db_now)
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

    fn judgements(&self, group: &str) -> crate::Result<Vec<crate::JudgementRecord>> {
        self.read("judgements", |conn| jobs::judgements(conn, group))
    }

    fn worker_holds(&self, run: &RunId) -> crate::Result<Vec<WorkerHold>> {
        self.read("worker_holds", |conn| read::worker_holds(conn, run))
    }

    fn put_worker_holds(&self, run: &RunId, holds: &[WorkerHold]) -> crate::Result<()> {
        self.write("put_worker_holds", |tx| write::put_holds(tx, run, holds))
    }

    fn prior_outputs(&self, run: &RunId, before_turn: u32) -> crate::Result<Vec<String>> {
        self.read("prior_outputs", |conn| {
            read::prior_outputs(conn, run, before_turn)
        })
    }

    fn request_cancel(
        &self,
        target: &crate::CancelTarget,
        now: Timestamp,
    ) -> crate::Result<crate::CancelOutcome> {
        self.write("request_cancel", |tx| {
            let db_now = self.db_now(tx)?;
            cancel::request(tx, target, now, db_now)
        })
    }

    fn cancel_requested(
        &self,
        target: &crate::CancelTarget,
        token: Option<&str>,
    ) -> crate::Result<bool> {
        self.read("cancel_requested", |conn| {
            cancel::requested(conn, target, token)
        })
    }

    fn clear_cancel(&self, target: &crate::CancelTarget) -> crate::Result<()> {
        self.write("clear_cancel", |tx| cancel::clear(tx, target))
    }

    fn pool_usage(
        &self,
        pool: &baton_core::router::PoolId,
        start: Timestamp,
        end: Timestamp,
    ) -> crate::Result<baton_core::router::PoolUsage> {
        self.read("pool_usage", |conn| pools::usage(conn, pool, start, end))
    }

    fn record_spend(
        &self,
        pool: &baton_core::router::PoolId,
        by: &crate::SpentBy,
        calls: &[crate::SpentCall],
        recorded_at: Timestamp,
    ) -> crate::Result<()> {
        self.write("record_spend", |tx| {
            pools::insert_spend(tx, pool, by, calls, recorded_at)
        })
    }

    fn record_usage(&self, usage: &crate::ManualUsage) -> crate::Result<()> {
        self.write("record_usage", |tx| pools::record_usage(tx, usage))
    }

    fn declared_usage(
        &self,
        pool: &baton_core::router::PoolId,
    ) -> crate::Result<Vec<crate::ManualUsage>> {
        self.read("declared_usage", |conn| pools::declared_usage(conn, pool))
    }

    fn set_bench(&self, change: &crate::BenchChange) -> crate::Result<crate::BenchOutcome> {
        self.write("set_bench", |tx| pools::set_bench(tx, change))
    }

    fn benches(&self) -> crate::Result<Vec<crate::Bench>> {
        self.read("benches", pools::benches)
    }

    fn floor_reading(
        &self,
        windows: &[(baton_core::router::PoolId, Timestamp, Timestamp)],
    ) -> crate::Result<(Vec<baton_core::router::PoolUsage>, Vec<crate::Bench>)> {
        let windows: Vec<_> = windows
            .iter()
            .map(|(pool, start, end)| (pool.clone(), start.0, end.0))
            .collect();
        self.read("floor_reading", |conn| {
            let (usage, benches) = self.floor_in(conn, &windows)?;
            let db_now = self.db_now(conn)?;
            // What turns in flight hold counts as used: every process reads one
            // headroom (they are few rows: one per turn in flight).
            let usage = usage
                .into_iter()
                .zip(&windows)
                .map(|(used, (pool, start, end))| {
                    let held = reserve::held(conn, pool, *start, *end, db_now)?;
                    Ok(crate::pools::with_reserved(used, held))
                })
                .collect::<Result<_>>()?;
            Ok((usage, benches))
        })
    }

    fn try_reserve(&self, request: &crate::ReserveRequest) -> crate::Result<crate::ReserveOutcome> {
        let (start, end) = (request.window.0.0, request.window.1.0);
        // In the single writer's transaction: a second reserver (this process's other
        // lane, or another process) waits for the write lock and then reads this one.
        self.write_unsynced("try_reserve", |tx| {
            let db_now = self.db_now(tx)?;
            let (mut used, _) = self.floor_in(tx, &[(request.pool.clone(), start, end)])?;
            let used = used
                .pop()
                .unwrap_or_else(|| baton_core::router::PoolUsage::none(request.pool.clone()));
            reserve::try_reserve(tx, used, request, db_now)
        })
    }

    fn release_reservation(&self, id: crate::ReservationId) -> crate::Result<()> {
        self.write_unsynced("release_reservation", |tx| reserve::release(tx, id))
    }

    fn live_reservations(&self) -> crate::Result<Vec<crate::LiveReservation>> {
        self.read("live_reservations", |conn| {
            let db_now = self.db_now(conn)?;
            reserve::live(conn, db_now)
        })
    }

    fn pins(&self, filter: &crate::PinFilter) -> crate::Result<Vec<crate::StoredPin>> {
        self.read("pins", |conn| pools::pins(conn, filter))
    }

    fn archive_run(&self, run: &RunId) -> crate::Result<crate::RunArchive> {
        self.read("archive_run", |conn| archive::archive(conn, run))
    }

    fn import_run(&self, run: &crate::RunArchive) -> crate::Result<crate::Imported> {
        run.check()?;
        self.write("import_run", |tx| archive::import(tx, run))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_is_shareable_across_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<SqliteStore>();
        let store: std::sync::Arc<dyn Store> =
            std::sync::Arc::new(SqliteStore::open_in_memory().unwrap());
        assert!(store.list_runs().unwrap().is_empty());
    }

    #[test]
    fn open_creates_parent_directories_and_uses_wal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/baton.db");
        let store = SqliteStore::open(&path).unwrap();
        assert_eq!(store.path(), Some(path.as_path()));
        let conn = store.lock();
        let mode: String = conn
            .pragma_query_value(None, "journal_mode", |r| r.get(0))
            .unwrap();
        let sync: i64 = conn
            .pragma_query_value(None, "synchronous", |r| r.get(0))
            .unwrap();
        let fk: bool = conn
            .pragma_query_value(None, "foreign_keys", |r| r.get(0))
            .unwrap();
        assert_eq!((mode.as_str(), sync, fk), ("wal", 2, true));
    }

    /// A reservation is committed without a sync (see `write_unsynced`), and every
    /// write after it is synced again, a turn's commit first of all, also when the
    /// reservation's own write failed.
    #[test]
    fn a_reservation_leaves_the_connection_syncing_every_commit() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("baton.db")).unwrap();
        let sync = |store: &SqliteStore| -> i64 {
            store
                .lock()
                .pragma_query_value(None, "synchronous", |r| r.get(0))
                .unwrap()
        };
        let request = crate::ReserveRequest {
            pool: baton_core::router::PoolId::new("p"),
            window: (Timestamp(0), Timestamp(1_000)),
            allowance: baton_core::router::Allowance {
                requests: Some(1),
                ..Default::default()
            },
            estimate: crate::Estimate::default(),
            run: RunId("r".into()),
            turn: 0,
            lease_token: None,
            at: Timestamp(5),
            ttl_ms: 60_000,
        };
        let crate::ReserveOutcome::Reserved { id } = store.try_reserve(&request).unwrap() else {
            panic!("the pool is unused")
        };
        assert_eq!(sync(&store), 2);
        store.release_reservation(id).unwrap();
        assert_eq!(sync(&store), 2);
        // A write that fails inside: still put back.
        let failed = store.write_unsynced("test", |tx| {
            tx.execute_batch("INSERT INTO no_such_table VALUES (1)")?;
            Ok(())
        });
        assert!(failed.is_err());
        assert_eq!(sync(&store), 2);
    }

    /// A write that fails, or panics, half-way leaves nothing of itself and no
    /// transaction open: the next read and write on the connection go through.
    #[test]
    fn a_failed_or_panicking_write_is_rolled_back_and_the_store_goes_on() {
        let store = SqliteStore::open_in_memory().unwrap();
        let insert = |conn: &Connection, id: &str| -> Result<()> {
            conn.execute(
                "INSERT INTO runs (id, objective, status, turns, created_at, updated_at, config, header)
                 VALUES (?1, 'o', 'active', 0, 1, 1, '{}', '{}')",
                [id],
            )?;
            Ok(())
        };
        let failed = store.write("test", |conn| {
            insert(conn, "a")?;
            insert(conn, "a")
        });
        assert!(failed.is_err());
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let _ = store.write("test", |conn| -> Result<()> {
                insert(conn, "b")?;
                panic!("mid-write")
            });
        }));
        assert!(panicked.is_err());
        assert!(store.lock().is_autocommit());
        store.write("test", |conn| insert(conn, "c")).unwrap();
        let ids: Vec<String> = store
            .read("test", |conn| {
                let mut select = conn.prepare("SELECT id FROM runs ORDER BY id")?;
                let ids = select.query_map([], |r| r.get(0))?;
                Ok(ids.collect::<rusqlite::Result<_>>()?)
            })
            .unwrap();
        assert_eq!(ids, ["c"]);
    }

    #[test]
    fn a_database_from_a_newer_baton_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        drop(SqliteStore::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 99).unwrap();
        drop(conn);
        let err = SqliteStore::open(&path).unwrap_err();
        assert!(
            matches!(err, Error::SchemaTooNew { found: 99, .. }),
            "{err}"
        );
    }

    fn new_run(id: &str, objective: &str) -> (crate::RunInfo, ExecutionState) {
        let info = crate::RunInfo {
            id: RunId(id.into()),
            objective: objective.into(),
            status: crate::RunStatus::Active,
            turns: 0,
            created_at: Timestamp(0),
            updated_at: Timestamp(0),
            config: serde_json::json!({}),
        };
        let state = ExecutionState::new(info.id.clone(), objective, &[]);
        (info, state)
    }

    /// A writer that cannot get the lock is told so as `Busy` (safe to retry), not as
    /// a database error carrying SQLite's code.
    #[test]
    fn a_lock_held_past_the_timeout_is_busy() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let store = SqliteStore::open(&path).unwrap();
        store
            .lock()
            .busy_timeout(Duration::from_millis(50))
            .unwrap();
        let other = Connection::open(&path).unwrap();
        other.execute_batch("BEGIN IMMEDIATE").unwrap();
        let err = store
            .enqueue_job(&NewJob {
                id: "j".into(),
                group: "g".into(),
                spec: serde_json::json!({}),
                created_at: Timestamp(1),
            })
            .unwrap_err();
        assert!(matches!(err, Error::Busy { op: "enqueue_job" }), "{err:?}");
        other.execute_batch("ROLLBACK").unwrap();
        assert!(store.list_jobs().unwrap().is_empty());
    }

    /// Text of `err` and every error beneath it, as `{:#}` would print it.
    fn chain(err: &Error) -> String {
        let mut text = err.to_string();
        let mut source = std::error::Error::source(err);
        while let Some(e) = source {
            text.push_str(&format!(": {e}"));
            source = e.source();
        }
        text
    }

    /// Regression (issue 7, item 9): a full disk printed SQLite's "database or disk is
    /// full" three times and never said what to do. `max_page_count` makes SQLite
    /// answer SQLITE_FULL exactly as a full disk does.
    #[test]
    fn disk_full_is_said_once_with_what_to_do_next() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let store = SqliteStore::open(&path).unwrap();
        let pages: i64 = store
            .lock()
            .pragma_query_value(None, "page_count", |r| r.get(0))
            .unwrap();
        store
            .lock()
            .pragma_update(None, "max_page_count", pages)
            .unwrap();
        let (info, state) = new_run("run-full", &"x".repeat(64 * 1024));
        let err = store.create_run(&info, &state, &[]).unwrap_err();
        assert!(
            matches!(&err, Error::DiskFull { path: p } if p == &path.display().to_string()),
            "{err:?}"
        );
        let text = chain(&err);
        assert_eq!(text.matches("full").count(), 1, "{text}");
        assert!(text.contains("Free space on that disk"), "{text}");
        assert!(
            text.contains("nothing of the failed write was committed"),
            "{text}"
        );
        // True: the run is not there.
        assert!(store.list_runs().unwrap().is_empty());
    }

    /// Regression (issue 7, item 16): `baton runs` in an empty directory created
    /// `.baton/baton.db` to answer a read.
    #[test]
    fn a_read_only_open_never_creates_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(".baton/baton.db");
        let err = SqliteStore::open_read_only(&path).unwrap_err();
        assert!(matches!(err, Error::NoDatabase { .. }), "{err}");
        assert!(err.to_string().contains("baton demo"), "{err}");
        assert!(!dir.path().join(".baton").exists());

        // An empty file is no database either, and stays empty.
        std::fs::create_dir(dir.path().join(".baton")).unwrap();
        std::fs::write(&path, b"").unwrap();
        let err = SqliteStore::open_read_only(&path).unwrap_err();
        assert!(matches!(err, Error::NoDatabase { .. }), "{err}");
        assert_eq!(std::fs::read(&path).unwrap().len(), 0);
    }

    /// Regression (issue 7, item 16): `baton --db app.db runs` wrote baton's tables and
    /// triggers (and the WAL switch) into another application's database.
    #[test]
    fn another_applications_database_is_refused_and_left_byte_for_byte_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("app.db");
        let conn = Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users(name) VALUES ('ada');")
            .unwrap();
        drop(conn);
        let text_file = dir.path().join("notes.txt");
        std::fs::write(&text_file, "not a database, just notes\n".repeat(100)).unwrap();
        for file in [&path, &text_file] {
            let before = std::fs::read(file).unwrap();
            for err in [
                SqliteStore::open(file).unwrap_err(),
                SqliteStore::open_read_only(file).unwrap_err(),
            ] {
                assert!(matches!(err, Error::NotBaton { .. }), "{err}");
            }
            assert_eq!(std::fs::read(file).unwrap(), before);
            for suffix in ["-wal", "-shm", "-journal"] {
                assert!(!open::companion(file, suffix).exists(), "{suffix}");
            }
        }
        let err = SqliteStore::open(&path).unwrap_err().to_string();
        assert!(err.contains("tables baton did not create: users"), "{err}");
    }

    #[test]
    fn a_directory_is_named_as_such_not_as_read_only() {
        let dir = tempfile::tempdir().unwrap();
        for err in [
            SqliteStore::open(dir.path()).unwrap_err(),
            SqliteStore::open_read_only(dir.path()).unwrap_err(),
        ] {
            assert!(
                matches!(&err, Error::Open { detail, .. } if detail.contains("is a directory")),
                "{err}"
            );
        }
    }

    #[test]
    fn a_read_only_store_reads_a_live_database_and_refuses_writes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        let writer = SqliteStore::open(&path).unwrap();
        let reader = SqliteStore::open_read_only(&path).unwrap();
        assert!(reader.list_runs().unwrap().is_empty());
        let (info, state) = new_run("run-1", "o");
        writer.create_run(&info, &state, &[]).unwrap();
        // The reader sees the writer's commit (WAL shared through the -shm file).
        assert_eq!(reader.list_runs().unwrap().len(), 1);
        let err = reader
            .create_run(
                &crate::RunInfo {
                    id: RunId("run-2".into()),
                    ..info
                },
                &state,
                &[],
            )
            .unwrap_err();
        assert!(matches!(err, Error::ReadOnly { .. }), "{err:?}");
    }

    #[test]
    fn a_read_only_open_of_an_older_schema_asks_for_a_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baton.db");
        drop(SqliteStore::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "user_version", 3).unwrap();
        drop(conn);
        let err = SqliteStore::open_read_only(&path).unwrap_err();
        assert!(matches!(err, Error::SchemaTooOld { found: 3, .. }), "{err}");
        assert_eq!(
            migrations::user_version(&Connection::open(&path).unwrap()).unwrap(),
            3
        );
    }
}
