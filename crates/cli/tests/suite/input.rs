//! Long objectives and tasks, from files and standard input; and what the exit status
//! tells a script.

use std::io::Write as _;
use std::process::Stdio;

use super::*;

/// Above Linux's limit for one argument (MAX_ARG_STRLEN, 128 KiB).
const LONG: usize = 200 * 1024;

fn long_text(word: &str) -> String {
    format!("{}The end.", word.repeat(LONG / word.len() + 1))
}

/// Equal, without printing 200 KiB when they are not.
fn assert_same(found: &serde_json::Value, expected: &str) {
    let found = found.as_str().unwrap_or_default();
    assert!(
        found == expected,
        "{} bytes found, {} expected; first difference at byte {:?}",
        found.len(),
        expected.len(),
        found
            .bytes()
            .zip(expected.bytes())
            .position(|(a, b)| a != b)
    );
}

/// Runs `baton args` with `stdin` on standard input.
fn with_stdin(dir: &Path, args: &[&str], stdin: &str) -> Output {
    let mut child = baton(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Regression (issue 7, item 18): an objective or task longer than the OS argument
/// limit could not be given at all.
#[test]
fn an_objective_and_tasks_beyond_the_argument_limit_come_from_files_and_stdin() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let objective = long_text("Port the billing service. ");
    let task = long_text("Inventory every query. ");
    std::fs::write(d.join("objective.md"), format!("{objective}\n")).unwrap();
    std::fs::write(d.join("task1.md"), &task).unwrap();
    let out = with_stdin(
        d,
        &[
            "run",
            "--objective-file",
            "objective.md",
            "--task-file",
            "task1.md",
            "--task-file",
            "-",
            "--create-only",
        ],
        "Review the plan\r\n",
    );
    assert!(out.status.success(), "{}", text(&out));
    let state: serde_json::Value = serde_json::from_str(&run_ok(d, &["state", "--json"])).unwrap();
    // Byte for byte, less the file's final line break.
    assert_same(&state["objective"], &objective);
    assert_same(&state["plan"][0]["title"], &task);
    assert_eq!(state["plan"][1]["title"], "Review the plan");
    // The long texts go through a real turn.
    run_ok(d, &["step"]);

    // The same for a queued job.
    git(d, &["init", "-q", "-b", "main"]);
    git(
        d,
        &[
            "-c",
            "user.email=dev@example.com",
            "-c",
            "user.name=dev",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "init",
        ],
    );
    let out = with_stdin(
        d,
        &[
            "enqueue",
            "--objective-file",
            "-",
            "--task-file",
            "task1.md",
            "--worker",
            "claude",
        ],
        &objective,
    );
    assert!(out.status.success(), "{}", text(&out));
    let jobs: serde_json::Value = serde_json::from_str(&run_ok(d, &["jobs", "--json"])).unwrap();
    assert_same(&jobs[0]["spec"]["objective"], &objective);
    assert_same(&jobs[0]["spec"]["tasks"][0], &task);
}

#[test]
fn unusable_objective_and_task_files_are_explained_and_create_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("blank.md"), " \n\n").unwrap();
    std::fs::write(d.join("latin1.md"), b"caf\xe9").unwrap();
    std::fs::write(d.join("ok.md"), "a task").unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &["--objective-file", "missing.md", "--task", "t"],
            "cannot read the objective file missing.md",
        ),
        (
            &["--objective", "o", "--task-file", "blank.md"],
            "the task file blank.md is empty",
        ),
        (
            &["--objective-file", "latin1.md", "--task", "t"],
            "the objective file latin1.md is not UTF-8 text",
        ),
        (
            &["--objective-file", "-", "--task-file", "-"],
            "standard input (`-`) is given 2 times",
        ),
        (
            &[
                "--objective",
                "o",
                "--objective-file",
                "ok.md",
                "--task",
                "t",
            ],
            "cannot be used with",
        ),
        (
            &["--objective", "o", "--task", "t", "--task-file", "ok.md"],
            "cannot be used with",
        ),
        (&["--task", "t"], "--objective"),
        // An endless file is refused at its limit, not read into all of memory.
        (
            &["--objective-file", "/dev/zero", "--task", "t"],
            "is longer than 16 MiB",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = ["run"].iter().chain(args.iter()).copied().collect();
        let out = with_stdin(d, &args, "");
        assert!(!out.status.success(), "{args:?}\n{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(expected), "{args:?}: {err}");
    }
    let err = with_stdin(d, &["run", "--objective-file", "-", "--task", "t"], "");
    assert!(
        String::from_utf8_lossy(&err.stderr).contains("standard input is empty"),
        "{}",
        text(&err)
    );
    assert!(!d.join(".baton").exists());
}

