//! The `gemini` preset against the real Gemini CLI (the version in the preset's
//! `proven_with`), its model played by a scripted fake of the Gemini API
//! (`tests/agents/fake_gemini.py`) on 127.0.0.1, also the agent's HTTP(S) proxy.
//!
//! The CLI is found in the cache `.ci/agents/install-gemini.sh` fills. Without it the
//! tests say how to install it and pass, unless `BATON_REQUIRE_AGENTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::agent_support::*;

const VERSION: &str = "0.61.0";
const KEY: &str = "AIza-dummy-e2e-7d2c91f0b4";
const WORKER: Worker = Worker {
    id: "gm",
    preset: "gemini",
    key: KEY,
    scratch: &[],
};

fn gemini_bin_dir() -> Option<PathBuf> {
    installed_npm_agent(
        "Gemini CLI",
        "gemini",
        VERSION,
        ".ci/agents/install-gemini.sh",
    )
}

/// What a user who points Gemini CLI at their own endpoint puts in its settings (the
/// preset's comment says why each is not a flag): the API-key auth, no usage
/// statistics, no web tools.
fn write_settings(s: &Setup) {
    let dir = s.home.join(".gemini");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("settings.json"),
        json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": false},
            "tools": {"exclude": ["web_fetch", "google_web_search"]},
        })
        .to_string(),
    )
    .unwrap();
}

fn agent(s: &Setup, bin: &Path, fake: &FakeServer, key: bool) -> Command {
    let mut cmd = agent_command(
        s,
        bin,
        &[
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GEMINI_CLI_HOME",
            "GOOGLE_GENAI_USE_VERTEXAI",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_VERTEX_BASE_URL",
        ],
        key.then_some(("GEMINI_API_KEY", KEY)),
    );
    cmd.env("GOOGLE_GEMINI_BASE_URL", fake.url())
        .env("GEMINI_MODEL", "gemini-fake");
    cmd
}

/// Only the model's API was asked: generateContent (helpers) and
/// streamGenerateContent (the conversation) of the Gemini API, with the worker's key.
fn assert_only_model_requests(fake: &FakeServer) -> Vec<Value> {
    let requests = fake.model_requests();
    for r in &requests {
        let path = r["path"].as_str().unwrap();
        assert_eq!(r["method"], "POST", "not a model request: {r}");
        assert!(
            path.starts_with("/v1beta/models/")
                && (path.ends_with(":generateContent")
                    || path.ends_with(":streamGenerateContent?alt=sse")
                    || path.ends_with(":countTokens")),
            "not a model request: {r}"
        );
        assert_eq!(r["headers"]["x-goog-api-key"], KEY, "{r}");
    }
    requests
}

fn start(s: &Setup, script: Value, fail: Option<u16>) -> FakeServer {
    FakeServer::start("fake_gemini.py", &s.root, &script, fail)
}

#[test]
fn agent_gemini_fixes_a_failing_test_in_its_worktree() {
    let Some(bin) = gemini_bin_dir() else { return };
    let s = setup();
    write_settings(&s);
    let final_message = FINAL_MESSAGE;
    let fake = start(
        &s,
        json!({"steps": [
            {"call": {"name": "read_file", "args": {"file_path": "{cwd}/calc.py"}}},
            {"call": {"name": "replace", "args": {
                "file_path": "{cwd}/calc.py", "old_string": CALC, "new_string": format!("def add(a, b):\n{FIX}"),
                "instruction": "add() must return the sum of its arguments"}}},
            {"text": final_message}
        ]}),
        None,
    );
    write_roster(&s, &WORKER, &fake, "", "");
    let before = outside(&s);

    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, true));
    assert_fixed_in_worktree(&s, &job_id, &work, &WORKER, final_message, &before);

    // Gemini CLI kept its own files under HOME/.gemini (chats, its project registry),
    // none elsewhere in HOME.
    home_files_under(&s, ".gemini");

    let requests = assert_only_model_requests(&fake);
    let conversation: Vec<&Value> = requests
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .unwrap()
                .contains(":streamGenerateContent")
        })
        .collect();
    assert_eq!(conversation.len(), 3, "read, edit, final message");
    for r in &conversation {
        assert!(
            r["path"]
                .as_str()
                .unwrap()
                .starts_with("/v1beta/models/gemini-fake:"),
            "{}",
            r["path"]
        );
        let mut tools: Vec<&str> = r["body"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|t| t["functionDeclarations"].as_array().unwrap())
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        tools.sort();
        assert_eq!(
            tools,
            [
                "enter_plan_mode",
                "glob",
                "grep_search",
                "invoke_agent",
                "list_directory",
                "read_file",
                "replace",
                "update_topic",
                "write_file"
            ],
            "no shell, no web tools"
        );
    }
    // The briefing reached the model on stdin, before the `-p` line.
    assert!(
        conversation[0]["body"]
            .to_string()
            .contains("Fix the bug in calc.py so that test_calc passes"),
        "{}",
        conversation[0]["body"]
    );
}

/// A rejected key is the API's own message on the failed job, after one run.
#[test]
fn agent_gemini_rejected_key_fails_the_job_with_the_apis_message_once() {
    let Some(bin) = gemini_bin_dir() else { return };
    let s = setup();
    write_settings(&s);
    let fake = start(&s, json!({"steps": [{"text": "unused"}]}), Some(400));
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, true));
    assert_failed_once(
        &s,
        &job_id,
        &work,
        "API key not valid. Please pass a valid API key.",
        KEY,
    );
    assert_only_model_requests(&fake);
}

/// No key: Gemini CLI says which variable it needs, and is not run again.
#[test]
fn agent_gemini_without_a_key_fails_naming_gemini_api_key_once() {
    let Some(bin) = gemini_bin_dir() else { return };
    let s = setup();
    write_settings(&s);
    let fake = start(&s, json!({"steps": [{"text": "unused"}]}), None);
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, false));
    assert_failed_once(
        &s,
        &job_id,
        &work,
        "you must specify the GEMINI_API_KEY environment variable",
        KEY,
    );
    assert_eq!(fake.requests().len(), 0);
}
