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
    /// "OK …" or exactly what went wrong, in the provider's words where it gave any.
    pub message: String,
}

/// Builds the worker's gateway (its credential included) and makes one small call.
pub fn verify_worker(worker: &WorkerConfig) -> Verdict {
    let gateway = match build_gateway(worker) {
        Ok(g) => g,
        Err(e) => {
            return Verdict {
                ok: false,
                message: format!("FAILED before calling: {e}"),
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
    };
    let t0 = Instant::now();
    match gateway.complete(&request) {
        Ok(r) => Verdict {
            ok: true,
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
            message: format!("FAILED ({}): {e}", e.class()),
        },
    }
}
