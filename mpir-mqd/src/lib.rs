//! # mpir-mqd (not yet implemented)
//!
//! This crate will hold message-queue access (`../shared/spec/message-queue-dumping.txt`,
//! `mpich-debugger-queues.md`):
//!
//! - a host for vendor MQD DLLs (`libompi_dbg_msgq.so`, `libtvmpich.so`): Rust bindings written
//!   from `mpi_interface.h`, the callback tables implemented over any `mpir_target` target, and
//!   two hosting modes behind one API (in-process; out-of-process through a helper executable,
//!   so that a crashing or looping DLL becomes an error);
//! - native walkers for MPICH and Open MPI queues that read the MPI's own structures from debug
//!   information or a types sidecar, on live processes and core files;
//! - deadlock analysis: a wait-for graph across ranks, cycle detection, JSON and DOT reports.
//!
//! Results use the model of `mpir_types::mqd`.
