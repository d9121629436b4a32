//! The `command` provider: a coding-agent CLI (or any program) as a worker.
//!
//! A worker whose model is `command/<name>` runs a command template in the job's
//! workspace ([`ModelRequest::workspace`], a git worktree). There is no fallback: a
//! request without a workspace is a configuration error, never a run in baton's own
//! directory. No shell is invoked; the template is split into argv with shell-like
//! quoting and its placeholders are substituted per argument.
//!
//! # Options
//!
//! | option | default | meaning |
//! |---|---|---|
//! | `command` | from `preset` | the template, e.g. `my-agent --brief {briefing_file}` |
//! | `preset` | — | `claude`, `codex`, `gemini`, `opencode`, `aider`, `qwen`: a known non-interactive invocation, used when `command` is absent |
//! | `timeout_s` | 1800 | limit on the whole run |
//! | `silence_s` | 300 | longest stretch with no output at all before the agent is killed |
//! | `prompt_silence_s` | 20 | silence after a line that looks like a question (`[y/N]`, `Password:`, an unterminated `…?`) before the agent is failed as waiting for input |
//! | `env` | — | table of extra environment variables |
//! | `pass_env` | — | names of variables copied from baton's environment |
//! | `api_key_env` | — | the variable the agent reads its key from; the worker's own credential is exported under it |
//! | `output_dir` | `{workspace}/.baton/output/turn-{turn}-{call}` | where `stdout`, `stderr` (and `briefing.md`) go; relative paths are inside the workspace |
//! | `handoff` | `derive` | the only value: an agent runs once per turn, and its handoff report is derived (accepted for old rosters) |
//!
//! Placeholders in `command`: `{briefing_file}` (a file holding the whole prompt,
//! system then user), `{workspace}`, `{claim_file}` (the optional notes file:
//! `<workspace>/.baton/claim.json`, removed before every run), `{last_message_file}`
//! (where a CLI that can writes its final message, e.g. `codex exec
//! --output-last-message`). Without `{briefing_file}` the briefing is written to the
//! agent's stdin, which is then closed; with it, stdin is `/dev/null`. In
//! `output_dir`: `{workspace}`, `{turn}`, `{call}`.
//!
//! **`<workspace>/.baton/` is baton's scratch area** (briefings, output, claims): the
//! job runner lists it in the worktree's `.git/info/exclude` so it is never committed.
//!
//! # Environment
//!
//! The agent gets a minimal environment: `PATH`, `HOME`, `LANG` and `TMPDIR` when
//! baton has them, the `pass_env` names, the `env` table, and its own credential
//! under `api_key_env` — never another worker's key, never baton's whole environment
//! (invariant 9).
//!
//! # Liveness
//!
//! Output is copied to disk as it comes, with no size ceiling. A process that is
//! alive and whose output progresses is fine however long it is quiet between
//! lines, up to `silence_s`. It runs in its own process group, so a limit kills the
//! agent and everything it started; when baton has a controlling terminal the agent
//! gets a new session without one, so a tool that opens `/dev/tty` to ask a question
//! fails at once instead of waiting on the keyboard.
//!
//! # What the agent leaves
//!
//! An agent is asked for no JSON. After a zero exit the gateway reports an
//! [`AgentOutput`](baton_core::agent::AgentOutput): the agent's final message (the
//! `result`/`response` field of Claude Code's or Gemini CLI's JSON output, whose usage
//! is taken when reported; else `{last_message_file}`; else the end of stdout without
//! terminal escapes and the CLI's own trailer lines) and its notes (the JSON object in
//! `{claim_file}`; else a JSON claim or the worker-contract sections `SUMMARY:` /
//! `EVIDENCE:` / `CHANGES:` / `RISKS:` / `BLOCKERS:` in the final message). The engine
//! makes the turn's claims of it: the files the turn's commit changed are the
//! artifacts, the final message the summary. It is saved as `claim.json` in the output
//! directory. A failed agent's error carries its own words: the error its CLI
//! reported on stdout, else the end of stderr, else of stdout, and where its output is.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use baton_core::turn::CallKind;
use serde_json::Value;

use crate::{Credential, Error, Gateway, ModelRequest, ModelResponse, Options, Result};

