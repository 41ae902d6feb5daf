//! # mpir-mqd
//!
//! Message-queue dumping (*MPI Message Queue Dumping*, J. Cownie, version 1.06; cited in the
//! repository's [spec list]): hosting the vendor "MQD DLLs" (`libompi_dbg_msgq.so`, MPICH's
//! `libtvmpich.so`) that a debugger loads to show an MPI process's pending sends, receives and
//! unexpected messages.
//!
//! [spec list]: https://github.com/mpir-rs/mpir-rs/blob/main/docs/spec/README.md
//!
//! Layers, bottom up:
//!
//! 1. `ffi` (private): `#[repr(C)]` bindings written from `mpi_interface.h`, loading with
//!    `libloading` (versions checked first, then exports), the static callback tables, and
//!    every callback (`ffi::callbacks`). The only module (tree) with `unsafe`.
//! 2. `state` (private): the host's registry of images, processes and types. The DLL holds
//!    only *tokens* for them, looked up in the registry of the host that is calling it on this
//!    thread, so a callback can never reach a freed object.
//! 3. [`Host`]: attach processes (any [`mpir_target::Target`]: live, core file, mock) and
//!    iterate communicators and their three queues, as [`mpir_types::mqd`] operations,
//!    normalised.
//!
//! 4. [`OutOfProcessHost`]: the same, with the DLL in a helper process (`mpir-mqd-host`, this
//!    crate's binary) that asks us over a pipe for every read and lookup; a DLL that crashes,
//!    hangs or loops is a typed error. Both implement [`QueueHost`]; [`open_out_of_process`] (safe) and
//!    [`open_in_process`] (`unsafe`: the DLL runs in this process) open either as one.
//!
//! 5. [`QueueReader`]: what a tool uses. It picks the engine for a job (a native walker of
//!    [`native`] when the MPI's types are known, the MPI's DLL otherwise, or what the caller
//!    forces, with the reason of a fallback) and reads rank after rank into the one result
//!    model, [`model`] ([`RankQueues`]). Safe: the DLL runs out of process unless the caller
//!    vouches for it.
//!
//! The MPI-2 extensions are hosted where a DLL provides them (interface version 3): the job
//! object, process identities (each process's global rank) and the new-process calls
//! ([`Host::new_processes`], [`Host::spawn_breakpoint_name`]).
//!
//! ## Example
//!
//! ```no_run
//! use std::rc::Rc;
//! use mpir_mqd::{Host, HostOptions, ProcessSpec};
//! use mpir_target::live::LiveTarget;
//!
//! let target = LiveTarget::open(4242, Default::default())?;
//! // SAFETY: the vendor's MQD DLL for this machine's ABI.
//! let mut host = unsafe {
//!     Host::load("/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3/libompi_dbg_msgq.so",
//!                HostOptions::default())?
//! };
//! let rank = host.attach(ProcessSpec::new("/path/to/app", Rc::new(target), Some(0)))?;
//! for comm in host.queues(rank)? {
//!     println!("{}: {} receives", comm.communicator.name, comm.receives.operations().len());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(missing_docs)]
#![deny(unsafe_code)]
// CONVENTIONS.md: public types are `#[non_exhaustive]` unless complete by nature, and an
// exemption says why.
#![warn(clippy::exhaustive_enums, clippy::exhaustive_structs)]

mod discover;
mod error;
mod ffi;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod helper;
mod host;
pub mod layouts;
pub mod model;
mod mpi2;
pub mod native;
pub mod output;
mod proof;
mod raw;
mod reader;
mod remote;
mod state;
mod wire;

pub use discover::{DllSource, discover_dll};
pub use error::{BlindReason, CallbackReport, MqdError, Result};
pub use ffi::open_in_process;
pub use helper::helper_main;
pub use host::{
    Host, HostOptions, ProcessId, ProcessSpec, QueueHost, callback_error_text, format_queue_message,
};
pub use model::{CommOrigin, CommunicatorQueues, Queue, RankQueues, ReadNote, snapshot_of};
pub use mpi2::ProcessLocation;
pub use reader::{DllHosting, Engine, EngineUsed, QueueReader, ReadRank, ReaderOptions};
pub use remote::{
    HELPER_ENV, HELPER_NAME, HelperOptions, OutOfProcessHost, find_helper, open_out_of_process,
};

// The README's example is a doctest, so that it stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
