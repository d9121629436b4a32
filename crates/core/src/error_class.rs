//! What kind of failure a model call met: the one vocabulary the gateway classifies
//! into, call records store, and the engine decides on (retry, block, reshape). Pure
//! data, so the store, the engine and the event stream share it without the gateway.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A failure class. Serialised in snake_case (`"rate_limited"`), the strings baton has
/// always stored, so call records written before this type existed load unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorClass {
    RateLimited,
    Overloaded,
    Auth,
    QuotaExhausted,
    ContextTooLong,
    BadRequest,
    UnknownModel,
    ServerError,
    /// A call or an agent ran past its limit, or an agent went silent.
    Timeout,
    AgentExited,
    /// An agent stopped at a question nobody will answer.
    Interactive,
    Cancelled,
    Truncated,
    Unparseable,
    EmptyReply,
    Unreachable,
    /// A replay script with no entry for the call, or a malformed one.
    Script,
    /// The worker's configuration is wrong (provider, options, model string).
    Config,
    /// A class this build does not know, kept word for word: a record written by a
    /// newer baton stays readable (and is written back unchanged) instead of making
    /// the whole run unloadable. Nothing decides on it; it reads as an unknown failure.
    #[serde(untagged)]
    Other(String),
}

impl ErrorClass {
    /// The stored name (`"rate_limited"`).
    pub fn as_str(&self) -> &str {
        match self {
            ErrorClass::RateLimited => "rate_limited",
            ErrorClass::Overloaded => "overloaded",
            ErrorClass::Auth => "auth",
            ErrorClass::QuotaExhausted => "quota_exhausted",
            ErrorClass::ContextTooLong => "context_too_long",
            ErrorClass::BadRequest => "bad_request",
            ErrorClass::UnknownModel => "unknown_model",
            ErrorClass::ServerError => "server_error",
            ErrorClass::Timeout => "timeout",
            ErrorClass::AgentExited => "agent_exited",
            ErrorClass::Interactive => "interactive",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::Truncated => "truncated",
            ErrorClass::Unparseable => "unparseable",
            ErrorClass::EmptyReply => "empty_reply",
            ErrorClass::Unreachable => "unreachable",
            ErrorClass::Script => "script",
            ErrorClass::Config => "config",
            ErrorClass::Other(s) => s,
        }
    }
}

impl ErrorClass {
    /// The class a stored name stands for; `Other` for a name this build does not know.
    pub fn from_name(name: &str) -> ErrorClass {
        serde_json::from_value(serde_json::Value::String(name.to_string()))
            .unwrap_or_else(|_| ErrorClass::Other(name.to_string()))
    }
}

impl std::fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [ErrorClass; 18] = [
        ErrorClass::RateLimited,
        ErrorClass::Overloaded,
        ErrorClass::Auth,
        ErrorClass::QuotaExhausted,
        ErrorClass::ContextTooLong,
        ErrorClass::BadRequest,
        ErrorClass::UnknownModel,
        ErrorClass::ServerError,
        ErrorClass::Timeout,
        ErrorClass::AgentExited,
        ErrorClass::Interactive,
        ErrorClass::Cancelled,
        ErrorClass::Truncated,
        ErrorClass::Unparseable,
        ErrorClass::EmptyReply,
        ErrorClass::Unreachable,
        ErrorClass::Script,
        ErrorClass::Config,
    ];

    #[test]
    fn serialises_as_the_strings_records_always_held() {
        for class in ALL {
            let json = serde_json::to_string(&class).unwrap();
            assert_eq!(json, format!("\"{}\"", class.as_str()));
            let back: ErrorClass = serde_json::from_str(&json).unwrap();
            assert_eq!(back, class, "{json} reads back as itself, not as Other");
        }
        assert_eq!(ErrorClass::from_name("timeout"), ErrorClass::Timeout);
        assert_eq!(
            serde_json::to_string(&ErrorClass::ServerError).unwrap(),
            "\"server_error\""
        );
    }

    #[test]
    fn an_unknown_class_is_kept_word_for_word() {
        let class: ErrorClass = serde_json::from_str("\"melted\"").unwrap();
        assert_eq!(class, ErrorClass::Other("melted".into()));
        assert_eq!(serde_json::to_string(&class).unwrap(), "\"melted\"");
        // Not a string at all is still an error, with serde's context.
        assert!(serde_json::from_str::<ErrorClass>("3").is_err());
    }

    #[test]
    fn its_schema_lists_the_names_and_allows_an_unknown_one() {
        let schema = serde_json::to_string(&schemars::schema_for!(ErrorClass)).unwrap();
        for class in ALL {
            assert!(
                schema.contains(&format!("\"{}\"", class.as_str())),
                "{schema}"
            );
        }
        assert!(
            schema.contains("\"string\""),
            "Other is any string: {schema}"
        );
    }
}
