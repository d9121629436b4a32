//! The guard on restatements: what keeps two wordings apart however alike their words.
//!
//! Term similarity drops stopwords (`not`, `no` among them) and one-character words (the
//! digit in "retry limit 5"), which is right for relevance scoring but makes "X is not
//! rate limited" look like "X is rate limited". Before two similar wordings are treated
//! as one statement, this guard compares what term sets cannot see: polarity (negations,
//! negative verbs, opposite pairs), numbers, the unit after a number, and identifiers
//! (record ids, file names, versions, code names). It runs only on pairs that already
//! passed the similarity test, so it costs nothing on the compiler's scoring path.

use std::collections::BTreeSet;
use std::fmt;

use super::{is_stopword, stem};

/// What two similar wordings differ in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aspect {
    /// One negates, disables or forbids what the other affirms, or they take opposite
    /// sides of a pair (pass/fail, before/after).
    Polarity,
    /// A number one has and the other has not (`3` vs `5`, single digits included).
    Number,
    /// The same number with a different unit (`9 minutes` vs `9 seconds`).
    Unit,
    /// An identifier one has and the other has not (`D2`, `T3`, `parser.rs`, `v2`).
    Name,
    /// Two reasons for the same failed attempt that contradict each other.
    Reason,
}

impl Aspect {
    pub fn as_str(self) -> &'static str {
        match self {
            Aspect::Polarity => "polarity",
            Aspect::Number => "number",
            Aspect::Unit => "unit",
            Aspect::Name => "name",
            Aspect::Reason => "reason",
        }
    }
}

/// Why two wordings that look alike are not the same statement: the aspect, and what
/// each side says on it (`none` when it says nothing: `NOTHING`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    pub aspect: Aspect,
    /// What the newer wording (the claim) says.
    pub claim: String,
    /// What the earlier wording (the record) says.
    pub record: String,
}

/// What a side of a `Difference` says when it says nothing on the aspect.
const NOTHING: &str = "none";

impl Difference {
    /// Both sides say something on the aspect (`5` vs `3`), rather than one adding what
    /// the other leaves out.
    pub fn on_both_sides(&self) -> bool {
        self.claim != NOTHING && self.record != NOTHING
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} vs {})",
            self.aspect.as_str(),
            self.claim,
            self.record
        )
    }
}

/// The first thing that sets `claim` apart from `record`, checked in the order polarity,
/// number, unit, name; `None` when nothing does.
pub fn difference(claim: &str, record: &str) -> Option<Difference> {
    let a = Parsed::new(claim);
    let b = Parsed::new(record);
    polarity(&a, &b)
        .or_else(|| numbers(&a, &b))
        .or_else(|| units(&a, &b))
        .or_else(|| names(&a, &b))
}

/// Words that negate what follows them.
const NEGATIONS: &[&str] = &[
    "not", "no", "never", "without", "none", "nor", "neither", "nothing", "nobody", "nowhere",
    "cannot", "non", "dont", "doesnt", "didnt", "isnt", "arent", "wasnt", "werent", "wont", "cant",
    "couldnt", "shouldnt", "wouldnt", "mustnt", "hasnt", "havent", "hadnt", "neednt",
];

/// Verbs that negate by themselves ("disable X" says the opposite of "X"), as the start
/// of every inflection.
const NEGATIVE_ROOTS: &[&str] = &[
    "disabl", "deny", "deni", "forbid", "forbad", "prohibit", "disallow", "prevent", "avoid",
    "exclud", "reject", "refus",
];

/// Opposite pairs: a wording with only the left side says the opposite of one with only
/// the right side. Every inflection is listed (a stemmer would merge "pass"/"password").
const OPPOSITES: &[(&[&str], &[&str])] = &[
    (
        &["pass", "passes", "passed", "passing"],
        &["fail", "fails", "failed", "failing", "failure", "failures"],
    ),
    (
        &[
            "succeed",
            "succeeds",
            "succeeded",
            "success",
            "successful",
            "successfully",
        ],
        &["fail", "fails", "failed", "failing", "failure", "failures"],
    ),
    (
        &["enable", "enables", "enabled", "enabling"],
        &["disable", "disables", "disabled", "disabling"],
    ),
    (
        &["allow", "allows", "allowed", "allowing"],
        &["block", "blocks", "blocked", "blocking"],
    ),
    (
        &["add", "adds", "added", "adding"],
        &["remove", "removes", "removed", "removing"],
    ),
    (
        &["increase", "increases", "increased", "increasing"],
        &[
            "decrease",
            "decreases",
            "decreased",
            "decreasing",
            "reduce",
            "reduces",
            "reduced",
        ],
    ),
    (
        &["encrypt", "encrypts", "encrypted"],
        &["decrypt", "decrypts", "decrypted"],
    ),
    (&["public", "publicly"], &["private", "privately"]),
    (&["internal", "internally"], &["external", "externally"]),
    (&["before"], &["after"]),
    (&["first"], &["last"]),
    (&["min", "minimum"], &["max", "maximum"]),
    (&["more"], &["less", "fewer"]),
    (&["above"], &["below"]),
    (&["upper"], &["lower"]),
    (
        &["sync", "synchronous", "synchronously"],
        &["async", "asynchronous", "asynchronously"],
    ),
    (&["true"], &["false"]),
    (&["valid"], &["invalid"]),
    (&["required", "mandatory"], &["optional"]),
    (&["open", "opened"], &["closed"]),
    (&["ascending"], &["descending"]),
    (&["inbound"], &["outbound"]),
];

