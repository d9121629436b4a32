//! The requests of a turn: one combined call by default (the work and the handoff in
//! one answer), or an execute and a handoff call when a worker is set to two calls.
//! Each is exactly `[system, user]`, built fresh from the compiled package: there is
//! no message buffer to carry a conversation across workers. Every user message starts
//! with the package, so a provider's prompt cache can reuse that prefix. Each call
//! shows only its own claim type (for one call, the one combined type), as a short
//! filled-in example rather than a schema dump: with both schemas in the handoff
//! prompt, small models mixed the two types' fields up (the schema itself still goes to
//! servers that enforce one, through the provider's structured-output option).

use std::sync::LazyLock;

use crate::claims::{
    ArtifactClaim, ArtifactMention, DecisionClaim, FailedAttemptClaim, HandoffReport, IssueClaim,
    ResolutionClaimInput, TurnAnswer, WorkerResult,
};
use crate::compiler::HandoffPackage;
use crate::state::Severity;

/// The same system prompt for every call and every worker (cache-friendly). Every word
/// is paid for on every call: it says only what the worker cannot read elsewhere.
pub const SYSTEM_PROMPT: &str = "You are one worker in a relay of models on a long task. \
The briefing, compiled from the task's record, is all you know of the work so far. What you \
return is a claim the engine checks: never claim something is verified, never invent work.";

/// A request as sent to a model: exactly two messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub system: String,
    pub user: String,
}

impl Prompt {
    /// The number of messages this request sends.
    pub const MESSAGES: u32 = 2;
}

/// A `WorkerResult` with every field filled in with what belongs there, built from the
/// type so it always parses.
static WORKER_RESULT_EXAMPLE: LazyLock<String> =
    LazyLock::new(|| pretty_example_text(&worker_result_filled()));

fn worker_result_filled() -> WorkerResult {
    WorkerResult {
        summary: "<what you did this turn, briefly>".into(),
        completed: vec!["<work you finished>".into()],
        steps_completed: vec!["<your step's id if finished, e.g. T2>".into()],
        decisions: vec![DecisionClaim {
            text: "<a decision to follow from now on>".into(),
            reason: Some("<why>".into()),
        }],
        artifacts: vec![ArtifactClaim {
            name: "<path>".into(),
            kind: Some("<document, code…>".into()),
            description: "<what it holds>".into(),
            content: Some("<content, if short>".into()),
        }],
        issues: vec![IssueClaim {
            title: "<an unsolved problem>".into(),
            severity: Severity::Medium,
            detail: Some("<details>".into()),
            gate: None,
        }],
        resolved_issues: vec![ResolutionClaimInput {
            issue: "<an open issue's id, e.g. I2>".into(),
            note: Some("<how it was fixed>".into()),
        }],
        failed_attempts: vec![FailedAttemptClaim {
            what: "<what you tried>".into(),
            why: "<why it failed>".into(),
        }],
        assumptions: vec!["<an assumption you made>".into()],
        last_action: "<the last thing you did>".into(),
        next_action: Some("<the next concrete action>".into()),
    }
}

/// A `TurnAnswer`: the result's fields, then the handoff's own.
static TURN_ANSWER_EXAMPLE: LazyLock<String> = LazyLock::new(|| {
    let r = worker_result_filled();
    let example = TurnAnswer {
        summary: r.summary,
        completed: r.completed,
        steps_completed: r.steps_completed,
        decisions: r.decisions,
        artifacts: r.artifacts,
        issues: r.issues,
        resolved_issues: r.resolved_issues,
        failed_attempts: r.failed_attempts,
        assumptions: r.assumptions,
        last_action: r.last_action,
        next_action: "<the exact next action>".into(),
        notes: "<what the next worker must know beyond the record>".into(),
        warnings: vec!["<what the next worker must not assume or must check>".into()],
    };
    example_text(&example)
});

/// A `HandoffReport` filled in the same way.
static HANDOFF_REPORT_EXAMPLE: LazyLock<String> = LazyLock::new(|| {
    let example = HandoffReport {
        notes: "<what the next worker must know beyond the record>".into(),
        warnings: vec!["<what the next worker must not assume or must check>".into()],
        last_action: "<the last thing you did>".into(),
        next_action: "<the exact next action>".into(),
        decisions: Vec::new(),
        artifacts: vec![ArtifactMention {
            name: "<a file the next worker should look at>".into(),
            note: Some("<why>".into()),
        }],
        issues: Vec::new(),
        resolved_issues: Vec::new(),
        failed_attempts: Vec::new(),
        assumptions: Vec::new(),
    };
    pretty_example_text(&example)
});

