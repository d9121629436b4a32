//! Real models, end to end: `baton` against local HTTP servers that speak the OpenAI,
//! Anthropic and Gemini wire formats (the model's text comes from the offline mock, the
//! only simulated part). Checks the requests sent, usage and cost, record and replay,
//! `workers --verify`, and that no credential ever leaves the gateway.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

use baton_core::turn::CallKind;
use baton_gateway::{Gateway, MockGateway, ModelRequest};
use serde_json::{Value, json};

use super::*;

const OPENAI_KEY: &str = "sk-proj-SENTINEL0penai7f3a9c";
const ANTHROPIC_KEY: &str = "sk-ant-api03-SENTINELanthr0pic55d1";
const GEMINI_KEY: &str = "AIzaSENTINELgem1ni0b8e2";

#[derive(Debug, Clone)]
pub(super) struct Seen {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A local server for all three providers; returns its base URL and what it saw.
pub(super) fn serve() -> (String, Arc<Mutex<Vec<Seen>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || connection(stream, &log, &answer));
        }
    });
    (base, seen)
}

/// Reads requests off one connection and answers each with `answer`.
fn connection(
    stream: TcpStream,
    log: &Mutex<Vec<Seen>>,
    answer: &dyn Fn(&Seen) -> (&'static str, Value),
) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or("")
            .to_string();
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_string(), v.trim().to_string()));
            }
        }
        let len: usize = headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let seen = Seen {
            path,
            headers,
            body,
        };
        let (status, reply) = answer(&seen);
        log.lock().unwrap().push(seen);
        let text = reply.to_string();
        let head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
            text.len()
        );
        if out
            .write_all(head.as_bytes())
            .and_then(|_| out.write_all(text.as_bytes()))
            .is_err()
        {
            return;
        }
    }
}

/// The mock model's answer for this system and user message.
fn mock_text(system: &str, user: &str, model: &str) -> String {
    let call = if user.contains("## Your handoff (call 2 of 2)") {
        CallKind::Handoff
    } else if !user.contains("(call 1 of 2: the work)") {
        CallKind::Combined
    } else {
        CallKind::Execute
    };
    let schema = Value::Null;
    let request = ModelRequest {
        model,
        system,
        user,
        call,
        turn: 0,
        schema: &schema,
        max_tokens: None,
        temperature: None,
        workspace: None,
        cancel: None,
        output: None,
        hashed: None,
    };
    MockGateway::new().complete(&request).unwrap().text
}

fn answer(seen: &Seen) -> (&'static str, Value) {
    let b = &seen.body;
    if seen.path.ends_with("/chat/completions") {
        if seen.header("authorization") != Some(&format!("Bearer {OPENAI_KEY}")) {
            return (
                "401 Unauthorized",
                json!({"error": {"message": "Incorrect API key provided.", "type": "invalid_request_error", "code": "invalid_api_key"}}),
            );
        }
        let text = mock_text(
            b["messages"][0]["content"].as_str().unwrap(),
            b["messages"][1]["content"].as_str().unwrap(),
            "gpt-test",
        );
        let prompt = b.to_string().len() as u64 / 4;
        return (
            "200 OK",
            json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-test",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 120, "total_tokens": prompt + 120,
                          "prompt_tokens_details": {"cached_tokens": 64}}
            }),
        );
    }
    if seen.path.ends_with("/v1/messages") {
        if seen.header("x-api-key") != Some(ANTHROPIC_KEY) {
            return (
                "401 Unauthorized",
                json!({"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}),
            );
        }
        let text = mock_text(
            b["system"].as_str().unwrap(),
            b["messages"][0]["content"].as_str().unwrap(),
            "claude-test",
        );
        let input: Value = serde_json::from_str(&text).unwrap();
        return (
            "200 OK",
            json!({
                "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": b["tool_choice"]["name"], "input": input}],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 900, "output_tokens": 150, "cache_read_input_tokens": 100}
            }),
        );
    }
    if seen.path.contains(":generateContent") {
        if seen.header("x-goog-api-key") != Some(GEMINI_KEY) {
            return (
                "400 Bad Request",
                json!({"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT"}}),
            );
        }
        let text = mock_text(
            b["systemInstruction"]["parts"][0]["text"].as_str().unwrap(),
            b["contents"][0]["parts"][0]["text"].as_str().unwrap(),
            "gemini-test",
        );
        return (
            "200 OK",
            json!({
                "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
                "usageMetadata": {"promptTokenCount": 800, "candidatesTokenCount": 140, "cachedContentTokenCount": 0}
            }),
        );
    }
    (
        "404 Not Found",
        json!({"error": {"message": "no such route"}}),
    )
}

