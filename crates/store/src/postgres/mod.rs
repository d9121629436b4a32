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
mod jobs;
mod listen;
mod pools;
mod reserve;
mod runs;
mod schema;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use baton_core::ids::{RunId, Timestamp};
use baton_core::router::{PoolId, PoolUsage};
use baton_core::state::{ExecutionState, RecordChange};
use baton_core::turn::TurnRecord;
use baton_protocol::EventMsg as Event;
use postgres::error::SqlState;
use postgres::types::{FromSql, ToSql};
use postgres::{Client, IsolationLevel, NoTls, Row, Statement, Transaction};

use crate::codec::{EncodedRun, EncodedTurn, encode_events, to_json};
use crate::{
    Bench, BenchChange, BenchOutcome, CancelOutcome, CancelTarget, ClaimOutcome, Error,
    EventCursor, EventPage, JobInfo, JobSignal, JobStatus, JudgementRecord, LeaseFence,
    LeaseHolder, LiveReservation, ManualUsage, NewJob, PinFilter, ReservationId, ReserveOutcome,
    ReserveRequest, RunInfo, RunStatus, SpentBy, SpentCall, Store, StoredEvent, StoredPin,
    TurnCommit, WorkerHold,
};

pub use schema::SCHEMA_VERSION;

/// What the PostgreSQL code fails with until `PostgresStore::read`/`write` turns it into
/// a backend-neutral `Error` (`classify`).
#[derive(Debug)]
pub(crate) enum Fail {
    Pg(postgres::Error),
    Store(Error),
}

impl From<postgres::Error> for Fail {
    fn from(e: postgres::Error) -> Self {
        Fail::Pg(e)
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        Fail::Store(e)
    }
}

pub(crate) type Result<T, E = Fail> = std::result::Result<T, E>;

pub(crate) fn fail<T>(e: Error) -> Result<T> {
    Err(Fail::Store(e))
}

/// Connections kept open for reuse; more are opened while threads need them at once.
const IDLE_CONNECTIONS: usize = 8;

/// How long opening a connection may take when the URL does not say.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long data sent to the server may go unacknowledged before the connection
/// counts as broken, when the URL does not say (`tcp_user_timeout`).
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(10);

/// Keepalives of a connection waiting for an answer, when the URL does not say: a
/// server that stops answering them for 10 + 3 × 5 s is gone.
const KEEPALIVES_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVES_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVES_RETRIES: u32 = 3;

/// How long a statement waits for another transaction's row lock before failing as
/// `Busy` (SQLite's busy timeout is the same).
const LOCK_TIMEOUT_MS: u32 = 5_000;

/// One connection and the statements prepared on it.
struct Conn {
    client: Client,
    statements: HashMap<String, Statement>,
    /// When it was last given back: one that sat idle for long is checked before use.
    idle_since: Instant,
}

/// A connection idle for longer than this is checked with an empty query before it is
/// used (a server restart or a network cut kills idle connections silently).
const CHECK_IDLE_AFTER: Duration = Duration::from_secs(5);

/// How long that check may take before the connection counts as dead.
const LIVENESS_TIMEOUT: Duration = Duration::from_secs(2);

/// A transaction on a pooled connection, preparing each statement once per connection.
pub(crate) struct Tx<'c> {
    tx: Transaction<'c>,
    statements: &'c mut HashMap<String, Statement>,
}

type Params<'a> = &'a [&'a (dyn ToSql + Sync)];

impl Tx<'_> {
    fn prepared(&mut self, sql: &str) -> Result<Statement> {
        if let Some(statement) = self.statements.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.tx.prepare(sql)?;
        self.statements.insert(sql.to_string(), statement.clone());
        Ok(statement)
    }

    pub(crate) fn query(&mut self, sql: &str, params: Params<'_>) -> Result<Vec<Row>> {
        let statement = self.prepared(sql)?;
        Ok(self.tx.query(&statement, params)?)
    }

    pub(crate) fn opt(&mut self, sql: &str, params: Params<'_>) -> Result<Option<Row>> {
        let statement = self.prepared(sql)?;
        Ok(self.tx.query_opt(&statement, params)?)
    }

    pub(crate) fn one(&mut self, sql: &str, params: Params<'_>) -> Result<Row> {
        let statement = self.prepared(sql)?;
        Ok(self.tx.query_one(&statement, params)?)
    }

    pub(crate) fn exec(&mut self, sql: &str, params: Params<'_>) -> Result<u64> {
        let statement = self.prepared(sql)?;
        Ok(self.tx.execute(&statement, params)?)
    }
}

