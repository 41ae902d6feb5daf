//! Errors of MQD hosting.

use thiserror::Error;

/// What went wrong while loading or calling an MQD DLL. Each names the DLL, and a failed DLL
/// call carries the DLL's own rendering of its code (`mqs_dll_error_string`) and what our
/// callbacks met on the way (unreadable memory, missing symbols, ...).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum MqdError {
    /// The file could not be loaded as a shared library.
    #[error("cannot load MQD DLL {path}: {reason}")]
    Load {
        /// The DLL.
        path: String,
        /// The dynamic loader's message.
        reason: String,
    },
    /// Exports the interface requires are missing.
    #[error("MQD DLL {path} lacks required exports: {}", names.join(", "))]
    MissingExports {
        /// The DLL.
        path: String,
        /// The missing names.
        names: Vec<String>,
    },
    /// `mqs_version_compatibility` is not an interface version we implement (2, MPI-1, or 3,
    /// MPI-1 plus the MPI-2 functions).
    #[error(
        "MQD DLL {path} implements interface version {found}; this host supports versions 2 \
         (MPI-1) to {supported} (with the MPI-2 job and new-process functions)"
    )]
    Incompatible {
        /// The DLL.
        path: String,
        /// What it returned.
        found: i32,
        /// The newest version we implement (every version from 2 up to it is accepted).
        supported: i32,
    },
    /// `mqs_dll_taddr_width` differs from this host's `unsigned long`.
    #[error("MQD DLL {path} was built with {found}-byte target addresses; this host uses {host}")]
    TaddrWidth {
        /// The DLL.
        path: String,
        /// What it returned.
        found: i32,
        /// `sizeof(unsigned long)` here.
        host: usize,
    },
    /// Another host in this process already hosts this DLL (a DLL keeps global state and must
    /// be driven by one host, from one thread).
    #[error("MQD DLL {path} is already hosted in this process")]
    AlreadyHosted {
        /// The DLL (canonical path).
        path: String,
    },
    /// A DLL call returned an error code.
    #[error(
        "{call} failed in {path}{}: {message} (code {code}){}",
        for_image(image),
        faults_text(faults)
    )]
    Dll {
        /// The DLL.
        path: String,
        /// The function called.
        call: &'static str,
        /// The image (or process) concerned, when there is one.
        image: Option<String>,
        /// The code returned.
        code: i32,
        /// `mqs_dll_error_string(code)`, or the has-queues message formatted with the image name.
        message: String,
        /// What our callbacks met during the call.
        faults: Vec<String>,
    },
    /// The DLL returned more items than the host's bound allows (a looping or corrupt list).
    #[error("{what} in {path}: more than {limit}; stopped (a cyclic or corrupt list?)")]
    Unbounded {
        /// The DLL.
        path: String,
        /// What was being iterated.
        what: String,
        /// The bound.
        limit: usize,
    },
    /// The out-of-process helper could not be found or started, or did not greet us with the
    /// protocol version we speak.
    #[error("MQD helper {helper}: {reason}")]
    HelperStart {
        /// The helper executable (or where it was looked for).
        helper: String,
        /// Why.
        reason: String,
    },
    /// The helper died while hosting the DLL (typically a crash inside the DLL); it has been
    /// reaped and this host is unusable.
    #[error("MQD helper for {path} died during {call}: {status}")]
    HelperDied {
        /// The DLL.
        path: String,
        /// What the host asked for when it died.
        call: String,
        /// How it ended (`killed by signal 11 (SIGSEGV)`, `exited with status 3`, ...).
        status: String,
    },
    /// The helper said nothing for longer than the timeout (a DLL that hangs or loops); it has
    /// been killed and reaped and this host is unusable.
    #[error("MQD helper for {path} did not answer {call} within {after_ms} ms; killed")]
    HelperTimeout {
        /// The DLL.
        path: String,
        /// What the host asked for.
        call: String,
        /// The timeout that expired, in milliseconds.
        after_ms: u64,
    },
    /// The helper sent something that is not the protocol (garbage, an oversized frame, an
    /// unexpected message); it has been killed and reaped and this host is unusable.
    #[error("MQD helper for {path} broke the protocol: {reason}")]
    Protocol {
        /// The DLL.
        path: String,
        /// What was wrong.
        reason: String,
    },
    /// An earlier failure killed the helper; open a new host.
    #[error("MQD helper for {path} is no longer running (an earlier call failed)")]
    HelperGone {
        /// The DLL.
        path: String,
    },
    /// The DLL to host could not be located in a process (no `MPIR_dll_name`, no
    /// `mpimsgq_dll_locations` entry naming an existing file).
    #[error("no MQD DLL found: {reason}")]
    NoDll {
        /// What was tried.
        reason: String,
    },
    /// A native walker failed (see [`crate::native`]).
    #[error("native walker: {0}")]
    Native(#[from] crate::native::NativeError),
    /// The DLL does not provide an optional function of the interface (not exported, or
    /// exported by a DLL whose interface version does not include it).
    #[error("MQD DLL {path} does not provide {function}: {reason}")]
    Unsupported {
        /// The DLL.
        path: String,
        /// The interface function (`mqs_setup_new_process_iterator`, ...).
        function: String,
        /// Why it is unavailable.
        reason: String,
    },
    /// A process with this identity is already attached to a host whose DLL keeps a job
    /// (MPI-2): identities name processes in the job, so they must be unique.
    #[error("MQD DLL {path}: a process with identity (global rank) {identity} is already attached")]
    IdentityInUse {
        /// The DLL.
        path: String,
        /// The identity asked for.
        identity: i32,
    },
    /// The process handle is not (or no longer) attached to this host.
    #[error("process {handle:#x} is not attached to this host")]
    UnknownProcess {
        /// The handle's value.
        handle: usize,
    },
}

fn for_image(image: &Option<String>) -> String {
    image
        .as_ref()
        .map(|i| format!(" for {i}"))
        .unwrap_or_default()
}

fn faults_text(faults: &[String]) -> String {
    if faults.is_empty() {
        String::new()
    } else {
        format!("; callbacks: {}", faults.join("; "))
    }
}

/// Short alias.
pub type Result<T, E = MqdError> = std::result::Result<T, E>;
