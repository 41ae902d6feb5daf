//! Why a queue reader cannot see where a rank keeps its pending operations
//! ([`super::MqdError::Blind`]).

use mpir_target::TargetError;
use thiserror::Error;

/// Why a reader (a native walker or the MPI's message-queue DLL) was refused for a rank: the
/// rank keeps its pending operations somewhere the reader does not read, or the rank does not
/// show where it keeps them. Decided from the rank's own symbols and memory
/// (see [`crate::QueueReader::read`]).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum BlindReason {
    /// Open MPI: the selected PML (the module `mca_pml_base_select` copied into `mca_pml`) is
    /// not ob1: `mca_pml`'s first function pointers are not those of ob1's module
    /// `mca_pml_ob1`. ob1's request lists and matching structures exist but stay empty.
    #[error(
        "its selected PML is not ob1 (mca_pml holds another module's functions than ob1's \
         mca_pml_ob1)"
    )]
    NotOb1,
    /// Open MPI: ob1's module `mca_pml_ob1` is not in the process, so ob1 is not its PML
    /// (Open MPI unloads the PML components it does not select).
    #[error(
        "its selected PML is not ob1 (ob1's module mca_pml_ob1 is not loaded; Open MPI unloads \
         the PMLs it does not select)"
    )]
    Ob1NotLoaded,
    /// Open MPI: `mca_pml` holds no selected module yet (its `pml_add_procs` is NULL: the
    /// rank has not got through `MPI_Init`'s PML selection).
    #[error(
        "no PML is selected yet (mca_pml's pml_add_procs is NULL: MPI_Init has not chosen one)"
    )]
    NoPmlSelected,
    /// MPICH: the device the library was built for (`MPII_Version_device`) keeps its pending
    /// operations where this reader does not read them, or is one this tool knows nothing of.
    #[error("its MPICH device is {device} ({why})")]
    Device {
        /// The device string the process carries (`ch4:ucx`, ...).
        device: String,
        /// Why that device's operations are not where the reader reads.
        why: &'static str,
    },
    /// The symbol that says where the rank keeps its operations is absent.
    #[error("which {what} it uses cannot be told: the process has no symbol {symbol}")]
    NoSymbol {
        /// The symbol.
        symbol: String,
        /// What it tells (`PML`, `device`).
        what: &'static str,
    },
    /// Looking up that symbol failed.
    #[error("which {what} it uses cannot be told: looking up {symbol} failed ({error})")]
    Lookup {
        /// The symbol.
        symbol: String,
        /// What it tells.
        what: &'static str,
        /// The backend's error.
        error: TargetError,
    },
    /// The symbol is too small to be what it should be (a PML module starts with at least
    /// three function pointers).
    #[error("which PML it uses cannot be told: {symbol} is only {size} bytes, not a PML module")]
    TooSmall {
        /// The symbol.
        symbol: String,
        /// Its size in the symbol table.
        size: u64,
    },
    /// Reading that symbol's memory failed.
    #[error(
        "which {what} it uses cannot be told: reading {symbol} at {address:#x} failed ({error})"
    )]
    Unreadable {
        /// The symbol.
        symbol: String,
        /// What it tells.
        what: &'static str,
        /// Where it was read.
        address: u64,
        /// The backend's error.
        error: TargetError,
    },
}
