//! The cooperative channel: a rank that has mpir-waits' preload library (`libmpir_waits.so`)
//! loaded answers for itself — who it is, its memory, its map, every thread's registers and
//! stack — over a private Unix socket of its user, for when the kernel forbids ptrace and
//! cross-process reads (Yama `ptrace_scope` 3, a seccomp filter, a container). The protocol is
//! described once, in `mpir-waits/COOP.md`; this module's `wire.rs` is its Rust layout.
//!
//! ```no_run
//! use std::time::Duration;
//! use mpir_target::live::coop::CoopClient;
//! use mpir_target::unwind::Unwinder;
//!
//! let pid = 4242;
//! let mut rank = CoopClient::connect(pid, Duration::from_secs(2))?;
//! let who = rank.hello()?;
//! println!("rank {:?} of {:?}: {}", who.rank, who.size, who.executable.display());
//! let snapshot = rank.threads()?; // unwound like a ptrace snapshot
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Trust goes both ways. The server serves only its own uid and root (`SO_PEERCRED`). The
//! client ([`CoopClient::connect_in`]) accepts a directory only when it is a real directory
//! (not a symbolic link) owned by the expected uid with mode 0700, and a server only when its
//! `SO_PEERCRED` says it is the pid asked for, running as that uid. Every answer is checked
//! (magic, version, status) and bounded by COOP.md's cap for its request before anything is
//! allocated; every read and write has a deadline. Nothing a server sends makes the client
//! panic; what is wrong is a [`CoopError`] naming the process, the request and the fault.
//!
//! The server closes a connection that stays idle for 2 s (30 s while a
//! [`grant_ptracer`](CoopClient::grant_ptracer) is in force); the client reconnects, with the
//! same checks, before a request that would meet such a closed connection.

mod error;
mod memory;
#[cfg(test)]
mod tests;
mod wire;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpir_types::DataModel;
use nix::errno::Errno;
use nix::sys::socket::{
    self, AddressFamily, SockFlag, SockType, UnixAddr, getsockopt, sockopt::PeerCredentials,
};
use zerocopy::{FromBytes, IntoBytes};

pub use error::{CoopError, DirProblem};
pub use memory::CoopMemory;
pub use wire::Opcode;

use crate::unwind::{Arch, ProcessSnapshot, Registers, StackCopy, ThreadSnapshot};

/// The variable naming the channel directory (else `/tmp/mpir-coop-<uid>`), for the library
/// and for this client alike.
pub const DIR_ENV: &str = "MPIR_COOP_DIR";

/// Most directory entries [`announcements`] looks at.
pub const MAX_SOCKETS: usize = 65_536;

/// The server closes a connection idle this long (COOP.md, "Who"); the client reconnects
/// before a request after a little less.
const SERVER_IDLE: Duration = Duration::from_millis(1500);
/// ... and this long while a PTRACER grant is in force.
const SERVER_IDLE_GRANTED: Duration = Duration::from_secs(25);
/// Extra time a THREADS answer may take: the server waits up to 300 ms for the threads, and
/// 100 ms more for a late one.
const CAPTURE_GRACE: Duration = Duration::from_secs(1);
/// Bytes read from the socket at a time (a payload grows as it arrives, never to its
/// announced length up front).
const CHUNK: usize = 64 << 10;

/// The channel directory of the processes of `uid`: `$MPIR_COOP_DIR` when set and not empty,
/// else `/tmp/mpir-coop-<uid>` (the library's own rule, COOP.md "Where").
pub fn channel_dir(uid: u32) -> PathBuf {
    match std::env::var_os(DIR_ENV) {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(format!("/tmp/mpir-coop-{uid}")),
    }
}

/// A process's answer to HELLO: who it says it is (COOP.md, "HELLO").
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Announcement {
    /// Its pid (checked to be the one asked, and the socket's server).
    pub pid: u32,
    /// Its parent's pid, now.
    pub ppid: u32,
    /// Its effective uid.
    pub uid: u32,
    /// Its rank in `MPI_COMM_WORLD`, when the library knows it.
    pub rank: Option<u64>,
    /// The size of `MPI_COMM_WORLD`, when known.
    pub size: Option<u64>,
    /// Field 22 of its `/proc/PID/stat` (clock ticks after boot): with the pid, names the
    /// process across pid reuse.
    pub start_time: u64,
    /// `readlink /proc/self/exe`.
    pub executable: PathBuf,
    /// The launcher variables that were set at `MPI_Init` (`PMI_RANK`, `PMIX_NAMESPACE`,
    /// `SLURM_JOB_ID`, … COOP.md lists them), in that order.
    pub env: Vec<(String, String)>,
}

