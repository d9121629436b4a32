//! Gemini generateContent.

use baton_gateway::Error;
use baton_gateway::ErrorClass;
use serde_json::json;

use super::common::*;
use super::server::{Action, TestServer, json};

fn success() -> Action {
    let body = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [
                {"text": "thinking about the ledger", "thought": true},
                {"text": "{\"summary\":"},
                {"text": "\"migrated\"}"}
            ]},
            "finishReason": "STOP",
            "index": 0
        }],
        "usageMetadata": {
            "promptTokenCount": 2000,
            "candidatesTokenCount": 90,
            "thoughtsTokenCount": 10,
            "cachedContentTokenCount": 1500,
            "totalTokenCount": 2100
        },
        "modelVersion": "gemini-2.5-flash"
    });
    json(200, &body.to_string())
}

fn error(code: u16, status: &str, message: &str, details: serde_json::Value) -> Action {
    json(
        code,
        &json!({"error": {"code": code, "message": message, "status": status, "details": details}})
            .to_string(),
    )
}

fn gemini(server: &TestServer) -> std::sync::Arc<dyn baton_gateway::Gateway> {
    gateway(
        "gemini/gemini-2.5-flash",
        &server.base(),
        Some(GEMINI_KEY),
        json!({}),
    )
}

#[test]
fn sends_system_instruction_and_a_converted_schema() {
    let server = TestServer::start(vec![success()]);
    let user = briefing();
    let mut req = request(&user);
    req.max_tokens = Some(2048);
    let response = gemini(&server).complete(&req).unwrap();
    assert_eq!(response.text, r#"{"summary":"migrated"}"#);
    assert_eq!(response.usage.input_tokens, 2000);
    assert_eq!(response.usage.output_tokens, 100);
    assert_eq!(response.usage.cached_tokens, 1500);

    let sent = server.only_request();
    assert_sent_as_received(&response, &sent.body);
    assert_eq!(sent.method, "POST");
    assert_eq!(sent.path, "/v1beta/models/gemini-2.5-flash:generateContent");
    assert_eq!(sent.header("x-goog-api-key"), Some(GEMINI_KEY));
    assert_eq!(sent.header("authorization"), None);
    assert!(!sent.body.contains(GEMINI_KEY));
    let body = sent.json();
    assert_eq!(
        body["systemInstruction"],
        json!({"parts": [{"text": SYSTEM}]})
    );
    assert_eq!(
        body["contents"],
        json!([{"role": "user", "parts": [{"text": user}]}])
    );
    let config = &body["generationConfig"];
    assert_eq!(config["responseMimeType"], "application/json");
    assert_eq!(config["maxOutputTokens"], 2048);
    let sent_schema = &config["responseSchema"];
    assert_eq!(
        *sent_schema,
        baton_gateway::providers::to_gemini_schema(schema()).unwrap()
    );
    assert_eq!(sent_schema["type"], "OBJECT");
    assert_only_gemini_keywords(sent_schema);
    // Every property of the claim survives the conversion.
    let props = schema()["properties"].as_object().unwrap();
    for name in props.keys() {
        assert!(sent_schema["properties"].get(name).is_some(), "{name} lost");
    }
}

#[test]
fn retry_info_delay_is_honoured_on_every_retry() {
    let quota = |delay: &str| {
        error(
            429,
            "RESOURCE_EXHAUSTED",
            "You exceeded your current quota, please check your plan and billing details.",
            json!([
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}
            ]),
        )
    };
    let server = TestServer::start(vec![quota("8s"), quota("8.4s"), success()]);
    let r = run(gemini(&server).as_ref(), &briefing());
    assert!(r.result.is_ok(), "{:?}", r.result);
    assert_eq!(r.slept, vec![secs(8.0), secs(8.4)]);
}

#[test]
fn an_anthropic_key_offered_to_gemini_is_named() {
    let server = TestServer::start(vec![error(
        400,
        "INVALID_ARGUMENT",
        "API key not valid. Please pass a valid API key.",
        json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]),
    )]);
    let gw = gateway(
        "gemini/gemini-2.5-flash",
        &server.base(),
        Some(ANTHROPIC_KEY),
        json!({}),
    );
    let r = run(gw.as_ref(), "hi");
    let err = r.result.unwrap_err();
    assert!(matches!(err, Error::Auth { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("this looks like an Anthropic key offered to the gemini provider"),
        "{err}"
    );
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn too_many_tokens_is_context_too_long() {
    let server = TestServer::start(vec![error(
        400,
        "INVALID_ARGUMENT",
        "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
        json!([]),
    )]);
    let r = run(gemini(&server).as_ref(), &briefing());
    assert!(
        matches!(r.result, Err(Error::ContextTooLong { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn max_tokens_finish_is_truncated() {
    let body = json!({
        "candidates": [{"content": {"parts": [{"text": "{\"summ"}]}, "finishReason": "MAX_TOKENS"}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 8}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let r = run(gemini(&server).as_ref(), "hi");
    assert!(
        matches!(r.result, Err(Error::Truncated { .. })),
        "{:?}",
        r.result
    );
    assert_eq!(r.attempts.len(), 1);
}

#[test]
fn overloaded_unavailable_and_unknown_model() {
    let server = TestServer::start(vec![
        error(
            503,
            "UNAVAILABLE",
            "The model is overloaded. Please try again later.",
            json!([]),
        ),
        error(
            404,
            "NOT_FOUND",
            "models/gemini-9 is not found for API version v1beta, or is not supported for generateContent.",
            json!([]),
        ),
    ]);
    let gw = gemini(&server);
    let err = gw.complete(&request("hi")).unwrap_err();
    assert!(matches!(err, Error::Overloaded { .. }), "{err:?}");
    let err = gw.complete(&request("hi")).unwrap_err();
    assert_eq!(err.class(), ErrorClass::UnknownModel, "{err}");
}

/// Every schema node uses only keywords of Gemini's subset (property names are free).
fn assert_only_gemini_keywords(node: &serde_json::Value) {
    const ALLOWED: [&str; 17] = [
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "items",
        "properties",
        "required",
        "propertyOrdering",
        "anyOf",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "minLength",
        "maxLength",
        "pattern",
    ];
    let obj = node.as_object().unwrap();
    for (key, value) in obj {
        assert!(ALLOWED.contains(&key.as_str()), "{key} sent to Gemini");
        match key.as_str() {
            "properties" => value
                .as_object()
                .unwrap()
                .values()
                .for_each(assert_only_gemini_keywords),
            "items" => assert_only_gemini_keywords(value),
            "anyOf" => value
                .as_array()
                .unwrap()
                .iter()
                .for_each(assert_only_gemini_keywords),
            _ => {}
        }
    }
}

/// Regression: a `MAX_TOKENS` finish recorded no usage although Gemini bills it.
#[test]
fn max_tokens_finish_keeps_the_billed_usage() {
    let body = json!({
        "candidates": [{"content": {"parts": [{"text": "{\"summ"}]}, "finishReason": "MAX_TOKENS"}],
        "usageMetadata": {"promptTokenCount": 5, "candidatesTokenCount": 8, "thoughtsTokenCount": 2}
    });
    let server = TestServer::start(vec![json(200, &body.to_string())]);
    let err = run(gemini(&server).as_ref(), "hi").result.unwrap_err();
    assert_eq!(
        err.usage(),
        Some(baton_gateway::Usage {
            input_tokens: 5,
            output_tokens: 10,
            cached_tokens: 0,
        })
    );
}
