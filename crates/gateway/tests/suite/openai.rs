//! OpenAI Chat Completions and the compatible servers.

use std::net::TcpListener;
use std::time::{Duration, SystemTime};

use baton_gateway::Error;
use baton_gateway::ErrorClass;
use serde_json::json;

use super::common::*;
use super::server::{Action, TestServer, json, json_with};

const CLAIM: &str = r#"{"summary":"migrated the ledger calls"}"#;

fn success() -> Action {
    let body = json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4.1-mini",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": CLAIM, "refusal": null},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": 1900,
            "completion_tokens": 120,
            "total_tokens": 2020,
            "prompt_tokens_details": {"cached_tokens": 1024}
        }
    });
    json(200, &body.to_string())
}

fn error_body(message: &str, kind: &str, code: &str) -> String {
    json!({"error": {"message": message, "type": kind, "param": null, "code": code}}).to_string()
}

fn rate_limited(headers: &[(&str, &str)], message: &str) -> Action {
    json_with(
        429,
        headers,
        &error_body(message, "requests", "rate_limit_exceeded"),
    )
}

fn openai(server: &TestServer) -> std::sync::Arc<dyn baton_gateway::Gateway> {
    gateway(
        "openai/gpt-4.1-mini",
        &format!("{}/v1", server.base()),
        Some(OPENAI_KEY),
        json!({}),
    )
}

#[test]
fn sends_system_and_user_with_the_schema_and_reads_usage() {
    let server = TestServer::start(vec![success()]);
    let user = briefing();
    let response = openai(&server).complete(&request(&user)).unwrap();
    assert_eq!(response.text, CLAIM);
    assert_eq!(response.usage.input_tokens, 1900);
    assert_eq!(response.usage.output_tokens, 120);
    assert_eq!(response.usage.cached_tokens, 1024);

    let sent = server.only_request();
    assert_sent_as_received(&response, &sent.body);
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(
        sent.header("authorization"),
        Some(format!("Bearer {OPENAI_KEY}").as_str())
    );
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert!(
        !sent.body.contains(OPENAI_KEY),
        "the key leaked into the body"
    );
    let body = sent.json();
    assert_eq!(body["model"], "gpt-4.1-mini");
    assert_eq!(
        body["messages"],
        json!([{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}])
    );
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["schema"], *schema());
    assert!(body["response_format"]["json_schema"]["strict"].is_boolean());
    let name = body["response_format"]["json_schema"]["name"]
        .as_str()
        .unwrap();
    assert!(
        name.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    );
    assert!((body["temperature"].as_f64().unwrap() - 0.2).abs() < 1e-6);
    assert!(body.get("max_tokens").is_none());
}

#[test]
fn max_tokens_uses_each_dialects_field() {
    let server = TestServer::start(vec![success(), success()]);
    let user = briefing();
    let mut req = request(&user);
    req.max_tokens = Some(777);
    openai(&server).complete(&req).unwrap();
    gateway(
        "groq/llama-3.3-70b",
        &server.base(),
        Some("gsk_test"),
        json!({}),
    )
    .complete(&req)
    .unwrap();
    let sent = server.requests();
    assert_eq!(sent[0].json()["max_completion_tokens"], 777);
    assert_eq!(sent[1].json()["max_tokens"], 777);
    // Groq defaults to JSON mode.
    assert_eq!(
        sent[1].json()["response_format"],
        json!({"type": "json_object"})
    );
    assert_eq!(sent[1].path, "/chat/completions");
}