pub(super) fn roster(base: &str) -> String {
    format!(
        r#"estimator = "heuristic"
repair_attempts = 0

[[workers]]
id = "drafter"
model = "openai/gpt-test"
api_base = "{base}/v1"
api_key_env = "BATON_TEST_OPENAI_KEY"
max_retries = 0
price = {{ input = 2.0, output = 8.0, cached = 0.5 }}

[[workers]]
id = "reviewer"
model = "anthropic/claude-test"
api_base = "{base}"
api_key_env = "BATON_TEST_ANTHROPIC_KEY"
max_retries = 0

[[workers]]
id = "checker"
model = "gemini/gemini-test"
api_base = "{base}"
api_key_env = "BATON_TEST_GEMINI_KEY"
max_retries = 0
"#
    )
}

pub(super) fn with_keys(cmd: &mut std::process::Command) -> &mut std::process::Command {
    cmd.env("BATON_TEST_OPENAI_KEY", OPENAI_KEY)
        .env("BATON_TEST_ANTHROPIC_KEY", ANTHROPIC_KEY)
        .env("BATON_TEST_GEMINI_KEY", GEMINI_KEY)
}

const STEPS: [&str; 5] = [
    "Define the requirements and the overall architecture",
    "Design the PostgreSQL schema",
    "Design authentication and authorization",
    "Define the REST endpoints",
    "Review the whole architecture for inconsistencies and missing dependencies",
];

pub(super) fn run_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "-v".into(),
        "run".into(),
        "--objective".into(),
        "Plan a task API".into(),
    ];
    for s in STEPS {
        args.push("--task".into());
        args.push(s.into());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

#[test]
fn three_providers_run_a_plan_and_no_key_ever_leaves_the_gateway() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, seen) = serve();
    std::fs::write(d.join("baton.toml"), roster(&base)).unwrap();

    let out = with_keys(&mut baton(d))
        .args(run_args(&["--record", "run.jsonl"]))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout.clone()).unwrap();
    let stderr = String::from_utf8(out.stderr.clone()).unwrap();
    assert!(stdout.contains("steps 5/5"), "{stdout}");
    assert!(stdout.contains("provider-reported tokens"), "{stdout}");
    assert!(stdout.contains("cost $"), "{stdout}");
    assert!(
        stderr.contains("call combined · drafter (openai/gpt-test)"),
        "{stderr}"
    );

    // Each request: exactly [system, user], the claim schema as each provider enforces
    // it, and only that worker's own credential.
    // One request per turn: the result and the handoff come in one answer.
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    for s in &seen {
        let body = s.body.to_string();
        for key in [OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY] {
            assert!(!body.contains(key), "a key in a request body");
        }
        if s.path.ends_with("/chat/completions") {
            let roles: Vec<&str> = s.body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["role"].as_str().unwrap())
                .collect();
            assert_eq!(roles, ["system", "user"]);
            assert_eq!(s.body["response_format"]["type"], "json_schema");
            assert!(s.header("x-api-key").is_none() && s.header("x-goog-api-key").is_none());
        } else if s.path.ends_with("/v1/messages") {
            assert_eq!(s.body["messages"].as_array().unwrap().len(), 1);
            assert!(s.body["system"].is_string());
            assert_eq!(s.body["tool_choice"]["type"], "tool");
            assert!(s.body["tools"][0]["input_schema"]["properties"].is_object());
            assert_eq!(s.header("anthropic-version"), Some("2023-06-01"));
            assert!(s.header("authorization").is_none());
        } else {
            assert_eq!(s.body["contents"].as_array().unwrap().len(), 1);
            assert!(s.body["systemInstruction"].is_object());
            assert!(s.body["generationConfig"]["responseSchema"].is_object());
            assert!(s.header("authorization").is_none() && s.header("x-api-key").is_none());
        }
    }

    // Usage as the providers reported it, per call, with cost where the roster priced it.
    let export: Value = serde_json::from_str(&run_ok(d, &["export", "--format", "json"])).unwrap();
    let first_call = &export["turns"][0]["calls"][0];
    assert_eq!(first_call["usage"]["cached_tokens"], 64);
    assert_eq!(first_call["usage"]["output_tokens"], 120);
    assert!(first_call["cost_micro_usd"].as_u64().unwrap() > 0);
    let anthropic_call = &export["turns"][1]["calls"][0];
    assert_eq!(anthropic_call["usage"]["output_tokens"], 150);
    assert!(
        anthropic_call.get("cost_micro_usd").is_none(),
        "no price, no cost"
    );

    // The sentinel keys appear nowhere: database, its log, exports, output.
    let md = run_ok(d, &["export", "--format", "md"]);
    let script = std::fs::read_to_string(d.join("run.jsonl")).unwrap();
    let mut haystacks = vec![stdout, stderr, export.to_string(), md, script];
    for entry in std::fs::read_dir(d.join(".baton")).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap();
        haystacks.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    for h in &haystacks {
        for key in [OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY, "SENTINEL"] {
            assert!(!h.contains(key), "credential leaked");
        }
    }

    // The recording replays offline, byte for byte.
    let out = baton(d)
        .args(run_args(&[
            "--replay",
            "run.jsonl",
            "--record",
            "replayed.jsonl",
        ]))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        std::fs::read_to_string(d.join("replayed.jsonl")).unwrap(),
        std::fs::read_to_string(d.join("run.jsonl")).unwrap()
    );
    assert_eq!(seen.len(), 5, "the replay called no model");
}

