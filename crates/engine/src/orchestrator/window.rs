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
