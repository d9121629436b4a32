//! Opening a database file, and what SQLite's failures mean to the person who typed
//! the command.
//!
//! A writer creates and migrates the file; a reader (`SqliteStore::open_read_only`)
//! never creates, migrates or switches the journal mode of anything, so it works on a
//! read-only file system and never touches a file that is not baton's.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::{Connection, ErrorCode, OpenFlags};

use super::migrations::{self, SCHEMA_VERSION};
use super::{BUSY_TIMEOUT, Fail, Result, fail};
use crate::Error;

/// What a database file holds, judged before anything is written to it.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Schema {
    /// A new or empty file: no tables, `user_version` 0.
    Empty,
    /// baton's tables, at this schema version.
    Baton(i64),
    /// Another application's database; the detail says what is in it.
    Foreign(String),
}

pub(super) fn schema(conn: &Connection) -> Result<Schema> {
    // One read transaction: another process creating the same new file commits its
    // tables and `user_version` together, and reads on either side of that commit
    // (version 0, then its tables) would look like another application's database.
    let tx = conn.unchecked_transaction()?;
    let schema = schema_in(&tx)?;
    tx.commit()?;
    Ok(schema)
}

fn schema_in(conn: &Connection) -> Result<Schema> {
    let version = migrations::user_version(conn)?;
    let tables = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")?
        .query_map([], |row| row.get::<_, String>(0))?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let objects: i64 = conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))?;
    // Migration 1 creates `runs` and sets `user_version` in the same transaction, so a
    // baton database always has both.
    Ok(if objects == 0 && version == 0 {
        Schema::Empty
    } else if version >= 1 && tables.iter().any(|t| t == "runs") {
        Schema::Baton(version)
    } else {
        const SHOWN: usize = 5;
        let mut names = tables
            .iter()
            .take(SHOWN)
            .map(String::as_str)
            .collect::<Vec<_>>()
            .join(", ");
        if tables.len() > SHOWN {
            names.push_str(", …");
        }
        Schema::Foreign(if tables.is_empty() {
            format!("it holds {objects} schema objects and user_version {version}, but no tables")
        } else {
            format!("it holds tables baton did not create: {names}")
        })
    })
}

/// Runs `f` again while SQLite answers BUSY, for up to `BUSY_TIMEOUT`: for the few
/// statements it answers BUSY at once instead of waiting in its busy handler. Switching
/// a new file to WAL is one: it needs the exclusive lock, and SQLite does not wait for
/// it while another connection opening the same file holds a shared lock (the two
/// could wait for each other forever), so two processes started at once in an empty
/// directory failed with "database is locked".
pub(super) fn retry_busy<T>(mut f: impl FnMut() -> rusqlite::Result<T>) -> rusqlite::Result<T> {
    let deadline = Instant::now() + BUSY_TIMEOUT;
    let mut pause = Duration::from_millis(1);
    loop {
        match f() {
            Err(e)
                if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            other => return other,
        }
    }
}

/// Turns a failure of the SQLite code into the backend-neutral variant that says what
/// happened to `path` and what to do about it; the store's own errors pass through
/// unchanged, and whatever SQLite failure is left becomes `Error::Backend` for `op`.
pub(super) fn classify(fail: Fail, path: Option<&Path>, op: &'static str) -> Error {
    let err = match fail {
        Fail::Store(e) => return e,
        Fail::Sql(e) => e,
    };
    let shown = || path.map_or_else(|| ":memory:".to_string(), |p| p.display().to_string());
    if let rusqlite::Error::SqliteFailure(failure, _) = &err {
        match failure.code {
            ErrorCode::DiskFull => return Error::DiskFull { path: shown() },
            ErrorCode::ReadOnly => return Error::ReadOnly { path: shown() },
            // The file (or at least its directory) is there, yet SQLite cannot open or
            // create it or its -wal/-shm for writing.
            ErrorCode::CannotOpen if path.is_some_and(|p| p.exists() || directory(p).is_dir()) => {
                return Error::ReadOnly { path: shown() };
            }
            ErrorCode::NotADatabase => {
                return Error::NotBaton {
                    path: shown(),
                    detail: "it is not an SQLite database".into(),
                };
            }
            // Past the busy timeout: another process kept the lock.
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => return Error::Busy { op },
            ErrorCode::DatabaseCorrupt => {
                return Error::Corrupt {
                    what: format!("database file {}", shown()),
                    detail: err.to_string(),
                };
            }
            _ => {}
        }
    }
    Error::Backend {
        op,
        cause: Box::new(err),
    }
}

