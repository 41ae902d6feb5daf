//! Errors of target access.

use mpir_types::DecodeError;
use thiserror::Error;

/// Why target memory could not be accessed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Fault {
    /// Nothing is mapped at the address.
    #[error("unmapped")]
    Unmapped,
    /// Mapped, but not accessible (e.g. `PROT_NONE`, or a read-only page for a write).
    #[error("protected")]
    Protected,
    /// The process no longer exists.
    #[error("process gone")]
    ProcessGone,
    /// A fault injected by a test target.
    #[error("injected fault")]
    Injected,
    /// The backend does not support this operation (e.g. writing a core file).
    #[error("not supported by this target")]
    Unsupported,
    /// An operating-system error, as text.
    #[error("{0}")]
    Os(String),
    /// The kernel refused this tool the read, for the reason the facts give.
    #[error("refused: {0}")]
    Denied(mpir_types::access::AccessDenial),
}

/// The kind of a failed process-control request ([`TargetError::Control`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ControlCause {
    /// The system refused: ptrace rights (`EPERM`, `EACCES`).
    PermissionDenied,
    /// The process or thread does not exist any more (`ESRCH`, gone from `/proc`).
    Gone,
    /// Threads did not stop within the tracer's stop timeout.
    NotStopped,
    /// Anything else (the reason says what).
    Other,
}

/// Errors of the [`Memory`](crate::Memory), [`SymbolLookup`](crate::SymbolLookup) and
/// [`TypeLookup`](crate::TypeLookup) traits and the helpers built on them. Each names the
/// address or symbol concerned.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum TargetError {
    /// No byte could be read at `address`.
    #[error("cannot read {len} bytes at {address:#x}: {fault}")]
    Unreadable {
        /// First address of the read.
        address: u64,
        /// Bytes requested.
        len: u64,
        /// Why.
        fault: Fault,
    },
    /// A read that had to be complete stopped early.
    #[error("short read at {address:#x}: wanted {wanted} bytes, got {got} ({fault})")]
    ShortRead {
        /// First address of the read.
        address: u64,
        /// Bytes requested.
        wanted: u64,
        /// Bytes obtained before the failure.
        got: u64,
        /// Why the read stopped at `address + got`.
        fault: Fault,
    },
    /// The write could not be done (nothing was written, or for backends that cannot tell,
    /// possibly a prefix).
    #[error("cannot write {len} bytes at {address:#x}: {fault}")]
    Unwritable {
        /// First address of the write.
        address: u64,
        /// Bytes to write.
        len: u64,
        /// Why.
        fault: Fault,
    },
    /// A symbol the operation needs is not defined in the target.
    #[error("symbol {name} not found in the target")]
    SymbolNotFound {
        /// The symbol looked for.
        name: String,
    },
    /// A value read from the target makes the operation impossible.
    #[error("{what} at {address:#x}: {problem}")]
    InvalidValue {
        /// What was read.
        what: String,
        /// Where.
        address: u64,
        /// What is wrong with it.
        problem: String,
    },
    /// A process-control request failed.
    #[error("{operation} on pid {pid}: {reason}")]
    Control {
        /// The process or thread.
        pid: u32,
        /// What was asked (e.g. `PTRACE_SEIZE`).
        operation: String,
        /// Why it failed.
        reason: String,
        /// The kind of failure, for callers that act on it (a hint, a typed "unreached"
        /// reason) without reading `reason`.
        cause: ControlCause,
    },
    /// The kernel refused this tool access to the process (`EPERM`, `EACCES`), for the one
    /// reason gathered from `/proc` right after the refusal. Never retried: only
    /// [`AccessDenial::is_transient`](mpir_types::access::AccessDenial::is_transient) ones
    /// may change.
    #[error("{operation} on pid {pid}: refused: {denial}")]
    Denied {
        /// The process.
        pid: u32,
        /// What was asked (e.g. `PTRACE_SEIZE`).
        operation: String,
        /// Why.
        denial: mpir_types::access::AccessDenial,
    },
    /// The operation is not implemented for this platform (e.g. software breakpoints on an
    /// instruction set other than x86_64).
    #[error("{operation} is not supported here: {reason}")]
    Unsupported {
        /// What was asked.
        operation: String,
        /// Why it cannot be done, and what is supported instead.
        reason: String,
    },
    /// Bytes read from the target could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// Symbols or debug information could not be loaded.
    #[error(transparent)]
    DebugInfo(#[from] crate::debuginfo::DebugInfoError),
}

impl TargetError {
    /// The kernel's refusal behind this error, if it is one: an attach refused, or a read
    /// refused.
    pub fn denial(&self) -> Option<&mpir_types::access::AccessDenial> {
        match self {
            TargetError::Denied { denial, .. } => Some(denial),
            TargetError::Unreadable {
                fault: Fault::Denied(d),
                ..
            }
            | TargetError::ShortRead {
                fault: Fault::Denied(d),
                ..
            }
            | TargetError::Unwritable {
                fault: Fault::Denied(d),
                ..
            } => Some(d),
            _ => None,
        }
    }
}

/// Short alias.
pub type Result<T, E = TargetError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::DebugInfoError;
    use crate::testkit::assert_sources_printed_once;

    #[test]
    fn no_error_prints_its_source_twice() {
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(TargetError::Unreadable {
                address: 0x40,
                len: 8,
                fault: Fault::Os("EIO: Input/output error".into()),
            }),
            Box::new(TargetError::ShortRead {
                address: 0x40,
                wanted: 8,
                got: 3,
                fault: Fault::Unmapped,
            }),
            Box::new(TargetError::Decode(DecodeError::Truncated {
                what: "MPIR_PROCDESC[3].pid".into(),
                address: 0x1000,
                needed: 4,
                available: 1,
            })),
            Box::new(TargetError::DebugInfo(DebugInfoError::Elf {
                path: "/bin/app".into(),
                reason: "not an ELF file".into(),
            })),
        ];
        for e in &errors {
            assert_sources_printed_once(e.as_ref());
        }
        // A forwarding variant says nothing of its own: its message is its cause's.
        let decode = DecodeError::Truncated {
            what: "x".into(),
            address: 1,
            needed: 2,
            available: 0,
        };
        assert_eq!(
            TargetError::Decode(decode.clone()).to_string(),
            decode.to_string()
        );
    }
}
