//! The scoring scan with AVX2, where the processor has it (checked once per query): 32
//! bytes at a time are classified into letters and digits *and* tested against the
//! first two bytes of every query stem, by nibble lookups (`pshufb`), so that the word
//! loop visits only the words that may stem to a query term — about one in five of the
//! synthetic state's — instead of every word.
//!
//! A word stems to a query stem only if it starts with it, in any case: its first two
//! bytes, lower-cased, are those of a stem (stems have at least two bytes). `PairFilter`
//! holds those pairs in eight buckets, by the first byte's value modulo eight; a byte
//! pair passes when, for some bucket, the first byte's two nibbles and the second's
//! are all among the bucket's. That is a superset of the pairs, so no word that stems
//! to a query term is missed; the rest go through the same prefix filter and stemming
//! as the word loop of `scan_blocks`.

use std::arch::x86_64::{
    __m256i, _mm_loadu_si128, _mm256_alignr_epi8, _mm256_and_si256, _mm256_broadcastsi128_si256,
    _mm256_cmpeq_epi8, _mm256_loadu_si256, _mm256_movemask_epi8, _mm256_permute2x128_si256,
    _mm256_set1_epi8, _mm256_setzero_si256, _mm256_shuffle_epi8, _mm256_srli_epi16,
};

use super::{Seen, TermQuery, load4, prefix_key, slot_of};

/// Bit `b` of an entry: bucket `b` has a byte with that nibble.
#[derive(Debug, Clone, Default)]
pub(super) struct PairFilter {
    first_lo: [u8; 16],
    first_hi: [u8; 16],
    second_lo: [u8; 16],
    second_hi: [u8; 16],
}

impl PairFilter {
    /// Lets words that start with `first`, `second` (lower-case ASCII letters or digits,
    /// a stem's first two bytes) in any case pass.
    pub(super) fn add(&mut self, first: u8, second: u8) {
        let bit = 1 << (first % 8);
        for (lo, hi, byte) in [
            (&mut self.first_lo, &mut self.first_hi, first),
            (&mut self.second_lo, &mut self.second_hi, second),
        ] {
            lo[usize::from(byte & 0xf)] |= bit;
            hi[usize::from(byte >> 4)] |= bit;
            if byte.is_ascii_lowercase() {
                // The capital has the same low nibble, its high one two below.
                hi[usize::from((byte - 0x20) >> 4)] |= bit;
            }
        }
    }

    /// Whether the pair `first`, `second` passes: what the vector code computes per
    /// byte, for the tests.
    #[cfg(test)]
    pub(super) fn passes(&self, first: u8, second: u8) -> bool {
        let nib = |t: &[u8; 16], b: u8| if b < 0x80 { t[usize::from(b & 0xf)] } else { 0 };
        let hi = |t: &[u8; 16], b: u8| if b < 0x80 { t[usize::from(b >> 4)] } else { 0 };
        nib(&self.first_lo, first)
            & hi(&self.first_hi, first)
            & nib(&self.second_lo, second)
            & hi(&self.second_hi, second)
            != 0
    }
}

/// Letters and digits by nibbles: a byte is one when the entries of its low and high
/// nibble share a bit. Bit 0: digits (high nibble 3, low 0–9); bit 1: `A–O`, `a–o`
/// (high 4 or 6, low 1–15); bit 2: `P–Z`, `p–z` (high 5 or 7, low 0–10).
const ALNUM_LO: [u8; 16] = {
    let mut t = [0; 16];
    let mut lo = 0;
    while lo < 16 {
        t[lo] = (lo <= 9) as u8 | ((lo >= 1) as u8) << 1 | ((lo <= 10) as u8) << 2;
        lo += 1;
    }
    t
};
const ALNUM_HI: [u8; 16] = [0, 0, 0, 1, 2, 4, 2, 4, 0, 0, 0, 0, 0, 0, 0, 0];

/// `table` in both 128-bit lanes.
#[inline]
#[target_feature(enable = "avx2")]
fn lanes(table: &[u8; 16]) -> __m256i {
    // SAFETY: the pointer is to sixteen readable bytes; `loadu` needs no alignment.
    _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(table.as_ptr().cast()) })
}

/// `x` one byte down (byte `k` of the result is byte `k + 1` of `x`), a zero on top.
#[inline]
#[target_feature(enable = "avx2")]
fn shift_one(x: __m256i) -> __m256i {
    // The high lane moved down, zero above: what each lane's top byte takes in.
    let above = _mm256_permute2x128_si256::<0x81>(x, x);
    _mm256_alignr_epi8::<1>(above, x)
}

/// The tables of one scan, each in both 128-bit lanes (`pshufb` looks up per lane).
struct Tables {
    alnum_lo: __m256i,
    alnum_hi: __m256i,
    first_lo: __m256i,
    first_hi: __m256i,
    second_lo: __m256i,
    second_hi: __m256i,
    nibble: __m256i,
}

