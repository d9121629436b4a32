//! Reading what an agent left when it exits: its final message (the result field of
//! its CLI's JSON output, its last-message file, or the end of its standard output)
//! and its notes (the notes file it wrote, else a JSON claim or the worker-contract
//! sections `SUMMARY:` / `EVIDENCE:` / `CHANGES:` / `RISKS:` / `BLOCKERS:` in its
//! final message). The engine makes the turn's claims of it (`baton_core::agent`);
//! nothing here decides whether anything is true.

use std::path::Path;

use baton_core::agent::AgentOutput;
use serde_json::{Map, Value, json};

use crate::Usage;

/// What the agent left.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lookup {
    Left {
        output: AgentOutput,
        usage: Usage,
    },
    /// The CLI's own envelope says the run failed (`"is_error": true`).
    AgentError(String),
}

/// Fields that mark a JSON object as a claim rather than a log event.
const CLAIM_FIELDS: &[&str] = &[
    "summary",
    "last_action",
    "next_action",
    "notes",
    "completed",
    "warnings",
];

/// Envelope fields that carry an agent's final message as text: Claude Code's
/// `--output-format json` (`{"type":"result","result":"…"}`) and Gemini CLI's
/// (`{"response":"…","stats":{…}}`).
const ENVELOPE_TEXT_FIELDS: &[&str] = &["result", "response"];

/// Bytes of standard output kept as the final message when the CLI has no other way
/// to give it (the whole output is in the turn's files).
const FINAL_FROM_STDOUT: usize = 4000;

/// Lines CLIs print about themselves, not the agent's message: aider's start-up banner
/// and its per-edit trailers (`Tokens: 2.1k sent…`, `Applied edit to …`, `Commit …`).
const TOOL_LINE_PREFIXES: &[&str] = &[
    "Aider v",
    "Main model:",
    "Weak model:",
    "Editor model:",
    "Git repo:",
    "Repo-map:",
    "Tokens: ",
    "Cost: ",
    "Applied edit to ",
    "Use /help",
    "Can't initialize prompt toolkit",
    "Analytics have been permanently disabled.",
];

pub(crate) fn is_tool_line(line: &str) -> bool {
    let t = line.trim();
    if TOOL_LINE_PREFIXES.iter().any(|p| t.starts_with(p)) {
        return true;
    }
    // `Added calc/core.py to the chat.`, `Commit 458d02d fix: …`
    if t.starts_with("Added ") && t.trim_end_matches('.').ends_with(" to the chat") {
        return true;
    }
    // aider 0.86 names a lone model `Model: openai/x with diff edit format`.
    if t.starts_with("Model: ") && t.ends_with(" edit format") {
        return true;
    }
    t.strip_prefix("Commit ").is_some_and(|rest| {
        let hex = rest.chars().take_while(char::is_ascii_hexdigit).count();
        hex >= 7 && rest[hex..].starts_with(' ')
    })
}

