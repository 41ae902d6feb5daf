//! Which debugger interfaces a process exports: MPIR (a starter: `MPIR_Breakpoint`), MPI2DD
//! (a metadirectory, directory or rank: `MPI2DD_info`), or both; or the PMIx tool interface
//! (a launcher such as Open MPI 5's `prterun`, with no MPIR symbol and a tool rendezvous file):
//! [`Interface`], and the caller's choice among them, [`InterfaceChoice`].

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
    /// The PMIx tool interface (Open MPI 5's `prterun`: no MPIR symbol; the job's table is
    /// `PMIX_QUERY_PROC_TABLE` of its namespace).
    Pmix,
}

impl Interface {
    /// The name used on the command line and in documents (`mpir`, `mpi2dd`, `both`, `pmix`).
    pub fn name(self) -> &'static str {
        match self {
            Interface::Mpir => "mpir",
            Interface::Mpi2dd => "mpi2dd",
            Interface::Both => "both",
            Interface::Pmix => "pmix",
        }
    }
}

impl std::fmt::Display for Interface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which interface acquisition uses ([`AcquireOptions::with_interface`]).
///
/// [`AcquireOptions::with_interface`]: crate::AcquireOptions::with_interface
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum InterfaceChoice {
    /// Whatever the process speaks: MPIR and MPI2DD from its symbols ([`detect`]); PMIx when
    /// it defines no MPIR symbol and a valid tool rendezvous file names it.
    #[default]
    Auto,
    /// MPIR only (a symbol-less starter's table is still searched for).
    Mpir,
    /// MPI2DD only.
    Mpi2dd,
    /// The PMIx tool interface only.
    Pmix,
}

impl InterfaceChoice {
    /// Every choice, by its name (`auto`, `mpir`, `mpi2dd`, `pmix`).
    pub const ALL: [InterfaceChoice; 4] = [
        InterfaceChoice::Auto,
        InterfaceChoice::Mpir,
        InterfaceChoice::Mpi2dd,
        InterfaceChoice::Pmix,
    ];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            InterfaceChoice::Auto => "auto",
            InterfaceChoice::Mpir => "mpir",
            InterfaceChoice::Mpi2dd => "mpi2dd",
            InterfaceChoice::Pmix => "pmix",
        }
    }
}

impl std::fmt::Display for InterfaceChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for InterfaceChoice {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        InterfaceChoice::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown interface {s:?} (auto, mpir, mpi2dd or pmix)"))
    }
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

    #[test]
    fn interface_choices_parse_by_name_only() {
        for c in InterfaceChoice::ALL {
            assert_eq!(c.name().parse::<InterfaceChoice>(), Ok(c));
        }
        assert_eq!(
            " PMIx ".parse::<InterfaceChoice>(),
            Ok(InterfaceChoice::Pmix)
        );
        assert!("both".parse::<InterfaceChoice>().is_err());
        assert!("".parse::<InterfaceChoice>().is_err());
        assert_eq!(InterfaceChoice::default(), InterfaceChoice::Auto);
    }
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
