//! Preset agents through the `baton` binary, with fake CLIs of the presets' names on
//! the PATH: each gets its own CLI's key and endpoint variables and nothing else of
//! baton's environment, its scratch files never reach a commit or the patch, running
//! agents as root is warned about, and `--sandbox bwrap` confines them.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// A fake agent CLI: records its environment and argv next to its HOME, writes a file,
/// leaves a scratch file the way aider does, and answers like Claude Code's JSON output
/// (echoing its key, which must never be recorded).
const FAKE_CLI: &str = r##"#!/usr/bin/env python3
import json, os, sys
brief = sys.stdin.read() if "--message-file" not in sys.argv else ""
probe = {"env": dict(os.environ), "argv": sys.argv[1:], "cwd": os.getcwd()}
try:
    open(os.environ["PROBE_DB"]).read().index("SQLite")
    probe["db_readable"] = True
except Exception:
    probe["db_readable"] = False
out = os.path.join(os.environ.get("PROBE_DIR", os.path.expanduser("~")), "probe.json")
try:
    json.dump(probe, open(out, "w"))
except OSError:
    json.dump(probe, open("probe.json", "w"))
open("fixed.txt", "w").write("fixed\n")
open(".aider.chat.history.md", "w").write("# aider chat\n")
key = os.environ.get("ANTHROPIC_API_KEY") or os.environ.get("OPENAI_API_KEY") or ""
print(json.dumps({"type": "result", "is_error": False, "result": "Fixed it (key " + key + ")"}))
"##;

struct Setup {
    _dir: tempfile::TempDir,
    repo: PathBuf,
    bin: PathBuf,
    home: PathBuf,
}