impl Tables {
    #[inline]
    #[target_feature(enable = "avx2")]
    fn new(f: &PairFilter) -> Tables {
        Tables {
            alnum_lo: lanes(&ALNUM_LO),
            alnum_hi: lanes(&ALNUM_HI),
            first_lo: lanes(&f.first_lo),
            first_hi: lanes(&f.first_hi),
            second_lo: lanes(&f.second_lo),
            second_hi: lanes(&f.second_hi),
            nibble: _mm256_set1_epi8(0xf),
        }
    }

    /// For the 32 bytes `x` and the 32 after each (`y`, `x` shifted by one byte): bit
    /// `k` of the first mask set where byte `k` is a letter or digit, of the second
    /// where it and the next byte pass the pair filter, of the third where it is not
    /// ASCII.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn masks(&self, x: __m256i, y: __m256i) -> (u32, u32, u32) {
        let xl = _mm256_and_si256(x, self.nibble);
        let xh = _mm256_and_si256(_mm256_srli_epi16::<4>(x), self.nibble);
        let yl = _mm256_and_si256(y, self.nibble);
        let yh = _mm256_and_si256(_mm256_srli_epi16::<4>(y), self.nibble);
        let alnum = _mm256_and_si256(
            _mm256_shuffle_epi8(self.alnum_lo, xl),
            _mm256_shuffle_epi8(self.alnum_hi, xh),
        );
        let first = _mm256_and_si256(
            _mm256_shuffle_epi8(self.first_lo, xl),
            _mm256_shuffle_epi8(self.first_hi, xh),
        );
        let second = _mm256_and_si256(
            _mm256_shuffle_epi8(self.second_lo, yl),
            _mm256_shuffle_epi8(self.second_hi, yh),
        );
        let zero = _mm256_setzero_si256();
        let alnum = _mm256_movemask_epi8(_mm256_cmpeq_epi8(alnum, zero)) as u32;
        let pairs = _mm256_cmpeq_epi8(_mm256_and_si256(first, second), zero);
        let pairs = _mm256_movemask_epi8(pairs) as u32;
        (!alnum, !pairs, _mm256_movemask_epi8(x) as u32)
    }
}

