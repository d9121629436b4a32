//! The dashboard in a real headless Chromium: a `baton serve` child process on a free
//! port, driven by `tests/browser/dashboard.mjs` (playwright-core) as a person would:
//! turns arriving live (markup in a description staying text), the budget slider, a
//! pool benched from the floor, a question answered from the page, a judged pair of
//! jobs, and the token. Each test leaves a screenshot in
//! `<target>/browser-artifacts/<test>.png`.
//!
//! Chromium and playwright-core come from `.ci/browser/install.sh`; without them the
//! tests say how to install them and pass, unless `BATON_REQUIRE_BROWSER=1`.

use std::path::PathBuf;
use std::process::Child;
use std::time::Instant;

use super::*;

const INSTALL: &str = "bash .ci/browser/install.sh";

/// What drives the page: playwright-core's directory and the Chromium it launches.
struct Browser {
    playwright: PathBuf,
    chromium: PathBuf,
}

/// The browser, or `None` after one line saying how to install it (a failure instead
/// with `BATON_REQUIRE_BROWSER=1`). Asked first, so a test without it starts nothing.
fn browser() -> Option<Browser> {
    let cache = std::env::var_os("BATON_BROWSER_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/baton/browser")))
        // Neither set: nothing is found there, and the line below says what to run.
        .unwrap_or_default();
    let playwright = cache.join("node_modules/playwright-core");
    let chromium = PathBuf::from("/usr/bin/chromium");
    let node = Command::new("node").arg("--version").output();
    let missing = [
        (!chromium.is_file()).then(|| chromium.display().to_string()),
        (!playwright.join("package.json").is_file()).then(|| playwright.display().to_string()),
        (!node.is_ok_and(|o| o.status.success())).then(|| "node".to_string()),
    ];
    let missing: Vec<String> = missing.into_iter().flatten().collect();
    if missing.is_empty() {
        return Some(Browser {
            playwright,
            chromium,
        });
    }
    let required = std::env::var("BATON_REQUIRE_BROWSER").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "BATON_REQUIRE_BROWSER=1 but {} missing: run {INSTALL}",
        missing.join(" and ")
    );
    println!(
        "skipped: {} missing; run {INSTALL} (or set BATON_BROWSER_CACHE)",
        missing.join(" and ")
    );
    None
}

/// A `baton serve` on a free loopback port in `dir`, killed on drop.
struct Served {
    child: Child,
    url: String,
    log: PathBuf,
}

