//! Defects found by crashing, signalling and starving the real binary (issue 7); each
//! test is named after what broke.

use std::path::Path;
use std::process::Command;

use baton_store::{JobStatus, SqliteStore, Store};

use super::*;

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// A repository with one commit and a roster of one command worker `w` running `command`.
fn repo_with_agent(d: &Path, command: &str, extra_options: &str) {
    git(d, &["init", "-q", "-b", "main"]);
    git(d, &["config", "user.email", "dev@example.com"]);
    git(d, &["config", "user.name", "dev"]);
    std::fs::write(d.join("README.md"), "hello\n").unwrap();
    git(d, &["add", "."]);
    git(d, &["commit", "-q", "-m", "init"]);
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n[[workers]]\nid = \"w\"\nmodel = \"command/w\"\n\
             options = {{ command = {command:?}, handoff = \"derive\", pass_env = [\"PATH\"]{extra_options} }}\n"
        ),
    )
    .unwrap();
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[test]
fn sigpipe_from_an_agent_that_never_reads_its_briefing_does_not_kill_baton_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    repo_with_agent(d, "sh -c 'sleep 0.3; exit 0'", "");
    // A briefing far bigger than a pipe's buffer: the writer is always mid-write when
    // the agent exits.
    let objective = format!("Do the thing. {}", "context ".repeat(12_000));
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            &objective,
            "--task",
            "write a.txt",
            "--worker",
            "w",
            "--budget",
            "60000",
        ],
    );
    let out = baton(d).args(["work"]).output().unwrap();
    assert_eq!(
        signal_of(&out.status),
        None,
        "baton work died of a signal:\n{}",
        text(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("without reading its briefing"),
        "the failure says why:\n{stderr}"
    );
    let store = SqliteStore::open(&db(d)).unwrap();
    let job = &store.list_jobs().unwrap()[0];
    assert_eq!(job.status, JobStatus::Failed, "recorded, not left running");
    let run = job.run_id.clone().unwrap();
    assert!(
        !store.turns(&run).unwrap().is_empty(),
        "the failed turns are recorded"
    );
}

#[test]
fn sigpipe_on_baton_own_stdout_still_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    run_ok(d, &["demo"]);
    // `baton history | head -c 10`: the reader goes away early.
    let out = Command::new("sh")
        .current_dir(d)
        .arg("-c")
        .arg(format!(
            "'{}' history 2>err.txt | head -c 10 >/dev/null; cat err.txt",
            env!("CARGO_BIN_EXE_baton")
        ))
        .env_remove("BATON_DB")
        .env_remove("BATON_CONFIG")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stdout);
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("error"), "{err}");
}
