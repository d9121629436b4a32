//! A deterministic offline model. Its text is the only simulated thing in baton: the
//! same request always gets the same answer, so demo runs and tests are reproducible.
//!
//! It reads the assigned task from the briefing the way a model would and answers with
//! a `WorkerResult` (execute call) or a `HandoffReport` (handoff call). The built-in
//! demonstration scenario (`demo`) gets scripted, realistic claims; any other task gets
//! plausible generic ones derived from the task's wording.

use std::time::Duration;

use baton_core::turn::CallKind;
use serde_json::{Value, json};

use crate::{Gateway, ModelRequest, ModelResponse, Options, Result, Usage};

pub mod demo;
mod line;

#[derive(Debug, Clone, Default)]
pub struct MockGateway {
    /// Simulated latency per call (for progress displays and crash tests).
    delay: Duration,
}

impl MockGateway {
    pub fn new() -> Self {
        MockGateway::default()
    }

    /// Options: `delay_ms` (integer, simulated latency per call).
    pub fn from_options(options: &Options) -> Result<Self> {
        let read: MockOptions = crate::options::parse("mock", options)?;
        Ok(MockGateway {
            delay: Duration::from_millis(read.delay_ms.unwrap_or(0)),
        })
    }
}

/// The options the mock reads.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct MockOptions {
    /// Milliseconds each call waits before it answers (to watch a run go by).
    delay_ms: Option<u64>,
}

impl crate::options::ProviderOptions for MockOptions {
    fn expects(_key: &str) -> &'static str {
        "a non-negative integer"
    }
}

impl Gateway for MockGateway {
    fn complete(&self, request: &ModelRequest<'_>) -> Result<ModelResponse> {
        if !self.delay.is_zero() {
            std::thread::sleep(self.delay);
        }
        if request.schema["properties"]["winner"].is_object() {
            return Ok(respond(request, judge_verdict(request.user)));
        }
        if let Some(answer) = line::answer(request.schema, request.user) {
            return Ok(respond(request, answer));
        }
        let task = assigned_task(request.user);
        let answer = match demo::step_of(task) {
            Some(step) => match request.call {
                CallKind::Execute | CallKind::ExecuteRepair => demo::result(step),
                CallKind::Handoff | CallKind::HandoffRepair => demo::report(step),
                CallKind::Combined | CallKind::CombinedRepair => {
                    combined(demo::result(step), demo::report(step))
                }
            },
            None => match request.call {
                CallKind::Execute | CallKind::ExecuteRepair => generic_result(task),
                CallKind::Handoff | CallKind::HandoffRepair => generic_report(task),
                CallKind::Combined | CallKind::CombinedRepair => {
                    combined(generic_result(task), generic_report(task))
                }
            },
        };
        let mut answer = answer;
        // A builder of the line fixes the findings its briefing shows.
        if task.contains("As build.") && answer.get("summary").is_some() {
            line::claim_fixes(&mut answer, request.user);
        }
        line::dispute(&mut answer, request.user);
        Ok(respond(request, answer))
    }
}

/// One answer for a one-call turn, as a model writes it: the result, then the
/// handoff's notes, warnings and next action (what a report would only restate is
/// not written twice).
fn combined(mut result: Value, report: Value) -> Value {
    for key in ["notes", "warnings", "next_action"] {
        if let Some(v) = report
            .get(key)
            .filter(|v| v.as_array().is_none_or(|a| !a.is_empty()))
        {
            result[key] = v.clone();
        }
    }
    result
}

/// The mock is no provider: it reports no usage (baton's own token counts stand).
fn respond(request: &ModelRequest<'_>, answer: Value) -> ModelResponse {
    ModelResponse {
        usage: Usage::default(),
        text: answer.to_string(),
        sent: crate::Sent::pair(request),
    }
}

/// A judge's verdict, as the mock gives it: each `# Candidate X` section scores by its
/// passed gates and (less) by the size of its diff; the best wins, ties to the first.
fn judge_verdict(user: &str) -> Value {
    let mut scores = Vec::new();
    let mut best: Option<(String, f64)> = None;
    for section in user.split("\n# Candidate ").skip(1) {
        let label: String = section
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        let body = section.split("\n# ").next().unwrap_or(section);
        let passed = body.matches(": PASSED").count() as f64;
        let failed = body.matches(": FAILED").count() as f64;
        let score = (5.0 + 3.0 * passed - 3.0 * failed).clamp(0.0, 10.0);
        let reasons = format!("{passed} gate(s) passed, {failed} failed");
        if best.as_ref().is_none_or(|(_, s)| score > *s) {
            best = Some((label.clone(), score));
        }
        scores.push(json!({"candidate": label, "score": score, "reasons": reasons}));
    }
    let winner = best.map(|(l, _)| l).unwrap_or_default();
    json!({
        "scores": scores,
        "winner": winner,
        "verdict": format!("Candidate {winner} passes the most gates.")
    })
}

