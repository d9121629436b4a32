//! A plan step's tags (`credentials`, `db`): what a seat's policy reads. A seat's
//! `deny_tags = { credentials = ["glm"] }` keeps the `glm` family from every step
//! tagged `credentials` (see `router::Seat::denied_tag`).

use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::{Error, Result};

/// The longest tag, in bytes: a label, not a sentence.
pub const MAX_TAG_LEN: usize = 64;

/// One tag of a plan step: lowercase ASCII letters and digits, `-`, `_` and `.`,
/// starting with a letter or a digit. One spelling only, so that a step's tag and a
/// seat's `deny_tags` key match exactly or visibly not at all (`Credentials` is refused,
/// not silently a second tag). Read back through the same check.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct StepTag(String);

impl StepTag {
    /// `text` as a tag, or what is wrong with it and how to write it instead.
    pub fn new(text: &str) -> Result<StepTag> {
        let bad = |detail: String| Error::BadStepTag {
            tag: text.to_string(),
            detail,
            suggestion: suggestion(text),
        };
        let Some(first) = text.chars().next() else {
            return Err(bad("it is empty".into()));
        };
        if text.len() > MAX_TAG_LEN {
            return Err(bad(format!("it is longer than {MAX_TAG_LEN} bytes")));
        }
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(bad(format!("it starts with {first:?}")));
        }
        if let Some(c) = text.chars().find(|&c| !is_tag_char(c)) {
            return Err(bad(format!("it holds {c:?}")));
        }
        Ok(StepTag(text.to_string()))
    }

    /// The tags of a comma-separated list (`credentials,db`), in order, each once;
    /// white space around a tag is ignored, and a blank list (`""`) is no tags.
    pub fn list(text: &str) -> Result<Vec<StepTag>> {
        let mut tags: Vec<StepTag> = Vec::new();
        for piece in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let tag = StepTag::new(piece)?;
            if !tags.contains(&tag) {
                tags.push(tag);
            }
        }
        Ok(tags)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

fn is_tag_char(c: char) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.')
}

/// The tag `text` most likely means, when there is one: lowercased, with every other
/// character made a `-`.
fn suggestion(text: &str) -> Option<String> {
    let fixed: String = text
        .trim()
        .to_lowercase()
        .chars()
        .map(|c| if is_tag_char(c) { c } else { '-' })
        .collect();
    let fixed = fixed.trim_matches(|c| matches!(c, '-' | '_' | '.'));
    (!fixed.is_empty() && fixed.len() <= MAX_TAG_LEN && fixed != text).then(|| fixed.to_string())
}

impl fmt::Display for StepTag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for StepTag {
    type Err = Error;
    fn from_str(s: &str) -> Result<StepTag> {
        StepTag::new(s)
    }
}

impl<'de> Deserialize<'de> for StepTag {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<StepTag, D::Error> {
        let text = String::deserialize(d)?;
        StepTag::new(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_one_spelling_and_a_bad_one_says_what_to_write() {
        assert_eq!(StepTag::new("credentials").unwrap().as_str(), "credentials");
        assert!(StepTag::new("pii.v2_x-1").is_ok());
        for (bad, hint) in [
            ("Credentials", Some("credentials")),
            ("db creds", Some("db-creds")),
            ("-db", Some("db")),
            ("", None),
            ("é", None),
        ] {
            let err = StepTag::new(bad).unwrap_err();
            let msg = err.to_string();
            assert!(msg.contains(&format!("{bad:?}")), "{msg}");
            match hint {
                Some(h) => assert!(msg.contains(&format!("write \"{h}\"")), "{msg}"),
                None => assert!(!msg.contains("write \""), "{msg}"),
            }
        }
        assert!(StepTag::new(&"a".repeat(65)).is_err());
    }

    #[test]
    fn a_list_keeps_its_order_drops_repeats_and_blank_is_none() {
        let tags = StepTag::list(" credentials, db ,credentials,").unwrap();
        let names: Vec<&str> = tags.iter().map(StepTag::as_str).collect();
        assert_eq!(names, ["credentials", "db"]);
        assert!(StepTag::list("").unwrap().is_empty());
        assert!(StepTag::list("ok,Bad").is_err());
    }

    #[test]
    fn a_stored_tag_is_read_back_through_the_same_check() {
        let tag: StepTag = serde_json::from_str("\"db\"").unwrap();
        assert_eq!(serde_json::to_string(&tag).unwrap(), "\"db\"");
        assert!(serde_json::from_str::<StepTag>("\"DB\"").is_err());
    }
}
