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
use std::process::{Command, Output};
use std::time::Instant;

use baton_store::{JobStatus, SqliteStore, Store};
use serde_json::{Value, json};

use super::agent_support::{
    BUGGY_CALC, FakeServer, agent_runs, assert_not_in_db, buggy_repo, files, installed_agent,
};
use super::*;

const VERSION: &str = "0.171.0";
const DUMMY_KEY: &str = "sk-codex-dummy-e2e-7d2e91c4";
const MODEL: &str = "gpt-fake";

fn codex_bin_dir() -> Option<PathBuf> {
    installed_agent(
        &format!("Codex CLI {VERSION}"),
        &format!("codex-{VERSION}"),
        "node_modules/.bin/codex",
        ".ci/agents/install-codex.sh",
    )
}

fn fake_model(dir: &Path, script: &Value, fail: Option<u16>) -> FakeServer {
    FakeServer::start("fake_openai_responses.py", dir, script, fail)
}

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    home: PathBuf,
    codex_home: PathBuf,
    tmp: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let repo = buggy_repo(&root);
    let home = root.join("home");
    let codex_home = root.join("codex-home");
    let tmp = root.join("tmp");
    for d in [&home, &codex_home, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    Setup {
        _dir: dir,
        root,
        repo,
        home,
        codex_home,
        tmp,
    }
}

/// What a user of a local Responses API server writes in `$CODEX_HOME/config.toml`:
/// the model, and a provider for the server that reads its key from CODEX_API_KEY
/// (the variable the preset's credential is exported under). No retries, so a
/// rejected key is one request.
fn write_codex_config(s: &Setup, fake: &FakeServer) {
    std::fs::write(
        s.codex_home.join("config.toml"),
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

/// Writes `baton.toml` with one codex worker whose proxy is the fake server.
fn write_roster(s: &Setup, fake: &FakeServer) {
    let url = fake.url();
    let mut env = String::new();
    for var in ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"] {
        env.push_str(&format!("{var} = \"{url}\", "));
    }
    env.push_str("NO_PROXY = \"127.0.0.1\", no_proxy = \"127.0.0.1\"");
    std::fs::write(
        s.repo.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"cx\"\nmodel = \"command/codex\"\n\
             options = {{ preset = \"codex\", timeout_s = 300, env = {{ {env} }} }}\n"
        ),
    )
    .unwrap();
    // The roster is the user's own file, not part of the job.
    git(&s.repo, &["add", "baton.toml"]);
    git(&s.repo, &["commit", "-q", "-m", "roster"]);
}

/// `baton ARGS` in the repository with Codex on PATH, HOME, CODEX_HOME and TMPDIR in
/// the test's directory, and the dummy key when `key`.
fn baton_for_agent(s: &Setup, bin: &Path, key: bool) -> Command {
    let mut cmd = baton(&s.repo);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path)
        .env("HOME", &s.home)
        .env("CODEX_HOME", &s.codex_home)
        .env("TMPDIR", &s.tmp);
    for var in ["CODEX_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"] {
        cmd.env_remove(var);
    }
    if key {
        cmd.env("CODEX_API_KEY", DUMMY_KEY);
    }
    cmd
}

