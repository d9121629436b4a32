//! o200k's pre-tokenizer, written out by hand: the pieces tiktoken's regular expression
//! finds, without compiling a regular expression (which costs milliseconds and
//! megabytes at every start, and whose lazy automaton is slow until it warms up).
//!
//! The expression (tiktoken's `O200K_BASE_PAT_STR`), matched leftmost-first:
//!
//! ```text
//! 1  [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! 2 |[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?
//! 3 |\p{N}{1,3}
//! 4 | ?[^\s\p{L}\p{N}]+[\r\n/]*
//! 5 |\s*[\r\n]+
//! 6 |\s+(?!\S)
//! 7 |\s+
//! ```
//!
//! Call the two letter classes of 1 and 2 A (upper-ish) and B (lower-ish). Every
//! alternative consumes at least one char and every char starts some alternative, so the
//! pieces tile the text. Each function below says which alternative it is and how
//! backtracking resolves it; the tests compare the result with tiktoken's own regex.

use super::unicode::RANGES;

/// What the expression can tell apart about a char.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    /// Lu, Lt: in A only.
    Upper,
    /// Ll: in B only.
    Lower,
    /// Lm, Lo: letters in both A and B.
    Letter,
    /// M: in A and B but not a letter, so also a prefix and a punctuation char.
    Mark,
    /// N.
    Number,
    /// `\r` and `\n`.
    Newline,
    /// Any other `\s` (Unicode White_Space).
    Space,
    /// Everything else: punctuation, symbols, non-space controls, unassigned.
    Other,
}

use Class::*;

impl Class {
    fn in_a(self) -> bool {
        matches!(self, Upper | Letter | Mark)
    }
    fn in_b(self) -> bool {
        matches!(self, Lower | Letter | Mark)
    }
    /// `[^\r\n\p{L}\p{N}]`
    fn is_prefix(self) -> bool {
        matches!(self, Space | Other | Mark)
    }
    /// `[^\s\p{L}\p{N}]`
    fn is_punct(self) -> bool {
        matches!(self, Other | Mark)
    }
    /// `\s`
    fn is_space(self) -> bool {
        matches!(self, Space | Newline)
    }
}

const fn ascii_classes() -> [Class; 128] {
    let mut table = [Other; 128];
    let mut r = 0;
    while r < RANGES.len() {
        let (start, end, class) = RANGES[r];
        let mut c = start;
        while c <= end && c < 128 {
            table[c as usize] = class;
            c += 1;
        }
        r += 1;
    }
    table[b'\r' as usize] = Newline;
    table[b'\n' as usize] = Newline;
    table
}

static ASCII: [Class; 128] = ascii_classes();

pub(super) fn class_of(c: u32) -> Class {
    if c < 128 {
        return ASCII[c as usize];
    }
    let i = RANGES.partition_point(|&(start, _, _)| start <= c);
    match i.checked_sub(1).map(|i| RANGES[i]) {
        Some((_, end, class)) if c <= end => class,
        _ => Other,
    }
}