impl Served {
    fn start(dir: &Path, extra: &[&str]) -> Served {
        let log = dir.join("serve.log");
        let stderr = std::fs::File::create(&log).unwrap().into();
        let (child, url) = super::serve::spawn(baton(dir), extra, stderr);
        Served { child, url, log }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs `scenario` of dashboard.mjs against `served`; its screenshot goes to
/// `<target>/browser-artifacts/<test>.png`. Returns what it printed.
fn drive(
    browser: &Browser,
    test: &str,
    scenario: &str,
    served: &Served,
    env: &[(&str, &str)],
) -> String {
    let artifacts = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("browser-artifacts");
    std::fs::create_dir_all(&artifacts).unwrap();
    let shot = artifacts.join(format!("{test}.png"));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/browser/dashboard.mjs");
    let started = Instant::now();
    let out = Command::new("node")
        .arg(&script)
        .args([scenario, &served.url])
        .arg(&shot)
        .env("PLAYWRIGHT_CORE", &browser.playwright)
        .env("BATON_CHROMIUM", &browser.chromium)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let said = text(&out);
    assert!(
        out.status.success(),
        "scenario {scenario} failed (screenshot {}):\n{said}\nserver log:\n{}",
        shot.display(),
        std::fs::read_to_string(&served.log).unwrap_or_default()
    );
    println!(
        "{scenario}: {:.1} s, screenshot {}\n{said}",
        started.elapsed().as_secs_f64(),
        shot.display()
    );
    said
}

/// Mock workers of three families, two of each, in pools of their own (the line needs
/// pools to seat its lanes), each call answered after `delay_ms`; with `split`, the
/// alpha workers are in two pools, alpha-1 and alpha-2.
fn three_families(delay_ms: u64, split: bool) -> String {
    let mut toml = String::from("estimator = \"heuristic\"\n");
    let pools: &[&str] = if split {
        &["alpha-1", "alpha-2", "beta", "gamma"]
    } else {
        &["alpha", "beta", "gamma"]
    };
    for pool in pools {
        toml.push_str(&format!("[[pools]]\nid = \"{pool}\"\n"));
    }
    for (id, family, pool) in [
        ("ada", "alpha", if split { "alpha-1" } else { "alpha" }),
        ("alan", "alpha", if split { "alpha-2" } else { "alpha" }),
        ("bob", "beta", "beta"),
        ("bea", "beta", "beta"),
        ("gus", "gamma", "gamma"),
        ("gia", "gamma", "gamma"),
    ] {
        toml.push_str(&format!(
            "[[workers]]\nid = \"{id}\"\nmodel = \"mock/{family}\"\nfamily = \"{family}\"\npool = \"{pool}\"\noptions = {{ delay_ms = {delay_ms} }}\n"
        ));
    }
    toml
}

#[test]
fn a_units_turns_appear_live_as_they_commit_without_a_reload() {
    let Some(browser) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // Slow enough to watch: each call takes 200 ms, the unit's 29 turns about six
    // seconds.
    std::fs::write(dir.path().join("baton.toml"), three_families(200, false)).unwrap();
    let served = Served::start(dir.path(), &[]);
    let said = drive(&browser, "live_turns", "live", &served, &[]);
    assert!(said.contains("turn rows seen: "), "{said}");
}

#[test]
fn the_budget_slider_recompiles_the_briefing_with_what_is_dropped() {
    let Some(browser) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    run_ok(dir.path(), &["demo"]);
    let served = Served::start(dir.path(), &[]);
    let said = drive(&browser, "budget_slider", "briefing", &served, &[]);
    assert!(said.contains("budget 200: "), "{said}");
}

#[test]
fn a_pool_benched_from_the_floor_seats_the_next_unit_elsewhere() {
    let Some(browser) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("baton.toml"), three_families(0, true)).unwrap();
    // The first unit, before the bench: pool alpha-1 holds seats (first on a tie).
    run_ok(d, &["line", "Add rate limiting to the public API"]);
    let served = Served::start(d, &[]);
    let said = drive(&browser, "bench_pool", "bench", &served, &[]);
    assert!(said.contains("\"alpha-1\":0"), "{said}");
    // The bench is on record as the server's, from the page.
    let pools: serde_json::Value = serde_json::from_str(&run_ok(d, &["pools", "--json"])).unwrap();
    let alpha1 = &pools["pools"][0];
    assert_eq!(alpha1["id"], "alpha-1");
    assert_eq!(alpha1["benched"]["reason"], "from the dashboard", "{pools}");
}

#[test]
fn a_vague_units_question_is_answered_from_the_page_and_it_resumes() {
    let Some(browser) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    // No configuration: units run with the offline mock workers.
    let served = Served::start(dir.path(), &[]);
    drive(&browser, "question_answered", "question", &served, &[]);
    let status: serde_json::Value =
        serde_json::from_str(&run_ok(dir.path(), &["line", "--status", "--json"])).unwrap();
    assert_eq!(status["status"], "finished", "{status}");
}

#[test]
fn with_a_token_the_page_says_it_needs_one_and_works_once_given() {
    let Some(browser) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    run_ok(dir.path(), &["demo"]);
    let served = Served::start(dir.path(), &["--token", "s3cret-for-the-test"]);
    drive(
        &browser,
        "token",
        "token",
        &served,
        &[("BATON_TEST_TOKEN", "s3cret-for-the-test")],
    );
}

#[test]
fn jobs_show_their_commits_gate_logs_patch_and_judgement() {
    let Some(browser) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let agent = super::jobs::repo_with_agent(d);
    let log = d.join("agent.log");
    let mut toml = String::from(
        "estimator = \"heuristic\"\n[[workers]]\nid = \"judge\"\nmodel = \"mock/judge\"\nfamily = \"z\"\n",
    );
    for (id, family) in [("a1", "x"), ("a2", "y")] {
        toml.push_str(&format!(
            "[[workers]]\nid = \"{id}\"\nmodel = \"command/{id}\"\nfamily = \"{family}\"\n\
             options = {{ command = \"python3 {} {{claim_file}}\", handoff = \"derive\", pass_env = [\"PATH\"], env = {{ AGENT_LOG = \"{}\" }} }}\n",
            agent.display(),
            log.display()
        ));
    }
    std::fs::write(d.join("baton.toml"), toml).unwrap();
    run_ok(
        d,
        &[
            "enqueue",
            "--objective",
            "Write two files",
            "--task",
            "write a.txt",
            "--task",
            "write b.txt",
            "--worker",
            "a1",
            "--worker",
            "a2",
            "--gate",
            "check=ls a.txt",
        ],
    );
    run_ok(d, &["work"]);
    let store = baton_store::SqliteStore::open(&db(d)).unwrap();
    let group = baton_store::Store::list_jobs(&store).unwrap()[0]
        .group
        .clone();
    run_ok(d, &["judge", &group, "--judge", "judge"]);
    let served = Served::start(d, &[]);
    drive(&browser, "jobs", "jobs", &served, &[]);
}