/// Words skipped when looking for what a negation negates ("is not *being* rate limited").
const FILLERS: &[&str] = &[
    "do",
    "does",
    "did",
    "ever",
    "yet",
    "even",
    "always",
    "also",
    "just",
    "still",
    "currently",
    "may",
    "might",
    "could",
    "would",
    "shall",
    "had",
    "get",
    "got",
    "need",
    "needs",
    "being",
    "really",
    "fully",
    "longer",
];

const NUMBER_WORDS: &[(&str, &str)] = &[
    ("zero", "0"),
    ("one", "1"),
    ("once", "1"),
    ("two", "2"),
    ("twice", "2"),
    ("three", "3"),
    ("four", "4"),
    ("five", "5"),
    ("six", "6"),
    ("seven", "7"),
    ("eight", "8"),
    ("nine", "9"),
    ("ten", "10"),
    ("eleven", "11"),
    ("twelve", "12"),
];

#[derive(Debug)]
enum Token {
    /// A plain word, lower-cased.
    Word(String),
    /// A number in canonical form (no thousands separators, no trailing decimal zeros).
    Number(String),
    /// An identifier, lower-cased.
    Name(String),
    /// A negation.
    Negation(String),
}

/// A wording as the guard sees it.
struct Parsed {
    tokens: Vec<Token>,
    /// Every lower-cased word and identifier (for "does the other side mention it at all").
    words: BTreeSet<String>,
    /// Stems of the plain words.
    stems: BTreeSet<String>,
}

/// Characters that join two alphanumerics into one token: `parser.rs`, `src/a.rs`,
/// `MAX_POOL_SIZE`, `std::io`, `don't`, `1,000`. A hyphen separates: `rate-limited` is two
/// words, as the term sets see it.
fn is_joiner(c: char, prev: char, next: char) -> bool {
    match c {
        '.' | '_' | '/' | ':' | '\'' | '’' => prev.is_alphanumeric() && next.is_alphanumeric(),
        ',' => prev.is_ascii_digit() && next.is_ascii_digit(),
        _ => false,
    }
}

fn raw_tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for token in joined_tokens(text) {
        if is_prose_joint(&token) {
            // "and/or", "e.g", "read/write": words, not a path or a name.
            out.extend(
                (token.split(['/', '.']))
                    .filter(|w| !w.is_empty())
                    .map(str::to_string),
            );
        } else {
            out.push(token);
        }
    }
    out
}

/// Prose, not a name: letters joined only by `/` ("and/or", "read/write"), or only by
/// `.` between single letters ("e.g", "i.e"); no digit, `_`, `:` or apostrophe.
fn is_prose_joint(token: &str) -> bool {
    if token.contains(['_', ':', '\'']) || token.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    let dotted = token.contains('.');
    let slashed = token.contains('/');
    if dotted && !slashed {
        return token.split('.').all(|p| p.chars().count() <= 1);
    }
    slashed && !dotted
}

