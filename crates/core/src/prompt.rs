//! The two requests of a turn. Each is exactly `[system, user]`, built fresh from the
//! compiled package: there is no message buffer to carry a conversation across workers.
//! The handoff request's user message starts with the execute request's user message,
//! so a provider's prompt cache can reuse the prefix.

use crate::claims::{handoff_report_schema_text, worker_result_schema_text};
use crate::compiler::HandoffPackage;

/// The same system prompt for both calls and every worker (cache-friendly).
pub const SYSTEM_PROMPT: &str = "You are one worker in a relay of language models and agents \
working on a long task. You receive a briefing compiled from the task's canonical record; it \
is all you know about the work so far. Do the assigned task, then report. Everything you \
return is a claim: the engine checks it before it becomes part of the record. Never claim \
that something is verified, and never invent work you did not do. Answer with one JSON \
object and nothing else.";

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

fn execute_user(package: &HandoffPackage) -> String {
    let schema = worker_result_schema_text();
    let mut user = String::with_capacity(package.text.len() + schema.len() + 256);
    user.push_str(&package.text);
    user.push_str("\n\n---\n## Your answer (call 1 of 2: the work)\n");
    user.push_str(
        "Do the assigned task. Return a JSON object (a WorkerResult) matching this JSON Schema:\n",
    );
    user.push_str(schema);
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

/// Call 2: hand off. Repeats call 1's messages as its prefix, then quotes this turn's
/// own result (never an earlier turn's).
pub fn handoff_prompt(package: &HandoffPackage, result_output: &str) -> Prompt {
    let mut user = execute_user(package);
    user.push_str("\n## Your result (this turn)\n");
    user.push_str(result_output);
    user.push_str(
        "\n\n---\n## Your handoff (call 2 of 2)\nWrite the handoff for the next worker: what \
         they must know that the record does not say, what they must not assume, the last \
         action and the exact next action. Return a JSON object (a HandoffReport) matching \
         this JSON Schema:\n",
    );
    user.push_str(handoff_report_schema_text());
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
        "\nAnswer again with only the corrected JSON object, matching the schema above.\n",
    );
    Prompt {
        system: SYSTEM_PROMPT.to_string(),
        user,
    }
}
