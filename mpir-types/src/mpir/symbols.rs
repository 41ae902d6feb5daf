//! Every symbol of the MPIR Process Acquisition Interface (spec chapter 9, `mpich-attach.txt`)
//! and its extensions, with what the spec says about each.

/// Which process defines a symbol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "the spec says a symbol is defined by the starter, the ranks or both"
)]
pub enum Defined {
    /// The starter process (`mpiexec`, or rank 0 acting as starter).
    Starter,
    /// The MPI processes (ranks).
    Ranks,
    /// Both the starter and the ranks may define it.
    Both,
}

/// What kind of object a symbol names, and how the tool uses it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum SymbolKind {
    /// A function (`MPIR_Breakpoint`): the tool plants a breakpoint on it.
    Function,
    /// An `int` variable the tool reads.
    IntRead,
    /// An `int` variable the tool writes.
    IntWritten,
    /// A pointer variable the tool reads (`MPIR_proctable`, `MPIR_debug_abort_string`).
    PointerRead,
    /// A symbol whose presence alone is the information; its type and value are not part of
    /// the interface (real starters define such flags with value 0).
    PresenceFlag,
    /// A `char[N]` the tool writes; `spec_len` is the spec's N (real starters may differ: size
    /// writes by the symbol's real size).
    CharArrayWritten {
        /// Array length in the spec.
        spec_len: u32,
    },
    /// A `char[N]` (or `char[]`) the tool reads as a NUL-terminated string.
    CharArrayRead {
        /// Array length in the spec, 0 when unspecified.
        spec_len: u32,
    },
}

/// One interface symbol and its contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct SymbolSpec {
    /// The symbol name, exactly as looked up.
    pub name: &'static str,
    /// Where it is defined.
    pub defined: Defined,
    /// Whether the interface requires it.
    pub required: bool,
    /// What it is.
    pub kind: SymbolKind,
    /// Where it is described (spec section or source of the convention).
    pub reference: &'static str,
}

/// `void MPIR_Breakpoint(void)`: called by the starter to raise an MPIR event.
pub const BREAKPOINT: &str = "MPIR_Breakpoint";
/// `MPIR_PROCDESC *MPIR_proctable`.
pub const PROCTABLE: &str = "MPIR_proctable";
/// `int MPIR_proctable_size`.
pub const PROCTABLE_SIZE: &str = "MPIR_proctable_size";
/// `volatile int MPIR_debug_state`.
pub const DEBUG_STATE: &str = "MPIR_debug_state";
/// `volatile int MPIR_being_debugged`.
pub const BEING_DEBUGGED: &str = "MPIR_being_debugged";
/// `char *MPIR_debug_abort_string`.
pub const DEBUG_ABORT_STRING: &str = "MPIR_debug_abort_string";
/// `volatile int MPIR_debug_gate` (in the ranks).
pub const DEBUG_GATE: &str = "MPIR_debug_gate";
/// Presence flag: the starter is not an MPI process.
pub const I_AM_STARTER: &str = "MPIR_i_am_starter";
/// Presence flag: ranks are acquired before `main`.
pub const ACQUIRED_PRE_MAIN: &str = "MPIR_acquired_pre_main";
/// Presence flag: display `main` after acquisition.
pub const FORCE_TO_MAIN: &str = "MPIR_force_to_main";
/// Presence flag: the tool may attach to a subset of ranks.
pub const PARTIAL_ATTACH_OK: &str = "MPIR_partial_attach_ok";
/// Presence flag: suppress message queue support (spec spelling).
pub const IGNORE_QUEUES: &str = "MPIR_ignore_queues";
/// Presence flag: suppress message queue support (spelling Open MPI's DLL probes).
pub const IGNORE_QUEUES_CAPITALISED: &str = "MPIR_Ignore_queues";
/// Tool daemon launch extension: `char MPIR_executable_path[256]`.
pub const EXECUTABLE_PATH: &str = "MPIR_executable_path";
/// Tool daemon launch extension: `char MPIR_server_arguments[1024]`.
pub const SERVER_ARGUMENTS: &str = "MPIR_server_arguments";
/// Attach FIFO extension: `char MPIR_attach_fifo[256]`.
pub const ATTACH_FIFO: &str = "MPIR_attach_fifo";
/// `char MPIR_dll_name[]` in the rank image: the message queue DLL to load.
pub const DLL_NAME: &str = "MPIR_dll_name";

/// Both spellings of the ignore-queues flag; either one present means "present".
pub const IGNORE_QUEUES_SPELLINGS: [&str; 2] = [IGNORE_QUEUES, IGNORE_QUEUES_CAPITALISED];

/// Type names under which `MPIR_PROCDESC` may be found by name (the spec's and MPICH's
/// spellings). Looking up the pointee type of [`PROCTABLE`] is more reliable.
pub const PROCDESC_TYPE_NAMES: [&str; 2] = ["MPIR_PROCDESC", "MPIR_PROCDesc"];

