//! The dashboard: one HTML page, its script and its style sheet, compiled into the
//! binary (no CDN, no bundler, nothing fetched from the network), and the API's
//! OpenAPI description.

use std::sync::Arc;

use axum::extract::{Path, Request, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::App;
use super::api::ApiError;
use super::guard::{query_param, same, token_cookie};

const INDEX: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");
const OPENAPI: &str = include_str!("openapi.json");

/// The assets by name, with their types; what the page weighs is their sum.
pub(crate) const ASSETS: [(&str, &str, &str); 2] = [
    ("app.js", "text/javascript; charset=utf-8", APP_JS),
    ("app.css", "text/css; charset=utf-8", APP_CSS),
];

const SECURITY: [(&str, &str); 4] = [
    // Scripts and styles from this server only; no inline script; nothing framed.
    (
        "content-security-policy",
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
    ("cache-control", "no-store"),
];

/// `GET /`: the page. Opened with `?token=…` (the right one), it keeps the token in a
/// cookie only this site's requests carry.
pub(crate) async fn index(State(app): State<Arc<App>>, request: Request) -> Response {
    let mut response =
        ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], INDEX).into_response();
    let headers = response.headers_mut();
    for (k, v) in SECURITY {
        headers.insert(k, header::HeaderValue::from_static(v));
    }
    if let (Some(token), Some(given)) = (&app.token, query_param(request.uri().query(), "token"))
        && same(token, given)
        && let Ok(v) = header::HeaderValue::from_str(&format!(
            "{}={given}; HttpOnly; SameSite=Strict; Path=/",
            token_cookie(request.headers())
        ))
    {
        headers.insert(header::SET_COOKIE, v);
    }
    response
}

pub(crate) async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, body)) => {
            let mut response = ([(header::CONTENT_TYPE, *kind)], *body).into_response();
            for (k, v) in SECURITY {
                response
                    .headers_mut()
                    .insert(k, header::HeaderValue::from_static(v));
            }
            response
        }
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

pub(crate) async fn openapi() -> Response {
    ([(header::CONTENT_TYPE, "application/json")], OPENAPI).into_response()
}

pub(crate) async fn api_not_found(request: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no endpoint {} {}; /api/openapi.json lists them",
            request.method(),
            request.uri().path()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page's promises, checked on its source: nothing from the network, no inline
    /// script or style (the CSP would refuse them anyway), no API that parses text as
    /// HTML, and a weight that stays small.
    #[test]
    fn the_dashboard_is_self_contained_builds_no_html_from_text_and_stays_small() {
        for (name, text) in [
            ("index.html", INDEX),
            ("app.js", APP_JS),
            ("app.css", APP_CSS),
        ] {
            for far in ["http://", "https://", "//cdn", "@import"] {
                assert!(!text.contains(far), "{name} refers to {far}");
            }
        }
        assert!(!INDEX.contains("style="), "an inline style attribute");
        assert_eq!(INDEX.matches("<script").count(), 1);
        assert!(INDEX.contains(r#"<script src="/assets/app.js" defer></script>"#));
        for parse in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
        ] {
            assert!(!APP_JS.contains(parse), "app.js uses {parse}");
        }
        let weight = INDEX.len() + APP_JS.len() + APP_CSS.len();
        assert!(weight < 64 * 1024, "the page weighs {weight} bytes");
    }
}
