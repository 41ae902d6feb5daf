//! # mpir-target
//!
//! Target access for MPI debugger interfaces: the small set of traits every backend implements
//! — [`Memory`], [`SymbolLookup`], [`TypeLookup`], together [`Target`] — typed reads on top of
//! them ([`MemoryExt`]), a synchronous reader of the MPIR process descriptor table
//! ([`proctable`]), and `MockTarget`, a scriptable target for tests (module `mock`, behind the
//! feature `mock`; helpers for suites that run real processes are `testkit`, feature `testkit`).
//!
//! [`debuginfo`] finds symbols and DWARF type layouts in real binaries: the images of a live
//! process (`/proc/PID/maps`, load biases), `.symtab`/`.dynsym`, separate debug files (build-id
//! directories, `.gnu_debuglink`, dwz, and — when `DEBUGINFOD_URLS` names servers or
//! [`debuginfo::DebuginfodOptions`] enables them — debuginfod servers, by build-id, verified and
//! cached as elfutils caches them; feature `debuginfod`, on by default) and types sidecars;
//! [`debuginfo::ProcessImages`] implements [`SymbolLookup`] and [`TypeLookup`].
//!
//! Memory backends for live processes (ptrace) and core files come with a later issue; they
//! implement the same traits, so everything written against a `MockTarget` runs unchanged on
//! them.
//!
//! ## Example: read a big-endian 32-bit starter's table
//!
//! ```
//! use mpir_target::mock::{MockStarter, MockTarget};
//! use mpir_target::proctable::{read_proctable, ReadOptions};
//! use mpir_types::DataModel;
//!
//! let mut b = MockTarget::builder(DataModel::ILP32_BE);
//! MockStarter::uniform(4, 2, "/opt/app/bin/solver", 1000).place(&mut b);
//! let target = b.build();
//!
//! let table = read_proctable(&target, &ReadOptions::default())?;
//! let ranks: Vec<_> = table.resolved.ranks().collect();
//! assert_eq!(ranks.len(), 4);
//! assert_eq!(ranks[3].host, Some("node01"));
//! assert_eq!(ranks[3].pid, 1003);
//! assert_eq!(table.layout.size, 12); // ILP32: two 4-byte pointers and an int
//! assert!(target.writes().is_empty()); // reading never writes
//! # Ok::<(), mpir_target::TargetError>(())
//! ```
#![deny(missing_docs)]
// Only the ptrace FFI and the launch (pre-exec) modules may opt out, block by block.
#![deny(unsafe_code)]
// CONVENTIONS.md: public types are `#[non_exhaustive]` unless complete by nature, and an
// exemption says why.
#![warn(clippy::exhaustive_enums, clippy::exhaustive_structs)]

pub mod corefile;
pub mod debuginfo;
mod error;
mod ext;
mod files;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod image_target;
pub mod live;
#[cfg(any(test, feature = "mock"))]
pub mod mock;
pub mod proctable;
pub mod python;
mod strings;
#[cfg(any(test, feature = "testkit"))]
pub mod testkit;
mod traits;
pub mod unwind;

pub use error::{ControlCause, Fault, Result, TargetError};
pub use ext::{MAX_READ, MemoryExt, SymbolLookupExt};
pub use image_target::ImageTarget;
#[cfg(any(test, feature = "mock"))]
pub use mock::MockTarget;
pub use strings::StringBatch;
pub use traits::{
    Binding, Memory, Symbol, SymbolKind, SymbolLookup, Target, TypeLookup, TypeQuery,
};

// The README's example is a doctest, so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
