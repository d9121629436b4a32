//! Rendering: every piece of a briefing (a heading, one item line) is written once into
//! one arena string and counted once, so the greedy fill only adds numbers and the final
//! text is a concatenation of arena slices.
//!
//! Every piece ends with a newline and no word spans two pieces. For a subadditive
//! estimator (the heuristic) the sum of the pieces' counts is therefore an upper bound
//! of the count of the assembled text; for the BPE it is close, and `fill` checks the
//! assembled text anyway.

use std::fmt::Write as _;
use std::ops::Range;

use crate::ids::WorkerId;
use crate::tokens::TokenEstimator;

/// Longest rendering of one record's free text, in chars, before it is shortened.
pub(super) const MAX_ITEM_CHARS: usize = 400;
/// Longest rendering of the predecessor's notes, in chars.
pub(super) const MAX_NOTES_CHARS: usize = 1200;
/// Words of a warning kept in its shortest form, at least (up to twice as many when its
/// first clause, or what it asks the reader to do, runs longer).
pub(super) const WARNING_FLOOR_WORDS: usize = 8;
/// Words of the predecessor's notes kept in their shortest form (their floor).
pub(super) const NOTES_FLOOR_WORDS: usize = 40;

/// Appended where free text was cut.
pub(super) const CLIP_MARKER: &str = " …";
/// Appended where the task or objective was cut (invariant 6's last resort).
pub(super) const SHORTENED_MARKER: &str = " … [shortened to fit budget]";

/// A rendered piece: a range of the arena and its token count.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Piece {
    pub start: usize,
    pub end: usize,
    pub tokens: usize,
}

impl Piece {
    pub fn range(self) -> Range<usize> {
        self.start..self.end
    }
}

pub(super) struct Arena<'e> {
    pub buf: String,
    estimator: &'e dyn TokenEstimator,
    /// Where the piece being written starts.
    start: usize,
}

impl<'e> Arena<'e> {
    pub fn new(estimator: &'e dyn TokenEstimator, capacity: usize) -> Self {
        Arena {
            buf: String::with_capacity(capacity),
            estimator,
            start: 0,
        }
    }

    /// Starts a piece at the end of the arena.
    pub fn begin(&mut self) -> &mut String {
        self.start = self.buf.len();
        &mut self.buf
    }

    /// Ends the piece started by `begin` (adding its final newline) and counts it.
    pub fn end(&mut self) -> Piece {
        self.buf.push('\n');
        let start = self.start;
        let end = self.buf.len();
        Piece {
            start,
            end,
            tokens: self.estimator.count(&self.buf[start..end]),
        }
    }

    /// Ends the piece started by `begin` without counting it (`count` does, when a fill
    /// needs it): a record's compact form is needed only when the floors do not fit.
    pub fn end_uncounted(&mut self) -> Piece {
        self.buf.push('\n');
        Piece {
            start: self.start,
            end: self.buf.len(),
            tokens: 0,
        }
    }

    /// Takes back the piece started by `begin`.
    pub fn discard(&mut self) {
        self.buf.truncate(self.start);
    }

    /// Counts `piece` (one ended by `end_uncounted`).
    pub fn count(&self, piece: &mut Piece) {
        piece.tokens = self.estimator.count(&self.buf[piece.range()]);
    }

    pub fn text(&self, piece: Piece) -> &str {
        &self.buf[piece.range()]
    }

    pub fn estimator(&self) -> &'e dyn TokenEstimator {
        self.estimator
    }
}

/// Appends `text` with every whitespace run collapsed to one space (so an item stays
/// one line), cut after `max_chars` chars. Returns true when it was cut.
pub(super) fn push_clean(out: &mut String, text: &str, max_chars: usize) -> bool {
    // Most record text is short, ASCII and single-spaced already: copy it whole.
    let b = text.as_bytes();
    if b.len() <= max_chars
        && b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && b.iter().all(|&c| (b' '..0x7f).contains(&c))
        && !text.contains("  ")
    {
        out.push_str(text);
        return false;
    }
    let mut chars = 0usize;
    let mut pending_space = false;
    for ch in text.chars() {
        if ch.is_whitespace() {
            pending_space = true;
            continue;
        }
        if chars >= max_chars {
            out.push_str(CLIP_MARKER);
            return true;
        }
        if pending_space && chars > 0 {
            out.push(' ');
            chars += 1;
        }
        pending_space = false;
        out.push(ch);
        chars += 1;
    }
    false
}

/// Appends the first `words` words of `text`; returns true when words were left out.
pub(super) fn push_words(out: &mut String, text: &str, words: usize) -> bool {
    let mut it = text.split_whitespace();
    for (i, w) in it.by_ref().take(words).enumerate() {
        if i > 0 {
            out.push(' ');
        }
        // A single enormous "word" is still bounded.
        push_clean(out, w, MAX_ITEM_CHARS / 4);
    }
    if it.next().is_some() {
        out.push_str(CLIP_MARKER);
        true
    } else {
        false
    }
}

/// Words that open what a warning asks the reader to do or not to do.
const ACTION_CUES: &[&str] = &[
    "always", "ask", "avoid", "before", "check", "do", "don't", "ensure", "fix", "keep", "make",
    "never", "only", "re-run", "read", "rerun", "run", "skip", "stop", "test", "use", "verify",
    "wait",
];

/// Words that join a clause to what the reader must do (`…, so run the gate`).
const ACTION_JOINS: &[&str] = &["and", "but", "so", "then", "please", "therefore"];

