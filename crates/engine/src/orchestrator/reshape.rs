//! How a call is made to differ from one that failed in a way the same call fails
//! again. An answer cut off at the output limit is cut off again at temperature 0: the
//! worker's next turn says the previous answer was cut and asks for a short one with
//! only the required fields, and, when the model's own limit ended it and the context
//! window is known, lets it write more; its later turns in the same process keep both
//! (the next step's first answer runs as long as the one that was cut). A repair call at temperature 0 returned the
//! rejected answer byte for byte: repairs sample at a higher temperature.

use baton_core::ErrorClass;
use baton_core::prompt::Prompt;
use baton_core::turn::{CallKind, CallRecord};
use serde_json::Value;

use super::{Engine, Session};
use crate::Result;

/// The lowest temperature a repair call is made at. A worker at temperature 0 answers
/// its repair prompt — its own rejected answer and the error — with that answer again;
/// a repair needs a different sample. A higher configured temperature is kept, and a
/// worker that sets none keeps its provider's default (which already samples).
pub const REPAIR_TEMPERATURE: f32 = 0.7;

/// Tokens kept free of a raised output limit for the note that asks for a short
/// answer and for the estimator's error on a prompt the provider counted.
const NOTE_ALLOWANCE: u64 = 256;

/// The temperature `call` is made at, for a worker configured with `configured`.
pub(super) fn temperature(call: CallKind, configured: Option<f32>) -> Option<f32> {
    match call {
        CallKind::ExecuteRepair | CallKind::HandoffRepair | CallKind::CombinedRepair => {
            configured.map(|t| t.max(REPAIR_TEMPERATURE))
        }
        CallKind::Execute | CallKind::Handoff | CallKind::Combined => configured,
    }
}

/// The first call a repair call repairs.
fn first_call(call: CallKind) -> CallKind {
    match call {
        CallKind::ExecuteRepair => CallKind::Execute,
        CallKind::HandoffRepair => CallKind::Handoff,
        CallKind::CombinedRepair => CallKind::Combined,
        other => other,
    }
}

/// An answer of the worker's last (failed) turn that was cut off at the output limit.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Cut {
    /// The first call it answered (a cut repair counts as its first call).
    call: CallKind,
    turn: u32,
    /// Output tokens the provider reported for it; 0 when it reported none.
    output_tokens: u64,
    /// Prompt tokens: the provider's count, else baton's estimate.
    input_tokens: u64,
}

/// How this turn's calls differ from the worker's last failed turn's.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reshape {
    cuts: Vec<Cut>,
    /// The output limit a cut call is made with instead of the worker's.
    raised: Vec<(CallKind, u32)>,
    /// What changed and why, for the turn's summary.
    notices: Vec<String>,
}

impl Reshape {
    /// `call`'s output limit: raised after a cut, else the worker's.
    pub(super) fn max_tokens(&self, call: CallKind, configured: Option<u32>) -> Option<u32> {
        let call = first_call(call);
        self.raised
            .iter()
            .find(|(c, _)| *c == call)
            .map(|(_, n)| *n)
            .or(configured)
    }

    /// `prompt`, with a note asking for a short answer when the worker's last answer
    /// to `call` was cut off. `schema` names the fields the short answer needs.
    pub(super) fn prompt(&self, call: CallKind, mut prompt: Prompt, schema: &Value) -> Prompt {
        let Some(cut) = self.cuts.iter().find(|c| c.call == first_call(call)) else {
            return prompt;
        };
        let at = if cut.output_tokens > 0 {
            format!(" at {} output tokens", cut.output_tokens)
        } else {
            String::new()
        };
        prompt.user.push_str(&format!(
            "\n\n## Your previous answer was cut off\nOn turn {}, your answer to this request \
             stopped{at}, the most you may write, before its JSON object was complete. Answer \
             with a short JSON object this time: only {}, one or two sentences each, and \
             nothing before or after it.\n",
            cut.turn,
            required_fields(schema)
        ));
        prompt
    }

    pub(super) fn notices(&self) -> &[String] {
        &self.notices
    }

