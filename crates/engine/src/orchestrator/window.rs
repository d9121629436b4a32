//! The model's context window: as the roster states it (`context_window`), else as
//! the worker's server tells it (llama.cpp `/props`, vLLM, Ollama, LM Studio), asked
//! at most once per session and only once a call showed it matters.

use super::{Engine, Session};

impl Engine {
    /// `worker`'s context window in tokens and where it was read. The server is asked
    /// only when `ask_server` (a request did not fit, or an answer was cut off) and at
    /// most once per session.
    pub(super) fn context_window(
        &self,
        session: &Session,
        worker: usize,
        ask_server: bool,
    ) -> Option<(u64, String)> {
        let config = &session.config.roster.workers[worker];
        if let Some(window) = config.context_window {
            return Some((window, "the roster's context_window".into()));
        }
        let asked = &session.windows[worker];
        if !ask_server {
            return asked.get().cloned().flatten();
        }
        asked
            .get_or_init(|| {
                session.gateways[worker]
                    .as_ref()
                    .and_then(|g| g.context_window())
            })
            .clone()
    }
}

/// The part of a context window baton fills with what it estimates (the briefing and
/// the prompts' own text), in percent: its estimate can be short of the server's count
/// (the heuristic counted 7,253 tokens of a request llama.cpp counted as 8,460).
const ESTIMATE_SHARE_PERCENT: usize = 80;

/// The briefing budget a context window leaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct WindowFit {
    pub budget: usize,
    pub window: u64,
    pub source: String,
    /// The prompts' own text, estimated.
    pub prompts: usize,
    /// How many answers a turn holds (one call per turn: one; two calls: the result,
    /// quoted in the handoff call, and the handoff).
    pub answers: usize,
    /// One answer's output limit.
    pub answer: usize,
}

impl WindowFit {
    /// What a turn needs beyond the briefing, and how much is left for it.
    pub(super) fn explain(&self) -> String {
        format!(
            "its context window of {} tokens ({}) holds the prompts' own text (~{} tokens), {} of up to {} tokens (max_tokens) and a briefing of {} tokens, with a fifth of the estimated text kept free for the estimator's error",
            self.window,
            self.source,
            self.prompts,
            if self.answers == 1 {
                "an answer".to_string()
            } else {
                format!("{} answers", self.answers)
            },
            self.answer,
            self.budget
        )
    }
}

impl Engine {
    /// The largest briefing budget `worker`'s context window leaves, when the window
    /// is known: stated in the roster, or told by the server once it was asked (see
    /// [`Self::context_window`]; `ask_server` asks now).
    pub(super) fn window_fit(
        &self,
        session: &Session,
        worker: usize,
        ask_server: bool,
    ) -> Option<WindowFit> {
        let (window, source) = self.context_window(session, worker, ask_server)?;
        let config = &session.config.roster.workers[worker];
        let (prompts, answers, answer) = crate::verify::turn_overhead(config, &*session.estimator);
        let estimated_room = usize::try_from(window)
            .unwrap_or(usize::MAX)
            .saturating_sub(answers * answer)
            / 100
            * ESTIMATE_SHARE_PERCENT;
        Some(WindowFit {
            budget: estimated_room.saturating_sub(prompts),
            window,
            source,
            prompts,
            answers,
            answer,
        })
    }
}