mod argv;
mod claim;
mod options;
mod presets;
mod run;
mod sandbox;

use claim::Lookup;
pub(crate) use options::CommandOptions;
use options::SandboxMode;
use run::{Limits, OutputPaths, RunSpec, Stopped};

pub use presets::{PRESETS, Preset, preset, preset_names};

/// Variables every agent gets from baton's environment when they are set.
const BASE_ENV: &[&str] = &["PATH", "HOME", "LANG", "TMPDIR"];

const DEFAULT_OUTPUT_DIR: &str = "{workspace}/.baton/output/turn-{turn}-{call}";

/// A command worker. Holds its own credential only; `Debug` prints it redacted.
#[derive(Debug)]
pub struct CommandGateway {
    name: String,
    argv: Vec<String>,
    briefing_in_file: bool,
    limits: Limits,
    pass_env: Vec<String>,
    env: Vec<(String, String)>,
    credential: Option<(String, Credential)>,
    /// The preset the command came from, if any: its endpoint variables and fixed
    /// environment apply, even under a custom `command`.
    preset: Option<&'static Preset>,
    /// Paths the agent writes for itself (its preset's plus `options.scratch`).
    scratch: Vec<String>,
    /// `options.sandbox = "bwrap"`: every run confined (see [`sandbox`]).
    sandbox: Option<sandbox::Sandbox>,
    output_dir: String,
    /// The template names `{last_message_file}`: the CLI writes its final message there.
    reads_last_message: bool,
}

impl CommandGateway {
    /// Builds a command worker from its options (see the module documentation).
    pub fn new(name: &str, options: &Options, credential: Option<Credential>) -> Result<Self> {
        Self::from_options(name, options, credential, true)
    }

    /// Checks the options as [`new`](Self::new) does, without looking for `bwrap` on
    /// the PATH: a roster is checked where it is written, not only where it runs.
    pub(crate) fn check(name: &str, options: &Options) -> Result<()> {
        Self::from_options(name, options, None, false).map(drop)
    }

