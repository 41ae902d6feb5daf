//! `MPIR_debug_state` values and the presence-only flags.

/// The value of `MPIR_debug_state` when the starter calls `MPIR_Breakpoint` (MPIR 1.1 §9.6).
///
/// Values outside the spec are kept as [`DebugState::Unknown`], not rejected: a tool should
/// report them and carry on (typically by continuing the starter, as for `MPIR_NULL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "every value has a variant: the spec's three codes and Unknown(n)"
)]
pub enum DebugState {
    /// `MPIR_NULL` (0): ignore the event and continue.
    Null,
    /// `MPIR_DEBUG_SPAWNED` (1): the process descriptor table is filled.
    Spawned,
    /// `MPIR_DEBUG_ABORTING` (2): the job aborted; read `MPIR_debug_abort_string`.
    Aborting,
    /// Any other value, preserved.
    Unknown(i64),
}

impl DebugState {
    /// `MPIR_NULL`.
    pub const NULL: i64 = 0;
    /// `MPIR_DEBUG_SPAWNED`.
    pub const SPAWNED: i64 = 1;
    /// `MPIR_DEBUG_ABORTING`.
    pub const ABORTING: i64 = 2;

    /// Interprets a raw value read from the target.
    pub const fn from_raw(value: i64) -> Self {
        match value {
            Self::NULL => DebugState::Null,
            Self::SPAWNED => DebugState::Spawned,
            Self::ABORTING => DebugState::Aborting,
            v => DebugState::Unknown(v),
        }
    }

    /// The raw value.
    pub const fn to_raw(self) -> i64 {
        match self {
            DebugState::Null => Self::NULL,
            DebugState::Spawned => Self::SPAWNED,
            DebugState::Aborting => Self::ABORTING,
            DebugState::Unknown(v) => v,
        }
    }
}

impl std::fmt::Display for DebugState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DebugState::Null => f.write_str("MPIR_NULL"),
            DebugState::Spawned => f.write_str("MPIR_DEBUG_SPAWNED"),
            DebugState::Aborting => f.write_str("MPIR_DEBUG_ABORTING"),
            DebugState::Unknown(v) => write!(f, "unknown MPIR_debug_state {v}"),
        }
    }
}

/// A presence-only symbol as found in a target: whether it is defined, and its `int` value when
/// it could be read.
///
/// The interface tests presence only; the value is recorded because real starters define such
/// flags with value 0 (MPICH's hydra defines `MPIR_partial_attach_ok = 0`), and a tool that
/// tested the value would get them wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "presence and value: all a presence-only symbol has"
)]
pub struct Flag {
    /// The symbol is defined in the process (this is what the interface means).
    pub present: bool,
    /// Its value read as a C `int`, if present and readable.
    pub value: Option<i64>,
}

impl Flag {
    /// An absent symbol.
    pub const ABSENT: Flag = Flag {
        present: false,
        value: None,
    };

    /// A present symbol with the value read (or `None` when it could not be read).
    pub const fn present(value: Option<i64>) -> Self {
        Flag {
            present: true,
            value,
        }
    }
}

/// The starter's presence flags (MPIR 1.1 §9.10–9.14).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct MpirFlags {
    /// `MPIR_i_am_starter`: the starter is not an MPI process.
    pub i_am_starter: Flag,
    /// `MPIR_acquired_pre_main`: ranks are acquired before `main`.
    pub acquired_pre_main: Flag,
    /// `MPIR_force_to_main`: show `main` after acquisition.
    pub force_to_main: Flag,
    /// `MPIR_partial_attach_ok`: attaching to a subset of ranks is fine.
    pub partial_attach_ok: Flag,
    /// `MPIR_ignore_queues` or `MPIR_Ignore_queues`: do not show message queues.
    pub ignore_queues: Flag,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_state_roundtrips_and_keeps_unknowns() {
        for v in [-7, 0, 1, 2, 3, i64::MAX, i64::MIN] {
            assert_eq!(DebugState::from_raw(v).to_raw(), v);
        }
        assert_eq!(DebugState::from_raw(1), DebugState::Spawned);
        assert_eq!(DebugState::from_raw(9), DebugState::Unknown(9));
        assert_eq!(DebugState::from_raw(2).to_string(), "MPIR_DEBUG_ABORTING");
    }
}
