//! Helpers shared by the provider suites.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_core::turn::CallKind;
use baton_gateway::ErrorClass;
use baton_gateway::{
    Attempt, Credential, Gateway, ModelRequest, ModelResponse, Options, RetryPolicy,
    complete_with_retry, for_model_with_credential,
};
use serde_json::Value;

pub const OPENAI_KEY: &str = "sk-proj-TESTKEY-openai-0123456789";
pub const ANTHROPIC_KEY: &str = "sk-ant-api03-TESTKEY-anthropic-0123456789";
pub const GEMINI_KEY: &str = "AIzaSyTESTKEY-gemini-0123456789";

/// A gateway for `model` pointed at `base`, with extra options merged in.
pub fn gateway(model: &str, base: &str, key: Option<&str>, extra: Value) -> Arc<dyn Gateway> {
    let mut options = Options::new();
    options.insert("api_base".into(), base.into());
    if let Value::Object(extra) = extra {
        options.extend(extra);
    }
    let credential = key.map(|k| Credential::new(k).unwrap());
    for_model_with_credential(model, &options, credential).unwrap()
}

/// A briefing of about 6 KB, like a compiled package.
pub fn briefing() -> String {
    let mut text = String::from(
        "# Assigned task\nMigrate the billing module to the new ledger API.\n\n# Progress\n",
    );
    while text.len() < 6 * 1024 {
        text.push_str(
            "- decided: keep the old invoice ids; reason: external references depend on them.\n",
        );
    }
    text
}

pub const SYSTEM: &str = "You are a careful engineer. Answer with JSON matching the schema.";

pub fn request(user: &str) -> ModelRequest<'_> {
    ModelRequest {
        model: "ignored",
        system: SYSTEM,
        user,
        call: CallKind::Execute,
        turn: 0,
        schema: baton_core::claims::worker_result_schema(),
        max_tokens: None,
        temperature: Some(0.2),
        workspace: None,
        cancel: None,
        output: None,
        hashed: None,
    }
}

/// sha256 (hex) of a body as the server received it.
pub fn sha256_hex(body: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(body.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The gateway reports the request as the server received it: two messages, and the
/// hash of the body's bytes.
pub fn assert_sent_as_received(response: &ModelResponse, body: &str) {
    assert_eq!(response.sent.messages, 2, "{body}");
    assert_eq!(response.sent.request_hash, sha256_hex(body));
}

pub fn schema() -> &'static Value {
    baton_core::claims::worker_result_schema()
}

/// Retries with no backoff to speak of (provider delays are recorded, not slept).
pub fn policy() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base: Duration::from_millis(1),
        cap: Duration::from_secs(600),
        jitter: 0.0,
        max_wait: Duration::from_secs(600),
    }
}

pub struct Run {
    pub result: baton_gateway::Result<ModelResponse>,
    pub attempts: Vec<Attempt>,
    pub slept: Vec<Duration>,
}

/// Calls with retries, recording the delays instead of sleeping them.
pub fn run(gateway: &dyn Gateway, user: &str) -> Run {
    let mut slept = Vec::new();
    let (result, attempts) =
        complete_with_retry(gateway, &request(user), &policy(), &mut |d| slept.push(d));
    Run {
        result,
        attempts,
        slept,
    }
}

/// Each attempt's class by its stored name.
pub fn classes(attempts: &[Attempt]) -> Vec<Option<&str>> {
    attempts
        .iter()
        .map(|a| a.error_class.as_ref().map(ErrorClass::as_str))
        .collect()
}

pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs();
    jiff::Timestamp::from_second(secs as i64)
        .unwrap()
        .to_string()
}

pub fn http_date(t: SystemTime) -> String {
    httpdate::fmt_http_date(t)
}

#[test]
fn date_formatting_matches_known_instants() {
    let t = UNIX_EPOCH + Duration::from_secs(1_445_412_480);
    assert_eq!(http_date(t), "Wed, 21 Oct 2015 07:28:00 GMT");
    assert_eq!(rfc3339(t), "2015-10-21T07:28:00Z");
}
