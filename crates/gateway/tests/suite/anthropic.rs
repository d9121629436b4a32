//! Anthropic Messages.

use std::time::{Duration, SystemTime};

use baton_gateway::Error;
use baton_gateway::ErrorClass;
use serde_json::json;

use super::common::*;
use super::server::{Action, TestServer, json, json_with};

fn success() -> Action {
    let body = json!({
        "id": "msg_01",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [
            {"type": "text", "text": "Submitting."},
            {"type": "tool_use", "id": "toolu_01", "name": "submit_claim",
             "input": {"summary": "migrated the ledger calls", "decisions": []}}
        ],
        "stop_reason": "tool_use",
        "stop_sequence": null,
        "usage": {
            "input_tokens": 100,
            "output_tokens": 250,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 1800
        }
    });
    json(200, &body.to_string())
}

fn error(status: u16, kind: &str, message: &str) -> Action {
    error_with(status, &[], kind, message)
}

fn error_with(status: u16, headers: &[(&str, &str)], kind: &str, message: &str) -> Action {
    json_with(
        status,
        headers,
        &json!({"type": "error", "error": {"type": kind, "message": message}}).to_string(),
    )
}

fn anthropic(server: &TestServer) -> std::sync::Arc<dyn baton_gateway::Gateway> {
    gateway(
        "anthropic/claude-sonnet-4-5",
        &server.base(),
        Some(ANTHROPIC_KEY),
        json!({}),
    )
}

#[test]
fn forces_the_claim_tool_and_reads_its_input() {
    let server = TestServer::start(vec![success()]);
    let user = briefing();
    let response = anthropic(&server).complete(&request(&user)).unwrap();
    let claim: serde_json::Value = serde_json::from_str(&response.text).unwrap();
    assert_eq!(
        claim,
        json!({"summary": "migrated the ledger calls", "decisions": []})
    );
    assert_eq!(response.usage.input_tokens, 1900);
    assert_eq!(response.usage.output_tokens, 250);
    assert_eq!(response.usage.cached_tokens, 1800);

    let sent = server.only_request();
    assert_sent_as_received(&response, &sent.body);
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/messages");
    assert_eq!(sent.header("x-api-key"), Some(ANTHROPIC_KEY));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("authorization"), None);
    assert!(!sent.body.contains(ANTHROPIC_KEY));
    let body = sent.json();
    assert_eq!(body["model"], "claude-sonnet-4-5");
    assert_eq!(body["system"], SYSTEM);
    assert_eq!(body["messages"], json!([{"role": "user", "content": user}]));
    assert_eq!(body["max_tokens"], 4096);
    assert_eq!(body["tools"].as_array().unwrap().len(), 1);
    assert_eq!(body["tools"][0]["name"], "submit_claim");
    assert_eq!(body["tools"][0]["input_schema"], *schema());
    assert_eq!(
        body["tool_choice"],
        json!({"type": "tool", "name": "submit_claim"})
    );
}

