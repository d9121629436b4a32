//! Token counting. `TokenEstimator` is the seam: the real o200k BPE tokenizer, exact and
//! offline (its vocabulary and index are compiled into the binary), is the default, and a
//! `max(words, chars/4)` heuristic is the alternative and the benchmark baseline.

mod o200k;
#[cfg(test)]
mod o200k_tests;
mod pretokenize;
mod remember;
mod unicode;
mod vocab_hash;

use std::sync::Arc;

pub use remember::Remembering;

/// Counts the tokens a text costs. Implementations must be deterministic.
pub trait TokenEstimator: Send + Sync {
    fn count(&self, text: &str) -> usize;
    /// A short name for reports (`bpe-o200k`, `heuristic`).
    fn name(&self) -> &'static str;
    /// True when a text cut just after a line break, before a `next` char, counts as
    /// its two parts do: `count(a + b) == count(a) + count(b)` for every `a` that ends
    /// with `\n` and every `b` that starts with `next`, whatever else they hold. It lets
    /// `count_extended` recount only the end of a text whose beginning was counted.
    /// `false`, the default, is always true to the contract.
    fn splits_after_line_break(&self, _next: char) -> bool {
        false
    }
}

/// The tokens of `text`, which begins with `known`, counted `known_tokens` by `estimator`:
/// always `estimator.count(text)`, but without counting `known` again where the
/// estimator can say where a text splits (`splits_after_line_break`). Then only what follows the
/// last cut inside `known` is counted, and the part of `known` before it is taken from
/// `known_tokens`. A `known_tokens` that is not `known`'s count, or a `text` that does
/// not begin with `known`, gets `text` counted whole.
pub fn count_extended(
    estimator: &dyn TokenEstimator,
    known: &str,
    known_tokens: usize,
    text: &str,
) -> usize {
    let Some(cut) = text
        .starts_with(known)
        .then(|| last_cut(estimator, known))
        .flatten()
    else {
        return estimator.count(text);
    };
    // `known` is its part before the cut and the part after it, counted apart.
    match known_tokens.checked_sub(estimator.count(&known[cut..])) {
        Some(before_cut) => before_cut + estimator.count(&text[cut..]),
        None => estimator.count(text),
    }
}

/// The tokens of `text`, which is made of consecutive segments, `(end, known)` each:
/// where it ends in `text`, and its own count when that is known. Always
/// `estimator.count(text)`, but where the estimator says a text splits after a line
/// break (`splits_after_line_break`) the segments between such cuts are counted apart,
/// and one whose count is known is not counted again. A briefing is assembled from
/// pieces the compiler has counted already, so only the few places where a piece does
/// not end at a cut (before a heading's blank line) are counted twice.
pub fn count_segments(
    estimator: &dyn TokenEstimator,
    text: &str,
    segments: &[(usize, Option<usize>)],
) -> usize {
    let mut total = 0;
    // Where the group of segments being gathered starts, and how many it has.
    let (mut start, mut members) = (0, 0);
    for &(end, known) in segments {
        let end = end.min(text.len());
        members += 1;
        // A group's count is known only when it is one segment.
        let alone = if members == 1 { known } else { None };
        let cut = end == text.len()
            || (text.as_bytes()[..end].ends_with(b"\n")
                && (text[end..].chars().next())
                    .is_some_and(|next| estimator.splits_after_line_break(next)));
        if cut {
            total += alone.unwrap_or_else(|| estimator.count(&text[start..end]));
            (start, members) = (end, 0);
        }
    }
    if start < text.len() {
        total += estimator.count(&text[start..]);
    }
    total
}

/// The last place inside `text` (after a line break, before more text) where
/// `estimator` says its count splits.
fn last_cut(estimator: &dyn TokenEstimator, text: &str) -> Option<usize> {
    text.rmatch_indices('\n').map(|(i, _)| i + 1).find(|&cut| {
        text[cut..]
            .chars()
            .next()
            .is_some_and(|next| estimator.splits_after_line_break(next))
    })
}

