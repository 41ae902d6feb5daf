//! [`CoopError`]: why a process's cooperative channel could not be used.

use std::path::PathBuf;
use std::time::Duration;

use nix::errno::Errno;

use super::Opcode;

/// What is wrong with a channel directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DirProblem {
    /// A symbolic link (someone else may have planted it).
    #[error("it is a symbolic link")]
    Symlink,
    /// Not a directory.
    #[error("it is not a directory")]
    NotADirectory,
    /// Owned by another uid.
    #[error("it is owned by uid {owner}")]
    Owner {
        /// The uid owning it.
        owner: u32,
    },
    /// Its mode is not 0700.
    #[error("its mode is {mode:#o}, not 0700")]
    Mode {
        /// Its permission bits.
        mode: u32,
    },
}

/// Why the cooperative channel of a process could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CoopError {
    /// The process has no channel there (no directory, no socket, nobody listening: the
    /// library not loaded, MPI not initialised, `MPIR_COOP=0`, or the process gone).
    #[error("process {pid} has no cooperative channel at {}", path.display())]
    NoChannel {
        /// The process.
        pid: u32,
        /// The directory or socket looked for.
        path: PathBuf,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// The directory is not private to the expected user: not used.
    #[error("the channel directory {} is not private to uid {expected}", path.display())]
    NotOurs {
        /// The directory.
        path: PathBuf,
        /// The uid it should belong to.
        expected: u32,
        /// What is wrong with it.
        #[source]
        problem: DirProblem,
    },
    /// The socket's server is not the process asked for.
    #[error(
        "{} is served by pid {found_pid} uid {found_uid}, not by pid {pid} uid {uid}",
        path.display()
    )]
    WrongPeer {
        /// The socket.
        path: PathBuf,
        /// The pid asked for.
        pid: u32,
        /// The uid expected (the directory's owner).
        uid: u32,
        /// The server's pid (`SO_PEERCRED`).
        found_pid: i32,
        /// The server's uid.
        found_uid: u32,
    },
    /// No (complete) answer in time.
    #[error("process {pid} did not answer {op} within {timeout:?}")]
    Timeout {
        /// The process.
        pid: u32,
        /// The request.
        op: Opcode,
        /// The deadline that passed.
        timeout: Duration,
    },
    /// The server closed the connection before its answer was complete.
    #[error("process {pid} closed the channel during {op}")]
    Closed {
        /// The process.
        pid: u32,
        /// The request.
        op: Opcode,
    },
    /// An answer that does not follow COOP.md.
    #[error("process {pid} answered {op} with garbage: {what}")]
    Garbage {
        /// The process.
        pid: u32,
        /// The request.
        op: Opcode,
        /// What is wrong.
        what: &'static str,
    },
    /// An answer announcing more than COOP.md allows for its request.
    #[error("process {pid} announced {len} bytes for {op}, more than the {max} allowed")]
    TooLarge {
        /// The process.
        pid: u32,
        /// The request.
        op: Opcode,
        /// The length announced.
        len: u64,
        /// The cap.
        max: u64,
    },
    /// The process refused the request (its status, an errno value).
    #[error("process {pid} refused {op}: {}", Errno::from_raw(*status as i32).desc())]
    Refused {
        /// The process.
        pid: u32,
        /// The request.
        op: Opcode,
        /// The status it answered (an errno value: `EFAULT` for memory it cannot read,
        /// `EINVAL` for `PTRACER` on a kernel without Yama, `E2BIG` for a map over 8 MiB).
        status: u32,
    },
    /// THREADS: the capture signal has a handler of the program's own.
    #[error("process {pid} cannot capture its threads: signal {signal} has another handler")]
    SignalTaken {
        /// The process.
        pid: u32,
        /// The signal (`MPIR_COOP_SIGNAL` chooses another).
        signal: u32,
    },
    /// The system failed a socket operation.
    #[error("talking to process {pid} ({op})")]
    Io {
        /// The process.
        pid: u32,
        /// The request.
        op: Opcode,
        /// What the system said.
        #[source]
        source: std::io::Error,
    },
    /// This process's effective uid could not be told (from `/proc/self/status`).
    #[error("cannot tell this process's effective uid")]
    OwnUid {
        /// What failed.
        #[source]
        source: std::io::Error,
    },
}
