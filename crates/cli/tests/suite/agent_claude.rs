//! The `claude` preset against the real Claude Code CLI (the version in the preset's
//! `proven_with`), its model played by a scripted fake of the Anthropic Messages API
//! (`tests/agents/fake_anthropic.py`) on 127.0.0.1.
//!
//! The CLI is found in the cache `.ci/agents/install-claude.sh` fills. Without it the
//! tests say how to install it and pass, unless `BATON_REQUIRE_AGENTS=1`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use baton_store::{JobStatus, SqliteStore, Store};
use serde_json::{Value, json};

use super::agent_support::{
    FakeServer, agent_runs, assert_not_in_db, buggy_repo, files, installed_agent,
};
use super::*;

const VERSION: &str = "2.1.197";
const DUMMY_KEY: &str = "sk-ant-dummy-e2e-4f1c9b7a";

/// The directory holding the `claude` binary, or `None` (after saying how to get it).
fn claude_bin_dir() -> Option<PathBuf> {
    installed_agent(
        &format!("Claude Code {VERSION}"),
        &format!("claude-{VERSION}"),
        "node_modules/.bin/claude",
        ".ci/agents/install-claude.sh",
    )
}

fn fake_model(dir: &Path, script: &Value, fail: Option<u16>) -> FakeServer {
    FakeServer::start("fake_anthropic.py", dir, script, fail)
}

struct Setup {
    _dir: tempfile::TempDir,
    root: PathBuf,
    repo: PathBuf,
    home: PathBuf,
    tmp: PathBuf,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let repo = buggy_repo(&root);
    let home = root.join("home");
    let tmp = root.join("tmp");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();
    Setup {
        _dir: dir,
        root,
        repo,
        home,
        tmp,
    }
}

/// Writes `baton.toml` with one claude worker whose proxy is the fake server, so an
/// attempt to reach any other host is logged there and refused.
fn write_roster(s: &Setup, fake: &FakeServer, extra_env: &str) {
    write_roster_with(s, fake, extra_env, "");
}

/// `write_roster` with more worker options (`, sandbox = "bwrap"`).
fn write_roster_with(s: &Setup, fake: &FakeServer, extra_env: &str, extra_options: &str) {
    std::fs::write(
        s.repo.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"cc\"\nmodel = \"command/claude\"\n\
             options = {{ preset = \"claude\", timeout_s = 300{extra_options}, env = {{ HTTPS_PROXY = \"{url}\", \
             HTTP_PROXY = \"{url}\", NO_PROXY = \"127.0.0.1\"{extra_env} }} }}\n",
            url = fake.url()
        ),
    )
    .unwrap();
    // The roster is the user's own file, not part of the job.
    git(&s.repo, &["add", "baton.toml"]);
    git(&s.repo, &["commit", "-q", "-m", "roster"]);
}

/// `baton ARGS` in the repository with the agent's environment: Claude Code on PATH,
/// HOME, CLAUDE_CONFIG_DIR and TMPDIR in the test's directory, the fake server's URL,
/// and the dummy key when `key`.
fn baton_for_agent(s: &Setup, bin: &Path, fake: &FakeServer, key: bool) -> Command {
    let mut cmd = baton(&s.repo);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path)
        .env("HOME", &s.home)
        .env("CLAUDE_CONFIG_DIR", s.home.join(".claude"))
        .env("TMPDIR", &s.tmp)
        .env("ANTHROPIC_BASE_URL", fake.url());
    for var in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "CLAUDE_CODE_MAX_RETRIES",
        "API_TIMEOUT_MS",
    ] {
        cmd.env_remove(var);
    }
    if key {
        cmd.env("ANTHROPIC_API_KEY", DUMMY_KEY);
    }
    cmd
}

