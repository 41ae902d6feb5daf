//! The subset of PMIx's C types this crate uses, written by hand from the PMIx Standard and
//! checked against the real headers (`libpmix-dev`, `pmix_common.h`) by the layout test
//! (`layout_test.rs`): every size and field offset below is compared with a C probe compiled at
//! test time. The Standard's "Stable ABI" keeps these layouts fixed across OpenPMIx 4.x and 5.x.

use std::ffi::{c_char, c_int, c_void};

/// `PMIX_MAX_NSLEN`: a namespace is at most this many bytes (plus the NUL).
pub(crate) const MAX_NSLEN: usize = 255;
/// `PMIX_MAX_KEYLEN`: an attribute key is at most this many bytes (plus the NUL).
pub(crate) const MAX_KEYLEN: usize = 511;
/// `PMIX_RANK_WILDCARD` (`UINT32_MAX - 1`).
pub(crate) const RANK_WILDCARD: u32 = u32::MAX - 1;

/// `pmix_status_t`.
pub(crate) type Status = c_int;
pub(crate) const PMIX_SUCCESS: Status = 0;
pub(crate) const PMIX_DEBUGGER_RELEASE: Status = -3;
pub(crate) const PMIX_ERR_UNREACH: Status = -25;
pub(crate) const PMIX_READY_FOR_DEBUG: Status = -58;
pub(crate) const PMIX_ERR_LOST_CONNECTION: Status = -61;
/// The pre-4.0 name of a lost server connection, still sent by some servers.
pub(crate) const PMIX_ERR_LOST_CONNECTION_TO_SERVER: Status = -101;
/// `PMIX_EVENT_JOB_END` (same value as the deprecated `PMIX_ERR_JOB_TERMINATED`).
pub(crate) const PMIX_EVENT_JOB_END: Status = -145;
/// `PMIX_OPERATION_SUCCEEDED`: done at once, the callback will not be called.
pub(crate) const PMIX_OPERATION_SUCCEEDED: Status = -157;
/// `PMIX_EVENT_ACTION_COMPLETE`: an event handler's answer that ends the handler chain.
pub(crate) const PMIX_EVENT_ACTION_COMPLETE: Status = -334;

/// `pmix_data_type_t` values.
pub(crate) const PMIX_BOOL: u16 = 1;
pub(crate) const PMIX_STRING: u16 = 3;
pub(crate) const PMIX_PID: u16 = 5;
pub(crate) const PMIX_INT: u16 = 6;
pub(crate) const PMIX_INT32: u16 = 9;
pub(crate) const PMIX_UINT16: u16 = 13;
pub(crate) const PMIX_UINT32: u16 = 14;
pub(crate) const PMIX_STATUS: u16 = 20;
pub(crate) const PMIX_PROC: u16 = 22;
pub(crate) const PMIX_PROC_INFO: u16 = 38;
pub(crate) const PMIX_DATA_ARRAY: u16 = 39;

/// `pmix_proc_state_t` values: (value, name in pmix_common.h, words for people).
pub(crate) const PROC_STATES: &[(u8, &str, &str)] = &[
    (0, "PMIX_PROC_STATE_UNDEF", "undefined"),
    (1, "PMIX_PROC_STATE_PREPPED", "prepped"),
    (2, "PMIX_PROC_STATE_LAUNCH_UNDERWAY", "launch underway"),
    (3, "PMIX_PROC_STATE_RESTART", "restart"),
    (4, "PMIX_PROC_STATE_TERMINATE", "marked for termination"),
    (5, "PMIX_PROC_STATE_RUNNING", "running"),
    (6, "PMIX_PROC_STATE_CONNECTED", "connected"),
    (15, "PMIX_PROC_STATE_UNTERMINATED", "unterminated"),
    (20, "PMIX_PROC_STATE_TERMINATED", "terminated"),
    (50, "PMIX_PROC_STATE_ERROR", "error"),
    (51, "PMIX_PROC_STATE_KILLED_BY_CMD", "killed by command"),
    (52, "PMIX_PROC_STATE_ABORTED", "aborted"),
    (53, "PMIX_PROC_STATE_FAILED_TO_START", "failed to start"),
    (54, "PMIX_PROC_STATE_ABORTED_BY_SIG", "aborted by signal"),
    (
        55,
        "PMIX_PROC_STATE_TERM_WO_SYNC",
        "exited without PMIx_Finalize",
    ),
    (56, "PMIX_PROC_STATE_COMM_FAILED", "communication failed"),
    (
        57,
        "PMIX_PROC_STATE_SENSOR_BOUND_EXCEEDED",
        "sensor limit exceeded",
    ),
    (58, "PMIX_PROC_STATE_CALLED_ABORT", "called PMIx_Abort"),
    (59, "PMIX_PROC_STATE_HEARTBEAT_FAILED", "heartbeat failed"),
    (60, "PMIX_PROC_STATE_MIGRATING", "migrating"),
    (61, "PMIX_PROC_STATE_CANNOT_RESTART", "cannot restart"),
    (
        62,
        "PMIX_PROC_STATE_TERM_NON_ZERO",
        "exited with non-zero status",
    ),
    (63, "PMIX_PROC_STATE_FAILED_TO_LAUNCH", "failed to launch"),
];

/// `pmix_data_range_t`: `PMIX_RANGE_CUSTOM`, the range given by `PMIX_EVENT_CUSTOM_RANGE`.
pub(crate) const PMIX_RANGE_CUSTOM: u8 = 6;

