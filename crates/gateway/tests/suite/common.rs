//! Helpers shared by the provider suites.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use baton_core::turn::CallKind;
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

pub fn classes(attempts: &[Attempt]) -> Vec<Option<&'static str>> {
    attempts.iter().map(|a| a.error_class).collect()
}

pub fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

fn civil(t: SystemTime) -> (i64, u32, u32, u64, u64, u64, u64) {
    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs();
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    let weekday = ((days + 4).rem_euclid(7)) as u64; // 1970-01-01 was a Thursday
    (
        year,
        month,
        day,
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        weekday,
    )
}

pub fn rfc3339(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s, _) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

pub fn http_date(t: SystemTime) -> String {
    const DAYS: [&str; 7] = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (y, mo, d, h, mi, s, wd) = civil(t);
    format!(
        "{}, {d:02} {} {y} {h:02}:{mi:02}:{s:02} GMT",
        DAYS[wd as usize],
        MONTHS[mo as usize - 1]
    )
}

#[test]
fn date_formatting_matches_known_instants() {
    let t = UNIX_EPOCH + Duration::from_secs(1_445_412_480);
    assert_eq!(http_date(t), "Wed, 21 Oct 2015 07:28:00 GMT");
    assert_eq!(rfc3339(t), "2015-10-21T07:28:00Z");
}
