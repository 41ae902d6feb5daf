//! The process descriptor table: `MPIR_PROCDESC` layout, the table decoder, and resolution of
//! the raw entries (string addresses) into the job's ranks.
//!
//! `procdesc` holds the struct's layout, `decode` the raw table (bounds, decoding, encoding, the
//! strings to fetch), `ranks` the resolved table's types and `resolve` the resolution of raw
//! entries with their fetched strings.

mod decode;
mod procdesc;
mod ranks;
mod resolve;

pub use decode::{
    RawProcDesc, decode_proctable, encode_proctable, proctable_bytes, proctable_len,
    string_addresses,
};
pub use procdesc::ProcDescLayout;
pub use ranks::{
    EntryField, EntryProblem, Implausible, NameId, ProblemKind, ProcEntry, Rank, ResolvedTable,
};
pub use resolve::{FetchedStrings, resolve, resolve_in};

/// Default bound on `MPIR_proctable_size`: 8 Mi entries (192 MiB of table on LP64), above any
/// job run so far. A tool can raise it.
pub const DEFAULT_MAX_ENTRIES: u64 = 1 << 23;

/// Default bound on one host or executable name: `PATH_MAX`.
pub const DEFAULT_MAX_STRING: u64 = 4096;
