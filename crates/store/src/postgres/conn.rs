//! Connections and transactions: a few pooled connections per store, each with its
//! statements prepared once, and every failure turned into the store's `Error` variant
//! callers act on (`classify`).

use std::collections::HashMap;
use std::sync::PoisonError;
use std::time::{Duration, Instant};

use postgres::error::SqlState;
use postgres::types::{FromSql, ToSql};
use postgres::{Client, IsolationLevel, NoTls, Row, Statement, Transaction};

use super::{PostgresStore, schema};
use crate::Error;

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

/// How long a statement waits for another transaction's row lock before failing as
/// `Busy` (SQLite's busy timeout is the same).
const LOCK_TIMEOUT_MS: u32 = 5_000;

/// One connection and the statements prepared on it.
pub(super) struct Conn {
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
    pub(super) tx: Transaction<'c>,
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

impl PostgresStore {
    pub(super) fn connect(&self) -> Result<Conn> {
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
    pub(super) fn checkout(&self) -> Result<(Conn, bool)> {
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

    pub(super) fn forget_idle(&self) {
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }

    pub(super) fn checkin(&self, mut conn: Conn) {
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
    pub(super) fn run<T>(
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

    pub(super) fn read<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T>,
    ) -> crate::Result<T> {
        self.run(op, true, f)
    }

    pub(super) fn write<T>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Tx<'_>) -> Result<T>,
    ) -> crate::Result<T> {
        self.run(op, false, f)
    }

    /// A PostgreSQL failure as the variant callers act on.
    pub(super) fn classify(&self, fail: Fail, op: &'static str) -> Error {
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
