//! Gates: mechanical pass/fail commands (tests, lint, migrations) run in a job's
//! worktree. No model is involved; their results are facts.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use baton_core::turn::GateResult;
use baton_gateway::{Cancel, Credential, Redactor, contain};
use serde::{Deserialize, Serialize};

/// A configured gate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GateSpec {
    /// A short name issues can refer to (`tests`, `lint`).
    pub name: String,
    /// Run with `sh -c` in the worktree.
    pub command: String,
    #[serde(default = "default_timeout")]
    pub timeout_s: u64,
}

fn default_timeout() -> u64 {
    1800
}

impl GateSpec {
    /// `name=command`, or a bare command named after its first word; `None` when no
    /// command is given.
    pub fn try_parse(text: &str) -> Option<GateSpec> {
        let gate = GateSpec::parse(text);
        (!gate.command.trim().is_empty()).then_some(gate)
    }

    /// `name=command`, or a bare command named after its first word.
    pub fn parse(text: &str) -> GateSpec {
        match text.split_once('=') {
            Some((name, command)) if !name.trim().is_empty() && !name.contains(' ') => GateSpec {
                name: name.trim().to_string(),
                command: command.trim().to_string(),
                timeout_s: default_timeout(),
            },
            _ => GateSpec {
                name: text.split_whitespace().next().unwrap_or("gate").to_string(),
                command: text.trim().to_string(),
                timeout_s: default_timeout(),
            },
        }
    }
}

/// Bytes of a gate's output kept in the record; the whole output stays in its file.
const TAIL_BYTES: u64 = 4096;

/// Runs one gate in `dir` against `commit`, its combined output going to a file under
/// `out_dir` with no size ceiling. `hide` are environment variables the gate must not
/// see (the workers' keys); `keys` are the workers' keys themselves, scrubbed from the
/// whole output file as well as from its tail in the record.
pub fn run_gate(
    gate: &GateSpec,
    dir: &Path,
    commit: &str,
    out_dir: &Path,
    hide: &[String],
    keys: &Redactor,
    cancel: Option<&Cancel>,
) -> GateResult {
    let started = Instant::now();
    let file_name = format!(
        "{}-{}.log",
        sanitize(&gate.name),
        &commit[..commit.len().min(12)]
    );
    let path = out_dir.join(file_name);
    let result = |exit_code: Option<i32>, tail: String| GateResult {
        name: gate.name.clone(),
        command: gate.command.clone(),
        commit: commit.to_string(),
        exit_code,
        passed: exit_code == Some(0),
        duration_ms: started.elapsed().as_millis() as u64,
        output_tail: tail,
        output_file: Some(path.display().to_string()),
    };
    if let Err(e) = std::fs::create_dir_all(out_dir) {
        return result(None, format!("cannot create {}: {e}", out_dir.display()));
    }
    let (out, err) = match File::create(&path).and_then(|f| Ok((f.try_clone()?, f))) {
        Ok(pair) => pair,
        Err(e) => return result(None, format!("cannot create {}: {e}", path.display())),
    };
    let mut cmd = Command::new("sh");
    // Its own process group and a mark its descendants inherit, so a timeout, a cancel
    // or baton's death ends what the gate started too (see `baton_gateway::contain`).
    let mark = contain::new_mark();
    contain::confine(&mut cmd, &mark);
    cmd.arg("-c")
        .arg(&gate.command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // A gate runs code the agent wrote: it gets no key of any worker (named by the
    // roster, or looking like a secret), and what it prints is scrubbed of their values.
    let hidden = secret_variables(hide);
    let mut keys = keys.clone();
    for (var, value) in &hidden {
        cmd.env_remove(var);
        if let Ok(key) = Credential::new(value.as_str()) {
            keys.add(&key);
        }
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            return result(
                None,
                format!("could not start `sh -c {}`: {e}", gate.command),
            );
        }
    };
    // Bounded: a stored spec may say anything, and `Instant + Duration` panics on
    // overflow.
    let limit = baton_gateway::retry_after::bounded(Duration::from_secs(gate.timeout_s));
    let deadline = started + limit;
    let mut cancelled = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() >= deadline || cancel.is_some_and(Cancel::is_cancelled) => {
                cancelled = Instant::now() < deadline;
                // Its output is discarded either way, so no grace: killed at once.
                baton_gateway::process::kill_now(&mut child);
                break None;
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(_) => break None,
        }
    };
    // A background job the gate started (a server for its tests) ends with the gate.
    contain::kill_marked(&mark);
    // The key may still be found in what it printed: an agent can write a roster's
    // literal key into the tree. The file outlives the run, so it is scrubbed whole; one
    // that cannot be scrubbed is not kept.
    let mut tail = match keys.scrub_file(&path) {
        Ok(_) => keys.scrub(&read_tail(&path)),
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            format!("[baton: the output could not be scrubbed of keys ({e}); it was removed]")
        }
    };
    if cancelled {
        tail.push_str("\n[baton: stopped: the turn was cancelled]");
    } else if status.is_none() {
        tail.push_str(&format!(
            "\n[baton: killed after the gate's {} s timeout]",
            gate.timeout_s
        ));
    }
    result(status.and_then(|s| s.code()), tail)
}

