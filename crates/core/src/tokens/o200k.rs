//! o200k_base token counts, exactly as tiktoken computes them, over tables that are part
//! of the binary: nothing is decoded, hashed or allocated to get ready, so the first
//! count in a process costs what the hundredth does (plus the page faults of the few
//! hundred kilobytes of table it touches).
//!
//! The vocabulary (`data/o200k_base.bin`, checked in) is every token in rank order as a
//! length byte and the token's bytes; `build.rs` derives the tables read here from it
//! (layout in `vocab_hash.rs`): 1.4 MB of bytes, 0.4 MB of offsets, a 1 MiB index. The merge loops are tiktoken's
//! (`_byte_pair_merge` below 100 bytes, `_byte_pair_merge_large` from 100), so ties and
//! long pieces resolve exactly as there; the tests compare every count with tiktoken-rs.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::pretokenize::pieces;
use super::vocab_hash::{BLOCK_BITS, EMPTY, RANK_MASK, SLOTS, fingerprint, hash, home};

type Rank = u32;

static BYTES: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_bytes.bin"));
static BLOCKS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_blocks.bin"));
static OFFSETS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_offsets.bin"));
static SLOT_TABLE: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_slots.bin"));

/// Pieces shorter than this are merged by rescanning a small array, longer ones with a
/// heap; tiktoken's threshold, kept so both take the same path.
const LARGE_PIECE: usize = 100;

#[inline]
fn u32_at(table: &[u8], i: usize) -> u32 {
    match table.get(i * 4..i * 4 + 4) {
        Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]),
        _ => EMPTY,
    }
}

/// Where the token of rank `rank` starts in `BYTES` (where the last one ends for the
/// rank after it).
#[inline]
fn start(rank: usize) -> usize {
    let base = u32_at(BLOCKS, rank >> BLOCK_BITS) as usize;
    match OFFSETS.get(rank * 2..rank * 2 + 2) {
        Some(&[a, b]) => base + usize::from(u16::from_le_bytes([a, b])),
        _ => BYTES.len(),
    }
}

/// The number of tokens in the vocabulary.
#[cfg(test)]
pub(super) fn vocab_len() -> usize {
    OFFSETS.len() / 2 - 1
}

/// The bytes of the token of rank `rank` (empty past the vocabulary).
#[inline]
pub(super) fn token(rank: Rank) -> &'static [u8] {
    let rank = rank as usize;
    BYTES.get(start(rank)..start(rank + 1)).unwrap_or_default()
}

/// The rank of `bytes` if it is a token.
#[inline]
pub(super) fn rank(bytes: &[u8]) -> Option<Rank> {
    let h = hash(bytes);
    let fp = fingerprint(h);
    let mut i = home(h);
    loop {
        let slot = u32_at(SLOT_TABLE, i);
        if slot == EMPTY {
            return None;
        }
        if slot & !RANK_MASK == fp && token(slot & RANK_MASK) == bytes {
            return Some(slot & RANK_MASK);
        }
        i = (i + 1) & (SLOTS - 1);
    }
}

/// Tokens of `text` under o200k_base (ordinary text: special tokens are not parsed).
pub(super) fn count(text: &str) -> usize {
    pieces(text).map(piece_tokens).sum()
}

fn piece_tokens(piece: &[u8]) -> usize {
    match piece.len() {
        // Every single byte is a token.
        0 | 1 => piece.len(),
        _ if rank(piece).is_some() => 1,
        n if n < LARGE_PIECE => merge_small(piece),
        _ => merge_large(piece),
    }
}

fn rank_or_max(bytes: &[u8]) -> Rank {
    rank(bytes).unwrap_or(Rank::MAX)
}

/// tiktoken's `_byte_pair_merge`: `parts[i]` is the start of part i and the rank of the
/// pair it starts; the lowest-ranked pair (leftmost on ties) merges until none is a
/// token. Returns the number of parts left.
fn merge_small(piece: &[u8]) -> usize {
    let n = piece.len();
    let mut parts = [(0usize, Rank::MAX); LARGE_PIECE + 1];
    let mut len = n + 1;
    for (i, part) in parts.iter_mut().enumerate().take(n - 1) {
        *part = (i, rank_or_max(&piece[i..i + 2]));
    }
    parts[n - 1] = (n - 1, Rank::MAX);
    parts[n] = (n, Rank::MAX);
    // The rank of the part at `i` merged with the next one, `parts[i + 1]` not yet removed.
    let pair_rank = |parts: &[(usize, Rank)], len: usize, i: usize| {
        if i + 3 < len {
            rank_or_max(&piece[parts[i].0..parts[i + 3].0])
        } else {
            Rank::MAX
        }
    };
    loop {
        let (mut min_rank, mut at) = (Rank::MAX, 0);
        for (i, &(_, r)) in parts[..len - 1].iter().enumerate() {
            if r < min_rank {
                (min_rank, at) = (r, i);
            }
        }
        if min_rank == Rank::MAX {
            return len - 1;
        }
        if at > 0 {
            parts[at - 1].1 = pair_rank(&parts, len, at - 1);
        }
        parts[at].1 = pair_rank(&parts, len, at);
        parts.copy_within(at + 2..len, at + 1);
        len -= 1;
    }
}

/// One part of `merge_large`: where it ends, where the next part ends, and the rank of
/// merging the two (`Rank::MAX` when that is not a token).
#[derive(Clone, Copy)]
struct Part {
    prev: usize,
    end: usize,
    next_end: usize,
    next_rank: Rank,
}

/// tiktoken's `_byte_pair_merge_large`: the same merges, the lowest pair taken from a
/// heap (leftmost on ties) with stale entries skipped. Returns the number of parts left.
fn merge_large(piece: &[u8]) -> usize {
    let n = piece.len();
    let mut parts: Vec<Part> = (0..n)
        .map(|i| Part {
            prev: i.wrapping_sub(1),
            end: i + 1,
            next_end: i + 2,
            next_rank: Rank::MAX,
        })
        .collect();
    let mut heap = BinaryHeap::with_capacity(n);
    for i in 0..n - 1 {
        let r = rank_or_max(&piece[i..i + 2]);
        if r != Rank::MAX {
            heap.push(Reverse((r, i)));
            parts[i].next_rank = r;
        }
    }
    let mut count = n;
    // Sets what merging the part at `start` with the one ending at `next_end` would rank.
    let propose = |parts: &mut [Part],
                   heap: &mut BinaryHeap<Reverse<(Rank, usize)>>,
                   start: usize,
                   next_end: usize| {
        parts[start].next_end = next_end;
        parts[start].next_rank = Rank::MAX;
        if next_end <= n {
            let r = rank_or_max(&piece[start..next_end]);
            if r != Rank::MAX {
                heap.push(Reverse((r, start)));
                parts[start].next_rank = r;
            }
        }
    };
    while let Some(Reverse((r, left))) = heap.pop() {
        if r != parts[left].next_rank {
            continue;
        }
        let right = parts[left].end;
        let right_end = parts[left].next_end;
        let right_next_end = parts[right].next_end;
        parts[left].end = right_end;
        propose(&mut parts, &mut heap, left, right_next_end);
        if right_end < n {
            parts[right_end].prev = left;
        }
        if left > 0 {
            let prev = parts[left].prev;
            propose(&mut parts, &mut heap, prev, right_end);
        }
        parts[right].next_rank = Rank::MAX;
        count -= 1;
    }
    count
}
