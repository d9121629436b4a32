//! `baton workers --verify`: one tiny call per worker, and what its provider said.

use std::sync::LazyLock;
use std::time::Instant;

use baton_core::turn::CallKind;
use baton_gateway::ModelRequest;
use serde_json::{Value, json};

use crate::config::WorkerConfig;
use crate::orchestrator::build_gateway;

static SCHEMA: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"],
        "additionalProperties": false
    })
});

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub ok: bool,
    /// The failure's class, when the check failed.
    pub class: Option<baton_core::ErrorClass>,
    /// "OK …" or exactly what went wrong, in the provider's words where it gave any.
    pub message: String,
    /// The model's context window where the server tells it, and a warning when a
    /// turn with this budget would not fit in it.
    pub context: Option<String>,
}

/// What a turn needs of a model's context beyond the briefing: the largest call's own
/// text (system prompt, instructions and example: the combined call's, or with two
/// calls the handoff's) and its answers, each up to the worker's `max_tokens`, or
/// 1,000 tokens when it sets none: one for one call per turn, two with two calls (the
/// result, quoted in the handoff call, and the handoff itself). Returns the prompts'
/// tokens, the number of answers and the size of one.
pub(crate) fn turn_overhead(
    worker: &WorkerConfig,
    estimator: &dyn baton_core::tokens::TokenEstimator,
) -> (usize, usize, usize) {
    let package = baton_core::compiler::HandoffPackage::empty(worker.id.clone());
    let two = worker.calls == Some(crate::config::Calls::Two);
    let largest = if two {
        baton_core::prompt::handoff_prompt(&package, "")
    } else {
        baton_core::prompt::combined_prompt(&package)
    };
    let prompts = estimator.count(&largest.system) + estimator.count(&largest.user);
    let answer = worker.max_tokens.map_or(1_000, |n| n as usize);
    (prompts, if two { 2 } else { 1 }, answer)
}

fn answers_text(answers: usize, answer: usize) -> String {
    match answers {
        1 => format!("an answer of up to {answer}"),
        n => format!("{n} answers of up to {answer}"),
    }
}

/// The context line of a verdict: the window, and whether `budget` fits in it.
fn context_line(worker: &WorkerConfig, budget: usize, window: u64, source: &str) -> String {
    let (prompts, answers, answer) = turn_overhead(worker, &baton_core::tokens::HeuristicEstimator);
    let need = budget + prompts + answers * answer;
    let shown = answers_text(answers, answer);
    let window_tokens = usize::try_from(window).unwrap_or(usize::MAX);
    if need <= window_tokens {
        return format!(
            "context window {window} tokens ({source}); a turn needs about {need} (budget {budget} + prompts ~{prompts} + {shown}): fits"
        );
    }
    let fitting = window_tokens.saturating_sub(prompts + answers * answer);
    let advice = if fitting >= 300 {
        format!(
            "set budget = {fitting} (or less) in baton.toml, or give the server a larger context"
        )
    } else {
        "give the server a larger context (llama-server -c 8192, Ollama num_ctx) or the worker a smaller max_tokens".to_string()
    };
    format!(
        "WARNING: context window {window} tokens ({source}) is smaller than a turn needs: about {need} (budget {budget} + prompts ~{prompts} + {shown}); {advice}"
    )
}

/// Builds the worker's gateway (its credential included) and makes one small call;
/// where the server tells the model's context window, checks that a turn with
/// `budget` fits in it.
pub fn verify_worker(worker: &WorkerConfig, budget: usize) -> Verdict {
    let gateway = match build_gateway(worker) {
        Ok(g) => g,
        Err(e) => {
            return Verdict {
                ok: false,
                class: Some(e.class().unwrap_or(baton_core::ErrorClass::Config)),
                message: format!("FAILED before calling: {e}"),
                context: None,
            };
        }
    };
    let model = worker
        .model
        .split_once('/')
        .map_or(worker.model.as_str(), |(_, m)| m);
    let request = ModelRequest {
        model,
        system: "You are checking that this connection works.",
        user: "Reply with the JSON object {\"ok\": true} and nothing else.",
        call: CallKind::Execute,
        turn: 0,
        schema: &SCHEMA,
        max_tokens: Some(32),
        temperature: Some(0.0),
        workspace: None,
        cancel: None,
        output: None,
        hashed: None,
    };
    let t0 = Instant::now();
    match gateway.complete(&request) {
        Ok(r) => Verdict {
            context: gateway
                .context_window()
                .map(|(window, source)| context_line(worker, budget, window, &source)),
            ok: true,
            class: None,
            message: format!(
                "OK: {} answered in {} ms ({} tokens in, {} out)",
                worker.model,
                t0.elapsed().as_millis(),
                r.usage.input_tokens,
                r.usage.output_tokens
            ),
        },
        Err(e) => Verdict {
            ok: false,
            class: Some(e.class()),
            message: format!("FAILED ({}): {e}", e.class()),
            context: None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_of_one_call_needs_room_for_one_answer_and_of_two_calls_for_two() {
        let one = WorkerConfig::mock("w", "m");
        let mut two = one.clone();
        two.calls = Some(crate::config::Calls::Two);
        let fits_one = context_line(&one, 2000, 4000, "test");
        assert!(
            fits_one.ends_with(": fits") && fits_one.contains("an answer of up to 1000"),
            "{fits_one}"
        );
        let short_for_two = context_line(&two, 2000, 4000, "test");
        assert!(
            short_for_two.starts_with("WARNING")
                && short_for_two.contains("2 answers of up to 1000"),
            "{short_for_two}"
        );
    }
}
