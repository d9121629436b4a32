//! `TermQuery`: a fixed set of query terms that many texts are scored against, and the
//! scan that counts a text's query terms without building its term set.
//!
//! The compiler scores every record of a state against the assignment, and a fresh
//! process has no term set memoised for any of them: for the synthetic 10,000-item state
//! that is about 0.7 MB of record text (some 100,000 words) per first compile, so this
//! scan is most of what a resume pays. Each 64-byte block of ASCII text is classified into
//! a bit mask of letters and digits (sixteen bytes per compare with SSE2, eight with
//! integer arithmetic elsewhere), word starts come out of the mask by shifts, and a word
//! is looked at only through its first four bytes (one unaligned load) unless a query
//! stem starts the same way: only those words are stemmed and looked up. Where the
//! processor has AVX2, `avx2` replaces the classification and the per-word look with one
//! that visits only words whose first two bytes a query stem has. A stem of up to 16
//! bytes is looked up by its bytes (`stems`), a longer one by its hash.

#[cfg(target_arch = "x86_64")]
mod avx2;
mod stems;

use super::{
    STOPWORDS, for_each_stem, is_stopword, last_bytes, overlap, stem, suffix_len, term_hash,
    term_hash_mapped,
};

/// Bits in the filter of stem prefixes (`prefix_key` → `slot_of`).
const PREFIX_BITS: usize = 1 << 14;
/// Query terms the fast path tracks in its fixed-size match set.
const FAST_QUERY_TERMS: usize = 256;

/// 64-byte blocks whose masks a scan computes at once (texts are mostly shorter).
const SEGMENT_BLOCKS: usize = 8;

/// `TermQuery::slots`' mark of a slot to search.
const SLOT_MANY: u8 = u8::MAX;

/// A bit per query term (by its index in `TermQuery::terms`).
type Seen = [u64; FAST_QUERY_TERMS / 64];

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x80 * ONES;

/// The high bit of each byte of `x` set where that byte is an ASCII letter or digit
/// (meaningful only when every byte is ASCII). Adding `0x80 - lo` to a byte below 0x80
/// sets its high bit exactly when the byte is `lo` or more, and carries into no other
/// byte.
#[inline]
fn alnum_high_bits(x: u64) -> u64 {
    let at_least = |v: u64, lo: u8| v.wrapping_add(ONES * u64::from(0x80 - lo));
    let lower = x | (ONES * 0x20);
    let letter = at_least(lower, b'a') & !at_least(lower, b'z' + 1);
    let digit = at_least(x, b'0') & !at_least(x, b'9' + 1);
    (letter | digit) & HIGH
}

/// Bit `k` of the result is the high bit of byte `k` of `high`, whose other bits are
/// clear: the multiplier moves each byte's bit to a distinct place in the top byte, and
/// no two partial products overlap, so nothing carries.
#[inline]
fn gather(high: u64) -> u64 {
    (high >> 7).wrapping_mul(0x0102_0408_1020_4080) >> 56
}

