//! Turns against local servers that speak each provider's real wire format: what a
//! provider's delay, refusal, bill or echo does to the run, across turns and processes.

use std::sync::Arc;
use std::time::Duration;

use baton_core::turn::TurnStatus;
use baton_engine::config::{Price, Roster, WorkerConfig};
use baton_engine::{Engine, RunEnd, StepOutcome};
use baton_gateway::Credential;
use baton_store::RunStatus;
use serde_json::{Value, json};

use super::server::{Action, TestServer, json as reply, json_with};
use super::*;

const OPENAI_KEY: &str = "sk-proj-TESTKEY-openai-0123456789";
const ANTHROPIC_KEY: &str = "sk-ant-api03-TESTKEY-anthropic-0123456789";

pub(super) fn openai_worker(id: &str, server: &TestServer, max_retries: u32) -> WorkerConfig {
    let mut w = WorkerConfig::mock(id, "x");
    w.model = "openai/gpt-4.1-mini".into();
    w.family = "openai".into();
    w.api_base = Some(format!("{}/v1", server.base()));
    w.api_key = Some(Credential::new(OPENAI_KEY).unwrap());
    w.max_retries = max_retries;
    w
}

pub(super) fn anthropic_worker(id: &str, server: &TestServer) -> WorkerConfig {
    let mut w = WorkerConfig::mock(id, "x");
    w.model = "anthropic/claude-sonnet-4-5".into();
    w.family = "anthropic".into();
    w.api_base = Some(server.base());
    w.api_key = Some(Credential::new(ANTHROPIC_KEY).unwrap());
    w.max_retries = 0;
    w
}

/// A Chat Completions answer carrying `claim`.
pub(super) fn chat(
    claim: &Value,
    finish: &str,
    prompt_tokens: u64,
    completion_tokens: u64,
) -> Action {
    reply(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "finish_reason": finish,
                "message": {"role": "assistant", "content": claim.to_string()}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}
        })
        .to_string(),
    )
}

/// OpenAI's 429 asking for `retry_after` seconds.
pub(super) fn rate_limited(retry_after: &str) -> Action {
    json_with(
        429,
        &[("retry-after", retry_after)],
        r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#,
    )
}

fn openai_error(status: u16, kind: &str, code: &str, message: &str) -> Action {
    reply(
        status,
        &json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
            .to_string(),
    )
}

/// OpenAI's answer to a briefing too long for the model's context.
fn context_too_long() -> Action {
    openai_error(
        400,
        "invalid_request_error",
        "context_length_exceeded",
        "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.",
    )
}

/// A Messages answer whose forced tool call carries `claim`.
fn message(claim: &Value) -> Action {
    reply(
        200,
        &json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "submit_claim", "input": claim}],
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 900, "output_tokens": 80}
        })
        .to_string(),
    )
}

pub(super) fn one_worker_spec(worker: WorkerConfig) -> RunSpec {
    spec(
        &["Migrate the billing module"],
        Roster {
            workers: vec![worker],
        },
    )
}

/// The engine a fresh process would build on the same database, on the real clock
/// (holds are wall-clock times).
pub(super) fn process(dir: &std::path::Path) -> (Arc<dyn baton_store::Store>, Engine) {
    let store = store_in(dir);
    let engine = Engine::new(store.clone());
    (store, engine)
}

/// Creates the run of `spec` in a fresh process on `dir` and runs it to its end.
pub(super) fn run_in(
    dir: &std::path::Path,
    spec: &RunSpec,
) -> (Arc<dyn baton_store::Store>, RunId, RunEnd) {
    let (store, engine) = process(dir);
    let id = engine.create_run(spec).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let end = engine.run(&mut session, None, &mut |_, _| {}).unwrap();
    (store, id, end)
}

/// [`run_in`], for a run that must end blocked: its question.
pub(super) fn run_blocked(
    dir: &std::path::Path,
    spec: &RunSpec,
) -> (Arc<dyn baton_store::Store>, RunId, String) {
    let (store, id, end) = run_in(dir, spec);
    let RunEnd::Blocked { question } = end else {
        panic!("{end:?}")
    };
    (store, id, question)
}

