//! A PMIx tool client for MPI debuggers: how a tool reaches the processes of an Open MPI 5 job,
//! whose launcher (PRRTE's `prterun`, behind `mpirun`) has no MPIR interface.
//!
//! - [`Library`]: libpmix loaded at run time — the launcher's own, a given one, or the
//!   system's — never a build-time dependency; a major version this crate does not speak is
//!   refused with both versions named.
//! - [`rendezvous`]: the launcher's tool rendezvous file, found by pid and validated.
//! - [`Tool`]: the process's one PMIx tool connection (by pid, URI or rendezvous file): the
//!   job's namespaces, its proc table ([`ProcInfo`]), release of ranks held in `PMIx_Init`
//!   (`PMIX_DEBUGGER_RELEASE`), events ([`ToolEvent`]: job end, ready for debug, server lost)
//!   and tool daemons (`PMIx_Spawn` with `PMIX_DEBUGGER_DAEMONS`).
//!
//! Every call is bounded by a timeout (a dead server never hangs the caller), no PMIx callback
//! unwinds into C, and events are queued until read. All `unsafe` code is in the private `ffi`
//! module: a hand-written subset of PMIx's C types whose layouts a test checks against the real
//! headers.
//!
//! ```no_run
//! use mpir_pmix::{Library, LoadOptions, Server, Tool};
//! use std::time::Duration;
//!
//! # fn main() -> Result<(), mpir_pmix::PmixError> {
//! let launcher = 4242; // the pid of `mpirun` (prterun)
//! let lib = Library::load(&LoadOptions::default().with_launcher_pid(launcher))?;
//! let tool = Tool::connect(&lib, &Server::Pid(launcher), Duration::from_secs(10))?;
//! for ns in tool.namespaces()? {
//!     for p in tool.proc_table(&ns).unwrap_or_default() {
//!         println!("{ns} rank {} pid {} on {}: {}", p.rank, p.pid, p.host, p.executable);
//!     }
//! }
//! # Ok(())
//! # }
//! ```
#![deny(unsafe_code)]

mod error;
#[allow(unsafe_code)]
mod ffi;
mod load;
mod rendezvous;
mod tool;
mod turn;

pub use error::{PmixError, RendezvousProblem};
pub use load::{Library, LoadOptions, SUPPORTED};
pub use rendezvous::{Rendezvous, rendezvous, validate_file};
pub use tool::{ProcInfo, Server, Tool, ToolEvent};
pub use turn::GAP as TURN_GAP;
