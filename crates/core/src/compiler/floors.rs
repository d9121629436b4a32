//! Section floors: what every section is guaranteed before any section grows, and the
//! rules that put a record in a section's anchored tier.

use super::sections::{ANCHOR_BONUS, Block, Context};

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

/// Completed work, artifacts and assumptions of other steps are optional: the briefing
/// carries one only when it is recent (recorded in the last `RECENT_TURNS` turns) or
/// relevant to the assignment by the task's own terms: at least `AREA_TERMS` of them,
/// and more than the category's typical record shares. A term most records share (a
/// plan whose steps are all "Refine part N of the plan") says nothing about which one
/// matters. The rest are reported as not relevant, and the budget is a ceiling, not a
/// target.
pub const RECENT_TURNS: u32 = 1;
/// Records a category needs before its typical overlap is told apart from a relevant
/// one's; below it, every record sharing `AREA_TERMS` task terms is relevant.
const TYPICAL_FROM: usize = 4;

/// The task overlap a category's typical record has: its lower median.
pub(super) struct RelevanceFloor {
    typical: usize,
}

/// Task overlaps below this are counted in `RelevanceFloor::of`'s histogram; a task has
/// a few dozen terms at most, so larger ones are rare and selected the slow way.
const COUNTED_OVERLAPS: usize = 64;

impl RelevanceFloor {
    /// The lower median of `overlaps`. By a histogram, not a selection: overlaps are
    /// small integers, and selecting among a 10,000-item state's cost every compile
    /// about 0.3 M instructions. The value is the same either way.
    pub(super) fn of(overlaps: impl Iterator<Item = usize> + Clone) -> RelevanceFloor {
        let mut counts = [0usize; COUNTED_OVERLAPS];
        let mut len = 0;
        for o in overlaps.clone() {
            counts[o.min(COUNTED_OVERLAPS - 1)] += 1;
            len += 1;
        }
        if len < TYPICAL_FROM {
            return RelevanceFloor { typical: 0 };
        }
        let mid = (len - 1) / 2;
        let mut below = 0;
        for (value, &count) in counts[..COUNTED_OVERLAPS - 1].iter().enumerate() {
            below += count;
            if below > mid {
                return RelevanceFloor { typical: value };
            }
        }
        // The median is among the large ones.
        let mut overlaps: Vec<usize> = overlaps.collect();
        RelevanceFloor {
            typical: *overlaps.select_nth_unstable(mid).1,
        }
    }
}

/// A category's scores and task overlaps, by record index (`None` when the record is not
/// in the section), with its relevance floor.
pub(super) struct Optional {
    scored: Vec<Option<(u32, usize)>>,
    floor: RelevanceFloor,
}

impl Optional {
    pub(super) fn new(scored: Vec<Option<(u32, usize)>>) -> Optional {
        Optional {
            floor: RelevanceFloor::of(scored.iter().flatten().map(|&(_, o)| o)),
            scored,
        }
    }

    pub(super) fn score(&self, i: usize) -> u32 {
        self.scored[i].map_or(0, |(s, _)| s)
    }

    pub(super) fn relevant(&self, cx: &Context<'_>, i: usize, turn: u32) -> bool {
        self.scored[i].is_some_and(|(_, o)| cx.above_floor(&self.floor, o, turn))
    }
}

impl Context<'_> {
    /// True when a record of an optional category recorded at `turn`, sharing
    /// `task_overlap` terms with the assigned task, is above the relevance floor (see
    /// `RECENT_TURNS`).
    pub(super) fn above_floor(
        &self,
        floor: &RelevanceFloor,
        task_overlap: usize,
        turn: u32,
    ) -> bool {
        turn.saturating_add(RECENT_TURNS) >= self.state.turns
            || (self.same_area(task_overlap) && task_overlap > floor.typical)
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
    use super::{RelevanceFloor, TYPICAL_FROM, cites_earlier_decision};

    proptest::proptest! {
        /// The histogram finds the lower median a selection finds, the overlaps past
        /// the histogram's end included.
        #[test]
        fn the_typical_overlap_is_the_lower_median(
            overlaps in proptest::collection::vec(
                proptest::prop_oneof![0usize..8, 60usize..70, 0usize..1000],
                0..40,
            ),
        ) {
            let expected = if overlaps.len() < TYPICAL_FROM {
                0
            } else {
                let mut sorted = overlaps.clone();
                sorted.sort_unstable();
                sorted[(sorted.len() - 1) / 2]
            };
            proptest::prop_assert_eq!(
                RelevanceFloor::of(overlaps.iter().copied()).typical,
                expected
            );
        }
    }

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
