//! The MPIR Process Acquisition Interface: symbols, debug states, flags and the process descriptor
//! table (*The MPIR Process Acquisition Interface*, version 1.1, and *TV Process Acquisition with
//! MPICH*; see the repository's [spec list]).
//!
//! [`discover`] finds the table of a starter that has no MPIR symbols, by a validated search of
//! its writable memory.
//!
//! [spec list]: https://github.com/mpir-rs/mpir-rs/blob/main/docs/spec/README.md

pub mod discover;
mod proctable;
mod state;
pub mod symbols;

pub use proctable::{
    DEFAULT_MAX_ENTRIES, DEFAULT_MAX_STRING, EntryField, EntryProblem, FetchedStrings, Implausible,
    NameId, ProblemKind, ProcDescLayout, ProcEntry, Rank, RawProcDesc, ResolvedTable,
    decode_proctable, encode_proctable, proctable_bytes, proctable_len, resolve, resolve_in,
    string_addresses,
};
pub use state::{DebugState, Flag, MpirFlags};
