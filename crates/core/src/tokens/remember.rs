//! An estimator that remembers what it counted, for a process that counts the same texts
//! turn after turn: a run's briefings render mostly the same records, task and
//! objective every turn, and each rendered piece is counted again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use super::TokenEstimator;

/// Texts longer than this are not remembered whole: a whole briefing or request is new
/// every turn, and remembering it would only fill the memo. Such a text is counted as
/// the sum of its parts between the places where its count splits (see
/// `splits_after_line_break`), each remembered: the lines of this turn's briefing are
/// mostly the last one's.
const LONGEST: usize = 2048;

/// Bytes of remembered text per generation. A turn's pieces come to a few kilobytes,
/// so the counts of the texts a run keeps showing stay in the memo.
const GENERATION_BYTES: usize = 256 * 1024;

/// `inner`'s counts, remembered per text, so a text counted before costs a lookup.
/// Exact: a count is reused only for the same text, and a text is cut only where
/// `inner` says its count is the sum of the parts', so every count is `inner`'s own.
/// One per session: the memo is behind a lock that one thread takes at a time. Bounded: when a generation of remembered text is full it becomes the
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

    /// `text`'s count as the sum of its parts' (see `LONGEST`), each remembered.
    fn count_parts(&self, memo: &mut Generations, text: &str) -> usize {
        let mut total = 0;
        let mut start = 0;
        for (i, _) in text.match_indices('\n') {
            let cut = i + 1;
            let splits = text[cut..]
                .chars()
                .next()
                .is_some_and(|next| self.inner.splits_after_line_break(next));
            if splits {
                total += self.count_part(memo, &text[start..cut]);
                start = cut;
            }
        }
        total + self.count_part(memo, &text[start..])
    }

    fn count_part(&self, memo: &mut Generations, part: &str) -> usize {
        if part.len() > LONGEST {
            return self.inner.count(part);
        }
        if let Some(n) = memo.get(part) {
            return n;
        }
        let n = self.inner.count(part);
        memo.insert(part, n);
        n
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
        let mut memo = self.memo();
        if text.len() <= LONGEST
            && let Some(n) = memo.get(text)
        {
            return n;
        }
        let n = self.count_parts(&mut memo, text);
        if text.len() <= LONGEST {
            memo.insert(text, n);
        }
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
        // Long, and with no place to cut: counted whole every time.
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

    /// Long texts are counted by their parts, and come to the count of the whole: real
    /// briefings (each compiled with the memo, as a session does) and long sources.
    #[test]
    fn a_long_text_counted_by_its_parts_counts_as_the_whole() {
        use crate::compiler::compile;
        let memo = Remembering::new(Arc::new(BpeEstimator));
        let (worker, assignment) = crate::tokens::o200k_tests::briefed();
        let mut long = 0;
        for seed in 0..4 {
            let state = crate::synthetic::state_with_items(50 + 100 * seed, seed as u64);
            for budget in [300, 2000, 3000] {
                let remembered = compile(&state, &assignment, &worker, budget, &memo);
                let fresh = compile(&state, &assignment, &worker, budget, &BpeEstimator);
                assert_eq!(remembered, fresh);
                assert_eq!(memo.count(&fresh.text), BpeEstimator.count(&fresh.text));
                long += usize::from(fresh.text.len() > LONGEST);
            }
        }
        assert!(long >= 4, "{long} long briefings");
        for text in [
            include_str!("mod.rs"),
            include_str!("pretokenize.rs"),
            include_str!("../../../../README.md"),
        ] {
            assert_eq!(memo.count(text), BpeEstimator.count(text));
            assert_eq!(memo.count(text), BpeEstimator.count(text), "remembered");
        }
    }
}
