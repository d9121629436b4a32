//! Text normalisation and cheap term sets, shared by the compiler (relevance) and the
//! reconciler (recognising restatements, with `guard` keeping apart what differs).

mod guard;
mod query;
mod scoring;

pub use guard::{Aspect, Difference, difference};
pub use query::{SubQuery, TermQuery};
pub use scoring::{AssignmentQuery, ScoringCache, ScoringCacheGuard, Statement};

/// Lower-cases, keeps letters and digits, and collapses everything else to one space.
pub fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            if pending_space && !out.is_empty() {
                out.push(' ');
            }
            pending_space = false;
            out.extend(ch.to_lowercase());
        } else {
            pending_space = true;
        }
    }
    out
}

const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "has", "have",
    "in", "into", "is", "it", "its", "of", "on", "or", "so", "that", "the", "their", "then",
    "there", "these", "this", "to", "was", "we", "were", "will", "with", "use", "used", "using",
    "should", "must", "all", "any", "each", "not", "no", "our", "can", "which",
];

/// Reduces a lower-case word to a crude stem so that "tokens"/"token" and
/// "rotating"/"rotation"/"rotate" meet: strips the first of `ations ation ings ing ies
/// ied ed es s e` that the word ends with, if at least four bytes remain.
///
/// Works on bytes: every suffix is ASCII, so cutting one off a UTF-8 word always leaves
/// a char boundary. Dispatches on the last byte (suffixes ending in different bytes
/// cannot both match, so list order is kept) because this runs for every word the
/// compiler scores.
fn stem(word: &[u8]) -> &[u8] {
    &word[..word.len() - suffix_len(last_bytes(word, 0), word.len())]
}

/// The last eight bytes of `word` (all of them when it is shorter), each or-ed with
/// `set`, the last one lowest: the form `suffix_len` reads, so that a suffix test is one
/// mask and compare.
#[inline]
fn last_bytes(word: &[u8], set: u8) -> u64 {
    match word.last_chunk::<8>() {
        Some(last) => u64::from_be_bytes(*last) | (u64::from(set) * 0x0101_0101_0101_0101),
        None => word.iter().fold(0, |x, &b| x << 8 | u64::from(b | set)),
    }
}

/// A suffix as `last_bytes` has it: its bytes, the mask of its length, its length.
type Suffix = (u64, u64, usize);

const fn suffix(s: &[u8]) -> Suffix {
    let (mut bytes, mut i) = (0u64, 0);
    while i < s.len() {
        bytes = bytes << 8 | s[i] as u64;
        i += 1;
    }
    (bytes, (1 << (8 * s.len())) - 1, s.len())
}

/// The length of the suffix `stem` cuts off a word of `n` bytes whose `last_bytes`,
/// lower-case, are `last`. Always inlined: the scan's `mark` calls it for every word
/// that may be a query term, and the call was a tenth of `mark`'s cost.
#[inline(always)]
fn suffix_len(last: u64, n: usize) -> usize {
    const ATIONS: Suffix = suffix(b"ations");
    const ATION: Suffix = suffix(b"ation");
    const INGS: Suffix = suffix(b"ings");
    const ING: Suffix = suffix(b"ing");
    const IES: Suffix = suffix(b"ies");
    const IED: Suffix = suffix(b"ied");
    const ED: Suffix = suffix(b"ed");
    const ES: Suffix = suffix(b"es");
    const S: Suffix = suffix(b"s");
    const E: Suffix = suffix(b"e");
    let ends = |(bytes, mask, len): Suffix| n > len + 3 && last & mask == bytes;
    let first = |suffixes: &[Suffix]| suffixes.iter().find(|&&s| ends(s)).map_or(0, |s| s.2);
    match last as u8 {
        b's' => first(&[ATIONS, INGS, IES, ES, S]),
        b'n' if ends(ATION) => 5,
        b'g' if ends(ING) => 3,
        b'd' => first(&[IED, ED]),
        b'e' if ends(E) => 1,
        _ => 0,
    }
}

/// FNV-1a over a stemmed term: stable across processes and platforms.
fn term_hash(term: &[u8]) -> u64 {
    term_hash_mapped(term, |b| b)
}

/// `term_hash` of `term` with `map` applied to each byte.
#[inline]
fn term_hash_mapped(term: &[u8], map: impl Fn(u8) -> u8) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in term {
        h ^= u64::from(map(b));
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn is_stopword(word: &[u8]) -> bool {
    STOPWORDS.iter().any(|s| s.as_bytes() == word)
}

/// Calls `f` with the stem of every content word of `text` (lower-cased, stopwords and
/// one-letter words left out), in text order, repeats included.
fn for_each_stem(text: &str, mut f: impl FnMut(&[u8])) {
    let mut word = String::new();
    let mut flush = |word: &mut String| {
        if word.len() >= 2 && !is_stopword(word.as_bytes()) {
            f(stem(word.as_bytes()));
        }
        word.clear();
    };
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            word.extend(ch.to_lowercase());
        } else {
            flush(&mut word);
        }
    }
    flush(&mut word);
}

