//! The `qwen` preset against the real Qwen Code CLI (the version in the preset's
//! `proven_with`), its model played by a scripted OpenAI chat-completions server that
//! calls tools (`tests/agents/fake_openai_tools.py`) on 127.0.0.1, also the agent's
//! HTTP(S) proxy.
//!
//! The CLI is found in the cache `.ci/agents/install-qwen.sh` fills. Without it the
//! tests say how to install it and pass, unless `BATON_REQUIRE_AGENTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::agent_support::*;

const VERSION: &str = "0.24.4";
const KEY: &str = "sk-qwen-dummy-e2e-5b8e20c4d1";
const WORKER: Worker = Worker {
    id: "qw",
    preset: "qwen",
    key: KEY,
    scratch: &[],
};

fn qwen_bin_dir() -> Option<PathBuf> {
    installed_npm_agent("Qwen Code", "qwen", VERSION, ".ci/agents/install-qwen.sh")
}

fn agent(s: &Setup, bin: &Path, fake: &FakeServer, key: bool) -> Command {
    let mut cmd = agent_command(
        s,
        bin,
        &["OPENAI_API_KEY", "QWEN_HOME", "DASHSCOPE_API_KEY"],
        key.then_some(("OPENAI_API_KEY", KEY)),
    );
    cmd.env("OPENAI_BASE_URL", format!("{}/v1", fake.url()))
        .env("OPENAI_MODEL", "qwen-fake");
    cmd
}

/// Only chat completions were asked for, with the worker's key.
fn assert_only_model_requests(fake: &FakeServer) -> Vec<Value> {
    let requests = fake.model_requests();
    for r in &requests {
        assert_eq!(r["method"], "POST", "not a model request: {r}");
        assert_eq!(
            r["path"], "/v1/chat/completions",
            "not a model request: {r}"
        );
        // Node's fetch sends header names in lower case.
        assert_eq!(
            r["headers"]["authorization"],
            format!("Bearer {KEY}"),
            "{r}"
        );
    }
    requests
}

fn start(s: &Setup, script: Value, fail: Option<u16>) -> FakeServer {
    FakeServer::start("fake_openai_tools.py", &s.root, &script, fail)
}

#[test]
fn agent_qwen_fixes_a_failing_test_in_its_worktree() {
    let Some(bin) = qwen_bin_dir() else { return };
    let s = setup();
    let final_message = FINAL_MESSAGE;
    let fake = start(
        &s,
        json!({"steps": [
            {"call": {"name": "read_file", "arguments": {"file_path": "{cwd}/calc.py"}}},
            {"call": {"name": "edit", "arguments": {
                "file_path": "{cwd}/calc.py", "old_string": CALC,
                "new_string": format!("def add(a, b):\n{FIX}")}}},
            {"text": final_message}
        ]}),
        None,
    );
    write_roster(&s, &WORKER, &fake, "", "");
    let before = outside(&s);

    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, true));
    assert_fixed_in_worktree(&s, &job_id, &work, &WORKER, final_message, &before);

    // Qwen Code kept its own files under HOME/.qwen, none elsewhere in HOME, and no
    // chat to resume.
    for path in home_files_under(&s, ".qwen").keys() {
        assert!(
            !path.to_string_lossy().contains("/chats/"),
            "{}",
            path.display()
        );
    }

    let requests = assert_only_model_requests(&fake);
    assert_eq!(requests.len(), 3, "read, edit, final message: {requests:?}");
    for r in &requests {
        assert_eq!(r["body"]["model"], "qwen-fake");
        let mut tools: Vec<&str> = r["body"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["function"]["name"].as_str().unwrap())
            .collect();
        tools.sort();
        assert_eq!(
            tools,
            [
                "edit",
                "get_goal",
                "glob",
                "grep_search",
                "notebook_edit",
                "read_file",
                "record_artifact",
                "report_findings",
                "task_stop",
                "update_goal",
                "write_file",
                "zoom_image"
            ],
            "no shell, web, subagent, skill, worktree or deferred tools"
        );
    }
    assert!(
        requests[0]["body"]
            .to_string()
            .contains("Fix the bug in calc.py so that test_calc passes"),
        "the briefing on stdin reached the model: {}",
        requests[0]["body"]
    );
}

/// A rejected key is the API's own message on the failed job, after one run.
#[test]
fn agent_qwen_rejected_key_fails_the_job_with_the_apis_message_once() {
    let Some(bin) = qwen_bin_dir() else { return };
    let s = setup();
    let fake = start(&s, json!({"steps": [{"text": "unused"}]}), Some(401));
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, true));
    assert_failed_once(&s, &job_id, &work, "Incorrect API key provided", KEY);
    assert_only_model_requests(&fake);
}

/// No key: Qwen Code says what it needs, and is not run again.
#[test]
fn agent_qwen_without_a_key_fails_naming_openai_api_key_once() {
    let Some(bin) = qwen_bin_dir() else { return };
    let s = setup();
    let fake = start(&s, json!({"steps": [{"text": "unused"}]}), None);
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, false));
    assert_failed_once(
        &s,
        &job_id,
        &work,
        "the agent failed (exit code 1): Missing API key for OpenAI-compatible auth. Set settings.security.auth.apiKey, or set the 'OPENAI_API_KEY' environment variable.",
        KEY,
    );
    assert_eq!(fake.requests().len(), 0);
}