#[test]
fn workers_shows_credential_status_and_verify_reports_what_each_provider_said() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, _) = serve();
    std::fs::write(d.join("baton.toml"), roster(&base)).unwrap();

    let out = baton(d)
        .args(["workers"])
        .env("BATON_TEST_OPENAI_KEY", OPENAI_KEY)
        .output()
        .unwrap();
    let listing = String::from_utf8(out.stdout).unwrap();
    assert!(listing.contains("set (BATON_TEST_OPENAI_KEY)"), "{listing}");
    assert!(
        listing.contains("missing") && listing.contains("BATON_TEST_ANTHROPIC_KEY"),
        "{listing}"
    );
    assert!(!listing.contains(OPENAI_KEY));

    let out = with_keys(&mut baton(d))
        .args(["workers", "--verify"])
        .output()
        .unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{report}");
    assert_eq!(report.matches("OK: ").count(), 3, "{report}");

    // A wrong key: the provider's own words, and the failing exit status.
    let out = with_keys(&mut baton(d))
        .args(["workers", "--verify"])
        .env("BATON_TEST_ANTHROPIC_KEY", "sk-ant-api03-wrongwrongwrong")
        .output()
        .unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    // The provider's refusal has its own exit status (README, "Exit codes").
    assert_eq!(out.status.code(), Some(6), "{report}");
    assert!(
        report.contains("FAILED (auth)") && report.contains("invalid x-api-key"),
        "{report}"
    );
    assert!(
        !report.contains("wrongwrongwrong"),
        "the key is never echoed"
    );

    // A key offered to the wrong provider is named as such.
    let out = with_keys(&mut baton(d))
        .args(["workers", "--verify"])
        .env("BATON_TEST_OPENAI_KEY", ANTHROPIC_KEY)
        .output()
        .unwrap();
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.to_lowercase().contains("anthropic key"), "{report}");
    assert!(!report.contains(ANTHROPIC_KEY));
}

/// The same end to end run against a real model server, when you have one. Not run by
/// default (there is no network here); see the README:
///
/// ```sh
/// BATON_LIVE_MODEL=ollama/qwen2.5:7b cargo test -p baton --test all live -- --ignored
/// BATON_LIVE_MODEL=llamacpp/local BATON_LIVE_API_BASE=http://127.0.0.1:8080/v1 \
///     cargo test -p baton --test all live -- --ignored
/// ```
#[test]
#[ignore = "needs a local model server; set BATON_LIVE_MODEL (see the README)"]
fn live_local_server_runs_a_plan() {
    let model =
        std::env::var("BATON_LIVE_MODEL").expect("set BATON_LIVE_MODEL, e.g. ollama/qwen2.5:7b");
    let mut worker = format!("model = \"{model}\"\nmax_retries = 2\n");
    if let Ok(base) = std::env::var("BATON_LIVE_API_BASE") {
        worker.push_str(&format!("api_base = \"{base}\"\n"));
    }
    if let Ok(structured) = std::env::var("BATON_LIVE_STRUCTURED") {
        worker.push_str(&format!("options = {{ structured = \"{structured}\" }}\n"));
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("baton.toml"),
        format!("[[workers]]\nid = \"first\"\n{worker}\n[[workers]]\nid = \"second\"\n{worker}"),
    )
    .unwrap();
    let out = baton(d)
        .args([
            "-v",
            "run",
            "--objective",
            "Write a short plan for a command-line todo app",
        ])
        .args([
            "--task",
            "List the commands the app needs",
            "--task",
            "Describe how todos are stored",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("steps 2/2"), "{stdout}");
    assert!(
        stdout.contains("conversations passed between workers: 0"),
        "{stdout}"
    );
}

/// Regression: against a hung server `-v` printed nothing while a call was in flight,
/// and each timed-out call was retried for the whole limit again (a one-worker run
/// waited about 45 minutes before it blocked). Now a line says what the call waits
/// for, and a timeout fails the turn without a retry.
#[test]
fn a_hung_server_is_shown_while_baton_waits_and_a_timeout_is_not_retried() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let connections = Arc::new(Mutex::new(0u32));
    let count = connections.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            *count.lock().unwrap() += 1;
            held.push(stream); // read nothing, answer nothing
        }
    });
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"local\"\nmodel = \"llamacpp/local\"\n\
             max_retries = 2\noptions = {{ api_base = \"{base}\", timeout_s = 11 }}\n"
        ),
    )
    .unwrap();
    run_ok(
        dir.path(),
        &["run", "--objective", "o", "--task", "t", "--create-only"],
    );
    let out = baton(dir.path()).args(["step"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("turn 0 · local (llamacpp/local) combined: attempt 1 of 3: waiting 10 s for the answer; gives up at 11 s"),
        "{err}"
    );
    assert_eq!(
        *connections.lock().unwrap(),
        1,
        "a timed-out call was retried: {err}"
    );
}