/// The distinct content terms of a text, as sorted stable hashes.
pub fn terms(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    for_each_stem(text, |stem| out.push(term_hash(stem)));
    out.sort_unstable();
    out.dedup();
    out
}

/// Size of the intersection of two sorted, deduplicated term sets.
pub fn overlap(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// How alike two wordings are, in `[0, 1]`: the Jaccard similarity of their term sets.
pub fn similarity(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = overlap(a, b) as f64;
    shared / (a.len() as f64 + b.len() as f64 - shared)
}

/// Jaccard similarity at or above which two wordings are treated as the same statement.
///
/// Deliberately strict: recording a paraphrase as a new item costs a near-duplicate line,
/// but merging two different decisions that share boilerplate ("X sits behind a single
/// interface" for two different X) would lose one of them.
pub const RESTATEMENT_THRESHOLD: f64 = 0.72;

/// What a claim's wording is to a record's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Likeness {
    /// The same statement: equal after normalisation, or similar wording with nothing
    /// the guard sets apart.
    Same,
    /// Similar enough to pass for a restatement, but they differ in polarity, a number,
    /// a unit or a name: two statements, possibly contradicting each other.
    Apart(Difference),
    /// Not alike.
    Unrelated,
}

/// `claim` against `record`: equal after normalisation, or similar by terms and then
/// checked by the guard.
pub fn likeness(claim: &str, record: &str) -> Likeness {
    if normalize(claim) == normalize(record) {
        return Likeness::Same;
    }
    if similarity(&terms(claim), &terms(record)) < RESTATEMENT_THRESHOLD {
        return Likeness::Unrelated;
    }
    guarded(claim, record)
}

fn guarded(claim: &str, record: &str) -> Likeness {
    match difference(claim, record) {
        Some(d) => Likeness::Apart(d),
        None => Likeness::Same,
    }
}

/// True when `a` and `b` say the same thing (`likeness` is `Same`).
pub fn same_statement(a: &str, b: &str) -> bool {
    likeness(a, b) == Likeness::Same
}

/// Removes provenance stamps as the briefing renders them — `(by w1, turn 3)`,
/// `(done by w1, turn 2)`, `(raised by w1, turn 3; still failing at turn 5)`,
/// `(by w1, turn 3; reaffirmed 2×)` — from `text`, returning the cleaned text and the
/// stamps removed. Other parentheses stay.
pub fn strip_stamps(text: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(text.len());
    let mut removed = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find('(') {
        let after = &rest[open + 1..];
        let Some(close) = after.find(['(', ')']) else {
            break;
        };
        if after[close..].starts_with('(') {
            // Nested or unclosed: keep everything before the inner `(` and look again.
            out.push_str(&rest[..open + 1 + close]);
            rest = &after[close..];
            continue;
        }
        let inner = &after[..close];
        if is_stamp(inner) {
            out.push_str(&rest[..open]);
            out.truncate(out.trim_end().len());
            removed.push(format!("({inner})"));
        } else {
            out.push_str(&rest[..open + 1 + close + 1]);
        }
        rest = &after[close + 1..];
    }
    if removed.is_empty() {
        return (text.to_string(), removed);
    }
    out.push_str(rest);
    (out.trim().to_string(), removed)
}

