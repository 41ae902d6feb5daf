//! The system calls of the tracer that nix cannot express for us, with raw signal numbers.
//!
//! nix's `waitpid` decodes a stop into a `Signal` enum and fails with `EINVAL` *after the
//! kernel has consumed the status* when the signal is a real-time one (`SIGRTMIN`+n, used by
//! glibc and by MPI runtimes) — the tracee would stay stopped forever. So the wait status is
//! decoded here, and signals are passed back to `PTRACE_CONT`/`PTRACE_DETACH` as plain
//! numbers. `PTRACE_LISTEN` is not wrapped by nix at all.

#![allow(unsafe_code)]

use nix::errno::Errno;
use nix::unistd::Pid;

/// What one `waitpid` of a traced thread reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    /// Nothing to report (`WNOHANG`).
    Nothing,
    /// The thread exited with this status.
    Exited(i32),
    /// The thread was killed by this signal.
    Killed(i32),
    /// A ptrace stop. `event` is 0 for a signal-delivery-stop of `signal`, else the
    /// `PTRACE_EVENT_*` number (group-stops and interrupts are `PTRACE_EVENT_STOP`, with the
    /// stopping signal, or `SIGTRAP` for an interrupt).
    Stopped {
        /// The signal.
        signal: i32,
        /// The ptrace event, or 0.
        event: i32,
    },
}

/// `waitpid(tid, __WALL | (WNOHANG if !block))`, retried on `EINTR`.
pub(super) fn wait(tid: Pid, block: bool) -> Result<Status, Errno> {
    let flags = libc::__WALL | if block { 0 } else { libc::WNOHANG };
    loop {
        let mut status: libc::c_int = 0;
        // SAFETY: `status` is a valid, writable c_int for the duration of the call.
        let r = unsafe { libc::waitpid(tid.as_raw(), &mut status, flags) };
        if r == -1 {
            match Errno::last() {
                Errno::EINTR => continue,
                e => return Err(e),
            }
        }
        if r == 0 {
            return Ok(Status::Nothing);
        }
        return Ok(decode(status));
    }
}

fn decode(status: libc::c_int) -> Status {
    if libc::WIFEXITED(status) {
        Status::Exited(libc::WEXITSTATUS(status))
    } else if libc::WIFSIGNALED(status) {
        Status::Killed(libc::WTERMSIG(status))
    } else if libc::WIFSTOPPED(status) {
        Status::Stopped {
            signal: libc::WSTOPSIG(status),
            event: (status >> 16) & 0xff,
        }
    } else {
        Status::Nothing
    }
}

/// Whether `pid` sits in a stop that nobody has collected, without collecting it
/// (`waitid(P_PID, WSTOPPED | WNOHANG | WNOWAIT)`); exits are not looked at, so that whoever
/// owns the exit status (e.g. `std::process::Command::spawn` after a failed `exec`) still gets
/// it. Returns the stop as a [`Status::Stopped`].
pub(super) fn peek_stop(pid: Pid) -> Result<Status, Errno> {
    // SAFETY: an all-zero siginfo_t is a valid value (plain C struct of integers and unions).
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    let flags = libc::WSTOPPED | libc::WNOHANG | libc::WNOWAIT | libc::__WALL;
    // SAFETY: `info` is a valid, writable siginfo_t for the duration of the call.
    let r = unsafe { libc::waitid(libc::P_PID, pid.as_raw() as libc::id_t, &mut info, flags) };
    if r == -1 {
        return Err(Errno::last());
    }
    // SAFETY: the union fields read are plain integers of a struct that was zero-initialised
    // and then filled by a successful waitid, which sets si_pid and si_status for a child
    // state change (and leaves si_pid 0 when nothing was waitable, WNOHANG).
    let (si_pid, si_status) = unsafe { (info.si_pid(), info.si_status()) };
    if si_pid == 0 {
        return Ok(Status::Nothing);
    }
    Ok(Status::Stopped {
        signal: si_status & 0xff,
        event: (si_status >> 8) & 0xff,
    })
}