fn enqueue_and_work(s: &Setup, bin: &Path, key: bool) -> (String, Output) {
    let out = baton_for_agent(s, bin, key)
        .args([
            "enqueue",
            "--objective",
            "Make the test suite pass",
            "--task",
            "Fix the bug in calc.py so that test_calc passes",
            "--gate",
            "tests=python3 -m unittest",
            "--worker",
            "cx",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "enqueue: {}", text(&out));
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.list_jobs().unwrap()[0].id.clone();
    let started = Instant::now();
    let work = baton_for_agent(s, bin, key).arg("work").output().unwrap();
    println!("baton work took {:.1?}", started.elapsed());
    (job, work)
}

/// The fake saw only the model's API, never a proxied request for another host.
fn assert_only_model_requests(fake: &FakeServer) -> Vec<Value> {
    let requests = fake.requests();
    for r in &requests {
        assert_ne!(r["proxied"], json!(true), "the agent reached for {r}");
        assert!(
            r["method"] == "POST" && r["path"] == "/v1/responses",
            "not a model request: {r}"
        );
        assert!(r["script_error"].is_null(), "{}", r["script_error"]);
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
    let s = setup();
    let final_message =
        "Fixed add() in calc.py: it subtracted instead of adding. test_calc passes now.";
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
    write_codex_config(&s, &fake);
    write_roster(&s, &fake);
    let checkout_head = git(&s.repo, &["rev-parse", "HEAD"]);
    let baton_dir = s.repo.join(".baton");
    let log = fake.log.clone();
    let script = s.root.join("script.json");
    // `.git` changes by design (the job's branch, worktree metadata, the shared exclude
    // file); everything else outside the worktree, baton's directory, the fake's files
    // and the agent's HOME, CODEX_HOME and TMPDIR must not.
    let git_dir = s.repo.join(".git");
    let skip = [
        baton_dir.as_path(),
        s.home.as_path(),
        s.codex_home.as_path(),
        s.tmp.as_path(),
        log.as_path(),
        script.as_path(),
        git_dir.as_path(),
    ];
    let before = files(&s.root, &skip);
    let config_before = std::fs::read(s.codex_home.join("config.toml")).unwrap();

    let (job_id, work) = enqueue_and_work(&s, &bin, true);
    assert!(work.status.success(), "work: {}", text(&work));

    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(&job_id).unwrap();
    assert_eq!(job.status, JobStatus::Outbox, "{job:?}\n{}", text(&work));
    let outbox = job.outbox.clone().unwrap();
    assert_eq!(outbox["ended"], "finished", "{outbox}");
    let gates = outbox["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 1, "{outbox}");
    assert_eq!(gates[0]["name"], "tests");
    assert_eq!(gates[0]["passed"], true, "{}", gates[0]);

    // The fix is the job branch's one commit, stamped by baton.
    let worktree = PathBuf::from(outbox["worktree"].as_str().unwrap());
    let base = outbox["base"].as_str().unwrap();
    let head = outbox["head"].as_str().unwrap();
    let changed = git(&worktree, &["diff", "--name-only", base, head]);
    assert_eq!(changed.trim(), "calc.py", "only the fix is committed");
    let message = git(&worktree, &["log", "-1", "--format=%B", head]);
    for trailer in [
        "Baton-Run:",
        "Baton-Job:",
        "Baton-Turn:",
        "Baton-Worker: cx",
        "Baton-Model: command/codex",
    ] {
        assert!(message.contains(trailer), "{trailer} missing:\n{message}");
    }
    assert_eq!(
        git(&worktree, &["show", &format!("{head}:calc.py")]),
        "def add(a, b):\n    return a + b\n"
    );
    // Nothing else in the worktree: no scratch file of Codex's, committed or not.
    let status = git(
        &worktree,
        &[
            "status",
            "--porcelain",
            "--ignored",
            "--untracked-files=all",
        ],
    );
    for line in status.lines() {
        assert!(
            line.starts_with("!! .baton/"),
            "left in the worktree: {line}"
        );
    }

    // The turn's claims: the changed file is the artifact, verified; the summary is
    // Codex's final message (its --output-last-message file).
    let run = job.run_id.clone().unwrap();
    let state = store.load_state(&run).unwrap();
    let names: Vec<&str> = state.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["calc.py"], "{:?}", state.artifacts);
    assert!(
        state.artifacts[0].latest().verified,
        "{:?}",
        state.artifacts[0]
    );
    let turns = store.turns(&run).unwrap();
    assert_eq!(turns.len(), 1, "one turn");
    let result = turns[0].result.clone().unwrap();
    assert_eq!(result["summary"], final_message, "{result}");
    assert_eq!(agent_runs(&job), ["turn-0-execute"]);

    // The patch applies to the base and holds only the fix.
    let patch = PathBuf::from(outbox["patch_file"].as_str().unwrap());
    let patch_text = std::fs::read_to_string(&patch).unwrap();
    assert!(!patch_text.contains(".codex"), "{patch_text}");
    assert!(!patch_text.contains(".baton"), "{patch_text}");
    let clone = s.root.join("clone");
    let cloned = Command::new("git")
        .args(["clone", "-q"])
        .arg(&s.repo)
        .arg(&clone)
        .output()
        .unwrap();
    assert!(cloned.status.success());
    git(&clone, &["checkout", "-q", base]);
    git(&clone, &["apply", "--check", patch.to_str().unwrap()]);
    std::fs::remove_dir_all(&clone).unwrap();

    // The user's checkout is untouched, and so is everything outside the worktree.
    assert_eq!(git(&s.repo, &["rev-parse", "HEAD"]), checkout_head);
    assert_eq!(git(&s.repo, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(s.repo.join("calc.py")).unwrap(),
        BUGGY_CALC
    );
    let after = files(&s.root, &skip);
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>()
    );
    assert!(before == after, "a file outside the worktree changed");
    let worktrees = baton_dir.join("worktrees");
    for (path, _) in files(&baton_dir, &[worktrees.as_path()]) {
        let rel = path
            .strip_prefix(&baton_dir)
            .unwrap()
            .to_string_lossy()
            .to_string();
        assert!(
            rel.starts_with("baton.db")
                || rel.ends_with(".patch")
                || rel.starts_with("transcripts"),
            "baton's directory holds {rel}"
        );
    }
    // Codex kept its files in CODEX_HOME (its config unchanged), none in HOME, and no
    // session to resume.
    let home_files = files(&s.home, &[]);
    assert!(home_files.is_empty(), "{:?}", home_files.keys());
    assert_eq!(
        std::fs::read(s.codex_home.join("config.toml")).unwrap(),
        config_before
    );
    let sessions = s.codex_home.join("sessions");
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
    assert_not_in_db(&baton_dir, DUMMY_KEY);
    assert!(!text(&work).contains(DUMMY_KEY));
}

/// A rejected key is Codex's own message on the failed job, after one run.
#[test]
fn agent_codex_rejected_key_fails_the_job_with_codexs_message_once() {
    let Some(bin) = codex_bin_dir() else { return };
    let s = setup();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), Some(401));
    write_codex_config(&s, &fake);
    write_roster(&s, &fake);
    let (job_id, work) = enqueue_and_work(&s, &bin, true);
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(&job_id).unwrap();
    let shown = format!("{}\n{job:?}", text(&work));
    assert_eq!(job.status, JobStatus::Failed, "{shown}");
    // Codex's own last error line, not the prompt it echoes to stderr before it.
    assert!(
        shown.contains(
            "the agent failed (exit code 1): ERROR: unexpected status 401 Unauthorized: \
             Incorrect API key provided: sk-dumm***."
        ),
        "{shown}"
    );
    assert!(!shown.contains("## How to work"), "{shown}");
    assert_eq!(agent_runs(&job), ["turn-0-execute"]);
    let requests = assert_only_model_requests(&fake);
    assert_eq!(requests.len(), 1, "the agent ran once, without retries");
    assert!(!shown.contains(DUMMY_KEY));
}

/// No key: Codex names the variable its provider reads, and is not run again.
#[test]
fn agent_codex_without_a_key_fails_naming_the_variable_once() {
    let Some(bin) = codex_bin_dir() else { return };
    let s = setup();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), None);
    write_codex_config(&s, &fake);
    write_roster(&s, &fake);
    let (job_id, work) = enqueue_and_work(&s, &bin, false);
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(&job_id).unwrap();
    let shown = format!("{}\n{job:?}", text(&work));
    assert_eq!(job.status, JobStatus::Failed, "{shown}");
    assert!(
        shown.contains(
            "the agent failed (exit code 1): ERROR: Missing environment variable: `CODEX_API_KEY`."
        ),
        "{shown}"
    );
    assert_eq!(agent_runs(&job), ["turn-0-execute"]);
    let requests = assert_only_model_requests(&fake);
    assert!(requests.is_empty(), "{requests:?}");
}
