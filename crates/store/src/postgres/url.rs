//! The database's URL: the client's own parameters, baton's `schema=`, the defaults a
//! connection gets when the URL does not say, and the form shown in messages.

use std::str::FromStr;
use std::time::Duration;

use crate::Error;

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

/// Where the database is, as `--db` said it.
#[derive(Clone)]
pub struct PostgresUrl {
    pub(super) config: postgres::Config,
    pub(super) schema: String,
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

/// `url` with its password (if any) replaced by `***`: in the user part
/// (`user:pw@host`) and as a query parameter (`?password=pw`, which the client accepts
/// too).
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let params: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_is_never_shown_in_the_user_part_or_the_query() {
        assert_eq!(
            redact("postgres://u:pw@h:5432/db?schema=s"),
            "postgres://u:***@h:5432/db?schema=s"
        );
        assert_eq!(
            redact("postgres://u@h/db?sslmode=disable&password=s3cret&schema=x"),
            "postgres://u@h/db?sslmode=disable&password=***&schema=x"
        );
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
    }

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
