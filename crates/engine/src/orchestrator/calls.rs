//! One model call of a turn: the request, the retry policy around it, what the call
//! cost and what the provider asked for, and the repair calls when its claim does not
//! parse.

use std::time::Instant;

use baton_core::claims;
use baton_core::prompt::{self, Prompt};
use baton_core::turn::{AttemptRecord, CallKind, CallRecord, ReportedUsage};
use baton_gateway::{ModelRequest, RetryPolicy, complete_with_retry};

use super::{CallWait, Engine, Session};
use crate::audit;

impl Engine {
    pub(super) fn call_model(
        &self,
        session: &Session,
        worker_index: usize,
        prompt: &Prompt,
        call: CallKind,
        turn: u32,
    ) -> (CallRecord, std::result::Result<String, String>) {
        let worker = &session.config.roster.workers[worker_index];
        let schema = schema_of(call);
        let model_name = worker
            .model
            .split_once('/')
            .map(|(_, m)| m)
            .unwrap_or(&worker.model);
        let request = ModelRequest {
            model: model_name,
            system: &prompt.system,
            user: &prompt.user,
            call,
            turn,
            schema,
            max_tokens: session.reshape.max_tokens(call, worker.max_tokens),
            temperature: super::reshape::temperature(call, worker.temperature),
            workspace: session.workspace.as_ref().map(|w| w.path()),
            cancel: Some(&session.cancel),
            output: session.agent_output.as_ref(),
        };
        // What goes on the wire besides the messages, read before the call: a gateway
        // may change how it asks after this one.
        let format_tokens = session.gateways[worker_index]
            .as_ref()
            .and_then(|g| g.answer_format_sent(&request))
            .map_or(0, |f| session.estimator.count(&f));
        let started_at = self.clock.now();
        let t0 = Instant::now();
        let retries = match &session.gateways[worker_index] {
            Some(g) if !g.retries_in_place() => 0,
            _ => worker.max_retries,
        };
        let retry = RetryPolicy::new(retries);
        let mut error_class = None;
        let mut error_message = None;
        let mut partial_output = None;
        let mut retry_after = None;
        let (outcome, attempts) = match &session.gateways[worker_index] {
            None => (Err(format!("worker {} is disabled", worker.id)), Vec::new()),
            Some(gateway) => {
                let watch = |w: CallWait| {
                    if let Some(watcher) = &self.watcher {
                        watcher(w);
                    }
                };
                let sent = |attempt: u32| CallWait::Sent {
                    worker: worker.id.to_string(),
                    model: worker.model.clone(),
                    call,
                    turn,
                    attempt,
                    attempts: retry.max_retries + 1,
                    timeout: gateway.call_timeout(),
                };
                watch(sent(1));
                let mut attempt = 1;
                // A wait the provider asked for ends early on an interrupt.
                let mut sleep = |d: std::time::Duration| {
                    watch(CallWait::Backoff {
                        worker: worker.id.to_string(),
                        after_attempt: attempt,
                        delay: d,
                    });
                    session.cancel.sleep(d);
                    attempt += 1;
                    watch(sent(attempt));
                };
                let (result, attempts) =
                    complete_with_retry(&**gateway, &request, &retry, &mut sleep);
                watch(CallWait::Done);
                let tries = attempts.len();
                if let Err(e) = &result {
                    error_class = Some(e.class().to_string());
                    error_message = Some(session.redactor.scrub(&e.to_string()));
                    partial_output = e.partial_output().map(|p| session.redactor.scrub(p));
                    retry_after = e.retry_after();
                    // Interrupted while waiting out a provider's delay: the delay is
                    // still the provider's word (the turn's hold keeps it).
                    if matches!(e, baton_gateway::Error::Cancelled) {
                        retry_after = attempts.iter().rev().find_map(|a| a.retry_after);
                    }
                }
                let result = result.map_err(|e| {
                    let after = if tries > 1 {
                        format!(" after {tries} attempts")
                    } else {
                        String::new()
                    };
                    let declined = match retry.declined_wait(&e) {
                        Some(asked) => format!(
                            "; baton declined to wait {} s (it waits at most {} s); the provider said it can be retried after {}",
                            asked.as_secs(),
                            retry.max_wait.as_secs(),
                            super::holds::after(self.clock.now(), asked)
                        ),
                        None => String::new(),
                    };
                    format!("{}{after}: {e}{declined}", e.class())
                });
                (result, attempts)
            }
        };
        // A provider echoing a key (its own or another worker's) in its reply must not
        // carry it into the record, the next briefing or another provider's request.
        let outcome = outcome
            .map(|mut r| {
                r.text = session.redactor.scrub(&r.text);
                r
            })
            .map_err(|e| session.redactor.scrub(&e));
        // Every attempt's reported usage counts, rejected replies included: the provider
        // bills a truncated or empty answer as it bills a good one. All zeros means the
        // gateway had nothing to report (an agent CLI without usage).
        let billed = attempts
            .iter()
            .fold(baton_gateway::Usage::default(), |sum, a| sum.plus(a.usage));
        let usage = (billed != baton_gateway::Usage::default()).then_some(ReportedUsage {
            input_tokens: billed.input_tokens,
            output_tokens: billed.output_tokens,
            cached_tokens: billed.cached_tokens,
        });
        // Counted once per attempt that may have reached the provider (each is billed):
        // both messages and, where the gateway sends one, the answer format (a schema
        // rides in every request that enforces one). An attempt that never connected
        // cost nothing and counts nothing.
        let per_attempt =
            session.system_tokens + session.estimator.count(&prompt.user) + format_tokens;
        let tokens_sent = per_attempt * attempts.iter().filter(|a| a.sent).count();
        let record = CallRecord {
            call,
            worker: worker.id.clone(),
            model: worker.model.clone(),
            messages: outcome
                .as_ref()
                .map_or(Prompt::MESSAGES, |r| r.sent.messages),
            request_hash: audit::request_hash(prompt),
            sent_hash: outcome.as_ref().ok().map(|r| r.sent.request_hash.clone()),
            tokens_sent,
            tokens_received: outcome
                .as_ref()
                .map(|r| session.estimator.count(&r.text))
                .unwrap_or(0),
            output: outcome.as_ref().ok().map(|r| r.text.clone()),
            error: outcome.as_ref().err().cloned(),
            error_class,
            error_message,
            partial_output,
            started_at,
            duration_ms: t0.elapsed().as_millis() as u64,
            cost_micro_usd: match (&worker.price, usage) {
                (Some(price), Some(u)) => {
                    Some(price.cost_micro_usd(u.input_tokens, u.output_tokens, u.cached_tokens))
                }
                _ => None,
            },
            usage,
            attempts: if attempts.len() > 1 {
                attempts
                    .iter()
                    .map(|a| AttemptRecord {
                        error: a.error_class.map(str::to_string),
                        retry_after_ms: a.retry_after.map(|d| d.as_millis() as u64),
                        waited_ms: a.delay.map(|d| d.as_millis() as u64),
                    })
                    .collect()
            } else {
                Vec::new()
            },
            retry_after_ms: retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        };
        if let Some(observer) = &self.observer {
            observer(&record);
        }
        (record, outcome.map(|r| r.text))
    }

