//! The `claude` preset against the real Claude Code CLI (the version in the preset's
//! `proven_with`), its model played by a scripted fake of the Anthropic Messages API
//! (`tests/agents/fake_anthropic.py`) on 127.0.0.1.
//!
//! The CLI is found in the cache `.ci/agents/install-claude.sh` fills. Without it the
//! tests say how to install it and pass, unless `BATON_REQUIRE_AGENTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use baton_store::{SqliteStore, Store};
use serde_json::{Value, json};

use super::agent_support::*;
use super::*;

const VERSION: &str = "2.1.197";
const DUMMY_KEY: &str = "sk-ant-dummy-e2e-4f1c9b7a";
const WORKER: Worker = Worker {
    id: "cc",
    preset: "claude",
    key: DUMMY_KEY,
    scratch: &[],
};

/// The directory holding the `claude` binary, or `None` (after saying how to get it).
fn claude_bin_dir() -> Option<PathBuf> {
    installed_npm_agent(
        "Claude Code",
        "claude",
        VERSION,
        ".ci/agents/install-claude.sh",
    )
}

fn fake_model(dir: &Path, script: &Value, fail: Option<u16>) -> FakeServer {
    FakeServer::start("fake_anthropic.py", dir, script, fail)
}

/// `baton` with Claude Code's environment: CLAUDE_CONFIG_DIR in the test's HOME, the
/// fake server's URL, and the dummy key when `key`.
fn agent(s: &Setup, bin: &Path, fake: &FakeServer, key: bool) -> Command {
    let mut cmd = agent_command(
        s,
        bin,
        &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_MODEL",
            "ANTHROPIC_SMALL_FAST_MODEL",
            "ANTHROPIC_DEFAULT_OPUS_MODEL",
            "ANTHROPIC_DEFAULT_SONNET_MODEL",
            "ANTHROPIC_DEFAULT_HAIKU_MODEL",
            "CLAUDE_CODE_MAX_RETRIES",
            "API_TIMEOUT_MS",
        ],
        key.then_some(("ANTHROPIC_API_KEY", DUMMY_KEY)),
    );
    cmd.env("CLAUDE_CONFIG_DIR", s.home.join(".claude"))
        .env("ANTHROPIC_BASE_URL", fake.url());
    cmd
}

/// The fake saw only the model's API: messages (and token counts), never a proxied
/// request for another host.
fn assert_only_model_requests(fake: &FakeServer) -> Vec<Value> {
    let requests = fake.model_requests();
    for r in &requests {
        let path = r["path"].as_str().unwrap();
        let model_call = r["method"] == "POST"
            && (path.starts_with("/v1/messages?")
                || path == "/v1/messages"
                || path.starts_with("/v1/messages/count_tokens"));
        let probe = r["method"] == "HEAD" && path == "/";
        assert!(model_call || probe, "not a model request: {r}");
    }
    requests
}

/// The model's part of a fix: read calc.py, edit it, end with `final_message`.
fn fix_script(final_message: &str) -> Value {
    json!({"steps": [
        {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/calc.py"}}},
        {"tool_use": {"name": "Edit", "input": {
            "file_path": "{cwd}/calc.py", "old_string": "    return a - b\n", "new_string": FIX}}},
        {"text": final_message}
    ]})
}

#[test]
fn agent_claude_fixes_a_failing_test_in_its_worktree() {
    let Some(bin) = claude_bin_dir() else { return };
    let s = setup();
    let final_message = FINAL_MESSAGE;
    let fake = fake_model(&s.root, &fix_script(final_message), None);
    write_roster(&s, &WORKER, &fake, "", "");
    let before = outside(&s);

    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, true));
    assert_fixed_in_worktree(&s, &job_id, &work, &WORKER, final_message, &before);

    // Claude Code kept its own files in CLAUDE_CONFIG_DIR, none in HOME beside it.
    let home_files = home_files_under(&s, ".claude");
    assert!(
        !home_files
            .keys()
            .any(|p| p.to_string_lossy().contains("/projects/")),
        "a session transcript was kept: {:?}",
        home_files.keys()
    );

    // The key went to the model server, and nowhere baton records.
    let requests = assert_only_model_requests(&fake);
    let model_calls: Vec<&Value> = requests.iter().filter(|r| r["method"] == "POST").collect();
    assert_eq!(model_calls.len(), 3, "read, edit, final message");
    for r in &model_calls {
        assert_eq!(r["headers"]["x-api-key"], DUMMY_KEY);
        let tools: Vec<&str> = r["body"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            tools,
            ["Edit", "Glob", "Grep", "NotebookEdit", "Read", "Write"]
        );
    }
}