fn enqueue_and_work(s: &Setup, bin: &Path, fake: &FakeServer, key: bool) -> (String, Output) {
    let out = baton_for_agent(s, bin, fake, key)
        .args([
            "enqueue",
            "--objective",
            "Make the test suite pass",
            "--task",
            "Fix the bug in calc.py so that test_calc passes",
            "--gate",
            "tests=python3 -m unittest",
            "--worker",
            "cc",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "enqueue: {}", text(&out));
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.list_jobs().unwrap()[0].id.clone();
    let started = Instant::now();
    let work = baton_for_agent(s, bin, fake, key)
        .arg("work")
        .output()
        .unwrap();
    println!("baton work took {:.1?}", started.elapsed());
    (job, work)
}

/// The fake saw only the model's API: messages (and token counts), never a proxied
/// request for another host.
fn assert_only_model_requests(fake: &FakeServer) -> Vec<Value> {
    let requests = fake.requests();
    for r in &requests {
        assert_ne!(r["proxied"], json!(true), "the agent reached for {r}");
        let path = r["path"].as_str().unwrap();
        let model_call = r["method"] == "POST"
            && (path.starts_with("/v1/messages?")
                || path == "/v1/messages"
                || path.starts_with("/v1/messages/count_tokens"));
        let probe = r["method"] == "HEAD" && path == "/";
        assert!(model_call || probe, "not a model request: {r}");
        assert!(r["script_error"].is_null(), "{}", r["script_error"]);
    }
    requests
}

#[test]
fn agent_claude_fixes_a_failing_test_in_its_worktree() {
    let Some(bin) = claude_bin_dir() else { return };
    let s = setup();
    let fix = "    return a + b\n";
    let final_message =
        "Fixed add() in calc.py: it subtracted instead of adding. test_calc passes now.";
    let fake = fake_model(
        &s.root,
        &json!({"steps": [
            {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/calc.py"}}},
            {"tool_use": {"name": "Edit", "input": {
                "file_path": "{cwd}/calc.py", "old_string": "    return a - b\n", "new_string": fix}}},
            {"text": final_message}
        ]}),
        None,
    );
    write_roster(&s, &fake, "");
    let checkout_head = git(&s.repo, &["rev-parse", "HEAD"]);
    let baton_dir = s.repo.join(".baton");
    let log = fake.log.clone();
    let script = s.root.join("script.json");
    let skip = [
        baton_dir.as_path(),
        s.home.as_path(),
        s.tmp.as_path(),
        log.as_path(),
        script.as_path(),
    ];
    // `.git` changes by design (the job's branch, worktree metadata, the shared exclude
    // file); everything else outside the worktree must not.
    let git_dir = s.repo.join(".git");
    let mut skip_all = skip.to_vec();
    skip_all.push(git_dir.as_path());
    let before = files(&s.root, &skip_all);

    let (job_id, work) = enqueue_and_work(&s, &bin, &fake, true);
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
        "Baton-Worker: cc",
        "Baton-Model: command/claude",
    ] {
        assert!(message.contains(trailer), "{trailer} missing:\n{message}");
    }
    assert_eq!(
        git(&worktree, &["show", &format!("{head}:calc.py")]),
        format!("def add(a, b):\n{fix}")
    );
    // Nothing else in the worktree: no scratch file of Claude Code's, committed or not.
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
    // Claude Code's final message.
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

    // The patch applies to the base and holds only the fix.
    let patch = PathBuf::from(outbox["patch_file"].as_str().unwrap());
    let patch_text = std::fs::read_to_string(&patch).unwrap();
    assert!(!patch_text.contains(".claude"), "{patch_text}");
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

    // The user's checkout is untouched, and so is everything outside the worktree,
    // baton's directory and the agent's HOME and TMPDIR.
    assert_eq!(git(&s.repo, &["rev-parse", "HEAD"]), checkout_head);
    assert_eq!(git(&s.repo, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(s.repo.join("calc.py")).unwrap(),
        "def add(a, b):\n    return a - b\n"
    );
    let after = files(&s.root, &skip_all);
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
    // Claude Code kept its own files in CLAUDE_CONFIG_DIR, none in HOME beside it.
    let home_files = files(&s.home, &[]);
    for path in home_files.keys() {
        assert!(
            path.starts_with(s.home.join(".claude")),
            "{}",
            path.display()
        );
    }
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
    assert_not_in_db(&baton_dir, DUMMY_KEY);
    assert!(!text(&work).contains(DUMMY_KEY));
}

/// A rejected key is Claude Code's own message on the failed job, after one run.
#[test]
fn agent_claude_rejected_key_fails_the_job_with_claude_codes_message_once() {
    let Some(bin) = claude_bin_dir() else { return };
    let s = setup();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), Some(401));
    // Claude Code retries a 401 ten times with backoff (three minutes) by default.
    write_roster(&s, &fake, ", CLAUDE_CODE_MAX_RETRIES = \"0\"");
    let (job_id, work) = enqueue_and_work(&s, &bin, &fake, true);
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(&job_id).unwrap();
    let shown = format!("{}\n{job:?}", text(&work));
    assert_eq!(job.status, JobStatus::Failed, "{shown}");
    assert!(
        shown.contains("the agent failed (exit code 1): Invalid API key · Fix external API key"),
        "{shown}"
    );
    assert_eq!(agent_runs(&job), ["turn-0-execute"]);
    let requests = assert_only_model_requests(&fake);
    let posts = requests.iter().filter(|r| r["method"] == "POST").count();
    assert_eq!(posts, 1, "the agent ran once, without retries: {posts}");
    assert!(!shown.contains(DUMMY_KEY));
}

/// No key and no login: Claude Code's "Not logged in" reaches the user, and the agent
/// is not run again.
#[test]
fn agent_claude_without_a_key_fails_with_not_logged_in_once() {
    let Some(bin) = claude_bin_dir() else { return };
    let s = setup();
    let fake = fake_model(&s.root, &json!({"steps": [{"text": "unused"}]}), None);
    write_roster(&s, &fake, "");
    let (job_id, work) = enqueue_and_work(&s, &bin, &fake, false);
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(&job_id).unwrap();
    let shown = format!("{}\n{job:?}", text(&work));
    assert_eq!(job.status, JobStatus::Failed, "{shown}");
    assert!(
        shown.contains("the agent failed (exit code 1): Not logged in · Please run /login"),
        "{shown}"
    );
    assert_eq!(agent_runs(&job), ["turn-0-execute"]);
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
    let fake = fake_model(
        &s.root,
        &json!({"steps": [
            {"tool_use": {"name": "Read", "input": {"file_path": "{cwd}/calc.py"}}},
            {"tool_use": {"name": "Edit", "input": {
                "file_path": "{cwd}/calc.py", "old_string": "    return a - b\n", "new_string": "    return a + b\n"}}},
            {"text": "Fixed add()."}
        ]}),
        None,
    );
    write_roster_with(&s, &fake, "", ", sandbox = \"bwrap\"");
    let (job_id, work) = enqueue_and_work(&s, &bin, &fake, true);
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