fn setup(names: &[&str]) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    let bin = dir.path().join("bin");
    let home = dir.path().join("home");
    for d in [&repo, &bin, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    git(&repo, &["init", "-q", "-b", "main"]);
    git(&repo, &["config", "user.email", "dev@example.com"]);
    git(&repo, &["config", "user.name", "dev"]);
    std::fs::write(repo.join("README.md"), "hello\n").unwrap();
    git(&repo, &["add", "."]);
    git(&repo, &["commit", "-q", "-m", "init"]);
    for name in names {
        let path = bin.join(name);
        std::fs::write(&path, FAKE_CLI).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    Setup {
        _dir: dir,
        repo,
        bin,
        home,
    }
}

const ANTHROPIC_KEY: &str = "sk-ant-api03-PRESETSENTINEL0000000000000000";
/// A team mate's key that the verbose test's agent "finds" and prints.
const OTHER_SECRET: &str = "OTHER_SECRET_VALUE";
const OPENAI_KEY: &str = "sk-proj-OTHERWORKERSENTINEL00000000000000";

impl Setup {
    fn baton(&self) -> Command {
        let mut cmd = baton(&self.repo);
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        cmd.env("PATH", path)
            .env("HOME", &self.home)
            .env("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
            .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/anthropic")
            .env("OPENAI_API_KEY", OPENAI_KEY)
            .env("UNRELATED_SETTING", "not for agents")
            .env("PROBE_DB", db(&self.repo));
        cmd
    }

    fn run(&self, args: &[&str]) -> (String, String) {
        let out = self.baton().args(args).output().unwrap();
        assert!(out.status.success(), "baton {args:?}:\n{}", text(&out));
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn probe(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(self.home.join("probe.json")).unwrap())
            .unwrap()
    }

    fn worktree(&self) -> PathBuf {
        let root = self.repo.join(".baton/worktrees");
        std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.join(".git").is_file())
            .unwrap()
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

/// Regression: `--worker claude` passed only PATH and HOME — no key, no base URL — so
/// Claude Code said "Not logged in".
#[test]
fn a_preset_agent_gets_its_own_clis_key_and_endpoint_and_nothing_else() {
    let s = setup(&["claude"]);
    s.run(&[
        "enqueue",
        "--objective",
        "Fix it",
        "--task",
        "Fix the bug",
        "--worker",
        "claude",
    ]);
    s.run(&["work"]);
    let probe = s.probe();
    let env = &probe["env"];
    assert_eq!(env["ANTHROPIC_API_KEY"], ANTHROPIC_KEY);
    assert_eq!(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:9/anthropic");
    assert_eq!(env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"], "1");
    assert!(
        env.get("OPENAI_API_KEY").is_none(),
        "another CLI's key: {env}"
    );
    assert!(env.get("UNRELATED_SETTING").is_none(), "{env}");
    let preset = baton_gateway::command::preset("claude").unwrap();
    let expected: Vec<&str> = preset.command.split_whitespace().skip(1).collect();
    assert_eq!(probe["argv"], serde_json::json!(expected));
    // The key the agent echoed is recorded nowhere.
    for entry in std::fs::read_dir(s.repo.join(".baton")).unwrap() {
        let path = entry.unwrap().path();
        if path.is_file() {
            let bytes = std::fs::read(&path).unwrap();
            assert!(
                !contains(&bytes, ANTHROPIC_KEY),
                "{} holds the key",
                path.display()
            );
        }
    }
    let (state, _) = s.run(&["state"]);
    assert!(!state.contains(ANTHROPIC_KEY));
}

/// Regression: aider's `.aider*` history and caches reached the patch.
#[test]
fn an_agents_scratch_files_never_reach_a_commit_or_the_patch() {
    let s = setup(&["aider"]);
    s.run(&[
        "enqueue",
        "--objective",
        "Fix it",
        "--task",
        "Fix the bug",
        "--worker",
        "aider",
    ]);
    s.run(&["work"]);
    let probe = s.probe();
    let argv: Vec<&str> = probe["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    for flag in [
        "--no-detect-urls",
        "--no-suggest-shell-commands",
        "--no-check-update",
    ] {
        assert!(argv.contains(&flag), "aider runs without {flag}: {argv:?}");
    }
    let wt = s.worktree();
    assert!(wt.join(".aider.chat.history.md").exists());
    let files = git(&wt, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "fixed.txt", "{files}");
    let patches: Vec<PathBuf> = walk(&s.repo.join(".baton"))
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "patch"))
        .collect();
    assert_eq!(patches.len(), 1);
    let patch = std::fs::read_to_string(&patches[0]).unwrap();
    assert!(
        patch.contains("fixed.txt") && !patch.contains(".aider"),
        "{patch}"
    );
    // Nor does the user's checkout show them.
    assert!(!git(&s.repo, &["status", "--porcelain"]).contains(".aider"));
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn agents_run_as_root_without_a_sandbox_are_warned_about() {
    let s = setup(&["claude"]);
    let (_, err) = s.run(&[
        "enqueue",
        "--objective",
        "o",
        "--task",
        "t",
        "--worker",
        "claude",
    ]);
    assert_eq!(
        err.contains("WARNING: baton runs as root"),
        is_root(),
        "{err}"
    );
    if is_root() {
        assert!(err.contains("--sandbox bwrap"), "{err}");
        let (_, err) = s.run(&["work"]);
        assert!(err.contains("WARNING: baton runs as root"), "{err}");
    }
}

#[test]
fn enqueue_sandbox_bwrap_confines_preset_agents_and_hides_the_database() {
    let bwrap = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|st| st.success());
    if !bwrap {
        assert!(
            std::env::var_os("BATON_REQUIRE_SANDBOX").is_none(),
            "bubblewrap is required"
        );
        eprintln!("skipped: bubblewrap is not installed (apt-get install bubblewrap)");
        return;
    }
    let s = setup(&["claude"]);
    let (_, err) = s.run(&[
        "enqueue",
        "--objective",
        "o",
        "--task",
        "t",
        "--worker",
        "claude",
        "--sandbox",
        "bwrap",
    ]);
    assert!(!err.contains("WARNING"), "{err}");
    s.run(&["work"]);
    // HOME inside is the agent's own, so the probe went to the worktree.
    let wt = s.worktree();
    assert!(!s.home.join("probe.json").exists());
    let probe: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(wt.join(".baton/home/probe.json")).unwrap())
            .unwrap();
    assert_eq!(probe["db_readable"], false, "{probe}");
    assert_eq!(
        probe["env"]["HOME"],
        wt.join(".baton/home").to_str().unwrap()
    );
    assert_eq!(
        std::fs::read_to_string(wt.join("fixed.txt")).unwrap(),
        "fixed\n"
    );
    let files = git(&wt, &["show", "--name-only", "--format=", "HEAD"]);
    assert!(files.lines().any(|f| f == "fixed.txt"), "{files}");
    assert!(
        !files.contains(".baton/"),
        "the agent's home is never committed: {files}"
    );
}

/// Regression: the default judge was the first roster worker even when it was a
/// command worker, which failed with no hint about `--judge`.
#[test]
fn the_judge_is_never_a_command_worker_and_the_error_says_what_to_pass() {
    let s = setup(&["claude", "aider"]);
    let (out, _) = s.run(&[
        "enqueue",
        "--objective",
        "o",
        "--task",
        "t",
        "--worker",
        "claude",
        "--worker",
        "aider",
    ]);
    let group = out
        .split("in group ")
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .to_string();
    std::fs::write(
        s.repo.join("baton.toml"),
        "[[workers]]\nid = \"agent\"\nmodel = \"command/claude\"\noptions = { preset = \"claude\" }\n",
    )
    .unwrap();
    let err = s.baton().args(["judge", &group]).output().unwrap();
    let err = String::from_utf8_lossy(&err.stderr).into_owned();
    assert!(
        err.contains("command workers cannot judge") && err.contains("--judge"),
        "{err}"
    );
    std::fs::write(
        s.repo.join("baton.toml"),
        "[[workers]]\nid = \"agent\"\nmodel = \"command/claude\"\noptions = { preset = \"claude\" }\n\
         [[workers]]\nid = \"referee\"\nmodel = \"mock/referee\"\n",
    )
    .unwrap();
    let err = s
        .baton()
        .args(["judge", &group, "--judge", "agent"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&err.stderr).into_owned();
    assert!(
        err.contains("cannot judge") && err.contains("(referee)"),
        "{err}"
    );
    // The default now skips the agent and reaches the candidates check.
    let err = s.baton().args(["judge", &group]).output().unwrap();
    let err = String::from_utf8_lossy(&err.stderr).into_owned();
    assert!(
        err.contains("finished candidate") && !err.contains("invalid configuration"),
        "{err}"
    );
}

/// Regression: `-v` did nothing for `work`, and `baton jobs` did not say how long a
/// job had run or where its agent's output was.
#[test]
fn verbose_work_streams_the_agents_lines_and_jobs_shows_elapsed_time_and_output() {
    let s = setup(&[]);
    let agent = s.bin.join("chatty.py");
    std::fs::write(
        &agent,
        "import os, sys, time\nsys.stdin.read()\nprint('reading the code', flush=True)\n\
         print('warning: \\x1b[31mslow\\x1b[0m disk', file=sys.stderr, flush=True)\n\
         print('my key is ' + os.environ['AGENT_KEY'], flush=True)\n\
         print('found in a file: OTHER_SECRET_VALUE', flush=True)\n\
         time.sleep(float(os.environ.get('AGENT_SLEEP', '0')))\n\
         open('done.txt', 'w').write('ok\\n')\nprint('all done')\n",
    )
    .unwrap();
    std::fs::write(
        s.repo.join("baton.toml"),
        format!(
            "[[workers]]\nid = \"chatty\"\nmodel = \"command/chatty\"\n\
             options = {{ command = \"python3 {}\", api_key_env = \"AGENT_KEY\", env = {{ AGENT_SLEEP = \"2\" }} }}\n\
             [[workers]]\nid = \"other\"\nmodel = \"openai/gpt-4.1-mini\"\napi_key_env = \"OTHER_KEY\"\n",
            agent.display()
        ),
    )
    .unwrap();
    s.run(&[
        "enqueue",
        "--objective",
        "o",
        "--task",
        "t",
        "--worker",
        "chatty+other",
    ]);
    let work = s
        .baton()
        .args(["-v", "work"])
        .env("AGENT_KEY", ANTHROPIC_KEY)
        .env("OTHER_KEY", OTHER_SECRET)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // While the agent sleeps, `baton jobs` says how long the job has run and where the
    // agent's output is.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let listing = loop {
        let (out, _) = s.run(&["jobs"]);
        if out.contains("output ") {
            break out;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never shown running: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(
        listing.contains("running ") && listing.contains(".baton/output/turn-0-execute"),
        "{listing}"
    );
    let out = work.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let job = listing
        .lines()
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert!(
        err.contains(&format!("  {job} | reading the code")),
        "{err}"
    );
    assert!(
        err.contains(&format!("  {job} ! warning: slow disk")),
        "{err}"
    );
    assert!(err.contains(&format!("  {job} | all done")), "{err}");
    assert!(
        err.contains("my key is [redacted]") && !err.contains(ANTHROPIC_KEY),
        "{err}"
    );
    // A team mate's key, found by the agent somewhere, is scrubbed too.
    assert!(
        err.contains("found in a file: [redacted]") && !err.contains(OTHER_SECRET),
        "{err}"
    );
}

#[test]
fn enqueue_help_offers_exactly_the_gateways_presets() {
    // Regression: the help listed the agents a second time, above the gateway (which
    // alone knows them, invariant 10), and would have gone stale with a new preset.
    let dir = tempfile::tempdir().unwrap();
    let help = run_ok(dir.path(), &["enqueue", "--help"]);
    let help = help.split_whitespace().collect::<Vec<_>>().join(" ");
    let names = baton_gateway::command::PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ");
    assert!(help.contains(&format!("A preset name ({names})")), "{help}");
}