/// Regression (issue 7, item 11): once a call had used up its retries, the next turn
/// called about 2 ms after a 429 that asked for 3 s. The delay is now remembered with
/// the run, so the next turn — here in a new process — waits it out.
#[test]
fn a_429_delay_outlives_the_turn_and_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        rate_limited("2"),
        chat(&ok_result("migrated"), "stop", 100, 10),
    ]);
    let spec = one_worker_spec(openai_worker("w1", &server, 0));
    let id = {
        let (_, engine) = process(dir.path());
        let id = engine.create_run(&spec).unwrap();
        let mut session = engine
            .open_with_keys(&id, None, Some(&spec.roster))
            .unwrap();
        assert_eq!(
            engine.run(&mut session, Some(1), &mut |_, _| {}).unwrap(),
            RunEnd::Paused
        );
        id
    };
    let (store, engine) = process(dir.path());
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    assert_eq!(
        engine.run(&mut session, None, &mut |_, _| {}).unwrap(),
        RunEnd::Finished
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "one call per turn");
    let gap = requests[1].at.duration_since(requests[0].at);
    assert!(
        gap >= Duration::from_secs(2),
        "called again {gap:?} after a 429 that asked for 2 s"
    );
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns[0].calls[0].retry_after_ms, Some(2000));
    assert_eq!(turns[1].status, TurnStatus::Committed);
}

/// Regression (issue 7, item 11): a rate limit is the account's, not the worker's:
/// the next worker on the same provider, endpoint and key waits out the delay too.
#[test]
fn a_429_delay_holds_every_worker_on_the_same_account() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        rate_limited("2"),
        chat(&ok_result("migrated"), "stop", 100, 10),
    ]);
    let spec = spec(
        &["Migrate the billing module"],
        Roster {
            workers: vec![
                openai_worker("w1", &server, 0),
                openai_worker("w2", &server, 0),
            ],
        },
    );
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    let requests = server.requests();
    let gap = requests[1].at.duration_since(requests[0].at);
    assert!(
        gap >= Duration::from_secs(2),
        "w2 called {gap:?} after w1's 429"
    );
    assert_eq!(store.turns(&id).unwrap()[1].worker.as_str(), "w2");
}

/// Regression (issue 7, item 11): a 429 asking for 3,600 s — beyond the longest wait
/// baton allows — got two more requests within 7 ms before the run blocked, and no
/// message said baton declined to wait. Now the run blocks after the one request,
/// says so, and a resumed process still does not call before the time is up.
#[test]
fn a_429_asking_longer_than_baton_waits_blocks_at_once_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![rate_limited("3600")]);
    let spec = one_worker_spec(openai_worker("w1", &server, 2));
    let (store, id, question) = run_blocked(dir.path(), &spec);
    assert_eq!(server.requests().len(), 1, "no request after the 429");
    assert!(
        question.contains("asked baton to wait 3600 s"),
        "{question}"
    );
    assert!(question.contains("declined to wait"), "{question}");
    assert!(question.contains("can be retried after"), "{question}");
    let error = store.turn(&id, 0).unwrap().unwrap().calls[0]
        .error
        .clone()
        .unwrap();
    assert!(
        error.contains("baton declined to wait 3600 s (it waits at most 600 s)"),
        "{error}"
    );
    assert!(error.contains("can be retried after"), "{error}");

    // Another process asking the blocked run to step is told the same reason, not a
    // generic "turns failed" (the reason is read back from the run's record).
    let (_, engine) = process(dir.path());
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    match engine.step(&mut session).unwrap() {
        StepOutcome::Blocked { question: again } => assert_eq!(again, question),
        other => panic!("{other:?}"),
    }
    // A human resumes too early, in another process: still no request.
    engine.unblock(&mut session).unwrap();
    let end = engine.run(&mut session, None, &mut |_, _| {}).unwrap();
    assert!(matches!(end, RunEnd::Blocked { .. }), "{end:?}");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(store.turns(&id).unwrap().len(), 1);
    assert_eq!(store.run_info(&id).unwrap().status, RunStatus::Blocked);
}

/// Regression (issue 7, item 12): a bad request was sent byte-identical on three
/// consecutive turns before the run blocked. The run now blocks after the first.
#[test]
fn a_bad_request_is_not_sent_again_byte_identical() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![openai_error(
        400,
        "invalid_request_error",
        "invalid_value",
        "Invalid value for 'temperature': must be at most 2.",
    )]);
    let spec = one_worker_spec(openai_worker("w1", &server, 2));
    let (_, _, question) = run_blocked(dir.path(), &spec);
    assert_eq!(server.requests().len(), 1);
    assert!(question.contains("byte-identical"), "{question}");
    assert!(
        question.contains("Invalid value for 'temperature'"),
        "{question}"
    );
    assert!(
        question.contains("at a budget of 2000 tokens"),
        "{question}"
    );
}

