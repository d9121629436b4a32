//! What the compiler and the reconciler memoise about a state's records: their term sets
//! (the reconciler compares claims with them) and how many terms each shares with the
//! current assignment (the compiler's relevance scores).

use std::sync::{Arc, Mutex, MutexGuard};

use super::{
    Likeness, RESTATEMENT_THRESHOLD, SubQuery, TermQuery, guarded, normalize, similarity, terms,
};

/// The assignment as the compiler scores records against it: the task and the objective
/// together (relevance), and the task alone (which failed attempts are in its area).
#[derive(Debug)]
pub struct AssignmentQuery {
    pub all: TermQuery,
    pub task: TermQuery,
    /// `task` as a part of `all`, for counting both overlaps in one scan.
    pub task_in_all: SubQuery,
}

/// The term sets of a state's records, and their overlap with the last assignment,
/// computed once and reused by every compile.
///
/// Derived data, not part of the record: it is never serialised, two caches always
/// compare equal, and a clone copies what was computed (the engine clones the state
/// every turn). Each entry carries a stamp of what its text depended on (see the call
/// sites in the compiler), so a record whose scored text changed is recomputed.
#[derive(Default)]
pub struct ScoringCache {
    slots: Mutex<Slots>,
    /// The last assignment query built, keyed by its task and objective (a run asks the
    /// same one until its assignment changes).
    query: Mutex<Option<(String, String, Arc<AssignmentQuery>)>>,
}

#[derive(Default, Clone)]
struct Slots {
    /// Per record category, per record index.
    terms: Vec<Vec<Option<CachedTerms>>>,
    /// Overlaps with a query, per category and index like `terms`; those of
    /// `generation` are for `overlaps_for`. Holding the query's `Arc` keeps its address
    /// from being reused by another query while it is current, so `Arc::ptr_eq` tells
    /// whether it still is.
    overlaps: Vec<Vec<Option<CachedOverlap>>>,
    overlaps_for: Option<Arc<AssignmentQuery>>,
    generation: u32,
    /// Query-independent facts about a record's text (see `fact`), per category and
    /// index like `terms`.
    facts: Vec<Vec<Option<CachedFact>>>,
}

#[derive(Clone, Copy)]
struct CachedFact {
    stamp: u32,
    value: bool,
}

#[derive(Clone)]
struct CachedTerms {
    stamp: u32,
    terms: Box<[u64]>,
}

/// Sixteen bytes, so that the overlaps of a 10,000-item state take few pages to write
/// (a first compile writes them all); the generation is a `u32`, and the overlaps are
/// forgotten before it would wrap.
#[derive(Clone, Copy)]
struct CachedOverlap {
    generation: u32,
    stamp: u32,
    all: u32,
    task: u32,
}

impl ScoringCache {
    /// The query for an assignment's `task` under `objective`, built once per distinct
    /// pair.
    pub fn query(&self, task: &str, objective: &str) -> Arc<AssignmentQuery> {
        let mut cached = self.query.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((t, o, query)) = cached.as_ref()
            && t == task
            && o == objective
        {
            return query.clone();
        }
        let all = TermQuery::new(&[task, objective]);
        let task_only = TermQuery::new(&[task]);
        let query = Arc::new(AssignmentQuery {
            task_in_all: all.sub_query(&task_only),
            all,
            task: task_only,
        });
        *cached = Some((task.to_string(), objective.to_string(), query.clone()));
        query
    }

    /// Locks the cache for one compile.
    pub fn lock(&self) -> ScoringCacheGuard<'_> {
        ScoringCacheGuard {
            slots: self.slots.lock().unwrap_or_else(|e| e.into_inner()),
        }
    }
}

/// A slot of `table`, grown as needed.
#[inline]
fn slot<T>(table: &mut Vec<Vec<Option<T>>>, kind: usize, index: usize) -> &mut Option<T> {
    if table.get(kind).is_none_or(|slots| slots.len() <= index) {
        grow(table, kind, index + 1);
    }
    &mut table[kind][index]
}

/// Grows `table` to hold `len` slots of category `kind`. Out of line: a compile sizes
/// the tables it fills first (`ScoringCacheGuard::reserve`).
#[inline(never)]
fn grow<T>(table: &mut Vec<Vec<Option<T>>>, kind: usize, len: usize) {
    if table.len() <= kind {
        table.resize_with(kind + 1, Vec::new);
    }
    let slots = &mut table[kind];
    if slots.len() < len {
        slots.resize_with(len, || None);
    }
}

pub struct ScoringCacheGuard<'a> {
    slots: MutexGuard<'a, Slots>,
}

