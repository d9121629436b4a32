//! The MCP server from outside the project: the official Python SDK's client (`mcp`,
//! pinned by `.ci/mcp/install.sh`) runs the scenarios in `tests/mcp/` against
//! `baton mcp` over stdio and against `/mcp` under `baton serve` over streamable HTTP,
//! with and without a token. The scenarios check what the tools answer; these tests
//! check that they passed and that what they did is what the CLI then shows.
//!
//! Without the SDK's virtualenv a test says how to install it and passes, unless
//! `BATON_REQUIRE_MCP=1` (CI sets it), which fails it instead.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use serde_json::Value;

use super::*;

const INSTALL: &str = "bash .ci/mcp/install.sh";

/// The virtualenv's Python, or `None` after one line saying how to install it.
fn python() -> Option<PathBuf> {
    let cache = std::env::var_os("BATON_MCP_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/baton/mcp")));
    let python = cache.map(|c| c.join("venv/bin/python"));
    if let Some(p) = python.as_ref().filter(|p| p.is_file()) {
        return Some(p.clone());
    }
    let required = std::env::var("BATON_REQUIRE_MCP").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "BATON_REQUIRE_MCP=1 but the MCP Python SDK is not installed ({python:?}): run {INSTALL}"
    );
    println!(
        "skipped: the MCP Python SDK is not installed; run {INSTALL} (or set BATON_MCP_CACHE)"
    );
    None
}

fn scripts() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp")
}

/// Runs scenario `script` with `args`; its last line of output is its JSON summary.
fn scenario(python: &Path, script: &str, args: &[&str]) -> Value {
    let started = Instant::now();
    let out = Command::new(python)
        .arg(scripts().join(script))
        .args(args)
        .output()
        .unwrap();
    println!("{script}: {:.1} s", started.elapsed().as_secs_f64());
    assert!(out.status.success(), "{script} failed:\n{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{script}: {e}: {last:?}\n{stdout}"))
}

/// `baton line --status UNIT --json` in `d`.
fn unit_status(d: &Path, unit: &str) -> Value {
    serde_json::from_str(&run_ok(d, &["line", "--status", unit, "--json"])).unwrap()
}

#[test]
fn the_stdio_server_lists_its_tools_runs_a_unit_answers_its_question_and_says_what_to_do_on_errors()
{
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let baton_bin = env!("CARGO_BIN_EXE_baton");
    let said = scenario(&python, "over_stdio.py", &[baton_bin, d.to_str().unwrap()]);
    // What the tools did is what the CLI shows of the same database.
    let done = unit_status(d, said["done"].as_str().unwrap());
    assert_eq!(done["status"], "finished");
    assert_eq!(done["verdicts"], serde_json::json!(["V1 APPROVED"]));
    assert_eq!(done["turns"], 29);
    let answered = unit_status(d, said["answered"].as_str().unwrap());
    assert_eq!(answered["status"], "finished");
    let export: Value = serde_json::from_str(&run_ok(
        d,
        &[
            "export",
            said["answered"].as_str().unwrap(),
            "--format",
            "json",
        ],
    ))
    .unwrap();
    let human = export["state"]["decisions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["provenance"]["recorded_by"] == "human")
        .unwrap()
        .clone();
    assert!(
        human["text"]
            .as_str()
            .unwrap()
            .ends_with("Return 429 after 100 requests a minute per key"),
        "{human}"
    );
    let runs = run_ok(d, &["runs"]);
    let run = said["run"].as_str().unwrap();
    assert!(
        runs.lines()
            .any(|l| l.starts_with(run) && l.contains(" finished ")),
        "{runs}"
    );
}

/// `baton serve --bind 127.0.0.1:0 [--token T]` in `d`, and its URL.
struct Served {
    child: Child,
    url: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(d: &Path, token: Option<&str>) -> Served {
    let extra: Vec<&str> = token.map(|t| vec!["--token", t]).unwrap_or_default();
    let (child, url) = super::serve::spawn(baton(d), &extra, Stdio::null());
    Served { child, url }
}

#[test]
fn the_http_server_at_mcp_lists_its_tools_runs_a_unit_and_refuses_other_sites() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let served = serve(d, None);
    let said = scenario(&python, "over_http.py", &[&served.url]);
    drop(served);
    let done = unit_status(d, said["done"].as_str().unwrap());
    assert_eq!(done["verdicts"], serde_json::json!(["V1 APPROVED"]));
}

#[test]
fn the_http_server_at_mcp_needs_the_token_it_was_started_with() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let served = serve(d, Some("mcp-test-token"));
    let said = scenario(&python, "over_http.py", &[&served.url, "mcp-test-token"]);
    drop(served);
    let done = unit_status(d, said["done"].as_str().unwrap());
    assert_eq!(done["status"], "finished");
}

