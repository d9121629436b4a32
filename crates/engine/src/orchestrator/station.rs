//! A station decides what a call asks for and how its answer is read; the call path
//! (retry, repair, record, cost, scrub) is the same for every station. A build step's
//! claims are one station, the judge's verdict another. Gates are a station without a
//! model ([`GateStation`]): what they observe on the turn's commit is folded into the
//! reconciled state by the same turn.

use baton_core::prompt::{self, Prompt};
use baton_core::reconciler::{self, ReconcileOutcome, TurnContext};
use baton_core::state::ExecutionState;
use baton_core::turn::{CallKind, GateResult, WorkspaceTurn};
use baton_protocol::EventKind;
use serde_json::Value;

/// What a station asks of a model and how it reads the answer.
pub(crate) trait Station {
    /// What the station reads out of an answer.
    type Answer;

    /// The JSON Schema the answer to `call` must match (sent where the gateway enforces
    /// one, and named in a short-answer note).
    fn schema(&self, call: CallKind) -> &Value;

    /// Reads an answer, or says what is wrong with it.
    fn read(&self, raw: &str) -> Result<Self::Answer, Unread>;

    /// The repair call's prompt after the answer `raw` to `asked` was not usable.
    fn repair_prompt(&self, asked: &Prompt, raw: &str, problem: &str) -> Prompt {
        prompt::repair_prompt(&asked.user, raw, problem)
    }
}

/// An answer a station could not use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unread {
    pub problem: String,
    /// Whether asking again with the problem quoted may fix it (a malformed answer),
    /// rather than the same answer coming back (a claim the engine refuses).
    pub repairable: bool,
}

/// The build step: a worker's claims (result, handoff report, or both in one answer).
pub(crate) struct Claims<T> {
    pub call: CallKind,
    pub parse: fn(&str) -> baton_core::Result<T>,
}

impl<T> Station for Claims<T> {
    type Answer = T;

    fn schema(&self, call: CallKind) -> &Value {
        debug_assert!(call == self.call || self.call.repair() == Some(call));
        super::calls::schema_of(call)
    }

    fn read(&self, raw: &str) -> Result<T, Unread> {
        (self.parse)(raw).map_err(|e| Unread {
            problem: e.to_string(),
            repairable: e.is_model_output_error(),
        })
    }
}

/// The gates' station. Not a [`Station`]: that one's whole shape (a schema, an answer
/// to read, a repair prompt) is a model call's, and a gate has no answer to read, only an
/// exit code. It runs after the reconciler, when the turn pipeline finds it due from the
/// reconciled state, on the commit the workspace made of the turn before reconciling.
pub trait GateStation: Send + Sync {
    /// Whether the gates run after every turn that committed its claims, not only when
    /// the turn pipeline finds them due (the end of the plan, a gate-fix turn).
    fn every_turn(&self) -> bool;

    /// Runs every gate on `input.commit`, saying each start and finish through
    /// `input.emit` as it happens. The gates' side effects on the worktree are undone.
    fn run(&self, input: &GateInput<'_>) -> crate::Result<GateOutcome>;
}

/// What the gates are run on.
#[derive(Clone, Copy)]
pub struct GateInput<'a> {
    pub turn: u32,
    /// The turn's commit: the one its claims were verified against.
    pub commit: &'a str,
    /// The engine stamps the event, publishes it live and commits it with the turn.
    pub emit: &'a (dyn Fn(EventKind) + Sync),
}

/// What the gates observed: facts, which enter the record only through [`Self::fold`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateOutcome {
    pub results: Vec<GateResult>,
    /// About the run itself (a gate changed files, which were set aside).
    pub warnings: Vec<String>,
}