/// Every channel's answer to HELLO, by pid ([`announcements`]).
pub type Announcements = Vec<(u32, Result<Announcement, CoopError>)>;

/// A connection to one process's cooperative channel.
#[derive(Debug)]
pub struct CoopClient {
    pid: u32,
    dir: PathBuf,
    owner: u32,
    timeout: Duration,
    stream: Option<UnixStream>,
    last_used: Instant,
    granted: bool,
}

/// This process's effective uid, from `/proc/self/status` ("Uid: real effective saved fs").
fn own_euid() -> Result<u32, CoopError> {
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "no Uid line");
    let text = std::fs::read_to_string("/proc/self/status")
        .map_err(|source| CoopError::OwnUid { source })?;
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|u| u.parse().ok())
        .ok_or_else(|| CoopError::OwnUid { source: bad() })
}

/// Accepts `dir` only as a real directory owned by `owner` with mode 0700.
fn check_dir(dir: &Path, owner: u32, pid: u32) -> Result<(), CoopError> {
    let meta = std::fs::symlink_metadata(dir).map_err(|source| CoopError::NoChannel {
        pid,
        path: dir.to_path_buf(),
        source,
    })?;
    let not_ours = |problem| CoopError::NotOurs {
        path: dir.to_path_buf(),
        expected: owner,
        problem,
    };
    if meta.file_type().is_symlink() {
        return Err(not_ours(DirProblem::Symlink));
    }
    if !meta.is_dir() {
        return Err(not_ours(DirProblem::NotADirectory));
    }
    if meta.uid() != owner {
        return Err(not_ours(DirProblem::Owner { owner: meta.uid() }));
    }
    let mode = meta.mode() & 0o7777;
    if mode != 0o700 {
        return Err(not_ours(DirProblem::Mode { mode }));
    }
    Ok(())
}

/// Connects to `path` without blocking past `deadline` (a full listen backlog makes a
/// blocking `connect` wait for as long as the server likes).
fn connect_bounded(path: &Path, deadline: Instant) -> std::io::Result<UnixStream> {
    let addr = UnixAddr::new(path).map_err(std::io::Error::from)?;
    loop {
        let fd: OwnedFd = socket::socket(
            AddressFamily::Unix,
            SockType::Stream,
            SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
            None,
        )?;
        match socket::connect(fd.as_raw_fd(), &addr) {
            Ok(()) => {
                let stream = UnixStream::from(fd);
                stream.set_nonblocking(false)?;
                return Ok(stream);
            }
            Err(Errno::EAGAIN) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(Errno::EAGAIN) => return Err(std::io::ErrorKind::TimedOut.into()),
            Err(e) => return Err(e.into()),
        }
    }
}

impl CoopClient {
    /// Connects to the channel of `pid`, a process of this user, in [`channel_dir`] of this
    /// process's effective uid; `timeout` bounds the connection and each request (a THREADS
    /// request gets one second more for the capture).
    ///
    /// # Errors
    /// As [`connect_in`](Self::connect_in); [`CoopError::OwnUid`] when this process's uid
    /// cannot be read.
    pub fn connect(pid: u32, timeout: Duration) -> Result<CoopClient, CoopError> {
        let uid = own_euid()?;
        CoopClient::connect_in(&channel_dir(uid), uid, pid, timeout)
    }

    /// Connects to the channel of `pid` in `dir`, which must belong to `owner` (as must the
    /// server).
    ///
    /// # Errors
    /// [`CoopError::NotOurs`]: `dir` is not a real directory of `owner` with mode 0700;
    /// [`CoopError::NoChannel`]: no directory, no socket or nobody listening;
    /// [`CoopError::WrongPeer`]: the server is not `pid` running as `owner`;
    /// [`CoopError::Timeout`], [`CoopError::Io`]: the connection itself.
    pub fn connect_in(
        dir: &Path,
        owner: u32,
        pid: u32,
        timeout: Duration,
    ) -> Result<CoopClient, CoopError> {
        let mut client = CoopClient {
            pid,
            dir: dir.to_path_buf(),
            owner,
            timeout: timeout.max(Duration::from_millis(1)),
            stream: None,
            last_used: Instant::now(),
            granted: false,
        };
        client.reconnect(Opcode::Hello)?;
        Ok(client)
    }