/// Pretty JSON of `example` without its empty lists, for the two calls of a turn in
/// `calls = "two"` mode: measured with SmolLM2-135M in schema mode, its execute call
/// looped inside the grammar to the output limit with the compact example below and
/// answered within it with this one.
fn pretty_example_text<T: serde::Serialize>(example: &T) -> String {
    let mut value = serde_json::to_value(example).unwrap_or_default();
    if let Some(map) = value.as_object_mut() {
        map.retain(|_, v| v.as_array().is_none_or(|a| !a.is_empty()));
    }
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// Compact JSON of `example`, one field a line in the type's own order (the summary
/// first, as a model writes it), without its empty lists. Pretty-printed, the same
/// example cost half as many tokens again in indentation, on every call.
fn example_text<T: serde::Serialize>(example: &T) -> String {
    let json = serde_json::to_string(example).unwrap_or_default();
    let fields: Vec<&str> = top_level_fields(&json)
        .into_iter()
        .filter(|f| !f.ends_with(":[]"))
        .collect();
    format!("{{{}}}", fields.join(",\n"))
}

/// The `"key":value` members of a compact JSON object, split at its top-level commas.
fn top_level_fields(json: &str) -> Vec<&str> {
    let Some(body) = json.strip_prefix('{').and_then(|b| b.strip_suffix('}')) else {
        return Vec::new();
    };
    let (mut fields, mut start, mut depth) = (Vec::new(), 0, 0i32);
    let (mut in_string, mut escaped) = (false, false);
    for (i, c) in body.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                fields.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    if start < body.len() {
        fields.push(&body[start..]);
    }
    fields
}

/// The filled-in example of a `WorkerResult` the execute prompt shows.
pub fn worker_result_example() -> &'static str {
    &WORKER_RESULT_EXAMPLE
}

/// The filled-in example of a `TurnAnswer` the combined prompt shows.
pub fn turn_answer_example() -> &'static str {
    &TURN_ANSWER_EXAMPLE
}

/// The filled-in example of a `HandoffReport` the handoff prompt shows.
pub fn handoff_report_example() -> &'static str {
    &HANDOFF_REPORT_EXAMPLE
}

fn execute_user(package: &HandoffPackage) -> String {
    let example = worker_result_example();
    let mut user = String::with_capacity(package.text.len() + example.len() + 512);
    user.push_str(&package.text);
    user.push_str("\n\n---\n## Your answer (call 1 of 2: the work)\n");
    user.push_str(
        "Do the assigned task, then answer with one JSON object like this one, your own \
         content in place of each <…>. `summary` and `last_action` are required; leave out \
         other fields you have nothing for, and add none. `severity`: low, medium, high or \
         critical.\n",
    );
    user.push_str(example);
    user.push('\n');
    user
}

/// Call 1: do the work.
pub fn execute_prompt(package: &HandoffPackage) -> Prompt {
    Prompt {
        system: SYSTEM_PROMPT.to_string(),
        user: execute_user(package),
    }
}

/// The one call of a turn (the default): do the work and hand off in one answer.
pub fn combined_prompt(package: &HandoffPackage) -> Prompt {
    let example = turn_answer_example();
    let mut user = String::with_capacity(package.text.len() + example.len() + 512);
    user.push_str(&package.text);
    user.push_str("\n\n---\n## Your answer\n");
    user.push_str(
        "Do the assigned task, then answer with one JSON object like this one, your own \
         content in place of each <…>. `summary`, `last_action` and `next_action` are \
         required; leave out other fields you have nothing for, and add none. `severity`: \
         low, medium, high or critical.\n",
    );
    user.push_str(example);
    user.push('\n');
    Prompt {
        system: SYSTEM_PROMPT.to_string(),
        user,
    }
}

/// Call 2: hand off. The package again (the cacheable prefix), then this turn's own
/// result (never an earlier turn's), and only the handoff's example.
pub fn handoff_prompt(package: &HandoffPackage, result_output: &str) -> Prompt {
    let example = handoff_report_example();
    let mut user =
        String::with_capacity(package.text.len() + result_output.len() + example.len() + 512);
    user.push_str(&package.text);
    user.push_str("\n\n---\n## Your result (this turn)\n");
    user.push_str(result_output);
    user.push_str(
        "\n\n---\n## Your handoff (call 2 of 2)\nWrite the handoff for the next worker as \
         one JSON object like this one, your own content in place of each <…>. \
         `last_action` and `next_action` are required; leave out other fields you have \
         nothing for. Your result above is already recorded: do not repeat its fields.\n",
    );
    user.push_str(example);
    user.push('\n');
    Prompt {
        system: SYSTEM_PROMPT.to_string(),
        user,
    }
}

/// A repair call: the failed call's request, then the answer it got and why that
/// answer was refused. Still exactly `[system, user]`, and still a prefix extension of
/// the turn's first request.
pub fn repair_prompt(failed_user: &str, answer: &str, error: &str) -> Prompt {
    let mut user = String::with_capacity(failed_user.len() + answer.len() + error.len() + 256);
    user.push_str(failed_user);
    user.push_str("\n## Your answer\n");
    user.push_str(answer);
    user.push_str("\n\n## It was refused\n");
    user.push_str(error);
    user.push_str(
        "\nAnswer again with only the corrected JSON object, shaped like the example above.\n",
    );
    Prompt {
        system: SYSTEM_PROMPT.to_string(),
        user,
    }
}

