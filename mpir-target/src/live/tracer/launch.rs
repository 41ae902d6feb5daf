//! Starting a command under control, stopped at its first instruction after `exec`.
//!
//! The child is *seized* (`PTRACE_SEIZE`) before it execs, so it is an ordinary seized tracee
//! from the start (interrupts, group-stops and new threads behave as for an attached process;
//! no `PTRACE_TRACEME` special cases). The handshake, with two close-on-exec pipes:
//!
//! 1. `Command::spawn` runs on a helper thread (it blocks until the child execs);
//! 2. in the child, between fork and exec, a hook writes the child's pid and waits for a byte;
//! 3. the tracer thread reads the pid, seizes the child, and writes 1 ("go") — or 0 after a
//!    failed seize, and the child gives up with `ECANCELED` instead of running untraced;
//! 4. the child execs; the tracer collects the `PTRACE_EVENT_EXEC` stop.
//!
//! If the tool dies in between, the child reads end-of-file and gives up the same way.

#![allow(unsafe_code)]

use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::Arc;
use std::time::Duration;

use nix::unistd::Pid;

use super::control_err;
use super::sys::{self, Status};
use crate::error::Result;

/// Runs `command` with a hook that lets `seize` attach to the child before it execs, then
/// waits until the child has exec'd and sits in its `PTRACE_EVENT_EXEC` stop.
pub(super) fn spawn_seized(
    mut command: Command,
    seize: impl FnOnce(Pid) -> Result<()>,
) -> Result<Child> {
    let io_err = |what: &str, e: io::Error| control_err(Pid::from_raw(0), what, e);
    let (pid_r, pid_w) = io::pipe().map_err(|e| io_err("launch: create a pipe", e))?;
    let (go_r, go_w) = io::pipe().map_err(|e| io_err("launch: create a pipe", e))?;
    let (pid_r_fd, go_w_fd) = (pid_r.as_raw_fd(), go_w.as_raw_fd());
    let (pid_w, go_r) = (Arc::new(pid_w), Arc::new(go_r));
    let hook = move || -> io::Result<()> {
        // Our copies of the other ends: without closing them, a dead tool would leave this
        // child waiting forever instead of reading end-of-file.
        let _ = nix::unistd::close(pid_r_fd);
        let _ = nix::unistd::close(go_w_fd);
        (&*pid_w).write_all(&std::process::id().to_ne_bytes())?;
        let mut go = [0u8];
        (&*go_r).read_exact(&mut go)?;
        match go {
            [1] => Ok(()),
            _ => Err(io::Error::from_raw_os_error(libc::ECANCELED)),
        }
    };
    // SAFETY: the hook runs in the forked child before exec. It only makes async-signal-safe
    // system calls (close, getpid, write, read) on descriptors it owns, and allocates nothing
    // (the error values are constants or raw OS errors).
    unsafe { command.pre_exec(hook) };
    let spawner = std::thread::Builder::new()
        .name("mpir-launch".into())
        .spawn(move || command.spawn())
        .map_err(|e| io_err("launch: start the spawning thread", e))?;
    let join = |spawner: std::thread::JoinHandle<io::Result<Child>>| {
        spawner
            .join()
            .unwrap_or_else(|_| Err(io::Error::other("the spawning thread panicked")))
    };

    // 3. The child's pid, or end-of-file when the spawn failed before the hook ran.
    let mut raw = [0u8; 4];
    if (&pid_r).read_exact(&mut raw).is_err() {
        let e = join(spawner).err();
        return Err(io_err(
            "launch",
            e.unwrap_or_else(|| io::Error::other("the child did not report its pid")),
        ));
    }
    let pid = Pid::from_raw(i32::from_ne_bytes(raw));
    if let Err(e) = seize(pid) {
        let _ = (&go_w).write_all(&[0]);
        let _ = join(spawner); // the child gives up; spawn reaps it and fails
        return Err(e);
    }
    let go = (&go_w).write_all(&[1]);
    drop(go_w);

    // 4. Until spawn returns, exec has not happened (or failed, and spawn will reap the child:
    // do not collect its exit here). Deliver any signal that stops the child meanwhile.
    while !spawner.is_finished() {
        match sys::peek_stop(pid) {
            Ok(Status::Stopped { event: 0, .. }) => {
                if let Ok(Status::Stopped { signal, event: 0 }) = sys::wait(pid, false) {
                    let _ = sys::cont(pid, signal);
                }
            }
            Ok(_) => std::thread::sleep(Duration::from_micros(100)),
            Err(_) => break,
        }
    }
    let child = match join(spawner) {
        Ok(child) => child,
        Err(e) => return Err(io_err("launch", e)),
    };
    if let Err(e) = go {
        return Err(io_err("launch: release the child", e));
    }
    // The exec stop (signals that arrive first are delivered).
    loop {
        match sys::wait(pid, true) {
            Ok(Status::Stopped { event, .. }) if event == libc::PTRACE_EVENT_EXEC => {
                return Ok(child);
            }
            Ok(Status::Stopped { signal, event: 0 }) => {
                let _ = sys::cont(pid, signal);
            }
            Ok(Status::Stopped { .. }) => {
                let _ = sys::cont(pid, 0);
            }
            Ok(Status::Exited(code)) => {
                return Err(control_err(
                    pid,
                    "launch",
                    format!("the process exited with status {code} before its exec stop"),
                ));
            }
            Ok(Status::Killed(signal)) => {
                return Err(control_err(
                    pid,
                    "launch",
                    format!("the process was killed by signal {signal} before its exec stop"),
                ));
            }
            Ok(Status::Nothing) => {}
            Err(e) => return Err(control_err(pid, "launch: wait for the exec stop", e)),
        }
    }
}