/// A ptrace request number as the C library declares `ptrace`'s first parameter (glibc: an
/// enum, `unsigned int`; musl: `int`).
#[cfg(target_env = "gnu")]
type Request = libc::c_uint;
#[cfg(not(target_env = "gnu"))]
type Request = libc::c_int;

/// A ptrace request whose `data` is a signal number (or 0).
fn request_with_signal(request: Request, tid: Pid, signal: i32) -> Result<(), Errno> {
    // SAFETY: this private helper is only called with PTRACE_CONT, PTRACE_DETACH,
    // PTRACE_SINGLESTEP and PTRACE_LISTEN (the four wrappers below): for them the kernel
    // ignores `addr` and reads `data` as a signal number, never as a pointer, so the call
    // touches no memory of this process.
    let r = unsafe {
        libc::ptrace(
            request,
            tid.as_raw(),
            std::ptr::null_mut::<libc::c_void>(),
            signal as libc::c_long as *mut libc::c_void,
        )
    };
    if r == -1 { Err(Errno::last()) } else { Ok(()) }
}

/// `PTRACE_GETFPREGS`: the x87/SSE state of stopped thread `tid` (the FXSAVE image), as
/// `NT_PRFPREG` holds it; the same request under glibc and musl (nix's regset calls are
/// glibc-only).
#[cfg(target_arch = "x86_64")]
pub(super) fn fp_registers(tid: Pid) -> Result<libc::user_fpregs_struct, Errno> {
    let mut regs = std::mem::MaybeUninit::<libc::user_fpregs_struct>::uninit();
    // SAFETY: PTRACE_GETFPREGS writes exactly one `user_fpregs_struct` (512 bytes on x86-64)
    // to `data`, which points to one; it is read only when the kernel reports success.
    let r = unsafe {
        libc::ptrace(
            libc::PTRACE_GETFPREGS,
            tid.as_raw(),
            std::ptr::null_mut::<libc::c_void>(),
            regs.as_mut_ptr().cast::<libc::c_void>(),
        )
    };
    if r == -1 {
        return Err(Errno::last());
    }
    // SAFETY: the kernel filled it (success above).
    Ok(unsafe { regs.assume_init() })
}

/// `PTRACE_CONT`, delivering `signal` (0 for none).
pub(super) fn cont(tid: Pid, signal: i32) -> Result<(), Errno> {
    request_with_signal(libc::PTRACE_CONT, tid, signal)
}

/// `PTRACE_DETACH`, delivering `signal` (0 for none).
pub(super) fn detach(tid: Pid, signal: i32) -> Result<(), Errno> {
    request_with_signal(libc::PTRACE_DETACH, tid, signal)
}

/// `PTRACE_SINGLESTEP`, delivering `signal` (0 for none).
pub(super) fn step(tid: Pid, signal: i32) -> Result<(), Errno> {
    request_with_signal(libc::PTRACE_SINGLESTEP, tid, signal)
}

/// `PTRACE_LISTEN`: lets a tracee in group-stop (stopped by `SIGSTOP`, `SIGTSTP`, …) stay
/// stopped as job control wants, while still reporting to us when `SIGCONT` or a new event
/// arrives. Only valid for tracees attached with `PTRACE_SEIZE`, in a group-stop.
pub(super) fn listen(tid: Pid) -> Result<(), Errno> {
    request_with_signal(libc::PTRACE_LISTEN, tid, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_decode_as_the_kernel_encodes_them() {
        assert_eq!(decode(3 << 8), Status::Exited(3));
        assert_eq!(decode(9), Status::Killed(9));
        // A real-time signal's delivery stop: nix would fail on it.
        let rt = libc::SIGRTMIN() + 2;
        assert_eq!(
            decode((rt << 8) | 0x7f),
            Status::Stopped {
                signal: rt,
                event: 0
            }
        );
        // An exec event: SIGTRAP | PTRACE_EVENT_EXEC << 8, shifted into a stop status.
        let exec = ((libc::SIGTRAP | (libc::PTRACE_EVENT_EXEC << 8)) << 8) | 0x7f;
        assert_eq!(
            decode(exec),
            Status::Stopped {
                signal: libc::SIGTRAP,
                event: libc::PTRACE_EVENT_EXEC
            }
        );
    }
}
