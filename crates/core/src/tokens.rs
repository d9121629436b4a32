//! Token counting. `TokenEstimator` is the seam: a real BPE tokenizer that works offline
//! (its vocabulary is compiled into the binary) is the default, and a `max(words,
//! chars/4)` heuristic is the fallback and the benchmark baseline.

use std::sync::{Arc, LazyLock};

/// Counts the tokens a text costs. Implementations must be deterministic.
pub trait TokenEstimator: Send + Sync {
    fn count(&self, text: &str) -> usize;
    /// A short name for reports (`bpe-o200k`, `heuristic`).
    fn name(&self) -> &'static str;
}

/// `max(words, ceil(chars / 4))`. Subadditive, so the sum of the counts of pieces is an
/// upper bound of the count of their concatenation with whitespace separators.
#[derive(Debug, Default, Clone, Copy)]
pub struct HeuristicEstimator;

impl TokenEstimator for HeuristicEstimator {
    fn count(&self, text: &str) -> usize {
        let mut words = 0usize;
        let mut chars = 0usize;
        let mut in_word = false;
        for b in text.bytes() {
            // Counting UTF-8 lead bytes counts chars without decoding.
            if (b & 0xC0) != 0x80 {
                chars += 1;
            }
            let space = b.is_ascii_whitespace();
            if !space && !in_word {
                words += 1;
            }
            in_word = !space;
        }
        words.max(chars.div_ceil(4))
    }
    fn name(&self) -> &'static str {
        "heuristic"
    }
}

/// The o200k_base BPE (GPT-4o family), loaded from data compiled into the binary.
pub struct BpeEstimator {
    bpe: &'static tiktoken_rs::CoreBPE,
}

static O200K: LazyLock<Option<tiktoken_rs::CoreBPE>> =
    LazyLock::new(|| tiktoken_rs::o200k_base().ok());

impl BpeEstimator {
    /// Loads the tokenizer (tens of milliseconds the first time in a process).
    /// `None` only if the embedded vocabulary fails to load, which the tests rule out.
    pub fn load() -> Option<Self> {
        O200K.as_ref().map(|bpe| BpeEstimator { bpe })
    }
}

impl std::fmt::Debug for BpeEstimator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BpeEstimator(o200k_base)")
    }
}

impl TokenEstimator for BpeEstimator {
    fn count(&self, text: &str) -> usize {
        self.bpe.encode_ordinary(text).len()
    }
    fn name(&self) -> &'static str {
        "bpe-o200k"
    }
}

/// Which estimator to use, by name (`bpe` or `heuristic`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
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

    /// The estimator; falls back to the heuristic if the BPE cannot load.
    pub fn build(self) -> Arc<dyn TokenEstimator> {
        match self {
            EstimatorKind::Bpe => match BpeEstimator::load() {
                Some(b) => Arc::new(b),
                None => Arc::new(HeuristicEstimator),
            },
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

    #[test]
    fn bpe_loads_offline_and_counts_real_tokens() {
        let bpe = BpeEstimator::load().expect("embedded o200k vocabulary loads");
        assert_eq!(bpe.count("hello world"), 2);
        assert!(bpe.count("PostgreSQL schema for the task management API") > 5);
    }
}
