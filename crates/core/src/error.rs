use thiserror::Error;

/// Errors of the pure core. Callers act on the variant, never on the message text.
#[derive(Debug, Error)]
pub enum Error {
    /// Model output that is not the JSON object the schema asks for.
    #[error("{claim} is not valid JSON: {detail}")]
    Unparseable { claim: &'static str, detail: String },
    /// JSON that parses but does not match the claim schema.
    #[error("{claim} does not match its schema: {detail}")]
    SchemaViolation { claim: &'static str, detail: String },
    /// A record that cannot be decoded (corrupt row, bad snapshot).
    #[error("corrupt {what}: {detail}")]
    Corrupt { what: String, detail: String },
    /// An assignment that names a step the plan does not have.
    #[error("step {index} does not exist (the plan has {len} steps)")]
    NoSuchStep { index: usize, len: usize },
    /// A pool, seat or window as written that the router cannot use.
    #[error(transparent)]
    Router(#[from] crate::router::RouterError),
    /// A route file with problems, every one listed with what to fix.
    #[error(transparent)]
    Route(#[from] crate::line::RouteErrors),
    /// A plan step's tag as written that is not one (see `StepTag`).
    #[error(
        "step tag {tag:?}: {detail}{}; a tag is lowercase letters, digits, '-', '_' and '.' (as a seat's deny_tags names it)",
        suggestion.as_ref().map(|s| format!(" (write \"{s}\")")).unwrap_or_default()
    )]
    BadStepTag {
        tag: String,
        detail: String,
        suggestion: Option<String>,
    },
    /// A plan step's scope as written that is neither `own` nor `earlier`.
    #[error(
        "step scope {value:?} is not one: write \"own\" for a step on its own part of the work, or \"earlier\" for one over the earlier steps' work (a review, a check, a summary), whose briefing then holds their completed work and artifacts"
    )]
    UnknownStepScope { value: String },
}

impl Error {
    /// Output that a model produced wrongly; a retry or repair call could fix it.
    pub fn is_model_output_error(&self) -> bool {
        matches!(
            self,
            Error::Unparseable { .. } | Error::SchemaViolation { .. }
        )
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
