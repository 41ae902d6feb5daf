//! # mpi2dd
//!
//! The first implementation of the MPI-2 debugger interface draft (*An Interface Between a Debugger
//! and an MPI Implementation*, R. Faught, 2007; cited in the repository's [spec list]): how a
//! debugger finds every process of a dynamic MPI job (spawn, connect/accept, join) through
//! directories and metadirectories.
//!
//! [spec list]: https://github.com/mpir-rs/mpir-rs/blob/main/docs/spec/README.md
//!
//! Layers, bottom up:
//!
//! 1. [`abi`]: `MPI2DD_INFO`, `MPI2DD_PROCDESC`, `MPI2DD_SPAWNDESC` and
//!    `MPI2DD_DIRECTORYENTRY` as `repr(C)` structs of endian-typed fields, one per address
//!    width, for any [`DataModel`](mpir_types::DataModel) — no DWARF needed;
//!    [`flags`]: `debug_state` and the two flag words as types.
//! 2. [`decode`]: endian- and width-generic decoders (and encoders, for test targets) of the
//!    four structs; magic, version and variant are checked, table sizes bounded.
//! 3. [`read`]: one process's consistent [`Snapshot`](read::Snapshot) from any
//!    [`Memory`](mpir_target::Memory) + [`SymbolLookup`](mpir_target::SymbolLookup): the
//!    tables, spawn descriptors and strings, with bad entries listed rather than fatal.
//! 4. [`traverse`]: from any process to the whole [`Job`](job::Job) through a caller-supplied
//!    [`Connector`](connect::Connector) ([`LocalConnector`](connect::LocalConnector) for this
//!    machine, [`MapConnector`](connect::MapConnector) for mocks): directories,
//!    metadirectories, worlds, the spawn tree; bounded, cycle-safe, a partial result listing
//!    what could not be reached.
//! 5. [`events`]: what a stop in `MPI2DD_breakpoint` means and how the debugger writes its
//!    flags — the sans-IO half that an acquisition driver wires to a tracer.
//!
//! `mock` (feature `mock`) lays out MPI2DD processes in an `mpir_target` `MockTarget`.
//! The crate also ships the **reference provider** in C, `provider/mpi2dd.h` and
//! `provider/mpi2dd_provider.c`: the way an MPI runtime exports `MPI2DD_info` and
//! `MPI2DD_breakpoint` and maintains the tables (see the header); `testkit` (feature `testkit`) hands its sources
//! (and a demo job built on it) to test suites.
//!
//! With the `serde` feature the model types are `Serialize`/`Deserialize`.
//!
//! ## Example: a job across two mock processes
//!
//! ```
//! use mpi2dd::connect::MapConnector;
//! use mpi2dd::mock::{MockDir, MockProcess, MockRank};
//! use mpi2dd::traverse::{TraverseOptions, traverse};
//! use mpir_target::MockTarget;
//! use mpir_types::DataModel;
//!
//! let model = DataModel::LP64_BE;
//! let mut meta = MockProcess::metadirectory("node0", 10);
//! meta.directories.push(MockDir::new("node1", "/mpi/bin/dir", 11));
//! let mut dir = MockProcess::directory("node0", 10);
//! dir.proctable.push(MockRank::new("node2", "/bin/app", "w0", 100, 0));
//! dir.proctable.push(MockRank::new("node2", "/bin/kid", "w1", 101, 0).spawned("w0", 0, 0));
//!
//! let mut c = MapConnector::new();
//! for (host, pid, p) in [("node0", 10, &meta), ("node1", 11, &dir)] {
//!     let mut b = MockTarget::builder(model);
//!     p.place(&mut b);
//!     c.insert(host, pid, b.build());
//! }
//! // Start from the directory: it names the metadirectory, which lists the directory.
//! let job = traverse(&c, "node1", 11, &TraverseOptions::default())?.job;
//! assert_eq!(job.worlds.len(), 2);
//! assert_eq!(&*job.spawns[0].child_world, "w1");
//! assert!(job.unreachable.is_empty() && job.problems.is_empty());
//! # Ok::<(), mpi2dd::traverse::TraverseError>(())
//! ```
#![deny(missing_docs)]
#![forbid(unsafe_code)]
// CONVENTIONS.md: public types are `#[non_exhaustive]` unless complete by nature, and an
// exemption says why.
#![warn(clippy::exhaustive_enums, clippy::exhaustive_structs)]

pub mod abi;
pub mod connect;
pub mod decode;
mod error;
pub mod events;
pub mod flags;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub mod job;
#[cfg(any(test, feature = "mock"))]
pub mod mock;
pub mod read;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
pub mod traverse;

pub use error::{Error, Result};

// The README's example is a doctest, so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