    fn from_options(
        name: &str,
        options: &Options,
        credential: Option<Credential>,
        find_sandbox: bool,
    ) -> Result<Self> {
        let read: CommandOptions = crate::options::parse("command", options)?;
        let preset = match read.preset.as_deref() {
            Some(name) => Some(named_preset(name)?),
            None => None,
        };
        let template = match (read.command.as_deref(), preset) {
            (Some(command), _) => command.to_string(),
            (None, Some(preset)) => preset.command.to_string(),
            (None, None) => {
                return Err(Error::Config(format!(
                    "command worker \"{name}\" needs options.command (e.g. \"my-agent --brief {{briefing_file}}\") or options.preset ({})",
                    preset_names()
                )));
            }
        };
        let argv = argv::split(&template)?;
        argv::check_placeholders(&argv)?;
        let seconds = |key: &str, value: Option<f64>, default: u64| -> Result<Duration> {
            match value {
                None => Ok(Duration::from_secs(default)),
                Some(v) => Some(v)
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .map(crate::retry_after::bounded_seconds)
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "options.{key} must be a positive number of seconds, got {v}"
                        ))
                    }),
            }
        };
        let silence = seconds("silence_s", read.silence_s, 300)?;
        let limits = Limits {
            total: seconds("timeout_s", read.timeout_s, 1800)?,
            silence,
            // A question must be recognised before plain silence would kill the agent,
            // or it is reported as "no output" instead of "waiting for input".
            prompt_silence: seconds("prompt_silence_s", read.prompt_silence_s, 20)?
                .min(silence.mul_f64(0.8)),
        };
        let pass_env = read
            .pass_env
            .unwrap_or_default()
            .into_iter()
            .map(valid_var)
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                Error::Config("options.pass_env must be a list of variable names".into())
            })?;
        let env = read
            .env
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| valid_var(k).map(|k| (k, v.into_string())))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                Error::Config(
                    "options.env must map variable names to strings, numbers or booleans".into(),
                )
            })?;
        let key_var = match read.api_key_env.as_deref() {
            Some(var) => Some(valid_var(var.to_string()).ok_or_else(|| {
                Error::Config(format!(
                    "options.api_key_env \"{var}\" is not a variable name"
                ))
            })?),
            None => None,
        };
        // A preset's key goes back under the variable it was read from.
        let key_var = key_var.or_else(|| preset.and_then(Preset::key_source).map(str::to_string));
        let credential = match (credential, key_var) {
            (Some(c), Some(var)) => Some((var, c)),
            (Some(_), None) => {
                return Err(Error::Config(format!(
                    "command worker \"{name}\" was given a key but no options.api_key_env to export it under"
                )));
            }
            (None, _) => None,
        };
        match read.handoff.as_deref() {
            None | Some("derive") => {}
            Some(other) => {
                return Err(Error::Config(format!(
                    "options.handoff = \"{other}\" is no longer supported: an agent runs once per turn and its handoff is derived from its commit, final message and notes; remove the option"
                )));
            }
        }
        let mut scratch: Vec<String> = preset
            .map(|p| p.scratch.iter().map(|s| s.to_string()).collect())
            .unwrap_or_default();
        for item in read.scratch.unwrap_or_default() {
            match item.trim() {
                path if !path.is_empty() && !path.starts_with(':') => {
                    scratch.push(path.to_string())
                }
                _ => {
                    return Err(Error::Config(format!(
                        "options.scratch must be a list of paths relative to the worktree (globs allowed), got {}",
                        Value::String(item)
                    )));
                }
            }
        }
        let sandbox = match read.sandbox {
            None | Some(SandboxMode::None) => None,
            Some(SandboxMode::Bwrap) if find_sandbox => Some(sandbox::Sandbox::new(
                read.sandbox_hide.unwrap_or_default(),
            )?),
            Some(SandboxMode::Bwrap) => None,
        };
        Ok(CommandGateway {
            name: name.to_string(),
            preset,
            scratch,
            sandbox,
            briefing_in_file: argv::uses(&argv, "briefing_file"),
            reads_last_message: argv::uses(&argv, "last_message_file"),
            argv,
            limits,
            pass_env,
            env,
            credential,
            output_dir: read
                .output_dir
                .unwrap_or_else(|| DEFAULT_OUTPUT_DIR.to_string()),
        })
    }

    /// Whether every run of this worker is confined (`options.sandbox`).
    pub fn sandboxed(&self) -> bool {
        self.sandbox.is_some()
    }

    /// Paths the agent writes for itself, never to be committed.
    pub fn scratch(&self) -> &[String] {
        &self.scratch
    }

    /// The argv template after splitting, placeholders unsubstituted.
    pub fn argv_template(&self) -> &[String] {
        &self.argv
    }

    fn output_paths(&self, workspace: &Path, turn: u32, call: CallKind) -> OutputPaths {
        let ws = workspace.to_string_lossy();
        let rendered = self
            .output_dir
            .replace("{workspace}", &ws)
            .replace("{turn}", &turn.to_string())
            .replace("{call}", call.as_str());
        OutputPaths::in_dir(workspace.join(rendered))
    }

    /// The agent's whole environment.
    fn child_env(&self) -> Vec<(String, OsString)> {
        let mut env: Vec<(String, OsString)> = Vec::new();
        let mut set = |k: &str, v: OsString| {
            env.retain(|(name, _)| name != k);
            env.push((k.to_string(), v));
        };
        let preset_pass = self.preset.map(|p| p.pass_env).unwrap_or_default();
        for name in BASE_ENV
            .iter()
            .chain(preset_pass)
            .copied()
            .chain(self.pass_env.iter().map(String::as_str))
        {
            if let Some(value) = std::env::var_os(name) {
                set(name, value);
            }
        }
        for (k, v) in self.preset.map(|p| p.env).unwrap_or_default() {
            set(k, v.into());
        }
        for (k, v) in &self.env {
            set(k, v.into());
        }
        if let Some((var, credential)) = &self.credential {
            set(var, credential.secret().into());
        }
        env
    }

    /// `sink` behind this worker's scrubber: a key the agent prints never reaches it.
    fn scrubbing(&self, sink: &crate::OutputSink) -> crate::OutputSink {
        let sink = sink.clone();
        match &self.credential {
            None => sink,
            Some((_, credential)) => {
                let credential = credential.clone();
                crate::OutputSink::new(move |l| {
                    let line = credential.scrub(l.line);
                    sink.send(crate::OutputLine {
                        stderr: l.stderr,
                        line: &line,
                    });
                })
            }
        }
    }

    fn scrub(&self, text: &str) -> String {
        match &self.credential {
            Some((_, c)) => c.scrub(text),
            None => text.to_string(),
        }
    }

    fn stopped(&self, stop: Stopped, out: &OutputPaths) -> Error {
        match stop {
            Stopped::Spawn { program, source } => Error::Config(format!(
                "command worker \"{}\": cannot start \"{program}\": {source}{}",
                self.name,
                if source.kind() == std::io::ErrorKind::NotFound {
                    " (is it installed, and on the PATH the agent gets? add directories with options.env.PATH)"
                } else {
                    ""
                }
            )),
            Stopped::Io { what, source } => Error::Server {
                message: format!("command worker \"{}\": {what}: {source}", self.name),
            },
            Stopped::TimedOut { after } => Error::AgentTimedOut {
                after,
                output: out.dir.display().to_string(),
            },
            Stopped::Silent { for_ } => Error::AgentSilent {
                silent_for: for_,
                output: out.dir.display().to_string(),
            },
            Stopped::WaitingForInput { line } => Error::AgentWaitingForInput {
                prompt: self.scrub(&line),
            },
            Stopped::Cancelled => Error::Cancelled,
        }
    }
}