const fn spec(
    name: &'static str,
    defined: Defined,
    required: bool,
    kind: SymbolKind,
    reference: &'static str,
) -> SymbolSpec {
    SymbolSpec {
        name,
        defined,
        required,
        kind,
        reference,
    }
}

/// The whole catalogue, in spec order.
pub const ALL: &[SymbolSpec] = &[
    spec(
        BREAKPOINT,
        Defined::Starter,
        true,
        SymbolKind::Function,
        "MPIR 1.1 §9.9",
    ),
    spec(
        PROCTABLE,
        Defined::Starter,
        true,
        SymbolKind::PointerRead,
        "MPIR 1.1 §9.4",
    ),
    spec(
        PROCTABLE_SIZE,
        Defined::Starter,
        true,
        SymbolKind::IntRead,
        "MPIR 1.1 §9.5",
    ),
    spec(
        DEBUG_STATE,
        Defined::Starter,
        true,
        SymbolKind::IntRead,
        "MPIR 1.1 §9.6",
    ),
    spec(
        BEING_DEBUGGED,
        Defined::Both,
        false,
        SymbolKind::IntWritten,
        "MPIR 1.1 §9.3",
    ),
    spec(
        DEBUG_ABORT_STRING,
        Defined::Starter,
        false,
        SymbolKind::PointerRead,
        "MPIR 1.1 §9.7",
    ),
    spec(
        DEBUG_GATE,
        Defined::Ranks,
        false,
        SymbolKind::IntWritten,
        "MPIR 1.1 §9.8",
    ),
    spec(
        I_AM_STARTER,
        Defined::Starter,
        false,
        SymbolKind::PresenceFlag,
        "MPIR 1.1 §9.10",
    ),
    spec(
        ACQUIRED_PRE_MAIN,
        Defined::Starter,
        false,
        SymbolKind::PresenceFlag,
        "MPIR 1.1 §9.11",
    ),
    spec(
        FORCE_TO_MAIN,
        Defined::Starter,
        false,
        SymbolKind::PresenceFlag,
        "MPIR 1.1 §9.12",
    ),
    spec(
        PARTIAL_ATTACH_OK,
        Defined::Starter,
        false,
        SymbolKind::PresenceFlag,
        "MPIR 1.1 §9.13",
    ),
    spec(
        IGNORE_QUEUES,
        Defined::Starter,
        false,
        SymbolKind::PresenceFlag,
        "MPIR 1.1 §9.14",
    ),
    spec(
        IGNORE_QUEUES_CAPITALISED,
        Defined::Both,
        false,
        SymbolKind::PresenceFlag,
        "Open MPI message queue DLL (probes this spelling)",
    ),
    spec(
        EXECUTABLE_PATH,
        Defined::Starter,
        false,
        SymbolKind::CharArrayWritten { spec_len: 256 },
        "MPIR 1.1 §7.1, §9.15",
    ),
    spec(
        SERVER_ARGUMENTS,
        Defined::Starter,
        false,
        SymbolKind::CharArrayWritten { spec_len: 1024 },
        "MPIR 1.1 §7.1, §9.16",
    ),
    spec(
        ATTACH_FIFO,
        Defined::Starter,
        false,
        SymbolKind::CharArrayRead { spec_len: 256 },
        "MPIR 1.1 §7.2, §9.17",
    ),
    spec(
        DLL_NAME,
        Defined::Ranks,
        false,
        SymbolKind::CharArrayRead { spec_len: 0 },
        "mpich-attach.txt; message-queue-dumping.txt (Startup)",
    ),
];

/// The catalogue entry for `name`, if it is an interface symbol.
pub fn lookup(name: &str) -> Option<&'static SymbolSpec> {
    ALL.iter().find(|s| s.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn catalogue_is_complete_and_unique() {
        let mut names: Vec<_> = ALL.iter().map(|s| s.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), ALL.len());
        // Every name the spec's contents list (chapter 9) plus the extensions.
        for n in [
            BREAKPOINT,
            PROCTABLE,
            PROCTABLE_SIZE,
            DEBUG_STATE,
            BEING_DEBUGGED,
            DEBUG_ABORT_STRING,
            DEBUG_GATE,
            I_AM_STARTER,
            ACQUIRED_PRE_MAIN,
            FORCE_TO_MAIN,
            PARTIAL_ATTACH_OK,
            IGNORE_QUEUES,
            IGNORE_QUEUES_CAPITALISED,
            EXECUTABLE_PATH,
            SERVER_ARGUMENTS,
            ATTACH_FIFO,
            DLL_NAME,
        ] {
            assert!(lookup(n).is_some(), "{n} missing");
        }
        let required: Vec<_> = ALL.iter().filter(|s| s.required).map(|s| s.name).collect();
        assert_eq!(
            required,
            [BREAKPOINT, PROCTABLE, PROCTABLE_SIZE, DEBUG_STATE]
        );
    }
}
