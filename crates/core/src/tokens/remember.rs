//! An estimator that remembers what it counted, for a process that counts the same texts
//! turn after turn: a run's briefings render mostly the same records, task and
//! objective every turn, and each rendered piece is counted again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::TokenEstimator;

/// Texts longer than this are counted afresh: a whole briefing or request is new every
/// turn, and remembering it would only fill the memo.
const LONGEST: usize = 2048;

/// Bytes of remembered text per generation. A turn's pieces come to a few kilobytes,
/// so the counts of the texts a run keeps showing stay in the memo.
const GENERATION_BYTES: usize = 256 * 1024;

/// `inner`'s counts, remembered per text (short texts only), so a text counted before
/// costs a lookup. Exact: a count is reused only for the same text, so every count is
/// `inner`'s own. Bounded: when a generation of remembered text is full it becomes the
/// old one, and the one before it is forgotten; a text found in the old generation is
/// carried into the new one, so what keeps recurring stays.
pub struct Remembering {
    inner: Arc<dyn TokenEstimator>,
    memo: Mutex<Generations>,
}

#[derive(Default)]
struct Generations {
    current: HashMap<Box<str>, usize>,
    current_bytes: usize,
    old: HashMap<Box<str>, usize>,
}

impl Generations {
    fn get(&mut self, text: &str) -> Option<usize> {
        if let Some(&n) = self.current.get(text) {
            return Some(n);
        }
        let n = self.old.remove(text)?;
        self.insert(text, n);
        Some(n)
    }

    fn insert(&mut self, text: &str, n: usize) {
        if self.current_bytes + text.len() > GENERATION_BYTES {
            self.old = std::mem::take(&mut self.current);
            self.current_bytes = 0;
        }
        self.current_bytes += text.len();
        self.current.insert(text.into(), n);
    }
}

impl Remembering {
    pub fn new(inner: Arc<dyn TokenEstimator>) -> Self {
        Remembering {
            inner,
            memo: Mutex::new(Generations::default()),
        }
    }

    fn memo(&self) -> std::sync::MutexGuard<'_, Generations> {
        // The memo holds only counts already made: one left half-updated by a panic is
        // still true.
        self.memo.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl std::fmt::Debug for Remembering {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remembering")
            .field("inner", &self.inner.name())
            .finish_non_exhaustive()
    }
}

impl TokenEstimator for Remembering {
    fn count(&self, text: &str) -> usize {
        if text.len() > LONGEST {
            return self.inner.count(text);
        }
        if let Some(n) = self.memo().get(text) {
            return n;
        }
        // Counted without the lock held: another thread's count of the same text is
        // the same number.
        let n = self.inner.count(text);
        self.memo().insert(text, n);
        n
    }

    /// The inner estimator's name: the counts are its own.
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn splits_after_line_break(&self, next: char) -> bool {
        self.inner.splits_after_line_break(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::BpeEstimator;

    /// Counts the calls that reach it.
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    impl TokenEstimator for Counting {
        fn count(&self, text: &str) -> usize {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            BpeEstimator.count(text)
        }
        fn name(&self) -> &'static str {
            "counting"
        }
    }

    #[test]
    fn a_remembered_count_is_the_inner_count_of_the_same_text() {
        let inner = Arc::new(Counting::default());
        let memo = Remembering::new(inner.clone());
        let texts = [
            "- D1: use PostgreSQL",
            "- D1: use PostgreSQL.",
            "",
            "日本語",
        ];
        for _ in 0..3 {
            for t in texts {
                assert_eq!(memo.count(t), BpeEstimator.count(t), "{t:?}");
            }
        }
        assert_eq!(
            inner.0.load(std::sync::atomic::Ordering::Relaxed),
            texts.len()
        );
        assert_eq!(memo.name(), "counting");
    }

    #[test]
    fn the_memo_stays_bounded_and_keeps_what_recurs() {
        let inner = Arc::new(Counting::default());
        let memo = Remembering::new(inner.clone());
        let recurring = "## Objective\nBuild a small task-management API";
        // Enough distinct texts to fill a generation more than twice.
        let n = 3 * GENERATION_BYTES / "item 0000 of a long run".len();
        for i in 0..n {
            let text = format!("item {i:04} of a long run");
            assert_eq!(memo.count(&text), BpeEstimator.count(&text));
            assert_eq!(memo.count(recurring), BpeEstimator.count(recurring));
        }
        let long = "a b ".repeat(LONGEST);
        for _ in 0..3 {
            assert_eq!(memo.count(&long), BpeEstimator.count(&long));
        }
        let g = memo.memo();
        let bytes = |m: &HashMap<Box<str>, usize>| m.keys().map(|k| k.len()).sum::<usize>();
        assert!(bytes(&g.current) <= GENERATION_BYTES && bytes(&g.old) <= GENERATION_BYTES);
        assert!(g.current.contains_key(recurring) || g.old.contains_key(recurring));
        // Each distinct text once, the recurring one once, the long one every time.
        assert_eq!(
            inner.0.load(std::sync::atomic::Ordering::Relaxed),
            n + 1 + 3
        );
    }
}