/// Regression (review of issue 7, item 11): Ctrl-C while baton waited out a 429's
/// delay discarded the turn and the delay with it; a resume called at once.
#[test]
fn a_delay_learnt_by_an_interrupted_turn_is_still_remembered() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![rate_limited("60")]);
    let spec = one_worker_spec(openai_worker("w1", &server, 2));
    let (store, engine) = process(dir.path());
    let id = engine.create_run(&spec).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let cancel = session.cancel.clone();
    let ended = std::thread::scope(|s| {
        s.spawn(|| {
            // Well inside the 60 s wait.
            while server.requests().is_empty() {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
            cancel.cancel();
        });
        engine.step(&mut session)
    });
    assert!(
        matches!(ended, Err(baton_engine::Error::Cancelled { turn: 0 })),
        "{ended:?}"
    );
    assert!(
        store.turns(&id).unwrap().is_empty(),
        "the turn is discarded"
    );
    let holds = store.worker_holds(&id).unwrap();
    assert_eq!(holds.len(), 1, "{holds:?}");
    assert_eq!(holds[0].asked_ms, 60_000);
    let left = holds[0].not_before.0 - baton_engine::Clock::now(&baton_engine::SystemClock).0;
    assert!(left > 50_000, "held for {left} ms more");
}

/// Regression (issue 7, item 12): with two workers taking turns, each re-sent its
/// byte-identical bad request two turns later. The run now blocks before that.
#[test]
fn a_bad_request_is_not_sent_again_when_workers_alternate() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![openai_error(
        400,
        "invalid_request_error",
        "invalid_value",
        "Invalid value for 'temperature': must be at most 2.",
    )]);
    let mut other = openai_worker("w2", &server, 0);
    other.family = "other".into();
    let spec = spec(
        &["Migrate the billing module"],
        Roster {
            workers: vec![openai_worker("w1", &server, 0), other],
        },
    );
    let (_, _, question) = run_blocked(dir.path(), &spec);
    assert_eq!(
        server.requests().len(),
        2,
        "each worker's request was sent once"
    );
    assert!(question.contains("byte-identical"), "{question}");
}

/// Regression (issue 7, item 12): a briefing too long for the model's context was
/// re-sent unchanged. Each next turn now halves the budget, and the block message
/// names the budget.
#[test]
fn a_briefing_too_long_for_the_context_is_shrunk_and_the_block_names_the_budget() {
    let dir = tempfile::tempdir().unwrap();
    // A hosted API: it tells no context window (baton asks once the briefing is refused).
    let server = answering_posts((0..4).map(|_| context_too_long()).collect());
    let mut spec = one_worker_spec(openai_worker("w1", &server, 2));
    // A briefing well above the smallest one (120 tokens), so there is room to halve.
    spec.objective = "Build a small service that bills customers every month. ".repeat(20);
    let (store, id, question) = run_blocked(dir.path(), &spec);
    let bodies: Vec<String> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.body)
        .collect();
    assert!(
        bodies.len() >= 2 && bodies.len() <= 3,
        "{} requests",
        bodies.len()
    );
    for pair in bodies.windows(2) {
        assert_ne!(
            pair[0], pair[1],
            "a doomed request was sent again unchanged"
        );
    }
    let budgets: Vec<usize> = store
        .turns(&id)
        .unwrap()
        .iter()
        .map(|t| t.package.budget)
        .collect();
    assert!(budgets.windows(2).all(|b| b[1] < b[0]), "{budgets:?}");
    let last = *budgets.last().unwrap();
    assert!(
        question.contains(&format!("at a budget of {last} tokens")),
        "{question}"
    );
    assert!(question.contains("larger context window"), "{question}");
}

/// The shrink follows the worker, not the turn order: with two workers taking turns,
/// a worker's next briefing is still halved after its own was too long.
#[test]
fn a_too_long_briefing_is_shrunk_on_the_workers_next_turn_when_workers_alternate() {
    let dir = tempfile::tempdir().unwrap();
    let a = answering_posts(vec![context_too_long(), context_too_long()]);
    let b = answering_posts(vec![context_too_long(), context_too_long()]);
    let spec = spec(
        &["Migrate the billing module"],
        Roster {
            workers: vec![openai_worker("w1", &a, 0), openai_worker("w2", &b, 0)],
        },
    );
    let (store, id, question) = run_blocked(dir.path(), &spec);
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 3);
    assert_eq!(turns[2].worker.as_str(), "w1");
    assert!(
        turns[2].package.budget < turns[0].package.budget,
        "w1's second briefing was not shrunk: {} then {}",
        turns[0].package.budget,
        turns[2].package.budget
    );
    assert!(
        question.contains(&format!(
            "at a budget of {} tokens",
            turns[2].package.budget
        )),
        "{question}"
    );
}

