//! Finding an agent's claim after it exits: the claim file it wrote, else the last
//! JSON claim on stdout (unwrapping a CLI's own result envelope), else the worker
//! contract sections (`SUMMARY:` / `EVIDENCE:` / `CHANGES:` / `RISKS:` /
//! `BLOCKERS:`) turned into claim-shaped JSON. The engine validates whatever is
//! found; nothing here decides whether a claim is true.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::Usage;

/// Which claim the call asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ClaimKind {
    /// A `WorkerResult` (execute calls).
    Result,
    /// A `HandoffReport` (handoff calls).
    Report,
}

/// A claim found in the agent's output, as JSON text.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Found {
    pub text: String,
    pub usage: Usage,
    pub source: &'static str,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lookup {
    Found(Found),
    /// The CLI's own envelope says the run failed (`"is_error": true`).
    AgentError(String),
    /// Nothing usable; each entry says where we looked and what was there.
    NotFound(Vec<String>),
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

pub(crate) fn find(claim_file: &Path, stdout_tail: &[u8], kind: ClaimKind) -> Lookup {
    let mut looked = Vec::new();
    match std::fs::read_to_string(claim_file) {
        Ok(text) => {
            match json_objects(&text)
                .into_iter()
                .rev()
                .find(|(_, m)| is_claim(m))
            {
                Some((raw, _)) => {
                    return Lookup::Found(Found {
                        text: raw.to_string(),
                        usage: Usage::default(),
                        source: "claim file",
                    });
                }
                None => looked.push(format!(
                    "{} exists but holds no JSON claim ({} bytes)",
                    claim_file.display(),
                    text.len()
                )),
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            looked.push(format!("{} (not written)", claim_file.display()));
        }
        Err(e) => looked.push(format!("{} (unreadable: {e})", claim_file.display())),
    }

    let stdout = String::from_utf8_lossy(stdout_tail);
    let objects = json_objects(&stdout);
    for (raw, map) in objects.iter().rev() {
        if is_claim(map) {
            return Lookup::Found(Found {
                text: raw.to_string(),
                usage: Usage::default(),
                source: "stdout JSON",
            });
        }
        if let Some((field, text)) = envelope_text(map) {
            if map.get("is_error") == Some(&Value::Bool(true)) {
                return Lookup::AgentError(text.chars().take(2000).collect());
            }
            let usage = envelope_usage(map);
            if let Some((raw, _)) = json_objects(text)
                .into_iter()
                .rev()
                .find(|(_, m)| is_claim(m))
            {
                return Lookup::Found(Found {
                    text: raw.to_string(),
                    usage,
                    source: "stdout envelope",
                });
            }
            if let Some(sections) = Sections::parse(text) {
                return Lookup::Found(Found {
                    text: sections.to_claim(kind).to_string(),
                    usage,
                    source: "contract sections in the envelope",
                });
            }
            looked.push(format!(
                "the agent's final message (the `{field}` field of its JSON output) holds neither a JSON claim nor a SUMMARY section"
            ));
            return Lookup::NotFound(looked);
        }
    }
    looked.push(match objects.len() {
        0 => "stdout: no JSON object".to_string(),
        n => format!(
            "stdout: {n} JSON object(s), none with a claim field ({})",
            CLAIM_FIELDS.join(", ")
        ),
    });
    if let Some(sections) = Sections::parse(&stdout) {
        return Lookup::Found(Found {
            text: sections.to_claim(kind).to_string(),
            usage: Usage::default(),
            source: "contract sections",
        });
    }
    looked.push("stdout: no SUMMARY/EVIDENCE/CHANGES/RISKS/BLOCKERS sections".into());
    Lookup::NotFound(looked)
}

fn is_claim(map: &Map<String, Value>) -> bool {
    CLAIM_FIELDS.iter().any(|f| map.contains_key(*f))
}

fn envelope_text(map: &Map<String, Value>) -> Option<(&'static str, &str)> {
    ENVELOPE_TEXT_FIELDS
        .iter()
        .find_map(|f| map.get(*f).and_then(Value::as_str).map(|t| (*f, t)))
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
        for line in text.lines() {
            match heading(line) {
                Some((h, inline)) => {
                    let list = sections.list(h);
                    list.clear();
                    if let Some(item) = item(inline) {
                        list.push(item);
                    }
                    current = Some(h);
                }
                None => {
                    let t = line.trim();
                    if t.starts_with('#') || t == "---" || t == "```" {
                        current = None;
                    } else if let (Some(h), Some(item)) = (current, item(t)) {
                        sections.list(h).push(item);
                    }
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

    /// Claim-shaped JSON: a `WorkerResult` or a `HandoffReport`.
    pub fn to_claim(&self, kind: ClaimKind) -> Value {
        let summary = self.summary.join(" ");
        let last_action = self.summary.first().cloned().unwrap_or_default();
        let next_action = self
            .blockers
            .first()
            .cloned()
            .unwrap_or_else(|| "Review the changes".to_string());
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
        let blockers: Vec<Value> = self.blockers.iter().map(|b| issue(b, "high")).collect();
        match kind {
            ClaimKind::Result => {
                issues.extend(blockers);
                json!({
                    "summary": summary,
                    "completed": completed,
                    "artifacts": files.iter().map(|(name, description)| json!({
                        "name": name, "description": description
                    })).collect::<Vec<_>>(),
                    "issues": issues,
                    "last_action": last_action,
                    "next_action": next_action,
                })
            }
            ClaimKind::Report => json!({
                "notes": summary,
                "warnings": self.risks,
                "last_action": last_action,
                "next_action": next_action,
                "artifacts": files.iter().map(|(name, description)| json!({
                    "name": name, "note": description
                })).collect::<Vec<_>>(),
                "issues": blockers,
            }),
        }
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

/// A `HandoffReport` derived from this turn's execute claim, for agents run once per
/// turn (`handoff = "derive"`).
pub(crate) fn derive_report(result: &Map<String, Value>) -> Value {
    let text = |k: &str| result.get(k).and_then(Value::as_str).map(str::to_string);
    let summary = text("summary").unwrap_or_default();
    let warnings: Vec<String> = result
        .get("issues")
        .and_then(Value::as_array)
        .map(|issues| {
            issues
                .iter()
                .filter_map(|i| match i {
                    Value::String(s) => Some(s.clone()),
                    Value::Object(o) => o.get("title").and_then(Value::as_str).map(str::to_string),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let last_action = text("last_action")
        .or_else(|| summary.lines().next().map(str::to_string))
        .unwrap_or_default();
    let next_action = text("next_action").unwrap_or_else(|| "Review the changes".into());
    json!({
        "notes": summary,
        "warnings": warnings,
        "last_action": last_action,
        "next_action": next_action,
    })
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
        let claim = Sections::parse(text).unwrap().to_claim(ClaimKind::Result);
        assert_eq!(claim["summary"], "Added the ledger client. It compiles.");
        assert_eq!(claim["last_action"], "Added the ledger client.");
        assert_eq!(claim["next_action"], "Review the changes");
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
        let report = Sections::parse(text).unwrap().to_claim(ClaimKind::Report);
        assert_eq!(report["warnings"], json!(["retries untested"]));
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
        let Lookup::Found(found) = find(
            Path::new("/nonexistent/claim.json"),
            stdout.as_bytes(),
            ClaimKind::Result,
        ) else {
            panic!("no claim found in {stdout}")
        };
        assert_eq!(found.usage.input_tokens, u64::MAX);
        assert_eq!(found.usage.output_tokens, 1);
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
            /// Whatever an agent prints, finding its claim returns an outcome and never
            /// panics; a found claim is JSON.
            #[test]
            fn finding_a_claim_is_total(stdout in agent_output(), report in any::<bool>()) {
                let kind = if report { ClaimKind::Report } else { ClaimKind::Result };
                if let Lookup::Found(found) =
                    find(Path::new("/nonexistent/claim.json"), stdout.as_bytes(), kind)
                {
                    prop_assert!(serde_json::from_str::<Value>(&found.text).is_ok());
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
                    let _ = sections.to_claim(ClaimKind::Result);
                }
            }
        }
    }
}