    /// True when nothing differs from the worker's configured calls.
    pub(super) fn is_empty(&self) -> bool {
        self.cuts.is_empty() && self.raised.is_empty()
    }

    /// What the worker's later turns keep: the short-answer request and the raised
    /// limit, without the notices (said once, on the turn after the cut).
    pub(super) fn remembered(&self) -> Reshape {
        Reshape {
            cuts: self.cuts.clone(),
            raised: self.raised.clone(),
            notices: Vec::new(),
        }
    }
}

/// The schema's required fields, quoted and joined for a sentence.
fn required_fields(schema: &Value) -> String {
    let fields: Vec<String> = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(|f| format!("\"{f}\""))
        .collect();
    match fields.as_slice() {
        [] => "the fields the example shows".to_string(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

impl Cut {
    fn of(turn: u32, call: &CallRecord) -> Option<Cut> {
        if call.error_class != Some(ErrorClass::Truncated) {
            return None;
        }
        let usage = call.usage.unwrap_or_default();
        Some(Cut {
            call: first_call(call.call),
            turn,
            output_tokens: usage.output_tokens,
            input_tokens: if usage.input_tokens > 0 {
                usage.input_tokens
            } else {
                call.tokens_sent as u64
            },
        })
    }
}

impl Engine {
    /// How the calls of the turn `worker` takes next differ from those of its last
    /// turn, when that turn failed just before this one with an answer cut off.
    pub(super) fn reshape(&self, session: &Session, worker: usize) -> Result<Reshape> {
        let Some(last) = self.last_failed_turn(session, worker)? else {
            return Ok(Reshape::default());
        };
        let mut reshape = Reshape::default();
        for cut in last.calls.iter().filter_map(|c| Cut::of(last.turn, c)) {
            reshape.cuts.retain(|c| c.call != cut.call);
            reshape.cuts.push(cut);
        }
        let config = &session.config.roster.workers[worker];
        for cut in &reshape.cuts {
            let mut notice = format!(
                "worker {}'s {} answer on turn {} was cut off{}; this turn asks it for a short answer",
                config.id,
                cut.call.as_str(),
                cut.turn,
                if cut.output_tokens > 0 {
                    format!(" at {} output tokens", cut.output_tokens)
                } else {
                    String::new()
                }
            );
            // Only a cut by the worker's own limit can be helped by a higher one: one
            // the context window ended, or the server's unknown default, cannot.
            let by_limit = config
                .max_tokens
                .filter(|limit| cut.output_tokens == 0 || cut.output_tokens >= u64::from(*limit));
            if let Some(limit) = by_limit
                && let Some((window, source)) = self.context_window(session, worker, true)
            {
                let room = window.saturating_sub(cut.input_tokens + NOTE_ALLOWANCE);
                let raised = u64::from(limit)
                    .saturating_mul(2)
                    .min(room)
                    .min(u64::from(u32::MAX)) as u32;
                if raised > limit {
                    reshape.raised.push((cut.call, raised));
                    notice.push_str(&format!(
                        " and lets it write up to {raised} tokens instead of max_tokens = {limit} (context window {window} tokens, {source}); raise the worker's max_tokens to keep that"
                    ));
                }
            }
            reshape.notices.push(notice);
        }
        Ok(reshape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repairs_sample_at_a_higher_temperature_than_greedy_calls() {
        assert_eq!(temperature(CallKind::Execute, Some(0.0)), Some(0.0));
        assert_eq!(
            temperature(CallKind::ExecuteRepair, Some(0.0)),
            Some(REPAIR_TEMPERATURE)
        );
        assert_eq!(temperature(CallKind::HandoffRepair, Some(1.2)), Some(1.2));
        assert_eq!(temperature(CallKind::HandoffRepair, None), None);
    }

    #[test]
    fn required_fields_read_as_a_list() {
        let schema = serde_json::json!({"required": ["summary", "last_action", "next_action"]});
        assert_eq!(
            required_fields(&schema),
            "\"summary\", \"last_action\" and \"next_action\""
        );
        assert_eq!(
            required_fields(&serde_json::json!({})),
            "the fields the example shows"
        );
    }
}