/// `max(words, ceil(chars / 4))`, where words are separated by ASCII whitespace or other
/// ASCII control characters. Subadditive, so the sum of the counts of pieces is an upper
/// bound of the count of their concatenation with whitespace separators.
#[derive(Debug, Default, Clone, Copy)]
pub struct HeuristicEstimator;

impl TokenEstimator for HeuristicEstimator {
    fn count(&self, text: &str) -> usize {
        let (words, chars) = words_and_chars(text.as_bytes());
        words.max(chars.div_ceil(4))
    }
    fn name(&self) -> &'static str {
        "heuristic"
    }
}

const LO7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HI: u64 = 0x8080_8080_8080_8080;
const ONES: u64 = 0x0101_0101_0101_0101;

/// Whitespace-separated words and UTF-8 chars of `bytes`, eight bytes at a time.
///
/// The compiler counts every rendered piece, so this is its hottest loop. A separator is
/// any ASCII byte up to and including the space (whitespace and control characters); a
/// char is a byte that is not a UTF-8 continuation byte.
fn words_and_chars(bytes: &[u8]) -> (usize, usize) {
    let mut words = 0usize;
    let mut continuation = 0usize;
    // Bit 7 of byte 0 set when the byte before the current chunk was a separator (the
    // start of the text counts as one).
    let mut prev_sep: u64 = 0x80;
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        let x = u64::from_le_bytes(b);
        // Bit 7 set in bytes above 0x20 (adding 0x5f carries into bit 7 exactly when the
        // low seven bits exceed 0x20) and in every non-ASCII byte.
        let word_byte = (((x & LO7) + ONES * 0x5f) | x) & HI;
        let sep = !word_byte & HI;
        let before = (sep << 8) | prev_sep;
        words += (word_byte & before).count_ones() as usize;
        continuation += (x & !(x << 1) & HI).count_ones() as usize;
        prev_sep = (sep >> 56) & 0x80;
    }
    let mut prev = prev_sep != 0;
    for &b in chunks.remainder() {
        let sep = b <= b' ';
        words += usize::from(!sep && prev);
        continuation += usize::from(b & 0xC0 == 0x80);
        prev = sep;
    }
    (words, bytes.len() - continuation)
}

/// The o200k_base BPE (GPT-4o, GPT-4.1, GPT-5 and the o series), exact: the same counts
/// as tiktoken's `encode_ordinary`. Its tables are compiled into the binary and read in
/// place, so it has nothing to load: constructing one is free and the first count in a
/// process is as fast as any other.
#[derive(Debug, Default, Clone, Copy)]
pub struct BpeEstimator;

impl TokenEstimator for BpeEstimator {
    fn count(&self, text: &str) -> usize {
        o200k::count(text)
    }
    fn name(&self) -> &'static str {
        "bpe-o200k"
    }
    fn splits_after_line_break(&self, next: char) -> bool {
        pretokenize::splits_after_line_break(next)
    }
}

/// Which estimator to use, by name (`bpe` or `heuristic`): one type for a run's
/// settings (stored by that name, so a run stored when the setting was a string loads
/// as it is), the configuration file and the command line (`--estimator`, with the
/// `clap` feature).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum EstimatorKind {
    #[default]
    Bpe,
    Heuristic,
}

