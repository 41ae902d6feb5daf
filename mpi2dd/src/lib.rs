//! # mpi2dd
//!
//! The first implementation of the MPI-2 debugger interface draft
//! (`../shared/spec/mpi2dd-draft.txt`).
#![deny(missing_docs)]

pub mod abi;
pub mod connect;
pub mod decode;
mod error;
pub mod events;
pub mod flags;
pub mod job;
pub mod mock;
pub mod read;
pub mod traverse;

pub use error::{Error, Result};
