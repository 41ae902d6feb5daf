//! What the tool prints: every JSON document is built from the types here (never from a
//! library type's own serde output, so that a library refactor cannot change the tool's
//! schema), and the tables.
//!
//! The documents are described in `docs/cli-json.md` and `docs/schema/*.json`.

pub(crate) mod activity;
pub(crate) mod deadlock;
pub(crate) mod job;
pub(crate) mod queues;
pub(crate) mod stacks;

/// A target address as the documents write it: a hex string (`"0x7ffd82250590"`; JSON numbers
/// are not exact beyond 2^53).
pub(crate) fn hex(address: u64) -> String {
    format!("{address:#x}")
}
