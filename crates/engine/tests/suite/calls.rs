//! How many calls a turn makes and what they cost, against a local server speaking the
//! OpenAI wire format: one call per turn by default, two when the roster says so, and
//! the tokens counted as they went on the wire (the answer format included, every
//! attempt that reached the server, none for one that never connected).

use baton_core::tokens::{HeuristicEstimator, TokenEstimator};
use baton_core::turn::TurnStatus;
use baton_engine::config::{Calls, Roster, WorkerConfig};
use baton_engine::{Engine, RunEnd};
use baton_gateway::Credential;
use serde_json::{Value, json};

use super::server::{Action, Captured, TestServer, json as reply};
use super::*;

fn worker(base: &str, max_retries: u32) -> WorkerConfig {
    let mut w = WorkerConfig::mock("w1", "x");
    w.model = "openai/gpt-4.1-mini".into();
    w.family = "openai".into();
    w.api_base = Some(format!("{base}/v1"));
    w.api_key = Some(Credential::new("sk-proj-TESTKEY-calls-0123456789").unwrap());
    w.max_retries = max_retries;
    w
}

fn chat(claim: &Value) -> Action {
    reply(
        200,
        &json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4.1-mini",
            "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": claim.to_string()}}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 100}
        })
        .to_string(),
    )
}

fn run(worker: WorkerConfig) -> (Arc<dyn baton_store::Store>, RunId, RunEnd) {
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = Engine::new(store.clone());
    let spec = spec(
        &["Migrate the billing module"],
        Roster {
            workers: vec![worker],
        },
    );
    let id = engine.create_run(&spec).unwrap();
    let mut session = engine
        .open_with_keys(&id, None, Some(&spec.roster))
        .unwrap();
    let end = engine.run(&mut session, None, &mut |_, _| {}).unwrap();
    // The store outlives the directory's handle only while the run is read back.
    std::mem::forget(dir);
    (store, id, end)
}

/// The tokens of one request exactly as the server received it: both messages and the
/// `response_format`, cut from the raw body (the run counts with the heuristic).
fn wire_tokens(request: &Captured) -> usize {
    let body = request.json();
    let est = HeuristicEstimator;
    let messages = body["messages"].as_array().unwrap();
    let text: usize = messages
        .iter()
        .map(|m| est.count(m["content"].as_str().unwrap()))
        .sum();
    let start = request.body.find("\"response_format\":").unwrap() + "\"response_format\":".len();
    let format = &request.body[start..request.body.len() - 1];
    assert_eq!(
        serde_json::from_str::<Value>(format).unwrap(),
        body["response_format"],
        "response_format is the body's last field"
    );
    assert!(
        body["response_format"]["json_schema"]["schema"]["properties"].is_object(),
        "{format}"
    );
    text + est.count(format)
}

#[test]
fn an_api_worker_makes_one_call_per_turn_and_both_claims_come_from_it() {
    let server = TestServer::start(vec![chat(&json!({
        "summary": "Moved the billing tables to the new schema",
        "decisions": [{"text": "Keep invoice ids stable", "reason": "customers quote them"}],
        "last_action": "Migrated the invoices table",
        "next_action": "Migrate the payments table",
        "notes": "Payments still read the old view",
        "warnings": ["Do not drop the old view yet"]
    }))]);
    let (store, id, end) = run(worker(&server.base(), 0));
    assert_eq!(end, RunEnd::Finished);
    assert_eq!(server.requests().len(), 1, "one request for the turn");
    let turn = store.turn(&id, 0).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Committed);
    assert_eq!(turn.calls.len(), 1);
    assert_eq!(turn.calls[0].call.as_str(), "combined");
    // The audit holds what went on the wire: the body the server received, hashed.
    assert_eq!(turn.audit.messages_per_call, vec![2]);
    let received = server.only_request().body;
    assert_eq!(
        turn.audit.request_hashes,
        vec![hex::encode(<sha2::Sha256 as sha2::Digest>::digest(
            received.as_bytes()
        ))]
    );
    assert_eq!(
        turn.calls[0].sent_hash,
        Some(turn.audit.request_hashes[0].clone())
    );
    let state = store.load_state(&id).unwrap();
    assert_eq!(state.decisions[0].text, "Keep invoice ids stable");
    let handoff = state.handoffs.last().unwrap();
    assert_eq!(handoff.notes, "Payments still read the old view");
    assert_eq!(handoff.warnings, vec!["Do not drop the old view yet"]);
    assert_eq!(
        state.next_action.as_ref().map(|s| s.text.as_str()),
        Some("Migrate the payments table")
    );
    // The prompt asks for the handoff in the same answer.
    let sent = server.only_request().json();
    let user = sent["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("\"notes\"") && user.contains("\"summary\""),
        "{user}"
    );
}

