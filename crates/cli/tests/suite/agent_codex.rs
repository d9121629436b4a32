//! The `codex` preset against the real Codex CLI (the version in the preset's
//! `proven_with`), its model played by a scripted fake of the OpenAI Responses API
//! (`tests/agents/fake_openai_responses.py`) on 127.0.0.1, configured as a provider in
//! `$CODEX_HOME/config.toml` the way a user points Codex at their own server.
//!
//! The agent's environment names that server as its HTTP(S) proxy too, so any attempt
//! to reach another host lands in the server's log, refused, and the test fails on it.
//!
//! The CLI is found in the cache `.ci/agents/install-codex.sh` fills. Without it the
//! tests say how to install it and pass, unless `BATON_REQUIRE_AGENTS=1`.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use super::agent_support::*;

const VERSION: &str = "0.171.0";
const DUMMY_KEY: &str = "sk-codex-dummy-e2e-7d2e91c4";
const MODEL: &str = "gpt-fake";
const WORKER: Worker = Worker {
    id: "cx",
    preset: "codex",
    key: DUMMY_KEY,
    scratch: &[],
};

fn codex_bin_dir() -> Option<PathBuf> {
    installed_npm_agent("Codex CLI", "codex", VERSION, ".ci/agents/install-codex.sh")
}

fn fake_model(dir: &Path, script: &Value, fail: Option<u16>) -> FakeServer {
    FakeServer::start("fake_openai_responses.py", dir, script, fail)
}

/// What a user of a local Responses API server writes in `$CODEX_HOME/config.toml`:
/// the model, and a provider for the server that reads its key from CODEX_API_KEY
/// (the variable the preset's credential is exported under). No retries, so a
/// rejected key is one request.
fn write_codex_config(codex_home: &Path, fake: &FakeServer) {
    std::fs::write(
        codex_home.join("config.toml"),
        format!(
            "model = \"{MODEL}\"\nmodel_provider = \"local\"\n\n[model_providers.local]\n\
             name = \"local\"\nbase_url = \"{}/v1\"\nenv_key = \"CODEX_API_KEY\"\n\
             wire_api = \"responses\"\nsupports_websockets = false\n\
             request_max_retries = 0\nstream_max_retries = 0\n",
            fake.url()
        ),
    )
    .unwrap();
}

/// `baton` with Codex's environment: CODEX_HOME in the test's directory, and the
/// dummy key when `key`.
fn agent(s: &Setup, bin: &Path, codex_home: &Path, key: bool) -> Command {
    let mut cmd = agent_command(
        s,
        bin,
        &["CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"],
        key.then_some(("CODEX_API_KEY", DUMMY_KEY)),
    );
    cmd.env("CODEX_HOME", codex_home);
    cmd
}

/// The fake saw only the model's API, never a proxied request for another host.
fn assert_only_model_requests(fake: &FakeServer) -> Vec<Value> {
    let requests = fake.model_requests();
    for r in &requests {
        assert!(
            r["method"] == "POST" && r["path"] == "/v1/responses",
            "not a model request: {r}"
        );
    }
    requests
}

