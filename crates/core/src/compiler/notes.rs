//! The predecessor's notes section: its warnings, each with the shortest form that is
//! always delivered, then its notes, with their opening words as their floor.

use super::Section;
use super::render::{
    Arena, MAX_ITEM_CHARS, MAX_NOTES_CHARS, NOTES_FLOOR_WORDS, Piece, push_clean,
    push_warning_floor, push_words,
};
use super::sections::{ANCHOR_BONUS, Block, Context, FLOOR_WARNINGS, Item, heading};

/// The last handoff's warnings — the engine's own first (a possible contradiction the
/// reconciler found), then the worker's — each with its shortest form (the first
/// `FLOOR_WARNINGS` are always delivered), then its notes.
pub(super) fn notes(arena: &mut Arena<'_>, cx: &Context<'_>) -> Block {
    let section = Section::PreviousWorkerNotes;
    let Some(h) = cx.state.handoffs.last() else {
        return Block {
            section,
            heading: Piece::default(),
            items: Vec::new(),
            available: 0,
            floor: 0,
            primary: usize::MAX,
            cap_dropped: Vec::new(),
            warnings: 0,
        };
    };
    let engine = (h.engine_warnings.iter().enumerate()).map(|(k, w)| {
        (
            "- WARNING (engine): ",
            w,
            format!("{}.engine_warning{}", h.id, k + 1),
        )
    });
    let worker = (h.warnings.iter().enumerate())
        .map(|(k, w)| ("- WARNING: ", w, format!("{}.warning{}", h.id, k + 1)));
    let all_warnings = h.engine_warnings.len() + h.warnings.len();
    let mut items = Vec::with_capacity(all_warnings + 1);
    for (k, (label, w, id)) in engine.chain(worker).enumerate() {
        let out = arena.begin();
        out.push_str(label);
        let cut = push_clean(out, w, MAX_ITEM_CHARS);
        let piece = arena.end();
        let short = if k < FLOOR_WARNINGS {
            let out = arena.begin();
            out.push_str(label);
            push_warning_floor(out, w);
            let short = arena.end();
            Some(short)
        } else {
            None
        };
        items.push(Item {
            id,
            score: ANCHOR_BONUS - k.min(ANCHOR_BONUS as usize / 2) as u32,
            order: k as u64,
            piece,
            short,
            compact: None,
            shortened: cut,
        });
    }
    if !h.notes.trim().is_empty() {
        let out = arena.begin();
        let cut = push_clean(out, &h.notes, MAX_NOTES_CHARS);
        let piece = arena.end();
        // The notes' floor: their opening words, when the whole runs longer.
        let short = (h.notes.split_whitespace().nth(NOTES_FLOOR_WORDS).is_some()).then(|| {
            push_words(arena.begin(), &h.notes, NOTES_FLOOR_WORDS);
            arena.end()
        });
        items.push(Item {
            id: format!("{}.notes", h.id),
            score: 0,
            order: all_warnings as u64,
            piece,
            short,
            compact: None,
            shortened: cut,
        });
    }
    let p = &h.provenance;
    let extra = format!("\nFrom {} ({}), turn {}:", p.recorded_by, p.model, p.turn);
    Block {
        section,
        heading: heading(arena, section, items.is_empty(), Some(&extra)),
        available: items.len(),
        // The notes block's floor is handled by the fill (warnings, then the notes).
        floor: 0,
        primary: usize::MAX,
        items,
        cap_dropped: Vec::new(),
        warnings: all_warnings,
    }
}