/// Column `i` of `row`; a value of another type is an error, never a panic.
pub(crate) fn get<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T> {
    Ok(row.try_get(i)?)
}

/// A stored count or ordinal as the engine's `u32`.
pub(crate) fn to_u32(n: i64, what: impl FnOnce() -> String) -> Result<u32> {
    u32::try_from(n).or_else(|_| {
        fail(Error::Corrupt {
            what: what(),
            detail: format!("{n} is out of range"),
        })
    })
}

/// Where the database is, as `--db` said it.
#[derive(Clone)]
pub struct PostgresUrl {
    config: postgres::Config,
    schema: String,
    /// The URL with any password replaced, for messages.
    shown: String,
}

impl std::fmt::Debug for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

impl PostgresUrl {
    /// Parses `postgres://[user[:password]@]host[:port]/database[?params]`. Besides the
    /// client's own parameters (`connect_timeout`, `application_name`, `sslmode`, …),
    /// `schema=NAME` chooses the schema baton keeps its tables in (default `baton`).
    pub fn parse(url: &str) -> crate::Result<PostgresUrl> {
        // The client reads the scheme in lower case only.
        let lowered;
        let url = match url.split_once("://") {
            Some((scheme, rest)) if scheme.chars().any(|c| c.is_ascii_uppercase()) => {
                lowered = format!("{}://{rest}", scheme.to_ascii_lowercase());
                lowered.as_str()
            }
            _ => url,
        };
        let shown = redact(url);
        let refuse = |reason: String| Error::UnsupportedUrl {
            url: shown.clone(),
            reason,
        };
        let (base, query) = url.split_once('?').unwrap_or((url, ""));
        let mut schema = "baton".to_string();
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("schema", name)) => schema = name.to_string(),
                _ => kept.push(pair),
            }
        }
        if schema.is_empty() || schema.len() > 63 {
            return Err(refuse(
                "schema= must name a schema of 1 to 63 characters".into(),
            ));
        }
        let rest = if kept.is_empty() {
            base.to_string()
        } else {
            format!("{base}?{}", kept.join("&"))
        };
        let mut config = postgres::Config::from_str(&rest).map_err(|e| refuse(e.to_string()))?;
        if config.get_dbname().is_none() {
            return Err(refuse(
                "it names no database: write postgres://HOST/DATABASE".into(),
            ));
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("baton");
        }
        // A partition (a link down, a host gone) leaves a connection hanging with no
        // error for many minutes by the kernel's defaults: what is sent and never
        // acknowledged, or a peer that stops answering keepalives, fails it in
        // seconds instead, so a command says the server cannot be reached.
        let given = |key: &str| kept.iter().any(|p| p.split('=').next() == Some(key));
        if !given("tcp_user_timeout") {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }
        if !given("keepalives_idle") {
            config.keepalives_idle(KEEPALIVES_IDLE);
        }
        if !given("keepalives_interval") {
            config.keepalives_interval(KEEPALIVES_INTERVAL);
        }
        if !given("keepalives_retries") {
            config.keepalives_retries(KEEPALIVES_RETRIES);
        }
        Ok(PostgresUrl {
            config,
            schema,
            shown,
        })
    }

    /// The schema baton's tables are in.
    pub fn schema(&self) -> &str {
        &self.schema
    }
}

impl std::fmt::Display for PostgresUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// `url` with its password (if any) replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_string(),
        },
        None => url.to_string(),
    }
}

/// The PostgreSQL store. `Send + Sync`; share it as `Arc<dyn Store>`.
pub struct PostgresStore {
    url: PostgresUrl,
    idle: Mutex<Vec<Conn>>,
    /// Added to the database's clock; 0 except in tests (see `set_clock_offset`).
    clock_offset_ms: AtomicI64,
    /// Bumped by the `LISTEN` thread, started on first use (`Store::job_signal`).
    signal: OnceLock<Arc<JobSignal>>,
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