/// The char at byte `i` of valid UTF-8 `b`, and its length in bytes.
#[inline]
fn char_at(b: &[u8], i: usize) -> (u32, usize) {
    let x = u32::from(b[i]);
    let cont = |k: usize| u32::from(b[i + k] & 0x3f);
    if x < 0x80 {
        (x, 1)
    } else if x < 0xe0 {
        (((x & 0x1f) << 6) | cont(1), 2)
    } else if x < 0xf0 {
        (((x & 0x0f) << 12) | (cont(1) << 6) | cont(2), 3)
    } else {
        (
            ((x & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3),
            4,
        )
    }
}

/// The class and length of the char at byte `i`, `None` at the end of the text.
#[inline]
fn class_at(b: &[u8], i: usize) -> Option<(Class, usize)> {
    let &x = b.get(i)?;
    if x < 0x80 {
        return Some((ASCII[usize::from(x)], 1));
    }
    let (c, len) = char_at(b, i);
    Some((class_of(c), len))
}

/// The end of the run of chars from `i` whose class satisfies `keep`.
#[inline]
fn run(b: &[u8], mut i: usize, keep: impl Fn(Class) -> bool) -> usize {
    while let Some((class, len)) = class_at(b, i) {
        if !keep(class) {
            break;
        }
        i += len;
    }
    i
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` at `i`: where it ends. Under `(?i)` the only chars
/// these letters match besides their two ASCII cases is `ſ` (U+017F, which folds to s).
fn contraction(b: &[u8], i: usize) -> usize {
    if b.get(i) != Some(&b'\'') {
        return i;
    }
    let lower = |k: usize| b.get(i + k).map(|x| x.to_ascii_lowercase());
    match lower(1) {
        Some(b's' | b't' | b'm' | b'd') => i + 2,
        Some(b'r' | b'v') if lower(2) == Some(b'e') => i + 3,
        Some(b'l') if lower(2) == Some(b'l') => i + 3,
        // ſ is C5 BF in UTF-8.
        Some(0xc5) if b.get(i + 2) == Some(&0xbf) => i + 3,
        _ => i,
    }
}

/// Alternative 1 from `q`, after the optional prefix: `A*B+` then a contraction.
///
/// `A*` first takes the whole run of A chars; `B+` then needs a B char where it stopped.
/// A char after the run is not in A, so it is in B only if it is Lower, and then `B+`
/// takes the B run from there. Otherwise `A*` gives back chars one at a time until the
/// first char after it is in B: the last Letter or Mark of the run, which `B+` takes
/// alone (what follows it in the run is Upper, or ends the run, so not in B).
fn letters_then_lower(b: &[u8], q: usize) -> Option<usize> {
    let mut i = q;
    let mut last_b_end = None;
    while let Some((class, len)) = class_at(b, i) {
        if !class.in_a() {
            break;
        }
        i += len;
        if class.in_b() {
            last_b_end = Some(i);
        }
    }
    let end = match class_at(b, i) {
        Some((Lower, _)) => run(b, i, Class::in_b),
        _ => last_b_end?,
    };
    Some(contraction(b, end))
}

/// Alternative 2 from `q`, after the optional prefix: `A+B*` then a contraction. Both
/// runs are taken whole; nothing after them can fail, so nothing is given back.
fn upper_then_letters(b: &[u8], q: usize) -> Option<usize> {
    let (class, _) = class_at(b, q)?;
    if !class.in_a() {
        return None;
    }
    let end = run(b, run(b, q, Class::in_a), Class::in_b);
    Some(contraction(b, end))
}

/// Alternatives 1 and 2 for the commonest piece, an ASCII word with at most one ASCII
/// prefix char (` the`, `(Foo`, `HTTPServer`): where it ends, or `None` when it is not
/// one or a non-ASCII char after it could change the answer (the general path decides).
///
/// In ASCII, A is `A-Z` and B is `a-z`, so each of the four tries of `piece_end` comes
/// to the same end: the run of capitals from the first letter, then the run of small
/// letters, then a contraction. Briefings are mostly such words, and every briefing
/// piece is counted, so this skips the general path's class lookups and retries.
#[inline]
fn ascii_word_end(b: &[u8], p: usize) -> Option<usize> {
    let c0 = *b.get(p)?;
    let start = if c0.is_ascii_alphabetic() {
        p
    } else if c0.is_ascii() && !c0.is_ascii_digit() && c0 != b'\r' && c0 != b'\n' {
        // Any other ASCII char is `[^\r\n\p{L}\p{N}]`, the optional prefix.
        if !b.get(p + 1).is_some_and(u8::is_ascii_alphabetic) {
            return None;
        }
        p + 1
    } else {
        return None;
    };
    let mut i = start;
    while b.get(i).is_some_and(u8::is_ascii_uppercase) {
        i += 1;
    }
    while b.get(i).is_some_and(u8::is_ascii_lowercase) {
        i += 1;
    }
    // A non-ASCII letter or mark would continue the word.
    if b.get(i).is_some_and(|&c| !c.is_ascii()) {
        return None;
    }
    Some(contraction(b, i))
}

/// Where the piece that starts at byte `p` of `b` (valid UTF-8, `p < b.len()`) ends.
fn piece_end(b: &[u8], p: usize) -> usize {
    if let Some(end) = ascii_word_end(b, p) {
        return end;
    }
    let Some((c0, l0)) = class_at(b, p) else {
        return b.len();
    };
    // 1 and 2: the optional prefix is tried first, then 1 without it, then 2 likewise.
    let prefixed = c0.is_prefix();
    let letters = (prefixed.then(|| letters_then_lower(b, p + l0)).flatten())
        .or_else(|| letters_then_lower(b, p))
        .or_else(|| prefixed.then(|| upper_then_letters(b, p + l0)).flatten())
        .or_else(|| upper_then_letters(b, p));
    if let Some(end) = letters {
        return end;
    }
    if c0 == Number {
        let mut i = p;
        for _ in 0..3 {
            match class_at(b, i) {
                Some((Number, len)) => i += len,
                _ => break,
            }
        }
        return i;
    }
    // 4: ` ?` takes the space only if a punctuation char follows it.
    let punct_from = if b[p] == b' ' { p + 1 } else { p };
    if class_at(b, punct_from).is_some_and(|(c, _)| c.is_punct()) {
        let mut i = run(b, punct_from, Class::is_punct);
        while matches!(b.get(i), Some(b'\r' | b'\n' | b'/')) {
            i += 1;
        }
        return i;
    }
    // Only whitespace is left (every other char started one of the above).
    let mut i = p;
    let mut after_newline = None;
    let mut last_start = p;
    while let Some((class, len)) = class_at(b, i) {
        if !class.is_space() {
            break;
        }
        last_start = i;
        i += len;
        if class == Newline {
            after_newline = Some(i);
        }
    }
    // 5: `\s*` gives back chars until `[\r\n]+` can start: at the last newline of the run,
    // which it takes alone (what follows in the run is not a newline).
    if let Some(end) = after_newline {
        return end;
    }
    // 6: the run, but not its last char unless the text ends there (`(?!\S)`); 7 when
    // that would leave nothing: a single whitespace char before a non-space one.
    if i < b.len() && last_start > p {
        last_start
    } else {
        i
    }
}

/// Whether a piece always ends at a line break followed by `next`, so that the pieces
/// of `a + b` are those of `a` then those of `b` whenever `a` ends with `\n` and `b`
/// starts with `next`: true for a `next` that is neither whitespace nor `/`.
///
/// No alternative carries a piece over the cut: 1 to 3 never take a newline; 4 takes
/// newlines only in its closing `[\r\n/]*`, which stops at `next`; 5 to 7 take only
/// whitespace. Nor does any alternative that starts before the cut look past `next`
/// (every run stops at or before it, and `(?!\S)` looks one char ahead), and at each
/// of those stops the end of the text acts as `next` does, so `a` splits alone as it
/// splits before `b`. From the cut on, matching sees only `b`: the expression looks
/// nowhere behind. The tests check this against tiktoken's own expression.
pub(super) fn splits_after_line_break(next: char) -> bool {
    next != '/' && !class_of(u32::from(next)).is_space()
}

/// The pieces of `text`, in order; they concatenate to `text`.
pub(super) fn pieces(text: &str) -> impl Iterator<Item = &[u8]> {
    let b = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if at >= b.len() {
            return None;
        }
        let end = piece_end(b, at);
        let piece = &b[at..end];
        at = end;
        Some(piece)
    })
}
