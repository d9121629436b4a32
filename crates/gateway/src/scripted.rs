//! Replays model responses from a JSONL file, keyed by turn and call, so any run —
//! including adversarial ones — can be reproduced exactly and offline.
//!
//! One line per response:
//!
//! ```text
//! {"turn": 0, "call": "execute", "output": "{\"summary\": …}"}
//! {"turn": 0, "call": "handoff", "output": "…"}
//! {"turn": 1, "call": "execute", "error": {"class": "rate_limited", "message": "slow down"}}
//! ```
//!
//! A run with one call per turn records `"call": "combined"` (and `"combined_repair"`)
//! instead; a script with no combined call replays with two calls per turn, as every
//! script written before one call per turn existed does.
//!
//! `baton export RUN --format script` writes this format from a recorded run.

use std::collections::BTreeMap;
use std::path::Path;

use baton_core::turn::CallKind;
use serde::{Deserialize, Serialize};

use crate::{Error, ErrorClass, Gateway, ModelRequest, ModelResponse, Result, Usage};

/// One line of a script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptLine {
    pub turn: u32,
    pub call: CallKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ScriptedError>,
    /// The usage the provider reported for the recorded call, replayed as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<ScriptedUsage>,
}

/// Recorded token usage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    #[serde(default)]
    pub cached_tokens: u64,
}

/// A failure to replay instead of an output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedError {
    /// The failure's class ([`Error::class`]). The classes a provider call has
    /// (`rate_limited` … `unreachable`) replay as that failure; the rest (an agent's,
    /// a script's, one this build does not know) as a server error: what matters on
    /// replay is that the call failed.
    pub class: ErrorClass,
    #[serde(default)]
    pub message: String,
    /// `message` is the error exactly as the original run recorded it (an exported
    /// script): replayed word for word instead of behind the class's own prefix.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub verbatim: bool,
}

impl ScriptedError {
    fn to_error(&self) -> Error {
        let typed = self.typed();
        if self.verbatim {
            return Error::Replayed {
                inner: Box::new(typed),
                display: self.message.clone(),
            };
        }
        typed
    }

    fn typed(&self) -> Error {
        let message = self.message.clone();
        match &self.class {
            ErrorClass::RateLimited => Error::RateLimited {
                retry_after: None,
                message,
            },
            ErrorClass::Overloaded => Error::Overloaded {
                message,
                retry_after: None,
            },
            ErrorClass::Auth => Error::Auth { message },
            ErrorClass::QuotaExhausted => Error::QuotaExhausted {
                message,
                resets_after: None,
            },
            ErrorClass::ContextTooLong => Error::ContextTooLong { message },
            ErrorClass::BadRequest => Error::BadRequest { message },
            ErrorClass::UnknownModel => Error::UnknownModel {
                model: String::new(),
                message,
            },
            ErrorClass::Timeout => Error::Timeout(std::time::Duration::from_secs(0)),
            ErrorClass::Truncated => Error::Truncated {
                message,
                usage: crate::Usage::default(),
                partial: String::new(),
            },
            ErrorClass::EmptyReply => Error::EmptyReply {
                detail: message,
                usage: crate::Usage::default(),
            },
            ErrorClass::Unparseable => Error::Unparseable { detail: message },
            ErrorClass::Unreachable => Error::Unreachable {
                detail: message,
                sent: true,
            },
            _ => Error::Server { message },
        }
    }
}

/// The options a `scripted/…` worker reads.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ScriptedOptions {
    /// The JSONL file to replay.
    script: Option<String>,
}

impl crate::options::ProviderOptions for ScriptedOptions {
    fn expects(_key: &str) -> &'static str {
        "a file path"
    }
}

/// The script a `scripted/…` worker replays: `options.script`, a path.
pub(crate) fn script_path(model: &str, options: &crate::Options) -> Result<String> {
    match crate::options::parse::<ScriptedOptions>("scripted", options) {
        Ok(ScriptedOptions { script: Some(path) }) => Ok(path),
        Err(e @ Error::UnknownOption { .. }) => Err(e),
        // Missing, or not a path: the same advice.
        _ => Err(Error::Config(format!(
            "model \"{model}\" needs options.script = \"path/to/run.jsonl\""
        ))),
    }
}

