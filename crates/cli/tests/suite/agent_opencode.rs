//! The `opencode` preset against the real opencode CLI (the version in the preset's
//! `proven_with`), its model played by a scripted OpenAI chat-completions server that
//! calls tools (`tests/agents/fake_openai_tools.py`) on 127.0.0.1, configured as an
//! OpenAI-compatible provider in the file OPENCODE_CONFIG names, the way a user points
//! opencode at their own server; the server is also the agent's HTTP(S) proxy.
//!
//! The CLI is found in the cache `.ci/agents/install-opencode.sh` fills. Without it the
//! tests say how to install it and pass, unless `BATON_REQUIRE_AGENTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::agent_support::*;

const VERSION: &str = "1.18.33";
const KEY: &str = "sk-opencode-dummy-e2e-3a9f61d2c7";
const MODEL: &str = "opencode-fake";
const WORKER: Worker = Worker {
    id: "oc",
    preset: "opencode",
    key: KEY,
    scratch: &[],
};

fn opencode_bin_dir() -> Option<PathBuf> {
    installed_npm_agent(
        "opencode",
        "opencode",
        VERSION,
        ".ci/agents/install-opencode.sh",
    )
}

/// What a user of a local OpenAI-compatible server writes in the file OPENCODE_CONFIG
/// names (here in the test's `agent_home`): a provider reading its key from
/// OPENAI_API_KEY, and the model. With its `$schema`: opencode writes it into a
/// configuration file that lacks one. Returns the file.
fn write_config(dir: &Path, fake: &FakeServer) -> PathBuf {
    let config = dir.join("opencode.json");
    std::fs::write(
        &config,
        json!({
            "$schema": "https://opencode.ai/config.json",
            "provider": {"local": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "local",
                "env": ["OPENAI_API_KEY"],
                "options": {"baseURL": format!("{}/v1", fake.url())},
                "models": {MODEL: {"name": MODEL}},
            }},
            "model": format!("local/{MODEL}"),
        })
        .to_string(),
    )
    .unwrap();
    config
}

fn agent(s: &Setup, bin: &Path, config: &Path, key: bool) -> Command {
    let mut cmd = agent_command(
        s,
        bin,
        &[
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "OPENCODE_CONFIG",
            "OPENCODE_CONFIG_CONTENT",
            "OPENCODE_CONFIG_DIR",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_CACHE_HOME",
            "XDG_STATE_HOME",
        ],
        key.then_some(("OPENAI_API_KEY", KEY)),
    );
    cmd.env("OPENCODE_CONFIG", config);
    cmd
}

/// Only chat completions were asked for, with the worker's key (or none at all).
fn assert_only_model_requests(fake: &FakeServer, key: bool) -> Vec<Value> {
    let requests = fake.model_requests();
    for r in &requests {
        assert_eq!(r["method"], "POST", "not a model request: {r}");
        assert_eq!(
            r["path"], "/v1/chat/completions",
            "not a model request: {r}"
        );
        // Bun's fetch keeps the header's case.
        assert!(r["headers"]["authorization"].is_null(), "{r}");
        let auth = &r["headers"]["Authorization"];
        if key {
            assert_eq!(*auth, format!("Bearer {KEY}"), "{r}");
        } else {
            assert!(auth.is_null(), "{r}");
        }
    }
    requests
}

fn start(s: &Setup, script: Value, fail: Option<u16>) -> FakeServer {
    FakeServer::start("fake_openai_tools.py", &s.root, &script, fail)
}

#[test]
fn agent_opencode_fixes_a_failing_test_in_its_worktree() {
    let Some(bin) = opencode_bin_dir() else {
        return;
    };
    let (s, config_dir) = setup_with_agent_home();
    let final_message = FINAL_MESSAGE;
    let fake = start(
        &s,
        json!({"steps": [
            {"call": {"name": "read", "arguments": {"filePath": "{cwd}/calc.py"}}},
            {"call": {"name": "edit", "arguments": {
                "filePath": "{cwd}/calc.py", "oldString": CALC,
                "newString": format!("def add(a, b):\n{FIX}")}}},
            {"text": final_message}
        ]}),
        None,
    );
    let config = write_config(&config_dir, &fake);
    let config_before = std::fs::read(&config).unwrap();
    write_roster(&s, &WORKER, &fake, "", "");
    let before = outside(&s);

    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &config, true));
    assert_fixed_in_worktree(&s, &job_id, &work, &WORKER, final_message, &before);

    // opencode kept its own files in HOME (its log, undo snapshots, its global config
    // directory), and no session database; its configuration is unchanged.
    for path in files(&s.home, &[]).keys() {
        assert!(
            path.starts_with(s.home.join(".local/share/opencode"))
                || path.starts_with(s.home.join(".config/opencode"))
                || path.starts_with(s.home.join(".cache/opencode")),
            "{}",
            path.display()
        );
        assert!(
            !path.to_string_lossy().contains("opencode.db"),
            "a session was kept: {}",
            path.display()
        );
    }
    assert_eq!(std::fs::read(&config).unwrap(), config_before);

    let requests = assert_only_model_requests(&fake, true);
    // A title for the session (no tools), then read, edit, final message.
    let conversation: Vec<&Value> = requests
        .iter()
        .filter(|r| r["body"]["tools"].is_array())
        .collect();
    assert_eq!(
        conversation.len(),
        3,
        "read, edit, final message: {requests:?}"
    );
    assert!(requests.len() <= 4, "{requests:?}");
    for r in &conversation {
        assert_eq!(r["body"]["model"], MODEL);
        let mut tools: Vec<&str> = r["body"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        tools.sort();
        assert_eq!(
            tools,
            ["edit", "glob", "grep", "read", "write"],
            "no shell, web, subagent, skill or todo tools"
        );
    }
    assert!(
        conversation[0]["body"].to_string().contains(TASK),
        "the briefing on stdin reached the model: {}",
        conversation[0]["body"]
    );
}

/// With `key` or without: the fake answers 401 to every model request, and its message
/// is the failed job's, after one run of the agent that asked once, without retries.
fn fails_once_with_the_apis_401(key: bool) {
    let Some(bin) = opencode_bin_dir() else {
        return;
    };
    let (s, config_dir) = setup_with_agent_home();
    let fake = start(&s, json!({"steps": [{"text": "unused"}]}), Some(401));
    let config = write_config(&config_dir, &fake);
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &config, key));
    assert_failed_once(
        &s,
        &job_id,
        &work,
        "the agent failed (exit code 1): Error: Incorrect API key provided",
        KEY,
    );
    let requests = assert_only_model_requests(&fake, key);
    let conversation = requests
        .iter()
        .filter(|r| r["body"]["tools"].is_array())
        .count();
    assert_eq!(conversation, 1, "{requests:?}");
}

/// A rejected key is the API's own message on the failed job, after one run.
#[test]
fn agent_opencode_rejected_key_fails_the_job_with_the_apis_message_once() {
    fails_once_with_the_apis_401(true);
}

/// No key: opencode has no check of its own for a provider's key and sends the request
/// without one; the endpoint's 401 is the message on the failed job, after one run.
#[test]
fn agent_opencode_without_a_key_sends_none_and_fails_with_the_apis_message_once() {
    fails_once_with_the_apis_401(false);
}