impl GateOutcome {
    /// Folds the gates into the reconciled turn: a failing gate opens (or reaffirms) its
    /// engine-stamped issue, a passing one closes the issues that name it, and the
    /// results join the turn's workspace record.
    pub fn fold(
        self,
        next: &mut ExecutionState,
        ctx: &TurnContext<'_>,
        outcome: &mut ReconcileOutcome,
        workspace: &mut WorkspaceTurn,
    ) {
        outcome.warnings.extend(self.warnings);
        reconciler::apply_gates(next, ctx, &self.results, outcome);
        workspace.gates = self.results;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use baton_core::tokens::HeuristicEstimator;
    use baton_gateway::{Gateway, ModelRequest, ModelResponse, Usage};
    use serde_json::json;

    use super::*;
    use crate::clock::SystemClock;
    use crate::config::WorkerConfig;
    use crate::orchestrator::calls::{Caller, NoAnswer};
    use crate::orchestrator::reshape::Reshape;

    /// Answers from a list, and keeps the schema and user message of every request.
    #[derive(Debug, Default)]
    struct Scripted {
        answers: Mutex<Vec<&'static str>>,
        seen: Mutex<Vec<(Value, String)>>,
    }

    impl Gateway for Scripted {
        fn complete(&self, request: &ModelRequest<'_>) -> baton_gateway::Result<ModelResponse> {
            self.seen
                .lock()
                .unwrap()
                .push((request.schema.clone(), request.user.to_string()));
            Ok(ModelResponse {
                text: self.answers.lock().unwrap().remove(0).into(),
                usage: Usage::default(),
                sent: baton_gateway::Sent::pair(request),
            })
        }
    }

    /// A station of its own: its schema, a reader that wants a number, its repair.
    struct Numbers(Value);

    impl Station for Numbers {
        type Answer = u32;

        fn schema(&self, _call: CallKind) -> &Value {
            &self.0
        }

        fn read(&self, raw: &str) -> Result<u32, Unread> {
            raw.trim().parse().map_err(|_| Unread {
                problem: format!("\"{raw}\" is not a number"),
                repairable: !raw.contains("never"),
            })
        }

        fn repair_prompt(&self, asked: &Prompt, _raw: &str, problem: &str) -> Prompt {
            Prompt {
                system: asked.system.clone(),
                user: format!("NUMBERS ONLY: {problem}"),
            }
        }
    }

    fn ask(gateway: &Scripted, repairs: u32) -> (Result<(u32, String), NoAnswer>, usize) {
        let worker = WorkerConfig::mock("w", "m");
        let (redactor, cancel, reshape) = (
            baton_gateway::Redactor::default(),
            baton_gateway::Cancel::new(),
            Reshape::default(),
        );
        let caller = Caller {
            worker: &worker,
            gateway: Some(gateway),
            estimator: &HeuristicEstimator,
            system_tokens: 1,
            briefing: None,
            redactor: &redactor,
            cancel: &cancel,
            clock: &SystemClock,
            events: None,
            reshape: &reshape,
            workspace: None,
            output: None,
            repair_attempts: repairs,
        };
        let station = Numbers(json!({"type": "integer", "title": "numbers"}));
        let prompt = Prompt {
            system: "s".into(),
            user: "How many?".into(),
        };
        let mut calls = Vec::new();
        let out = caller.call_for_answer(
            &station,
            prompt,
            CallKind::Execute,
            0,
            &mut calls,
            &mut Vec::new(),
        );
        (out, calls.len())
    }

    #[test]
    fn a_stations_schema_reader_and_repair_prompt_are_the_ones_the_call_uses() {
        let gateway = Scripted::default();
        *gateway.answers.lock().unwrap() = vec!["seven", "7"];
        let (out, calls) = ask(&gateway, 1);
        assert_eq!(out.unwrap().0, 7);
        assert_eq!(calls, 2);
        let seen = gateway.seen.lock().unwrap();
        assert!(seen.iter().all(|(schema, _)| schema["title"] == "numbers"));
        assert_eq!(seen[1].1, "NUMBERS ONLY: \"seven\" is not a number");
    }

    #[test]
    fn an_answer_its_station_says_no_repair_fixes_is_not_repaired() {
        let gateway = Scripted::default();
        *gateway.answers.lock().unwrap() = vec!["never"];
        let (out, calls) = ask(&gateway, 3);
        assert!(
            matches!(out, Err(NoAnswer::Unread { ref problem, .. }) if problem.contains("never")),
            "{out:?}"
        );
        assert_eq!(calls, 1);
    }
}
