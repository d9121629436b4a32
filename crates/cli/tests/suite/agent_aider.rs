//! End to end with the real aider CLI (the version the `aider` preset is proven with,
//! installed by `.ci/agents/install-aider.sh`): `baton enqueue` + `baton work` fix a
//! failing test in a small repository, with aider talking to a scripted
//! OpenAI-compatible server on 127.0.0.1 (`tests/agents/fake_openai_chat.py`).
//!
//! The agent's environment names that server as its HTTP(S) proxy too, so any attempt
//! to reach the internet (update checks, price lists, URL scraping, a Playwright
//! download) lands in the server's log, and the test fails on it.
//!
//! Without the CLI the test says how to install it and passes, unless
//! `BATON_REQUIRE_AGENTS=1`.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use baton_engine::jobs::decode_outbox;
use baton_store::{JobStatus, SqliteStore, Store};
use serde_json::Value;

use super::*;

const AIDER_VERSION: &str = "0.86.2";
const KEY: &str = "sk-baton-aider-e2e-0123456789";
/// The model as aider names it (`openai/` picks litellm's OpenAI-compatible client).
const MODEL: &str = "openai/baton-fake";

/// The aider installed by `.ci/agents/install-aider.sh`, if it is.
fn aider_dir() -> Option<PathBuf> {
    let cache = match std::env::var_os("BATON_AGENTS_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".cache/baton/agents"),
    };
    let dir = cache.join(format!("aider-{AIDER_VERSION}"));
    dir.join("bin/aider").is_file().then_some(dir)
}

/// The fake model server; killed when dropped.
struct FakeModel {
    child: Child,
    port: u16,
}

