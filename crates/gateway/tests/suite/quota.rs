//! Spent quotas on each wire format: classified `QuotaExhausted` (not retried), with
//! the reset the provider named, so the worker's pool can be marked out until then.

use std::time::{Duration, SystemTime};

use baton_gateway::{Error, ErrorClass};
use serde_json::json;

use super::common::*;
use super::server::{TestServer, json, json_with};

fn resets_within(err: &Error, expected: Duration) {
    let reset = err
        .quota_reset()
        .unwrap_or_else(|| panic!("no reset: {err:?}"));
    let slack = Duration::from_secs(5);
    assert!(
        reset <= expected && reset + slack >= expected,
        "reset {reset:?}, expected about {expected:?}"
    );
}

/// OpenAI's spent credit: HTTP 429 `insufficient_quota`, which names no reset.
#[test]
fn openai_insufficient_quota_is_exhausted_without_a_reset() {
    let server = TestServer::start(vec![json(
        429,
        &json!({"error": {
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}})
        .to_string(),
    )]);
    let gw = gateway(
        "openai/gpt-4.1-mini",
        &format!("{}/v1", server.base()),
        Some(OPENAI_KEY),
        json!({}),
    );
    let r = run(gw.as_ref(), "hi");
    let err = r.result.unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExhausted, "{err}");
    assert_eq!(err.quota_reset(), None);
    assert_eq!(r.attempts.len(), 1, "not retried");
}

/// A per-day request limit (`rate_limit_exceeded`, "requests per day (RPD)") whose
/// reset header lies a day away was a rate limit baton declined to wait for; it is
/// the day's quota spent, and the reset comes with it.
#[test]
fn openai_429_whose_reset_is_a_day_away_is_a_spent_quota_with_its_reset() {
    let server = TestServer::start(vec![json_with(
        429,
        &[
            ("x-ratelimit-limit-requests", "10000"),
            ("x-ratelimit-remaining-requests", "0"),
            ("x-ratelimit-reset-requests", "23h59m30s"),
        ],
        &json!({"error": {
            "message": "Rate limit reached for gpt-4.1-mini in organization org-x on requests per day (RPD): Limit 10000, Used 10000, Requested 1.",
            "type": "requests", "param": null, "code": "rate_limit_exceeded"}})
        .to_string(),
    )]);
    let gw = gateway(
        "openai/gpt-4.1-mini",
        &format!("{}/v1", server.base()),
        Some(OPENAI_KEY),
        json!({}),
    );
    let r = run(gw.as_ref(), "hi");
    let err = r.result.unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExhausted, "{err}");
    resets_within(&err, Duration::from_secs(23 * 3600 + 59 * 60 + 30));
    assert_eq!(
        err.retry_after(),
        None,
        "no retry waits for a quota's reset"
    );
    assert!(err.to_string().contains("resets in 86370 s"), "{err}");
    assert_eq!(server.requests().len(), 1);
}

/// A per-minute rate limit stays a rate limit: retried after its delay.
#[test]
fn a_429_that_resets_within_the_hour_is_still_a_rate_limit() {
    let server = TestServer::start(vec![json_with(
        429,
        &[("retry-after", "3600")],
        &json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}).to_string(),
    )]);
    let gw = gateway(
        "openai/gpt-4.1-mini",
        &format!("{}/v1", server.base()),
        Some(OPENAI_KEY),
        json!({}),
    );
    let err = run(gw.as_ref(), "hi").result.unwrap_err();
    assert_eq!(err.class(), ErrorClass::RateLimited, "{err}");
    assert_eq!(err.quota_reset(), None);
}

/// Anthropic's monthly spend limit is HTTP 400 `invalid_request_error` naming the
/// day access returns; it was a bad request.
#[test]
fn anthropic_spend_limit_is_a_spent_quota_until_the_day_it_names() {
    let reset_at = SystemTime::now() + Duration::from_secs(9 * 24 * 3600);
    let day = rfc3339(reset_at)[..10].to_string();
    let message = format!(
        "You have reached your specified API usage limits. You will regain access on {day} at 00:00 UTC."
    );
    let server = TestServer::start(vec![json(
        400,
        &json!({"type": "error", "error": {"type": "invalid_request_error", "message": message},
                "request_id": "req_011CZLrUfBVkVHn5T6EqQaf7"})
        .to_string(),
    )]);
    let gw = gateway(
        "anthropic/claude-sonnet-4-5",
        &server.base(),
        Some(ANTHROPIC_KEY),
        json!({}),
    );
    let r = run(gw.as_ref(), "hi");
    let err = r.result.unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExhausted, "{err}");
    let midnight: jiff::Timestamp = format!("{day}T00:00:00Z").parse().unwrap();
    let now = jiff::Timestamp::try_from(SystemTime::now()).unwrap();
    let expected = Duration::from_secs((midnight.as_second() - now.as_second()) as u64);
    resets_within(&err, expected);
    assert_eq!(r.attempts.len(), 1);
}

