//! The `command` provider: fake agents (small python3 scripts written to a temp dir)
//! run in a temp workspace. Briefing delivery, where claims are found, the agent's
//! environment and working directory. Liveness and output capture are in
//! `command_liveness.rs`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::agent::parse_agent_output;
use baton_core::claims::WorkerResult;
use baton_core::turn::CallKind;
use baton_gateway::ErrorClass;
use baton_gateway::{
    Credential, Gateway, ModelRequest, ModelResponse, Options, for_model_with_credential,
    validate_model,
};
use serde_json::{Value, json};
use tempfile::TempDir;

pub const SYSTEM: &str = "SYSTEM-PROMPT-MARKER: answer with one JSON object.";
pub const USER: &str = "USER-BRIEFING-MARKER: migrate the ledger.";
pub const CLAIM: &str = r#"{"summary":"did the work","last_action":"wrote ledger.rs"}"#;

/// A workspace and a place for agent scripts, apart from each other.
pub struct Fixture {
    pub workspace: TempDir,
    pub scripts: TempDir,
}

impl Fixture {
    pub fn new() -> Self {
        Fixture {
            workspace: tempfile::tempdir().unwrap(),
            scripts: tempfile::tempdir().unwrap(),
        }
    }

    pub fn ws(&self) -> &Path {
        self.workspace.path()
    }

    /// Writes a python3 agent and returns a `command` that runs it with `args`.
    pub fn agent(&self, body: &str, args: &str) -> String {
        self.agent_with("python3", body, args)
    }

    pub fn agent_with(&self, python: &str, body: &str, args: &str) -> String {
        let path = self.scripts.path().join("agent.py");
        let source = format!("import json, os, sys, time\n{body}\n");
        std::fs::write(&path, source).unwrap();
        format!("'{python}' '{}' {args}", path.display())
    }

    pub fn gateway(&self, command: &str, extra: Value) -> Arc<dyn Gateway> {
        gateway_with(command, extra, None)
    }

    pub fn call(
        &self,
        gateway: &dyn Gateway,
        call: CallKind,
    ) -> baton_gateway::Result<ModelResponse> {
        gateway.complete(&request(call, Some(self.ws())))
    }

    pub fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.ws().join(name)).unwrap()
    }
}

pub fn gateway_with(command: &str, extra: Value, key: Option<&str>) -> Arc<dyn Gateway> {
    let mut options = Options::new();
    options.insert("command".into(), command.into());
    if let Value::Object(extra) = extra {
        options.extend(extra);
    }
    let credential = key.map(|k| Credential::new(k).unwrap());
    for_model_with_credential("command/test-agent", &options, credential).unwrap()
}

pub fn request(call: CallKind, workspace: Option<&Path>) -> ModelRequest<'_> {
    ModelRequest {
        model: "test-agent",
        system: SYSTEM,
        user: USER,
        call,
        turn: 7,
        schema: baton_core::claims::worker_result_schema(),
        max_tokens: None,
        temperature: None,
        workspace,
        cancel: None,
        output: None,
        hashed: None,
    }
}

/// The turn's result claim as the engine makes it of what the agent left.
pub fn claim_of(response: &ModelResponse) -> WorkerResult {
    parse_agent_output(&response.text).unwrap().result.claim
}

fn output_dir(ws: &Path, call: &str) -> PathBuf {
    ws.join(format!(".baton/output/turn-7-{call}"))
}