impl FakeModel {
    fn start(script: &Path, log: &Path) -> FakeModel {
        let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/agents/fake_openai_chat.py");
        let mut child = Command::new("python3")
            .arg(server)
            .arg("--script")
            .arg(script)
            .arg("--log")
            .arg(log)
            .args(["--max-seconds", "600"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("python3 runs the fake model server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("the fake server said {line:?}"));
        FakeModel { child, port }
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every file under `root` (relative path → content), skipping `skip`.
fn files(root: &Path, skip: &[&Path]) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if skip.iter().any(|s| path.starts_with(s)) {
                continue;
            }
            if path.is_dir() {
                stack.push(path);
            } else {
                let content = std::fs::read(&path).unwrap_or_default();
                out.insert(path.strip_prefix(root).unwrap().to_path_buf(), content);
            }
        }
    }
    out
}

const CALC: &str = "def add(a, b):\n    return a - b\n";
const TEST_CALC: &str = "import unittest\n\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

/// The edit aider must apply, in its SEARCH/REPLACE format, and the worker-contract
/// sections baton reads the claim from. The summary is longer than 80 columns: aider
/// wraps its output there unless told otherwise.
fn edit_reply() -> String {
    "calc.py\n```python\n<<<<<<< SEARCH\n    return a - b\n=======\n    return a + b\n>>>>>>> REPLACE\n```\n\n\
     SUMMARY: add() in calc.py subtracted its arguments; it now returns their sum, so the \
     unittest suite passes.\nCHANGES: calc.py: add() returns a + b\n"
        .to_string()
}

#[test]
fn aider_fixes_a_failing_test_through_the_preset_and_stays_in_its_worktree() {
    let started = Instant::now();
    let Some(aider) = aider_dir() else {
        let msg = format!(
            "aider {AIDER_VERSION} is not installed: run .ci/agents/install-aider.sh (cache: $BATON_AGENTS_CACHE or ~/.cache/baton/agents)"
        );
        if std::env::var("BATON_REQUIRE_AGENTS").as_deref() == Ok("1") {
            panic!("{msg}; BATON_REQUIRE_AGENTS=1 requires it");
        }
        eprintln!("skipping agent_aider: {msg}");
        return;
    };

    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().canonicalize().unwrap();
    let repo = t.join("repo");
    let home = t.join("home");
    let tmpdir = t.join("tmp");
    let sentinel = t.join("sentinel");
    for d in [&repo, &home, &tmpdir, &sentinel] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(sentinel.join("keep.txt"), "untouched\n").unwrap();
    // What a user of a local model tells aider about it: its edit format, and its
    // context window (without it aider downloads litellm's price list to look it up).
    std::fs::write(
        home.join(".aider.model.settings.yml"),
        format!("- name: {MODEL}\n  edit_format: diff\n"),
    )
    .unwrap();
    std::fs::write(
        home.join(".aider.model.metadata.json"),
        format!(
            r#"{{"{MODEL}": {{"max_input_tokens": 32000, "max_output_tokens": 4000, "input_cost_per_token": 0, "output_cost_per_token": 0, "litellm_provider": "openai", "mode": "chat"}}}}"#
        ),
    )
    .unwrap();

    // The model: the edit once aider has put calc.py's content in the chat; before
    // that (and after), it names the file it needs, which aider adds by itself.
    let script = t.join("script.json");
    let log = t.join("requests.jsonl");
    std::fs::write(
        &script,
        serde_json::json!({"replies": [
            {"requires": "    return a - b", "once": true, "content": edit_reply()},
            {"content": "To fix this I need to edit calc.py."},
        ]})
        .to_string(),
    )
    .unwrap();
    let server = FakeModel::start(&script, &log);
    let base = format!("http://127.0.0.1:{}", server.port);

    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "dev@example.com"]);
    git(&repo, &["config", "user.name", "dev"]);
    std::fs::write(repo.join("calc.py"), CALC).unwrap();
    std::fs::write(repo.join("test_calc.py"), TEST_CALC).unwrap();
    let path = format!(
        "{}:{}",
        aider.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = serde_json::json!({
        "PATH": path,
        "AIDER_MODEL": MODEL,
        "OPENAI_API_BASE": format!("{base}/v1"),
        "HTTP_PROXY": base,
        "HTTPS_PROXY": base,
        "http_proxy": base,
        "https_proxy": base,
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
    });
    // A JSON string is a TOML basic string for these values.
    let env_table: String = env
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| format!("{k} = {v}\n"))
        .collect();
    std::fs::write(
        repo.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"aider\"\nmodel = \"command/aider\"\n\
             api_key_env = \"OPENAI_API_KEY\"\n[workers.options]\npreset = \"aider\"\ntimeout_s = 300\n\
             [workers.options.env]\n{env_table}"
        ),
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "calc with a bug"]);
    let head_before = git(&repo, &["rev-parse", "HEAD"]);
    let outside = |p: &Path| -> Vec<PathBuf> {
        vec![repo.join(".baton"), repo.join(".git"), p.to_path_buf()]
    };
    let skip = outside(&log);
    let skip: Vec<&Path> = skip.iter().map(PathBuf::as_path).collect();
    let before = files(&t, &skip);

    let run = |args: &[&str]| -> String {
        let out = baton(&repo)
            .args(args)
            .env("HOME", &home)
            .env("TMPDIR", &tmpdir)
            .env("OPENAI_API_KEY", KEY)
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("AIDER_MODEL")
            .env_remove("OPENAI_API_BASE")
            .env_remove("OPENAI_BASE_URL")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "baton {args:?} failed:\n{}",
            text(&out)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let task = "Fix add() in calc.py so that the tests pass";
    run(&[
        "enqueue",
        "--objective",
        "Make the calculator's tests pass (see https://example.com/calc-spec for the spec)",
        "--task",
        task,
        "--gate",
        "tests=python3 -m unittest",
        "--worker",
        "aider",
    ]);
    let worked = run(&["work"]);

    // The job finished with its gate passing.
    let store = SqliteStore::open(&db(&repo)).unwrap();
    let job = store.list_jobs().unwrap().remove(0);
    assert_eq!(job.status, JobStatus::Outbox, "{worked}\n{:?}", job.error);
    let outbox = decode_outbox(&job).unwrap().unwrap();
    assert_eq!(outbox.ended, "finished", "{worked}");
    assert!(
        !outbox.gates.is_empty() && outbox.gates.iter().all(|g| g.passed && g.name == "tests"),
        "{:?}",
        outbox.gates
    );

    // One commit on the job's branch (aider made none of its own): the fix, with
    // baton's trailers, and nothing but calc.py.
    let wt = &outbox.worktree;
    let base_commit = head_before.trim();
    let commits = git(wt, &["rev-list", &format!("{base_commit}..HEAD")]);
    assert_eq!(commits.lines().count(), 1, "{commits}");
    let changed = git(wt, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(changed.trim(), "calc.py");
    assert_eq!(
        git(wt, &["show", "HEAD:calc.py"]),
        "def add(a, b):\n    return a + b\n"
    );
    let trailers = git(wt, &["log", "-1", "--format=%(trailers)", "HEAD"]);
    let run_id = job.run_id.clone().unwrap();
    for t in [
        format!("Baton-Run: {}", run_id.0),
        "Baton-Turn: 0".to_string(),
        "Baton-Worker: aider".to_string(),
        "Baton-Model: command/aider".to_string(),
    ] {
        assert!(trailers.contains(&t), "{t} not in {trailers}");
    }
    // aider did write its scratch files in the worktree; they stayed out of the commit.
    assert!(wt.join(".aider.chat.history.md").exists());
    assert!(!wt.join(".gitignore").exists(), "aider edited .gitignore");

    // The turn's artifact is the changed file, verified.
    let state = store.load_state(&run_id).unwrap();
    let names: Vec<&str> = state.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["calc.py"]);
    assert!(state.artifacts[0].versions.iter().all(|v| v.verified));

    // aider's own lines (banner, `Tokens: …`, `Applied edit to …`) became neither
    // issues nor part of the claim; the contract sections did.
    assert!(state.issues.is_empty(), "{:?}", state.issues);
    let state_json = serde_json::to_string(&state).unwrap();
    for line in ["Tokens: ", "Applied edit to", "Aider v", "Repo-map:"] {
        assert!(!state_json.contains(line), "{line} reached the state");
    }
    let claim: Value = serde_json::from_str(
        &std::fs::read_to_string(wt.join(".baton/output/turn-0-execute/claim.json")).unwrap(),
    )
    .unwrap();
    let message = claim["final_message"].as_str().unwrap();
    for line in [
        "Tokens: ",
        "Applied edit",
        "Aider v",
        "Analytics have been",
        "edit format",
        "Repo-map:",
    ] {
        assert!(
            !message.contains(line),
            "{line} in the final message: {message}"
        );
    }
    // Not wrapped at 80 columns.
    assert!(
        message.contains("it now returns their sum, so the unittest suite passes."),
        "{message}"
    );
    assert!(claim["notes"].is_object(), "{claim}");

    // The patch applies to the base and holds no scratch file.
    let patch = std::fs::read_to_string(&outbox.patch_file).unwrap();
    assert!(patch.contains("+    return a + b"), "{patch}");
    assert!(
        !patch.contains(".aider") && !patch.contains(".baton/"),
        "{patch}"
    );
    let check = t.join("check");
    git(
        &t,
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            check.to_str().unwrap(),
        ],
    );
    git(
        &check,
        &["apply", "--check", outbox.patch_file.to_str().unwrap()],
    );

    // The user's checkout is untouched, and nothing appeared outside the worktree but
    // aider's own records in its (temporary) home.
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]), head_before);
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(std::fs::read_to_string(repo.join("calc.py")).unwrap(), CALC);
    let after = files(&t, &skip);
    let check_dir = t.join("check");
    let appeared: Vec<&PathBuf> = after
        .keys()
        .filter(|p| !before.contains_key(*p) && !t.join(p).starts_with(&check_dir))
        .collect();
    assert!(
        appeared.iter().all(|p| p.starts_with("home/.aider")),
        "files appeared outside the worktree: {appeared:?}"
    );
    for (p, content) in &before {
        assert_eq!(after.get(p), Some(content), "{} changed", p.display());
    }

    // The server saw the model and nothing else: chat completions for the model, with
    // the worker's key, non-streaming, the briefing in the first one.
    let requests: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!requests.is_empty());
    for r in &requests {
        assert_eq!(r["method"], "POST", "not a model call: {r}");
        assert_eq!(r["path"], "/v1/chat/completions", "not a model call: {r}");
        assert_eq!(r["authorization"], format!("Bearer {KEY}"));
        assert_eq!(r["body"]["model"], "baton-fake");
        assert_ne!(r["body"]["stream"], true);
    }
    assert!(requests[0].to_string().contains(task), "{}", requests[0]);
    // The key stays out of what baton records.
    let db_bytes = std::fs::read(db(&repo)).unwrap();
    assert!(!String::from_utf8_lossy(&db_bytes).contains(KEY));

    drop(server);
    eprintln!(
        "agent_aider: {} model calls, {:.1}s",
        requests.len(),
        started.elapsed().as_secs_f64()
    );
}
