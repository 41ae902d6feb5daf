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

/// MPI2DD's `mpi_flags` (set by the MPI in `MPI2DD_INFO`) in the shape of MPIR's presence flags,
/// so that a job read through either interface reports the same five facts: a bit set reads as
/// a present flag with value 1, a bit clear as an absent one. (`I_AM_METADIR`, `I_AM_DIR` have
/// no MPIR counterpart.)
pub fn flags_of_mpi2dd(flags: mpi2dd::flags::MpiFlags) -> mpir_types::mpir::MpirFlags {
    use mpi2dd::flags::MpiFlags;
    use mpir_types::mpir::Flag;
    let flag = |bit: MpiFlags| {
        if flags.contains(bit) {
            Flag::present(Some(1))
        } else {
            Flag::ABSENT
        }
    };
    let mut out = mpir_types::mpir::MpirFlags::default();
    out.i_am_starter = flag(MpiFlags::I_AM_STARTER);
    out.acquired_pre_main = flag(MpiFlags::ACQUIRED_PRE_MAIN);
    out.force_to_main = flag(MpiFlags::FORCE_TO_MAIN);
    out.partial_attach_ok = flag(MpiFlags::PARTIAL_ATTACH_OK);
    out.ignore_queues = flag(MpiFlags::IGNORE_QUEUE);
    out
}

#[cfg(test)]
mod flag_tests {
    use super::*;
    use mpi2dd::flags::MpiFlags;

    #[test]
    fn mpi2dd_flags_read_as_mpir_flags() {
        let f =
            flags_of_mpi2dd(MpiFlags::I_AM_STARTER | MpiFlags::IGNORE_QUEUE | MpiFlags::I_AM_DIR);
        assert!(f.i_am_starter.present && f.i_am_starter.value == Some(1));
        assert!(f.ignore_queues.present);
        assert!(!f.partial_attach_ok.present && !f.force_to_main.present);
        assert!(!f.acquired_pre_main.present);
        let all = flags_of_mpi2dd(MpiFlags::KNOWN);
        assert!(all.partial_attach_ok.present && all.force_to_main.present);
        assert!(all.acquired_pre_main.present);
        assert_eq!(flags_of_mpi2dd(MpiFlags::EMPTY), Default::default());
    }
}