    /// The process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The socket's path.
    pub fn socket_path(&self) -> PathBuf {
        self.dir.join(format!("{}.sock", self.pid))
    }

    fn reconnect(&mut self, op: Opcode) -> Result<(), CoopError> {
        self.stream = None;
        self.granted = false;
        check_dir(&self.dir, self.owner, self.pid)?;
        let path = self.socket_path();
        let pid = self.pid;
        let stream =
            connect_bounded(&path, Instant::now() + self.timeout).map_err(|source| match source
                .kind()
            {
                std::io::ErrorKind::TimedOut => CoopError::Timeout {
                    pid,
                    op,
                    timeout: self.timeout,
                },
                _ => CoopError::NoChannel {
                    pid,
                    path: path.clone(),
                    source,
                },
            })?;
        let io = |source| CoopError::Io { pid, op, source };
        let cred = getsockopt(&stream, PeerCredentials).map_err(|e| io(e.into()))?;
        if u32::try_from(cred.pid()).ok() != Some(pid) || cred.uid() != self.owner {
            return Err(CoopError::WrongPeer {
                path,
                pid,
                uid: self.owner,
                found_pid: cred.pid(),
                found_uid: cred.uid(),
            });
        }
        self.stream = Some(stream);
        self.last_used = Instant::now();
        Ok(())
    }

    /// Sends one request and reads its answer: the payload of an ok answer, or the error.
    fn request(&mut self, op: Opcode, arg0: u64, arg1: u64) -> Result<Vec<u8>, CoopError> {
        let idle = if self.granted {
            SERVER_IDLE_GRANTED
        } else {
            SERVER_IDLE
        };
        if self.stream.is_none() || self.last_used.elapsed() >= idle {
            self.reconnect(op)?;
        }
        let result = self.exchange(op, arg0, arg1);
        match &result {
            // The connection is in a known state only after a complete answer.
            Ok(_) | Err(CoopError::Refused { .. } | CoopError::SignalTaken { .. }) => {
                self.last_used = Instant::now();
            }
            Err(_) => {
                self.stream = None;
                self.granted = false;
            }
        }
        result
    }