/// Regression (issue 7, item 13): `run --max-turns 1` and `step` exited 0 when the
/// turn failed, so a script could not tell.
#[test]
fn a_failed_last_turn_exits_4_from_run_step_and_resume() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A replay script with no responses: every turn's first call fails.
    std::fs::write(d.join("empty.jsonl"), "").unwrap();
    let failing = [
        "run",
        "--objective",
        "o",
        "--task",
        "t",
        "--replay",
        "empty.jsonl",
        "--max-turns",
        "1",
    ];
    let out = baton(d).args(failing).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("turn 0 failed") && err.contains("baton history"),
        "{err}"
    );
    let out = baton(d).args(["step"]).output().unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    // The third failure in a row blocks the run: 3, as before.
    let out = baton(d)
        .args(["resume", "--max-turns", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));

    // A committed last turn is still a success.
    let ok = run_ok(
        d,
        &["run", "--objective", "o", "--task", "t", "--max-turns", "1"],
    );
    assert!(ok.contains("paused after 1 turns"), "{ok}");
}

/// Regression (issue 9, item 3): a worker that said it did nothing completed its step,
/// and nothing the user saw said otherwise. The turn exits 4, and `baton state`,
/// `baton history` and the next briefing say the step is still open and why.
#[test]
fn a_turn_without_evidence_of_work_is_visible_to_the_user() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let nothing = serde_json::json!({
        "summary": "I could not do this step at all; nothing was produced.",
        "issues": [{"title": "The outline has no sources to work from", "severity": "high"}],
        "last_action": "read the briefing",
        "next_action": "supply the sources"
    });
    let report = serde_json::json!({
        "notes": "nothing done", "last_action": "read the briefing", "next_action": "retry"
    });
    let script = [
        serde_json::json!({"turn": 0, "call": "execute", "output": nothing.to_string()}),
        serde_json::json!({"turn": 0, "call": "handoff", "output": report.to_string()}),
    ]
    .map(|l| l.to_string())
    .join("\n");
    std::fs::write(d.join("idle.jsonl"), script + "\n").unwrap();
    let out = baton(d)
        .args([
            "run",
            "--objective",
            "Write a guide",
            "--task",
            "outline",
            "--task",
            "draft",
            "--replay",
            "idle.jsonl",
            "--max-turns",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let all = text(&out);
    assert!(
        all.contains("committed, but T1 stays open: no evidence of work"),
        "{all}"
    );
    assert!(all.contains("turn 0 left step T1 open"), "{all}");

    let state = run_ok(d, &["state"]);
    assert!(state.contains("steps 0/2"), "{state}");
    assert!(
        state.contains("1 turn(s) did not complete it; the last, turn 0 by"),
        "{state}"
    );
    assert!(state.contains("no evidence of work"), "{state}");
    let history = run_ok(d, &["history"]);
    assert!(
        history.contains("warning: step T1 stays open: no evidence of work"),
        "{history}"
    );
    let compiled = run_ok(d, &["compile"]);
    assert!(
        compiled.contains("This is attempt 2 of this step"),
        "{compiled}"
    );
}