/// Regression (issue 7, item 12): Anthropic's "credit balance is too low" (HTTP 400
/// `invalid_request_error`) was a bad request; as a spent quota it stops the run at
/// once with the provider's words.
#[test]
fn anthropic_low_credit_stops_the_run_as_a_spent_quota() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![reply(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}"#,
    )]);
    let spec = one_worker_spec(anthropic_worker("w1", &server));
    let (store, id, question) = run_blocked(dir.path(), &spec);
    assert!(
        question.starts_with("worker w1 cannot work: quota_exhausted"),
        "{question}"
    );
    assert!(question.contains("credit balance is too low"), "{question}");
    assert_eq!(server.requests().len(), 1);
    assert_eq!(
        store.turn(&id, 0).unwrap().unwrap().calls[0]
            .error_class
            .as_ref()
            .map(|c| c.as_str()),
        Some("quota_exhausted")
    );
}

/// Issue 11: a spent quota whose reset the provider named (Anthropic's spend limit,
/// "You will regain access on …") leaves that instant on the call record, so the
/// worker's pool can be marked exhausted until then.
#[test]
fn pools_a_spent_quota_records_the_reset_the_provider_named() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![reply(
        400,
        r#"{"type":"error","error":{"type":"invalid_request_error","message":"You have reached your specified API usage limits. You will regain access on 2050-01-01 at 00:00 UTC."}}"#,
    )]);
    let spec = one_worker_spec(anthropic_worker("w1", &server));
    let (store, id, question) = run_blocked(dir.path(), &spec);
    assert!(
        question.starts_with("worker w1 cannot work: quota_exhausted"),
        "{question}"
    );
    let call = store.turn(&id, 0).unwrap().unwrap().calls[0].clone();
    // 2050-01-01T00:00:00Z, to the second (the engine's clock and the gateway's
    // agree within the call).
    let expected_ms: i64 = 2_524_608_000_000;
    let at = call.quota_reset_at.expect("the reset is recorded").0;
    assert!((at - expected_ms).abs() < 5_000, "{at} vs {expected_ms}");
}

/// Regression (issue 7, item 14): a truncated reply recorded 0/0 tokens and no cost
/// although the provider reported and bills them; an empty reply that was retried
/// lost its first attempt's input tokens.
#[test]
fn rejected_replies_count_the_tokens_and_cost_the_provider_billed() {
    let dir = tempfile::tempdir().unwrap();
    let empty = reply(
        200,
        &json!({
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": ""}}],
            "usage": {"prompt_tokens": 1900, "completion_tokens": 0}
        })
        .to_string(),
    );
    let server = TestServer::start(vec![
        chat(&json!({"summary": "migr"}), "length", 1900, 64),
        empty,
        chat(&ok_result("migrated"), "stop", 1900, 120),
    ]);
    let mut w1 = openai_worker("w1", &server, 1);
    w1.price = Some(Price {
        input: 2.0,
        output: 8.0,
        cached: None,
    });
    let spec = one_worker_spec(w1);
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    let truncated = &turns[0].calls[0];
    assert_eq!(
        truncated.error_class.as_ref().map(|c| c.as_str()),
        Some("truncated")
    );
    let usage = truncated.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (1900, 64));
    assert_eq!(truncated.cost_micro_usd, Some(1900 * 2 + 64 * 8));

    let retried = &turns[1].calls[0];
    assert_eq!(retried.attempts.len(), 2, "{retried:?}");
    let usage = retried.usage.unwrap();
    assert_eq!((usage.input_tokens, usage.output_tokens), (3800, 120));
    assert_eq!(retried.cost_micro_usd, Some(3800 * 2 + 120 * 8));
}

