//! The query's ASCII stems by their bytes, so that the scan finds the term a word stems
//! to with two loads, one multiply and a compare instead of hashing the stem a byte at a
//! time (the FNV-1a of `term_hash`, whose multiplies depend on each other).
//!
//! A stem of up to 16 bytes is its first eight bytes and its last eight (the same bytes
//! twice when it is shorter, zero-padded) and its length, which together are the stem:
//! equal keys are equal stems. Longer stems are not in the table, and the scan hashes
//! those words as before.

/// Stems longer than this are looked up by their hash (`TermQuery::find`).
pub(super) const MAX_KEYED: usize = 16;

#[derive(Debug, Clone, Copy, Default)]
struct Entry {
    head: u64,
    tail: u64,
    len: u32,
    /// The term's index in `TermQuery::terms` plus one; 0 for an empty entry.
    term: u32,
}

/// Open addressing over a power of two of entries, at most half of them used.
#[derive(Debug, Clone, Default)]
pub(super) struct StemTable {
    entries: Vec<Entry>,
}

/// The key of a stem of `len` bytes (2 to `MAX_KEYED`, lower-case) whose first eight
/// bytes are `head` and last eight are `tail` (little-endian, as `key_in` reads them).
#[inline]
fn slot(head: u64, tail: u64, len: usize, mask: usize) -> usize {
    let mixed = (head ^ tail.rotate_left(29) ^ len as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (mixed >> 40) as usize & mask
}

/// `(head, tail)` of the stem `text[at..at + len]`, each byte or-ed with `set` (`0x20`
/// lower-cases an ASCII letter or digit, which the scan's words are made of). A short
/// stem is read with the bytes before it, shifted out, where there are eight. Always
/// inlined into `TermQuery::mark`, which left it a call otherwise.
#[inline(always)]
pub(super) fn key_in(text: &[u8], at: usize, len: usize, set: u8) -> (u64, u64) {
    let set = u64::from(set) * 0x0101_0101_0101_0101;
    let end = at + len;
    let eight = |from: usize| match text[from..].first_chunk::<8>() {
        Some(b) => u64::from_le_bytes(*b) | set,
        None => 0,
    };
    let head = if len >= 8 {
        eight(at)
    } else if end >= 8 {
        eight(end - 8) >> (8 * (8 - len))
    } else {
        (text[at..end].iter().rev()).fold(0, |x, &b| x << 8 | u64::from(b) | (set & 0xff))
    };
    let tail = if len > 8 { eight(end - 8) } else { head };
    (head, tail)
}

impl StemTable {
    /// The table of `stems` (lower-case ASCII, 2 to `MAX_KEYED` bytes), each with its
    /// term's index.
    pub(super) fn new(stems: &[(&[u8], usize)]) -> StemTable {
        let size = (2 * stems.len()).next_power_of_two().max(8);
        let mut table = StemTable {
            entries: vec![Entry::default(); size],
        };
        for &(stem, term) in stems {
            let (head, tail) = key_in(stem, 0, stem.len(), 0);
            if table.find(head, tail, stem.len()).is_some() {
                continue;
            }
            let mask = size - 1;
            let mut at = slot(head, tail, stem.len(), mask);
            while table.entries[at].term != 0 {
                at = (at + 1) & mask;
            }
            table.entries[at] = Entry {
                head,
                tail,
                len: stem.len() as u32,
                term: term as u32 + 1,
            };
        }
        table
    }

    /// The term index of the stem of `len` bytes keyed `head`, `tail` (see `key_in`).
    #[inline]
    pub(super) fn find(&self, head: u64, tail: u64, len: usize) -> Option<usize> {
        let mask = self.entries.len().wrapping_sub(1);
        let mut at = slot(head, tail, len, mask);
        loop {
            let e = self.entries.get(at)?;
            if e.term == 0 {
                return None;
            }
            if e.head == head && e.tail == tail && e.len as usize == len {
                return Some(e.term as usize - 1);
            }
            at = (at + 1) & mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stem_is_found_by_its_bytes_in_any_case_and_no_other_is() {
        let stems: [&[u8]; 6] = [
            b"to",
            b"token",
            b"authentic",
            b"rotat",
            b"0123456789abcdef",
            b"ab",
        ];
        let table = StemTable::new(
            &stems
                .iter()
                .enumerate()
                .map(|(k, s)| (*s, k))
                .collect::<Vec<_>>(),
        );
        for (k, stem) in stems.iter().enumerate() {
            // Alone, and after other bytes (read with the stem, shifted out).
            let upper = stem.to_ascii_uppercase();
            let (head, tail) = key_in(&upper, 0, upper.len(), 0x20);
            assert_eq!(table.find(head, tail, stem.len()), Some(k), "{upper:?}");
            let after = [&b"xyzzy, 12345678 "[..], &upper, b" etc"].concat();
            let (head, tail) = key_in(&after, 16, upper.len(), 0x20);
            assert_eq!(table.find(head, tail, stem.len()), Some(k), "{after:?}");
        }
        for other in [
            &b"tok"[..],
            b"tokenx",
            b"authentica",
            b"0123456789abcdeg",
            b"ba",
            b"at",
        ] {
            let (head, tail) = key_in(other, 0, other.len(), 0x20);
            assert_eq!(table.find(head, tail, other.len()), None, "{other:?}");
        }
    }
}
