//! # mpi2dd (not yet implemented)
//!
//! This crate will be the first implementation of the MPI-2 debugger interface draft
//! (`../shared/spec/mpi2dd-draft.txt`):
//!
//! - endian- and width-generic decoders for `MPI2DD_INFO` (magic, version, variant checked),
//!   the packed `MPI2DD_PROCDESC`, `MPI2DD_SPAWNDESC` and `MPI2DD_DIRECTORYENTRY`;
//! - traversal from any process to the metadirectory, across directories and their proctables,
//!   grouped by `comm_world_id`, with the spawn tree; bounded and cycle-safe;
//! - `MPI2DD_breakpoint` events wired into the acquisition state machine of `mpir-acquire`;
//! - a reference provider library with a C ABI, the way an MPI runtime would export the
//!   interface.
