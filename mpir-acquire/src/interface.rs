//! Which debugger interfaces a process exports: MPIR (a starter: `MPIR_Breakpoint`), MPI2DD
//! (a metadirectory, directory or rank: `MPI2DD_info`), or both.

use mpir_target::SymbolLookup;
use mpir_types::mpir::symbols;

use crate::error::AcquireError;

/// The symbol that marks an MPI2DD process.
pub const MPI2DD_INFO: &str = "MPI2DD_info";

/// The interfaces a process exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Interface {
    /// MPIR process acquisition only.
    Mpir,
    /// The MPI-2 debugger interface only.
    Mpi2dd,
    /// Both: the job is acquired through MPIR and cross-checked against MPI2DD.
    Both,
}

/// What `target` exports, or `None` for neither.
pub fn detect<S: SymbolLookup + ?Sized>(target: &S) -> Result<Option<Interface>, AcquireError> {
    let has = |name: &str| {
        target
            .symbol(name)
            .map(|s| s.is_some())
            .map_err(AcquireError::target(format!("look up {name}")))
    };
    Ok(match (has(symbols::BREAKPOINT)?, has(MPI2DD_INFO)?) {
        (true, true) => Some(Interface::Both),
        (true, false) => Some(Interface::Mpir),
        (false, true) => Some(Interface::Mpi2dd),
        (false, false) => None,
    })
}
