//! Where the database is: what `--db` / `BATON_DB` / `db =` may say.
//!
//! An SQLite file (a path, `sqlite://PATH`, `file:PATH`) or a PostgreSQL server
//! (`postgres://…`, `postgresql://…`). A URL of another kind is refused here, by name,
//! instead of becoming an oddly named SQLite file.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::postgres::Migrated;
use crate::{Error, PostgresStore, PostgresUrl, Result, SqliteStore, Store};

/// A database baton can open.
#[derive(Debug, Clone)]
pub enum Location {
    Sqlite(PathBuf),
    Postgres(Box<PostgresUrl>),
}

impl Location {
    /// What `spec` names. See `sqlite_path` for the SQLite forms and
    /// `PostgresUrl::parse` for PostgreSQL's.
    pub fn parse(spec: &str) -> Result<Location> {
        match split_scheme(spec) {
            Some((scheme, rest))
                if rest.starts_with("//")
                    && matches!(
                        scheme.to_ascii_lowercase().as_str(),
                        "postgres" | "postgresql"
                    ) =>
            {
                Ok(Location::Postgres(Box::new(PostgresUrl::parse(spec)?)))
            }
            _ => Ok(Location::Sqlite(sqlite_path(spec)?)),
        }
    }

    /// The SQLite file, if it is one.
    pub fn file(&self) -> Option<&Path> {
        match self {
            Location::Sqlite(path) => Some(path),
            Location::Postgres(_) => None,
        }
    }

    /// Opens it for a command that writes: created (an SQLite file, a PostgreSQL
    /// schema) and migrated when needed.
    pub fn open(&self) -> Result<Arc<dyn Store>> {
        Ok(match self {
            Location::Sqlite(path) => Arc::new(SqliteStore::open(path)?),
            Location::Postgres(url) => Arc::new(PostgresStore::open(url)?),
        })
    }

    /// Opens it only to read: never created or changed. `Error::NoDatabase` when there
    /// is none, `Error::SchemaTooOld` when a writer must migrate it first.
    pub fn open_read_only(&self) -> Result<Arc<dyn Store>> {
        Ok(match self {
            Location::Sqlite(path) => Arc::new(SqliteStore::open_read_only(path)?),
            Location::Postgres(url) => Arc::new(PostgresStore::open_read_only(url)?),
        })
    }

    /// Creates or upgrades the database to this build's schema and says from which
    /// version (0: there was none). A newer schema is refused, never touched.
    pub fn migrate(&self) -> Result<Migrated> {
        match self {
            Location::Sqlite(path) => {
                let from = match SqliteStore::open_read_only(path) {
                    Ok(_) => crate::sqlite::SCHEMA_VERSION,
                    Err(Error::NoDatabase { .. }) => 0,
                    Err(Error::SchemaTooOld { found, .. }) => found,
                    Err(e) => return Err(e),
                };
                SqliteStore::open(path)?;
                Ok(Migrated {
                    from,
                    to: crate::sqlite::SCHEMA_VERSION,
                })
            }
            Location::Postgres(url) => PostgresStore::unmigrated(url).migrate(),
        }
    }

    /// Whether there is a baton database there already (an SQLite file that exists, a
    /// PostgreSQL schema with baton's tables); `None` when a server cannot say.
    pub fn exists(&self) -> Option<bool> {
        match self {
            Location::Sqlite(path) => Some(path.exists()),
            Location::Postgres(url) => match PostgresStore::open_read_only(url) {
                Ok(_) => Some(true),
                Err(Error::NoDatabase { .. }) => Some(false),
                Err(_) => None,
            },
        }
    }
}

impl std::fmt::Display for Location {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Location::Sqlite(path) => write!(f, "{}", path.display()),
            Location::Postgres(url) => write!(f, "{url}"),
        }
    }
}

