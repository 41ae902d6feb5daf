//! `MPI2DD_INFO.debug_state` (why the breakpoint was hit) and the two flag words:
//! `debugger_flags` (written by the debugger) and `mpi_flags` (written by MPI).

/// `MPI2DD_INFO.debug_state`: why `MPI2DD_breakpoint` was called. Written by MPI before the
/// call, never by the debugger.
///
/// Values the draft does not define are kept as [`DebugState::Unknown`], not rejected: a tool
/// reports them and continues the process. 0 is what a provider holds before its first event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "every byte has a variant: the draft's eight codes and Unknown(n)"
)]
pub enum DebugState {
    /// `MPI2DD_DEBUG_START` (1).
    Start,
    /// `MPI2DD_DEBUG_SPAWN` (2): a new `MPI_COMM_WORLD` was spawned.
    Spawn,
    /// `MPI2DD_DEBUG_CONNECT` (3).
    Connect,
    /// `MPI2DD_DEBUG_ACCEPT` (4).
    Accept,
    /// `MPI2DD_DEBUG_JOIN` (5).
    Join,
    /// `MPI2DD_DEBUG_DIRECTORY_CHANGED` (6): a directory's proctable changed.
    DirectoryChanged,
    /// `MPI2DD_DEBUG_METADIRECTORY_CHANGED` (7): a metadirectory's tables changed.
    MetadirectoryChanged,
    /// `MPI2DD_DEBUG_ABORT` (8): the job aborts; `abort_string` may say why.
    Abort,
    /// Any other value, preserved (including 0, the value before any event).
    Unknown(u8),
}

impl DebugState {
    /// Interprets the byte read from the target.
    pub const fn from_raw(value: u8) -> Self {
        match value {
            1 => DebugState::Start,
            2 => DebugState::Spawn,
            3 => DebugState::Connect,
            4 => DebugState::Accept,
            5 => DebugState::Join,
            6 => DebugState::DirectoryChanged,
            7 => DebugState::MetadirectoryChanged,
            8 => DebugState::Abort,
            v => DebugState::Unknown(v),
        }
    }

    /// The byte as stored.
    pub const fn to_raw(self) -> u8 {
        match self {
            DebugState::Start => 1,
            DebugState::Spawn => 2,
            DebugState::Connect => 3,
            DebugState::Accept => 4,
            DebugState::Join => 5,
            DebugState::DirectoryChanged => 6,
            DebugState::MetadirectoryChanged => 7,
            DebugState::Abort => 8,
            DebugState::Unknown(v) => v,
        }
    }

    /// Whether the set of processes of the job may have changed, so that a tool should walk
    /// the directories again (everything but `ABORT` and unknown values).
    pub const fn changes_processes(self) -> bool {
        !matches!(self, DebugState::Abort | DebugState::Unknown(_))
    }

    /// The draft's name, e.g. `MPI2DD_DEBUG_SPAWN`.
    pub const fn name(self) -> &'static str {
        match self {
            DebugState::Start => "MPI2DD_DEBUG_START",
            DebugState::Spawn => "MPI2DD_DEBUG_SPAWN",
            DebugState::Connect => "MPI2DD_DEBUG_CONNECT",
            DebugState::Accept => "MPI2DD_DEBUG_ACCEPT",
            DebugState::Join => "MPI2DD_DEBUG_JOIN",
            DebugState::DirectoryChanged => "MPI2DD_DEBUG_DIRECTORY_CHANGED",
            DebugState::MetadirectoryChanged => "MPI2DD_DEBUG_METADIRECTORY_CHANGED",
            DebugState::Abort => "MPI2DD_DEBUG_ABORT",
            DebugState::Unknown(_) => "unknown",
        }
    }
}

impl std::fmt::Display for DebugState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DebugState::Unknown(v) => write!(f, "unknown MPI2DD debug_state {v}"),
            s => f.write_str(s.name()),
        }
    }
}

