//! What the end-to-end tests of real agent CLIs share: finding the pinned CLI in the
//! cache `.ci/agents/install-*.sh` fill, a scripted fake model server that is also the
//! agent's HTTP(S) proxy, a repository with a failing test, `baton enqueue` + `baton
//! work`, and the assertions that the job fixed it in its own worktree and nowhere
//! else, or failed after one run.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Instant;

use baton_store::{JobStatus, SqliteStore, Store};
use serde_json::Value;

use super::*;

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

/// `installed_agent` for a CLI that `install` put in `<bin>-<version>/` with npm.
pub fn installed_npm_agent(what: &str, bin: &str, version: &str, install: &str) -> Option<PathBuf> {
    installed_agent(
        &format!("{what} {version}"),
        &format!("{bin}-{version}"),
        &format!("node_modules/.bin/{bin}"),
        install,
    )
}

/// A fake model server from `tests/agents/`, killed on drop. It prints `PORT <n>`
/// first and logs every request as a JSON line.
pub struct FakeServer {
    child: Child,
    port: u16,
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

    /// Every request, after checking none was proxied for another host and none hit
    /// a script error.
    pub fn model_requests(&self) -> Vec<Value> {
        let requests = self.requests();
        for r in &requests {
            assert_ne!(r["proxied"], Value::Bool(true), "the agent reached for {r}");
            assert!(r["script_error"].is_null(), "{}", r["script_error"]);
        }
        requests
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub const CALC: &str = "def add(a, b):\n    return a - b\n";
pub const FIX: &str = "    return a + b\n";
/// The job's objective. The URL is one no agent may fetch (aider scrapes URLs it sees
/// unless told not to); the fake, as the agent's proxy, would log the attempt.
pub const OBJECTIVE: &str =
    "Make the test suite pass (see https://example.com/calc-spec for the spec)";
/// The job's task, which the briefing carries to the model.
pub const TASK: &str = "Fix the bug in calc.py so that test_calc passes";
/// What a scripted model says last, which the turn's summary must be.
pub const FINAL_MESSAGE: &str =
    "Fixed add() in calc.py: it subtracted instead of adding. test_calc passes now.";

/// `<dir>/repo`: a repository whose one test fails, because `add` subtracts.
fn buggy_repo(dir: &Path) -> PathBuf {
    let repo = dir.join("repo");
    std::fs::create_dir(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "dev@example.com"]);
    git(&repo, &["config", "user.name", "dev"]);
    std::fs::write(repo.join("calc.py"), CALC).unwrap();
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

/// A test's directory: the buggy repository, the agent's HOME and TMPDIR, and a file
/// outside all of them that must stay as it is.
pub struct Setup {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub repo: PathBuf,
    pub home: PathBuf,
    pub tmp: PathBuf,
    /// A directory for the CLI's own configuration and state (CODEX_HOME and the
    /// like), skipped like HOME, where a test asks for one.
    pub agent_home: Option<PathBuf>,
}

pub fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let repo = buggy_repo(&root);
    let home = root.join("home");
    let tmp = root.join("tmp");
    let sentinel = root.join("sentinel");
    for d in [&home, &tmp, &sentinel] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(sentinel.join("keep.txt"), "untouched\n").unwrap();
    Setup {
        _dir: dir,
        root,
        repo,
        home,
        tmp,
        agent_home: None,
    }
}

/// `setup` with an `agent_home`: the CLI's directory, returned too.
pub fn setup_with_agent_home() -> (Setup, PathBuf) {
    let mut s = setup();
    let agent_home = s.root.join("agent-home");
    std::fs::create_dir_all(&agent_home).unwrap();
    s.agent_home = Some(agent_home.clone());
    (s, agent_home)
}

/// The worker a test runs: its roster id, its preset, the dummy key it is given, and
/// the paths (prefixes, relative to the worktree) the CLI may leave there, ignored.
pub struct Worker<'a> {
    pub id: &'a str,
    pub preset: &'a str,
    pub key: &'a str,
    pub scratch: &'a [&'a str],
}