/// The SQLite file `spec` names: a plain path, `sqlite://PATH` (`sqlite:///abs/path`
/// for an absolute one) or `file:PATH` (`file:///abs/path`), URL forms percent-decoded.
/// Any other `scheme://` is `Error::UnsupportedUrl` (`Location::parse` takes
/// PostgreSQL's).
pub fn sqlite_path(spec: &str) -> Result<PathBuf> {
    let refuse = |reason: String| Error::UnsupportedUrl {
        url: spec.to_string(),
        reason,
    };
    let Some((scheme, rest)) = split_scheme(spec) else {
        return Ok(PathBuf::from(spec));
    };
    let path = match scheme.to_ascii_lowercase().as_str() {
        "sqlite" => rest
            .strip_prefix("//")
            .ok_or_else(|| refuse("write sqlite://PATH".into()))?,
        // `file:` is SQLite's own URI form: `file:rel.db`, `file:/abs.db`,
        // `file:///abs.db` or `file://localhost/abs.db`.
        "file" => match rest.strip_prefix("//") {
            None => rest,
            Some(authority_and_path) => {
                let (host, path) = authority_and_path
                    .find('/')
                    .map_or((authority_and_path, ""), |i| authority_and_path.split_at(i));
                if !host.is_empty() && host != "localhost" {
                    return Err(refuse(format!(
                        "a file: URL names a file on this machine, not on host \"{host}\""
                    )));
                }
                path
            }
        },
        other if rest.starts_with("//") => {
            return Err(refuse(format!("the {other}:// scheme is not supported")));
        }
        // A database server's scheme without the slashes (`postgres:x`, `postgres:/x`)
        // is a mistyped URL, not a file name; `./postgres:x` still names a file.
        other if DATABASE_SCHEMES.contains(&other) => {
            return Err(refuse(format!(
                "\"{other}:\" is not a database URL baton reads (a PostgreSQL server is postgres://HOST/DATABASE); for a file of that name write ./{spec}"
            )));
        }
        // `C:` or `notes:v2.db`: a path that merely contains a colon.
        _ => return Ok(PathBuf::from(spec)),
    };
    if path.contains(['?', '#']) {
        return Err(refuse(
            "query parameters and fragments are not supported (baton sets the open mode itself); percent-encode a literal ? or # as %3F or %23".into(),
        ));
    }
    if path.is_empty() {
        return Err(refuse("it names no file".into()));
    }
    percent_decode(path).map_err(refuse)
}

/// Schemes of database servers and other stores that are URLs, never file names.
const DATABASE_SCHEMES: &[&str] = &[
    "postgres",
    "postgresql",
    "mysql",
    "mariadb",
    "redis",
    "mongodb",
    "mongodb+srv",
    "mssql",
    "sqlserver",
    "oracle",
    "cockroachdb",
    "libsql",
    "http",
    "https",
];

/// `scheme` and what follows `scheme:`, when `spec` starts with an RFC 3986 scheme.
fn split_scheme(spec: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = spec.split_once(':')?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    let valid = first.is_ascii_alphabetic()
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    valid.then_some((scheme, rest))
}

fn percent_decode(text: &str) -> std::result::Result<PathBuf, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("\"%\" at byte {i} does not start a %XX escape"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    let text =
        String::from_utf8(out).map_err(|_| "its path is not UTF-8 once decoded".to_string())?;
    Ok(PathBuf::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(spec: &str) -> String {
        sqlite_path(spec).unwrap().display().to_string()
    }

    #[test]
    fn plain_paths_and_sqlite_urls_name_a_file() {
        assert_eq!(path(".baton/baton.db"), ".baton/baton.db");
        assert_eq!(path("/var/lib/baton.db"), "/var/lib/baton.db");
        assert_eq!(path("notes:v2.db"), "notes:v2.db");
        assert_eq!(path("sqlite://data/baton.db"), "data/baton.db");
        assert_eq!(path("sqlite:///var/lib/baton.db"), "/var/lib/baton.db");
        assert_eq!(path("SQLITE:///x.db"), "/x.db");
        assert_eq!(path("file:rel.db"), "rel.db");
        assert_eq!(path("file:///abs/my%20run.db"), "/abs/my run.db");
        assert_eq!(path("file://localhost/abs.db"), "/abs.db");
    }

    /// A PostgreSQL URL names a server; nothing else with `://` but SQLite's.
    #[test]
    fn a_postgres_url_names_a_server_and_other_servers_are_refused() {
        for url in [
            "postgres://postgres@127.0.0.1:5432/test",
            "POSTGRESQL://h/db",
        ] {
            assert!(
                matches!(Location::parse(url), Ok(Location::Postgres(_))),
                "{url}"
            );
        }
        assert!(matches!(
            Location::parse("sqlite:///x.db"),
            Ok(Location::Sqlite(_))
        ));
        for url in ["mysql://root@localhost/app", "redis://h/0"] {
            let err = Location::parse(url).unwrap_err();
            assert!(matches!(err, Error::UnsupportedUrl { .. }), "{err}");
            let text = err.to_string();
            assert!(text.contains("scheme is not supported"), "{text}");
            assert!(text.contains("sqlite://PATH"), "{text}");
        }
        // Without the slashes too: these used to create files named like the URL.
        for url in ["postgres:/x", "postgres:x", "mysql:db"] {
            let err = Location::parse(url).unwrap_err();
            assert!(err.to_string().contains("not a database URL"), "{err}");
        }
        assert_eq!(
            sqlite_path("./postgres:x").unwrap(),
            PathBuf::from("./postgres:x")
        );
    }

    #[test]
    fn url_forms_that_would_mean_something_else_are_refused() {
        for url in [
            "sqlite:relative.db",
            "sqlite://",
            "sqlite://x.db?mode=ro",
            "file:x.db?immutable=1",
            "file://server/share.db",
            "sqlite://bad%zz.db",
        ] {
            assert!(
                matches!(sqlite_path(url), Err(Error::UnsupportedUrl { .. })),
                "{url}"
            );
        }
    }
}