#[test]
fn the_stdio_server_benches_pools_queues_candidates_shows_their_outbox_and_says_why_no_judge() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = super::jobs::repo_with_agent(d);
    let log = d.join("agent.log");
    let worker = |id: &str, pool: &str| {
        format!(
            "[[workers]]\nid = \"{id}\"\nmodel = \"command/{id}\"\nfamily = \"f{id}\"\npool = \"{pool}\"\n\
             options = {{ command = \"python3 {} {{claim_file}}\", handoff = \"derive\", pass_env = [\"PATH\"], \
             env = {{ AGENT_LOG = \"{}\" }} }}\n",
            agent.display(),
            log.display()
        )
    };
    std::fs::write(
        d.join("baton.toml"),
        format!(
            "estimator = \"heuristic\"\n{}{}[[pools]]\nid = \"pa\"\n[[pools]]\nid = \"pb\"\n",
            worker("a", "pa"),
            worker("b", "pb")
        ),
    )
    .unwrap();
    let baton_bin = env!("CARGO_BIN_EXE_baton");
    let said = scenario(
        &python,
        "jobs_over_stdio.py",
        &[baton_bin, d.to_str().unwrap()],
    );
    // Each candidate wrote both files on its own branch; the bench was recorded.
    let group = said["group"].as_str().unwrap();
    let outbox = run_ok(d, &["outbox"]);
    assert_eq!(
        outbox.matches(&format!("group {group}")).count(),
        2,
        "{outbox}"
    );
    let pools = run_ok(d, &["pools"]);
    assert!(!pools.contains("benched"), "{pools}");
}

#[test]
fn a_unit_left_running_when_the_stdio_client_goes_stops_between_lanes_and_resumes_from_there() {
    let Some(python) = python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The offline workers, 50 ms a call: the unit is still running when the client goes,
    // however loaded the machine.
    let mut config = String::from("estimator = \"heuristic\"\n");
    for family in ["alpha", "beta", "gamma"] {
        config.push_str(&format!("[[pools]]\nid = \"{family}\"\n"));
    }
    for i in 1..=2 {
        for family in ["alpha", "beta", "gamma"] {
            config.push_str(&format!(
                "[[workers]]\nid = \"{family}-{i}\"\nmodel = \"mock/{family}\"\nfamily = \"{family}\"\n\
                 pool = \"{family}\"\noptions = {{ delay_ms = 50 }}\n"
            ));
        }
    }
    std::fs::write(d.join("baton.toml"), config).unwrap();
    let baton_bin = env!("CARGO_BIN_EXE_baton");
    let said = scenario(
        &python,
        "left_over_stdio.py",
        &[baton_bin, d.to_str().unwrap()],
    );
    let unit = said["unit"].as_str().unwrap();
    // `baton mcp` stopped it when the session ended: active, part of the way, and its
    // lease released (the resume below would wait for it otherwise).
    let left = unit_status(d, unit);
    assert_eq!(left["status"], "active", "{left}");
    let turns = left["turns"].as_u64().unwrap();
    assert!(turns < 29, "{left}");
    let resumed = run_ok(d, &["line", "--resume", unit]);
    assert!(
        resumed.contains(&format!("resumed at turn {turns}"))
            && resumed.contains("is done after 29 turns: APPROVED"),
        "{resumed}"
    );
}