/// Reads what the agent left: `notes_file` (the `{claim_file}` path), the optional
/// `{last_message_file}`, and the tail of its standard output.
pub(crate) fn read(
    notes_file: &Path,
    last_message_file: Option<&Path>,
    stdout_tail: &[u8],
) -> Lookup {
    let stdout = String::from_utf8_lossy(stdout_tail);
    let objects = json_objects(&stdout);
    let mut usage = Usage::default();
    let mut final_message = None;
    // The last envelope decides; a failed one may carry its words in `error.message`
    // instead of a text field (Qwen Code's `{"is_error":true,"error":{"message":…}}`).
    if let Some(message) = objects
        .iter()
        .rev()
        .find(|(_, map)| envelope_text(map).is_some() || envelope_error(map).is_some())
        .and_then(|(_, map)| envelope_text(map).is_none().then(|| envelope_error(map)))
        .flatten()
    {
        return Lookup::AgentError(message.chars().take(2000).collect());
    }
    if let Some((field, text, map)) = objects
        .iter()
        .rev()
        .find_map(|(_, map)| envelope_text(map).map(|(f, t)| (f, t, map)))
    {
        if map.get("is_error") == Some(&Value::Bool(true)) {
            return Lookup::AgentError(text.chars().take(2000).collect());
        }
        usage = envelope_usage(map);
        final_message = Some((
            text.to_string(),
            format!("the `{field}` field of its JSON output"),
        ));
    }
    if final_message.is_none()
        && let Some(path) = last_message_file
        && let Ok(text) = std::fs::read_to_string(path)
        && !text.trim().is_empty()
    {
        final_message = Some((text, format!("its last-message file {}", path.display())));
    }
    let (final_message, source) = final_message.unwrap_or_else(|| {
        (
            stdout_message(&stdout),
            "the end of its standard output".to_string(),
        )
    });

    let (notes, notes_error) = match std::fs::read_to_string(notes_file) {
        Ok(text) => match json_objects(&text).into_iter().last() {
            Some((_, map)) => (Some(Value::Object(map)), None),
            None => (
                None,
                Some(format!(
                    "{} holds no JSON object ({} bytes)",
                    notes_file.display(),
                    text.len()
                )),
            ),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (notes_in(&final_message), None),
        Err(e) => (
            notes_in(&final_message),
            Some(format!("{} is unreadable: {e}", notes_file.display())),
        ),
    };
    Lookup::Left {
        output: AgentOutput {
            final_message,
            source,
            notes,
            notes_error,
        },
        usage,
    }
}

/// Notes written into the final message itself: a JSON claim, else the contract
/// sections.
fn notes_in(message: &str) -> Option<Value> {
    if let Some((_, map)) = json_objects(message)
        .into_iter()
        .rev()
        .find(|(_, m)| is_claim(m))
    {
        return Some(Value::Object(map));
    }
    Sections::parse(message).map(|s| s.to_claim())
}

/// The end of an agent's standard output as its final message: terminal escapes and
/// the CLI's own trailer lines dropped, at most [`FINAL_FROM_STDOUT`] bytes.
fn stdout_message(stdout: &str) -> String {
    let cleaned: Vec<String> = stdout
        .lines()
        .map(strip_ansi)
        .filter(|l| !is_tool_line(l))
        .collect();
    let text = cleaned.join("\n");
    let text = text.trim();
    if text.len() <= FINAL_FROM_STDOUT {
        return text.to_string();
    }
    let mut start = text.len() - FINAL_FROM_STDOUT;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

/// Removes CSI escape sequences (`ESC [ … letter`) and other ESC-led pairs.
pub(crate) fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        if chars.peek() == Some(&'[') {
            chars.next();
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            chars.next();
        }
    }
    out
}

fn is_claim(map: &Map<String, Value>) -> bool {
    CLAIM_FIELDS.iter().any(|f| map.contains_key(*f))
}

fn envelope_text(map: &Map<String, Value>) -> Option<(&'static str, &str)> {
    ENVELOPE_TEXT_FIELDS
        .iter()
        .find_map(|f| map.get(*f).and_then(Value::as_str).map(|t| (*f, t)))
}

/// The message of an envelope that says the run failed and has no text field.
fn envelope_error(map: &Map<String, Value>) -> Option<&str> {
    if map.get("is_error") != Some(&Value::Bool(true)) {
        return None;
    }
    map.get("error")?.get("message")?.as_str()
}

/// Claude Code reports Anthropic usage: cache reads and writes apart from
/// `input_tokens`, so the three are added up (see [`Usage`]).
fn envelope_usage(map: &Map<String, Value>) -> Usage {
    let Some(u) = map.get("usage").and_then(Value::as_object) else {
        return Usage::default();
    };
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let cached = n("cache_read_input_tokens");
    Usage {
        // Saturating: the numbers come from the agent's output, which may say anything.
        input_tokens: n("input_tokens")
            .saturating_add(cached)
            .saturating_add(n("cache_creation_input_tokens")),
        output_tokens: n("output_tokens"),
        cached_tokens: cached,
    }
}

/// Every top-level JSON object in `text`, in order, with its raw span. A `{` that
/// does not start valid JSON (prose, code) is skipped one character at a time.
pub(crate) fn json_objects(text: &str) -> Vec<(&str, Map<String, Value>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(offset) = text[at..].find('{') {
        let start = at + offset;
        let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Value>();
        match stream.next() {
            Some(Ok(Value::Object(map))) => {
                let end = start + stream.byte_offset();
                out.push((&text[start..end], map));
                at = end;
            }
            _ => at = start + 1,
        }
    }
    out
}

