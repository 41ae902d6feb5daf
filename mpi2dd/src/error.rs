//! Errors of decoding and reading one process's MPI2DD structures.
//!
//! Errors about other processes of a job (unreachable directories, cycles, conflicting
//! entries) are not errors of a traversal: they are listed in its partial result
//! ([`crate::traverse::Unreached`], [`crate::traverse::Problem`]).

use mpir_target::TargetError;
use mpir_types::DecodeError;
use thiserror::Error;

/// Why a process's `MPI2DD_INFO` or one of its tables could not be decoded or read.
///
/// Every variant names the target address concerned (or the symbol that is missing).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Error {
    /// The process does not define `MPI2DD_info`: it does not implement the interface.
    #[error("no MPI2DD_info symbol: the process does not provide the MPI2DD interface")]
    NotProvided,
    /// `magic` is not `'M' 'P' 'I' '2' 0x7f`.
    #[error(
        "MPI2DD_info at {address:#x}: magic is {found:02x?}, expected 4d 50 49 32 7f (\"MPI2\\x7f\")"
    )]
    BadMagic {
        /// Address of `MPI2DD_info`.
        address: u64,
        /// The five bytes found.
        found: [u8; 5],
    },
    /// `version` is not 1.
    #[error("MPI2DD_info at {address:#x}: version {found}, this reader knows version 1 only")]
    UnsupportedVersion {
        /// Address of `MPI2DD_info`.
        address: u64,
        /// The version found.
        found: u8,
    },
    /// `variant` is not 1.
    #[error("MPI2DD_info at {address:#x}: variant {found}, this reader knows variant 1 only")]
    UnsupportedVariant {
        /// Address of `MPI2DD_info`.
        address: u64,
        /// The variant found.
        found: u8,
    },
    /// A table's size and address disagree: a non-NULL size with a NULL table.
    #[error("{table} is NULL but its size is {size} (in MPI2DD_info at {info:#x})")]
    NullTable {
        /// `proctable`, `directory_table` or `metadirectory_table`.
        table: &'static str,
        /// The size field's value.
        size: i32,
        /// Address of `MPI2DD_info`.
        info: u64,
    },
    /// The bytes could not be decoded (truncated, negative or too large a size, overflow).
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Target memory or symbols could not be read.
    #[error(transparent)]
    Target(#[from] TargetError),
}

/// Short alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::connect::{ConnectError, ProcessKey};
    use crate::traverse::TraverseError;
    use mpir_target::Fault;
    use mpir_target::testkit::assert_sources_printed_once;

    fn denied() -> TargetError {
        TargetError::Control {
            pid: 99,
            operation: "open".into(),
            reason: "EPERM: Operation not permitted".into(),
            cause: mpir_target::ControlCause::PermissionDenied,
        }
    }

    #[test]
    fn no_error_prints_its_source_twice() {
        let open = ConnectError::Open {
            host: "node3".into(),
            pid: 99,
            source: denied(),
        };
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(open.clone()),
            Box::new(TraverseError::Connect(open)),
            Box::new(TraverseError::Connect(ConnectError::Remote {
                host: "far".into(),
            })),
            Box::new(TraverseError::Read {
                process: ProcessKey::new("node3", 99),
                error: Error::Target(TargetError::Unreadable {
                    address: 0x40,
                    len: 128,
                    fault: Fault::Unmapped,
                }),
            }),
            Box::new(Error::Decode(DecodeError::Truncated {
                what: "MPI2DD_info".into(),
                address: 0x1000,
                needed: 128,
                available: 3,
            })),
            Box::new(Error::NullTable {
                table: "proctable",
                size: 4,
                info: 0x1000,
            }),
        ];
        for e in &errors {
            assert_sources_printed_once(e.as_ref());
        }
        // The connect failure's cause is still reachable under the traversal error.
        let e = &errors[1];
        let cause = e.source().and_then(|c| c.source()).unwrap();
        assert!(cause.to_string().contains("EPERM"), "{cause}");
    }

    #[test]
    fn the_check_catches_an_error_that_prints_its_source() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {source}")]
        struct Twice {
            source: TargetError,
        }
        let bad = Twice { source: denied() };
        assert!(std::panic::catch_unwind(|| assert_sources_printed_once(&bad)).is_err());
    }
}
