//! Asking a local server for the model's context window: llama.cpp's `/props`
//! (`n_ctx` of its slots), vLLM's `/v1/models` (`max_model_len`), Ollama's
//! `/api/show` (`num_ctx`, else the model's own `context_length`) and LM Studio's
//! `/api/v0/models/<model>` (`loaded_context_length`). Hosted APIs do not say; a
//! server that does not answer is simply not asked again.

use serde_json::{Value, json};

use super::{HttpGateway, ProviderKind};

/// A context size and where it was read.
type Window = Option<(u64, String)>;

pub(super) fn window(g: &HttpGateway) -> Window {
    use ProviderKind::*;
    let kind = g.settings.kind;
    let probes: &[fn(&HttpGateway) -> Window] = match kind {
        LlamaCpp => &[llama_cpp],
        Vllm => &[vllm],
        Ollama => &[ollama],
        LmStudio => &[lm_studio],
        // A hosted provider's own URL says nothing; the same wire format pointed
        // at a local server (`openai/…` with `api_base = http://127.0.0.1:8080/v1`)
        // may be any of them.
        _ if g.root.trim_end_matches('/') == kind.default_api_base().trim_end_matches("/v1") => &[],
        _ => &[llama_cpp, vllm],
    };
    probes.iter().find_map(|probe| probe(g))
}

fn get(g: &HttpGateway, path: &str) -> Option<Value> {
    let reply = g.transport.get(&format!("{}{path}", g.root)).ok()?;
    (200..300)
        .contains(&reply.status)
        .then(|| serde_json::from_str(&reply.body).ok())
        .flatten()
}

fn llama_cpp(g: &HttpGateway) -> Window {
    let props = get(g, "/props")?;
    let n = props
        .pointer("/default_generation_settings/n_ctx")
        .or_else(|| props.get("n_ctx"))
        .and_then(Value::as_u64)?;
    Some((n, "llama.cpp /props n_ctx".into()))
}

fn vllm(g: &HttpGateway) -> Window {
    let models = get(g, "/v1/models")?;
    let entries = models.get("data")?.as_array()?;
    let entry = entries
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(g.settings.model.as_str()))
        .or_else(|| entries.first())?;
    let n = entry.get("max_model_len").and_then(Value::as_u64)?;
    Some((n, "/v1/models max_model_len".into()))
}

fn ollama(g: &HttpGateway) -> Window {
    let body = json!({"model": g.settings.model}).to_string().into_bytes();
    let reply = g
        .transport
        .post(&format!("{}/api/show", g.root), &[], body, None)
        .ok()?;
    let show: Value = serde_json::from_str(&reply.body).ok()?;
    // `num_ctx` is what it runs with when the model file sets it; else the model's
    // maximum (Ollama itself may run with less unless num_ctx is set).
    let params = show.get("parameters").and_then(Value::as_str).unwrap_or("");
    if let Some(n) = params.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some("num_ctx")).then(|| words.next()?.parse().ok())?
    }) {
        return Some((n, "Ollama /api/show num_ctx".into()));
    }
    let info = show.get("model_info")?.as_object()?;
    let n = info
        .iter()
        .find(|(k, _)| k.ends_with(".context_length"))
        .and_then(|(_, v)| v.as_u64())?;
    Some((
        n,
        "Ollama /api/show context_length (the model's maximum; set num_ctx to run with it)".into(),
    ))
}

fn lm_studio(g: &HttpGateway) -> Window {
    let model = get(g, &format!("/api/v0/models/{}", g.settings.model))?;
    let n = model
        .get("loaded_context_length")
        .or_else(|| model.get("max_context_length"))
        .and_then(Value::as_u64)?;
    Some((n, "LM Studio /api/v0/models context length".into()))
}