/// The worker contract, as plain-text agents write it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Sections {
    pub summary: Vec<String>,
    pub evidence: Vec<String>,
    pub changes: Vec<String>,
    pub risks: Vec<String>,
    pub blockers: Vec<String>,
}

#[derive(Clone, Copy)]
enum Heading {
    Summary,
    Evidence,
    Changes,
    Risks,
    Blockers,
}

const HEADINGS: &[(&str, Heading)] = &[
    ("summary", Heading::Summary),
    ("evidence", Heading::Evidence),
    ("changes", Heading::Changes),
    ("risks", Heading::Risks),
    ("blockers", Heading::Blockers),
];

impl Sections {
    /// Reads the sections; `None` without a SUMMARY. A heading seen twice keeps its
    /// last occurrence (an agent restating its report at the end).
    pub fn parse(text: &str) -> Option<Sections> {
        let mut sections = Sections::default();
        let mut current: Option<Heading> = None;
        let mut after_blank = false;
        for line in text.lines() {
            match heading(line) {
                Some((h, inline)) => {
                    let list = sections.list(h);
                    list.clear();
                    if let Some(item) = item(inline) {
                        list.push(item);
                    }
                    current = Some(h);
                    after_blank = false;
                }
                None => {
                    let t = line.trim();
                    if t.is_empty() {
                        after_blank = true;
                        continue;
                    }
                    // A section is its heading's own lines and the list under it: a
                    // paragraph after a blank line, a rule, a fence or a CLI's trailer
                    // (aider's `Tokens: …`, `Applied edit to …`) is not part of it.
                    if t.starts_with('#')
                        || t == "---"
                        || t == "```"
                        || is_tool_line(t)
                        || (after_blank && !is_list_item(t))
                    {
                        current = None;
                    } else if let (Some(h), Some(item)) = (current, item(t)) {
                        sections.list(h).push(item);
                    }
                    after_blank = false;
                }
            }
        }
        (!sections.summary.is_empty()).then_some(sections)
    }

    fn list(&mut self, h: Heading) -> &mut Vec<String> {
        match h {
            Heading::Summary => &mut self.summary,
            Heading::Evidence => &mut self.evidence,
            Heading::Changes => &mut self.changes,
            Heading::Risks => &mut self.risks,
            Heading::Blockers => &mut self.blockers,
        }
    }

    /// Claim-shaped JSON (a `WorkerResult`).
    pub fn to_claim(&self) -> Value {
        let summary = self.summary.join(" ");
        let last_action = self.summary.first().cloned().unwrap_or_default();
        let mut completed = self.evidence.clone();
        let mut files = Vec::new();
        for line in &self.changes {
            match file_change(line) {
                Some(change) => files.push(change),
                // A change that names no file is still work done; keep it.
                None => completed.push(line.clone()),
            }
        }
        let issue = |title: &String, severity: &str| json!({"title": title, "severity": severity});
        let mut issues: Vec<Value> = self.risks.iter().map(|r| issue(r, "medium")).collect();
        issues.extend(self.blockers.iter().map(|b| issue(b, "high")));
        let mut claim = json!({
            "summary": summary,
            "completed": completed,
            "artifacts": files.iter().map(|(name, description)| json!({
                "name": name, "description": description
            })).collect::<Vec<_>>(),
            "issues": issues,
            "last_action": last_action,
        });
        if let Some(first) = self.blockers.first() {
            claim["next_action"] = json!(first);
        }
        claim
    }
}