/// A llama.cpp-like server: chat completions answer `{"ok": true}`; `/props` tells
/// the context size.
fn llama_server(n_ctx: u64) -> String {
    llama_server_answering(n_ctx, "{\"ok\": true}", "stop")
}

fn llama_server_answering(n_ctx: u64, content: &'static str, finish: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let answer = move |seen: &Seen| {
        let reply = if seen.path == "/props" {
            json!({"default_generation_settings": {"n_ctx": n_ctx}, "total_slots": 1})
        } else {
            json!({"choices": [{"index": 0, "finish_reason": finish,
                "message": {"role": "assistant", "content": content}}],
                "usage": {"prompt_tokens": 30, "completion_tokens": 5}})
        };
        ("200 OK", reply)
    };
    std::thread::spawn(move || {
        let log = Arc::new(Mutex::new(Vec::new()));
        for stream in listener.incoming().flatten() {
            let log = log.clone();
            std::thread::spawn(move || connection(stream, &log, &answer));
        }
    });
    base
}

/// Regression: with the default budget a turn needed about 3k tokens of context and
/// nothing said so; `workers --verify` reads the server's context size and warns.
#[test]
fn workers_verify_reports_the_context_window_and_warns_when_a_turn_will_not_fit() {
    for (n_ctx, expect) in [
        (2048, "WARNING: context window 2048 tokens"),
        (16384, "context window 16384 tokens"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let base = llama_server(n_ctx);
        std::fs::write(
            dir.path().join("baton.toml"),
            format!("[[workers]]\nid = \"local\"\nmodel = \"llamacpp/local\"\noptions = {{ api_base = \"{base}/v1\" }}\n"),
        )
        .unwrap();
        let out = run_ok(dir.path(), &["workers", "--verify"]);
        assert!(
            out.contains(expect) && out.contains("llama.cpp /props"),
            "{out}"
        );
        if n_ctx == 2048 {
            assert!(
                out.contains("budget 2000") && out.contains("larger context"),
                "{out}"
            );
        } else {
            assert!(out.contains(": fits") && !out.contains("WARNING"), "{out}");
        }
    }
}

/// Regression: a truncated answer was thrown away, so `baton history` could not show
/// what the model wrote.
#[test]
fn history_shows_what_a_truncated_answer_held() {
    let dir = tempfile::tempdir().unwrap();
    let base = llama_server_answering(
        8192,
        "{\"summary\": \"Listed the commands: add, list, do",
        "length",
    );
    std::fs::write(
        dir.path().join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"local\"\nmodel = \"llamacpp/local\"\n\
             max_retries = 0\noptions = {{ api_base = \"{base}/v1\" }}\n"
        ),
    )
    .unwrap();
    run_ok(
        dir.path(),
        &["run", "--objective", "o", "--task", "t", "--create-only"],
    );
    let out = baton(dir.path()).args(["step"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let history = run_ok(dir.path(), &["history"]);
    assert!(
        history
            .contains("the model had written: {\"summary\": \"Listed the commands: add, list, do"),
        "{history}"
    );
}
