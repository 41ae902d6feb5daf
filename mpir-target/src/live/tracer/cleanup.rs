//! Letting go of every tracee from anywhere in the program — what a tool does when it is told
//! to stop (`SIGINT`, `SIGTERM`, `SIGHUP`): the breakpoints it planted must not outlive it (a
//! process that runs into a left-over `int3` dies of `SIGTRAP`), and no thread may stay stopped.
//!
//! Every [`Tracer`](super::Tracer) registers here. [`detach_everything`] interrupts their waits
//! and has each detach from all its processes. [`detach_on_signals`] installs handlers that
//! do it on `SIGINT`/`SIGTERM`/`SIGHUP` and then let the signal take its default course; the
//! handlers only write one byte to a pipe (async-signal-safe), a thread does the rest.

#![allow(unsafe_code)]

use std::io::Read;
use std::os::fd::IntoRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, Signal, sigaction};
use nix::unistd::Pid;

use super::{Job, control_err};
use crate::error::Result;

struct Entry {
    id: u64,
    jobs: mpsc::Sender<Job>,
    interrupted: Arc<AtomicBool>,
}

static TRACERS: Mutex<Vec<Entry>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn tracers() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    TRACERS.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn register(jobs: mpsc::Sender<Job>, interrupted: Arc<AtomicBool>) -> u64 {
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    tracers().push(Entry {
        id,
        jobs,
        interrupted,
    });
    id
}

pub(super) fn unregister(id: u64) {
    tracers().retain(|e| e.id != id);
}

/// Makes every [`Tracer`](super::Tracer) of this program let go of everything: waits in
/// progress end, every traced process is detached with its bytes restored and its threads
/// running, and nothing new is attached or launched afterwards by those tracers. Returns the
/// pids released (each tracer gets up to 10 s). Safe to call from any thread — but not from
/// a signal handler: see [`detach_on_signals`].
pub fn detach_everything() -> Vec<Result<Vec<u32>>> {
    let pending: Vec<mpsc::Receiver<Result<Vec<u32>>>> = tracers()
        .iter()
        .map(|e| {
            e.interrupted.store(true, Ordering::SeqCst);
            let (tx, rx) = mpsc::channel();
            let job: Job = Box::new(move |c| {
                let _ = tx.send(c.detach_all());
            });
            let _ = e.jobs.send(job);
            rx
        })
        .collect();
    pending
        .into_iter()
        .map(|rx| {
            rx.recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| {
                    Err(control_err(
                        Pid::from_raw(0),
                        "detach everything",
                        "a tracer did not answer within 10 s",
                    ))
                })
        })
        .collect()
}

/// The write end of the signal pipe (-1 before [`detach_on_signals`]).
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_signal(signal: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; `byte` lives for the call; a failed write
        // (full pipe: a signal is already pending) loses nothing that matters.
        let _ = unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
    }
}

const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Installs handlers for `SIGINT`, `SIGTERM` and `SIGHUP` that make the program
/// [`detach_everything`] and then die of the signal as it would have (default action). Call it
/// once, early, in a tool's `main`. Handlers are reset by `exec`, so launched starters do not
/// inherit them.
pub fn detach_on_signals() -> Result<()> {
    let err =
        |e: &dyn std::fmt::Display| control_err(Pid::from_raw(0), "install signal handlers", e);
    if SIGNAL_PIPE.load(Ordering::SeqCst) >= 0 {
        return Ok(()); // already installed
    }
    let (mut reader, writer) = std::io::pipe().map_err(|e| err(&e))?;
    SIGNAL_PIPE.store(writer.into_raw_fd(), Ordering::SeqCst);
    std::thread::Builder::new()
        .name("mpir-signals".into())
        .spawn(move || {
            let mut byte = [0u8];
            if reader.read_exact(&mut byte).is_err() {
                return;
            }
            let _ = detach_everything();
            let signal = Signal::try_from(i32::from(byte[0])).unwrap_or(Signal::SIGTERM);
            let default = SigAction::new(SigHandler::SigDfl, SaFlags::empty(), SigSet::empty());
            // SAFETY: restoring the default disposition installs no handler code.
            let _ = unsafe { sigaction(signal, &default) };
            let _ = nix::sys::signal::raise(signal);
        })
        .map_err(|e| err(&e))?;
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for s in SIGNALS {
        // SAFETY: `on_signal` only loads an atomic and calls write(2), both async-signal-safe.
        unsafe { sigaction(s, &action) }.map_err(|e| err(&e))?;
    }
    Ok(())
}
