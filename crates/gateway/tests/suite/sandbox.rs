//! `options.sandbox = "bwrap"`: a real bubblewrap around a real agent in a real git
//! worktree. The agent writes its worktree and nothing else, cannot see the user's
//! checkout or the database, and gets a home of its own. Skipped, saying so, when
//! bubblewrap is not installed, unless `BATON_REQUIRE_SANDBOX=1` (CI sets it).

use std::path::Path;
use std::process::Command;

use baton_core::turn::CallKind;
use serde_json::json;

use super::command::{Fixture, gateway_with, request};

fn git(dir: &Path, args: &[&str]) {
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
}

fn have_bwrap() -> bool {
    let found = Command::new("bwrap")
        .args(["--ro-bind", "/", "/", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("BATON_REQUIRE_SANDBOX").is_none(),
            "BATON_REQUIRE_SANDBOX is set but bubblewrap does not run here"
        );
        eprintln!("skipped: bubblewrap is not installed (apt-get install bubblewrap)");
    }
    found
}

/// What the agent tries, each result written into the worktree for the test to read.
const PROBE: &str = r#"
import tempfile
results = {}
def attempt(name, fn):
    try:
        fn()
        results[name] = "ok"
    except Exception as e:
        results[name] = type(e).__name__
attempt("write_worktree", lambda: open("fixed.txt", "w").write("done\n"))
attempt("write_outside", lambda: open(os.environ["OUTSIDE"] + "/escaped.txt", "w").write("x"))
attempt("read_checkout", lambda: open(os.environ["CHECKOUT"] + "/secret-notes.txt").read())
attempt("read_db", lambda: open(os.environ["DB"]).read().index("SENTINEL-ROW"))
attempt("write_home", lambda: open(os.path.expanduser("~/.agent-config"), "w").write("x"))
attempt("write_tmpdir", lambda: open(tempfile.gettempdir() + "/agent-tmp", "w").write("x"))
attempt("write_tmp", lambda: open("/tmp/agent-tmp", "w").write("x"))
results["sees_baton"] = os.path.exists("/proc/" + os.environ["BATON_PID"] + "/environ")
results["home"] = os.environ["HOME"]
import subprocess
results["git_status"] = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).returncode
json.dump(results, open("probe.json", "w"))
print("probed")
"#;

#[test]
fn a_sandboxed_agent_writes_its_worktree_and_nothing_else_and_cannot_see_the_checkout_or_the_database()
 {
    if !have_bwrap() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let checkout = root.path().join("repo");
    std::fs::create_dir_all(&checkout).unwrap();
    git(&checkout, &["init", "-q", "-b", "main"]);
    std::fs::write(checkout.join("secret-notes.txt"), "the user's own notes\n").unwrap();
    git(&checkout, &["add", "."]);
    git(
        &checkout,
        &[
            "-c",
            "user.email=a@b",
            "-c",
            "user.name=a",
            "commit",
            "-qm",
            "init",
        ],
    );
    let db_dir = root.path().join("state");
    std::fs::create_dir_all(&db_dir).unwrap();
    let db = db_dir.join("baton.db");
    std::fs::write(&db, "SENTINEL-ROW\n").unwrap();
    let outside = root.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let worktree = checkout.join(".baton/worktrees/job-1");
    git(
        &checkout,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "job-1",
            worktree.to_str().unwrap(),
        ],
    );

    let fx = Fixture::new();
    let command = fx.agent(PROBE, "");
    let gateway = gateway_with(
        &command,
        json!({
            "sandbox": "bwrap",
            "sandbox_hide": [db.to_str().unwrap()],
            "env": {
                "OUTSIDE": outside.to_str().unwrap(),
                "CHECKOUT": checkout.to_str().unwrap(),
                "DB": db.to_str().unwrap(),
                "BATON_PID": std::process::id().to_string(),
            },
        }),
        None,
    );
    gateway
        .complete(&request(CallKind::Execute, Some(&worktree)))
        .unwrap();
    let probe: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(worktree.join("probe.json")).unwrap())
            .unwrap();
    assert_eq!(probe["write_worktree"], "ok", "{probe}");
    assert_eq!(
        probe["sees_baton"], false,
        "baton's /proc entry, and its keys: {probe}"
    );
    assert_eq!(
        std::fs::read_to_string(worktree.join("fixed.txt")).unwrap(),
        "done\n"
    );
    assert_eq!(probe["write_outside"], "OSError", "{probe}");
    assert!(!outside.join("escaped.txt").exists());
    assert_eq!(probe["read_checkout"], "FileNotFoundError", "{probe}");
    assert_ne!(probe["read_db"], "ok", "{probe}");
    assert_eq!(probe["write_home"], "ok", "{probe}");
    assert_eq!(probe["write_tmpdir"], "ok", "{probe}");
    assert!(worktree.join(".baton/tmp/agent-tmp").exists());
    assert_eq!(probe["write_tmp"], "OSError", "/tmp is read-only: {probe}");
    assert!(!Path::new("/tmp/agent-tmp").exists());
    let home = worktree.join(".baton/home");
    assert_eq!(probe["home"], home.to_str().unwrap());
    assert!(home.join(".agent-config").exists());
    assert_eq!(probe["git_status"], 0, "git works in the worktree: {probe}");
    // The user's checkout is untouched.
    assert_eq!(
        std::fs::read_to_string(checkout.join("secret-notes.txt")).unwrap(),
        "the user's own notes\n"
    );
}

#[test]
fn a_sandbox_outside_a_git_worktree_is_refused_with_why() {
    if !have_bwrap() {
        return;
    }
    let fx = Fixture::new();
    let gateway = gateway_with(
        &fx.agent("print('hi')", ""),
        json!({"sandbox": "bwrap"}),
        None,
    );
    let err = fx.call(&*gateway, CallKind::Execute).unwrap_err();
    assert!(err.to_string().contains("needs a git worktree"), "{err}");
}

#[test]
fn an_unknown_sandbox_is_a_config_error_naming_the_known_ones() {
    let mut options = baton_gateway::Options::new();
    options.insert("command".into(), "x".into());
    options.insert("sandbox".into(), "docker".into());
    let err = baton_gateway::for_model("command/x", &options)
        .err()
        .unwrap();
    assert!(err.to_string().contains("known: none, bwrap"), "{err}");
}