impl EstimatorKind {
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "bpe" => Some(EstimatorKind::Bpe),
            "heuristic" => Some(EstimatorKind::Heuristic),
            _ => None,
        }
    }

    /// The name settings and the command line use.
    pub fn name(self) -> &'static str {
        match self {
            EstimatorKind::Bpe => "bpe",
            EstimatorKind::Heuristic => "heuristic",
        }
    }

    pub fn build(self) -> Arc<dyn TokenEstimator> {
        match self {
            EstimatorKind::Bpe => Arc::new(BpeEstimator),
            EstimatorKind::Heuristic => Arc::new(HeuristicEstimator),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heuristic_is_max_of_words_and_quarter_chars() {
        let h = HeuristicEstimator;
        assert_eq!(h.count(""), 0);
        assert_eq!(h.count("a b c d e"), 5);
        assert_eq!(h.count("abcdefghijklmnop"), 4);
        assert_eq!(h.count("abcdefghijklmnopq"), 5);
    }

    /// The obvious byte-at-a-time definition the fast path must equal.
    fn reference(text: &str) -> (usize, usize) {
        let words = text
            .split(|c: char| c <= ' ')
            .filter(|w| !w.is_empty())
            .count();
        (words, text.chars().count())
    }

    #[test]
    fn the_fast_count_equals_the_reference_on_awkward_text() {
        let samples = [
            "",
            " ",
            "a",
            "exactly8",
            "exactly8 ",
            " leading and trailing ",
            "tabs\tand\nnew\r\nlines\x0cform feed",
            "ünïcödé wörds — and “quotes” 日本語のテキスト",
            "ab\u{a0}cd",
            "many     spaces        between      words in a longer line of text",
        ];
        for s in samples {
            assert_eq!(words_and_chars(s.as_bytes()), reference(s), "{s:?}");
            // Every alignment of the 8-byte chunks.
            for start in 0..s.len() {
                if let Some(sub) = s.get(start..) {
                    assert_eq!(words_and_chars(sub.as_bytes()), reference(sub), "{sub:?}");
                }
            }
        }
    }

    /// `parts` joined, with each part's own count or none.
    fn segmented(
        est: &dyn TokenEstimator,
        parts: &[(String, bool)],
    ) -> (String, Vec<(usize, Option<usize>)>) {
        let mut text = String::new();
        let mut segments = Vec::new();
        for (part, known) in parts {
            text.push_str(part);
            segments.push((text.len(), known.then(|| est.count(part))));
        }
        (text, segments)
    }

    #[test]
    fn a_briefing_counted_by_its_segments_counts_as_a_whole() {
        let parts = [
            "# Briefing: turn 3, for w1 (mock/alpha)\n",
            "\n## Assigned task\nStep T2: Write the parser\n",
            "\n## Decisions\n",
            "- D1: Use recursive descent — because it is simple (by w1, turn 1)\n",
            "- D2: Reverse D1 /not now/\n",
            "/ a line that starts with a slash\n",
            "  indented, after a line break\n",
            "\n\n## Failed attempts\n",
            "- F1: 日本語 — failed because 😀\n",
            "no newline at the end",
        ];
        for est in [&BpeEstimator as &dyn TokenEstimator, &HeuristicEstimator] {
            for mask in 0..(1u32 << parts.len()) {
                let parts: Vec<(String, bool)> = (parts.iter().enumerate())
                    .map(|(k, p)| (p.to_string(), mask >> k & 1 == 1))
                    .collect();
                let (text, segments) = segmented(est, &parts);
                assert_eq!(
                    count_segments(est, &text, &segments),
                    est.count(&text),
                    "{text:?}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn text_counted_by_its_segments_counts_as_a_whole(
            parts in proptest::collection::vec(("[ a-z\n/#\\-.é日😀]{0,12}\n?", proptest::bool::ANY), 0..8),
        ) {
            for est in [&BpeEstimator as &dyn TokenEstimator, &HeuristicEstimator] {
                let (text, segments) = segmented(est, &parts);
                proptest::prop_assert_eq!(count_segments(est, &text, &segments), est.count(&text));
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn the_fast_count_equals_the_reference_on_any_text(s in "[ a-zé\\t\\n\\r\u{0}\u{1f}\u{c}\u{7f}\u{80}ü日—!~]{0,64}") {
            proptest::prop_assert_eq!(words_and_chars(s.as_bytes()), reference(&s));
        }
    }
}