#[test]
fn the_provider_is_known_and_needs_a_command() {
    validate_model("command/claude").unwrap();
    let err = for_model_with_credential("command/x", &Options::new(), None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(err.to_string().contains("options.command"), "{err}");
}

#[test]
fn briefing_goes_to_stdin_when_the_template_names_no_file() {
    let f = Fixture::new();
    let cmd = f.agent(
        &format!("open('got.txt','w').write(sys.stdin.read())\nprint({CLAIM:?})"),
        "",
    );
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    let got = f.read("got.txt");
    assert!(got.starts_with(SYSTEM), "{got}");
    assert!(got.contains(USER), "{got}");
    assert!(
        got.contains(".baton/claim.json"),
        "the briefing names the claim file"
    );
    assert_eq!(claim_of(&response).summary, "did the work");
    assert!(!output_dir(f.ws(), "execute").join("briefing.md").exists());
    let stdout = std::fs::read_to_string(output_dir(f.ws(), "execute").join("stdout")).unwrap();
    assert_eq!(stdout.trim(), CLAIM);
}

#[test]
fn briefing_goes_to_a_file_when_the_template_names_one_and_stdin_is_empty() {
    let f = Fixture::new();
    let cmd = f.agent(
        &format!(
            "open('got.txt','w').write(open(sys.argv[2]).read())\n\
             open('stdin.txt','w').write(repr(sys.stdin.read()))\nprint({CLAIM:?})"
        ),
        "--brief {briefing_file}",
    );
    f.call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    let got = f.read("got.txt");
    assert!(got.starts_with(SYSTEM) && got.contains(USER), "{got}");
    assert_eq!(f.read("stdin.txt"), "''");
    assert!(output_dir(f.ws(), "execute").join("briefing.md").exists());
}

#[test]
fn the_agent_runs_in_the_workspace_with_placeholders_filled() {
    let f = Fixture::new();
    let cmd = f.agent(
        &format!(
            "open('pwd.txt','w').write(os.getcwd())\n\
             open('args.txt','w').write(json.dumps(sys.argv[1:]))\nprint({CLAIM:?})"
        ),
        "{workspace} {claim_file}",
    );
    f.call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    let ws = std::fs::canonicalize(f.ws()).unwrap();
    assert_ne!(std::env::current_dir().unwrap(), ws);
    assert_eq!(f.read("pwd.txt"), ws.to_str().unwrap());
    let args: Vec<String> = serde_json::from_str(&f.read("args.txt")).unwrap();
    assert_eq!(
        args,
        [
            ws.display().to_string(),
            ws.join(".baton/claim.json").display().to_string()
        ]
    );
}

#[test]
fn without_a_workspace_it_is_a_config_error_and_nothing_runs() {
    let f = Fixture::new();
    let marker = f.scripts.path().join("ran.txt");
    let cmd = f.agent(
        &format!("open({:?},'w').write('x')", marker.display().to_string()),
        "",
    );
    let err = f
        .gateway(&cmd, json!({}))
        .complete(&request(CallKind::Execute, None))
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(err.to_string().contains("needs a workspace"), "{err}");
    assert!(!marker.exists(), "the agent must not run anywhere");
    assert!(!std::env::current_dir().unwrap().join(".baton").exists());
}

#[test]
fn a_claim_file_wins_over_stdout_and_a_stale_one_never_counts() {
    let f = Fixture::new();
    let written = r#"{"summary":"from the file","last_action":"a"}"#;
    let cmd = f.agent(
        &format!(
            "open(sys.argv[1],'w').write({written:?})\n\
             print('{{\"summary\":\"from stdout\",\"last_action\":\"b\"}}')"
        ),
        "{claim_file}",
    );
    let g = f.gateway(&cmd, json!({}));
    let response = f.call(&*g, CallKind::Execute).unwrap();
    assert_eq!(claim_of(&response).summary, "from the file");
    let saved = std::fs::read_to_string(output_dir(f.ws(), "execute").join("claim.json")).unwrap();
    assert_eq!(saved, response.text);

    // A claim file left over from an earlier run is removed before the next one.
    std::fs::write(f.ws().join(".baton/claim.json"), written).unwrap();
    let cmd = f.agent("print('SUMMARY: from the contract')", "");
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    assert_eq!(claim_of(&response).summary, "from the contract");
}

#[test]
fn the_last_json_claim_on_stdout_is_taken_past_log_events() {
    let f = Fixture::new();
    let cmd = f.agent(
        r#"print('{"event":"start"}')
print('thinking about {braces} and {"half": ')
print('{"summary":"first draft","last_action":"x"}')
print('```json\n{"summary":"final","last_action":"y","completed":["ledger"]}\n```')
print('{"event":"done","tokens":12}')"#,
        "",
    );
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    let claim = claim_of(&response);
    assert_eq!(claim.summary, "final");
    assert_eq!(claim.completed, ["ledger"]);
    assert_eq!(response.usage, Default::default());
}

#[test]
fn the_worker_contract_sections_become_a_worker_result() {
    let f = Fixture::new();
    let cmd = f.agent(
        r#"print('''Working...
## SUMMARY
Moved billing onto the ledger API.
## EVIDENCE
- cargo test -p billing: 41 passed
## CHANGES
- src/billing/ledger.rs: new client
- `src/billing/mod.rs`: uses it
## RISKS
- invoice ids untested against production data
## BLOCKERS
- need a staging key to run the end-to-end check
''')"#,
        "",
    );
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    let claim = claim_of(&response);
    assert_eq!(claim.summary, "Moved billing onto the ledger API.");
    assert_eq!(claim.last_action, "Moved billing onto the ledger API.");
    assert_eq!(claim.completed, ["cargo test -p billing: 41 passed"]);
    let names: Vec<_> = claim.artifacts.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["src/billing/ledger.rs", "src/billing/mod.rs"]);
    assert_eq!(claim.artifacts[0].description, "new client");
    let issues: Vec<_> = claim
        .issues
        .iter()
        .map(|i| (i.title.as_str(), i.severity.as_str()))
        .collect();
    assert_eq!(
        issues,
        [
            ("invoice ids untested against production data", "medium"),
            ("need a staging key to run the end-to-end check", "high")
        ]
    );
    assert_eq!(
        claim.next_action.as_deref(),
        Some("need a staging key to run the end-to-end check")
    );
}

#[test]
fn a_claude_style_result_envelope_is_unwrapped_with_its_usage() {
    let f = Fixture::new();
    let inner =
        "Done. Here is my report:\n```json\n{\"summary\":\"wrapped\",\"last_action\":\"z\"}\n```";
    let envelope = json!({
        "type": "result", "subtype": "success", "is_error": false,
        "result": inner, "session_id": "abc",
        "usage": {"input_tokens": 10, "cache_read_input_tokens": 1000,
                  "cache_creation_input_tokens": 5, "output_tokens": 300}
    });
    let cmd = f.agent(&format!("print({:?})", envelope.to_string()), "");
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    assert_eq!(claim_of(&response).summary, "wrapped");
    assert_eq!(response.usage.input_tokens, 1015);
    assert_eq!(response.usage.output_tokens, 300);
    assert_eq!(response.usage.cached_tokens, 1000);

    // The envelope's own text may hold the contract instead of JSON.
    let envelope = json!({"type": "result", "result": "SUMMARY: plain text report\nRISKS: none"});
    let cmd = f.agent(&format!("print({:?})", envelope.to_string()), "");
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    assert_eq!(claim_of(&response).summary, "plain text report");

    // An envelope reporting an error is the agent failing, not a missing claim.
    let envelope = json!({"type": "result", "subtype": "error_max_turns", "is_error": true,
        "result": "hit the turn limit"});
    let cmd = f.agent(&format!("print({:?})", envelope.to_string()), "");
    let err = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::AgentExited);
    assert!(err.to_string().contains("hit the turn limit"), "{err}");
}

/// Issue 8, item 4: an agent is asked for no JSON; its final message is the summary.
#[test]
fn an_agent_that_prints_only_prose_has_its_last_words_as_the_summary() {
    let f = Fixture::new();
    let cmd = f.agent(
        "print('Reading files...')\nprint()\nprint('I fixed the off-by-one in calc/core.py. The tests pass.')",
        "",
    );
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    let claim = claim_of(&response);
    assert!(
        claim
            .summary
            .ends_with("I fixed the off-by-one in calc/core.py. The tests pass."),
        "{}",
        claim.summary
    );
    assert!(claim.artifacts.is_empty(), "files come from the commit");
}

/// A CLI that writes its last message to a file (`codex exec --output-last-message`).
#[test]
fn the_last_message_file_is_the_final_message() {
    let f = Fixture::new();
    let cmd = f.agent(
        "print('event: thinking')\nopen(sys.argv[1],'w').write('Renamed the helper; nothing else is open.')",
        "{last_message_file}",
    );
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    assert_eq!(
        claim_of(&response).summary,
        "Renamed the helper; nothing else is open."
    );
}

/// A notes file that is not JSON costs the notes, not the turn.
#[test]
fn a_broken_notes_file_is_set_aside_with_a_warning() {
    let f = Fixture::new();
    let cmd = f.agent(
        "open(sys.argv[1],'w').write('decisions: keep the API')\nprint('Done.')",
        "{claim_file}",
    );
    let response = f
        .call(&*f.gateway(&cmd, json!({})), CallKind::Execute)
        .unwrap();
    let claim = parse_agent_output(&response.text).unwrap();
    assert_eq!(claim.result.claim.summary, "Done.");
    assert!(
        claim
            .warnings
            .iter()
            .any(|w| w.contains("holds no JSON object")),
        "{:?}",
        claim.warnings
    );
}

#[test]
fn handoff_prompt_is_refused_with_the_reason_and_derive_still_accepted() {
    let f = Fixture::new();
    let mut options = Options::new();
    options.insert("command".into(), "agent".into());
    options.insert("handoff".into(), "prompt".into());
    let err = for_model_with_credential("command/a", &options, None).unwrap_err();
    assert_eq!(err.class(), ErrorClass::Config);
    assert!(err.to_string().contains("runs once per turn"), "{err}");
    let g = f.gateway("agent", json!({"handoff": "derive"}));
    assert!(g.needs_workspace());
}

#[test]
fn the_agent_gets_a_minimal_environment_with_only_its_own_key() {
    const SENTINEL: &str = "sk-ant-api03-ANOTHER-WORKERS-KEY-sentinel";
    // SAFETY: std serialises its own environment access; no test reads this variable
    // through libc directly.
    unsafe { std::env::set_var("BATON_TEST_OTHER_WORKER_KEY", SENTINEL) };
    unsafe { std::env::set_var("BATON_TEST_PASSED_ON", "yes") };
    let f = Fixture::new();
    // The interpreter itself, not a version manager's shim that edits the environment.
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8(python.stdout).unwrap();
    let cmd = f.agent_with(
        python.trim(),
        &format!("open('env.json','w').write(json.dumps(dict(os.environ)))\nprint({CLAIM:?})"),
        "",
    );
    let g = gateway_with(
        &cmd,
        json!({"api_key_env": "AGENT_API_KEY", "pass_env": ["BATON_TEST_PASSED_ON"],
               "env": {"AGENT_MODE": "ci", "RETRIES": 2}}),
        Some("sk-own-key-0123"),
    );
    f.call(&*g, CallKind::Execute).unwrap();
    let dumped = f.read("env.json");
    assert!(
        !dumped.contains(SENTINEL),
        "another worker's key leaked: {dumped}"
    );
    let env: serde_json::Map<String, Value> = serde_json::from_str(&dumped).unwrap();
    assert_eq!(env["AGENT_API_KEY"], "sk-own-key-0123");
    assert_eq!(env["AGENT_MODE"], "ci");
    assert_eq!(env["RETRIES"], "2");
    assert_eq!(env["BATON_TEST_PASSED_ON"], "yes");
    assert_eq!(
        env.get("PATH").and_then(Value::as_str),
        std::env::var("PATH").ok().as_deref()
    );
    // Python may add LC_CTYPE itself when it coerces a C locale (PEP 538).
    let allowed = [
        "PATH",
        "HOME",
        "LANG",
        "TMPDIR",
        "AGENT_API_KEY",
        "AGENT_MODE",
        "RETRIES",
        "BATON_TEST_PASSED_ON",
        "LC_CTYPE",
        // The containment mark (no secret): what the agent starts inherits it, so it
        // can be found and ended with the turn.
        "BATON_TREE",
    ];
    let extra: Vec<_> = env
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .collect();
    assert!(extra.is_empty(), "unexpected variables: {extra:?}");
    // Nor does the key reach the saved output or an error message.
    let saved = std::fs::read_to_string(output_dir(f.ws(), "execute").join("stdout")).unwrap();
    assert!(!saved.contains("sk-own-key-0123"));
}

#[test]
fn the_agents_key_is_scrubbed_from_its_stderr_in_errors() {
    let f = Fixture::new();
    let cmd = f.agent(
        "sys.stderr.write('auth failed for key ' + os.environ['K'] + '\\n'); sys.exit(2)",
        "",
    );
    let g = gateway_with(&cmd, json!({"api_key_env": "K"}), Some("sk-scrub-me-42"));
    let err = f.call(&*g, CallKind::Execute).unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("sk-scrub-me-42"), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
}

/// Regression: Codex 0.171.0 echoes its prompt to stderr, so a failed run was reported
/// as the last 20 lines of the briefing with its `ERROR: unexpected status 401 …` at
/// the end; the error line alone is the message now.
#[test]
fn a_failed_agent_is_reported_by_its_last_error_line_not_its_echoed_prompt() {
    let f = Fixture::new();
    let cmd = f.agent(
        "sys.stdin.read(); sys.stderr.write('user\\n' + 'a line of the briefing\\n' * 30 + 'ERROR: Reconnecting... 1/5\\n' + 'ERROR: unexpected status 401 Unauthorized: Incorrect API key provided\\n' * 2); sys.exit(1)",
        "",
    );
    let g = gateway_with(&cmd, json!({}), None);
    let err = f.call(&*g, CallKind::Execute).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("(exit code 1): ERROR: unexpected status 401 Unauthorized: Incorrect API key provided (its output is in"),
        "{text}"
    );
    assert!(!text.contains("briefing"), "{text}");
}