/// The output of the last tool call in a request's `input`.
fn last_tool_output(request: &Value) -> String {
    request["body"]["input"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|i| i["type"] == "function_call_output")
        .and_then(|i| i["output"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn exec(cmd: &str) -> Value {
    json!({"function_call": {"name": "exec_command", "arguments": {"cmd": cmd}}})
}

#[test]
fn agent_codex_fixes_a_failing_test_in_its_worktree() {
    let Some(bin) = codex_bin_dir() else { return };
    let (s, codex_home) = setup_with_agent_home();
    let final_message = FINAL_MESSAGE;
    // First what the sandbox must refuse: writes outside the worktree (the user's
    // checkout, the test's directory, HOME, TMPDIR), a connection to anything, the
    // key in the commands' environment. Then the read, the edit, the final message.
    let probe = format!(
        "for f in {root}/escaped {repo}/escaped \"$HOME/escaped\" \"$TMPDIR/escaped\"; do touch \"$f\"; done; \
         python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 9))'; \
         echo \"key vars: $(env | grep -c -e CODEX_API_KEY -e {DUMMY_KEY})\"",
        root = s.root.display(),
        repo = s.repo.display(),
    );
    let edit = "python3 - <<'EOF'\nimport pathlib\np = pathlib.Path('calc.py')\n\
                p.write_text(p.read_text().replace('return a - b', 'return a + b'))\nEOF";
    let mut fix_step = exec(edit);
    fix_step["after_output"] = json!("return a - b");
    let fake = fake_model(
        &s.root,
        &json!({"steps": [exec(&probe), exec("cat calc.py"), fix_step, {"text": final_message}]}),
        None,
    );
    write_codex_config(&codex_home, &fake);
    write_roster(&s, &WORKER, &fake, "", "");
    let before = outside(&s);
    let config_before = std::fs::read(codex_home.join("config.toml")).unwrap();

    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &codex_home, true));
    assert_fixed_in_worktree(&s, &job_id, &work, &WORKER, final_message, &before);

    // Codex kept its files in CODEX_HOME (its config unchanged), none in HOME, and no
    // session to resume.
    let home_files = files(&s.home, &[]);
    assert!(home_files.is_empty(), "{:?}", home_files.keys());
    assert_eq!(
        std::fs::read(codex_home.join("config.toml")).unwrap(),
        config_before
    );
    let sessions = codex_home.join("sessions");
    assert!(
        !sessions.exists() || files(&sessions, &[]).is_empty(),
        "a session was kept: {:?}",
        files(&sessions, &[]).keys()
    );

    // The model calls: the probe, the read, the edit, the final message; the key went
    // to the model server only.
    let requests = assert_only_model_requests(&fake);
    assert_eq!(requests.len(), 4, "{requests:#?}");
    for r in &requests {
        assert_eq!(r["headers"]["authorization"], format!("Bearer {DUMMY_KEY}"));
        assert_eq!(r["body"]["model"], MODEL);
        let tools: Vec<&str> = r["body"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap_or_else(|| panic!("{t}")))
            .collect();
        assert_eq!(tools, ["exec_command", "write_stdin", "view_image"]);
    }
    // What the sandbox said to the probe: every write outside refused, no network, no
    // key in the environment.
    let probed = last_tool_output(&requests[1]);
    assert_eq!(
        probed.matches("Read-only file system").count(),
        4,
        "{probed}"
    );
    assert!(probed.contains("Operation not permitted"), "{probed}");
    assert!(probed.contains("key vars: 0"), "{probed}");
    assert!(!probed.contains(DUMMY_KEY), "{probed}");
    for escaped in [
        s.root.join("escaped"),
        s.repo.join("escaped"),
        s.home.join("escaped"),
        s.tmp.join("escaped"),
    ] {
        assert!(!escaped.exists(), "{}", escaped.display());
    }
}

/// A rejected key is Codex's own message on the failed job, after one run.
#[test]
fn agent_codex_rejected_key_fails_the_job_with_codexs_message_once() {
    let Some(bin) = codex_bin_dir() else { return };
    let (s, codex_home) = setup_with_agent_home();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), Some(401));
    write_codex_config(&codex_home, &fake);
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &codex_home, true));
    // Codex's own last error line, not the prompt it echoes to stderr before it.
    let shown = assert_failed_once(
        &s,
        &job_id,
        &work,
        "the agent failed (exit code 1): ERROR: unexpected status 401 Unauthorized: \
         Incorrect API key provided: sk-dumm***.",
        DUMMY_KEY,
    );
    assert!(!shown.contains("## How to work"), "{shown}");
    let requests = assert_only_model_requests(&fake);
    assert_eq!(requests.len(), 1, "the agent ran once, without retries");
}

/// No key: Codex names the variable its provider reads, and is not run again.
#[test]
fn agent_codex_without_a_key_fails_naming_the_variable_once() {
    let Some(bin) = codex_bin_dir() else { return };
    let (s, codex_home) = setup_with_agent_home();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), None);
    write_codex_config(&codex_home, &fake);
    write_roster(&s, &WORKER, &fake, "", "");
    let (job_id, work) = enqueue_and_work(&s, WORKER.id, || agent(&s, &bin, &codex_home, false));
    assert_failed_once(
        &s,
        &job_id,
        &work,
        "the agent failed (exit code 1): ERROR: Missing environment variable: `CODEX_API_KEY`.",
        DUMMY_KEY,
    );
    let requests = assert_only_model_requests(&fake);
    assert!(requests.is_empty(), "{requests:?}");
}