#[derive(Debug)]
pub struct ScriptedGateway {
    path: String,
    entries: BTreeMap<(u32, &'static str), ScriptLine>,
}

impl ScriptedGateway {
    /// Reads and validates the whole script up front, so a bad line fails the run
    /// before any turn, with its line number.
    pub fn open(path: &Path) -> Result<Self> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| Error::BadScript {
            path: shown.clone(),
            line: 0,
            detail: format!("cannot read: {e}"),
        })?;
        Self::parse(&shown, &text)
    }

    pub fn parse(path: &str, text: &str) -> Result<Self> {
        let mut entries = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line_no = i + 1;
            if line.trim().is_empty() {
                continue;
            }
            let bad = |detail: String| Error::BadScript {
                path: path.to_string(),
                line: line_no,
                detail,
            };
            let entry: ScriptLine = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?;
            if entry.output.is_some() == entry.error.is_some() {
                return Err(bad(
                    "each line needs exactly one of \"output\" or \"error\"".into(),
                ));
            }
            let key = (entry.turn, entry.call.as_str());
            if entries.insert(key, entry).is_some() {
                return Err(bad(format!("turn {} {} appears twice", key.0, key.1)));
            }
        }
        Ok(ScriptedGateway {
            path: path.to_string(),
            entries,
        })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// 1 when the script holds combined calls, else 2: every script written before
    /// one call per turn existed has an execute and a handoff call per turn.
    pub fn calls_per_turn(&self) -> u32 {
        let combined = self
            .entries
            .values()
            .any(|e| matches!(e.call, CallKind::Combined | CallKind::CombinedRepair));
        if combined { 1 } else { 2 }
    }
}

impl Gateway for ScriptedGateway {
    fn recorded_calls_per_turn(&self) -> Option<u32> {
        Some(self.calls_per_turn())
    }

    fn complete(&self, request: &ModelRequest<'_>) -> Result<ModelResponse> {
        let entry = self
            .entries
            .get(&(request.turn, request.call.as_str()))
            .ok_or_else(|| Error::ScriptExhausted {
                path: self.path.clone(),
                turn: request.turn,
                call: request.call.as_str(),
                available: self.entries.len(),
            })?;
        if let Some(err) = &entry.error {
            return Err(err.to_error());
        }
        let text = entry.output.clone().unwrap_or_default();
        // Only what the recording says the provider reported; nothing is made up.
        let usage = entry.usage.map_or(Usage::default(), |u| Usage {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_tokens: u.cached_tokens,
        });
        Ok(ModelResponse {
            usage,
            text,
            sent: crate::Sent::pair(request),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(turn: u32, call: CallKind) -> ModelRequest<'static> {
        static SCHEMA: serde_json::Value = serde_json::Value::Null;
        ModelRequest {
            model: "replay",
            system: "s",
            user: "u",
            call,
            turn,
            schema: &SCHEMA,
            max_tokens: None,
            temperature: None,
            workspace: None,
            cancel: None,
            output: None,
            hashed: None,
        }
    }

    #[test]
    fn replays_by_turn_and_call_including_errors() {
        let script = r#"{"turn":0,"call":"execute","output":"A"}
{"turn":0,"call":"handoff","output":"B"}
{"turn":1,"call":"execute","error":{"class":"rate_limited","message":"slow"}}
"#;
        let g = ScriptedGateway::parse("t.jsonl", script).unwrap();
        assert_eq!(
            g.complete(&request(0, CallKind::Handoff)).unwrap().text,
            "B"
        );
        assert_eq!(
            g.complete(&request(0, CallKind::Execute)).unwrap().text,
            "A"
        );
        assert!(matches!(
            g.complete(&request(1, CallKind::Execute)),
            Err(Error::RateLimited { .. })
        ));
        let missing = g.complete(&request(5, CallKind::Execute)).unwrap_err();
        assert!(missing.to_string().contains("turn 5"), "{missing}");
    }

    #[test]
    fn bad_lines_are_reported_with_their_number() {
        let err = ScriptedGateway::parse(
            "t.jsonl",
            "{\"turn\":0,\"call\":\"execute\",\"output\":\"a\"}\nnot json\n",
        )
        .unwrap_err();
        assert!(matches!(err, Error::BadScript { line: 2, .. }), "{err}");
        let dup = "{\"turn\":0,\"call\":\"execute\",\"output\":\"a\"}\n{\"turn\":0,\"call\":\"execute\",\"output\":\"b\"}\n";
        assert!(ScriptedGateway::parse("t", dup).is_err());
    }
}