/// Writes and commits `baton.toml` with the one `worker`, whose proxy is the fake
/// server, so an attempt to reach any other host is logged there and refused.
/// `extra_env` continues the env table (`, NAME = "value"`), `extra_options` the
/// options (`, sandbox = "bwrap"`).
pub fn write_roster(
    s: &Setup,
    worker: &Worker,
    fake: &FakeServer,
    extra_env: &str,
    extra_options: &str,
) {
    let Worker { id, preset, .. } = *worker;
    std::fs::write(
        s.repo.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"{id}\"\nmodel = \"command/{preset}\"\n\
             options = {{ preset = \"{preset}\", timeout_s = 300{extra_options}, env = {{ \
             HTTPS_PROXY = \"{url}\", HTTP_PROXY = \"{url}\", https_proxy = \"{url}\", \
             http_proxy = \"{url}\", NO_PROXY = \"127.0.0.1\", no_proxy = \"127.0.0.1\"{extra_env} }} }}\n",
            url = fake.url()
        ),
    )
    .unwrap();
    // The roster is the user's own file, not part of the job.
    git(&s.repo, &["add", "baton.toml"]);
    git(&s.repo, &["commit", "-q", "-m", "roster"]);
}

/// `baton` in the repository with the agent's CLI first on PATH and HOME and TMPDIR in
/// the test's directory; the caller adds the CLI's own variables.
pub fn baton_for_agent(s: &Setup, bin: &Path) -> Command {
    let mut cmd = baton(&s.repo);
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    cmd.env("PATH", path)
        .env("HOME", &s.home)
        .env("TMPDIR", &s.tmp);
    cmd
}

/// `baton_for_agent` without the variables in `clear` from the developer's own
/// environment, and with `key` (variable, value) when given.
pub fn agent_command(s: &Setup, bin: &Path, clear: &[&str], key: Option<(&str, &str)>) -> Command {
    let mut cmd = baton_for_agent(s, bin);
    for var in clear {
        cmd.env_remove(var);
    }
    if let Some((var, value)) = key {
        cmd.env(var, value);
    }
    cmd
}