/// The directory `path` is in (`.` for a bare file name).
fn directory(path: &Path) -> &Path {
    path.parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// A failure to create the database's directory, classified like SQLite's own.
pub(super) fn directory_error(err: &std::io::Error, path: &Path) -> Error {
    let shown = path.display().to_string();
    match err.kind() {
        std::io::ErrorKind::StorageFull => Error::DiskFull { path: shown },
        std::io::ErrorKind::ReadOnlyFilesystem | std::io::ErrorKind::PermissionDenied => {
            Error::ReadOnly { path: shown }
        }
        _ => Error::Open {
            path: shown,
            detail: format!(
                "cannot create its directory {}: {err}",
                directory(path).display()
            ),
        },
    }
}

/// An error while opening `path`: classified, or else `Error::Open` with SQLite's text.
pub(super) fn open_error(fail: Fail, path: &Path) -> Error {
    match classify(fail, Some(path), "open") {
        Error::Backend { cause, .. } => Error::Open {
            path: path.display().to_string(),
            detail: cause.to_string(),
        },
        other => other,
    }
}

/// A connection that can only read `path`, checked to hold baton's current schema.
pub(super) fn read_only(path: &Path) -> Result<Connection> {
    let shown = || path.display().to_string();
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return fail(Error::Open {
                path: shown(),
                detail: "it is a directory; name a file in it".into(),
            });
        }
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return fail(Error::NoDatabase { path: shown() });
        }
        Err(e) => {
            return fail(Error::Open {
                path: shown(),
                detail: e.to_string(),
            });
        }
    }
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let mut conn =
        Connection::open_with_flags(path, flags).map_err(|e| open_error(e.into(), path))?;
    conn.busy_timeout(super::BUSY_TIMEOUT)?;
    let found = match schema(&conn) {
        // A WAL database needs its -shm file to be read, and a reader that may not
        // write the directory cannot create one: SQLite says CANTOPEN on a read-only
        // file system, READONLY_DIRECTORY where permissions forbid it. When there is no
        // -wal file either, every commit is in the main file, so it is read as
        // immutable: no -shm, no locks. On a read-only file system nobody can write it
        // meanwhile. Where only permissions stop this reader, a writer that starts
        // during the read (it would create the -wal) could show it a half-checkpointed
        // page: a read error at worst, never a write; the reads here take milliseconds.
        Err(Fail::Sql(rusqlite::Error::SqliteFailure(f, _)))
            if matches!(f.code, ErrorCode::CannotOpen | ErrorCode::ReadOnly)
                && !companion(path, "-wal").exists() =>
        {
            conn = Connection::open_with_flags(
                immutable_uri(path),
                flags | OpenFlags::SQLITE_OPEN_URI,
            )
            .map_err(|e| open_error(e.into(), path))?;
            schema(&conn)
        }
        other => other,
    }
    .map_err(|e| open_error(e, path))?;
    match found {
        Schema::Empty => fail(Error::NoDatabase { path: shown() }),
        Schema::Foreign(detail) => fail(Error::NotBaton {
            path: shown(),
            detail,
        }),
        Schema::Baton(v) if v > SCHEMA_VERSION => fail(Error::SchemaTooNew {
            found: v,
            supported: SCHEMA_VERSION,
        }),
        Schema::Baton(v) if v < SCHEMA_VERSION => fail(Error::SchemaTooOld {
            path: shown(),
            found: v,
            supported: SCHEMA_VERSION,
        }),
        Schema::Baton(_) => {
            // Belt and braces: even a statement that slipped through cannot write.
            conn.pragma_update(None, "query_only", true)?;
            Ok(conn)
        }
    }
}

/// `path` with `suffix` appended to its file name (`baton.db-wal`).
pub(super) fn companion(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// `file:PATH?immutable=1`, the path percent-encoded so `?`, `#` and `%` stay literal.
fn immutable_uri(path: &Path) -> String {
    let mut uri = String::from("file:");
    for &b in path.as_os_str().as_encoded_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'.' | b'_' | b'~') {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immutable_uris_keep_odd_characters_literal() {
        assert_eq!(
            immutable_uri(Path::new("/a b/x?y#z%.db")),
            "file:/a%20b/x%3Fy%23z%25.db?immutable=1"
        );
    }
}