fn bare(word: &str) -> String {
    word.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'' && c != '-')
        .to_lowercase()
}

fn ends_clause(word: &str) -> bool {
    word.ends_with([',', ';', ':', '.', '!', '?']) || word == "—" || word == "-"
}

/// Appends the shortest form of a warning that still says what to do: its first clause
/// (`WARNING_FLOOR_WORDS` words at least, twice that at most) when it opens with what
/// to do; otherwise its opening words, ` … `, and the clause that asks for an action
/// (`…, so run the migrations gate before trusting any test`). Returns true when words
/// were left out.
pub(super) fn push_warning_floor(out: &mut String, text: &str) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    let min = WARNING_FLOOR_WORDS;
    let max = 2 * WARNING_FLOOR_WORDS;
    if words.len() <= min {
        return push_words(out, text, min);
    }
    // Where the action starts: the first cue word that opens the text or a clause.
    let action = (0..words.len()).find(|&k| {
        ACTION_CUES.contains(&bare(words[k]).as_str())
            && (k == 0
                || ends_clause(words[k - 1])
                || ACTION_JOINS.contains(&bare(words[k - 1]).as_str()))
    });
    let lead = WARNING_FLOOR_WORDS / 2;
    let (start, from) = match action {
        Some(k) if k > lead => (Some(lead), k),
        Some(k) => (None, k),
        None => (None, 0),
    };
    let mut shown: Vec<&str> = Vec::with_capacity(max + lead);
    if let Some(lead) = start {
        shown.extend(&words[..lead]);
    } else {
        shown.extend(&words[..from]);
    }
    let mut end = from;
    while end < words.len() && end - from < max {
        end += 1;
        let n = if start.is_some() { end - from } else { end };
        if n >= min && ends_clause(words[end - 1]) {
            break;
        }
    }
    let mut cut = false;
    for (i, w) in shown.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        push_clean(out, w, MAX_ITEM_CHARS / 4);
    }
    if start.is_some() {
        out.push_str(CLIP_MARKER);
        cut = true;
    }
    for (i, w) in words[from..end].iter().enumerate() {
        if i > 0 || !shown.is_empty() {
            out.push(' ');
        }
        push_clean(out, w, MAX_ITEM_CHARS / 4);
    }
    if end < words.len() {
        out.push_str(CLIP_MARKER);
        cut = true;
    }
    cut
}

/// `text` cut to at most `max_chars` chars, preferring the last space in the final
/// quarter, with `SHORTENED_MARKER` appended; `text` itself when it is short enough.
pub(super) fn shorten(text: &str, max_chars: usize) -> (String, bool) {
    let Some((cut, _)) = text.char_indices().nth(max_chars) else {
        return (text.to_string(), false);
    };
    let head = &text[..cut];
    let head = match head.rfind(char::is_whitespace) {
        Some(space) if space >= cut - cut / 4 => &head[..space],
        _ => head,
    };
    let mut out = String::with_capacity(head.len() + SHORTENED_MARKER.len());
    out.push_str(head.trim_end());
    out.push_str(SHORTENED_MARKER);
    (out, true)
}

/// `(by w2, turn 4)`
pub(super) fn push_by(out: &mut String, who: &WorkerId, turn: u32) {
    // Writing to a String cannot fail.
    let _ = write!(out, "(by {who}, turn {turn})");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_collapses_whitespace_and_clips() {
        let mut s = String::new();
        assert!(!push_clean(&mut s, "  a \n b\tc  ", 10));
        assert_eq!(s, "a b c");
        let mut s = String::new();
        assert!(push_clean(&mut s, "abcdef", 3));
        assert_eq!(s, "abc …");
    }

    #[test]
    fn shorten_marks_the_cut_and_keeps_short_text() {
        assert_eq!(shorten("short", 10), ("short".to_string(), false));
        // Backs off to a space in the last quarter, otherwise cuts mid-word.
        let (s, cut) = shorten("one two three four five six", 16);
        assert!(cut);
        assert_eq!(s, "one two three … [shortened to fit budget]");
        let (s, _) = shorten("one two three four five six", 12);
        assert_eq!(s, "one two thre … [shortened to fit budget]");
        let (s, _) = shorten("ééééé", 2);
        assert_eq!(s, "éé … [shortened to fit budget]");
    }

    #[test]
    fn a_shortened_warning_keeps_what_it_asks_for() {
        let mut s = String::new();
        let w = "The staging database was restored from an old backup during turn 5 and the \
                 migrations were never applied there, so run the migrations gate before \
                 trusting any endpoint test";
        assert!(push_warning_floor(&mut s, w));
        assert_eq!(
            s,
            "The staging database was … run the migrations gate before trusting any \
             endpoint test"
        );
        // Opening with the action: its first clause, whole.
        let mut s = String::new();
        let w = "Do not trust the cursor pagination fixtures from turn 4: they predate the \
                 schema change and were generated by hand";
        assert!(push_warning_floor(&mut s, w));
        assert_eq!(
            s,
            "Do not trust the cursor pagination fixtures from turn 4: …"
        );
        // Short warnings are untouched.
        let mut s = String::new();
        assert!(!push_warning_floor(&mut s, "Never close I3 by hand"));
        assert_eq!(s, "Never close I3 by hand");
    }

    #[test]
    fn words_keeps_a_prefix() {
        let mut s = String::new();
        assert!(push_words(&mut s, "do not assume the cache is warm", 3));
        assert_eq!(s, "do not assume …");
    }
}
