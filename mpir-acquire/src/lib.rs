//! # mpir-acquire (not yet implemented)
//!
//! This crate will hold MPIR process acquisition (`../shared/spec/mpir-process-acquisition-1.1.txt`
//! chapters 6–9, `mpich-attach.txt`):
//!
//! - a sans-IO state machine for the protocol: it consumes events (breakpoint hit on
//!   `MPIR_Breakpoint`, process stopped or exited, value read) and emits actions (read this, write
//!   that, attach, continue), so that every edge case is a fast test on `mpir_target::MockTarget`;
//! - drivers that run it over live processes for **launch** mode (a starter command run under
//!   control) and **attach** mode (a running starter's pid);
//! - the extensions: partial attach, `MPIR_debug_gate` release, tool daemon launch
//!   (`MPIR_executable_path`, `MPIR_server_arguments`) and the attach FIFO;
//! - a catalogue of launcher quirks (Open MPI's library-resident symbols, hydra's presence-only
//!   flags) used to explain and adapt, never to fake results.
//!
//! Until then, `mpir_target::proctable::read_proctable` reads a filled table synchronously.