    fn exchange(&mut self, op: Opcode, arg0: u64, arg1: u64) -> Result<Vec<u8>, CoopError> {
        let (pid, timeout) = (self.pid, self.timeout);
        let budget = if op == Opcode::Threads {
            timeout + CAPTURE_GRACE
        } else {
            timeout
        };
        let deadline = Instant::now() + budget;
        let Some(stream) = self.stream.as_mut() else {
            return Err(CoopError::Closed { pid, op });
        };
        let fail = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => CoopError::Timeout {
                pid,
                op,
                timeout: budget,
            },
            std::io::ErrorKind::UnexpectedEof
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::ConnectionReset => CoopError::Closed { pid, op },
            _ => CoopError::Io { pid, op, source: e },
        };
        stream.set_write_timeout(Some(budget)).map_err(&fail)?;
        stream
            .write_all(wire::Request::new(op, arg0, arg1).as_bytes())
            .map_err(fail)?;
        let mut head = [0u8; size_of::<wire::Answer>()];
        read_until(stream, &mut head, deadline).map_err(fail)?;
        let garbage = |what| CoopError::Garbage { pid, op, what };
        let answer = wire::Answer::read_from_bytes(&head).map_err(|_| garbage("answer header"))?;
        if answer.magic != wire::MAGIC {
            return Err(garbage("the answer's magic is not MPIRCOOP"));
        }
        if answer.version.get() != wire::VERSION {
            return Err(garbage("the answer's version is not 1"));
        }
        let (status, len) = (answer.status.get(), answer.length.get());
        let max = if status == 0 {
            op.max_payload()
        } else {
            wire::ERROR_MAX
        };
        if len > max {
            return Err(CoopError::TooLarge { pid, op, len, max });
        }
        let mut payload = Vec::new();
        let mut chunk = vec![0u8; CHUNK.min(len as usize)];
        while (payload.len() as u64) < len {
            let n = (len - payload.len() as u64).min(chunk.len() as u64) as usize;
            let part = chunk.get_mut(..n).unwrap_or_default();
            read_until(stream, part, deadline).map_err(fail)?;
            payload.extend_from_slice(part);
        }
        match status {
            0 => Ok(payload),
            // EBUSY with the signal's number (COOP.md, "THREADS").
            16 if op == Opcode::Threads => match <[u8; 4]>::try_from(payload.as_slice()) {
                Ok(b) => Err(CoopError::SignalTaken {
                    pid,
                    signal: u32::from_le_bytes(b),
                }),
                Err(_) => Err(CoopError::Refused { pid, op, status }),
            },
            status => Err(CoopError::Refused { pid, op, status }),
        }
    }

    /// HELLO: who the process says it is.
    ///
    /// # Errors
    /// The channel's; [`CoopError::Garbage`] when the answer does not decode or names another
    /// pid.
    pub fn hello(&mut self) -> Result<Announcement, CoopError> {
        let op = Opcode::Hello;
        let pid = self.pid;
        let p = self.request(op, 0, 0)?;
        let h = wire::decode_hello(&p).map_err(|what| CoopError::Garbage { pid, op, what })?;
        if h.fixed.pid.get() != pid {
            return Err(CoopError::Garbage {
                pid,
                op,
                what: "HELLO names another pid",
            });
        }
        let known = |v: i64| u64::try_from(v).ok();
        let env = String::from_utf8_lossy(h.env)
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Ok(Announcement {
            pid,
            ppid: h.fixed.ppid.get(),
            uid: h.fixed.uid.get(),
            rank: known(h.fixed.rank.get()),
            size: known(h.fixed.size.get()),
            start_time: h.fixed.start_time.get(),
            executable: PathBuf::from(std::ffi::OsStr::from_bytes(h.exe)),
            env,
        })
    }

    /// READ: fills the front of `buf` from the process's memory at `address` (at most 1 MiB;
    /// a longer `buf` is read up to 1 MiB). Returns the bytes read: fewer than asked when the
    /// range runs into memory the process cannot read.
    ///
    /// # Errors
    /// [`CoopError::Refused`] with `EFAULT` when not even the first byte is readable; the
    /// channel's.
    pub fn read(&mut self, address: u64, buf: &mut [u8]) -> Result<usize, CoopError> {
        let len = (buf.len() as u64).min(wire::READ_MAX);
        if len == 0 {
            return Ok(0);
        }
        let p = self.request(Opcode::Read, address, len)?;
        if p.len() as u64 > len {
            return Err(CoopError::Garbage {
                pid: self.pid,
                op: Opcode::Read,
                what: "READ answered more bytes than asked",
            });
        }
        buf.get_mut(..p.len())
            .unwrap_or_default()
            .copy_from_slice(&p);
        Ok(p.len())
    }

    /// MAPS: the process's `/proc/self/maps` (invalid UTF-8 replaced).
    ///
    /// # Errors
    /// The channel's; [`CoopError::Refused`] with `E2BIG` for a map over 8 MiB.
    pub fn maps(&mut self) -> Result<String, CoopError> {
        let p = self.request(Opcode::Maps, 0, 0)?;
        Ok(String::from_utf8_lossy(&p).into_owned())
    }

    /// THREADS: every thread's registers and live stack, each copied by the thread itself from
    /// a signal handler, as a [`ProcessSnapshot`] that
    /// [`Unwinder::thread_stacks`](crate::unwind::Unwinder::thread_stacks) unwinds like a
    /// ptrace one. A thread that was not captured (did not answer in time, the channel's own
    /// thread) has its registers as an `Err` saying why. The threads are not stopped together:
    /// each is copied when it takes the signal; [`ProcessSnapshot::stopped_for`] is the time from
    /// the first signal to the last copy. The channel's own thread is left out. x86_64 only.
    ///
    /// # Errors
    /// [`CoopError::SignalTaken`]: the program has a handler on the capture signal;
    /// [`CoopError::Refused`] (`ENOSYS` on another architecture); the channel's.
    pub fn threads(&mut self) -> Result<ProcessSnapshot, CoopError> {
        let (pid, op) = (self.pid, Opcode::Threads);
        let p = self.request(op, 0, 0)?;
        let t = wire::decode_threads(&p).map_err(|what| CoopError::Garbage { pid, op, what })?;
        let mut threads = Vec::with_capacity(t.threads.len());
        let mut stacks = Vec::new();
        for th in &t.threads {
            let r = &th.record;
            let status = wire::ThreadStatus::from_code(r.status.get());
            if status == wire::ThreadStatus::CoopThread {
                // The channel's own thread is the tool's helper, not the program's: left out,
                // as a debugger leaves out its own.
                continue;
            }
            let valid = r.regs_valid.get();
            let registers = if status != wire::ThreadStatus::Captured {
                Err(status.to_string())
            } else if valid & (1 << 16 | 1 << 7) != (1 << 16 | 1 << 7) {
                Err("captured without a program counter and stack pointer".to_string())
            } else {
                let mut regs = Registers::empty(Arch::X86_64);
                for (i, v) in r.regs.iter().enumerate().take(17) {
                    if valid & (1 << i) != 0 {
                        regs.set(i as u16, v.get());
                    }
                }
                if valid & (1 << 17) != 0
                    && let Some(fs) = r.regs.get(17)
                {
                    regs = regs.with_thread_pointer(fs.get());
                }
                Ok(regs)
            };
            if registers.is_ok() && !th.stack.is_empty() {
                stacks.push((r.stack_start.get(), th.stack.to_vec()));
            }
            threads.push(ThreadSnapshot {
                tid: r.tid.get(),
                registers,
            });
        }
        Ok(ProcessSnapshot {
            pid,
            threads,
            stacks: StackCopy::new(DataModel::LP64, stacks),
            stopped_for: Duration::from_nanos(t.header.wait_ns.get()),
        })
    }

    /// PTRACER: lets this process (the connected peer, never anyone else) attach to the
    /// process with ptrace under Yama `ptrace_scope` 1, until [`end_ptracer`](Self::end_ptracer)
    /// or the connection closes (kept open up to 30 s idle while granted).
    ///
    /// # Errors
    /// [`CoopError::Refused`] with `EINVAL` on a kernel without Yama; the channel's.
    pub fn grant_ptracer(&mut self) -> Result<(), CoopError> {
        self.request(Opcode::Ptracer, 0, 0)?;
        self.granted = true;
        Ok(())
    }

    /// PTRACER_END: withdraws [`grant_ptracer`](Self::grant_ptracer).
    ///
    /// # Errors
    /// As [`grant_ptracer`](Self::grant_ptracer).
    pub fn end_ptracer(&mut self) -> Result<(), CoopError> {
        self.granted = false;
        self.request(Opcode::PtracerEnd, 0, 0).map(drop)
    }
}