#[test]
fn local_servers_need_no_key_and_get_instructions_only() {
    let server = TestServer::start(vec![success(), success()]);
    let user = briefing();
    gateway(
        "ollama/qwen3:8b",
        &format!("{}/v1", server.base()),
        None,
        json!({}),
    )
    .complete(&request(&user))
    .unwrap();
    gateway(
        "llamacpp/local",
        &format!("{}/v1", server.base()),
        None,
        json!({"structured": "schema"}),
    )
    .complete(&request(&user))
    .unwrap();
    let sent = server.requests();
    assert_eq!(sent[0].header("authorization"), None);
    let body = sent[0].json();
    assert_eq!(body["model"], "qwen3:8b");
    assert!(body.get("response_format").is_none());
    assert_eq!(body["messages"].as_array().unwrap().len(), 2);
    assert_eq!(sent[1].json()["response_format"]["type"], "json_schema");
}

#[test]
fn a_missing_key_fails_before_any_request() {
    let err = baton_gateway::for_model("openai/gpt-4.1", &Default::default()).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Auth);
    assert!(err.to_string().contains("OPENAI_API_KEY"), "{err}");
}

#[test]
fn the_gateway_debug_output_hides_the_key() {
    let server = TestServer::start(vec![]);
    let gw = openai(&server);
    let shown = format!("{gw:?}");
    assert!(!shown.contains(OPENAI_KEY), "{shown}");
    assert!(shown.contains("[redacted]"), "{shown}");
}

fn first_delay(action: Action) -> Option<Duration> {
    let server = TestServer::start(vec![action]);
    let user = briefing();
    match openai(&server).complete(&request(&user)) {
        Err(Error::RateLimited { retry_after, .. }) => retry_after,
        other => panic!("expected rate limited, got {other:?}"),
    }
}

#[test]
fn rate_limit_delay_in_every_form() {
    assert_eq!(
        first_delay(rate_limited(&[("retry-after", "8")], "slow down")),
        Some(secs(8.0))
    );
    assert_eq!(
        first_delay(rate_limited(&[("retry-after-ms", "1500")], "slow down")),
        Some(secs(1.5))
    );
    let at = SystemTime::now() + Duration::from_secs(30);
    let d = first_delay(rate_limited(
        &[("retry-after", &http_date(at))],
        "slow down",
    ))
    .unwrap();
    assert!(d > secs(28.0) && d <= secs(30.0), "{d:?}");
    assert_eq!(
        first_delay(rate_limited(
            &[
                ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "1s"),
                ("x-ratelimit-remaining-tokens", "90000"),
                ("x-ratelimit-reset-tokens", "6m0s"),
            ],
            "Rate limit reached for requests"
        )),
        Some(secs(1.0))
    );
    assert_eq!(
        first_delay(rate_limited(&[("x-ratelimit-reset-tokens", "20ms")], "TPM")),
        Some(secs(0.02))
    );
    assert_eq!(
        first_delay(rate_limited(
            &[],
            "Rate limit reached for gpt-4.1 in organization org-x on tokens per min (TPM): Limit 30000, Used 29000, Requested 2000. Please try again in 8.4s."
        )),
        Some(secs(8.4))
    );
    assert_eq!(
        first_delay(rate_limited(&[], "Please try again in 1m30s.")),
        Some(secs(90.0))
    );
    assert_eq!(first_delay(rate_limited(&[], "slow down")), None);
}

