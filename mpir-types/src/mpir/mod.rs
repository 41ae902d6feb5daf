//! The MPIR Process Acquisition Interface: symbols, debug states, flags and the process
//! descriptor table (`../shared/spec/mpir-process-acquisition-1.1.txt`, `mpich-attach.txt`).

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
