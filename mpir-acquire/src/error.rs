//! Errors of acquisition.

use std::time::Duration;

use mpir_target::TargetError;
use thiserror::Error;

/// Why a job could not be acquired. Per-rank trouble (an unreadable name, a rank that exited
/// before we attached) is not an error: it is reported inside an otherwise complete
/// [`Job`](crate::Job).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum AcquireError {
    /// The process is not an MPIR starter: `MPIR_Breakpoint` is defined in none of its images.
    #[error(
        "process {pid} is not an MPIR starter: no {symbol} in {images} (looked for it in the \
         symbol tables and separate debug files of every loaded image)"
    )]
    NotAStarter {
        /// The process.
        pid: u32,
        /// The symbol looked for.
        symbol: &'static str,
        /// The images searched, as a readable list.
        images: String,
    },
    /// Nothing happened while we waited.
    #[error("timed out after {after:?} waiting for {waiting_for} (pid {pid})")]
    Timeout {
        /// The starter.
        pid: u32,
        /// What we waited for.
        waiting_for: String,
        /// How long.
        after: Duration,
    },
    /// The starter ended before the job was acquired.
    #[error("the starter (pid {pid}) {how} while we waited for {waiting_for}")]
    StarterEnded {
        /// The starter.
        pid: u32,
        /// "exited with status N", "was killed by signal N".
        how: String,
        /// What we waited for.
        waiting_for: String,
    },
    /// The starter reported `MPIR_DEBUG_ABORTING`.
    #[error("the job is aborting (pid {pid}): {message}")]
    JobAborted {
        /// The starter.
        pid: u32,
        /// `MPIR_debug_abort_string`, or a note saying why it is missing.
        message: String,
    },
    /// The tool daemon extension cannot carry what was asked.
    #[error("tool daemon launch: {0}")]
    ToolDaemon(String),
    /// More MPIR events than any sane starter raises before spawning its job.
    #[error("the starter (pid {pid}) raised {events} MPIR events without spawning a job")]
    TooManyEvents {
        /// The starter.
        pid: u32,
        /// How many.
        events: u32,
    },
    /// The starter says its table is ready but its size is impossible.
    #[error(
        "the starter (pid {pid}) says {state} with MPIR_proctable_size = {size}: a table cannot \
         have a negative size"
    )]
    BadTable {
        /// The starter.
        pid: u32,
        /// `MPIR_proctable_size` as read.
        size: i64,
        /// The `MPIR_debug_state` that said the table is ready.
        state: &'static str,
    },
    /// Reading or controlling a process failed.
    #[error("{context}: {source}")]
    Target {
        /// What we were doing.
        context: String,
        /// The failure.
        #[source]
        source: TargetError,
    },
    /// The MPI2DD side of a job could not be read from its entry process.
    #[error("MPI2DD (pid {pid}): {reason}")]
    Mpi2dd {
        /// The entry process.
        pid: u32,
        /// Why.
        reason: String,
    },
    /// The caller used the session in an order it does not allow.
    #[error("{0}")]
    Usage(String),
}

impl AcquireError {
    pub(crate) fn target(context: impl Into<String>) -> impl FnOnce(TargetError) -> Self {
        let context = context.into();
        move |source| AcquireError::Target { context, source }
    }
}