#[test]
fn two_calls_per_turn_still_work_when_the_roster_asks_for_them() {
    let server = TestServer::start(vec![
        chat(&json!({"summary": "did it", "last_action": "migrated", "next_action": "go on"})),
        chat(
            &json!({"notes": "see the record", "last_action": "migrated", "next_action": "go on",
            "warnings": ["check the view"]}),
        ),
    ]);
    let mut w = worker(&server.base(), 0);
    w.calls = Some(Calls::Two);
    let (store, id, end) = run(w);
    assert_eq!(end, RunEnd::Finished);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let turn = store.turn(&id, 0).unwrap().unwrap();
    let kinds: Vec<&str> = turn.calls.iter().map(|c| c.call.as_str()).collect();
    assert_eq!(kinds, ["execute", "handoff"]);
    // Each call carries its own schema.
    let titles: Vec<Value> = requests
        .iter()
        .map(|r| r.json()["response_format"]["json_schema"]["name"].clone())
        .collect();
    assert_eq!(titles, [json!("WorkerResult"), json!("HandoffReport")]);
    let state = store.load_state(&id).unwrap();
    assert_eq!(
        state.handoffs.last().unwrap().warnings,
        vec!["check the view"]
    );
}

#[test]
fn tokens_sent_count_the_schema_on_the_wire() {
    let server = TestServer::start(vec![chat(
        &json!({"summary": "did it", "last_action": "migrated", "next_action": "go on"}),
    )]);
    let (store, id, _) = run(worker(&server.base(), 0));
    let request = server.only_request();
    let turn = store.turn(&id, 0).unwrap().unwrap();
    assert_eq!(turn.calls[0].tokens_sent, wire_tokens(&request));
}

#[test]
fn tokens_sent_count_every_attempt_of_a_retried_call() {
    let overloaded = reply(
        503,
        r#"{"error":{"message":"The server is overloaded","type":"server_error","code":null}}"#,
    );
    let server = TestServer::start(vec![
        overloaded,
        chat(&json!({"summary": "did it", "last_action": "migrated", "next_action": "go on"})),
    ]);
    let (store, id, end) = run(worker(&server.base(), 1));
    assert_eq!(end, RunEnd::Finished);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let turn = store.turn(&id, 0).unwrap().unwrap();
    assert_eq!(turn.calls[0].attempts.len(), 2);
    assert_eq!(
        turn.calls[0].tokens_sent,
        wire_tokens(&requests[0]) + wire_tokens(&requests[1])
    );
}

#[test]
fn a_call_that_never_connected_counts_no_tokens() {
    // A port nothing listens on: the connection is refused, nothing is sent.
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let (store, id, _) = run(worker(&format!("http://127.0.0.1:{port}"), 1));
    let turn = store.turn(&id, 0).unwrap().unwrap();
    assert_eq!(turn.status, TurnStatus::Failed);
    let call = &turn.calls[0];
    assert_eq!(
        call.error_class.as_ref().map(|c| c.as_str()),
        Some("unreachable"),
        "{call:?}"
    );
    assert_eq!(call.attempts.len(), 2, "retried, as unreachable is");
    assert_eq!(call.tokens_sent, 0, "{call:?}");
}