fn joined_tokens(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let joins = i > 0
            && i + 1 < chars.len()
            && !cur.is_empty()
            && is_joiner(c, chars[i - 1], chars[i + 1]);
        if c.is_alphanumeric() || joins {
            cur.push(if c == '’' { '\'' } else { c });
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// `1,000` → `1000`, `0.50` → `0.5`, `007` → `7`; `None` when `s` is not a number.
fn canonical_number(s: &str) -> Option<String> {
    let plain: String = s.chars().filter(|&c| c != ',').collect();
    let mut parts = plain.split('.');
    let int = parts.next()?;
    let frac = parts.next();
    if parts.next().is_some()
        || int.is_empty()
        || !int.bytes().all(|b| b.is_ascii_digit())
        || frac.is_some_and(|f| f.is_empty() || !f.bytes().all(|b| b.is_ascii_digit()))
    {
        return None;
    }
    let int = int.trim_start_matches('0');
    let int = if int.is_empty() { "0" } else { int };
    match frac.map(|f| f.trim_end_matches('0')) {
        Some(f) if !f.is_empty() => Some(format!("{int}.{f}")),
        _ => Some(int.to_string()),
    }
}

fn classify(raw: &str) -> Token {
    let lower = raw.to_lowercase();
    if let Some(n) = canonical_number(&lower) {
        return Token::Number(n);
    }
    if let Some(&(_, n)) = NUMBER_WORDS.iter().find(|(w, _)| *w == lower) {
        return Token::Number(n.to_string());
    }
    if let Some((head, tail)) = lower.split_once('\'') {
        // "don't", "isn't"; any other apostrophe ("user's") leaves the word before it.
        if tail == "t" && head.ends_with('n') {
            return Token::Negation(lower);
        }
        return classify_word(head, raw.split('\'').next().unwrap_or(raw));
    }
    classify_word(&lower, raw)
}

fn classify_word(lower: &str, raw: &str) -> Token {
    if NEGATIONS.contains(&lower) {
        return Token::Negation(lower.to_string());
    }
    let has_digit = lower.chars().any(|c| c.is_ascii_digit());
    let has_alpha = lower.chars().any(char::is_alphabetic);
    let joined = lower.contains(['.', '_', '/', ':']);
    let chars: Vec<char> = raw.chars().collect();
    let camel = chars
        .windows(2)
        .any(|w| w[0].is_lowercase() && w[1].is_uppercase());
    let letters = chars.iter().filter(|c| c.is_alphabetic()).count();
    let acronym = letters >= 2
        && chars.iter().all(|c| !c.is_alphabetic() || c.is_uppercase())
        && !is_stopword(lower.as_bytes());
    if (has_digit && has_alpha) || joined || camel || acronym {
        Token::Name(lower.to_string())
    } else {
        Token::Word(lower.to_string())
    }
}

fn stem_of(word: &str) -> String {
    String::from_utf8_lossy(stem(word.as_bytes())).into_owned()
}

impl Parsed {
    fn new(text: &str) -> Self {
        let tokens: Vec<Token> = raw_tokens(text).iter().map(|r| classify(r)).collect();
        let mut words = BTreeSet::new();
        let mut stems = BTreeSet::new();
        for t in &tokens {
            match t {
                Token::Word(w) => {
                    words.insert(w.clone());
                    stems.insert(stem_of(w));
                }
                Token::Name(w) => {
                    words.insert(w.clone());
                }
                Token::Number(_) | Token::Negation(_) => {}
            }
        }
        Parsed {
            tokens,
            words,
            stems,
        }
    }

    /// For each negation, the stem of the first word after it that carries meaning
    /// ("" at the end of the text) and the phrase for display ("not memcached"), sorted.
    fn negated(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for (i, t) in self.tokens.iter().enumerate() {
            let Token::Negation(neg) = t else {
                continue;
            };
            let target = self.tokens[i + 1..].iter().find_map(|t| match t {
                Token::Word(w) if is_stopword(w.as_bytes()) || FILLERS.contains(&w.as_str()) => {
                    None
                }
                Token::Word(w) => Some((stem_of(w), w.as_str())),
                Token::Number(n) | Token::Name(n) => Some((n.clone(), n.as_str())),
                Token::Negation(_) => None,
            });
            out.push(match target {
                Some((stem, word)) => (stem, format!("{neg} {word}")),
                None => (String::new(), neg.clone()),
            });
        }
        out.sort();
        out
    }

    /// The negative verbs used, by root (`deny`/`denied` are one), with a word that
    /// carries it.
    fn negative_roots(&self) -> std::collections::BTreeMap<&'static str, &str> {
        let mut out = std::collections::BTreeMap::new();
        for w in &self.words {
            if let Some(root) = NEGATIVE_ROOTS.iter().find(|r| w.starts_with(*r)) {
                let root = if *root == "deni" { "deny" } else { root };
                out.entry(root).or_insert(w.as_str());
            }
        }
        out
    }

    /// The statement's numbers in order, each as often as it occurs: "lane 1 of 2,
    /// round 2" and "lane 2 of 2, round 1" are different lanes.
    fn numbers(&self) -> Vec<&str> {
        (self.tokens.iter())
            .filter_map(|t| match t {
                Token::Number(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Each number with the word right after it, when that word is a unit candidate
    /// (a plain content word): (number, unit word).
    fn quantities(&self) -> Vec<(&str, &str)> {
        let mut out = Vec::new();
        for (i, t) in self.tokens.iter().enumerate() {
            if let Token::Number(n) = t
                && let Some(next) = self.tokens.get(i + 1)
            {
                let unit = match next {
                    Token::Word(w) if !is_stopword(w.as_bytes()) => Some(w.as_str()),
                    Token::Name(w) => Some(w.as_str()),
                    _ => None,
                };
                if let Some(u) = unit {
                    out.push((n.as_str(), u));
                }
            }
        }
        out
    }

    fn names(&self) -> BTreeSet<&str> {
        (self.tokens.iter())
            .filter_map(|t| match t {
                Token::Name(n) => Some(n.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Whether `word` (a unit) occurs in this wording, by stem.
    fn mentions_stem(&self, word: &str) -> bool {
        self.stems.contains(&stem_of(word)) || self.words.contains(word)
    }
}

fn quoted(words: &[&str]) -> String {
    if words.is_empty() {
        return NOTHING.into();
    }
    let q: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
    q.join(", ")
}

fn listed<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<&str> = items.into_iter().collect();
    if v.is_empty() {
        NOTHING.into()
    } else {
        v.join(", ")
    }
}

/// Two negated stems name the same thing: equal, or one a prefix of the other (the crude
/// stemmer leaves "logg" for "logged" and "log" for "log").
fn same_target(a: &str, b: &str) -> bool {
    a == b || (a.len().min(b.len()) >= 3 && (a.starts_with(b) || b.starts_with(a)))
}

fn polarity(a: &Parsed, b: &Parsed) -> Option<Difference> {
    let (ta, tb) = (a.negated(), b.negated());
    // Each negation of one side must negate the same thing as one of the other's.
    let mut only_b: Vec<&(String, String)> = tb.iter().collect();
    let mut only_a = Vec::new();
    for t in &ta {
        match only_b.iter().position(|u| same_target(&t.0, &u.0)) {
            Some(k) => {
                only_b.remove(k);
            }
            None => only_a.push(t),
        }
    }
    if !only_a.is_empty() || !only_b.is_empty() {
        let phrases = |v: &[&(String, String)]| {
            quoted(&v.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>())
        };
        return Some(Difference {
            aspect: Aspect::Polarity,
            claim: phrases(&only_a),
            record: phrases(&only_b),
        });
    }
    let (ra, rb) = (a.negative_roots(), b.negative_roots());
    if ra.keys().ne(rb.keys()) {
        let only = |x: &std::collections::BTreeMap<&'static str, &str>,
                    y: &std::collections::BTreeMap<&'static str, &str>| {
            let words: Vec<&str> = (x.iter())
                .filter(|(root, _)| !y.contains_key(*root))
                .map(|(_, w)| *w)
                .collect();
            quoted(&words)
        };
        return Some(Difference {
            aspect: Aspect::Polarity,
            claim: only(&ra, &rb),
            record: only(&rb, &ra),
        });
    }
    for (left, right) in OPPOSITES {
        let side = |p: &Parsed| {
            let l = left.iter().find(|w| p.words.contains(**w));
            let r = right.iter().find(|w| p.words.contains(**w));
            match (l, r) {
                (Some(l), None) => Some((true, *l)),
                (None, Some(r)) => Some((false, *r)),
                _ => None,
            }
        };
        if let (Some((sa, wa)), Some((sb, wb))) = (side(a), side(b))
            && sa != sb
        {
            return Some(Difference {
                aspect: Aspect::Polarity,
                claim: quoted(&[wa]),
                record: quoted(&[wb]),
            });
        }
    }
    None
}

fn numbers(a: &Parsed, b: &Parsed) -> Option<Difference> {
    let (na, nb) = (a.numbers(), b.numbers());
    // What one side has more often than the other; the same numbers in another order
    // differ too, with nothing to list beyond them.
    let beyond = |x: &[&'_ str], y: &[&str]| -> Vec<String> {
        let mut rest = y.to_vec();
        let mut out = Vec::new();
        for n in x {
            match rest.iter().position(|m| m == n) {
                Some(i) => {
                    rest.remove(i);
                }
                None if !out.contains(&n.to_string()) => out.push(n.to_string()),
                None => {}
            }
        }
        out
    };
    if na == nb {
        return None;
    }
    let (mut claim, mut record) = (beyond(&na, &nb), beyond(&nb, &na));
    if claim.is_empty() && record.is_empty() {
        claim = na.iter().map(|n| n.to_string()).collect();
        record = nb.iter().map(|n| n.to_string()).collect();
    }
    Some(Difference {
        aspect: Aspect::Number,
        claim: listed(claim.iter().map(String::as_str)),
        record: listed(record.iter().map(String::as_str)),
    })
}

fn units(a: &Parsed, b: &Parsed) -> Option<Difference> {
    let (qa, qb) = (a.quantities(), b.quantities());
    for &(n, ua) in &qa {
        if qb.iter().any(|&(m, u)| m == n && stem_of(u) == stem_of(ua)) {
            continue;
        }
        let other = qb
            .iter()
            .find(|&&(m, ub)| m == n && !b.mentions_stem(ua) && !a.mentions_stem(ub));
        if let Some(&(_, ub)) = other {
            return Some(Difference {
                aspect: Aspect::Unit,
                claim: format!("{n} {ua}"),
                record: format!("{n} {ub}"),
            });
        }
    }
    None
}

fn names(a: &Parsed, b: &Parsed) -> Option<Difference> {
    // A name matches when the other side mentions it at all: "ENUM" and "enum" agree.
    let only = |x: &Parsed, y: &Parsed| -> Vec<String> {
        x.names()
            .into_iter()
            .filter(|n| !y.words.contains(*n))
            .map(str::to_string)
            .collect()
    };
    let (oa, ob) = (only(a, b), only(b, a));
    if oa.is_empty() && ob.is_empty() {
        return None;
    }
    Some(Difference {
        aspect: Aspect::Name,
        claim: listed(oa.iter().map(String::as_str)),
        record: listed(ob.iter().map(String::as_str)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_keep_file_names_versions_and_contractions_whole() {
        assert_eq!(
            raw_tokens(
                "Fix src/auth/login.rs, v1.0.190 and don't; 1,000 rate-limited, e.g. and/or"
            ),
            [
                "Fix",
                "src/auth/login.rs",
                "v1.0.190",
                "and",
                "don't",
                "1,000",
                "rate",
                "limited",
                "e",
                "g",
                "and",
                "or"
            ]
        );
    }

    #[test]
    fn numbers_are_canonical() {
        assert_eq!(canonical_number("1,000").as_deref(), Some("1000"));
        assert_eq!(canonical_number("0.50").as_deref(), Some("0.5"));
        assert_eq!(canonical_number("007").as_deref(), Some("7"));
        assert_eq!(canonical_number("5.0").as_deref(), Some("5"));
        assert_eq!(canonical_number("1.0.190"), None);
        assert_eq!(canonical_number("v2"), None);
    }

    #[test]
    fn each_aspect_is_named_with_both_sides() {
        let d = difference("Set the retry limit to 5", "Set the retry limit to 3").unwrap();
        assert_eq!(d.to_string(), "number (5 vs 3)");
        let d = difference("Login is not rate limited", "Login is rate limited").unwrap();
        assert_eq!(d.to_string(), "polarity (\"not rate\" vs none)");
        let d = difference("Use Memcached, not Redis", "Use Redis, not Memcached").unwrap();
        assert_eq!(
            d.to_string(),
            "polarity (\"not redis\" vs \"not memcached\")"
        );
        let d = difference("Disable the cache", "Enable the cache").unwrap();
        assert_eq!(d.to_string(), "polarity (\"disable\" vs none)");
        let d = difference("Cache for 9 seconds", "Cache for 9 minutes").unwrap();
        assert_eq!(d.to_string(), "unit (9 seconds vs 9 minutes)");
        let d = difference("Test lexer.rs", "Test parser.rs").unwrap();
        assert_eq!(d.to_string(), "name (lexer.rs vs parser.rs)");
        assert_eq!(difference("Use Redis 7.2", "use redis 7.2!"), None);
    }

    #[test]
    fn the_same_numbers_in_another_order_or_count_are_different_statements() {
        let d = difference("Lane 1 of 2, round 2", "Lane 2 of 2, round 1").unwrap();
        assert_eq!(d.to_string(), "number (1, 2, 2 vs 2, 2, 1)");
        let d = difference("Lane 2 of 2 failed", "Lane 1 of 2 failed").unwrap();
        assert_eq!(d.to_string(), "number (2 vs 1)");
        assert_eq!(
            difference("Retry 3 times, 2 s apart", "retry 3 times, 2 s apart"),
            None
        );
    }
}
