//! Errors of acquisition.

use std::time::Duration;

use mpi2dd::traverse::TraverseError;
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
    /// The process defines no MPIR symbols, and the search of its memory for an MPIR table
    /// ([`mpir_types::mpir::discover`]) found none, or more than one: nothing was written into
    /// it, and no table is guessed.
    #[error(
        "process {pid} defines no MPIR symbols (no MPIR_Breakpoint, MPIR_proctable, \
         MPIR_proctable_size or MPIR_debug_state in any image); its memory was searched for \
         an MPIR table"
    )]
    Discovery {
        /// The process.
        pid: u32,
        /// What the search found.
        #[source]
        source: mpir_types::mpir::discover::DiscoverError,
    },
    /// Launch mode cannot acquire a job from a starter without MPIR symbols: without
    /// `MPIR_Breakpoint` there is no spawn event to wait for, and such a starter is never
    /// written into. Attach to it once its job runs.
    #[error(
        "process {pid} defines no MPIR symbols: launch mode cannot acquire its job (no \
         MPIR_Breakpoint to stop at); start it, then attach to it by pid"
    )]
    LaunchWithoutSymbols {
        /// The starter.
        pid: u32,
    },
    /// The process is not the job's starter, but `starter` is (e.g. Slurm's `srun` forks a
    /// shepherd child with the same command line, which has no table of the job).
    #[error("process {pid} is not the job's starter: {why}; use pid {starter}")]
    NotTheStarter {
        /// The process named.
        pid: u32,
        /// The starter to name instead.
        starter: u32,
        /// Why.
        why: &'static str,
    },
    /// A Slurm job named by id could not be turned into its `srun` here.
    #[error(transparent)]
    Slurm(#[from] crate::slurm::SlurmError),
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
    #[error("{context}")]
    Target {
        /// What we were doing.
        context: String,
        /// The failure.
        #[source]
        source: TargetError,
    },
    /// The MPI2DD side of a job could not be read from a process (the entry process of a
    /// traversal, or a held process at an event).
    #[error("MPI2DD (pid {pid}): cannot read the job")]
    Mpi2dd {
        /// The process.
        pid: u32,
        /// Why.
        #[source]
        source: TraverseError,
    },
    /// The MPI2DD interface of one process could not be used (its `MPI2DD_breakpoint`
    /// looked up, its `MPI2DD_info` read at an event, its `debugger_flags` written).
    #[error("MPI2DD (pid {pid}): cannot use the process's MPI2DD interface")]
    Mpi2ddProcess {
        /// The process.
        pid: u32,
        /// Why.
        #[source]
        source: mpi2dd::Error,
    },
    /// A PMIx launcher's process table cannot be a job's table (a rank listed twice, more
    /// ranks than the read bounds allow).
    #[error("the PMIx process table is refused: {0}")]
    PmixTable(String),
    /// The PMIx tool interface failed (finding the launcher's server, loading libpmix,
    /// connecting, querying, releasing).
    #[error("PMIx (launcher pid {pid}): cannot {context}")]
    Pmix {
        /// The launcher.
        pid: u32,
        /// What we were doing.
        context: String,
        /// Why.
        #[source]
        source: PmixCause,
    },
    /// The caller used the session in an order it does not allow.
    #[error("{0}")]
    Usage(String),
}

/// A [`mpir_pmix::PmixError`], shared so that [`AcquireError`] stays `Clone` and comparable
/// (two causes are equal when they say the same).
#[derive(Debug, Clone)]
pub struct PmixCause(std::sync::Arc<mpir_pmix::PmixError>);

impl PmixCause {
    /// The cause `error`.
    pub fn new(error: mpir_pmix::PmixError) -> Self {
        PmixCause(std::sync::Arc::new(error))
    }

    /// The PMIx error.
    pub fn error(&self) -> &mpir_pmix::PmixError {
        &self.0
    }
}

impl std::fmt::Display for PmixCause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for PmixCause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for PmixCause {
    fn eq(&self, other: &Self) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0) || self.0.to_string() == other.0.to_string()
    }
}

impl Eq for PmixCause {}

impl AcquireError {
    pub(crate) fn target(context: impl Into<String>) -> impl FnOnce(TargetError) -> Self {
        let context = context.into();
        move |source| AcquireError::Target { context, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpi2dd::connect::{ConnectError, ProcessKey};
    use mpir_target::Fault;
    use mpir_target::testkit::assert_sources_printed_once;
    use std::error::Error as _;

    fn gone() -> TargetError {
        TargetError::Control {
            pid: 4242,
            operation: "PTRACE_SEIZE".into(),
            reason: "ESRCH: No such process".into(),
            cause: mpir_target::ControlCause::Gone,
        }
    }

    fn representative() -> Vec<AcquireError> {
        vec![
            AcquireError::target("attach the ranks")(gone()),
            AcquireError::target("read the table")(TargetError::Unreadable {
                address: 0x1000,
                len: 8,
                fault: Fault::Unmapped,
            }),
            AcquireError::Mpi2dd {
                pid: 7,
                source: TraverseError::Connect(ConnectError::Open {
                    host: "node0".into(),
                    pid: 7,
                    source: gone(),
                }),
            },
            AcquireError::Mpi2dd {
                pid: 7,
                source: TraverseError::Read {
                    process: ProcessKey::new("node0", 7),
                    error: mpi2dd::Error::Target(gone()),
                },
            },
            AcquireError::Mpi2ddProcess {
                pid: 8,
                source: mpi2dd::Error::Target(gone()),
            },
            AcquireError::Usage("no process with pid 3".into()),
            AcquireError::Discovery {
                pid: 9,
                source: mpir_types::mpir::discover::DiscoverError::NoDescendants,
            },
            AcquireError::LaunchWithoutSymbols { pid: 10 },
            AcquireError::Pmix {
                pid: 11,
                context: "load libpmix".into(),
                source: PmixCause::new(mpir_pmix::PmixError::NoLibrary {
                    tried: vec!["libpmix.so.2".into()],
                }),
            },
        ]
    }

    #[test]
    fn no_error_prints_its_source_twice() {
        for e in representative() {
            assert_sources_printed_once(&e);
        }
        // And the chain still carries every fact: the deepest cause is reachable.
        let e = &representative()[2];
        let mut last: &(dyn std::error::Error + 'static) = e;
        while let Some(s) = last.source() {
            last = s;
        }
        assert!(last.to_string().contains("ESRCH"), "{last}");
    }

    #[test]
    fn the_check_catches_an_error_that_prints_its_source() {
        #[derive(Debug, thiserror::Error)]
        #[error("outer: {0}")]
        struct Twice(#[source] TargetError);
        let bad = Twice(gone());
        let caught = std::panic::catch_unwind(|| assert_sources_printed_once(&bad));
        assert!(caught.is_err());
        assert!(bad.source().is_some());
    }
}