impl TermQuery {
    /// `scan_texts` with AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) fn scan_texts_avx2(
        &self,
        pairs: &PairFilter,
        texts: &[&str],
        seen: &mut Seen,
    ) -> bool {
        let tables = Tables::new(pairs);
        (texts.iter()).all(|t| self.scan_avx2(&tables, t.as_bytes(), seen))
    }

    /// Marks in `seen` the query terms among the words of `bytes`; false when a byte is
    /// not ASCII (as `scan`).
    #[inline]
    #[target_feature(enable = "avx2")]
    fn scan_avx2(&self, tables: &Tables, bytes: &[u8], seen: &mut Seen) -> bool {
        let mut carry = 0;
        let mut at = 0;
        while at < bytes.len() {
            // 32 bytes from `at` and 32 from `at + 1`: in place while there are that
            // many, else from a zero-padded copy of the rest (zero is no letter).
            let (alnum, pairs, high) = match bytes.get(at..at + 33) {
                // SAFETY: `chunk` has 33 bytes, so both unaligned loads are in bounds.
                Some(chunk) => unsafe {
                    tables.masks(
                        _mm256_loadu_si256(chunk.as_ptr().cast()),
                        _mm256_loadu_si256(chunk.as_ptr().add(1).cast()),
                    )
                },
                // The last 32 bytes, the masks shifted down to the rest's first: no
                // copy. The byte after the last is taken as zero, which is no letter.
                None if bytes.len() >= 32 => {
                    let from = bytes.len() - 32;
                    // SAFETY: the 32 bytes from `from` are the slice's last.
                    let x = unsafe { _mm256_loadu_si256(bytes.as_ptr().add(from).cast()) };
                    let (alnum, pairs, high) = tables.masks(x, shift_one(x));
                    let skip = at - from;
                    (alnum >> skip, pairs >> skip, high >> skip)
                }
                None => {
                    let mut padded = [0u8; 64];
                    padded[..bytes.len() - at].copy_from_slice(&bytes[at..]);
                    // SAFETY: `padded` has 64 bytes, so both loads are in bounds.
                    unsafe {
                        tables.masks(
                            _mm256_loadu_si256(padded.as_ptr().cast()),
                            _mm256_loadu_si256(padded.as_ptr().add(1).cast()),
                        )
                    }
                }
            };
            if high != 0 {
                return false;
            }
            let mut starts = alnum & !(alnum << 1 | carry) & pairs;
            carry = alnum >> 31;
            while starts != 0 {
                let k = starts.trailing_zeros();
                starts &= starts - 1;
                let word = at + k as usize;
                // The word's end: its run of mask bits, then bytes past this chunk.
                let mut end = word + (!(alnum >> k)).trailing_zeros() as usize;
                if end == at + 32 {
                    end += bytes[end..]
                        .iter()
                        .position(|b| !b.is_ascii_alphanumeric())
                        .unwrap_or(bytes.len() - end);
                }
                let len = end - word;
                if len < 2 {
                    continue;
                }
                let slot = slot_of(prefix_key(load4(bytes, word) | 0x2020_2020, len.min(4)));
                if self.prefixes[slot / 64] & (1 << (slot % 64)) != 0 {
                    self.mark(&bytes[..end], word, seen);
                }
            }
            at += 32;
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The masks of the 32 bytes of `block` (and the byte after it, `next`), or `None`
    /// where the processor has no AVX2.
    fn masks_of(filter: &PairFilter, block: &[u8; 32], next: u8) -> Option<(u32, u32, u32)> {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return None;
        }
        let mut bytes = [0u8; 33];
        bytes[..32].copy_from_slice(block);
        bytes[32] = next;
        // SAFETY: AVX2 is there (checked above); both loads read 32 of the 33 bytes.
        unsafe {
            let x = _mm256_loadu_si256(bytes.as_ptr().cast());
            let y = _mm256_loadu_si256(bytes.as_ptr().add(1).cast());
            Some(Tables::new(filter).masks(x, y))
        }
    }

    #[test]
    fn every_byte_pair_is_classified_and_filtered_as_the_scalar_rules_say() {
        let mut filter = PairFilter::default();
        for stem in ["to", "re", "au", "ro", "pa", "9x", "zz", "qa", "h2"] {
            filter.add(stem.as_bytes()[0], stem.as_bytes()[1]);
        }
        for a in 0..=255u8 {
            for b in 0..=255u8 {
                // The pair at an even and an odd place, with the second byte of the
                // last pair taken from beyond the block.
                let mut block = [b'.'; 32];
                block[6] = a;
                block[7] = b;
                block[31] = a;
                let Some((alnum, pairs, high)) = masks_of(&filter, &block, b) else {
                    return;
                };
                let what = format!("{a:#04x} {b:#04x}");
                for (k, byte) in [(6, a), (7, b), (31, a)] {
                    let bit = |m: u32| m >> k & 1 == 1;
                    assert_eq!(bit(alnum), byte.is_ascii_alphanumeric(), "{what} at {k}");
                    assert_eq!(bit(high), !byte.is_ascii(), "{what} at {k}");
                }
                assert_eq!(pairs >> 6 & 1 == 1, filter.passes(a, b), "{what}");
                assert_eq!(pairs >> 31 & 1 == 1, filter.passes(a, b), "{what}");
            }
        }
    }

    #[test]
    fn shift_one_moves_every_byte_down_one_across_the_lanes() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            return;
        }
        let bytes: [u8; 32] = std::array::from_fn(|k| k as u8 + 1);
        let mut out = [0u8; 32];
        // SAFETY: AVX2 is there (checked above); loads and stores are of 32 bytes.
        unsafe {
            let x = _mm256_loadu_si256(bytes.as_ptr().cast());
            std::arch::x86_64::_mm256_storeu_si256(out.as_mut_ptr().cast(), shift_one(x));
        }
        let expected: [u8; 32] = std::array::from_fn(|k| if k < 31 { k as u8 + 2 } else { 0 });
        assert_eq!(out, expected);
    }

    /// Every text length around the chunk sizes, a query word at every place: the scan
    /// with AVX2 counts what the term sets count.
    #[test]
    fn words_at_every_place_of_texts_of_every_length_are_found() {
        let query = TermQuery::new(&["Rotating tokens", "refresh authentication zz9"]);
        for len in 0..100 {
            for at in 0..len {
                for word in [
                    "Tokens",
                    "ROTATE",
                    "refreshing",
                    "zz9",
                    "to",
                    "authentications",
                ] {
                    let mut text: Vec<u8> = (0..len).map(|k| b"ab cd-"[k % 6]).collect();
                    let end = (at + word.len()).min(len);
                    text[at..end].copy_from_slice(&word.as_bytes()[..end - at]);
                    let text = String::from_utf8(text).unwrap_or_default();
                    let expected = crate::text::overlap(&crate::text::terms(&text), query.terms());
                    assert_eq!(query.overlap(&[&text]), expected, "{text:?}");
                }
            }
        }
    }

    #[test]
    fn a_stems_first_two_bytes_pass_in_any_case() {
        let mut filter = PairFilter::default();
        filter.add(b't', b'o');
        filter.add(b'4', b'k');
        for (a, b) in [
            (b't', b'o'),
            (b'T', b'O'),
            (b'T', b'o'),
            (b't', b'O'),
            (b'4', b'K'),
        ] {
            assert!(filter.passes(a, b), "{}{}", a as char, b as char);
        }
        assert!(!filter.passes(b'o', b't'));
    }
}