/// A combined answer that fails its schema gets the configured repair call, with the
/// refusal quoted, like either call of a two-call turn.
#[test]
fn a_combined_answer_that_fails_its_schema_is_repaired_once() {
    let dir = tempfile::tempdir().unwrap();
    let script = write_script(
        dir.path(),
        &[
            line(
                0,
                "combined",
                json!({"summary": "did it", "last_action": "migrated"}),
            ),
            line(
                0,
                "combined_repair",
                json!({"summary": "did it", "last_action": "migrated", "next_action": "go on"}),
            ),
        ],
    );
    let store = store_in(dir.path());
    let mut spec = spec(&["Migrate the billing module"], scripted_roster(1, &script));
    spec.settings.repair_attempts = 1;
    let (id, end) = run_all(&engine(&store), &spec);
    assert_eq!(end, RunEnd::Finished);
    let turn = store.turn(&id, 0).unwrap().unwrap();
    let kinds: Vec<&str> = turn.calls.iter().map(|c| c.call.as_str()).collect();
    assert_eq!(kinds, ["combined", "combined_repair"]);
    assert!(
        turn.calls[0]
            .error
            .as_deref()
            .unwrap()
            .contains("next_action"),
        "{:?}",
        turn.calls[0].error
    );
    assert_eq!(turn.status, TurnStatus::Committed);
    // Regression: the stream said "ok" for the refused answer (its event was made before
    // the answer was read), while the committed record said it was refused.
    let called: Vec<(bool, Option<String>)> = store
        .events(&id, 0)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.event.kind {
            baton_protocol::EventKind::ModelCalled { ok, detail, .. } => Some((ok, detail.error)),
            _ => None,
        })
        .collect();
    let recorded: Vec<(bool, Option<String>)> = turn
        .calls
        .iter()
        .map(|c| (c.error.is_none(), c.error.clone()))
        .collect();
    assert_eq!(called, recorded);
    assert!(!called[0].0);
}

/// At a user's defaults (the o200k BPE, the mock roster, one combined call), every
/// call's tokens are the whole request counted afresh, and its hashes are the request
/// as built: the briefing's known count and the gateway's hash are reused, never
/// trusted blind.
#[test]
fn a_default_runs_calls_count_and_hash_the_whole_request() {
    use baton_core::prompt;
    use baton_core::tokens::BpeEstimator;
    let dir = tempfile::tempdir().unwrap();
    let store = store_in(dir.path());
    let engine = engine(&store);
    let spec = baton_engine::RunSpec {
        objective: baton_gateway::mock::demo::OBJECTIVE.into(),
        tasks: baton_engine::bench::tasks(30),
        step_budgets: Vec::new(),
        step_seats: Vec::new(),
        step_tags: Vec::new(),
        step_scopes: Vec::new(),
        roster: Roster::mock(5),
        settings: baton_engine::config::RunSettings::default(),
    };
    let (id, end) = run_all(&engine, &spec);
    assert_eq!(end, RunEnd::Finished);
    let turns = store.turns(&id).unwrap();
    assert!(turns.len() >= 30, "{} turns", turns.len());
    let bpe = BpeEstimator;
    for turn in &turns {
        assert_eq!(turn.package.estimator, "bpe-o200k");
        assert_eq!(turn.calls.len(), 1, "turn {}", turn.turn);
        let call = &turn.calls[0];
        let built = prompt::combined_prompt(&turn.package);
        assert_eq!(
            call.tokens_sent,
            bpe.count(&built.system) + bpe.count(&built.user),
            "turn {}",
            turn.turn
        );
        let hash = baton_gateway::pair_hash(&built.system, &built.user);
        assert_eq!(call.request_hash, hash, "turn {}", turn.turn);
        assert_eq!(call.sent_hash.as_ref(), Some(&hash), "turn {}", turn.turn);
        assert_eq!(turn.audit.request_hashes, [hash]);
    }
}