impl ScoringCacheGuard<'_> {
    /// Sizes the overlaps of category `kind` for `records` records at once: a first
    /// compile fills every slot, and growing the table slot by slot cost a 10,000-item
    /// state's first compile about 0.4 M instructions.
    pub fn reserve(&mut self, kind: usize, records: usize) {
        grow(&mut self.slots.overlaps, kind, records);
    }

    /// `reserve` for the facts of category `kind` (see `fact`).
    pub fn reserve_facts(&mut self, kind: usize, records: usize) {
        grow(&mut self.slots.facts, kind, records);
    }

    /// The term set of `texts` for record `index` of category `kind`, from the cache when
    /// its stamp matches, else computed (the union of each text's terms) and stored.
    pub fn terms(&mut self, kind: usize, index: usize, stamp: u32, texts: &[&str]) -> &[u64] {
        let slot = slot(&mut self.slots.terms, kind, index);
        let fresh = matches!(slot, Some(c) if c.stamp == stamp);
        if !fresh {
            let mut all: Vec<u64> = Vec::new();
            for t in texts {
                all.extend(terms(t));
            }
            all.sort_unstable();
            all.dedup();
            *slot = Some(CachedTerms {
                stamp,
                terms: all.into_boxed_slice(),
            });
        }
        match slot {
            Some(c) => &c.terms,
            None => &[],
        }
    }

    /// How many distinct terms `texts` (record `index` of category `kind`) share with
    /// `query.all` and with `query.task`.
    ///
    /// A fresh process's first compile scores every record of the state, and building a
    /// term set per record made it 20 times slower than the next compile of a 10,000-item
    /// state. So a record never scored before is scanned once against the query
    /// (`TermQuery::overlap_in`: only words whose prefix a query term has are
    /// hashed), and only one scored again under another query (the next step's) gets
    /// its term set built, which every later query then intersects cheaply. The same
    /// query and stamp again reuse the overlaps.
    pub fn overlaps(
        &mut self,
        query: &Arc<AssignmentQuery>,
        kind: usize,
        index: usize,
        stamp: u32,
        texts: &[&str],
    ) -> (usize, usize) {
        let slots = &mut *self.slots;
        if !slots
            .overlaps_for
            .as_ref()
            .is_some_and(|q| Arc::ptr_eq(q, query))
        {
            slots.overlaps_for = Some(query.clone());
            if slots.generation == u32::MAX {
                slots.overlaps.clear();
                slots.generation = 0;
            }
            slots.generation += 1;
        }
        let generation = slots.generation;
        let memo = slot(&mut slots.overlaps, kind, index);
        let counted = |all: usize, task: usize| CachedOverlap {
            generation,
            stamp,
            all: u32::try_from(all).unwrap_or(u32::MAX),
            task: u32::try_from(task).unwrap_or(u32::MAX),
        };
        match memo {
            Some(c) if c.generation == generation && c.stamp == stamp => {
                return (c.all as usize, c.task as usize);
            }
            Some(_) => {}
            None => {
                let (all, task) = query.all.overlap_in(texts, &query.task_in_all);
                *memo = Some(counted(all, task));
                return (all, task);
            }
        }
        let terms = self.terms(kind, index, stamp, texts);
        let (all, task) = (query.all.shared(terms), query.task.shared(terms));
        *slot(&mut self.slots.overlaps, kind, index) = Some(counted(all, task));
        (all, task)
    }
}

impl ScoringCacheGuard<'_> {
    /// A fact about record `index` of category `kind` that depends only on its text
    /// (`stamp` as for `overlaps`): `compute`d the first time, then remembered, so that
    /// a warm compile does not scan every record's text for it again.
    pub fn fact(
        &mut self,
        kind: usize,
        index: usize,
        stamp: u32,
        compute: impl FnOnce() -> bool,
    ) -> bool {
        let slot = slot(&mut self.slots.facts, kind, index);
        match slot {
            Some(f) if f.stamp == stamp => f.value,
            _ => {
                let value = compute();
                *slot = Some(CachedFact { stamp, value });
                value
            }
        }
    }
}

/// A claim's wording, prepared once to be compared against many records.
pub struct Statement<'a> {
    text: &'a str,
    terms: Vec<u64>,
}

impl<'a> Statement<'a> {
    /// `parts` are joined as if separated by spaces (their term sets are united).
    pub fn new(text: &'a str, more: &[&str]) -> Self {
        let mut all = terms(text);
        for part in more {
            all.extend(terms(part));
        }
        all.sort_unstable();
        all.dedup();
        Statement { text, terms: all }
    }
}

impl ScoringCacheGuard<'_> {
    /// Whether `record` and `claim` are alike by terms alone (the guard not applied),
    /// with the record's term set memoised under (`kind`, `index`); `record` must be
    /// immutable text (stamp 0).
    pub fn similar(
        &mut self,
        kind: usize,
        index: usize,
        record: &[&str],
        claim: &Statement<'_>,
    ) -> bool {
        let terms = self.terms(kind, index, 0, record);
        if terms.is_empty() && claim.terms.is_empty() {
            // Nothing but stopwords on both sides: equal after normalisation or not.
            return record.len() == 1 && normalize(record[0]) == normalize(claim.text);
        }
        // Equal after normalisation implies equal term sets, so similarity covers it.
        similarity(terms, &claim.terms) >= RESTATEMENT_THRESHOLD
    }

    /// `likeness(claim, record)` with the record's term set memoised (see `similar`).
    pub fn likeness(
        &mut self,
        kind: usize,
        index: usize,
        record: &str,
        claim: &Statement<'_>,
    ) -> Likeness {
        if !self.similar(kind, index, &[record], claim) {
            return Likeness::Unrelated;
        }
        if normalize(record) == normalize(claim.text) {
            return Likeness::Same;
        }
        guarded(claim.text, record)
    }
}

impl Clone for ScoringCache {
    fn clone(&self) -> Self {
        let slots = self.slots.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let query = self.query.lock().unwrap_or_else(|e| e.into_inner()).clone();
        ScoringCache {
            slots: Mutex::new(slots),
            query: Mutex::new(query),
        }
    }
}

impl PartialEq for ScoringCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for ScoringCache {}

impl std::fmt::Debug for ScoringCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ScoringCache")
    }
}