/// Anthropic's 429 `rate_limit_error` whose `anthropic-ratelimit-*-reset` instant is
/// two days away (and no `retry-after`): a spent quota, reset at that instant.
#[test]
fn anthropic_429_whose_reset_header_is_days_away_is_a_spent_quota() {
    let reset_at = SystemTime::now() + Duration::from_secs(2 * 24 * 3600);
    let reset = rfc3339(reset_at);
    let server = TestServer::start(vec![json_with(
        429,
        &[
            ("anthropic-ratelimit-tokens-remaining", "0"),
            ("anthropic-ratelimit-tokens-reset", &reset),
            ("anthropic-ratelimit-requests-remaining", "40"),
            (
                "anthropic-ratelimit-requests-reset",
                &rfc3339(SystemTime::now()),
            ),
        ],
        &json!({"type": "error", "error": {"type": "rate_limit_error",
            "message": "This request would exceed your organization's rate limit."}})
        .to_string(),
    )]);
    let gw = gateway(
        "anthropic/claude-sonnet-4-5",
        &server.base(),
        Some(ANTHROPIC_KEY),
        json!({}),
    );
    let r = run(gw.as_ref(), "hi");
    let err = r.result.unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExhausted, "{err}");
    resets_within(&err, Duration::from_secs(2 * 24 * 3600));
    assert_eq!(r.attempts.len(), 1);
}

fn gemini_exhausted(quota_id: &str, delay: &str) -> String {
    json!({"error": {
        "code": 429,
        "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
        "status": "RESOURCE_EXHAUSTED",
        "details": [
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                "quotaId": quota_id,
                "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                "quotaValue": "250"}]},
            {"@type": "type.googleapis.com/google.rpc.Help", "links": [
                {"description": "Learn more about Gemini API quotas", "url": "https://ai.google.dev/gemini-api/docs/rate-limits"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
        ]}})
    .to_string()
}

fn gemini(server: &TestServer) -> std::sync::Arc<dyn baton_gateway::Gateway> {
    gateway(
        "gemini/gemini-2.5-flash",
        &server.base(),
        Some(GEMINI_KEY),
        json!({}),
    )
}

/// Gemini's per-day quota is `RESOURCE_EXHAUSTED` with a QuotaFailure naming a
/// `…PerDay…` quota; its `retryDelay` of seconds is no reset (the day's quota does
/// not come back in 20 s), so none is claimed. It was retried as a rate limit.
#[test]
fn gemini_per_day_quota_is_spent_not_rate_limited() {
    let server = TestServer::start(vec![json(
        429,
        &gemini_exhausted("GenerateRequestsPerDayPerProjectPerModel-FreeTier", "20s"),
    )]);
    let r = run(gemini(&server).as_ref(), "hi");
    let err = r.result.unwrap_err();
    assert_eq!(err.class(), ErrorClass::QuotaExhausted, "{err}");
    assert_eq!(err.quota_reset(), None);
    assert_eq!(r.attempts.len(), 1, "not retried");
    assert_eq!(server.requests().len(), 1);
}

/// The per-minute one stays a rate limit, retried after its `retryDelay`.
#[test]
fn gemini_per_minute_quota_is_a_rate_limit() {
    let server = TestServer::start(vec![json(
        429,
        &gemini_exhausted("GenerateRequestsPerMinutePerProjectPerModel-FreeTier", "8s"),
    )]);
    let err = gemini(&server).complete(&request("hi")).unwrap_err();
    assert_eq!(err.class(), ErrorClass::RateLimited, "{err}");
    assert_eq!(err.retry_after(), Some(Duration::from_secs(8)));
}
