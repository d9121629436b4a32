//! Who may ask what: the token, the CSRF value of actions, and the `Host` and `Origin`
//! checks that keep other web pages out.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::App;
use super::api::ApiError;

/// The cookie the page's requests carry the token in (set when the page is opened with
/// `?token=`): `EventSource` cannot send an `Authorization` header. Named by the port
/// the browser addressed (the `Host` header's, not the one the server bound: behind a
/// container's published port they differ): browsers keep cookies per host name, not
/// per port, so two servers on one machine, each with its own token, would otherwise
/// overwrite each other's, and opening one page signed the other out.
pub(crate) fn token_cookie(headers: &HeaderMap) -> String {
    let host = (headers.get(header::HOST))
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    // `127.0.0.1:7878`, `[::1]:7878`, or `localhost` (the scheme's port).
    let port = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && !port.is_empty() && !port.contains(']') => port,
        _ => "80",
    };
    let port: String = port.chars().filter(char::is_ascii_digit).collect();
    format!("baton_token_{port}")
}
/// The header every action from the page carries.
pub(crate) const CSRF_HEADER: &str = "x-baton-csrf";

/// 32 random bytes, as hex.
pub(crate) fn random_hex() -> String {
    let mut bytes = [0u8; 32];
    let read = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes));
    if read.is_err() {
        // No /dev/urandom: two UUIDv7s, 148 random bits.
        let a = uuid::Uuid::now_v7();
        let b = uuid::Uuid::now_v7();
        return format!("{}{}", a.simple(), b.simple());
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Compares in time independent of where the first difference is.
pub(crate) fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Bearer ")
        .map(str::trim)
}

pub(crate) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

pub(crate) fn query_param<'a>(query: Option<&'a str>, name: &str) -> Option<&'a str> {
    query?
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// Whether `host` (a `Host` header's value) names this machine's loopback: `localhost`
/// or a loopback address, never a name that merely starts like one
/// (`127.0.0.1.evil.example` is a name anyone can point at 127.0.0.1).
fn loopback_host(host: &str) -> bool {
    let name = match host.rsplit_once(':') {
        Some((name, port)) if !name.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    };
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let ip = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    ip.parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_loopback())
}

fn refuse(status: StatusCode, code: &'static str, message: impl Into<String>) -> Response {
    ApiError::new(status, code, message).into_response()
}

/// Checks every request to `/api/…` and `/mcp` (the page and its assets are public:
/// they hold no data).
pub(crate) async fn guard(State(app): State<Arc<App>>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let guarded = path.starts_with("/api/") || path == "/api" || path.starts_with("/mcp");
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    // DNS rebinding: a page of another site whose name now points at 127.0.0.1 sends
    // its own name as Host. Without a token, only loopback names are served.
    if app.token.is_none() && !loopback_host(host) {
        return refuse(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "this server answers requests to its loopback address only (Host {host:?}); open http://127.0.0.1:{}/",
                app.bind.port()
            ),
        );
    }
    if !guarded {
        return next.run(request).await;
    }
    // A browser says which page sent a request; only this server's own may act.
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|o| o.to_str().ok()) {
        let own = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .is_some_and(|o| o == host);
        if !own {
            return refuse(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!(
                    "requests from pages of {origin} are refused; use the page this server serves"
                ),
            );
        }
    }
    let by_bearer = match (&app.token, bearer(headers)) {
        (Some(token), Some(given)) => same(token, given),
        _ => false,
    };
    if let Some(token) = &app.token {
        let by_cookie = cookie(headers, &token_cookie(headers)).is_some_and(|c| same(token, c));
        let by_query = query_param(request.uri().query(), "token").is_some_and(|q| same(token, q));
        if !(by_bearer || by_cookie || by_query) {
            return refuse(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "this server needs its token: send `Authorization: Bearer TOKEN` (the --token or BATON_TOKEN it was started with), or open the page once at /?token=TOKEN",
            );
        }
    }
    // Actions: the page's CSRF value, or the token in a header no other site's page can
    // make a browser send. MCP clients are not browsers; the Origin check covers them.
    let acts = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if acts && !path.starts_with("/mcp") && !by_bearer {
        let csrf = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !csrf.is_some_and(|c| same(&app.csrf, c)) {
            return refuse(
                StatusCode::FORBIDDEN,
                "csrf",
                "an action needs the header X-Baton-CSRF with the `csrf` value of GET /api/session (or the token as `Authorization: Bearer TOKEN`)",
            );
        }
    }
    next.run(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_cookie_is_named_by_the_port_the_browser_addressed() {
        for (host, name) in [
            ("127.0.0.1:8080", "baton_token_8080"),
            ("[::1]:9", "baton_token_9"),
            ("localhost", "baton_token_80"),
            ("[::1]", "baton_token_80"),
            ("example.com:7878", "baton_token_7878"),
        ] {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, host.parse().unwrap());
            assert_eq!(token_cookie(&headers), name, "{host}");
        }
        assert_eq!(token_cookie(&HeaderMap::new()), "baton_token_80");
    }

    #[test]
    fn loopback_names_with_and_without_ports() {
        for h in [
            "127.0.0.1:7878",
            "localhost:1",
            "[::1]:7878",
            "localhost",
            "127.0.0.2:80",
        ] {
            assert!(loopback_host(h), "{h}");
        }
        for h in [
            "evil.example:7878",
            "10.0.0.1:7878",
            "",
            "localhost.evil.example:7878",
        ] {
            assert!(!loopback_host(h), "{h}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "abcd"));
        assert_eq!(random_hex().len(), 64);
        assert_ne!(random_hex(), random_hex());
    }
}