    fn connect(&self) -> Result<Conn> {
        let mut client = self.url.config.connect(NoTls)?;
        client.batch_execute(&format!(
            "SET search_path TO {}; SET lock_timeout = {LOCK_TIMEOUT_MS}",
            schema::quote_ident(&self.url.schema)
        ))?;
        Ok(Conn {
            client,
            statements: HashMap::new(),
            idle_since: Instant::now(),
        })
    }

    /// A connection to use: an idle one (`true`) or a new one (`false`).
    fn checkout(&self) -> Result<(Conn, bool)> {
        loop {
            let idle = self
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let Some(mut conn) = idle else {
                return Ok((self.connect()?, false));
            };
            if conn.client.is_closed() {
                continue;
            }
            if conn.idle_since.elapsed() < CHECK_IDLE_AFTER
                || conn.client.is_valid(LIVENESS_TIMEOUT).is_ok()
            {
                return Ok((conn, true));
            }
            // Dead: so are the others that idled as long, most likely. Open afresh.
            self.forget_idle();
            return Ok((self.connect()?, false));
        }
    }

    fn forget_idle(&self) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    fn checkin(&self, mut conn: Conn) {
        if conn.client.is_closed() {
            // The server went away: the other idle connections went with it.
            self.forget_idle();
            return;
        }
        conn.idle_since = Instant::now();
        let mut idle = self.idle.lock().unwrap_or_else(PoisonError::into_inner);
        if idle.len() < IDLE_CONNECTIONS {
            idle.push(conn);
        }
    }

    /// Runs `f` in one transaction: a snapshot for reads (`read_only`), else a write
    /// committed when `f` succeeds and rolled back when it fails.
    fn run<T>(
        &self,
        op: &'static str,
        read_only: bool,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T>,
    ) -> crate::Result<T> {
        let (mut conn, pooled) = self.checkout().map_err(|e| self.classify(e, op))?;
        let mut f = Some(f);
        let mut out = attempt(&mut conn, read_only, &mut f);
        // An idle connection the server dropped meanwhile (a restart, a network blip,
        // shorter than the liveness check's idle time) fails at `BEGIN`, before `f`
        // sent anything: nothing can have taken effect, so the transaction starts
        // again on a new connection, once. A failure after `BEGIN` is the caller's to
        // hear: a `COMMIT` whose answer was lost may have committed.
        if pooled && f.is_some() && matches!(&out, Err(Fail::Pg(e)) if e.code().is_none()) {
            self.forget_idle();
            conn = self.connect().map_err(|e| self.classify(e, op))?;
            out = attempt(&mut conn, read_only, &mut f);
        }
        self.checkin(conn);
        out.map_err(|e| self.classify(e, op))
    }

    fn read<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T>,
    ) -> crate::Result<T> {
        self.run(op, true, f)
    }

    fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T>,
    ) -> crate::Result<T> {
        self.run(op, false, f)
    }

    /// A PostgreSQL failure as the variant callers act on.
    fn classify(&self, fail: Fail, op: &'static str) -> Error {
        let e = match fail {
            Fail::Store(Error::NotBaton { detail, .. }) => {
                return Error::NotBaton {
                    path: self.url.to_string(),
                    detail,
                };
            }
            Fail::Store(e) => return e,
            Fail::Pg(e) => e,
        };
        let url = self.url.to_string();
        let Some(code) = e.code() else {
            // No answer from the server: it could not be reached, or the connection
            // broke (a restart, a network cut).
            return Error::Unreachable {
                url,
                op,
                detail: error_text(&e),
            };
        };
        match *code {
            SqlState::T_R_SERIALIZATION_FAILURE
            | SqlState::T_R_DEADLOCK_DETECTED
            | SqlState::LOCK_NOT_AVAILABLE => Error::Busy { op },
            SqlState::DISK_FULL => Error::DiskFull { path: url },
            SqlState::READ_ONLY_SQL_TRANSACTION | SqlState::INSUFFICIENT_PRIVILEGE => {
                Error::ReadOnly { path: url }
            }
            SqlState::ADMIN_SHUTDOWN
            | SqlState::CRASH_SHUTDOWN
            | SqlState::CANNOT_CONNECT_NOW
            | SqlState::CONNECTION_EXCEPTION
            | SqlState::CONNECTION_FAILURE
            | SqlState::CONNECTION_DOES_NOT_EXIST
            | SqlState::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION
            | SqlState::TOO_MANY_CONNECTIONS => Error::Unreachable {
                url,
                op,
                detail: error_text(&e),
            },
            SqlState::INVALID_PASSWORD
            | SqlState::INVALID_AUTHORIZATION_SPECIFICATION
            | SqlState::INVALID_CATALOG_NAME => Error::Open {
                path: url,
                detail: error_text(&e),
            },
            _ => Error::Backend {
                op,
                cause: Box::new(e),
            },
        }
    }
}