/// `SUMMARY:`, `## Summary`, `**SUMMARY:** text`, `### RISKS`: the heading and any
/// text after it on the same line.
fn heading(line: &str) -> Option<(Heading, &str)> {
    let t = line.trim();
    let hashed = t.starts_with('#');
    let t = t.trim_start_matches('#').trim_start();
    let t = t.trim_start_matches(['*', '_']);
    let (name, h) = HEADINGS.iter().find(|(name, _)| {
        t.get(..name.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(name))
    })?;
    let word = &t[..name.len()];
    let rest = t[name.len()..].trim_start_matches(['*', '_']);
    if let Some(after) = rest.strip_prefix(':') {
        return Some((*h, after.trim_start_matches(['*', '_']).trim()));
    }
    // Without a colon, only a markdown heading or a bare upper-case word on its own
    // line is a heading ("Summary of the run" is prose).
    let bare = rest.trim().is_empty();
    (bare && (hashed || word == word.to_ascii_uppercase())).then_some((*h, ""))
}

/// A bulleted or numbered line.
fn is_list_item(line: &str) -> bool {
    let t = line.trim_start();
    if ["- ", "* ", "+ ", "• "].iter().any(|b| t.starts_with(b)) {
        return true;
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") "))
}

/// One list item: bullets and numbering stripped; empty and "none" lines dropped.
fn item(line: &str) -> Option<String> {
    let mut t = line.trim();
    for bullet in ["- ", "* ", "+ ", "• "] {
        if let Some(rest) = t.strip_prefix(bullet) {
            t = rest.trim_start();
            break;
        }
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0
        && let Some(rest) = t[digits..]
            .strip_prefix(". ")
            .or_else(|| t[digits..].strip_prefix(") "))
    {
        t = rest.trim_start();
    }
    for box_ in ["[x] ", "[X] ", "[ ] "] {
        if let Some(rest) = t.strip_prefix(box_) {
            t = rest;
        }
    }
    let t = t.trim();
    let bare = t.trim_end_matches('.').to_ascii_lowercase();
    if t.is_empty()
        || matches!(
            bare.as_str(),
            "none" | "n/a" | "-" | "nothing" | "no changes"
        )
    {
        return None;
    }
    Some(t.to_string())
}

/// `path: description` (or `path — description`, `path - description`) when the
/// left side looks like a file path: no spaces.
fn file_change(line: &str) -> Option<(String, String)> {
    let (name, description) = [": ", " — ", " - "]
        .iter()
        .find_map(|sep| line.split_once(sep))
        .unwrap_or((line, ""));
    let name = name.trim().trim_matches(['`', '*', '"', '\'']);
    if name.is_empty() || name.contains(char::is_whitespace) {
        return None;
    }
    let description = description.trim();
    let description = if description.is_empty() {
        "changed (no description given)".to_string()
    } else {
        description.to_string()
    };
    Some((name.to_string(), description))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_level_objects_are_found_past_prose_and_stray_braces() {
        let text =
            "use {briefing_file} then { not json\n{\"a\":{\"b\":1}} and {\"summary\":\"s\"} end";
        let found: Vec<_> = json_objects(text).into_iter().map(|(raw, _)| raw).collect();
        assert_eq!(found, ["{\"a\":{\"b\":1}}", "{\"summary\":\"s\"}"]);
    }

    #[test]
    fn headings_in_their_usual_spellings() {
        let h = |l: &str| heading(l).map(|(h, rest)| (h as u8, rest.to_string()));
        assert_eq!(
            h("SUMMARY: did it"),
            Some((Heading::Summary as u8, "did it".into()))
        );
        assert_eq!(
            h("## Summary"),
            Some((Heading::Summary as u8, String::new()))
        );
        assert_eq!(
            h("**RISKS:** none"),
            Some((Heading::Risks as u8, "none".into()))
        );
        assert_eq!(
            h("BLOCKERS"),
            Some((Heading::Blockers as u8, String::new()))
        );
        assert_eq!(h("Summary of the run"), None);
        assert_eq!(h("Changes were made"), None);
    }

    #[test]
    fn contract_becomes_a_worker_result() {
        let text = "noise\n## SUMMARY\nAdded the ledger client.\nIt compiles.\n\n## EVIDENCE\n- cargo test: 12 passed\n\n## CHANGES\n- `src/ledger.rs`: new client\n- Refactored the error type\n\nRISKS:\n- retries untested\nBLOCKERS: none\n";
        let claim = Sections::parse(text).unwrap().to_claim();
        assert_eq!(claim["summary"], "Added the ledger client. It compiles.");
        assert_eq!(claim["last_action"], "Added the ledger client.");
        assert!(claim.get("next_action").is_none());
        assert_eq!(
            claim["completed"],
            json!(["cargo test: 12 passed", "Refactored the error type"])
        );
        assert_eq!(
            claim["artifacts"],
            json!([{"name": "src/ledger.rs", "description": "new client"}])
        );
        assert_eq!(
            claim["issues"],
            json!([{"title": "retries untested", "severity": "medium"}])
        );
        assert!(Sections::parse("no sections here").is_none());
    }

    /// Regression: usage numbers near `u64::MAX` in an agent's envelope overflowed
    /// when the cache counts were added (a panic in debug builds).
    #[test]
    fn huge_usage_in_an_envelope_saturates() {
        let max = u64::MAX;
        let stdout = format!(
            r#"{{"type":"result","result":"{{\"summary\":\"s\"}}","usage":{{"input_tokens":{max},"cache_read_input_tokens":{max},"cache_creation_input_tokens":{max},"output_tokens":1}}}}"#
        );
        let Lookup::Left { usage, .. } = read(
            Path::new("/nonexistent/claim.json"),
            None,
            stdout.as_bytes(),
        ) else {
            panic!("no output read from {stdout}")
        };
        assert_eq!(usage.input_tokens, u64::MAX);
        assert_eq!(usage.output_tokens, 1);
    }

    /// Regression (issue 8, item 5): everything after the last heading was taken, so
    /// aider's trailer lines became high-severity issues and the next action.
    /// Regression: aider 0.86.2's real banner (`Analytics have been permanently
    /// disabled.`, `Model: … with diff edit format`, no `Main model:` line) was kept as
    /// the start of its final message, so the summary of an agent that wrote no
    /// contract sections began with it.
    #[test]
    fn aider_0_86_banner_lines_are_not_the_final_message() {
        let stdout = "Analytics have been permanently disabled.\n\nAider v0.86.2\n\
                      Model: openai/baton-fake with diff edit format\n\
                      Git repo: ../../../.git/worktrees/j1 with 3 files\n\
                      Repo-map: using 4000.0 tokens, auto refresh\n\n\
                      I fixed add().\n\nTokens: 2.7k sent, 60 received.\nApplied edit to calc.py\n";
        assert_eq!(stdout_message(stdout), "I fixed add().");
        assert!(!is_tool_line("Model: the one we chose"));
    }

    #[test]
    fn aider_trailers_after_the_contract_are_not_claims() {
        let text = "SUMMARY: Fixed add() in calc/core.py.\nBLOCKERS:\n- none\n\nTokens: 2.1k sent, 150 received. Cost: $0.00 message, $0.00 session.\nApplied edit to calc/core.py\nCommit 458d02d fix: add()\n";
        let claim = Sections::parse(text).unwrap().to_claim();
        assert_eq!(claim["issues"], json!([]));
        assert!(claim.get("next_action").is_none());
        // A trailer right under a heading, with no blank line, ends the section too.
        let text =
            "SUMMARY: done\nRISKS:\n- flaky network test\nApplied edit to a.py\nsome prose\n";
        let claim = Sections::parse(text).unwrap().to_claim();
        assert_eq!(
            claim["issues"],
            json!([{"title": "flaky network test", "severity": "medium"}])
        );
        // A paragraph after a blank line is not part of the list above it.
        let text = "SUMMARY: done\nBLOCKERS:\n- the API key is missing\n\nI hope this helps!\n";
        let claim = Sections::parse(text).unwrap().to_claim();
        assert_eq!(claim["issues"].as_array().unwrap().len(), 1);
        assert_eq!(claim["next_action"], "the API key is missing");
    }

    #[test]
    fn the_final_message_is_read_from_the_envelope_the_file_or_stdout() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("claim.json");
        let last = dir.path().join("last.txt");
        let envelope = r#"{"type":"result","is_error":false,"result":"Fixed it."}"#;
        let Lookup::Left { output, .. } = read(&notes, Some(&last), envelope.as_bytes()) else {
            panic!()
        };
        assert_eq!(output.final_message, "Fixed it.");
        assert!(output.notes.is_none());

        std::fs::write(&last, "Changed calc/core.py; tests pass.\n").unwrap();
        let Lookup::Left { output, .. } = read(&notes, Some(&last), b"progress noise\n") else {
            panic!()
        };
        assert_eq!(
            output.final_message.trim(),
            "Changed calc/core.py; tests pass."
        );

        let stdout = "Aider v0.86.2\nMain model: openai/x\n\x1b[1mI fixed the bug.\x1b[0m\nTokens: 1k sent, 20 received.\nApplied edit to calc/core.py\n";
        let Lookup::Left { output, .. } = read(&notes, None, stdout.as_bytes()) else {
            panic!()
        };
        assert_eq!(output.final_message, "I fixed the bug.");

        std::fs::write(&notes, "not json").unwrap();
        let Lookup::Left { output, .. } = read(&notes, None, b"done") else {
            panic!()
        };
        assert!(output.notes_error.unwrap().contains("holds no JSON object"));
        std::fs::write(&notes, r#"{"title":"WorkerResult","decisions":[]}"#).unwrap();
        let Lookup::Left { output, .. } = read(&notes, None, b"done") else {
            panic!()
        };
        assert_eq!(output.notes.unwrap()["title"], "WorkerResult");

        let error = r#"{"type":"result","is_error":true,"result":"Not logged in"}"#;
        assert_eq!(
            read(&notes, None, error.as_bytes()),
            Lookup::AgentError("Not logged in".into())
        );
    }

    /// Regression: Qwen Code 0.24.4's failed run (`--output-format json`) carries its
    /// message in `error.message`, with no `result`; baton reported the end of
    /// stderr (a safe-mode banner) instead.
    #[test]
    fn a_failed_envelope_without_a_result_is_the_agents_error_message() {
        let dir = tempfile::tempdir().unwrap();
        let notes = dir.path().join("claim.json");
        let error = r#"[{"type":"result","subtype":"error_during_execution","is_error":true,"error":{"message":"Missing API key for OpenAI-compatible auth."}}]"#;
        assert_eq!(
            read(&notes, None, error.as_bytes()),
            Lookup::AgentError("Missing API key for OpenAI-compatible auth.".into())
        );
        // An error object without `is_error` is a log event, not the verdict.
        let event = r#"{"type":"log","error":{"message":"retrying"}} done"#;
        assert!(matches!(
            read(&notes, None, event.as_bytes()),
            Lookup::Left { .. }
        ));
    }

    mod properties {
        use proptest::prelude::*;

        use super::*;

        fn agent_output() -> impl Strategy<Value = String> {
            prop_oneof![
                ".{0,300}",
                "(SUMMARY|## Evidence|\\*\\*CHANGES:\\*\\*|RISKS|BLOCKERS:|- |`[a-z/.]{0,10}`: |[a-z ]{0,20}|\n|\\{|\\}|\"summary\":|\"result\":|\"usage\":|[0-9]{1,25}|,){0,60}",
            ]
        }

        proptest! {
            /// Whatever an agent prints, reading it returns an outcome and never
            /// panics; what it left serialises.
            #[test]
            fn reading_an_agent_is_total(stdout in agent_output()) {
                if let Lookup::Left { output, .. } =
                    read(Path::new("/nonexistent/claim.json"), None, stdout.as_bytes())
                {
                    prop_assert!(serde_json::to_string(&output).is_ok());
                }
            }

            #[test]
            fn envelope_usage_is_total(
                input in any::<u64>(),
                read in any::<u64>(),
                write in any::<u64>(),
                output in any::<u64>(),
            ) {
                let envelope = json!({"result": "x", "usage": {
                    "input_tokens": input, "cache_read_input_tokens": read,
                    "cache_creation_input_tokens": write, "output_tokens": output}});
                let Value::Object(map) = envelope else { unreachable!() };
                let usage = envelope_usage(&map);
                prop_assert!(usage.input_tokens >= input.max(read).max(write));
                prop_assert_eq!(usage.output_tokens, output);
            }

            #[test]
            fn sections_parse_is_total(text in agent_output()) {
                if let Some(sections) = Sections::parse(&text) {
                    prop_assert!(!sections.summary.is_empty());
                    let _ = sections.to_claim();
                }
            }
        }
    }
}