/// Regression (issue 7, item 15): a key a provider echoed inside a successful reply
/// was stored, compiled into the next briefing and sent to the next worker's provider
/// (an Anthropic worker received the OpenAI key). Every known key is scrubbed from
/// every model output before it is stored or reconciled.
#[test]
fn a_key_echoed_in_a_reply_reaches_neither_the_store_nor_the_next_provider() {
    let dir = tempfile::tempdir().unwrap();
    let leaky = format!("called the API with {OPENAI_KEY}; the other key is {ANTHROPIC_KEY}");
    let openai = TestServer::start(vec![chat(
        &json!({"summary": leaky, "last_action": leaky, "next_action": leaky,
                "notes": leaky, "decisions": [{"text": leaky, "reason": leaky}]}),
        "stop",
        100,
        10,
    )]);
    let anthropic = TestServer::start(vec![message(&ok_result("reviewed"))]);
    let spec = spec(
        &["Migrate the billing module", "Review the migration"],
        Roster {
            workers: vec![
                openai_worker("w1", &openai, 0),
                anthropic_worker("w2", &anthropic),
            ],
        },
    );
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    let sent = anthropic.requests();
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0].body.contains("[redacted]"),
        "the briefing carries the scrubbed claim"
    );
    for key in [OPENAI_KEY, ANTHROPIC_KEY] {
        for r in &sent {
            assert!(!r.body.contains(key), "the next provider received a key");
        }
        let stored = serde_json::to_string(&store.turns(&id).unwrap()).unwrap();
        assert!(!stored.contains(key), "a key was stored in a turn record");
        let state = serde_json::to_string(&store.load_state(&id).unwrap()).unwrap();
        assert!(!state.contains(key), "a key reached the canonical state");
        assert!(
            store
                .prior_outputs(&id, 10)
                .unwrap()
                .iter()
                .all(|o| !o.contains(key)),
            "a key was stored as a raw output"
        );
    }
}

/// The request body's user message.
fn user_message(body: &Value) -> &str {
    body.pointer("/messages/1/content")
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The output limit a Chat Completions request was sent with.
fn output_limit(body: &Value) -> Option<u64> {
    body.get("max_completion_tokens")
        .or_else(|| body.get("max_tokens"))
        .and_then(Value::as_u64)
}

/// A llama.cpp-like server whose model writes more than `limit` tokens for the work
/// unless the prompt says its previous answer was cut off and asks for a short one;
/// `/props` tells its context window.
fn verbose_model_server(n_ctx: u64) -> TestServer {
    TestServer::start(super::server::deciding(20, move |r| {
        if r.path == "/props" {
            return reply(
                200,
                &json!({"default_generation_settings": {"n_ctx": n_ctx}}).to_string(),
            );
        }
        let body = r.json();
        let limit = output_limit(&body).unwrap_or(4096);
        let handoff =
            body.pointer("/response_format/json_schema/name") == Some(&json!("HandoffReport"));
        if handoff {
            return chat(&ok_report("migrated"), "stop", 900, 40);
        }
        if user_message(&body).contains("cut off") {
            return chat(&ok_result("migrated"), "stop", 950, 60);
        }
        // Rambles past any limit it is given.
        chat(
            &json!({"summary": "Migrating the bill"}),
            "length",
            900,
            limit,
        )
    }))
}

/// Regression (issue 15): an answer cut off at max_tokens was sent again unchanged on
/// the worker's next turn, which at temperature 0 is cut off at the same place. The
/// next turn now says the answer was cut, asks for a short one with only the required
/// fields, and (the server told its context window) lets the model write more.
#[test]
fn a_truncated_request_is_not_sent_again_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let server = verbose_model_server(4096);
    let mut w1 = openai_worker("w1", &server, 0);
    w1.max_tokens = Some(64);
    w1.temperature = Some(0.0);
    let spec = one_worker_spec(w1);
    let (_, engine) = process(dir.path());
    let id = engine.create_run(&spec).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let mut warnings = Vec::new();
    let end = engine
        .run(&mut session, Some(3), &mut |s, _| {
            warnings.extend(s.warnings.clone())
        })
        .unwrap();
    assert_eq!(end, RunEnd::Finished, "{warnings:?}");
    let posts: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.json())
        .collect();
    // One call per turn: the cut-off answer, then the short one.
    assert_eq!(posts.len(), 2, "{posts:#?}");
    let (first, again) = (&posts[0], &posts[1]);
    assert_ne!(first, again, "the cut-off request was sent again unchanged");
    let note = user_message(again);
    assert!(
        note.contains("cut off") && note.contains("64 output tokens"),
        "{note}"
    );
    assert!(
        note.contains("\"summary\"") && note.contains("\"last_action\""),
        "the short answer names the required fields: {note}"
    );
    assert!(!user_message(first).contains("cut off"));
    assert_eq!(output_limit(first), Some(64));
    assert_eq!(
        output_limit(again),
        Some(128),
        "the model's limit ended it and the window (4096) has room: it may write more"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("cut off at 64 output tokens") && w.contains("up to 128 tokens")),
        "{warnings:?}"
    );
    let turns = engine.store().turns(&id).unwrap();
    assert_eq!(
        turns[0].calls[0].error_class.as_ref().map(|c| c.as_str()),
        Some("truncated")
    );
    assert_eq!(turns[1].status, TurnStatus::Committed);
    // Recorded with the turn (`baton history` shows it), not only printed.
    assert!(
        turns[1]
            .outcome
            .warnings
            .iter()
            .any(|w| w.contains("asks it for a short answer")),
        "{:?}",
        turns[1].outcome.warnings
    );
}