/// A rejected key is Claude Code's own message on the failed job, after one run.
#[test]
fn agent_claude_rejected_key_fails_the_job_with_claude_codes_message_once() {
    let Some(bin) = claude_bin_dir() else { return };
    let s = setup();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), Some(401));
    // Claude Code retries a 401 ten times with backoff (three minutes) by default.
    write_roster(&s, &WORKER, &fake, ", CLAUDE_CODE_MAX_RETRIES = \"0\"", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, true));
    assert_failed_once(
        &s,
        &job_id,
        &work,
        "the agent failed (exit code 1): Invalid API key · Fix external API key",
        DUMMY_KEY,
    );
    let requests = assert_only_model_requests(&fake);
    let posts = requests.iter().filter(|r| r["method"] == "POST").count();
    assert_eq!(posts, 1, "the agent ran once, without retries: {posts}");
}

/// No key and no login: Claude Code's "Not logged in" reaches the user, and the agent
/// is not run again.
#[test]
fn agent_claude_without_a_key_fails_with_not_logged_in_once() {
    let Some(bin) = claude_bin_dir() else { return };
    let s = setup();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), None);
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, false));
    assert_failed_once(
        &s,
        &job_id,
        &work,
        "the agent failed (exit code 1): Not logged in · Please run /login",
        DUMMY_KEY,
    );
    let requests = assert_only_model_requests(&fake);
    assert_eq!(requests.iter().filter(|r| r["method"] == "POST").count(), 0);
}

/// The real Claude Code inside bubblewrap: it still fixes the bug, and it wrote
/// nothing outside its worktree — not even in the HOME and CLAUDE_CONFIG_DIR it was
/// given, which are read-only there (it gets a home of its own in the worktree).
#[test]
fn agent_claude_works_inside_the_bubblewrap_sandbox() {
    let Some(bin) = claude_bin_dir() else { return };
    let bwrap = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|st| st.success());
    if !bwrap {
        assert!(
            std::env::var_os("BATON_REQUIRE_SANDBOX").is_none(),
            "bubblewrap is required"
        );
        println!("skipped: bubblewrap is not installed (apt-get install bubblewrap)");
        return;
    }
    let s = setup();
    let fake = fake_model(&s.root, &fix_script("Fixed add()."), None);
    write_roster(&s, &WORKER, &fake, "", ", sandbox = \"bwrap\"");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &fake, true));
    assert!(work.status.success(), "work: {}", text(&work));
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(&job_id).unwrap();
    let outbox = job.outbox.clone().unwrap();
    assert_eq!(outbox["ended"], "finished", "{outbox}\n{}", text(&work));
    assert_eq!(outbox["gates"][0]["passed"], true, "{outbox}");
    let worktree = PathBuf::from(outbox["worktree"].as_str().unwrap());
    assert_eq!(
        git(&worktree, &["show", "HEAD:calc.py"]),
        "def add(a, b):\n    return a + b\n"
    );
    assert!(
        files(&s.home, &[]).is_empty(),
        "written in the user's HOME: {:?}",
        files(&s.home, &[]).keys()
    );
    assert!(worktree.join(".baton/home").is_dir());
    assert_only_model_requests(&fake);
}
