//! Errors of MQD hosting and of the native walkers: a leaf (it imports no engine), so the
//! result model can hold them.

mod blind;
pub(crate) mod native;

use thiserror::Error;

pub use self::blind::BlindReason;
use self::native::NativeError;

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
        faults_text(&callbacks.faults)
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
        callbacks: Box<CallbackReport>,
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
    /// A native walker failed (see [`crate::native`]); the walker's error is the source.
    #[error("native message-queue walker failed")]
    Native(#[from] NativeError),
    /// Neither engine fits the process ([`crate::Engine::Auto`]): no native walker
    /// recognises it (`native`, shown here), and the MPI's DLL failed (the source).
    #[error("no native walker fits ({native}), and the MPI's message-queue DLL failed")]
    NoEngine {
        /// Why no native walker fits.
        native: NativeError,
        /// Why the DLL failed.
        #[source]
        dll: Box<MqdError>,
    },
    /// A stock Open MPI without debug information, and no shipped layout set is proven on the
    /// process: the library unidentified, no set for its release, or no candidate (or more
    /// than one) decoding the process consistently. Nothing is read with a layout not proven.
    #[error(transparent)]
    Layouts(Box<crate::layouts::LayoutRefusal>),
    /// The process (its MPI library, if any) keeps no message queue any engine can read
    /// ([`crate::Engine::Auto`]):
    /// every native walker lacks the symbols it reads queues from (not only types, which a
    /// sidecar could supply), and the MPI names no message-queue DLL. Nothing to fix on the
    /// tool's side; stacks still show where the ranks wait.
    #[error(
        "the process exports no message queues: no queue symbols for a native walker \
         ({symbols}) and no message-queue DLL ({dll})"
    )]
    NotExported {
        /// Each walker with the symbols it lacks.
        symbols: String,
        /// Why no DLL was found (what was tried).
        dll: String,
    },
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
    #[error(
        "MQD DLL {path}: a process with identity (global rank) {} is already attached",
        identity.map_or_else(|| "unknown".to_string(), |r| r.to_string())
    )]
    IdentityInUse {
        /// The DLL.
        path: String,
        /// The identity asked for (the global rank; `None`: unknown, which all processes
        /// without a rank share).
        identity: Option<u64>,
    },
    /// The process handle is not (or no longer) attached to this host.
    #[error("process {handle:#x} is not attached to this host")]
    UnknownProcess {
        /// The handle's value.
        handle: usize,
    },
    /// The reader cannot show that it reads where this rank keeps its pending operations
    /// (an Open MPI rank whose PML is not ob1, an MPICH device whose operations bypass the
    /// queues read): its result would be an empty queue, a false all-clear, so the rank is
    /// not read. The reason ([`BlindReason`]) is part of the message, not a source.
    #[error("the {reader} cannot see this rank's pending operations: {why}")]
    Blind {
        /// The reader (`Open MPI ob1 walker`, `message-queue DLL /path/libompi_dbg_msgq.so`).
        reader: String,
        /// Why (boxed: it carries a target error, and errors stay small).
        why: Box<BlindReason>,
    },
    /// An error another process read and passed on as text (an `mpir agent` on another
    /// node, through `mpir-wire`): its whole chain, as it was shown there.
    #[error("{message}")]
    Relayed {
        /// The error and its causes, as one line.
        message: String,
    },
}

/// What our callbacks met during a DLL call that failed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CallbackReport {
    /// Problems, as text (unreadable memory, unknown handles, ...).
    pub faults: Vec<String>,
    /// Types the DLL looked up during the call that the process's debug information lacks
    /// (the usual cause of a failing DLL: an MPI library without debug info).
    pub missing_types: Vec<String>,
}

impl CallbackReport {
    /// A report of `faults` and `missing_types`.
    pub fn new(faults: Vec<String>, missing_types: Vec<String>) -> Self {
        CallbackReport {
            faults,
            missing_types,
        }
    }
}

impl MqdError {
    /// The MPI's types the failure is due to: types a DLL looked up during the failed call
    /// that the process lacks ([`MqdError::Dll`]), or that a native walker needed
    /// ([`NativeError::missing_types`]). Empty when the failure has another cause.
    pub fn missing_types(&self) -> &[String] {
        match self {
            MqdError::Dll { callbacks, .. } => &callbacks.missing_types,
            MqdError::Native(e) => e.missing_types(),
            MqdError::NoEngine { native, dll } => match native.missing_types() {
                [] => dll.missing_types(),
                types => types,
            },
            _ => &[],
        }
    }

    /// The first [`MqdError`] or [`NativeError`] in `error`'s chain (itself, then its
    /// sources) whose cause is missing types, and those types: how a tool decides to suggest
    /// debug information or a types sidecar.
    pub fn missing_types_in<'e>(error: &'e (dyn std::error::Error + 'static)) -> &'e [String] {
        let mut next = Some(error);
        while let Some(e) = next {
            let types = if let Some(m) = e.downcast_ref::<MqdError>() {
                m.missing_types()
            } else if let Some(n) = e.downcast_ref::<NativeError>() {
                n.missing_types()
            } else {
                &[]
            };
            if !types.is_empty() {
                return types;
            }
            next = e.source();
        }
        &[]
    }
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

impl From<crate::layouts::LayoutRefusal> for MqdError {
    fn from(e: crate::layouts::LayoutRefusal) -> Self {
        MqdError::Layouts(Box::new(e))
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use mpir_target::{Fault, TargetError};

    use super::*;

    /// Every line of `e`'s chain, and whether any line repeats a later one's text.
    fn repeats_a_source(e: &(dyn std::error::Error + 'static)) -> bool {
        let mut lines = Vec::new();
        let mut next = Some(e);
        while let Some(e) = next {
            lines.push(e.to_string());
            next = e.source();
        }
        lines.iter().enumerate().any(|(i, l)| {
            lines[i + 1..]
                .iter()
                .any(|later| l.contains(later.as_str()))
        })
    }

    #[test]
    fn no_error_prints_its_source_twice() {
        let target = TargetError::Unreadable {
            address: 0x1000,
            len: 8,
            fault: Fault::Unmapped,
        };
        let read = NativeError::Read {
            what: "MPIR_Comm".into(),
            address: 0x1000,
            source: target.clone(),
        };
        let lookup = NativeError::Lookup {
            name: "type MPIR_Comm".into(),
            source: target,
        };
        let no_engine = MqdError::NoEngine {
            native: NativeError::Unstable { attempts: 4 },
            dll: Box::new(MqdError::NoDll {
                reason: "no MPIR_dll_name".into(),
            }),
        };
        for e in [
            MqdError::Native(read.clone()),
            MqdError::Native(lookup.clone()),
            no_engine,
        ] {
            assert!(e.source().is_some(), "{e:?} keeps its cause");
            assert!(!repeats_a_source(&e), "{e}");
        }
        for e in [read, lookup] {
            assert!(e.source().is_some());
            assert!(!repeats_a_source(&e), "{e}");
        }
    }
}
