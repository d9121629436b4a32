//! Text normalisation and cheap term sets, shared by the compiler (relevance) and the
//! reconciler (recognising restatements).

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
/// "rotating"/"rotation"/"rotate" meet.
fn stem(word: &str) -> &str {
    for suffix in [
        "ations", "ation", "ings", "ing", "ies", "ied", "ed", "es", "s", "e",
    ] {
        if word.len() > suffix.len() + 3 && word.ends_with(suffix) {
            return &word[..word.len() - suffix.len()];
        }
    }
    word
}

/// FNV-1a over a stemmed term: stable across processes and platforms.
fn term_hash(term: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in term.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// The distinct content terms of a text, as sorted stable hashes.
pub fn terms(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut Vec<u64>| {
        if word.len() >= 2 && !STOPWORDS.contains(&word.as_str()) {
            out.push(term_hash(stem(word)));
        }
        word.clear();
    };
    for ch in text.chars() {
        if ch.is_alphanumeric() {
            word.extend(ch.to_lowercase());
        } else {
            flush(&mut word, &mut out);
        }
    }
    flush(&mut word, &mut out);
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

/// How alike two wordings are, in `[0, 1]`: the overlap coefficient of their term sets
/// (shared terms over the smaller set), damped when the sets differ a lot in size.
pub fn similarity(a: &[u64], b: &[u64]) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let shared = overlap(a, b) as f64;
    let small = a.len().min(b.len()) as f64;
    let large = a.len().max(b.len()) as f64;
    let jaccard = shared / (small + large - shared);
    let coefficient = shared / small;
    (coefficient + jaccard) / 2.0
}

/// Threshold above which two wordings are treated as the same statement.
pub const RESTATEMENT_THRESHOLD: f64 = 0.6;

/// True when `a` and `b` say the same thing: equal after normalisation, or near-duplicate
/// wordings by term similarity.
pub fn same_statement(a: &str, b: &str) -> bool {
    normalize(a) == normalize(b) || similarity(&terms(a), &terms(b)) >= RESTATEMENT_THRESHOLD
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "Rotate refresh tokens on every use and revoke the whole token family on reuse",
            "Refresh tokens are rotated on each use; reuse revokes the token family"
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
}
