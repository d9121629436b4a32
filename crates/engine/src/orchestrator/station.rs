//! A station decides what a call asks for and how its answer is read; the call path
//! (retry, repair, record, cost, scrub) is the same for every station. A build step's
//! claims are one station, the judge's verdict another.

use baton_core::prompt::{self, Prompt};
use baton_core::turn::CallKind;
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