/// Attribute keys (`pmix_common.h`), NUL-terminated for C.
pub(crate) mod keys {
    pub(crate) const TOOL_ATTACHMENT_FILE: &str = "pmix.tool.attach";
    pub(crate) const CONNECT_MAX_RETRIES: &str = "pmix.tool.mretries";
    pub(crate) const CONNECT_RETRY_DELAY: &str = "pmix.tool.retry";
    pub(crate) const QUERY_NAMESPACES: &str = "pmix.qry.ns";
    pub(crate) const QUERY_PROC_TABLE: &str = "pmix.qry.ptable";
    pub(crate) const NSPACE: &str = "pmix.nspace";
    pub(crate) const EVENT_CUSTOM_RANGE: &str = "pmix.evrange";
    pub(crate) const EVENT_NON_DEFAULT: &str = "pmix.evnondef";
    pub(crate) const EVENT_AFFECTED_PROC: &str = "pmix.evproc";
    pub(crate) const JOB_TERM_STATUS: &str = "pmix.job.term.status";
    pub(crate) const EXIT_CODE: &str = "pmix.exit.code";
    pub(crate) const DEBUGGER_DAEMONS: &str = "pmix.debugger";
    pub(crate) const DEBUG_TARGET: &str = "pmix.dbg.tgt";
    pub(crate) const DEBUG_DAEMONS_PER_NODE: &str = "pmix.dbg.dpnd";
    pub(crate) const FWD_STDOUT: &str = "pmix.fwd.stdout";
    pub(crate) const FWD_STDERR: &str = "pmix.fwd.stderr";
}

/// `pmix_proc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PmixProc {
    pub(crate) nspace: [c_char; MAX_NSLEN + 1],
    pub(crate) rank: u32,
}

/// The union of `pmix_value_t` (24 bytes: its largest member is `pmix_envar_t`), read and
/// written through the accessors of `api.rs` for the member its `type` names.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) union ValueData {
    pub(crate) flag: bool,
    pub(crate) string: *mut c_char,
    pub(crate) pid: i32,
    pub(crate) integer: c_int,
    pub(crate) int32: i32,
    pub(crate) uint16: u16,
    pub(crate) uint32: u32,
    pub(crate) status: Status,
    pub(crate) proc_: *mut PmixProc,
    pub(crate) darray: *mut PmixDataArray,
    pub(crate) ptr: *mut c_void,
    pub(crate) raw: [u64; 3],
}

/// `pmix_value_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PmixValue {
    pub(crate) type_: u16,
    pub(crate) data: ValueData,
}

/// `pmix_info_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct PmixInfo {
    pub(crate) key: [c_char; MAX_KEYLEN + 1],
    pub(crate) flags: u32,
    pub(crate) value: PmixValue,
}

/// `pmix_data_array_t`.
#[repr(C)]
pub(crate) struct PmixDataArray {
    pub(crate) type_: u16,
    pub(crate) size: usize,
    pub(crate) array: *mut c_void,
}

/// `pmix_query_t`.
#[repr(C)]
pub(crate) struct PmixQuery {
    pub(crate) keys: *mut *mut c_char,
    pub(crate) qualifiers: *mut PmixInfo,
    pub(crate) nqual: usize,
}

/// `pmix_proc_info_t`.
#[repr(C)]
pub(crate) struct PmixProcInfo {
    pub(crate) proc_: PmixProc,
    pub(crate) hostname: *mut c_char,
    pub(crate) executable_name: *mut c_char,
    pub(crate) pid: i32,
    pub(crate) exit_code: c_int,
    pub(crate) state: u8,
}

/// `pmix_app_t`.
#[repr(C)]
pub(crate) struct PmixApp {
    pub(crate) cmd: *mut c_char,
    pub(crate) argv: *mut *mut c_char,
    pub(crate) env: *mut *mut c_char,
    pub(crate) cwd: *mut c_char,
    pub(crate) maxprocs: c_int,
    pub(crate) info: *mut PmixInfo,
    pub(crate) ninfo: usize,
}

// Callback types of `pmix_common.h`. Every function of this crate passed as one of them is
// `extern "C"` and catches panics (`api.rs`).
pub(crate) type ReleaseCbFn = Option<unsafe extern "C" fn(cbdata: *mut c_void)>;
pub(crate) type InfoCbFn = unsafe extern "C" fn(
    status: Status,
    info: *mut PmixInfo,
    ninfo: usize,
    cbdata: *mut c_void,
    release_fn: ReleaseCbFn,
    release_cbdata: *mut c_void,
);
pub(crate) type OpCbFn = unsafe extern "C" fn(status: Status, cbdata: *mut c_void);
pub(crate) type SpawnCbFn =
    unsafe extern "C" fn(status: Status, nspace: *const c_char, cbdata: *mut c_void);
pub(crate) type HdlrRegCbFn =
    unsafe extern "C" fn(status: Status, refid: usize, cbdata: *mut c_void);
pub(crate) type EventNotificationCbFn = Option<
    unsafe extern "C" fn(
        status: Status,
        results: *mut PmixInfo,
        nresults: usize,
        cbfunc: Option<OpCbFn>,
        thiscbdata: *mut c_void,
        notification_cbdata: *mut c_void,
    ),
>;
pub(crate) type NotificationFn = unsafe extern "C" fn(
    evhdlr_registration_id: usize,
    status: Status,
    source: *const PmixProc,
    info: *mut PmixInfo,
    ninfo: usize,
    results: *mut PmixInfo,
    nresults: usize,
    cbfunc: EventNotificationCbFn,
    cbdata: *mut c_void,
);