impl Gateway for CommandGateway {
    fn retries_in_place(&self) -> bool {
        false
    }

    fn needs_workspace(&self) -> bool {
        true
    }

    fn complete(&self, request: &ModelRequest<'_>) -> Result<ModelResponse> {
        let workspace = request.workspace.ok_or_else(|| {
            Error::Config(format!(
                "command worker \"{}\" needs a workspace (a job's worktree) to run in; it never runs in baton's own directory",
                self.name
            ))
        })?;
        let workspace = std::fs::canonicalize(workspace)
            .ok()
            .filter(|p| p.is_dir())
            .ok_or_else(|| {
                Error::Config(format!(
                    "command worker \"{}\": workspace {} is not a directory",
                    self.name,
                    workspace.display()
                ))
            })?;
        let io = |what: String| {
            move |e: std::io::Error| Error::Server {
                message: format!("{what}: {e}"),
            }
        };
        let scratch = workspace.join(".baton");
        let claim_file = scratch.join("claim.json");
        let out = self.output_paths(&workspace, request.turn, request.call);
        std::fs::create_dir_all(&out.dir).map_err(io(format!("creating {}", out.dir.display())))?;
        std::fs::create_dir_all(&scratch).map_err(io(format!("creating {}", scratch.display())))?;
        // A claim left by an earlier run must never pass for this one's.
        match std::fs::remove_file(&claim_file) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(io(format!("removing {}", claim_file.display()))(e));
            }
            _ => {}
        }

        let ws = workspace.to_string_lossy();
        let claim_path = claim_file.to_string_lossy();
        let last_message_file = out.dir.join("last-message.txt");
        let last_message_path = last_message_file.to_string_lossy();
        let briefing = briefing(request, &ws, &claim_path);
        // One prompt text holding the system and user messages (and where to work and
        // leave the claim), hashed as the agent is handed it.
        let sent = crate::Sent {
            messages: 2,
            request_hash: crate::sha256_hex(briefing.as_bytes()),
        };
        let briefing_file = out.dir.join("briefing.md");
        if self.briefing_in_file {
            std::fs::write(&briefing_file, &briefing)
                .map_err(io(format!("writing {}", briefing_file.display())))?;
        }
        let briefing_path = briefing_file.to_string_lossy();
        let argv = argv::substitute(
            &self.argv,
            &[
                ("briefing_file", &briefing_path),
                ("workspace", &ws),
                ("claim_file", &claim_path),
                ("last_message_file", &last_message_path),
            ],
        );
        let env = self.child_env();
        let argv = match &self.sandbox {
            None => argv,
            Some(sandbox) => {
                // Resolved outside, so a missing agent is named as such, not as a
                // failure of bubblewrap.
                let (program, args) = argv.split_first().ok_or_else(|| {
                    Error::Config(format!("command worker \"{}\": empty command", self.name))
                })?;
                let path = env
                    .iter()
                    .find(|(k, _)| k == "PATH")
                    .map(|(_, v)| v.as_os_str());
                let resolved =
                    run::resolve_program(program, path, &workspace).ok_or_else(|| {
                        self.stopped(
                            Stopped::Spawn {
                                program: program.clone(),
                                source: std::io::Error::new(
                                    std::io::ErrorKind::NotFound,
                                    "no such executable on the PATH the agent gets",
                                ),
                            },
                            &out,
                        )
                    })?;
                sandbox.wrap(&workspace, &resolved, args)?
            }
        };
        let finished = run::run(&RunSpec {
            argv: &argv,
            cwd: &workspace,
            env: &env,
            stdin: (!self.briefing_in_file).then_some(briefing.as_bytes()),
            stdout_path: &out.stdout,
            stderr_path: &out.stderr,
            limits: self.limits,
            cancel: request.cancel,
            output: request.output.map(|sink| self.scrubbing(sink)),
        })
        .map_err(|stop| self.stopped(stop, &out))?;

        // Said with whatever failure follows: an agent that took its prompt from
        // somewhere else, or died at once (a bad flag, no login), never read it.
        let unread = finished.briefing_unread.map_or(String::new(), |u| {
            format!(
                " (it exited without reading its briefing: {} of {} bytes reached it; does it take the prompt on stdin?)",
                u.written, u.total
            )
        });
        let output_dir = out.dir.display().to_string();
        let last_message = self
            .reads_last_message
            .then_some(last_message_file.as_path());
        let lookup = claim::read(&claim_file, last_message, &finished.stdout_tail);
        // An agent that never read its briefing and left nothing did not do the
        // assigned task, whatever it exits with.
        let left_nothing = matches!(&lookup, Lookup::Left { output, .. }
            if output.final_message.trim().is_empty() && output.notes.is_none());
        if !finished.status.success() || (finished.briefing_unread.is_some() && left_nothing) {
            // The agent's own word first: a CLI that reports its error on stdout
            // (Claude Code's `{"is_error": true, "result": "Not logged in"}`) says more
            // than an empty stderr.
            let message = match lookup {
                Lookup::AgentError(message) => message,
                Lookup::Left { .. } => agent_words(&finished),
            };
            return Err(Error::AgentExited {
                status: format!("{}{unread}", describe_status(finished.status)),
                message: self.scrub(&message),
                output: output_dir,
            });
        }
        match lookup {
            Lookup::Left { output, usage } => {
                let text = serde_json::to_string(&output).map_err(|e| Error::Server {
                    message: format!("command worker \"{}\": {e}", self.name),
                })?;
                let saved = out.dir.join("claim.json");
                std::fs::write(&saved, &text)
                    .map_err(io(format!("writing {}", saved.display())))?;
                Ok(ModelResponse { text, usage, sent })
            }
            Lookup::AgentError(message) => Err(Error::AgentExited {
                status: format!("exit code 0, but its output reports an error{unread}"),
                message: self.scrub(&message),
                output: output_dir,
            }),
        }
    }
}

