//! The `command` provider's process handling: output captured to disk whole,
//! limits on time and silence, prompts detected, crashes reported.

use std::time::{Duration, Instant};

use baton_core::turn::CallKind;
use baton_gateway::Error;
use baton_gateway::ErrorClass;
use serde_json::json;
use sha2::{Digest, Sha256};

use super::command::{CLAIM, Fixture};

/// The pattern the output agent writes: deterministic, not aligned to any power of
/// two (a prime-length block), so a dropped or duplicated chunk changes the hash.
const BLOCK: usize = 65_521;

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    let block: Vec<u8> = (0..BLOCK as u32)
        .map(|i| (i.wrapping_mul(131).wrapping_add(seed) % 256) as u8)
        .collect();
    block.iter().copied().cycle().take(len).collect()
}

fn sha256(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Regression: output at and around the pipe buffer size (64 KiB), and far past it,
/// reaches disk byte for byte, with stderr written at the same time (a reader that
/// drained one pipe before the other would deadlock here).
#[test]
fn output_ceiling_regression_every_byte_is_saved_without_deadlock() {
    let f = Fixture::new();
    let cmd = f.agent(
        &format!(
            "n = int(sys.argv[1])\n\
             block = bytes((i * 131 + 1) % 256 for i in range({BLOCK}))\n\
             eblock = bytes((i * 131 + 2) % 256 for i in range({BLOCK}))\n\
             out, err = sys.stdout.buffer, sys.stderr.buffer\n\
             written = 0\n\
             while written < n:\n\
             \x20   k = min(n - written, len(block) - written % len(block))\n\
             \x20   out.write(block[written % len(block):][:k]); out.flush()\n\
             \x20   err.write(eblock[written % len(block):][:k]); err.flush()\n\
             \x20   written += k\n\
             open(sys.argv[2], 'w').write({CLAIM:?})"
        ),
        "$N {claim_file}",
    );
    for size in [65_535, 65_536, 65_537, 1 << 20, 50 << 20] {
        let g = f.gateway(
            &cmd.replace("$N", &size.to_string()),
            json!({"silence_s": 60}),
        );
        let started = Instant::now();
        f.call(&*g, CallKind::Execute)
            .unwrap_or_else(|e| panic!("{size} bytes: {e}"));
        let dir = f.ws().join(".baton/output/turn-7-execute");
        let stdout = std::fs::read(dir.join("stdout")).unwrap();
        let stderr = std::fs::read(dir.join("stderr")).unwrap();
        assert_eq!(stdout.len(), size, "stdout length at {size}");
        assert_eq!(
            sha256(&stdout),
            sha256(&pattern(1, size)),
            "stdout at {size}"
        );
        assert_eq!(
            sha256(&stderr),
            sha256(&pattern(2, size)),
            "stderr at {size}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{size} took {:?}",
            started.elapsed()
        );
    }
}

#[test]
fn the_total_time_limit_kills_the_agent_and_what_it_started() {
    let f = Fixture::new();
    // The background `sleep` holds the agent's stdout open: only killing the whole
    // process group lets the run end.
    let cmd = f.agent(
        "import subprocess\nsubprocess.Popen(['sleep', '60'])\n\
         while True:\n    print('working', flush=True); time.sleep(0.1)",
        "",
    );
    let started = Instant::now();
    let err = f
        .call(
            &*f.gateway(&cmd, json!({"timeout_s": 1})),
            CallKind::Execute,
        )
        .unwrap_err();
    let Error::AgentTimedOut { after, output } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(*after, Duration::from_secs(1));
    assert!(
        output.contains("turn-7-execute"),
        "the path is named: {err}"
    );
    assert!(err.to_string().contains(output.as_str()), "{err}");
    assert_eq!(err.class(), ErrorClass::Timeout);
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn silence_beyond_silence_s_is_killed_but_slow_progress_is_not() {
    let f = Fixture::new();
    let silent = f.agent("print('starting', flush=True)\ntime.sleep(60)", "");
    let started = Instant::now();
    let err = f
        .call(
            &*f.gateway(&silent, json!({"silence_s": 0.5})),
            CallKind::Execute,
        )
        .unwrap_err();
    let Error::AgentSilent { silent_for, .. } = &err else {
        panic!("{err:?}")
    };
    // Upper bounds loose enough for a loaded 2-core CI machine (this flaked at 2 s).
    assert!(*silent_for >= Duration::from_millis(500) && *silent_for < Duration::from_secs(4));
    assert_eq!(err.class(), ErrorClass::Timeout);
    assert!(err.to_string().contains("no output for 0."), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    // Pauses of 0.4 s, each far shorter than silence_s, adding up to more than it.
    // silence_s leaves room for Python's start on a loaded machine: it once took over
    // the 1 s this used to allow, and the slow agent was killed before its first line.
    let slow = f.agent(
        &format!("for i in range(10):\n    print('step', i, flush=True); time.sleep(0.4)\nprint({CLAIM:?})"),
        "",
    );
    f.call(
        &*f.gateway(&slow, json!({"silence_s": 2.5})),
        CallKind::Execute,
    )
    .unwrap();
}

#[test]
fn an_agent_waiting_at_a_prompt_is_failed_with_the_prompt() {
    let f = Fixture::new();
    let cmd = f.agent(
        "print('Planning the change...', flush=True)\n\
         sys.stdout.write('Do you want to continue? [y/N] '); sys.stdout.flush()\n\
         time.sleep(60)",
        "",
    );
    let started = Instant::now();
    let err = f
        .call(
            &*f.gateway(&cmd, json!({"prompt_silence_s": 0.3})),
            CallKind::Execute,
        )
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Interactive);
    assert!(!err.is_retryable());
    let text = err.to_string();
    assert!(
        text.contains("waiting for input: Do you want to continue? [y/N]"),
        "{text}"
    );
    assert!(
        text.contains("run it non-interactively — see the presets"),
        "{text}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A password prompt on stderr counts too.
    let cmd = f.agent(
        "sys.stderr.write('Password: '); sys.stderr.flush()\ntime.sleep(60)",
        "",
    );
    let err = f
        .call(
            &*f.gateway(&cmd, json!({"prompt_silence_s": 0.3})),
            CallKind::Execute,
        )
        .unwrap_err();
    assert!(err.to_string().contains("Password:"), "{err}");
}

#[test]
fn an_agent_asking_on_its_closed_stdin_just_fails() {
    let f = Fixture::new();
    // stdin is /dev/null: `input()` hits end of file at once instead of hanging.
    let cmd = f.agent("input('Continue? [y/N] ')", "{briefing_file}");
    let err = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::AgentExited);
    assert!(err.to_string().contains("EOFError"), "{err}");
}

/// Regression (issue 8, item 7): Claude Code reports "Not logged in" on stdout in its
/// JSON envelope and exits 1 with an empty stderr; baton said "the agent failed (exit
/// code 1): " with nothing after it, and no path to the output.
#[test]
fn a_failed_agent_that_reports_its_error_on_stdout_is_heard() {
    let f = Fixture::new();
    let envelope = json!({"type": "result", "subtype": "success", "is_error": true,
        "result": "Not logged in · Please run /login"});
    let cmd = f.agent(
        &format!("print({:?})\nsys.exit(1)", envelope.to_string()),
        "",
    );
    let err = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap_err();
    let text = err.to_string();
    assert_eq!(err.class(), ErrorClass::AgentExited);
    assert!(text.contains("exit code 1"), "{text}");
    assert!(text.contains("Not logged in"), "{text}");
    assert!(
        text.contains("turn-7-execute"),
        "where the output is: {text}"
    );

    // Plain stdout, empty stderr: the end of stdout is the agent's word.
    let cmd = f.agent("print('error: unknown flag --yolo')\nsys.exit(2)", "");
    let err = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap_err();
    assert!(err.to_string().contains("unknown flag --yolo"), "{err}");
    // Nothing at all: said so.
    let cmd = f.agent("sys.exit(4)", "");
    let err = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap_err();
    assert!(err.to_string().contains("printed nothing"), "{err}");
}

#[test]
fn a_crash_reports_its_exit_code_and_the_tail_of_stderr() {
    let f = Fixture::new();
    let cmd = f.agent(
        "for i in range(100):\n    sys.stderr.write(f'log line {i}\\n')\n\
         sys.stderr.write('fatal: config file missing\\n')\nsys.exit(3)",
        "",
    );
    let err = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::AgentExited);
    assert!(
        !err.is_retryable(),
        "a crashed agent is not retried by default"
    );
    let text = err.to_string();
    assert!(text.contains("exit code 3"), "{text}");
    assert!(text.contains("fatal: config file missing"), "{text}");
    assert!(
        text.contains("log line 99") && !text.contains("log line 10\n"),
        "{text}"
    );

    let err = f
        .call(
            &*f.gateway("surely-not-an-installed-agent --x", json!({})),
            CallKind::Execute,
        )
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(
        err.to_string().contains("surely-not-an-installed-agent"),
        "{err}"
    );
}
