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