/// What a failed agent said: the last error line at the end of its stderr, else the
/// end of its stderr, else of its stdout.
fn agent_words(finished: &run::Finished) -> String {
    if let Some(line) = last_error_line(&run::tail_lines(&finished.stderr_tail, 20)) {
        return line;
    }
    for stream in [&finished.stderr_tail, &finished.stdout_tail] {
        let text = run::tail_lines(stream, 20);
        if !text.trim().is_empty() {
            return text.trim().to_string();
        }
    }
    match finished.stdout_bytes {
        0 => "it printed nothing".to_string(),
        n => format!("it printed {n} bytes of blank output"),
    }
}

/// The last line of `text` that calls itself an error (`ERROR: …`, `Error: …`). Codex
/// 0.171.0 echoes the whole prompt to stderr before its `ERROR: unexpected status 401
/// …`, and prints `ERROR: Reconnecting... n/5` before it when it retries: the end of
/// stderr alone is mostly briefing, and only the last error is why it stopped.
fn last_error_line(text: &str) -> Option<String> {
    text.lines()
        .map(|l| claim::strip_ansi(l).trim().to_string())
        .rfind(|l| {
            ["ERROR:", "Error:", "error:"]
                .iter()
                .any(|p| l.starts_with(p))
        })
}

/// The whole prompt for an agent: the system prompt, the user message, and where
/// it may leave its claim.
fn briefing(request: &ModelRequest<'_>, workspace: &str, claim_file: &str) -> String {
    let mut text = String::with_capacity(request.system.len() + request.user.len() + 512);
    text.push_str(request.system);
    text.push_str("\n\n");
    text.push_str(request.user);
    text.push_str("\n\n---\nYour workspace: ");
    text.push_str(workspace);
    text.push_str("\nThe notes file (optional, see above): ");
    text.push_str(claim_file);
    text.push('\n');
    text
}