/// Regression (issue 15, live with Qwen 0.5B at max_tokens 256): after a cut-off answer
/// the next turn asked for a short one and committed, but the turn after that (the next
/// step) asked the long way again and was cut off again: every other turn failed. A
/// worker's later turns in the process keep the short-answer request and the raised
/// limit.
#[test]
fn a_worker_cut_off_once_keeps_asking_for_short_answers() {
    let dir = tempfile::tempdir().unwrap();
    let server = verbose_model_server(4096);
    let mut w1 = openai_worker("w1", &server, 0);
    w1.max_tokens = Some(64);
    w1.temperature = Some(0.0);
    let spec = spec(
        &["Migrate the billing module", "Bill the customers"],
        Roster { workers: vec![w1] },
    );
    let (_, engine) = process(dir.path());
    let id = engine.create_run(&spec).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let mut notices = 0;
    let end = engine
        .run(&mut session, Some(6), &mut |s, _| {
            notices += s
                .warnings
                .iter()
                .filter(|w| w.contains("asks it for a short answer"))
                .count()
        })
        .unwrap();
    let posts: Vec<Value> = server
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.json())
        .collect();
    let turns = engine.store().turns(&id).unwrap();
    let status: Vec<_> = turns
        .iter()
        .map(|t| (t.status, t.outcome.warnings.clone()))
        .collect();
    assert_eq!(end, RunEnd::Finished, "{status:?}");
    assert_eq!(
        posts.len(),
        3,
        "one cut-off, then two short answers: {posts:#?}"
    );
    for later in &posts[1..] {
        assert!(user_message(later).contains("cut off"));
        assert_eq!(output_limit(later), Some(128));
    }
    assert_eq!(notices, 1, "said once, on the turn after the cut");
    let turns = engine.store().turns(&id).unwrap();
    assert_eq!(turns[2].status, TurnStatus::Committed);
}

/// Regression (issue 15): a repair call at temperature 0 got back the rejected answer
/// byte for byte (Qwen 0.5B): the same prompt prefix, sampled greedily. The repair is
/// now made at a higher temperature, and says so on the wire.
#[test]
fn a_repair_call_samples_at_a_higher_temperature_than_the_rejected_call() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        chat(&json!({"sumary": "migrated"}), "stop", 900, 20),
        chat(&ok_result("migrated"), "stop", 1000, 30),
        chat(&json!({"sumary": "billed"}), "stop", 900, 20),
        chat(&ok_result("billed"), "stop", 1000, 30),
    ]);
    let mut w1 = openai_worker("w1", &server, 0);
    w1.temperature = Some(0.0);
    let mut spec = spec(
        &["Migrate the billing module", "Bill the customers"],
        Roster { workers: vec![w1] },
    );
    spec.settings.repair_attempts = 1;
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    let sent: Vec<Value> = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.json())
        .collect();
    assert_eq!(sent.len(), 4);
    assert_eq!(sent[0]["temperature"], json!(0.0));
    assert_eq!(
        sent[1]["temperature"],
        json!(0.7),
        "the repair request: {}",
        sent[1]
    );
    assert_eq!(
        sent[2]["temperature"],
        json!(0.0),
        "the next turn's call is greedy again"
    );
    assert_eq!(sent[3]["temperature"], json!(0.7));
    let calls = &store.turns(&id).unwrap()[0].calls;
    assert_eq!(calls[1].call, baton_core::turn::CallKind::CombinedRepair);
}

/// A server that answers its POSTs from `posts`, in order, and any GET (baton asking
/// for the context window) with a 404, as a hosted API or a proxy does.
fn answering_posts(posts: Vec<Action>) -> TestServer {
    let posts = std::sync::Mutex::new(std::collections::VecDeque::from(posts));
    TestServer::start(super::server::deciding(20, move |r| {
        if r.method == "GET" {
            return reply(404, r#"{"error":"not found"}"#);
        }
        posts.lock().unwrap().pop_front().unwrap_or_else(|| {
            reply(
                500,
                r#"{"error":{"message":"test server script exhausted"}}"#,
            )
        })
    }))
}

/// A Messages answer whose forced tool call ran to the output limit (llama.cpp's
/// Messages endpoint with a small model never ends one).
fn endless_tool_call(limit: u64) -> Action {
    reply(
        200,
        &json!({
            "id": "msg_1", "type": "message", "role": "assistant", "model": "local",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "WorkerResult",
                "input": {"summary": "Migrating the billing module: the billing module"}}],
            "stop_reason": "max_tokens",
            "usage": {"input_tokens": 900, "output_tokens": limit}
        })
        .to_string(),
    )
}

