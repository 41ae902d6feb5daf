//! Errors of the native walkers (here, beside [`super::MqdError`], so that the result model
//! can hold either without importing the walkers).

use mpir_target::TargetError;
use thiserror::Error;

/// Why a native walk (or part of one) failed. Each names the target address and what was
/// being read there, or the debug information that is missing.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum NativeError {
    /// A walker's error another process read and passed on as text (an `mpir agent` on
    /// another node): its whole chain, as it was shown there.
    #[error("{message}")]
    Relayed {
        /// The error and its causes, as one line.
        message: String,
    },
    /// No walker recognises the process: for each walker tried, the symbols and types it
    /// needs that the process lacks.
    #[error(
        "no native message-queue walker fits this process: {}",
        tried_text(tried)
    )]
    NotRecognised {
        /// (walker, what it lacks).
        tried: Vec<(String, Vec<String>)>,
        /// The types among what they lack (by name), for a hint that debug information or a
        /// types sidecar is missing.
        missing_types: Vec<String>,
        /// (walker, the symbols among what it lacks). A walker that lacks a symbol cannot be
        /// helped by debug information or a types sidecar: the MPI does not keep the queue it
        /// reads there.
        missing_symbols: Vec<(String, Vec<String>)>,
    },
    /// A walker's required symbols, types or fields are missing.
    #[error("{walker}: the process's symbols or debug information lack {}", missing.join(", "))]
    MissingLayout {
        /// The walker.
        walker: &'static str,
        /// `type T`, `T.member`, `symbol S`.
        missing: Vec<String>,
        /// The types among them, by name.
        missing_types: Vec<String>,
    },
    /// A symbol or type lookup failed (not: was absent).
    #[error("looking up {name}")]
    Lookup {
        /// The symbol or type.
        name: String,
        /// The backend's error.
        #[source]
        source: TargetError,
    },
    /// Target memory could not be read.
    #[error("reading {what} at {address:#x}")]
    Read {
        /// What was being read.
        what: String,
        /// Where.
        address: u64,
        /// The backend's error.
        #[source]
        source: TargetError,
    },
    /// A list came back to an entry already visited.
    #[error("{what}: entry {address:#x} seen twice after {hops} entries (a cyclic list)")]
    Cycle {
        /// The list.
        what: String,
        /// The entry met again.
        address: u64,
        /// Entries walked before.
        hops: usize,
    },
    /// A list or table is longer than the walk's bound.
    #[error("{what}: more than {limit} entries; stopped (a corrupt list?)")]
    TooLong {
        /// The list or table.
        what: String,
        /// The bound.
        limit: usize,
    },
    /// A value read from the target makes no sense.
    #[error("{what} at {address:#x}: {reason}")]
    Corrupt {
        /// What was read.
        what: String,
        /// Where.
        address: u64,
        /// Why it was refused.
        reason: String,
    },
    /// The communicator list changed during every attempt to walk it (communicators being
    /// created or freed); stop the process for a consistent view.
    #[error("the communicator list changed during each of {attempts} walks")]
    Unstable {
        /// Walks attempted.
        attempts: u32,
    },
}

impl NativeError {
    /// The MPI's types whose absence caused this error (a process whose MPI library has no
    /// debug information and no types sidecar was given); empty for other causes.
    pub fn missing_types(&self) -> &[String] {
        match self {
            NativeError::NotRecognised { missing_types, .. }
            | NativeError::MissingLayout { missing_types, .. } => missing_types,
            _ => &[],
        }
    }
}

impl NativeError {
    /// Whether no walker fits because every walker lacks symbols it reads the queues from
    /// (not only types): the MPI keeps none of the queues the walkers know, so no types
    /// sidecar or debug information can make one fit.
    pub fn lacks_queue_symbols(&self) -> bool {
        match self {
            NativeError::NotRecognised {
                tried,
                missing_symbols,
                ..
            } => {
                !tried.is_empty()
                    && tried.iter().all(|(walker, _)| {
                        missing_symbols
                            .iter()
                            .any(|(w, symbols)| w == walker && !symbols.is_empty())
                    })
            }
            _ => false,
        }
    }

    /// For [`NativeError::NotRecognised`]: each walker with the symbols it lacks, as one
    /// phrase (`MPICH lacks symbol A, symbol B; Open MPI ob1 lacks symbol C`).
    pub fn missing_symbols_text(&self) -> Option<String> {
        let NativeError::NotRecognised {
            missing_symbols, ..
        } = self
        else {
            return None;
        };
        Some(
            missing_symbols
                .iter()
                .filter(|(_, s)| !s.is_empty())
                .map(|(w, s)| format!("{w} lacks {}", s.join(", ")))
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

fn tried_text(tried: &[(String, Vec<String>)]) -> String {
    tried
        .iter()
        .map(|(w, m)| format!("{w} lacks {}", m.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Short alias.
pub(crate) type NativeResult<T> = std::result::Result<T, NativeError>;