/// Fills `buf` from `stream`, each read bounded by what is left until `deadline` (a server
/// dribbling bytes cannot stretch the wait).
fn read_until(stream: &mut UnixStream, buf: &mut [u8], deadline: Instant) -> std::io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(std::io::ErrorKind::TimedOut.into());
        }
        stream.set_read_timeout(Some(left))?;
        match stream.read(buf.get_mut(got..).unwrap_or_default()) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// HELLO to every channel in [`channel_dir`]`(uid)` (at most [`MAX_SOCKETS`] directory
/// entries looked at), each with `timeout`, one after the other; sorted by pid. A stale socket
/// (a process killed without cleaning up) answers [`CoopError::NoChannel`]. No directory: no
/// channels.
///
/// # Errors
/// [`CoopError::NotOurs`] when the directory is not private to `uid`; [`CoopError::NoChannel`]
/// when it cannot be listed.
pub fn announcements(uid: u32, timeout: Duration) -> Result<Announcements, CoopError> {
    announcements_in(&channel_dir(uid), uid, timeout)
}

/// [`announcements`] in directory `dir`, which must belong to `uid`.
///
/// # Errors
/// As [`announcements`].
pub fn announcements_in(
    dir: &Path,
    uid: u32,
    timeout: Duration,
) -> Result<Announcements, CoopError> {
    let dir = dir.to_path_buf();
    match check_dir(&dir, uid, 0) {
        Err(CoopError::NoChannel { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            return Ok(Vec::new());
        }
        other => other?,
    }
    let entries = std::fs::read_dir(&dir).map_err(|source| CoopError::NoChannel {
        pid: 0,
        path: dir.clone(),
        source,
    })?;
    let mut pids: Vec<u32> = entries
        .take(MAX_SOCKETS)
        .filter_map(|e| {
            let name = e.ok()?.file_name();
            name.to_str()?.strip_suffix(".sock")?.parse().ok()
        })
        .collect();
    pids.sort_unstable();
    pids.dedup();
    Ok(pids
        .into_iter()
        .map(|pid| {
            let hello = CoopClient::connect_in(&dir, uid, pid, timeout).and_then(|mut c| c.hello());
            (pid, hello)
        })
        .collect())
}