/// The system prompt for coding agents (command workers). No JSON is asked of them:
/// the commit of their worktree is the evidence, their final message the summary.
pub const AGENT_SYSTEM_PROMPT: &str = "You are one worker in a relay of language models and \
coding agents working on a long task. You receive a briefing compiled from the task's record; \
it is all you know about the work so far. Do the assigned task by editing files in your \
workspace, a git worktree, and nowhere else. Do not commit: baton commits your changes when \
you finish, and that commit is the evidence of your work (every file you changed is recorded \
from it). Do not install software, change system settings or fetch anything from the \
internet. Never claim that something is verified, and never invent work you did not do. When \
you are done, end with a short final message in plain words: what you did, what is still \
open, and the next action.";

/// Call 1 for a coding agent, and its only call: the briefing, the task, what baton
/// checks when the agent finishes (`checks`, e.g. the job's gate commands), and how to
/// leave notes the commit cannot carry. No schema and no URL: agents copied the
/// schema's fields into their answers, and one fetched the schema's `$schema` URL.
pub fn agent_prompt(package: &HandoffPackage, checks: &[String]) -> Prompt {
    let mut user = String::with_capacity(package.text.len() + 2048);
    user.push_str(&package.text);
    user.push_str("\n\n---\n## How to work\n");
    user.push_str(
        "Do the assigned task in your workspace. Baton commits what you change when you exit; \
         do not commit yourself and do not edit anything outside the workspace.\n",
    );
    if !checks.is_empty() {
        user.push_str(
            "\nWhen you finish, baton runs these checks in your workspace; make them pass, and \
             run them yourself before you stop:\n",
        );
        for check in checks {
            user.push_str("- ");
            user.push_str(check);
            user.push('\n');
        }
    }
    user.push_str(AGENT_NOTES_HELP);
    Prompt {
        system: AGENT_SYSTEM_PROMPT.to_string(),
        user,
    }
}

/// How an agent leaves notes, in plain words (the gateway names the file).
const AGENT_NOTES_HELP: &str = "\nWhen you are done, end with a short final message: what you \
did, what is still open, and the next action. If you also made decisions the next worker must \
know, found problems you did not fix, or tried something that failed, write them to the notes \
file named at the end of this briefing, as one JSON object with any of these fields (all \
optional): \"decisions\", a list of {\"text\", \"reason\"}; \"issues\", a list of {\"title\", \
\"severity\" (low, medium, high or critical), \"detail\"}; \"failed_attempts\", a list of \
{\"what\", \"why\"}; \"assumptions\", a list of sentences; \"warnings\", a list of sentences \
for the next worker; \"next_action\", one sentence. You need not list the files you changed: \
they are taken from the commit.\n";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claims::{parse_handoff_report, parse_worker_result};

    #[test]
    fn each_example_parses_as_its_own_claim_type_and_not_as_the_other() {
        let result = parse_worker_result(worker_result_example()).unwrap();
        assert!(result.warnings.is_empty(), "{:?}", result.warnings);
        assert_eq!(result.claim.decisions.len(), 1);
        let report = parse_handoff_report(handoff_report_example()).unwrap();
        assert!(report.warnings.is_empty(), "{:?}", report.warnings);
        assert!(!handoff_report_example().contains("\"decisions\": []"));
    }

    #[test]
    fn each_call_shows_only_its_own_claim_type_and_no_schema() {
        use crate::compiler::{Assignment, AssignmentKind};
        use crate::ids::{RunId, WorkerId};
        let package = HandoffPackage {
            run_id: RunId("r".into()),
            turn: 1,
            worker: WorkerId::new("w"),
            assignment: Assignment {
                kind: AssignmentKind::Continuation,
                step_id: None,
                task: "t".into(),
            },
            budget: 100,
            tokens: 10,
            estimator: "heuristic".into(),
            text: "## Assigned task\nT1 do it".into(),
            sections: Vec::new(),
            omitted_sections: Vec::new(),
            dropped: Vec::new(),
            over_budget: false,
            line: None,
        };
        let execute = execute_prompt(&package);
        let handoff = handoff_prompt(&package, r#"{"summary":"s","last_action":"a"}"#);
        let combined = combined_prompt(&package);
        let (result, report) = crate::claims::parse_turn_answer(turn_answer_example()).unwrap();
        assert!(result.warnings.is_empty(), "{:?}", result.warnings);
        assert!(!report.claim.notes.is_empty());
        assert!(combined.user.contains("\"notes\"") && combined.user.contains("\"summary\""));
        for p in [&execute, &handoff, &combined] {
            assert!(p.user.starts_with(&package.text));
            assert!(
                !p.user.contains("\"properties\""),
                "a schema dump: {}",
                p.user
            );
            assert!(!p.user.contains("http"), "a URL: {}", p.user);
        }
        assert!(execute.user.contains("\"steps_completed\""));
        // The handoff quotes this turn's result but shows no WorkerResult fields of
        // its own to copy.
        let after_result = handoff.user.split("## Your handoff").nth(1).unwrap();
        assert!(!after_result.contains("steps_completed"));
        assert!(!after_result.contains("\"summary\""));
        assert!(after_result.contains("\"next_action\""));
    }
}