/// A Messages answer in text, as a claim asked for in the prompt comes back.
fn text_message(claim: &Value) -> Action {
    reply(
        200,
        &json!({
            "id": "msg_2", "type": "message", "role": "assistant", "model": "local",
            "content": [{"type": "text", "text": claim.to_string()}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 900, "output_tokens": 40}
        })
        .to_string(),
    )
}

/// Regression (issue 15): after forced tool use ran to the output limit, the worker
/// asked for its claim in the prompt instead — but only in that process: every later
/// process (a `resume`) forced tool use again on its first call and paid the whole
/// limit again. The fallback is now remembered with the run.
#[test]
fn a_fallback_from_forced_tool_use_outlives_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let server = answering_posts(vec![
        endless_tool_call(256),
        text_message(&ok_result("migrated")),
    ]);
    let mut w1 = anthropic_worker("w1", &server);
    w1.max_tokens = Some(256);
    let spec = one_worker_spec(w1);
    let id = {
        let (_, engine) = process(dir.path());
        let id = engine.create_run(&spec).unwrap();
        let mut session = engine
            .open_with_keys(&id, None, Some(&spec.roster))
            .unwrap();
        assert_eq!(
            engine.run(&mut session, Some(1), &mut |_, _| {}).unwrap(),
            RunEnd::Paused
        );
        id
    };
    let (store, engine) = process(dir.path());
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let mut warnings = Vec::new();
    let end = engine
        .run(&mut session, None, &mut |s, _| {
            warnings.push(s.warnings.clone())
        })
        .unwrap();
    assert_eq!(end, RunEnd::Finished);
    let sent: Vec<Value> = server
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.json())
        .collect();
    assert_eq!(sent.len(), 2);
    assert!(sent[0].get("tool_choice").is_some(), "{}", sent[0]);
    for later in &sent[1..] {
        assert!(
            later.get("tool_choice").is_none() && later.get("tools").is_none(),
            "the resumed process forced tool use again: {later}"
        );
    }
    // Said once, on the resumed process's first turn.
    let said: Vec<&String> = warnings
        .iter()
        .flatten()
        .filter(|w| w.contains("structured = \"instructions\""))
        .collect();
    assert_eq!(said.len(), 1, "{warnings:?}");
    assert!(said[0].contains("since turn 0"), "{}", said[0]);
    let recorded = store
        .events(&id, 0)
        .unwrap()
        .into_iter()
        .filter(|e| e.event.kind.name() == "worker_fell_back")
        .count();
    assert_eq!(recorded, 1, "the fallback is recorded once");
}

/// Regression (issue 15): with nothing listening at a worker's api_base, a one-worker
/// run failed three turns within 0.1 s (`max_retries = 0`) and blocked with a generic
/// "3 turns in a row failed". It now blocks after the first, naming the URL it called
/// and what to do.
#[test]
fn a_dead_server_blocks_the_run_at_once_naming_the_url() {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let mut w1 = WorkerConfig::mock("w1", "x");
    w1.model = "llamacpp/local".into();
    w1.api_base = Some(format!("http://127.0.0.1:{port}/v1"));
    w1.max_retries = 0;
    let spec = one_worker_spec(w1);
    let (store, id, question) = run_blocked(dir.path(), &spec);
    assert_eq!(store.turns(&id).unwrap().len(), 1, "{question}");
    assert!(
        question.contains(&format!("http://127.0.0.1:{port}/v1/chat/completions")),
        "{question}"
    );
    assert!(
        question.contains("cannot reach") && question.contains("Start the server"),
        "{question}"
    );
    assert!(
        question.contains(&format!("baton resume {id}")),
        "{question}"
    );
    // Regression: the question's lines were joined without their `\` continuations,
    // leaving runs of 18 spaces inside the sentence.
    assert!(!question.contains("  "), "{question:?}");
}