/// The two flag words as `bitflags` sets over the raw `u32` (bits the draft does not define
/// are kept, never dropped: `from_bits_retain`), stored and serialised as that number.
macro_rules! flag_set {
    ($(#[$doc:meta])* $name:ident { $($(#[$($fattr:tt)*])* $flag:ident = $bit:expr;)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
        #[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
        #[cfg_attr(feature = "serde", serde(transparent))]
        pub struct $name(u32);

        bitflags::bitflags! {
            impl $name: u32 {
                $($(#[$($fattr)*])* const $flag = $bit;)*
            }
        }

        impl $name {
            /// No bit set.
            pub const EMPTY: $name = $name::empty();
            /// Every bit the draft defines.
            pub const KNOWN: $name = $name::all();

            /// Set bits the draft does not define.
            pub const fn unknown_bits(self) -> u32 {
                self.bits() & !Self::KNOWN.bits()
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}(", stringify!($name))?;
                let mut sep = "";
                for (n, _) in self.iter_names() {
                    write!(f, "{sep}{n}")?;
                    sep = " | ";
                }
                if self.unknown_bits() != 0 {
                    write!(f, "{sep}{:#x}", self.unknown_bits())?;
                }
                f.write_str(")")
            }
        }
    };
}

flag_set! {
    /// `MPI2DD_INFO.debugger_flags`: initialised (to zero) by MPI, set by the debugger.
    DebuggerFlags {
        /// `MPI2DD_FLAG_GATE` (0x01): the debugger has acquired the process; implementations
        /// may hold ranks in `MPI_Init` until it is set.
        GATE = 0x01;
        /// `MPI2DD_FLAG_BEING_DEBUGGED` (0x02): tells the starter that a debugger is attached.
        BEING_DEBUGGED = 0x02;
        /// `MPI2DD_FLAG_REQUEST_DIRECTORY_EVENTS` (0x04): the debugger wants breakpoint events
        /// when a directory or metadirectory changes.
        REQUEST_DIRECTORY_EVENTS = 0x04;
    }
}

flag_set! {
    /// `MPI2DD_INFO.mpi_flags`: set by MPI, never modified by the debugger.
    MpiFlags {
        /// `MPI2DD_MPIFLAG_I_AM_METADIR` (0x01).
        I_AM_METADIR = 0x01;
        /// `MPI2DD_MPIFLAG_I_AM_DIR` (0x02).
        I_AM_DIR = 0x02;
        /// `MPI2DD_MPIFLAG_I_AM_STARTER` (0x04).
        I_AM_STARTER = 0x04;
        /// `MPI2DD_MPIFLAG_FORCE_TO_MAIN` (0x08): acquired before running its main procedure.
        FORCE_TO_MAIN = 0x08;
        /// `MPI2DD_MPIFLAG_IGNORE_QUEUE` (0x10): no message queue debugging.
        IGNORE_QUEUE = 0x10;
        /// `MPI2DD_MPIFLAG_ACQUIRED_PRE_MAIN` (0x20): ranks are attached before main.
        ACQUIRED_PRE_MAIN = 0x20;
        /// `MPI2DD_MPIFLAG_PARTIAL_ATTACH_OK` (0x40): the job can be started by continuing the
        /// initial process.
        PARTIAL_ATTACH_OK = 0x40;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_state_values_are_the_drafts() {
        let named = [
            (1, DebugState::Start),
            (2, DebugState::Spawn),
            (3, DebugState::Connect),
            (4, DebugState::Accept),
            (5, DebugState::Join),
            (6, DebugState::DirectoryChanged),
            (7, DebugState::MetadirectoryChanged),
            (8, DebugState::Abort),
        ];
        for (v, s) in named {
            assert_eq!(DebugState::from_raw(v), s);
        }
        for v in 0..=255u8 {
            assert_eq!(DebugState::from_raw(v).to_raw(), v);
        }
        assert_eq!(DebugState::from_raw(9), DebugState::Unknown(9));
        assert_eq!(DebugState::Spawn.to_string(), "MPI2DD_DEBUG_SPAWN");
        assert!(!DebugState::Abort.changes_processes());
    }

    #[test]
    fn flags_keep_unknown_bits_and_print_names() {
        let f = DebuggerFlags::from_bits_retain(0x105);
        assert!(f.contains(DebuggerFlags::GATE | DebuggerFlags::REQUEST_DIRECTORY_EVENTS));
        assert!(!f.contains(DebuggerFlags::BEING_DEBUGGED));
        assert_eq!(f.unknown_bits(), 0x100);
        assert_eq!(
            format!("{f:?}"),
            "DebuggerFlags(GATE | REQUEST_DIRECTORY_EVENTS | 0x100)"
        );
        assert_eq!(MpiFlags::KNOWN.bits(), 0x7f);
        assert_eq!(
            f.difference(DebuggerFlags::GATE).bits(),
            0x104,
            "difference clears only the given bits"
        );
    }
}