/// `baton enqueue` (OBJECTIVE, TASK, gate `python3 -m unittest`) and `baton work` with
/// the environment `agent` gives: the job's id and the output of `work`.
pub fn enqueue_and_work(s: &Setup, worker: &str, agent: impl Fn() -> Command) -> (String, Output) {
    let out = agent()
        .args([
            "enqueue",
            "--objective",
            OBJECTIVE,
            "--task",
            TASK,
            "--gate",
            "tests=python3 -m unittest",
            "--worker",
            worker,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "enqueue: {}", text(&out));
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.list_jobs().unwrap()[0].id.clone();
    let started = Instant::now();
    let work = agent().arg("work").output().unwrap();
    println!("baton work took {:.1?}", started.elapsed());
    (job, work)
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

/// What must not change while the job runs: the checkout's HEAD, and the files outside
/// the worktree, baton's directory, `.git` (which changes by design: the job's branch,
/// worktree metadata, the shared exclude file), HOME, TMPDIR, the CLI's own directory
/// and the fake's files.
#[derive(PartialEq, Eq)]
pub struct Outside {
    head: String,
    files: BTreeMap<PathBuf, Vec<u8>>,
}

pub fn outside(s: &Setup) -> Outside {
    let mut skip = vec![
        s.repo.join(".baton"),
        s.repo.join(".git"),
        s.home.clone(),
        s.tmp.clone(),
        s.root.join("requests.jsonl"),
        s.root.join("script.json"),
    ];
    skip.extend(s.agent_home.clone());
    let skip: Vec<&Path> = skip.iter().map(PathBuf::as_path).collect();
    Outside {
        head: git(&s.repo, &["rev-parse", "HEAD"]),
        files: files(&s.root, &skip),
    }
}

/// Every file in HOME, after checking each is under `HOME/<dir>`.
pub fn home_files_under(s: &Setup, dir: &str) -> BTreeMap<PathBuf, Vec<u8>> {
    let home_files = files(&s.home, &[]);
    for path in home_files.keys() {
        assert!(path.starts_with(s.home.join(dir)), "{}", path.display());
    }
    home_files
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

/// The job fixed calc.py in one commit of its own worktree and nothing else changed:
/// gate passed, baton's trailers, the verified artifact, `final_message` as the
/// summary, a patch that applies and holds no scratch file, the user's checkout and
/// everything `outside` names as `before`, baton's directory holding only its own
/// files, the key in none of them nor in what `work` printed. Returns the job's
/// worktree.
pub fn assert_fixed_in_worktree(
    s: &Setup,
    job_id: &str,
    work: &Output,
    worker: &Worker,
    final_message: &str,
    before: &Outside,
) -> PathBuf {
    let Worker {
        id,
        preset,
        key,
        scratch,
    } = *worker;
    assert!(work.status.success(), "work: {}", text(work));
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(job_id).unwrap();
    assert_eq!(job.status, JobStatus::Outbox, "{job:?}\n{}", text(work));
    let outbox = job.outbox.clone().unwrap();
    assert_eq!(outbox["ended"], "finished", "{outbox}");
    let gates = outbox["gates"].as_array().unwrap();
    assert_eq!(gates.len(), 1, "{outbox}");
    assert_eq!(gates[0]["name"], "tests");
    assert_eq!(gates[0]["passed"], true, "{}", gates[0]);

    // The fix is the job branch's one commit, stamped by baton.
    let run = job.run_id.clone().unwrap();
    let worktree = PathBuf::from(outbox["worktree"].as_str().unwrap());
    let base = outbox["base"].as_str().unwrap();
    let head = outbox["head"].as_str().unwrap();
    let commits = git(&worktree, &["rev-list", &format!("{base}..{head}")]);
    assert_eq!(commits.lines().count(), 1, "{commits}");
    let changed = git(&worktree, &["diff", "--name-only", base, head]);
    assert_eq!(changed.trim(), "calc.py", "only the fix is committed");
    let message = git(&worktree, &["log", "-1", "--format=%B", head]);
    for trailer in [
        format!("Baton-Run: {}", run.0),
        format!("Baton-Job: {job_id}"),
        "Baton-Turn: 0".to_string(),
        format!("Baton-Worker: {id}"),
        format!("Baton-Model: command/{preset}"),
    ] {
        assert!(message.contains(&trailer), "{trailer} missing:\n{message}");
    }
    assert_eq!(
        git(&worktree, &["show", &format!("{head}:calc.py")]),
        format!("def add(a, b):\n{FIX}")
    );
    // Nothing else in the worktree: no file of the CLI's, committed or not, but its
    // ignored scratch files.
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
            line.starts_with("!! .baton/")
                || scratch.iter().any(|p| line.starts_with(&format!("!! {p}"))),
            "left in the worktree: {line}"
        );
    }

    // The turn's claims: the changed file is the artifact, verified; the summary is
    // the CLI's final message.
    let state = store.load_state(&run).unwrap();
    let names: Vec<&str> = state.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["calc.py"], "{:?}", state.artifacts);
    assert!(
        state.artifacts[0].latest().verified
            && state.artifacts[0].versions.iter().all(|v| v.verified),
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
    assert!(patch_text.contains("+    return a + b"), "{patch_text}");
    assert!(!patch_text.contains(&format!(".{preset}")), "{patch_text}");
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
    // baton's directory and the agent's own directories.
    assert_eq!(git(&s.repo, &["status", "--porcelain"]), "");
    assert_eq!(
        std::fs::read_to_string(s.repo.join("calc.py")).unwrap(),
        CALC
    );
    let after = outside(s);
    assert_eq!(before.head, after.head, "the checkout's HEAD moved");
    assert_eq!(
        before.files.keys().collect::<Vec<_>>(),
        after.files.keys().collect::<Vec<_>>()
    );
    assert!(*before == after, "a file outside the worktree changed");
    let baton_dir = s.repo.join(".baton");
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
    assert_not_in_db(&baton_dir, key);
    assert!(!text(work).contains(key));
    worktree
}

/// The job failed, after one run of the agent, with `expected` in what the user sees
/// (returned: the output of `work` and the job).
pub fn assert_failed_once(
    s: &Setup,
    job_id: &str,
    work: &Output,
    expected: &str,
    key: &str,
) -> String {
    let store = SqliteStore::open(&db(&s.repo)).unwrap();
    let job = store.job(job_id).unwrap();
    let shown = format!("{}\n{job:?}", text(work));
    assert_eq!(job.status, JobStatus::Failed, "{shown}");
    assert!(shown.contains(expected), "{expected:?} not in:\n{shown}");
    assert_eq!(agent_runs(&job), ["turn-0-execute"]);
    assert!(!shown.contains(key));
    shown
}