/// Regression (issue 15): baton sent briefings its estimate said would fit and the
/// server counted as too long (the heuristic under-counts llama.cpp's tokens). A
/// worker's `context_window` is now honoured before anything is sent: the briefing is
/// compiled to fit it with room for the answers and the estimate's error.
#[test]
fn a_configured_context_window_shrinks_the_briefing_before_it_is_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![
        chat(&ok_result("migrated"), "stop", 900, 30),
        chat(&ok_report("migrated"), "stop", 900, 30),
    ]);
    let mut w1 = openai_worker("w1", &server, 0);
    w1.context_window = Some(3000);
    w1.max_tokens = Some(256);
    let spec = one_worker_spec(w1);
    let (_, engine) = process(dir.path());
    let id = engine.create_run(&spec).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let mut warnings = Vec::new();
    let end = engine
        .run(&mut session, None, &mut |s, _| {
            warnings.extend(s.warnings.clone())
        })
        .unwrap();
    assert_eq!(end, RunEnd::Finished);
    let turn = &engine.store().turns(&id).unwrap()[0];
    // 3,000 − one answer of 256 leaves 2,744, of which 80 % is for estimated text.
    assert!(
        turn.package.budget <= 2744 * 80 / 100,
        "budget {}",
        turn.package.budget
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("context window of 3000 tokens")
                && w.contains(&format!("budget of {} tokens", turn.package.budget))),
        "{warnings:?}"
    );
}

/// A context window too small for any briefing blocks the run before a request is
/// sent, saying what to change.
#[test]
fn a_context_window_too_small_for_any_briefing_blocks_before_sending() {
    let dir = tempfile::tempdir().unwrap();
    let server = TestServer::start(vec![]);
    let mut w1 = openai_worker("w1", &server, 0);
    // An answer of up to 1,800 tokens leaves a 2,048-token context no room.
    w1.context_window = Some(2048);
    w1.max_tokens = Some(1800);
    let spec = one_worker_spec(w1);
    let (store, id, question) = run_blocked(dir.path(), &spec);
    assert!(server.requests().is_empty(), "a doomed request was sent");
    assert!(store.turns(&id).unwrap().is_empty());
    assert!(
        question.contains("context window of 2048 tokens")
            && question.contains("nothing was sent")
            && question.contains("max_tokens"),
        "{question}"
    );
}

/// A llama.cpp-like server with an `n_ctx`-token context: `/props` tells it, and a
/// request longer than it (counted at four bytes a token) is refused in llama.cpp's
/// words.
fn small_context_server(n_ctx: u64) -> TestServer {
    TestServer::start(super::server::deciding(20, move |r| {
        if r.path == "/props" {
            return reply(
                200,
                &json!({"default_generation_settings": {"n_ctx": n_ctx}}).to_string(),
            );
        }
        let body = r.json();
        let prompt = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap().len() as u64)
            .sum::<u64>()
            / 4;
        if prompt > n_ctx {
            return reply(
                400,
                &json!({"error": {"code": 400, "type": "exceed_context_size_error",
                    "message": format!("request ({prompt} tokens) exceeds the available context size ({n_ctx} tokens), try increasing it")}})
                .to_string(),
            );
        }
        let handoff =
            body.pointer("/response_format/json_schema/name") == Some(&json!("HandoffReport"));
        let claim = if handoff {
            ok_report("planned")
        } else {
            ok_result("planned")
        };
        chat(&claim, "stop", prompt, 30)
    }))
}

/// Regression (issue 15): after llama.cpp refused a briefing as too long, baton halved
/// the budget blindly (8,460 → 4,488 → 2,503 tokens against a 2,048-token context),
/// failing turn after turn. Once a briefing did not fit, the window the server tells is
/// read and the next briefing is compiled to fit it.
#[test]
fn after_a_briefing_did_not_fit_the_next_fits_the_window_the_server_tells() {
    let dir = tempfile::tempdir().unwrap();
    let server = small_context_server(2048);
    let mut w1 = openai_worker("w1", &server, 0);
    w1.max_tokens = Some(256);
    let mut spec = one_worker_spec(w1);
    spec.objective = format!(
        "Write a plan for a todo app. Background: {}",
        "Each todo has a title, a due date, a priority and tags; users filter by any. ".repeat(300)
    );
    spec.settings.budget = 8000;
    let (store, id, end) = run_in(dir.path(), &spec);
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    assert_eq!(turns.len(), 2, "one refused turn, then one that fits");
    assert_eq!(
        turns[0].calls[0].error_class.as_ref().map(|c| c.as_str()),
        Some("context_too_long")
    );
    assert_eq!(turns[1].status, TurnStatus::Committed);
    // Within the window less the answer's room (256) and the call's own text (368 of
    // prompt and 368 of schema, o200k): 1,013 tokens; under 1,000 while that text was
    // 564 + 470. The bug compiled 2,503 against this 2,048-token window.
    let budget = turns[1].package.budget;
    assert!(budget + 256 + 700 < 2048, "{budget}");
}
