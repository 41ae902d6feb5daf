//! Errors of symbol and debug-information loading.

use std::path::PathBuf;

use thiserror::Error;

/// Why symbols or types could not be loaded from a file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DebugInfoError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's reason.
        reason: String,
    },
    /// The file is not a usable ELF file (truncated, corrupt, another format).
    #[error("{path} is not a usable ELF file: {reason}")]
    Elf {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// The DWARF in a file is corrupt or uses something unsupported.
    #[error("bad DWARF in {path}: {reason}")]
    Dwarf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A compressed debug section claims more uncompressed bytes than a real one can hold: more
    /// than [`MAX_UNCOMPRESSED_SECTION`](crate::debuginfo::MAX_UNCOMPRESSED_SECTION), or more
    /// than zlib can expand its compressed bytes to. Refused before anything is allocated.
    #[error("{section} in {path} claims {claimed} bytes uncompressed; refused: {reason}")]
    CompressedSection {
        /// The file.
        path: PathBuf,
        /// The section (`.debug_info`, ...).
        section: &'static str,
        /// The uncompressed size its header claims.
        claimed: u64,
        /// Which bound it breaks, with the compression and the compressed size.
        reason: String,
    },
    /// A type's description could not be followed (cycle, excessive depth, missing target).
    #[error("type {name} in {path}: {reason}")]
    Type {
        /// The file.
        path: PathBuf,
        /// The type or variable looked up.
        name: String,
        /// What went wrong.
        reason: String,
    },
    /// The process's memory map could not be read.
    #[error("cannot read the memory map of pid {pid}: {reason}")]
    Maps {
        /// The process.
        pid: u32,
        /// Why.
        reason: String,
    },
}

impl DebugInfoError {
    pub(crate) fn io(path: impl Into<PathBuf>, e: &std::io::Error) -> Self {
        DebugInfoError::Io {
            path: path.into(),
            reason: e.to_string(),
        }
    }
}