/// Runs `f` (taken from its option only once the transaction has begun) in one
/// transaction on `conn`: a snapshot for reads, else a write committed when `f`
/// succeeds and rolled back when it fails.
fn attempt<T>(
    conn: &mut Conn,
    read_only: bool,
    f: &mut Option<impl FnOnce(&mut Tx<'_>) -> Result<T>>,
) -> Result<T> {
    let Conn {
        client, statements, ..
    } = conn;
    let tx = if read_only {
        client
            .build_transaction()
            .isolation_level(IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?
    } else {
        client.transaction()?
    };
    let Some(f) = f.take() else {
        return fail(Error::Backend {
            op: "transaction",
            cause: "a transaction's work was run twice (a bug in baton)".into(),
        });
    };
    let mut tx = Tx { tx, statements };
    let out = f(&mut tx)?;
    tx.tx.commit()?;
    Ok(out)
}

/// The server's message, or the client's, with its cause: what an operator reads.
fn error_text(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

impl Store for PostgresStore {
    fn job_signal(&self) -> Option<Arc<JobSignal>> {
        Some(self.signal.get_or_init(|| listen::start(&self.url)).clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_keeps_its_client_parameters_and_takes_out_the_schema() {
        let url = PostgresUrl::parse(
            "postgres://baton:s3cret@db.internal:6432/fleet?schema=team_a&connect_timeout=2",
        )
        .unwrap();
        assert_eq!(url.schema(), "team_a");
        assert_eq!(url.config.get_dbname(), Some("fleet"));
        assert_eq!(
            url.config.get_connect_timeout(),
            Some(&Duration::from_secs(2))
        );
        assert_eq!(
            url.to_string(),
            "postgres://baton:***@db.internal:6432/fleet?schema=team_a&connect_timeout=2"
        );
        assert!(!format!("{url:?}").contains("s3cret"));
        let plain = PostgresUrl::parse("postgresql://db.internal/fleet").unwrap();
        assert_eq!(plain.schema(), "baton");
        assert_eq!(plain.config.get_connect_timeout(), Some(&CONNECT_TIMEOUT));
        // A partition fails a connection in seconds, unless the URL says otherwise.
        assert_eq!(plain.config.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT));
        assert_eq!(plain.config.get_keepalives_idle(), KEEPALIVES_IDLE);
        assert_eq!(
            plain.config.get_keepalives_interval(),
            Some(KEEPALIVES_INTERVAL)
        );
        assert_eq!(
            plain.config.get_keepalives_retries(),
            Some(KEEPALIVES_RETRIES)
        );
        let own = PostgresUrl::parse(
            "postgres://db.internal/fleet?tcp_user_timeout=60&keepalives_idle=120",
        )
        .unwrap();
        assert_eq!(
            own.config.get_tcp_user_timeout(),
            Some(&Duration::from_secs(60))
        );
        assert_eq!(own.config.get_keepalives_idle(), Duration::from_secs(120));
    }

    #[test]
    fn a_url_without_a_database_or_with_a_bad_parameter_is_refused() {
        for bad in [
            "postgres://db.internal",
            "postgres://u:pw@db.internal/x?schema=",
            "postgres://db.internal/x?no_such_option=1",
        ] {
            let err = PostgresUrl::parse(bad).unwrap_err();
            assert!(matches!(err, Error::UnsupportedUrl { .. }), "{bad}: {err}");
            assert!(!err.to_string().contains(":pw@"), "{err}");
        }
    }
}