/// Bit `k` set where byte `k` of `block` (at most 64 bytes) is an ASCII letter or digit;
/// `None` when a byte is not ASCII: what the scan's classifier (`sse2::alnum_bits` or
/// `alnum_bits_swar`) computes.
#[cfg(test)]
fn alnum_bits(block: &[u8]) -> Option<u64> {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    // SAFETY: the callee needs only SSE2, which this build enables.
    return unsafe { sse2::alnum_bits(block) };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    return alnum_bits_swar(block);
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
mod sse2 {
    use std::arch::x86_64::{
        __m128i, _mm_and_si128, _mm_cmpgt_epi8, _mm_cmplt_epi8, _mm_movemask_epi8, _mm_or_si128,
        _mm_set_epi64x, _mm_set1_epi8,
    };

    /// Bit `k` set where byte `k` of `chunk` is an ASCII letter or digit, and bit `k`
    /// of the second value where it is not ASCII. Bytes are compared as signed, so a
    /// byte of 0x80 or more is below every bound and classed as neither.
    #[inline]
    #[target_feature(enable = "sse2")]
    fn classify(chunk: &[u8; 16]) -> (u32, u32) {
        let (lo, hi) = chunk.split_at(8);
        let half = |h: &[u8]| {
            let mut b = [0u8; 8];
            b.copy_from_slice(h);
            i64::from_le_bytes(b)
        };
        let x: __m128i = _mm_set_epi64x(half(hi), half(lo));
        let within = |v: __m128i, lo: u8, hi: u8| {
            _mm_and_si128(
                _mm_cmpgt_epi8(v, _mm_set1_epi8(lo as i8 - 1)),
                _mm_cmplt_epi8(v, _mm_set1_epi8(hi as i8 + 1)),
            )
        };
        let lower = _mm_or_si128(x, _mm_set1_epi8(0x20));
        let alnum = _mm_or_si128(within(lower, b'a', b'z'), within(x, b'0', b'9'));
        (_mm_movemask_epi8(alnum) as u32, _mm_movemask_epi8(x) as u32)
    }

    /// Fewer than sixteen bytes, zero-padded; out of line so that the common path
    /// saves no registers for the copy.
    #[inline(never)]
    fn padded(tail: &[u8]) -> [u8; 16] {
        let mut chunk = [0u8; 16];
        chunk[..tail.len()].copy_from_slice(tail);
        chunk
    }

    #[inline]
    #[target_feature(enable = "sse2")]
    pub(super) fn alnum_bits(block: &[u8]) -> Option<u64> {
        let (chunks, tail) = block.as_chunks::<16>();
        let (mut bits, mut high) = (0u64, 0u32);
        for (c, chunk) in chunks.iter().enumerate() {
            let (alnum, h) = classify(chunk);
            bits |= u64::from(alnum) << (16 * c);
            high |= h;
        }
        if !tail.is_empty() {
            // The block's last sixteen bytes, when it has that many, with the bits of
            // those already classified shifted out; else the tail alone, zero-padded.
            let (chunk, shift) = match block.last_chunk::<16>() {
                Some(last) => (*last, 16 - tail.len()),
                None => (padded(tail), 0),
            };
            let (alnum, h) = classify(&chunk);
            bits |= u64::from(alnum >> shift) << (16 * chunks.len());
            high |= h;
        }
        (high == 0).then_some(bits)
    }
}

/// `alnum_bits` eight bytes at a time in plain integer arithmetic (the classifier where
/// SSE2 is not there).
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
fn alnum_bits_swar(block: &[u8]) -> Option<u64> {
    let (groups, tail) = block.as_chunks::<8>();
    let (mut bits, mut any) = (0, 0);
    for (g, group) in groups.iter().enumerate() {
        let x = u64::from_le_bytes(*group);
        any |= x;
        bits |= gather(alnum_high_bits(x)) << (8 * g);
    }
    if !tail.is_empty() {
        // The last eight bytes of the block, shifted down to the tail's, when the block
        // has that many (no copy); else the few bytes one by one.
        let x = match block.last_chunk::<8>() {
            Some(last) => u64::from_le_bytes(*last) >> (8 * (8 - tail.len())),
            None => (tail.iter().rev()).fold(0, |x, &b| x << 8 | u64::from(b)),
        };
        any |= x;
        bits |= gather(alnum_high_bits(x)) << (8 * groups.len());
    }
    (any & HIGH == 0).then_some(bits)
}

/// Bytes of a word's first four that its prefix key keeps, by how many of them belong to
/// the word, and the length mark of a word shorter than four bytes (a word that long is
/// all of its stem: a suffix is cut only when four bytes remain).
const KEEP: [u32; 5] = [0, 0xff, 0xffff, 0x00ff_ffff, 0xffff_ffff];
const LENGTH_MARK: [u32; 5] = [0, 1 << 24, 2 << 24, 3 << 24, 0];

/// The filter key of a word (or stem) whose first `len` bytes (at most four), lower-case,
/// are the low bytes of `head`, little-endian. A stem that cuts a suffix keeps at least
/// four bytes, so a word and its stem have the same key.
#[inline]
fn prefix_key(head: u32, len: usize) -> u32 {
    (head & KEEP[len]) | LENGTH_MARK[len]
}

/// `prefix_key`'s mask and mark by the mask bits of a word's first four bytes (which of
/// them are letters or digits: the word is the leading run), with no bytes kept for a
/// one-byte word, which the scan skips.
const HEAD_KEY: [(u32, u32); 16] = {
    let mut table = [(0, 0); 16];
    let mut head = 0;
    while head < 16 {
        let len = (!head as u32).trailing_zeros() as usize;
        let len = if len > 4 { 4 } else { len };
        if len >= 2 {
            table[head] = (KEEP[len], LENGTH_MARK[len]);
        }
        head += 1;
    }
    table
};

#[inline]
fn slot_of(key: u32) -> usize {
    (key.wrapping_mul(0x9e37_79b1) >> (32 - PREFIX_BITS.trailing_zeros())) as usize
}

/// The four bytes of `bytes` from `at`, zero past the end, little-endian.
#[inline]
fn load4(bytes: &[u8], at: usize) -> u32 {
    let rest = &bytes[at..];
    match rest.first_chunk::<4>() {
        Some(head) => u32::from_le_bytes(*head),
        None => {
            let mut head = [0u8; 4];
            head[..rest.len()].copy_from_slice(rest);
            u32::from_le_bytes(head)
        }
    }
}

/// A fixed set of query terms, prepared for scoring many texts against it.
///
/// `overlap` gives exactly `overlap(&terms(joined texts), query.terms())`, but for ASCII
/// text it builds no term set: it skips every word whose first four bytes are not in a
/// small filter of the query stems' prefixes, and hashes only the rest.
#[derive(Debug, Clone)]
pub struct TermQuery {
    terms: Vec<u64>,
    prefixes: Box<[u64; PREFIX_BITS / 64]>,
    /// Each term's index plus one at the slot of its top twelve bits (`SLOT_MANY` where
    /// two terms meet, or for an index past 253; 0 where none is): a hash rarely finds
    /// a query term, and finding one costs a load and a compare, not a search.
    slots: Box<[u8; 4096]>,
    /// Query terms that are also a stopword's stem ("ther" is that of "there"): only a
    /// word stemming to one of these needs the stopword test.
    stop_stems: Seen,
    /// The ASCII stems of up to `stems::MAX_KEYED` bytes, by their bytes.
    stems: stems::StemTable,
    /// The stems' first two bytes, for the AVX2 scan; `None` where the processor has
    /// no AVX2 (the SSE2 scan is used then).
    #[cfg(target_arch = "x86_64")]
    pairs: Option<avx2::PairFilter>,
}

/// Which terms of a query also belong to a sub-query, for `TermQuery::overlap_in`.
#[derive(Debug, Clone)]
pub struct SubQuery {
    bits: Seen,
    /// The sub-query's terms that are the query's too, sorted.
    terms: Vec<u64>,
}

impl TermQuery {
    /// The union of the terms of `texts`.
    pub fn new(texts: &[&str]) -> Self {
        let mut terms = Vec::new();
        let mut keyed: Vec<Vec<u8>> = Vec::new();
        let mut prefixes = Box::new([0u64; PREFIX_BITS / 64]);
        #[cfg(target_arch = "x86_64")]
        let mut pairs = std::arch::is_x86_feature_detected!("avx2").then(avx2::PairFilter::default);
        for text in texts {
            for_each_stem(text, |stem| {
                terms.push(term_hash(stem));
                if stem.is_ascii() && stem.len() <= stems::MAX_KEYED {
                    keyed.push(stem.to_vec());
                }
                // Only ASCII prefixes matter: the fast path only sees ASCII words.
                let head = &stem[..stem.len().min(4)];
                if head.is_ascii() {
                    let mut bytes = [0u8; 4];
                    bytes[..head.len()].copy_from_slice(head);
                    let slot = slot_of(prefix_key(u32::from_le_bytes(bytes), head.len()));
                    prefixes[slot / 64] |= 1 << (slot % 64);
                    #[cfg(target_arch = "x86_64")]
                    if let (Some(pairs), [first, second, ..]) = (&mut pairs, head) {
                        pairs.add(*first, *second);
                    }
                }
            });
        }
        terms.sort_unstable();
        terms.dedup();
        let mut slots = Box::new([0u8; 4096]);
        for (k, &t) in terms.iter().enumerate() {
            let slot = &mut slots[(t >> 52) as usize];
            *slot = match (*slot, u8::try_from(k + 1)) {
                (0, Ok(entry)) if entry < SLOT_MANY => entry,
                _ => SLOT_MANY,
            };
        }
        let keyed: Vec<(&[u8], usize)> = (keyed.iter())
            .filter_map(|s| Some((&s[..], terms.binary_search(&term_hash(s)).ok()?)))
            .collect();
        let stems = stems::StemTable::new(&keyed);
        let mut stop_stems = [0u64; FAST_QUERY_TERMS / 64];
        for word in STOPWORDS {
            if let Ok(k) = terms.binary_search(&term_hash(stem(word.as_bytes())))
                && k < FAST_QUERY_TERMS
            {
                stop_stems[k / 64] |= 1 << (k % 64);
            }
        }
        TermQuery {
            terms,
            prefixes,
            slots,
            stop_stems,
            stems,
            #[cfg(target_arch = "x86_64")]
            pairs,
        }
    }

    /// The index of `term` among the query's terms.
    #[inline]
    fn find(&self, term: u64) -> Option<usize> {
        match self.slots[(term >> 52) as usize] {
            0 => None,
            SLOT_MANY => self.terms.binary_search(&term).ok(),
            entry => {
                let k = usize::from(entry) - 1;
                (self.terms[k] == term).then_some(k)
            }
        }
    }

    /// How many of `terms` (distinct) are query terms: `overlap(terms, self.terms())`.
    pub fn shared(&self, terms: &[u64]) -> usize {
        terms.iter().filter(|&&t| self.find(t).is_some()).count()
    }

    /// The query's distinct terms, sorted (as `terms` returns them).
    pub fn terms(&self) -> &[u64] {
        &self.terms
    }

    /// Distinct query terms that occur in any of `texts`.
    pub fn overlap(&self, texts: &[&str]) -> usize {
        match self.matched(texts) {
            Some(seen) => seen.iter().map(|w| w.count_ones() as usize).sum(),
            None => overlap(&self.text_terms(texts), &self.terms),
        }
    }

    /// `sub`'s terms among this query's, prepared for `overlap_in`.
    pub fn sub_query(&self, sub: &TermQuery) -> SubQuery {
        let mut bits = [0u64; FAST_QUERY_TERMS / 64];
        let mut terms = Vec::new();
        for (k, &t) in self.terms.iter().enumerate() {
            if sub.terms.binary_search(&t).is_ok() {
                terms.push(t);
                if k < FAST_QUERY_TERMS {
                    bits[k / 64] |= 1 << (k % 64);
                }
            }
        }
        SubQuery { bits, terms }
    }

    /// Distinct query terms that occur in any of `texts`, and how many of those are also
    /// terms of `sub`: `(overlap(T, self), overlap(T, self ∩ sub))` for the term set `T`
    /// of `texts`, which is `overlap(T, sub)` when `sub`'s terms are among this query's
    /// (the compiler's task query is part of its task-and-objective query).
    pub fn overlap_within(&self, texts: &[&str], sub: &TermQuery) -> (usize, usize) {
        self.overlap_in(texts, &self.sub_query(sub))
    }

    /// `overlap_within` with the sub-query prepared once: one scan for both counts, with
    /// no term set built for ASCII text.
    pub fn overlap_in(&self, texts: &[&str], sub: &SubQuery) -> (usize, usize) {
        match self.matched(texts) {
            Some(seen) => {
                // Only the words that can hold a bit (a query has a few dozen terms),
                // counted bit by bit: x86-64's baseline has no population count
                // instruction, and a record shares few terms.
                let words = self.terms.len().div_ceil(64);
                let (mut all, mut within) = (0, 0);
                for (&s, &b) in seen[..words].iter().zip(&sub.bits) {
                    let mut bits = s;
                    while bits != 0 {
                        all += 1;
                        within += usize::from(bits & bits.wrapping_neg() & b != 0);
                        bits &= bits - 1;
                    }
                }
                (all, within)
            }
            None => {
                let all = self.text_terms(texts);
                (overlap(&all, &self.terms), overlap(&all, &sub.terms))
            }
        }
    }

    /// The fast path: a bit per query term that occurs in `texts`, or `None` when it
    /// does not apply (a query of more than `FAST_QUERY_TERMS` terms, or non-ASCII text).
    fn matched(&self, texts: &[&str]) -> Option<Seen> {
        let mut seen = [0u64; FAST_QUERY_TERMS / 64];
        if self.terms.is_empty() {
            return Some(seen);
        }
        if self.terms.len() > FAST_QUERY_TERMS {
            return None;
        }
        self.scan_texts(texts, &mut seen).then_some(seen)
    }

    /// `scan` of every text, classifying sixteen bytes at a time with SSE2, which every
    /// x86-64 processor has (the classification is a third of the scan otherwise); the
    /// whole scan is compiled with it so that the classifier inlines into the loop.
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    fn scan_texts(&self, texts: &[&str], seen: &mut Seen) -> bool {
        if let Some(pairs) = &self.pairs {
            // SAFETY: `pairs` exists only where the processor has AVX2 (`new`).
            return unsafe { self.scan_texts_avx2(pairs, texts, seen) };
        }
        // SAFETY: the callee needs only SSE2, which this build enables (the `cfg` above).
        unsafe { self.scan_texts_sse2(texts, seen) }
    }

    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    #[target_feature(enable = "sse2")]
    fn scan_texts_sse2(&self, texts: &[&str], seen: &mut Seen) -> bool {
        (texts.iter()).all(|t| self.scan(t.as_bytes(), seen, |block| sse2::alnum_bits(block)))
    }

    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    fn scan_texts(&self, texts: &[&str], seen: &mut Seen) -> bool {
        (texts.iter()).all(|t| self.scan(t.as_bytes(), seen, alnum_bits_swar))
    }

    /// Marks in `seen` the query terms among the words of `bytes`; false when a byte is
    /// not ASCII (Unicode case and letters are left to the slow path).
    #[inline(always)]
    fn scan(
        &self,
        bytes: &[u8],
        seen: &mut Seen,
        alnum_bits: impl Fn(&[u8]) -> Option<u64>,
    ) -> bool {
        if bytes.len() <= 64 {
            // Most record texts: one block, and no segment to set up.
            let Some(mask) = alnum_bits(bytes) else {
                return false;
            };
            self.scan_blocks(bytes, 0, &[mask, 0], 0, seen);
            return true;
        }
        let mut carry = 0;
        for (s, segment) in bytes.chunks(SEGMENT_BLOCKS * 64).enumerate() {
            // The segment's masks, then the next block's (which ends the words that run
            // into it), computed before any word is looked at so that the word loop has
            // the registers to itself.
            let base = s * SEGMENT_BLOCKS * 64;
            let upto = bytes.len().min(base + (SEGMENT_BLOCKS + 1) * 64);
            let mut masks = [0u64; SEGMENT_BLOCKS + 1];
            for (mask, block) in masks.iter_mut().zip(bytes[base..upto].chunks(64)) {
                let Some(bits) = alnum_bits(block) else {
                    return false;
                };
                *mask = bits;
            }
            let blocks = segment.len().div_ceil(64);
            carry = self.scan_blocks(bytes, base, &masks[..=blocks], carry, seen);
        }
        true
    }

    /// The word loop of `scan` over the blocks of `masks` but the last (the one after),
    /// the first at `base`; `carry` is 1 when the byte before `base` is in a word.
    /// Returns the carry for the next block.
    #[inline]
    fn scan_blocks(
        &self,
        bytes: &[u8],
        base: usize,
        masks: &[u64],
        mut carry: u64,
        seen: &mut Seen,
    ) -> u64 {
        for (b, pair) in masks.windows(2).enumerate() {
            let (mask, next) = (pair[0], pair[1]);
            let base = base + 64 * b;
            let mut starts = mask & !(mask << 1 | carry);
            carry = mask >> 63;
            while starts != 0 {
                let k = starts.trailing_zeros();
                starts &= starts - 1;
                // Which of the word's first four bytes are letters or digits.
                let head = if k <= 60 {
                    mask >> k
                } else {
                    mask >> k | next << (64 - k)
                };
                let (keep, mark) = HEAD_KEY[(head & 0xf) as usize];
                if keep == 0 {
                    continue;
                }
                let at = base + k as usize;
                let slot = slot_of(((load4(bytes, at) | 0x2020_2020) & keep) | mark);
                if self.prefixes[slot / 64] & (1 << (slot % 64)) != 0 {
                    self.mark_at(bytes, at, mask >> k, next, base, seen);
                }
            }
        }
        carry
    }

    /// `mark` for the word at `at`, whose mask bits from `at` on are `rest` (the rest of
    /// its block) and then `next` (the block after).
    #[inline(never)]
    fn mark_at(&self, bytes: &[u8], at: usize, rest: u64, next: u64, base: usize, seen: &mut Seen) {
        // The word ends at its first clear mask bit, in this block or a later one.
        let mut end = at + (!rest).trailing_zeros() as usize;
        if end == base + 64 {
            end += (!next).trailing_zeros() as usize;
            if end == base + 128 {
                end += bytes[end..]
                    .iter()
                    .position(|b| !b.is_ascii_alphanumeric())
                    .unwrap_or(bytes.len() - end);
            }
        }
        self.mark(&bytes[..end], at, seen);
    }

    /// Marks the query term that the word `text[at..]` (ASCII letters and digits, any
    /// case) stems to, if any. `b | 0x20` lower-cases such a byte, so the word is read
    /// in place; its last bytes are read with whatever precedes it, which the suffix
    /// test masks off.
    #[inline]
    fn mark(&self, text: &[u8], at: usize, seen: &mut Seen) {
        let word = &text[at..];
        let n = word.len();
        let last = if n < 8
            && let Some(window) = text.last_chunk::<8>()
        {
            u64::from_be_bytes(*window) | (0x20 * ONES)
        } else {
            last_bytes(word, 0x20)
        };
        let stem = &word[..n - suffix_len(last, n)];
        let found = if stem.len() <= stems::MAX_KEYED {
            let (head, tail) = stems::key_in(text, at, stem.len(), 0x20);
            self.stems.find(head, tail, stem.len())
        } else {
            self.find(term_hash_mapped(stem, |b| b | 0x20))
        };
        let Some(k) = found else {
            return;
        };
        if self.stop_stems[k / 64] & (1 << (k % 64)) != 0 && is_stopword(&word.to_ascii_lowercase())
        {
            return;
        }
        seen[k / 64] |= 1 << (k % 64);
    }

    /// The union of the term sets of `texts`.
    fn text_terms(&self, texts: &[&str]) -> Vec<u64> {
        let mut all = Vec::new();
        for text in texts {
            for_each_stem(text, |stem| all.push(term_hash(stem)));
        }
        all.sort_unstable();
        all.dedup();
        all
    }
}

#[cfg(test)]
impl TermQuery {
    /// The same query scanned without AVX2, to test the other scan where AVX2 is there.
    fn without_avx2(mut self) -> TermQuery {
        #[cfg(target_arch = "x86_64")]
        {
            self.pairs = None;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Byte by byte, what `alnum_bits` computes a word at a time.
    fn alnum_bits_reference(block: &[u8]) -> Option<u64> {
        let mut bits = 0;
        for (k, &b) in block.iter().enumerate() {
            if !b.is_ascii() {
                return None;
            }
            if b.is_ascii_alphanumeric() {
                bits |= 1 << k;
            }
        }
        Some(bits)
    }

    #[test]
    fn every_byte_is_classified_as_the_ascii_predicates_say() {
        // Each byte value alone, at every position of a block, with every other byte
        // a letter (so a carry or a misplaced bit would show).
        for value in 0..=255u8 {
            for at in 0..64 {
                for len in [at + 1, 64] {
                    let mut block = vec![b'Q'; len];
                    block[at] = value;
                    let reference = alnum_bits_reference(&block);
                    let what = format!("byte {value:#04x} at {at} of {len}");
                    assert_eq!(alnum_bits(&block), reference, "{what}");
                    assert_eq!(alnum_bits_swar(&block), reference, "{what}");
                }
            }
        }
    }

    proptest::proptest! {
        /// Printable ASCII, long texts (several 64-byte blocks, words across block
        /// boundaries, words longer than the stack buffer) and queries made of the
        /// text's own words, so that most words pass the prefix filter.
        #[test]
        fn the_word_scan_finds_exactly_the_shared_terms_of_ascii_text(
            text in "([a-zA-Z0-9]{1,9}|[a-z]{60,70}|[ -/:-@\\[-`{-~\t\n]{1,3}){0,120}",
            picks in proptest::collection::vec(0usize..1000, 0..12),
            extra in "[a-zA-Z ]{0,30}",
        ) {
            let words: Vec<&str> = text
                .split(|c: char| !c.is_ascii_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect();
            let mut query: Vec<&str> = picks
                .iter()
                .filter_map(|&p| words.get(p % words.len().max(1)).copied())
                .collect();
            query.push(&extra);
            let q = TermQuery::new(&query);
            let reference = super::super::terms(&text);
            proptest::prop_assert_eq!(q.overlap(&[&text]), overlap(&reference, q.terms()));
            // And the SSE2 (or integer) scan, where the one above was AVX2's.
            let q = q.without_avx2();
            proptest::prop_assert_eq!(q.overlap(&[&text]), overlap(&reference, q.terms()));
            // Both classifiers, whichever one this target scans with.
            for block in text.as_bytes().chunks(64) {
                let expected = alnum_bits_reference(block);
                proptest::prop_assert_eq!(alnum_bits(block), expected);
                proptest::prop_assert_eq!(alnum_bits_swar(block), expected);
            }
        }
    }
}