fn describe_status(status: std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    status.to_string()
}

/// The preset `options.preset` names, or an error listing the known ones.
pub(crate) fn named_preset(name: &str) -> Result<&'static Preset> {
    preset(name).ok_or_else(|| {
        Error::Config(format!(
            "unknown options.preset \"{name}\"; known: {}",
            preset_names()
        ))
    })
}

fn valid_var(name: String) -> Option<String> {
    (!name.is_empty() && !name.contains(['=', '\0'])).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn options(v: Value) -> Options {
        match v {
            Value::Object(m) => m,
            _ => Options::new(),
        }
    }

    #[test]
    fn presets_fill_the_command_and_all_parse() {
        for p in PRESETS {
            let g = CommandGateway::new("a", &options(json!({"preset": p.name})), None).unwrap();
            assert!(!g.argv_template().is_empty());
        }
        let g = CommandGateway::new("a", &options(json!({"preset": "claude"})), None).unwrap();
        assert_eq!(g.argv_template()[0], "claude");
        assert!(!g.briefing_in_file);
        let g = CommandGateway::new("a", &options(json!({"preset": "aider"})), None).unwrap();
        assert!(g.briefing_in_file);
        let g = CommandGateway::new(
            "a",
            &options(json!({"preset": "claude", "command": "mine --x"})),
            None,
        )
        .unwrap();
        assert_eq!(g.argv_template(), ["mine", "--x"]);
    }

    #[test]
    fn bad_options_are_config_errors() {
        for bad in [
            json!({}),
            json!({"preset": "cursor"}),
            json!({"command": "x", "timeout": 5}),
            json!({"command": "x", "timeout_s": -1}),
            json!({"command": "x", "env": ["A"]}),
            json!({"command": "x", "pass_env": "PATH"}),
            json!({"command": "x", "handoff": "skip"}),
            json!({"command": "x {nope}"}),
        ] {
            let err = CommandGateway::new("a", &options(bad.clone()), None).unwrap_err();
            assert_eq!(err.class(), crate::ErrorClass::Config, "{bad}: {err}");
        }
        let key = Credential::new("sk-secret").unwrap();
        let err =
            CommandGateway::new("a", &options(json!({"command": "x"})), Some(key)).unwrap_err();
        assert!(err.to_string().contains("api_key_env"), "{err}");
    }

    /// Regression: `timeout_s = 1e300` panicked converting to a `Duration`; it is
    /// clamped to the longest duration baton represents.
    #[test]
    fn a_huge_timeout_is_clamped_instead_of_panicking() {
        let g = CommandGateway::new(
            "a",
            &options(json!({"command": "x", "timeout_s": 1e300, "silence_s": 1e300})),
            None,
        )
        .unwrap();
        let max = crate::retry_after::bounded_seconds(crate::retry_after::MAX_SECONDS);
        assert_eq!(g.limits.total, max);
        assert!(
            std::time::Instant::now()
                .checked_add(g.limits.total)
                .is_some()
        );
    }

    #[test]
    fn debug_never_shows_the_key() {
        let key = Credential::new("sk-secret-123").unwrap();
        let g = CommandGateway::new(
            "a",
            &options(json!({"command": "x", "api_key_env": "K"})),
            Some(key),
        )
        .unwrap();
        assert!(!format!("{g:?}").contains("sk-secret-123"));
        let env = g.child_env();
        assert!(env.iter().any(|(k, v)| k == "K" && v == "sk-secret-123"));
    }
}
