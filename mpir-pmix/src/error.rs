//! The errors of this crate.

use std::path::PathBuf;
use std::time::Duration;

/// Why a tool rendezvous file was not accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RendezvousProblem {
    /// Not a regular file (a symlink, a directory, a FIFO…).
    #[error("not a regular file")]
    NotRegularFile,
    /// Owned by another user: connecting would hand our credentials to their server.
    #[error("owned by uid {owner}, not by us (uid {ours})")]
    Foreign {
        /// The file's owner.
        owner: u32,
        /// Our effective uid.
        ours: u32,
    },
    /// Writable by the group or by everyone: anyone could have written it.
    #[error("mode {mode:o} lets others write it")]
    Writable {
        /// The file's permission bits.
        mode: u32,
    },
    /// Not the five lines a PMIx server writes (URI, version, pid, uid:gid, date).
    #[error("not a PMIx rendezvous file: {0}")]
    Garbage(String),
    /// It names another server pid than the one asked for.
    #[error("it names server pid {found}, not {asked}")]
    OtherPid {
        /// The pid in the file.
        found: u32,
        /// The pid asked for.
        asked: u32,
    },
    /// The server it names is not running any more.
    #[error("its server (pid {pid}) is not running: stale")]
    Stale {
        /// The pid in the file.
        pid: u32,
    },
    /// It could not be read.
    #[error("cannot be read: {0}")]
    Unreadable(String),
}

/// An error of a PMIx operation: each names the library, server or call, and PMIx's status.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PmixError {
    /// No libpmix could be found where one was looked for.
    #[error("no libpmix found (looked for {})", tried.join(", "))]
    NoLibrary {
        /// What was looked for, in order.
        tried: Vec<String>,
    },
    /// A libpmix could not be loaded.
    #[error("cannot load libpmix {}: {reason}", path.display())]
    Load {
        /// The library.
        path: PathBuf,
        /// dlopen's message, or the missing entry point.
        reason: String,
    },
    /// A libpmix whose major version this crate does not speak.
    #[error(
        "libpmix {} is {found:?}: its major version is not supported (this crate speaks {supported})",
        path.display()
    )]
    IncompatibleVersion {
        /// The library.
        path: PathBuf,
        /// What its `PMIx_Get_version` says.
        found: String,
        /// The versions this crate speaks.
        supported: &'static str,
    },
    /// The process is not a PMIx server a tool can connect to.
    #[error("pid {pid} is not a PMIx server: {reason}")]
    NotAServer {
        /// The pid asked for.
        pid: u32,
        /// Why not.
        reason: String,
    },
    /// A rendezvous file was refused.
    #[error("rendezvous file {} refused: {problem}", file.display())]
    Rendezvous {
        /// The file.
        file: PathBuf,
        /// Why.
        problem: RendezvousProblem,
    },
    /// This process already has its one PMIx tool connection (`PMIx_tool_init` is
    /// process-wide): drop it first.
    #[error(
        "this process is already connected as a PMIx tool (to {current}); drop that Tool first"
    )]
    AlreadyConnected {
        /// The server of the live connection, or what is still finishing.
        current: String,
    },
    /// Another process of this user is connected to the server and did not let go in time:
    /// PRRTE does not end a job's launcher after two tools were connected at once (see
    /// [`TURN_GAP`](crate::TURN_GAP)), so tools take turns.
    #[error(
        "another tool{} is connected to {server} and did not disconnect within {after:?}; PRRTE \
         serves one tool at a time (two at once leave its launcher running after the job ends)",
        holder.map(|p| format!(" (pid {p})")).unwrap_or_default()
    )]
    Busy {
        /// The server.
        server: String,
        /// The pid of the process holding the turn, when it said.
        holder: Option<u32>,
        /// How long we waited.
        after: Duration,
    },
    /// A PMIx call failed.
    #[error("{call} ({server}): {status_string} (PMIx status {status})")]
    Call {
        /// The call, with its key or target.
        call: String,
        /// The server.
        server: String,
        /// PMIx's status code.
        status: i32,
        /// `PMIx_Error_string` of it.
        status_string: String,
    },
    /// A PMIx call did not complete in time.
    #[error("{call} ({server}): no answer within {after:?}")]
    Timeout {
        /// The call.
        call: String,
        /// The server.
        server: String,
        /// The bound.
        after: Duration,
    },
    /// The server's answer was not what the PMIx Standard says it is.
    #[error("{call} ({server}): unexpected answer: {what}")]
    Unexpected {
        /// The call.
        call: String,
        /// The server.
        server: String,
        /// What was wrong.
        what: String,
    },
    /// An argument PMIx cannot carry (a namespace too long, a NUL byte, no command…).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}
