//! The layout of the o200k index that `build.rs` writes and `o200k.rs` reads: one hash
//! function, one slot format and one offset format, shared by both through `#[path]` so
//! they cannot drift.
//!
//! The tokens' bytes are concatenated in rank order. Token r starts at
//! `block_base[r >> BLOCK_BITS] + offset[r]` (a `u32` per block of ranks and a `u16` per
//! rank, both little-endian) and ends where token r + 1 starts; `offset` has one entry
//! past the last rank for that.
//!
//! The index is an open-addressing table of `1 << SLOT_BITS` little-endian `u32` slots,
//! probed linearly. A slot holds a token's rank in its low `RANK_BITS` and a fingerprint of
//! the token's hash in the rest, so a probe that meets another token's slot is rejected
//! without reading that token's bytes; `EMPTY` ends a probe.

/// 2^18 slots for the 199,998 tokens: a load of 0.76, so a miss reads about nine
/// consecutive slots (two cache lines at most) and the table is 1 MiB.
pub const SLOT_BITS: u32 = 18;
pub const SLOTS: usize = 1 << SLOT_BITS;
pub const RANK_BITS: u32 = 18;
pub const RANK_MASK: u32 = (1 << RANK_BITS) - 1;
/// All ones: its rank part (262,143) is above every o200k rank.
pub const EMPTY: u32 = u32::MAX;
/// 4,096 ranks to a block: their bytes (about 28 KiB on average for o200k) must span
/// less than 64 KiB, which `build.rs` checks, for `u16` offsets within the block.
pub const BLOCK_BITS: u32 = 12;

/// A 64-bit hash of a token's bytes: eight bytes at a time, multiplied and folded, then
/// a final avalanche so both the top bits (the slot) and the middle bits (the
/// fingerprint) depend on every byte.
#[inline]
pub fn hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (bytes.len() as u64).wrapping_mul(K);
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(K).rotate_left(29);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut b = [0u8; 8];
        b[..rest.len()].copy_from_slice(rest);
        h = (h ^ u64::from_le_bytes(b)).wrapping_mul(K).rotate_left(29);
    }
    h ^= h >> 32;
    h = h.wrapping_mul(0xd6e8_feb8_6659_fd93);
    h ^ (h >> 32)
}

/// The first slot a token with hash `h` is looked for in.
#[inline]
pub fn home(h: u64) -> usize {
    (h >> (64 - SLOT_BITS)) as usize
}

/// The fingerprint stored above the rank in a slot.
#[inline]
pub fn fingerprint(h: u64) -> u32 {
    ((h >> 8) as u32) & !RANK_MASK
}