#[test]
fn repeated_rate_limits_are_each_honoured() {
    let server = TestServer::start(vec![
        rate_limited(&[("retry-after", "3")], "slow down"),
        rate_limited(&[], "Please try again in 1.5s."),
        success(),
    ]);
    let gw = openai(&server);
    let r = run(gw.as_ref(), &briefing());
    assert_eq!(r.result.unwrap().text, CLAIM);
    assert_eq!(r.slept, vec![secs(3.0), secs(1.5)]);
    assert_eq!(
        classes(&r.attempts),
        vec![Some("rate_limited"), Some("rate_limited"), None]
    );
    assert_eq!(r.attempts[0].retry_after, Some(secs(3.0)));
    assert_eq!(r.attempts[1].delay, Some(secs(1.5)));
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn server_errors_are_retried_until_success() {
    let server = TestServer::start(vec![
        json(
            500,
            &error_body("The server had an error", "server_error", ""),
        ),
        json(503, "<html>Service Unavailable</html>"),
        success(),
    ]);
    let r = run(openai(&server).as_ref(), &briefing());
    assert!(r.result.is_ok(), "{:?}", r.result);
    assert_eq!(
        classes(&r.attempts),
        vec![Some("server_error"), Some("server_error"), None]
    );
}

#[test]
fn quota_exhaustion_is_not_a_rate_limit() {
    let server = TestServer::start(vec![json(
        429,
        &error_body(
            "You exceeded your current quota, please check your plan and billing details.",
            "insufficient_quota",
            "insufficient_quota",
        ),
    )]);
    let r = run(openai(&server).as_ref(), &briefing());
    assert!(
        matches!(r.result, Err(Error::QuotaExhausted { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn finish_reason_length_is_truncated_and_not_retried() {
    let body = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"summary\": \"migr"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 64}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let r = run(openai(&server).as_ref(), &briefing());
    let err = r.result.unwrap_err();
    assert!(matches!(err, Error::Truncated { .. }), "{err}");
    assert!(err.to_string().contains("64"), "{err}");
    // What the model wrote before the cut is kept for the record.
    assert_eq!(err.partial_output(), Some("{\"summary\": \"migr"));
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn context_too_long_is_never_retried() {
    let server = TestServer::start(vec![json(
        400,
        &error_body(
            "This model's maximum context length is 128000 tokens. However, your messages resulted in 130012 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
        ),
    )]);
    let r = run(openai(&server).as_ref(), &briefing());
    assert!(
        matches!(r.result, Err(Error::ContextTooLong { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn other_bad_requests_are_not_retried() {
    let server = TestServer::start(vec![json(
        400,
        &error_body(
            "Invalid schema for response_format 'WorkerResult'",
            "invalid_request_error",
            "invalid_json_schema",
        ),
    )]);
    let r = run(openai(&server).as_ref(), &briefing());
    let err = r.result.unwrap_err();
    assert!(matches!(err, Error::BadRequest { .. }), "{err}");
    assert!(err.to_string().contains("Invalid schema"), "{err}");
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn a_bad_key_is_not_retried_and_names_the_wrong_provider() {
    // OpenAI echoes part of the key; with a short key it echoes all of it.
    let body = error_body(
        &format!(
            "Incorrect API key provided: {ANTHROPIC_KEY}. You can find your API key at https://platform.openai.com/account/api-keys."
        ),
        "invalid_request_error",
        "invalid_api_key",
    );
    let server = TestServer::start(vec![json(401, &body)]);
    let gw = gateway(
        "openai/gpt-4.1-mini",
        &server.base(),
        Some(ANTHROPIC_KEY),
        json!({}),
    );
    let r = run(gw.as_ref(), &briefing());
    let err = r.result.unwrap_err();
    assert!(matches!(err, Error::Auth { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("this looks like an Anthropic key offered to the openai provider"),
        "{text}"
    );
    assert!(!text.contains(ANTHROPIC_KEY), "key leaked: {text}");
    assert!(!format!("{err:?}").contains(ANTHROPIC_KEY));
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn an_unknown_model_is_its_own_class() {
    let server = TestServer::start(vec![json(
        404,
        &error_body(
            "The model `gpt-9` does not exist or you do not have access to it.",
            "invalid_request_error",
            "model_not_found",
        ),
    )]);
    let r = run(openai(&server).as_ref(), &briefing());
    match r.result {
        Err(Error::UnknownModel { model, .. }) => assert_eq!(model, "openai/gpt-4.1-mini"),
        other => panic!("{other:?}"),
    }
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn a_slow_server_times_out() {
    let server = TestServer::start(vec![Action::Delay(
        Duration::from_secs(3),
        Box::new(success()),
    )]);
    let gw = gateway(
        "openai/gpt-4.1-mini",
        &server.base(),
        Some(OPENAI_KEY),
        json!({"timeout_s": 0.3}),
    );
    let started = std::time::Instant::now();
    let err = gw.complete(&request(&briefing())).unwrap_err();
    assert!(matches!(err, Error::Timeout(_)), "{err:?}");
    // Not retried: a hung server would hang every retry for the whole limit.
    assert!(!err.is_retryable());
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Issue 10, item 3: a cancel reached a call only between retries, so a server that
/// never answered held the turn for the whole call timeout (300 s). The blocked call
/// is abandoned now, and a cancelled call is never sent.
#[test]
fn a_cancelled_call_returns_at_once_whatever_the_server_does() {
    let server = TestServer::start(vec![Action::Delay(
        Duration::from_secs(1800),
        Box::new(success()),
    )]);
    let gw = gateway(
        "openai/gpt-4.1-mini",
        &server.base(),
        Some(OPENAI_KEY),
        json!({"timeout_s": 300}),
    );
    let cancel = baton_gateway::Cancel::new();
    let user = briefing();
    let mut req = request(&user);
    req.cancel = Some(&cancel);
    let (result, took) = std::thread::scope(|s| {
        s.spawn(|| {
            while server.requests().is_empty() {
                std::thread::sleep(Duration::from_millis(10));
            }
            cancel.cancel();
        });
        let started = std::time::Instant::now();
        let result = gw.complete(&req);
        (result, started.elapsed())
    });
    assert!(matches!(result, Err(Error::Cancelled)), "{result:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    // Already cancelled: nothing goes out.
    assert!(matches!(gw.complete(&req), Err(Error::Cancelled)));
    assert_eq!(server.requests().len(), 1);
}

#[test]
fn a_reset_connection_is_retryable_and_retried() {
    let server = TestServer::start(vec![
        Action::Reset {
            mid_response: false,
        },
        Action::Reset { mid_response: true },
        success(),
    ]);
    let r = run(openai(&server).as_ref(), &briefing());
    assert!(r.result.is_ok(), "{:?}", r.result);
    assert_eq!(r.attempts.len(), 3, "{:?}", r.attempts);
    assert_eq!(r.attempts[0].error_class, Some(ErrorClass::Unreachable));
    // Cut off after the headers: the client sees a body that ended early.
    assert!(
        matches!(
            r.attempts[1].error_class,
            Some(ErrorClass::Unparseable | ErrorClass::Unreachable)
        ),
        "{:?}",
        r.attempts
    );
}

#[test]
fn a_refused_connection_is_unreachable() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let gw = gateway(
        "openai/gpt-4.1-mini",
        &format!("http://127.0.0.1:{port}/v1"),
        Some(OPENAI_KEY),
        json!({}),
    );
    let err = gw.complete(&request("hi")).unwrap_err();
    assert!(matches!(err, Error::Unreachable { .. }), "{err:?}");
    assert!(err.to_string().contains("refused"), "{err}");
}

#[test]
fn a_truncated_body_is_unparseable() {
    let server = TestServer::start(vec![Action::Truncate {
        status: 200,
        body: r#"{"choices":[{"index":0,"message":{"role":"assis"#.into(),
    }]);
    let err = openai(&server).complete(&request("hi")).unwrap_err();
    assert!(
        matches!(err, Error::Unparseable { .. } | Error::Unreachable { .. }),
        "{err:?}"
    );
    assert!(err.is_retryable());
}

#[test]
fn an_invalid_json_body_is_unparseable() {
    let server = TestServer::start(vec![json(200, "<html>gateway error</html>")]);
    let err = openai(&server).complete(&request("hi")).unwrap_err();
    assert!(matches!(err, Error::Unparseable { .. }), "{err:?}");
    assert!(err.to_string().contains("gateway error"), "{err}");
}

#[test]
fn strict_mode_follows_the_schema_unless_set() {
    let closed = json!({"title": "Claim", "type": "object", "additionalProperties": false,
        "properties": {"summary": {"type": "string"}}, "required": ["summary"]});
    let open = json!({"type": "object", "properties": {"summary": {"type": "string"}}});
    let server = TestServer::start(vec![success(), success(), success()]);
    let gw = openai(&server);
    for schema in [&closed, &open] {
        let mut req = request("hi");
        req.schema = schema;
        gw.complete(&req).unwrap();
    }
    let forced = gateway(
        "openai/gpt-4.1-mini",
        &server.base(),
        Some(OPENAI_KEY),
        json!({"strict_schema": true}),
    );
    let mut req = request("hi");
    req.schema = &open;
    forced.complete(&req).unwrap();
    let sent = server.requests();
    let strict = |i: usize| sent[i].json()["response_format"]["json_schema"]["strict"].clone();
    assert_eq!(strict(0), true);
    assert_eq!(
        sent[0].json()["response_format"]["json_schema"]["name"],
        "Claim"
    );
    assert_eq!(strict(1), false);
    assert_eq!(strict(2), true);
}

/// Regression: a reply cut at `finish_reason: length` reported 0/0 tokens although
/// OpenAI reported (and bills) them; the usage now travels on the error.
#[test]
fn truncated_reply_keeps_the_usage_the_provider_billed() {
    let body = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"summary\": \"migr"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 1900, "completion_tokens": 64, "prompt_tokens_details": {"cached_tokens": 1024}}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let r = run(openai(&server).as_ref(), &briefing());
    let err = r.result.unwrap_err();
    let billed = baton_gateway::Usage {
        input_tokens: 1900,
        output_tokens: 64,
        cached_tokens: 1024,
    };
    assert_eq!(err.usage(), Some(billed), "{err}");
    assert_eq!(r.attempts[0].usage, billed);
}

/// Regression: an empty reply that was retried lost its first attempt's tokens; each
/// attempt now carries what the provider reported for it.
#[test]
fn an_empty_reply_retried_keeps_its_usage() {
    let empty = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 1900, "completion_tokens": 0}
    });
    let server = TestServer::start(vec![json(200, &empty.to_string()), success()]);
    let r = run(openai(&server).as_ref(), &briefing());
    assert_eq!(r.result.unwrap().text, CLAIM);
    assert_eq!(classes(&r.attempts), [Some("empty_reply"), None]);
    assert_eq!(r.attempts[0].usage.input_tokens, 1900);
    assert_eq!(r.attempts[1].usage.input_tokens, 1900);
    assert_eq!(r.attempts[1].usage.output_tokens, 120);
}

/// Regression: a key echoed inside a successful reply was kept, stored and briefed
/// to the next worker; the gateway scrubs its own key from every reply.
#[test]
fn a_key_echoed_in_a_successful_reply_is_redacted() {
    let echoed = format!(r#"{{"summary":"called the API with Bearer {OPENAI_KEY}"}}"#);
    let body = json!({
        "choices": [{"index": 0, "message": {"role": "assistant", "content": echoed}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let text = run(openai(&server).as_ref(), "hi").result.unwrap().text;
    assert!(!text.contains(OPENAI_KEY), "{text}");
    assert!(text.contains("Bearer [redacted]"), "{text}");
}

#[test]
fn an_option_the_provider_does_not_read_is_refused_naming_the_known_ones() {
    let mut options = baton_gateway::Options::new();
    options.insert("max_retries".into(), 0.into());
    let err = baton_gateway::for_model_with_credential(
        "openai/gpt-4.1-mini",
        &options,
        Some(baton_gateway::Credential::new("sk-test-0123456789").unwrap()),
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(text.contains("unknown option \"max_retries\""), "{text}");
    assert!(text.contains("api_base"), "{text}");
}

/// Regression: llama.cpp's context error was classified `bad_request`. The bodies are
/// the servers' own (llama.cpp, vLLM, Ollama, LM Studio).
#[test]
fn local_servers_context_errors_are_context_too_long() {
    let bodies = [
        json!({"error": {"code": 400, "message": "request (13014 tokens) exceeds the available context size (2048 tokens), try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 13014, "n_ctx": 2048}}),
        json!({"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you requested 13014 tokens (12990 in the messages, 24 in the completion). Please reduce the length of the messages or completion.", "type": "BadRequestError", "param": null, "code": 400}),
        json!({"error": {"message": "the input length exceeds the context length", "type": "api_error", "param": null, "code": null}}),
        json!({"error": "Trying to keep the first 13014 tokens when context the overflows. However, the model is loaded with context length of only 2048 tokens, which is not enough. Try to load the model with a larger context length, or provide a shorter input"}),
    ];
    for body in bodies {
        let server = TestServer::start(vec![json(400, &body.to_string())]);
        let gw = gateway(
            "llamacpp/local",
            &format!("{}/v1", server.base()),
            None,
            json!({}),
        );
        let r = run(gw.as_ref(), &briefing());
        assert!(
            matches!(r.result, Err(Error::ContextTooLong { .. })),
            "{body}: {:?}",
            r.result
        );
        assert_eq!(r.attempts.len(), 1);
    }
}

/// Regression: a 404 from a wrong path read "unknown model" with no URL.
#[test]
fn a_404_names_the_url_that_was_called() {
    let server = TestServer::start(vec![json(404, r#"{"error":"Not Found"}"#)]);
    let r = run(openai(&server).as_ref(), &briefing());
    let err = r.result.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains(&format!("POST {}/v1/chat/completions", server.base()))
            && text.contains("api_base"),
        "{text}"
    );
}

/// Regression: a reply cut off by a full context said "truncated at the token limit"
/// though no limit was set.
#[test]
fn a_truncation_says_which_limit_ended_it() {
    let cut = |completion: u64| {
        json(
            200,
            &json!({
                "choices": [{"index": 0, "message": {"role": "assistant", "content": "{\"summary\": \"mi"}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 1900, "completion_tokens": completion}
            })
            .to_string(),
        )
    };
    let server = TestServer::start(vec![cut(148)]);
    let gw = gateway(
        "llamacpp/local",
        &format!("{}/v1", server.base()),
        None,
        json!({}),
    );
    let text = run(gw.as_ref(), &briefing())
        .result
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("no max_tokens was sent") && text.contains("1900 prompt + 148 output"),
        "{text}"
    );
    let server = TestServer::start(vec![cut(148), cut(500)]);
    let gw = gateway(
        "llamacpp/local",
        &format!("{}/v1", server.base()),
        None,
        json!({"max_tokens": 500}),
    );
    let text = run(gw.as_ref(), &briefing())
        .result
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("below max_tokens = 500: the model's context window filled"),
        "{text}"
    );
    let text = run(gw.as_ref(), &briefing())
        .result
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("it reached max_tokens = 500 (raise"),
        "{text}"
    );
}

#[test]
fn a_typo_in_the_options_is_refused_before_the_missing_key_and_names_the_nearest_key() {
    // Regression: without a key the build failed on the key alone, so a typo such as
    // `timeuot_s` surfaced only after the key was exported.
    let mut options = baton_gateway::Options::new();
    options.insert("timeuot_s".into(), 10.into());
    let text = baton_gateway::for_model_with_credential("openai/gpt-4.1-mini", &options, None)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(
        text.contains(
            "unknown option \"timeuot_s\" for provider openai (did you mean \"timeout_s\"?)"
        ),
        "{text}"
    );
    // A replay calls no model, but its worker's other keys are checked all the same.
    options.insert("replay".into(), "run.jsonl".into());
    let text = baton_gateway::for_model_with_credential("openai/gpt-4.1-mini", &options, None)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(text.contains("unknown option \"timeuot_s\""), "{text}");
    assert!(baton_gateway::check_options("openai/gpt-4.1-mini", &options).is_err());
}
