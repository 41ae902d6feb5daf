//! # mpir-session
//!
//! One entry point for a tool that reads MPI jobs: a [`Session`] made from a source — a
//! running starter ([`Session::attach`]; a Slurm step's `srun` by job id:
//! [`Session::attach_slurm`]), a starter command ([`Session::launch`]), processes
//! named by pid ([`Session::pids`]) or core files ([`Session::cores`]) — gives the job
//! ([`Session::job`]), holds the selected ranks stopped only while they are read
//! ([`Session::hold`], [`Session::with_held`]) and lets them run again, reads every rank's
//! message queues with the engine that fits ([`Session::queues`]), confirms deadlocks over
//! several samples ([`Session::deadlock`]), and reads every rank's stacks merged like STAT
//! ([`Session::stacks`], and [`Session::sample_stacks`] for profilers), and writes a core file
//! of one live rank, stopping only that rank ([`Session::write_core`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use mpir_session::{Session, SessionOptions};
//!
//! mpir_session::install_cleanup()?; // once, in main: let go of every rank on signals and panics
//! let options = SessionOptions::default().with_ranks("0-3".parse()?);
//! let mut session = Session::attach(4242, options)?; // reads the job, touches no rank
//! let job = session.job().expect("a starter's session has a job");
//! println!("{} ranks on {} nodes", job.len(), job.nodes().len());
//!
//! let held = session.hold()?; // ranks 0-3 stopped, each proven to be the table's rank
//! for rank in held.ranks() {
//!     match rank.target() {
//!         Ok(target) => println!("rank {:?}: {:?}", rank.rank, target.data_model()),
//!         Err(why) => println!("rank {:?} (pid {}) left alone: {why}", rank.rank, rank.pid),
//!     }
//! }
//! assert!(held.release().is_clean()); // running again (dropping `held` does the same)
//!
//! let read = session.queues()?; // held, read, released
//! for rank in &read.ranks {
//!     let comms = rank.queues.as_ref().map(|q| q.communicators.len());
//!     println!("rank {:?}: {comms:?} communicators", rank.rank);
//! }
//! let found = session.deadlock(3, Duration::from_millis(150))?;
//! if let Some(report) = &found.report {
//!     print!("{report}"); // covers the `found.coverage.read` ranks read in every sample
//! }
//! // Every rank's stacks, merged: each process stopped only for its own snapshot.
//! let stacks = session.stacks(&mpir_session::StackOptions::default().with_samples(3))?;
//! print!("{}", stacks.tree().to_text()); // also to_dot(), to_folded(); stacks.unmoved
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Why this shape
//!
//! - **A session owns the source, a guard owns the stop.** What must outlive one read (the
//!   job, the rank numbering, each rank's start time, its parsed images) lives in the
//!   [`Session`]; what must not (ranks stopped) lives in [`Held`], which borrows the session
//!   mutably — one hold at a time — and releases on drop, so an early return or a panic in
//!   the caller lets the ranks run. [`Held::release`] says how the release went
//!   ([`ReleaseReport`]).
//! - **The guarantees of `mpir-acquire` are not re-implemented.** The first hold of a job
//!   attaches through [`mpir_acquire::live::attach`] with the ranks held and the gate left
//!   alone: only this node's ranks, each proven from `/proc` to be the table's rank; every
//!   other rank is a [`HeldRank`] with an [`Unreadable`] reason and is never touched. Later
//!   holds stop the same processes again by pid, each only while its start time is the one
//!   read while it was first held.
//! - **The engine choice is the library's.** [`mpir_mqd::QueueReader`] picks it, as the
//!   [`ReaderOptions`] given with [`SessionOptions::with_reader_options`] say ([`Engine::Auto`]
//!   by default: the native walker when the MPI's types are known, else the MPI's
//!   message-queue DLL in a helper process); the session opens it on the first rank it holds
//!   and keeps it for every sample. A rank's result says what was read or why not
//!   ([`RankError`]).
//! - **Reasons are types.** [`Unreadable`] says why a rank was not read (remote, refused with
//!   the [`mpir_acquire::Refusal`], changed, failed to stop or open) and whether it was
//!   touched; [`SessionError`] is for the session as a whole.
//! - **Cleanup is the tool's one call.** A tracer lets go of its processes when dropped; a
//!   signal, a panic under `panic = "abort"` or `exit` skip destructors, so a tool calls
//!   [`install_cleanup`] once, early in `main` (a library never installs signal handlers
//!   behind its caller's back).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]
#![deny(missing_docs)]
#![forbid(unsafe_code)]

mod channel;
mod coop;
mod deadlock;
mod error;
mod held_stacks;
mod hold;
mod known;
mod nodes;
mod options;
mod python;
mod queues;
mod reads;
mod release;
mod session;
mod stack_reads;
mod stacks;
mod waits;
mod write_core;

pub use channel::AnnouncedJobError;
pub use error::{AgentFailure, ReleaseProblem, SessionError, Unreadable, chain};
pub use hold::{Held, HeldRank};
pub use known::Announced;
pub use mpir_mqd::{Engine, EngineUsed, RankQueues, ReaderOptions};
pub use nodes::{NodeState, OtherNodes};
pub use options::SessionOptions;
pub use reads::{
    Coverage, DeadlockRead, MissingTypes, NotCovered, Progress, QueueRead, RankError, RankRead,
};
pub use release::ReleaseReport;
pub use session::{CoreInfo, Mpi2ddJob, Session, StarterCore};
pub use stack_reads::{
    FoldedStacks, Position, RemoteSample, SamplingSummary, StackOptions, StackProgress,
    StackSample, StacksRead, StopTime,
};
pub use waits::{WaitsReadError, read as read_waits};
pub use write_core::CoreOfRank;

/// Makes the program let go of every process it holds — breakpoints out, threads running,
/// `MPIR_being_debugged` and the gates as the release leaves them — when it is told to stop
/// (`SIGINT`, `SIGTERM`, `SIGHUP`: then the signal takes its course), when any thread panics,
/// and when it `exit`s without running destructors. Call it once, early in a tool's `main`
/// ([`mpir_target::live::tracer::detach_on_signals`], [`detach_on_panic`] and
/// [`detach_at_exit`]).
///
/// [`detach_on_panic`]: mpir_target::live::tracer::detach_on_panic
/// [`detach_at_exit`]: mpir_target::live::tracer::detach_at_exit
///
/// # Errors
/// When the signal handlers or the `atexit` handler cannot be installed.
pub fn install_cleanup() -> Result<(), SessionError> {
    use mpir_target::live::tracer;
    let err = |source| SessionError::Control {
        context: "installing the cleanup handlers".into(),
        source,
    };
    tracer::detach_on_signals().map_err(err)?;
    tracer::detach_on_panic();
    tracer::detach_at_exit().map_err(err)
}

/// Lets go of every process this program holds, now (from any thread; not from a signal
/// handler): what a tool does when its output goes away (a closed pipe) before it exits.
pub fn release_everything() {
    let _ = mpir_target::live::tracer::detach_everything();
}