#[test]
fn instructions_mode_reads_text() {
    let body = json!({
        "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "{\"summary\":\"x\"}"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 5, "output_tokens": 6}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let gw = gateway(
        "anthropic/claude-haiku-4-5",
        &server.base(),
        Some(ANTHROPIC_KEY),
        json!({"structured": "instructions", "max_tokens": 1000}),
    );
    let response = gw.complete(&request("hi")).unwrap();
    assert_eq!(response.text, "{\"summary\":\"x\"}");
    let sent = server.only_request().json();
    assert!(sent.get("tools").is_none());
    assert_eq!(sent["max_tokens"], 1000);
}

#[test]
fn overloaded_529_is_retried() {
    let server = TestServer::start(vec![
        error(529, "overloaded_error", "Overloaded"),
        error(529, "overloaded_error", "Overloaded"),
        success(),
    ]);
    let r = run(anthropic(&server).as_ref(), &briefing());
    assert!(r.result.is_ok(), "{:?}", r.result);
    assert_eq!(
        classes(&r.attempts),
        vec![Some("overloaded"), Some("overloaded"), None]
    );
    // No delay given: exponential backoff from the policy's base.
    assert_eq!(
        r.slept,
        vec![Duration::from_millis(1), Duration::from_millis(2)]
    );
}

#[test]
fn rate_limit_reset_header_is_honoured() {
    let reset = rfc3339(SystemTime::now() + Duration::from_secs(20));
    let server = TestServer::start(vec![
        error_with(
            429,
            &[
                ("anthropic-ratelimit-requests-remaining", "0"),
                ("anthropic-ratelimit-requests-reset", &reset),
            ],
            "rate_limit_error",
            "This request would exceed your organization's rate limit of 50 requests per minute.",
        ),
        error_with(429, &[("retry-after", "4")], "rate_limit_error", "again"),
        success(),
    ]);
    let r = run(anthropic(&server).as_ref(), &briefing());
    assert!(r.result.is_ok());
    assert_eq!(r.slept.len(), 2);
    assert!(
        r.slept[0] > secs(18.0) && r.slept[0] <= secs(20.0),
        "{:?}",
        r.slept
    );
    assert_eq!(r.slept[1], secs(4.0));
}

#[test]
fn prompt_too_long_is_never_retried() {
    let server = TestServer::start(vec![error(
        400,
        "invalid_request_error",
        "prompt is too long: 208310 tokens > 200000 maximum",
    )]);
    let r = run(anthropic(&server).as_ref(), &briefing());
    assert!(
        matches!(r.result, Err(Error::ContextTooLong { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn max_tokens_stop_is_truncated() {
    let body = json!({
        "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "submit_claim", "input": {}}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 5, "output_tokens": 4096}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let r = run(anthropic(&server).as_ref(), "hi");
    assert!(
        matches!(r.result, Err(Error::Truncated { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn an_openai_key_offered_to_anthropic_is_named() {
    let server = TestServer::start(vec![error(
        401,
        "authentication_error",
        "invalid x-api-key",
    )]);
    let gw = gateway(
        "anthropic/claude-sonnet-4-5",
        &server.base(),
        Some(OPENAI_KEY),
        json!({}),
    );
    let r = run(gw.as_ref(), "hi");
    let text = r.result.unwrap_err().to_string();
    assert!(text.contains("looks like an OpenAI"), "{text}");
    assert!(text.contains("offered to the anthropic provider"), "{text}");
    assert!(!text.contains(OPENAI_KEY));
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn unknown_model_and_server_errors() {
    let server = TestServer::start(vec![
        error(404, "not_found_error", "model: claude-9"),
        error(500, "api_error", "Internal server error"),
    ]);
    let gw = anthropic(&server);
    let err = gw.complete(&request("hi")).unwrap_err();
    assert_eq!(err.class(), ErrorClass::UnknownModel, "{err}");
    let err = gw.complete(&request("hi")).unwrap_err();
    assert_eq!(err.class(), ErrorClass::ServerError, "{err}");
    assert!(err.is_retryable());
}

/// Regression: Anthropic's real "credit balance is too low" error is HTTP 400
/// `invalid_request_error`, and was classified as a bad request; it is a spent quota
/// (not retried, and the run stops for a human instead of re-sending).
#[test]
fn credit_balance_too_low_is_quota_exhausted_not_a_bad_request() {
    let server = TestServer::start(vec![json(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#,
    )]);
    let r = run(anthropic(&server).as_ref(), "hi");
    let err = r.result.unwrap_err();
    assert!(matches!(err, Error::QuotaExhausted { .. }), "{err:?}");
    assert_eq!(err.class(), ErrorClass::QuotaExhausted);
    assert!(
        err.to_string().contains("credit balance is too low"),
        "{err}"
    );
    assert_eq!(r.attempts.len(), 1);
}

/// Regression: a `max_tokens` stop recorded no usage although Anthropic bills it.
#[test]
fn max_tokens_stop_keeps_the_billed_usage() {
    let body = json!({
        "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "submit_claim", "input": {}}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 4096}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let err = run(anthropic(&server).as_ref(), "hi").result.unwrap_err();
    assert_eq!(
        err.usage(),
        Some(baton_gateway::Usage {
            input_tokens: 105,
            output_tokens: 4096,
            cached_tokens: 100,
        })
    );
}

/// Regression: an Anthropic `api_base` ending in `/v1` (copied from an OpenAI-style
/// local example) called `/v1/v1/messages` and failed as "unknown model".
#[test]
fn an_api_base_ending_in_v1_calls_v1_messages_once() {
    for base in ["/v1", "/v1/"] {
        let server = TestServer::start(vec![success()]);
        let gw = gateway(
            "anthropic/claude-sonnet-4-5",
            &format!("{}{base}", server.base()),
            Some(ANTHROPIC_KEY),
            json!({}),
        );
        run(gw.as_ref(), &briefing()).result.unwrap();
        assert_eq!(server.only_request().path, "/v1/messages");
    }
}

/// Regression: forced tool use against a local Messages server ran every call to the
/// output limit (0 of 2 claims); after one such truncation the worker asks for the
/// claim in the prompt, and says so.
#[test]
fn a_forced_tool_call_that_never_ends_falls_back_to_instructions_and_says_so() {
    let runaway = json!({
        "type": "message", "role": "assistant",
        "content": [{"type": "tool_use", "id": "t", "name": "submit_claim", "input": {}}],
        "stop_reason": "max_tokens",
        "usage": {"input_tokens": 900, "output_tokens": 4096}
    });
    let answer = json!({
        "type": "message", "role": "assistant",
        "content": [{"type": "text", "text": "{\"summary\": \"s\", \"last_action\": \"a\"}"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 900, "output_tokens": 20}
    });
    let server = TestServer::start(vec![
        json(200, &runaway.to_string()),
        json(200, &answer.to_string()),
    ]);
    let gw = anthropic(&server);
    let first = run(gw.as_ref(), "hi").result.unwrap_err();
    let text = first.to_string();
    assert!(
        text.contains("max_tokens = 4096, baton's default"),
        "{text}"
    );
    assert!(text.contains("structured = \"instructions\""), "{text}");
    run(gw.as_ref(), "hi").result.unwrap();
    let sent: Vec<serde_json::Value> = server.requests().iter().map(|r| r.json()).collect();
    assert!(sent[0].get("tools").is_some());
    assert!(
        sent[1].get("tools").is_none() && sent[1].get("tool_choice").is_none(),
        "{}",
        sent[1]
    );
}