/// The text of the briefing's "Assigned task" section, as a model would read it.
pub fn assigned_task(user: &str) -> &str {
    let Some(start) = user.find("Assigned task") else {
        return "";
    };
    let rest = &user[start..];
    let body = rest.find('\n').map(|i| &rest[i + 1..]).unwrap_or("");
    let end = body
        .find("\n#")
        .or_else(|| body.find("\n---"))
        .unwrap_or(body.len());
    body[..end].trim()
}

fn first_words(text: &str, n: usize) -> String {
    text.split_whitespace()
        .take(n)
        .collect::<Vec<_>>()
        .join(" ")
}

fn slug(text: &str) -> String {
    let words: Vec<String> = baton_core::text::normalize(text)
        .split(' ')
        .filter(|w| w.len() > 2)
        .take(4)
        .map(str::to_string)
        .collect();
    if words.is_empty() {
        "notes".to_string()
    } else {
        words.join("-")
    }
}

/// Stable FNV-1a of the task, to vary generic answers deterministically.
fn task_hash(task: &str) -> u64 {
    task.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Per component: two decisions (with reasons) in the component's own words, as a
/// model would phrase them.
const COMPONENTS: [(&str, [(&str, &str); 2]); 12] = [
    (
        "the data model",
        [
            (
                "Store money as integer cents in a bigint column",
                "floating point rounding corrupts totals",
            ),
            (
                "Give every table created_at and updated_at columns set by the database",
                "audits and sync need trustworthy times",
            ),
        ],
    ),
    (
        "the public API",
        [
            (
                "Return 409 Conflict when an update carries a stale ETag",
                "clients must not silently overwrite each other",
            ),
            (
                "Publish an OpenAPI document generated from the route definitions",
                "hand-written specs drift from the code",
            ),
        ],
    ),
    (
        "authentication",
        [
            (
                "Require multi-factor login for administrator accounts",
                "an administrator credential is the most valuable one to steal",
            ),
            (
                "Lock an account for fifteen minutes after ten failed logins",
                "slows password guessing without permanent lockouts",
            ),
        ],
    ),
    (
        "background jobs",
        [
            (
                "Run background jobs from a Postgres-backed queue with SKIP LOCKED",
                "no second datastore to operate",
            ),
            (
                "Retry failed jobs five times with exponential backoff, then park them",
                "transient faults recover and poison jobs stop looping",
            ),
        ],
    ),
    (
        "the cache layer",
        [
            (
                "Cache read-heavy endpoints in Redis with a sixty second TTL",
                "most reads tolerate a minute of staleness",
            ),
            (
                "Invalidate cached entries on write instead of waiting for expiry",
                "users expect to see their own changes at once",
            ),
        ],
    ),
    (
        "full-text search",
        [
            (
                "Index task titles and descriptions with Postgres tsvector columns",
                "search stays inside the primary database",
            ),
            (
                "Rank search hits by recency before relevance",
                "users mostly look for what they touched lately",
            ),
        ],
    ),
    (
        "notifications",
        [
            (
                "Deliver notifications through an outbox table polled by a sender",
                "a notification is never sent for a rolled-back change",
            ),
            (
                "Batch email notifications into a digest every ten minutes",
                "bursts of edits otherwise flood inboxes",
            ),
        ],
    ),
    (
        "observability",
        [
            (
                "Emit OpenTelemetry traces from every request handler",
                "latency problems are found across service boundaries",
            ),
            (
                "Alert on the p95 latency of writes rather than on CPU",
                "users feel latency, not CPU",
            ),
        ],
    ),
    (
        "the deployment pipeline",
        [
            (
                "Deploy with blue-green switching behind the load balancer",
                "rollback is a switch, not a redeploy",
            ),
            (
                "Run database migrations as a separate step before the new version starts",
                "old and new code must both work with the migrated schema",
            ),
        ],
    ),
    (
        "the test suite",
        [
            (
                "Run integration tests against a real Postgres started per test run",
                "mocks hide constraint and locking behaviour",
            ),
            (
                "Fail the build when coverage of the service layer drops below 80 percent",
                "the service layer carries the business rules",
            ),
        ],
    ),
    (
        "error handling",
        [
            (
                "Map domain errors to HTTP status codes in one exception handler",
                "every route reports errors the same way",
            ),
            (
                "Never expose stack traces in API responses",
                "they leak internals to attackers",
            ),
        ],
    ),
    (
        "rate limiting",
        [
            (
                "Limit each API token to 100 requests per minute with a token bucket",
                "bursts are allowed while sustained abuse is not",
            ),
            (
                "Return Retry-After headers on every 429 response",
                "well-behaved clients can back off precisely",
            ),
        ],
    ),
];

const RISKS: [&str; 6] = [
    "Load characteristics of {c} are unknown",
    "Ownership of {c} after launch is unclear",
    "No rollback plan exists for {c}",
    "Failure modes of {c} under partial outages are untested",
    "The cost of {c} at ten times current volume is unestimated",
    "Security review of {c} has not happened",
];

fn generic_parts(task: &str) -> (String, &'static str, &'static str, u64) {
    let h = task_hash(task);
    let (component, decisions) = &COMPONENTS[(h % COMPONENTS.len() as u64) as usize];
    let (decision, reason) = decisions[((h >> 8) % 2) as usize];
    (component.to_string(), decision, reason, h)
}

fn generic_result(task: &str) -> Value {
    let short = first_words(task, 8);
    let file = format!("{}.md", slug(task));
    let (component, decision, reason, h) = generic_parts(task);
    let mut result = json!({
        "summary": format!("Worked on: {short}. Settled how {component} should behave and wrote it up."),
        "completed": [format!("Wrote up {component} for: {short}")],
        "decisions": [{
            "text": decision,
            "reason": reason
        }],
        "artifacts": [{
            "name": file,
            "kind": "document",
            "description": format!("How {component} works, for: {short}")
        }],
        "assumptions": [format!("{component} serves a single region at first", component = capitalise(&component))],
        "last_action": format!("Wrote {file}"),
        "next_action": "Continue with the next step of the plan"
    });
    if h % 3 == 0 {
        let risk = RISKS[((h >> 16) % RISKS.len() as u64) as usize].replace("{c}", &component);
        result["issues"] =
            json!([{"title": risk, "severity": if h % 2 == 0 { "medium" } else { "low" }}]);
    }
    if h % 4 == 1 {
        result["failed_attempts"] = json!([{
            "what": format!("A first design where {component} shared state with its callers"),
            "why": "every change then rippled into the callers"
        }]);
    }
    result
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}

fn generic_report(task: &str) -> Value {
    let short = first_words(task, 8);
    let file = format!("{}.md", slug(task));
    let (component, _, _, h) = generic_parts(task);
    let warnings = if h % 2 == 0 {
        json!([format!(
            "Do not assume {component} is final: it was designed for \"{short}\" only"
        )])
    } else {
        json!([])
    };
    json!({
        "notes": format!("{file} holds the result for \"{short}\"; read it before building on {component}."),
        "warnings": warnings,
        "last_action": format!("Wrote {file}"),
        "next_action": "Continue with the next step of the plan"
    })
}

#[cfg(test)]
mod tests {

    #[test]
    fn an_option_the_mock_does_not_read_is_refused() {
        let mut o = Options::new();
        o.insert("max_retries".into(), 0.into());
        let err = MockGateway::from_options(&o).unwrap_err();
        assert!(
            err.to_string().contains(
                "unknown option \"max_retries\" for provider mock; mock accepts: delay_ms"
            ),
            "{err}"
        );
        let mut o = Options::new();
        o.insert("delay_ms".into(), 5.into());
        assert!(MockGateway::from_options(&o).is_ok());
    }

    use super::*;

    #[test]
    fn reads_the_assigned_task_section() {
        let user = "# Briefing\n\n## Assigned task\nDesign the schema\nwith care\n\n## Objective\nBuild it\n";
        assert_eq!(assigned_task(user), "Design the schema\nwith care");
        assert_eq!(assigned_task("no sections"), "");
    }

    #[test]
    fn answers_are_deterministic_and_parse_as_claims() {
        let g = MockGateway::new();
        let schema = Value::Null;
        let user = "## Assigned task\nWrite a haiku about databases\n## Objective\nPoetry\n";
        let req = ModelRequest {
            model: "demo",
            system: "s",
            user,
            call: CallKind::Execute,
            turn: 0,
            schema: &schema,
            max_tokens: None,
            temperature: None,
            workspace: None,
            cancel: None,
            output: None,
            hashed: None,
        };
        let a = g.complete(&req).unwrap();
        assert_eq!(a, g.complete(&req).unwrap());
        baton_core::claims::parse_worker_result(&a.text).unwrap();
        let h = g
            .complete(&ModelRequest {
                call: CallKind::Handoff,
                ..req
            })
            .unwrap();
        baton_core::claims::parse_handoff_report(&h.text).unwrap();
        let c = g
            .complete(&ModelRequest {
                call: CallKind::Combined,
                ..req
            })
            .unwrap();
        let (result, report) = baton_core::claims::parse_turn_answer(&c.text).unwrap();
        assert!(result.warnings.is_empty(), "{:?}", result.warnings);
        assert!(!report.claim.notes.is_empty());
    }
}
