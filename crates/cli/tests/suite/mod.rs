mod agent_aider;
mod agent_claude;
mod agent_codex;
mod agent_gemini;
mod agent_opencode;
mod agent_qwen;
mod agent_support;
mod browser;
mod cancel;
mod cli;
mod crash;
mod fleet;
mod hardening;
mod import;
mod input;
mod jobs;
mod judge;
mod line;
mod live_model;
mod mcp;
mod netns;
mod pidns;
mod pools;
mod postgres;
mod presets;
mod providers;
mod seats;
mod serve;
mod step_flags;
mod store;

// The store suite's cuttable link to PostgreSQL, shared rather than copied.
#[path = "../../../store/tests/suite/cuttable.rs"]
mod cuttable;

// The gateway suite's wire-format server, shared rather than copied.
#[allow(dead_code)]
#[path = "../../../gateway/tests/suite/server.rs"]
mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn baton(dir: &Path) -> Command {
    isolated(Command::new(env!("CARGO_BIN_EXE_baton")), dir)
}

/// `cmd`, which runs baton (itself, or through a wrapper such as `unshare`), in `dir`
/// without the caller's baton settings.
pub fn isolated(mut cmd: Command, dir: &Path) -> Command {
    cmd.current_dir(dir)
        .env_remove("BATON_DB")
        .env_remove("BATON_CONFIG")
        .env_remove("BATON_BUDGET")
        .env_remove("BATON_TOTAL_BUDGET")
        .env_remove("BATON_ESTIMATOR")
        // Logs would add lines to what the tests compare.
        .env_remove("BATON_LOG")
        .env_remove("RUST_LOG");
    cmd
}

pub fn run_ok(dir: &Path, args: &[&str]) -> String {
    let out = baton(dir).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "baton {args:?} failed:\n{}",
        text(&out)
    );
    String::from_utf8(out.stdout).unwrap()
}

pub fn run_err(dir: &Path, args: &[&str]) -> String {
    let out = baton(dir).args(args).output().unwrap();
    assert!(
        !out.status.success(),
        "baton {args:?} should fail:\n{}",
        text(&out)
    );
    String::from_utf8(out.stderr).unwrap()
}

pub fn text(out: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn git(dir: &Path, args: &[&str]) -> String {
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

pub fn db(dir: &Path) -> PathBuf {
    dir.join(".baton/baton.db")
}
