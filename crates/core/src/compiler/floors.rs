//! Section floors: what every section is guaranteed before any section grows, and the
//! rules that put a record in a section's anchored tier.

use super::sections::{ANCHOR_BONUS, Block};

/// Section floors: the items a section is guaranteed before any section grows. A floor
/// is every item of the anchored tier (anchored records, fixed lines, open high and
/// critical issues, failed attempts in the task's area), at least `min` items and at
/// most `max`. The plan compresses to the assigned step and its two neighbours (its
/// heading carries the counts).
pub const FLOOR_PROGRESS: Floor = Floor { min: 3, max: 3 };
pub const FLOOR_CURRENT: Floor = Floor { min: 2, max: 4 };
pub const FLOOR_DECISIONS: Floor = Floor { min: 1, max: 8 };
pub const FLOOR_RECORDS: Floor = Floor { min: 1, max: 1 };
pub const FLOOR_ISSUES: Floor = Floor { min: 1, max: 8 };
pub const FLOOR_FAILED: Floor = Floor { min: 1, max: 6 };
pub const FLOOR_ACTION: Floor = Floor { min: 1, max: 1 };

/// A section's floor: its anchored items, at least `min`, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor {
    pub min: usize,
    pub max: usize,
}

impl Block {
    /// Sets the floor: the items ranked in the anchored tier, at least `floor.min`, at
    /// most `floor.max` (and at most the items there are).
    pub(super) fn with_floor(mut self, floor: Floor) -> Block {
        let anchored = self
            .items
            .iter()
            .take_while(|i| i.score >= ANCHOR_BONUS)
            .count();
        self.floor = anchored.max(floor.min).min(floor.max).min(self.items.len());
        self
    }
}

/// True when `text` names a decision recorded before the `index`-th (`D3`, not `D30x`).
pub(super) fn cites_earlier_decision(text: &str, index: usize) -> bool {
    let b = text.as_bytes();
    let mut at = 0;
    // `str::find` of a char is a word-at-a-time memchr: every decision is scanned.
    while let Some(off) = text[at..].find('D') {
        let start = at + off;
        at = start + 1;
        if start > 0 && b[start - 1].is_ascii_alphanumeric() {
            continue;
        }
        let digits = b[at..].iter().take_while(|c| c.is_ascii_digit()).count();
        let end = at + digits;
        if digits == 0 || digits > 9 || b.get(end).is_some_and(|c| c.is_ascii_alphanumeric()) {
            continue;
        }
        // `D0` names nothing; the ids are 1-based, so `D{n}` is record `n - 1`.
        let n: usize = text[at..end].parse().unwrap_or(0);
        if n >= 1 && n <= index {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::cites_earlier_decision;

    #[test]
    fn a_decision_revises_only_earlier_decisions_it_names() {
        assert!(cites_earlier_decision("Reverse D7: use cursors", 10));
        assert!(cites_earlier_decision("Use cursors (replaces D3)", 3));
        // Itself, a later one, or no id at all.
        assert!(!cites_earlier_decision("Reverse D7: use cursors", 6));
        assert!(!cites_earlier_decision("Reverse D12", 5));
        assert!(!cites_earlier_decision("Use D0, 3D7 or D7x, not ID7", 50));
        assert!(!cites_earlier_decision("Deploy on Dell hardware", 50));
    }
}