    /// One call and the parsing of its claim, with the configured repair calls when the
    /// output does not parse or fails its schema. Every call is pushed to `calls` and
    /// its prompt to `prompts`. Returns the claim and the raw text it came from.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn call_for_claim<T>(
        &self,
        session: &Session,
        worker_index: usize,
        prompt: Prompt,
        call: CallKind,
        turn: u32,
        parse: fn(&str) -> baton_core::Result<T>,
        calls: &mut Vec<CallRecord>,
        prompts: &mut Vec<Prompt>,
    ) -> std::result::Result<(T, String), String> {
        let mut repairs_left = session.config.settings.repair_attempts;
        let mut kind = call;
        let schema = schema_of(call);
        let mut current = session.reshape.prompt(call, prompt, schema);
        loop {
            let (record, out) = self.call_model(session, worker_index, &current, kind, turn);
            calls.push(record);
            let base_user = current.user.clone();
            prompts.push(current);
            let raw = out.map_err(|e| format!("{} call failed: {e}", kind.as_str()))?;
            match parse(&raw) {
                Ok(parsed) => return Ok((parsed, raw)),
                Err(e) => {
                    if let Some(last) = calls.last_mut() {
                        last.error = Some(e.to_string());
                    }
                    let repair = call
                        .repair()
                        .filter(|_| e.is_model_output_error() && repairs_left > 0);
                    let Some(repair) = repair else {
                        return Err(format!("{} output rejected: {e}", kind.as_str()));
                    };
                    repairs_left -= 1;
                    kind = repair;
                    current = prompt::repair_prompt(&base_user, &raw, &e.to_string());
                }
            }
        }
    }
}

/// The JSON Schema `call`'s answer must match.
fn schema_of(call: CallKind) -> &'static serde_json::Value {
    match call {
        CallKind::Execute | CallKind::ExecuteRepair => claims::worker_result_schema(),
        CallKind::Handoff | CallKind::HandoffRepair => claims::handoff_report_schema(),
        CallKind::Combined | CallKind::CombinedRepair => claims::turn_answer_schema(),
    }
}
