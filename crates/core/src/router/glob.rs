//! Globs over seat names, worker ids and models: `*` (any run of characters, empty
//! included) and `?` (exactly one character); every other character stands for itself.
//!
//! Our own twenty lines rather than a crate: the names are short, the two wildcards are
//! all the config offers, and the match has to be cheap enough to run for every worker
//! and seat on every routing decision.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One glob pattern as written in the config (`lead.*`, `glm-*`, `gpt-?o`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Glob(String);

impl Glob {
    pub fn new(pattern: impl Into<String>) -> Self {
        Glob(pattern.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether `text` matches the whole pattern (globs are anchored at both ends).
    pub fn matches(&self, text: &str) -> bool {
        matches(self.0.as_bytes(), text.as_bytes())
    }

    /// Whether any of `globs` matches `text`.
    pub fn any_matches(globs: &[Glob], text: &str) -> bool {
        globs.iter().any(|g| g.matches(text))
    }
}

impl fmt::Display for Glob {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Glob {
    fn from(pattern: &str) -> Self {
        Glob::new(pattern)
    }
}

/// The classic linear wildcard match with one backtrack point (the last `*`).
///
/// It runs on bytes, yet `?` and the backtrack step advance by whole UTF-8 characters,
/// so the text position is always on a character boundary: a literal pattern character
/// is a complete UTF-8 sequence, and UTF-8 is prefix-free.
fn matches(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // After a `*`: where the pattern resumes, and the text position the star has
    // swallowed up to.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                p += 1;
                if p == pattern.len() {
                    // A trailing star swallows the rest of the text.
                    return true;
                }
                let Some(at) = skip_to_literal(pattern, p, text, t) else {
                    return false;
                };
                t = at;
                star = Some((p, t));
                continue;
            }
            Some(b'?') => {
                p += 1;
                t = next_char(text, t);
                continue;
            }
            Some(&c) if c == text[t] => {
                p += 1;
                t += 1;
                continue;
            }
            _ => {}
        }
        match star {
            Some((resume, swallowed)) => {
                let Some(swallowed) =
                    skip_to_literal(pattern, resume, text, next_char(text, swallowed))
                else {
                    return false;
                };
                star = Some((resume, swallowed));
                p = resume;
                t = swallowed;
            }
            None => return false,
        }
    }
    pattern[p.min(pattern.len())..].iter().all(|&c| c == b'*')
}

/// Where a star may stop swallowing: the first position from `t` whose byte is the
/// literal that follows the star at `resume` (any position when a wildcard follows).
/// Skipping the positions in between is what the matcher would do one failed
/// comparison at a time; `None` when the literal never comes, so nothing can match.
/// The literal's first byte is a UTF-8 lead byte, never found inside a character.
fn skip_to_literal(pattern: &[u8], resume: usize, text: &[u8], t: usize) -> Option<usize> {
    match pattern.get(resume) {
        Some(&c) if c != b'*' && c != b'?' => text
            .get(t..)?
            .iter()
            .position(|&b| b == c)
            .map(|skip| t + skip),
        _ => Some(t),
    }
}

/// The index just past the UTF-8 character that starts at `at`.
fn next_char(text: &[u8], at: usize) -> usize {
    let mut next = at + 1;
    while next < text.len() && (text[next] & 0b1100_0000) == 0b1000_0000 {
        next += 1;
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn m(pattern: &str, text: &str) -> bool {
        Glob::new(pattern).matches(text)
    }

    #[test]
    fn globs_match_seat_names_and_models() {
        assert!(m("lead.*", "lead.build"));
        assert!(m("lead.*", "lead."));
        assert!(!m("lead.*", "lead"));
        assert!(!m("lead.*", "plan.lead.build"));
        assert!(m("glm-*", "glm-4.6"));
        assert!(!m("glm-*", "zai/glm-4.6"));
        assert!(m("*/glm-*", "zai/glm-4.6"));
        assert!(m("gpt-?o", "gpt-4o"));
        assert!(!m("gpt-?o", "gpt-40o"));
        assert!(m("*", ""));
        assert!(m("", ""));
        assert!(!m("", "x"));
        assert!(m("review.*-rounds", "review.deep-rounds"));
        assert!(!m("review.*-rounds", "review.deep-round"));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(m("?", "é"));
        assert!(!m("??", "é"));
        assert!(m("é*", "éa"));
    }

    /// The same rules written the obvious (exponential) way, over characters.
    fn reference(pattern: &[char], text: &[char]) -> bool {
        match pattern.split_first() {
            None => text.is_empty(),
            Some(('*', rest)) => (0..=text.len()).any(|i| reference(rest, &text[i..])),
            Some(('?', rest)) => !text.is_empty() && reference(rest, &text[1..]),
            Some((c, rest)) => text.first() == Some(c) && reference(rest, &text[1..]),
        }
    }

    proptest! {
        #[test]
        fn the_matcher_agrees_with_the_obvious_one(
            pattern in "[ab*?é.]{0,8}",
            text in "[abé.]{0,10}",
        ) {
            let p: Vec<char> = pattern.chars().collect();
            let t: Vec<char> = text.chars().collect();
            prop_assert_eq!(m(&pattern, &text), reference(&p, &t));
        }
    }
}
