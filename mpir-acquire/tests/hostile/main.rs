//! The hostile-target suite: one test per hostile condition, each held to the same promise —
//! a typed error (or a per-entry problem) naming the address or symbol concerned, within a
//! time bound, within a memory bound, without a panic, the test process surviving
//! ([`harness`]). HARDENING.md lists every case with the error it expects.
//!
//! - [`proctable`]: `MPIR_proctable` decoding and resolution (MockTarget, four data models).
//! - [`protocol`]: the acquisition state machine against a hostile starter (MockTarget).
//! - [`mpi2dd`]: MPI2DD structures and traversal (MockTarget processes).
//! - [`elf`]: ELF files and DWARF a tool is given.
//! - [`live`]: live processes (a C fixture laying out hostile tables in real memory,
//!   including `PROT_NONE` pages; zombies; a process that exits while it is read).
//!
//! Message-queue DLLs that crash, hang or return garbage are exercised by mpir-mqd's own
//! tests (`mpir-mqd/tests/out_of_process.rs`, `walker_dll.rs`); see HARDENING.md.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

#[path = "../support/mod.rs"]
mod support;

mod elf;
mod harness;
mod live;
mod mpi2dd;
mod proctable;
mod protocol;
