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
    /// `mqs_version_compatibility` is not the interface version we implement.
    #[error(
        "MQD DLL {path} implements interface version {found}; this host supports {supported} \
         (MPI-1; the MPI-2 job functions are not hosted yet)"
    )]
    Incompatible {
        /// The DLL.
        path: String,
        /// What it returned.
        found: i32,
        /// What we implement.
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
