//! Numeric values of the MQD header's enums (`mpi_interface.h`).

/// Result codes shared by every DLL. Codes from [`FIRST_USER_CODE`](result::FIRST_USER_CODE) up mean different things in
/// each DLL and must be rendered through its `mqs_dll_error_string`.
pub mod result {
    /// `mqs_ok`.
    pub const OK: i32 = 0;
    /// `mqs_no_information`.
    pub const NO_INFORMATION: i32 = 1;
    /// `mqs_end_of_list`.
    pub const END_OF_LIST: i32 = 2;
    /// `mqs_first_user_code`.
    pub const FIRST_USER_CODE: i32 = 100;
}

/// `MQS_INTERFACE_COMPATIBILITY` of the MPI-1 interface (the header without `FOR_MPI2`).
pub const INTERFACE_COMPATIBILITY: i32 = 2;

/// `MQS_INTERFACE_COMPATIBILITY` of the header built with `FOR_MPI2`: the MPI-1 interface plus
/// the job object, process identities and the new-process calls (both MPICH's
/// `mpi_interface.h` and Open MPI's `msgq_interface.h` say 3). A DLL reporting it may still
/// export none of the MPI-2 functions.
pub const INTERFACE_COMPATIBILITY_MPI2: i32 = 3;

/// Length of `mqs_communicator.name`.
pub const COMM_NAME_LEN: u64 = 64;
/// Number of `mqs_pending_operation.extra_text` lines.
pub const EXTRA_TEXT_LINES: u64 = 5;
/// Length of one `extra_text` line.
pub const EXTRA_TEXT_LEN: u64 = 64;

/// Which queue an operation is on (`mqs_op_class`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "the three queues of MQD's mqs_op_class"
)]
pub enum OpClass {
    /// `mqs_pending_sends` (0).
    Send,
    /// `mqs_pending_receives` (1).
    Receive,
    /// `mqs_unexpected_messages` (2).
    Unexpected,
}

impl OpClass {
    /// All classes, in the header's order.
    pub const ALL: [OpClass; 3] = [OpClass::Send, OpClass::Receive, OpClass::Unexpected];

    /// The header's value.
    pub const fn to_raw(self) -> i32 {
        match self {
            OpClass::Send => 0,
            OpClass::Receive => 1,
            OpClass::Unexpected => 2,
        }
    }

    /// The class with the header's value `v`, if any.
    pub const fn from_raw(v: i64) -> Option<Self> {
        match v {
            0 => Some(OpClass::Send),
            1 => Some(OpClass::Receive),
            2 => Some(OpClass::Unexpected),
            _ => None,
        }
    }
}

/// State of a pending operation (`mqs_status`). Unknown values are preserved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "every value has a variant: mqs_status's three codes and Unknown(n)"
)]
pub enum OpStatus {
    /// `mqs_st_pending` (0).
    Pending,
    /// `mqs_st_matched` (1).
    Matched,
    /// `mqs_st_complete` (2).
    Complete,
    /// Any other value a DLL returned.
    Unknown(i64),
}

impl OpStatus {
    /// Interprets a raw value.
    pub const fn from_raw(v: i64) -> Self {
        match v {
            0 => OpStatus::Pending,
            1 => OpStatus::Matched,
            2 => OpStatus::Complete,
            v => OpStatus::Unknown(v),
        }
    }

    /// The raw value.
    pub const fn to_raw(self) -> i64 {
        match self {
            OpStatus::Pending => 0,
            OpStatus::Matched => 1,
            OpStatus::Complete => 2,
            OpStatus::Unknown(v) => v,
        }
    }
}