/// Variables a gate must not see: those named in `hide` and any whose name says it
/// holds a secret, with their values (for scrubbing).
fn secret_variables(hide: &[String]) -> Vec<(String, String)> {
    secrets_among(std::env::vars(), hide)
}

fn secrets_among(
    vars: impl Iterator<Item = (String, String)>,
    hide: &[String],
) -> Vec<(String, String)> {
    const SECRET_WORDS: [&str; 7] = [
        "KEY",
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "AUTH",
    ];
    vars.filter(|(name, _)| {
        let upper = name.to_ascii_uppercase();
        hide.contains(name) || SECRET_WORDS.iter().any(|w| upper.contains(w))
    })
    .collect()
}

fn read_tail(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gate run with nothing to hide and no key to scrub.
    fn plain(gate: &GateSpec, dir: &Path, commit: &str, out_dir: &Path) -> GateResult {
        run_gate(gate, dir, commit, out_dir, &[], &Redactor::default(), None)
    }

    #[test]
    fn gates_pass_fail_time_out_and_keep_their_whole_output() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("out");
        let ok = GateSpec::parse("tests=printf 'all good'; exit 0");
        let r = plain(&ok, dir.path(), "abcdef1234567890", &out);
        assert!(r.passed && r.exit_code == Some(0), "{r:?}");
        assert_eq!(r.output_tail, "all good");
        let failing = GateSpec::parse("echo broken >&2; exit 3");
        let r = plain(&failing, dir.path(), "abcdef1234567890", &out);
        assert!(!r.passed);
        assert_eq!(r.exit_code, Some(3));
        assert_eq!(r.name, "echo");
        assert!(r.output_tail.contains("broken"));
        let slow = GateSpec {
            name: "slow".into(),
            command: "sleep 5".into(),
            timeout_s: 0,
        };
        let r = plain(&slow, dir.path(), "abcdef1234567890", &out);
        assert!(
            !r.passed && r.exit_code.is_none() && r.output_tail.contains("timeout"),
            "{r:?}"
        );
        // Regression: a stored `timeout_s` of u64::MAX panicked on `Instant` overflow.
        let patient = GateSpec {
            name: "patient".into(),
            command: "exit 0".into(),
            timeout_s: u64::MAX,
        };
        let r = plain(&patient, dir.path(), "abcdef1234567890", &out);
        assert!(r.passed, "{r:?}");
        // Large output is kept whole on disk, only its tail in the record.
        let big = GateSpec::parse("big=head -c 300000 /dev/zero | tr '\\\\0' x");
        let r = plain(&big, dir.path(), "abcdef1234567890", &out);
        assert_eq!(
            std::fs::metadata(r.output_file.unwrap()).unwrap().len(),
            300_000
        );
        assert_eq!(r.output_tail.len(), TAIL_BYTES as usize);
    }

    #[test]
    fn a_roster_key_a_gate_prints_is_scrubbed_from_its_whole_log() {
        // Regression: only the tail in the record was scrubbed, and only of keys held
        // in variables; a literal roster key the agent wrote into the tree stayed in
        // clear in the log file, which outlives the run.
        let key = "sk-proj-ROSTER-literal-0123456789";
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("leak.txt"), key).unwrap();
        let gate = GateSpec::parse(
            "tests=cat leak.txt; echo; head -c 20000 /dev/zero | tr '\\0' x; echo; cat leak.txt",
        );
        let mut keys = Redactor::default();
        keys.add(&Credential::new(key).unwrap());
        let r = run_gate(
            &gate,
            dir.path(),
            "0123456789ab",
            dir.path(),
            &[],
            &keys,
            None,
        );
        assert!(r.passed, "{r:?}");
        let log = std::fs::read_to_string(r.output_file.unwrap()).unwrap();
        assert!(!log.contains("ROSTER"), "the key is in the log file");
        assert!(log.starts_with("[redacted]\nxxx"), "{}", &log[..40]);
        assert_eq!(log.matches("[redacted]").count(), 2);
        assert!(!r.output_tail.contains("ROSTER") && r.output_tail.ends_with("[redacted]"));
    }

    #[test]
    fn what_a_gate_started_in_the_background_ends_with_the_gate() {
        let dir = tempfile::tempdir().unwrap();
        let gate = GateSpec::parse(
            "server=setsid sh -c 'echo $$ > daemon.pid; exec sleep 300' >/dev/null 2>&1 </dev/null & \
             while [ ! -s daemon.pid ]; do sleep 0.05; done; exit 0",
        );
        let r = plain(&gate, dir.path(), "0123456789ab", dir.path());
        assert!(r.passed, "{r:?}");
        let pid: i32 = std::fs::read_to_string(dir.path().join("daemon.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let gone = |pid: i32| baton_gateway::process::is_gone(pid as u32);
        let deadline = Instant::now() + Duration::from_secs(3);
        while !gone(pid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if !gone(pid) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!("the gate's daemon outlived the gate");
        }
    }

    #[test]
    fn any_variable_named_like_a_secret_is_withheld_from_gates() {
        let vars = [
            ("PATH", "/usr/bin"),
            ("JUDGE_SECRET_KEY", "sk-judge"),
            ("AWS_SECRET_ACCESS_KEY", "aws"),
            ("GITHUB_TOKEN", "ghp"),
            ("DB_PASSWORD", "pw"),
            ("MY_VAR", "x"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()));
        let hidden: Vec<String> = secrets_among(vars.into_iter(), &["MY_VAR".into()])
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(
            hidden,
            [
                "JUDGE_SECRET_KEY",
                "AWS_SECRET_ACCESS_KEY",
                "GITHUB_TOKEN",
                "DB_PASSWORD",
                "MY_VAR"
            ]
        );
    }

    #[test]
    fn gates_do_not_see_hidden_variables() {
        // The runner hides every worker's key variable; HOME stands in for one here
        // (the test process has it, and setting variables would race other tests).
        let dir = tempfile::tempdir().unwrap();
        let gate = GateSpec::parse("env=/usr/bin/env");
        let seen = plain(&gate, dir.path(), "0123456789ab", dir.path());
        let all = std::fs::read_to_string(seen.output_file.unwrap()).unwrap();
        assert!(all.lines().any(|l| l.starts_with("HOME=")), "{all}");
        let hidden = run_gate(
            &gate,
            dir.path(),
            "0123456789ac",
            dir.path(),
            &["HOME".into()],
            &Redactor::default(),
            None,
        );
        let all = std::fs::read_to_string(hidden.output_file.unwrap()).unwrap();
        assert!(!all.lines().any(|l| l.starts_with("HOME=")), "{all}");
    }
}
