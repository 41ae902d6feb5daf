//! Refused attaches: the one typed reason the kernel's `EPERM` stands for, and the refusals
//! that are none (a thread attached to us by the kernel, a thread exiting).

use nix::errno::Errno;
use nix::unistd::Pid;

use super::super::{cause_of, control_err_as};

/// The error for an attach of `pid` refused with `e`: a refusal by the kernel is diagnosed
/// from `/proc` ([`crate::live::access`]) into one typed reason; anything else keeps its errno.
pub(super) fn unattachable(pid: Pid, operation: &str, e: Errno) -> crate::TargetError {
    unattachable_task(pid, pid, operation, e)
}

/// [`unattachable`] for a refusal of thread `task` of `pid`, diagnosed from that thread's own
/// facts: a tracer letting go of the process detaches its threads one by one, so a thread can
/// still be its while the main thread is already free.
pub(super) fn unattachable_task(
    pid: Pid,
    task: Pid,
    operation: &str,
    e: Errno,
) -> crate::TargetError {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let zombie = status
        .lines()
        .find_map(|l| l.strip_prefix("State:"))
        .is_some_and(|s| s.trim().starts_with('Z'));
    if zombie {
        return control_err_as(
            pid,
            operation,
            "the process has exited (zombie)",
            crate::ControlCause::Gone,
        );
    }
    match e {
        Errno::EPERM | Errno::EACCES => crate::TargetError::Denied {
            pid: pid.as_raw().max(0) as u32,
            operation: operation.to_string(),
            denial: crate::live::access::diagnose(task.as_raw().max(0) as u32, e, true),
        },
        e => control_err_as(pid, operation, e.desc(), cause_of(e)),
    }
}

/// Whether thread `tid` of `pid` is traced by a thread of this process (auto-attached as the
/// clone of a thread we seized).
pub(super) fn traced_by_us(pid: i32, tid: i32) -> bool {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse::<u32>().ok())
        .is_some_and(|tracer| {
            tracer != 0 && std::path::Path::new(&format!("/proc/self/task/{tracer}")).exists()
        })
}

/// Whether thread `tid` of `pid` has exited or is exiting: gone from `/proc`, or a zombie or
/// dead task there, within a few milliseconds (a thread inside `exit` is refused by the
/// kernel before `/proc` shows it dead). A live thread refused for real keeps the error.
pub(super) fn thread_exited(pid: i32, tid: i32) -> bool {
    let dead = || match std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")) {
        Err(_) => true,
        // The state follows the command's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_none_or(|state| matches!(state, 'Z' | 'X' | 'x')),
    };
    for _ in 0..20 {
        if dead() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_micros(500));
    }
    false
}
