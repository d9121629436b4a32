//! What the end-to-end tests of real agent CLIs share: finding the pinned CLI in the
//! cache `.ci/agents/install-*.sh` fill, a scripted fake model server, a repository
//! with a failing test, and snapshots of the files outside the job's worktree.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use super::git;

/// `<cache>/<dir>/<bin>` where `<cache>` is `$BATON_AGENTS_CACHE` or
/// `~/.cache/baton/agents`: the directory holding the CLI, or `None` after one line
/// saying how to install it. With `BATON_REQUIRE_AGENTS=1` a missing CLI fails the
/// test instead.
pub fn installed_agent(what: &str, dir: &str, bin: &str, install: &str) -> Option<PathBuf> {
    let cache = std::env::var_os("BATON_AGENTS_CACHE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/baton/agents"))
        })?;
    let path = cache.join(dir).join(bin);
    if path.is_file() {
        return path.parent().map(Path::to_path_buf);
    }
    let required = std::env::var("BATON_REQUIRE_AGENTS").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "BATON_REQUIRE_AGENTS=1 but {what} is not in {}: run {install}",
        path.display()
    );
    println!("skipped: {what} is not installed; run {install} (or set BATON_AGENTS_CACHE)");
    None
}

/// A fake model server from `tests/agents/`, killed on drop. It prints `PORT <n>`
/// first and logs every request as a JSON line.
pub struct FakeServer {
    child: Child,
    pub port: u16,
    pub log: PathBuf,
}

impl FakeServer {
    /// Starts `tests/agents/<server>` with `script` (written to `dir/script.json`) and
    /// its log in `dir/requests.jsonl`; with `fail`, every model request is answered
    /// with that status.
    pub fn start(server: &str, dir: &Path, script: &Value, fail: Option<u16>) -> FakeServer {
        let script_file = dir.join("script.json");
        std::fs::write(&script_file, script.to_string()).unwrap();
        let log = dir.join("requests.jsonl");
        let program = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/agents")
            .join(server);
        let mut cmd = Command::new("python3");
        cmd.arg(program)
            .arg("--script")
            .arg(&script_file)
            .arg("--log")
            .arg(&log);
        if let Some(status) = fail {
            cmd.args(["--fail", &status.to_string()]);
        }
        let mut child = cmd.stdout(Stdio::piped()).spawn().unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line
            .strip_prefix("PORT ")
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("fake server printed {line:?}"));
        FakeServer { child, port, log }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request logged so far.
    pub fn requests(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub const BUGGY_CALC: &str = "def add(a, b):\n    return a - b\n";

/// `<dir>/repo`: a repository whose one test fails, because `add` subtracts.
pub fn buggy_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "dev@example.com"]);
    git(&repo, &["config", "user.name", "dev"]);
    std::fs::write(repo.join("calc.py"), BUGGY_CALC).unwrap();
    std::fs::write(
        repo.join("test_calc.py"),
        "import unittest\nfrom calc import add\n\n\nclass T(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n",
    )
    .unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "calc with a bug"]);
    repo
}

/// Everything under `root` except the paths `skip` names: path → bytes.
pub fn files(root: &Path, skip: &[&Path]) -> BTreeMap<PathBuf, Vec<u8>> {
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
                out.insert(path.clone(), std::fs::read(&path).unwrap_or_default());
            }
        }
    }
    out
}

/// Fails if `secret` is in any of baton's database files in `baton_dir`.
pub fn assert_not_in_db(baton_dir: &Path, secret: &str) {
    for entry in std::fs::read_dir(baton_dir).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("baton.db")
        {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
                "the key is in {}",
                path.display()
            );
        }
    }
}

/// The agent's runs: one output directory each in the job's worktree.
pub fn agent_runs(job: &baton_store::JobInfo) -> Vec<String> {
    let worktree = PathBuf::from(job.outbox.as_ref().unwrap()["worktree"].as_str().unwrap());
    let mut runs: Vec<String> = std::fs::read_dir(worktree.join(".baton/output"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    runs.sort();
    runs
}
