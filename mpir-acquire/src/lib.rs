//! # mpir-acquire
//!
//! MPIR process acquisition (*The MPIR Process Acquisition Interface*, version 1.1, chapters 6–9,
//! and *TV Process Acquisition with MPICH*; cited in the repository's [spec list]): given a starter
//! command or a running starter's pid, every rank of the job (rank, host, executable, pid), and, if
//! asked, the ranks held under control.
//!
//! [spec list]: https://github.com/mpir-rs/mpir-rs/blob/main/docs/spec/README.md
//!
//! - [`protocol`]: the protocol as a sans-IO state machine ([`Acquisition`]): events in
//!   (stopped after exec, attached, breakpoint hit, starter gone, timeout, ranks attached),
//!   actions out (plant a breakpoint, return from `MPIR_Breakpoint`, continue, attach ranks,
//!   write the attach FIFO). It reads and writes the starter's variables through any
//!   [`mpir_target::Target`], so every edge case is a fast test on a `MockTarget`.
//! - [`live`]: the driver over live processes — [`live::launch`] (launch mode) and
//!   [`live::attach`] (attach mode) — with the release protocol (gate, detach).
//!   A starter without MPIR symbols (a stripped `mpiexec.hydra` such as the PyPI MPICH 5
//!   wheel's) is acquired in attach mode through a table found by a validated search of its
//!   memory ([`live::discover`], [`mpir_types::mpir::discover`]): one candidate or a typed
//!   refusal, the evidence in [`Job::discovered`], and never a write into that starter.
//! - [`identity`]: ranks live on nodes. Only ranks whose host is this node
//!   ([`mpir_types::node::ThisNode`]: its names, `/etc/hosts` aliases, interface addresses, or
//!   [`AcquireOptions::with_alias`]) are ever touched, each only once proven from `/proc` to be the
//!   table's rank (same user as the starter, started after it, running the reported program);
//!   every other rank is [`RankControl::Remote`] or [`RankControl::Refused`] with a
//!   [`Refusal`]. Attach mode reads a running job without attaching its ranks unless asked to
//!   hold them.
//! - [`Note`]: what acquisition tells besides the job (quirks met, fallbacks taken, per-rank
//!   trouble while releasing), one typed variant per kind of fact, with its text.
//! - [`quirks`]: what Open MPI's `orterun`, MPICH's hydra and Slurm's `srun` do that the spec
//!   does not say, used to explain and adapt, never to fake a result (`srun`'s
//!   `MPIR_Breakpoint` wakes its tasks itself: they are taken while `srun` sits there).
//! - [`daemon`]: the tool daemon launch extension's encodings.
//! - [`interface`]: which interfaces a process exports; [`live::attach_any`] acquires a job
//!   through MPIR, MPI2DD (with the [`mpi2dd`] crate's traversal), or both, cross-checked.
//!   [`InterfaceChoice`] ([`AcquireOptions::with_interface`]) forces one.
//! - [`pmix`] and [`live::pmix`]: a launcher without MPIR (Open MPI 5's `prterun`) through the
//!   PMIx tool interface ([`mpir_pmix`]): its `PMIX_QUERY_PROC_TABLE` read by MPIR's own table
//!   decoder into the same [`Job`] ([`Job::pmix`] says so), attach by its rendezvous file, launch
//!   with the ranks held in `PMIx_Init`, release by `PMIX_DEBUGGER_RELEASE`, the job's end;
//!   [`live::attach`], [`live::launch`] and [`live::attach_any`] choose it by themselves.
//! - [`slurm`]: Slurm jobs named by id (`J[.S]`); [`live::find_srun`] finds the `srun` of a
//!   step on this node (Slurm's `srun` is a catalogued launcher: [`quirks::Launcher::Slurm`]).
//! - [`mpi2dd_watch`]: MPI2DD events (START, SPAWN, CONNECT, ACCEPT, JOIN, directory changes,
//!   ABORT) as a sans-IO state machine; [`live::Watcher`] runs it over live processes.
//!
//! ```no_run
//! use std::process::Command;
//! use mpir_acquire::{AcquireOptions, live};
//!
//! let mut cmd = Command::new("orterun");
//! cmd.args(["-n", "4", "./app"]);
//! let acquired = live::launch(cmd, AcquireOptions::default())?;
//! for rank in acquired.job().ranks() {
//!     println!("{} {:?} {:?} {}", rank.rank, rank.host, rank.executable, rank.pid);
//! }
//! # Ok::<(), mpir_acquire::AcquireError>(())
//! ```

#![forbid(unsafe_code)]
// CONVENTIONS.md: public types are `#[non_exhaustive]` unless complete by nature, and an
// exemption says why.
#![warn(clippy::exhaustive_enums, clippy::exhaustive_structs)]

pub mod container;
pub mod daemon;
mod error;
pub mod identity;
pub mod interface;
mod job;
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
pub mod live;
pub mod mpi2dd_watch;
mod note;
mod options;
pub mod pmix;
pub mod protocol;
pub mod quirks;
pub mod slurm;
#[cfg(feature = "testkit")]
pub mod testkit;

pub use container::Contained;
pub use error::{AcquireError, PmixCause};
pub use identity::{Proven, Refusal};
pub use interface::{Interface, InterfaceChoice};
pub use job::{Job, LAUNCHER_JOB_ID, LAUNCHER_STEP_ID, Node, RankControl, Starter};
pub use note::Note;
pub use options::{AcquireOptions, GateRelease, RankSelection, ToolDaemon};
pub use protocol::{Acquisition, Action, AttachOutcome, Event, Mode};

// The README's example is a doctest, so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
