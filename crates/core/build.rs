//! Builds the o200k tables the BPE estimator reads in place from the checked-in
//! vocabulary: the tokens' bytes, their offsets and a hash table of the tokens (layout in
//! `src/tokens/vocab_hash.rs`).
//! Done here, not at run time, so a process that counts tokens decodes nothing and
//! allocates nothing for the vocabulary: the tables are pages of the binary.

use std::error::Error;
use std::path::PathBuf;

#[path = "src/tokens/vocab_hash.rs"]
#[allow(dead_code)]
mod vocab_hash;

use vocab_hash::{BLOCK_BITS, EMPTY, RANK_MASK, SLOTS, fingerprint, hash, home};

const VOCAB: &str = "data/o200k_base.bin";

fn main() -> Result<(), Box<dyn Error>> {
    println!("cargo::rerun-if-changed={VOCAB}");
    println!("cargo::rerun-if-changed=src/tokens/vocab_hash.rs");
    let data = std::fs::read(VOCAB)?;

    // `data` is every token in rank order, each as one length byte and its bytes.
    let mut offsets: Vec<u32> = Vec::with_capacity(200_000);
    let mut at = 0usize;
    while at < data.len() {
        let len = usize::from(data[at]);
        let start = at + 1;
        if len == 0 || start + len > data.len() {
            return Err(format!("{VOCAB}: bad token length at byte {at}").into());
        }
        offsets.push(u32::try_from(start)?);
        at = start + len;
    }
    // A rank must fit its slot, and the table must keep room for short probes.
    if offsets.len() > (RANK_MASK as usize) || offsets.len() * 5 > SLOTS * 4 {
        return Err(format!("{VOCAB}: {} tokens do not fit the index", offsets.len()).into());
    }

    let mut slots = vec![EMPTY; SLOTS];
    for (rank, &start) in offsets.iter().enumerate() {
        let start = start as usize;
        let token = &data[start..start + usize::from(data[start - 1])];
        let h = hash(token);
        let mut i = home(h);
        while slots[i] != EMPTY {
            let other = (slots[i] & RANK_MASK) as usize;
            let o = offsets[other] as usize;
            if &data[o..o + usize::from(data[o - 1])] == token {
                return Err(format!("{VOCAB}: ranks {other} and {rank} are the same token").into());
            }
            i = (i + 1) % SLOTS;
        }
        slots[i] = fingerprint(h) | u32::try_from(rank)?;
    }

    // The bytes alone, and the offsets in the compact form `vocab_hash.rs` describes.
    let mut bytes = Vec::with_capacity(data.len());
    let mut starts: Vec<usize> = Vec::with_capacity(offsets.len() + 1);
    for &start in &offsets {
        let start = start as usize;
        starts.push(bytes.len());
        bytes.extend_from_slice(&data[start..start + usize::from(data[start - 1])]);
    }
    starts.push(bytes.len());
    let mut bases: Vec<u32> = Vec::new();
    let mut relative: Vec<u16> = Vec::with_capacity(starts.len());
    for (rank, &start) in starts.iter().enumerate() {
        if rank % (1 << BLOCK_BITS) == 0 {
            bases.push(u32::try_from(start)?);
        }
        let base = bases.last().map_or(0, |&b| b as usize);
        relative.push(
            u16::try_from(start - base)
                .map_err(|_| format!("{VOCAB}: the block of rank {rank} spans 64 KiB or more"))?,
        );
    }

    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    let le32 = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let le16 = |v: &[u16]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    std::fs::write(out.join("o200k_bytes.bin"), bytes)?;
    std::fs::write(out.join("o200k_blocks.bin"), le32(&bases))?;
    std::fs::write(out.join("o200k_offsets.bin"), le16(&relative))?;
    std::fs::write(out.join("o200k_slots.bin"), le32(&slots))?;
    Ok(())
}
