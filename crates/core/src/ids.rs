//! Newtype identifiers and the engine's timestamp.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A run: one objective with its plan and record.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub String);

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A worker in the roster (configuration plus a gateway).
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(transparent)]
pub struct WorkerId(pub String);

impl WorkerId {
    pub fn new(id: impl Into<String>) -> Self {
        WorkerId(id.into())
    }
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for WorkerId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The engine's clock reading: milliseconds since the Unix epoch, UTC.
///
/// Only the engine creates these; the core receives them as input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Timestamp(pub i64);

impl fmt::Display for Timestamp {
    /// RFC 3339 with milliseconds, e.g. `2026-11-30T13:22:13.123Z`. A reading outside
    /// the calendar `jiff` knows (years -9999 to 9999: only a corrupt row holds one) is
    /// shown as the number it is rather than as a made-up date.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let formatted = jiff::Timestamp::from_millisecond(self.0)
            .and_then(|at| jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%S%.3fZ", at));
        match formatted {
            Ok(text) => f.write_str(&text),
            Err(_) => write!(f, "{} ms after the Unix epoch", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_render_as_rfc3339() {
        assert_eq!(Timestamp(0).to_string(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            Timestamp(1_796_044_933_123).to_string(),
            "2026-11-30T13:22:13.123Z"
        );
        assert_eq!(Timestamp(-1).to_string(), "1969-12-31T23:59:59.999Z");
        // Outside input (a corrupt row) renders without a panic.
        assert_eq!(
            Timestamp(i64::MAX).to_string(),
            "9223372036854775807 ms after the Unix epoch"
        );
    }
}
