//! What a gateway says it puts on the wire besides the two messages (the answer
//! format, which providers bill as input) is byte for byte what the server receives.

use serde_json::json;

use super::common::*;
use super::server::{TestServer, json as reply};

/// The body the server received for one call through `model` with `extra` options,
/// and what the gateway reported sending as the answer format.
fn sent(model: &str, key: &str, extra: serde_json::Value) -> (String, Option<String>) {
    let server = TestServer::start(vec![reply(500, "{}")]);
    let base = if model.starts_with("openai/") {
        format!("{}/v1", server.base())
    } else {
        server.base()
    };
    let g = gateway(model, &base, Some(key), extra);
    let user = briefing();
    let request = request(&user);
    let format = g.answer_format_sent(&request);
    let _ = g.complete(&request);
    (server.only_request().body, format)
}

#[test]
fn the_answer_format_counted_is_the_one_on_the_wire() {
    let (body, format) = sent("openai/gpt-4.1-mini", OPENAI_KEY, json!({}));
    let format = format.expect("schema mode sends a response_format");
    assert!(
        body.contains(&format!("\"response_format\":{format}")),
        "{body}"
    );
    assert!(format.contains("\"json_schema\""), "{format}");

    let (body, format) = sent("anthropic/claude-sonnet-4-5", ANTHROPIC_KEY, json!({}));
    let format = format.expect("forced tool use sends a tool");
    let inner = &format[1..format.len() - 1];
    assert!(body.contains(inner), "{body}");
    assert!(inner.starts_with("\"tools\":[") && inner.contains("\"tool_choice\":"));

    let (body, format) = sent("gemini/gemini-2.5-flash", GEMINI_KEY, json!({}));
    let format = format.expect("schema mode sends a responseSchema");
    assert!(
        body.contains(&format!("\"responseSchema\":{format}")),
        "{body}"
    );

    // JSON mode sends its small marker; instructions mode sends nothing besides the
    // messages.
    let (body, format) = sent(
        "openai/gpt-4.1-mini",
        OPENAI_KEY,
        json!({"structured": "json_object"}),
    );
    assert_eq!(format.as_deref(), Some(r#"{"type":"json_object"}"#));
    assert!(body.contains(r#""response_format":{"type":"json_object"}"#));
    let (body, format) = sent(
        "openai/gpt-4.1-mini",
        OPENAI_KEY,
        json!({"structured": "instructions"}),
    );
    assert_eq!(format, None);
    assert!(!body.contains("response_format"));
}