fn is_stamp(inner: &str) -> bool {
    let inner = inner.trim();
    let by = ["by ", "done by ", "raised by "]
        .iter()
        .find_map(|p| inner.strip_prefix(p));
    let Some(by) = by else {
        return false;
    };
    let head = by.split(';').next().unwrap_or("");
    let Some((who, turn)) = head.rsplit_once(", turn ") else {
        return false;
    };
    !who.trim().is_empty()
        && !who.contains(',')
        && !turn.trim().is_empty()
        && turn.trim().chars().all(|c| c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list-order stemmer `stem` replaced (kept here as the reference).
    fn reference_stem(word: &[u8]) -> &[u8] {
        for suffix in [
            "ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s", "e",
        ] {
            let suffix = suffix.as_bytes();
            if word.len() > suffix.len() + 3 && word.ends_with(suffix) {
                return &word[..word.len() - suffix.len()];
            }
        }
        word
    }

    #[test]
    fn stem_matches_the_list_order_reference() {
        let suffixes = [
            "", "ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s", "e", "ss", "ses",
            "ation s", "eed", "ied s",
        ];
        for stem_len in 0..8 {
            let base = &"rotatxyz"[..stem_len];
            for suffix in suffixes {
                let word = format!("{base}{}", suffix.replace(' ', ""));
                assert_eq!(
                    stem(word.as_bytes()),
                    reference_stem(word.as_bytes()),
                    "{word}"
                );
            }
        }
    }

    proptest::proptest! {
        #[test]
        fn term_query_fast_path_equals_term_sets(
            query in "[a-zA-Zé ]{0,60}",
            text in "[a-zA-Z0-9é ,.;-]{0,120}",
        ) {
            let q = TermQuery::new(&[&query]);
            proptest::prop_assert_eq!(q.overlap(&[&text]), overlap(&terms(&text), q.terms()));
        }

        #[test]
        fn overlap_within_equals_both_term_set_overlaps(
            task in "[a-zA-Zé ]{0,40}",
            objective in "[a-zA-Zé ]{0,40}",
            first in "[a-zA-Z0-9é ,.;-]{0,80}",
            second in "[a-zA-Z0-9é ,.;-]{0,80}",
        ) {
            // As the compiler asks: the task's terms are among the query's.
            let all = TermQuery::new(&[&task, &objective]);
            let sub = TermQuery::new(&[&task]);
            let mut joined = terms(&first);
            joined.extend(terms(&second));
            joined.sort_unstable();
            joined.dedup();
            proptest::prop_assert_eq!(
                all.overlap_within(&[&first, &second], &sub),
                (overlap(&joined, all.terms()), overlap(&joined, sub.terms()))
            );
        }
    }

    #[test]
    fn term_query_overlap_equals_term_set_overlap() {
        let query = TermQuery::new(&[
            "Implement the token rotation endpoint for the PostgreSQL-backed auth API",
            "Ship a task management API with users, projects and Ünïcode tasks",
        ]);
        let texts = [
            "Rotating refresh TOKENS on every use; tokens are revoked",
            "Use PostgreSQL 16 as the primary datastore for projects",
            "Nothing in common here at all",
            "Ünïcode task names are normalised before storage",
            "",
            "a an the is",
            "supercalifragilisticexpialidocious-authentication-rotation-endpoints-implementation x",
        ];
        for t in texts {
            assert_eq!(
                query.overlap(&[t]),
                overlap(&terms(t), query.terms()),
                "{t}"
            );
            assert_eq!(
                query.shared(&terms(t)),
                overlap(&terms(t), query.terms()),
                "{t}"
            );
        }
        let joined = format!("{} {}", texts[0], texts[1]);
        assert_eq!(
            query.overlap(&texts[..2]),
            overlap(&terms(&joined), query.terms())
        );
        assert!(query.overlap(&[texts[1]]) >= 2);
        assert_eq!(query.overlap(&[texts[2]]), 0);
    }

    #[test]
    fn normalisation_ignores_case_punctuation_and_spacing() {
        assert_eq!(normalize("  Use PostgreSQL 16!  "), "use postgresql 16");
        assert_eq!(normalize("Use  postgresql-16"), "use postgresql 16");
    }

    #[test]
    fn restatements_are_recognised_and_different_statements_are_not() {
        assert!(same_statement(
            "Use PostgreSQL 16 as the primary datastore",
            "use postgresql 16 as the primary datastore."
        ));
        assert!(same_statement(
            "Issue short-lived JWT access tokens (15 minutes) with rotating refresh tokens",
            "Access tokens are short-lived JWT tokens expiring after 15 minutes, and refresh tokens rotate"
        ));
        assert!(same_statement(
            "Modelled task status as a PostgreSQL ENUM type",
            "Modelling task status as a native PostgreSQL ENUM type"
        ));
        assert!(!same_statement(
            "Use PostgreSQL 16 as the primary datastore",
            "Use Redis for rate limiting counters"
        ));
        assert!(!same_statement(
            "Passwords are hashed with argon2id",
            "Access tokens are signed JWTs with a 15 minute lifetime"
        ));
    }

    #[test]
    fn shared_boilerplate_does_not_merge_decisions_about_different_things() {
        // Regression: the earlier overlap-coefficient measure merged these, losing one.
        assert!(!same_statement(
            "Add unit tests for the parser",
            "Add unit tests for the lexer"
        ));
        assert!(!same_statement(
            "Decide that rate limiting makes every write idempotent with client-supplied request keys",
            "Decide that full-text search makes every write idempotent with client-supplied request keys"
        ));
    }

    #[test]
    fn stamps_are_stripped_and_other_parentheses_kept() {
        let (t, r) = strip_stamps("T2 (by oai, turn 1) (by oai, turn 4)");
        assert_eq!((t.as_str(), r.len()), ("T2", 2));
        let (t, r) = strip_stamps("Fix parse (raised by w1, turn 3; still failing at turn 5): x");
        assert_eq!((t.as_str(), r.len()), ("Fix parse: x", 1));
        let (t, r) = strip_stamps("use f(x) (see notes) (by, turn) (by a, turn two)");
        assert_eq!(t, "use f(x) (see notes) (by, turn) (by a, turn two)");
        assert!(r.is_empty());
        let (t, _) = strip_stamps("open ( paren (by w1, turn 2)");
        assert_eq!(t, "open ( paren");
        let (t, r) = strip_stamps("done (done by w2, turn 7)");
        assert_eq!((t.as_str(), r.len()), ("done", 1));
    }
}
