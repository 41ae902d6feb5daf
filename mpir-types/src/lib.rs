//! # mpir-types
//!
//! The data model and decoders shared by the mpir-rs crates, with no I/O: everything here works
//! on byte buffers that some target backend (a live process, a core file, a mock) has read.
//!
//! Layers, bottom up:
//!
//! 1. [`DataModel`]: the target's byte order and C type sizes, with presets for LP64, ILP32,
//!    LLP64 and big-endian LP64/ILP32. Addresses are `u64` everywhere.
//! 2. [`View`] / [`ViewMut`]: bounds-checked typed access to target bytes — integers of the
//!    target's widths, pointers, bounded C strings, `char[N]` arrays. Errors name the target
//!    address and what was being decoded ([`DecodeError`]); nothing panics on bad input.
//! 3. [`TypeLayout`]: a struct as debug information describes it (size, member offsets), and
//!    [`CStructBuilder`] for the ABI layout when there is none.
//! 4. Interface models: [`mpir`] (symbols, `MPIR_debug_state`, presence flags, the process
//!    descriptor table, and [`mpir::discover`]: the validated search for the table of a
//!    starter without symbols) and [`mqd`] (message-queue communicators and operations, raw and
//!    normalised).
//! 5. [`deadlock`]: the wait-for analysis over every rank's queues (cycles, knots of
//!    `MPI_ANY_SOURCE` waits, blocked ranks), with text, JSON and Graphviz output.
//! 6. [`stacks`]: every rank's stack traces merged into a call-prefix tree with rank sets on
//!    its nodes (as STAT does), with equivalence classes, sample diffs, and text, JSON,
//!    Graphviz and folded-stack output.
//!
//! With the `serde` feature every public model type is `Serialize`/`Deserialize`.
//!
//! ## Example: decode a big-endian 32-bit proctable
//!
//! ```
//! use mpir_types::{DataModel, mpir};
//!
//! let model = DataModel::ILP32_BE;
//! let layout = mpir::ProcDescLayout::abi(&model); // 12 bytes: two pointers and an int
//! let bytes = [
//!     0x00, 0x00, 0x10, 0x00, // host_name       -> 0x1000
//!     0x00, 0x00, 0x20, 0x00, // executable_name -> 0x2000
//!     0x00, 0x00, 0x30, 0x39, // pid             =  12345
//! ];
//! let entries = mpir::decode_proctable(&model, &layout, 0x8000, &bytes, 1)?;
//! assert_eq!(entries[0].pid, 12345);
//! assert_eq!(mpir::string_addresses(&entries), [0x1000, 0x2000]);
//!
//! // Asking for more entries than were read is an error naming the address, not a panic.
//! let err = mpir::decode_proctable(&model, &layout, 0x8000, &bytes, 2).unwrap_err();
//! assert!(err.to_string().contains("0x800c"));
//! # Ok::<(), mpir_types::DecodeError>(())
//! ```
#![cfg_attr(not(test), deny(clippy::indexing_slicing))]
#![deny(missing_docs)]
#![forbid(unsafe_code)]
// CONVENTIONS.md: public types are `#[non_exhaustive]` unless complete by nature, and an
// exemption says why.
#![warn(clippy::exhaustive_enums, clippy::exhaustive_structs)]

pub mod access;
pub mod deadlock;
mod error;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod layout;
mod model;
pub mod mpir;
pub mod mqd;
pub mod node;
pub mod ranks;
pub mod stacks;
pub mod unread;
mod view;
pub mod waits;

pub use error::{DecodeError, Result};
pub use layout::{CStructBuilder, FieldLayout, LayoutSource, MemberKind, MemberLayout, TypeLayout};
pub use model::{ByteOrder, DataModel, TypeSizes};
pub use view::{View, ViewMut};

// The README's example is a doctest, so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
