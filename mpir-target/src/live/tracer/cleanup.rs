//! Letting go of every tracee from anywhere in the program — what a tool does when it is told
//! to stop (`SIGINT`, `SIGTERM`, `SIGHUP`): the breakpoints it planted must not outlive it (a
//! process that runs into a left-over `int3` dies of `SIGTRAP`), and no thread may stay stopped.
//!
//! Every [`Tracer`](super::Tracer) registers here. [`detach_everything`] interrupts their waits
//! and has each detach from all its processes. [`detach_on_signals`] installs handlers that
//! do it on `SIGINT`/`SIGTERM`/`SIGHUP` and then let the signal take its default course; the
//! handlers only write one byte to a pipe (async-signal-safe), a thread does the rest.
//! [`detach_on_panic`] does it from a panic hook, before the panic goes on (an uncaught panic
//! in a thread that does not own the tracer, or any panic under `panic = "abort"`, would
//! otherwise end the tool with the tracees' breakpoints still planted), and
//! [`detach_at_exit`] from an `atexit` handler (`std::process::exit`, or `main` returning
//! while another thread still owns a tracer, skips every destructor).

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

/// A fresh tracer id (never 0).
pub(super) fn new_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

pub(super) fn register(id: u64, jobs: mpsc::Sender<Job>, interrupted: Arc<AtomicBool>) {
    tracers().push(Entry {
        id,
        jobs,
        interrupted,
    });
}

thread_local! {
    /// The id of the tracer whose thread this is (0 on every other thread).
    static TRACER_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Marks the calling thread as the thread of tracer `id`: a panic or an `exit` on it must not
/// wait for that tracer to answer (it is the one that would answer).
pub(super) fn mark_tracer_thread(id: u64) {
    TRACER_THREAD.with(|t| t.set(id));
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
    detach_everything_except(TRACER_THREAD.with(std::cell::Cell::get))
}

/// [`detach_everything`] for every tracer but `own` (the tracer whose thread calls: it cannot
/// serve a request while it is the one waiting; 0 for none).
fn detach_everything_except(own: u64) -> Vec<Result<Vec<u32>>> {
    let pending: Vec<mpsc::Receiver<Result<Vec<u32>>>> = tracers()
        .iter()
        .filter(|e| e.id != own)
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
/// The signal being handled (0: none).
static RECEIVED: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(signal: libc::c_int) {
    RECEIVED.store(signal, Ordering::SeqCst);
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = signal as u8;
        // SAFETY: write(2) is async-signal-safe; `byte` lives for the call; a failed write
        // (full pipe: a signal is already pending) loses nothing that matters.
        let _ = unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
    }
}

const SIGNALS: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP];

/// Longest wait, at exit, for the signal thread to finish letting go and re-raise the signal.
const RERAISE_WAIT: Duration = Duration::from_secs(15);

extern "C" fn wait_for_the_signal_at_exit() {
    // Letting go ends the tool's waits, so its main thread may be on its way out (with an
    // error status) while the signal thread still detaches: let that thread finish and end
    // the program by the signal, as promised, rather than exit with a status that hides it.
    if RECEIVED.load(Ordering::SeqCst) == 0 {
        return;
    }
    let end = std::time::Instant::now() + RERAISE_WAIT;
    while std::time::Instant::now() < end {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Installs handlers for `SIGINT`, `SIGTERM` and `SIGHUP` that make the program
/// [`detach_everything`] and then die of the signal as it would have (default action). Call it
/// once, early, in a tool's `main`. Handlers are reset by `exec`, so launched starters do not
/// inherit them. A signal the program was started with ignored stays ignored.
///
/// Letting go ends the waits of the program's tracers, so an acquisition in progress returns
/// an error meanwhile; should the program then try to `exit` (returning from `main`) before
/// the signal has been re-raised, an `atexit` handler holds the exit (up to 15 s) so that the
/// program still dies of the signal, as its parent expects.
pub fn detach_on_signals() -> Result<()> {
    let err =
        |e: &dyn std::fmt::Display| control_err(Pid::from_raw(0), "install signal handlers", e);
    if SIGNAL_PIPE.load(Ordering::SeqCst) >= 0 {
        return Ok(()); // already installed
    }
    // SAFETY: `wait_for_the_signal_at_exit` is an `extern "C" fn()` with no state of its own
    // that never unwinds (it only loads an atomic and sleeps); atexit(3) records the pointer.
    if unsafe { libc::atexit(wait_for_the_signal_at_exit) } != 0 {
        return Err(err(&"atexit(3) failed"));
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
        // SAFETY: `on_signal` only stores and loads atomics and calls write(2), all
        // async-signal-safe; it allocates nothing and takes no lock.
        let before = unsafe { sigaction(s, &action) }.map_err(|e| err(&e))?;
        if matches!(before.handler(), SigHandler::SigIgn) {
            // Ignored by whoever started the program (a shell's background job ignores
            // SIGINT, nohup SIGHUP): it stays ignored, as it would for any program, and the
            // program, which does not die of it, lets go at its end as usual.
            // SAFETY: restoring the disposition found installs no handler code.
            unsafe { sigaction(s, &before) }.map_err(|e| err(&e))?;
        }
    }
    Ok(())
}

/// Installs a panic hook (once; it chains the hook installed before it) that makes the program
/// [`detach_everything`] before the panic takes its course. Call it early in a tool's `main`
/// when any panic ends the tool: with `panic = "abort"`, or when a panicking thread that does
/// not own the tracer brings the tool down (`std::process::exit` after a failed `join`) —
/// there no destructor runs, and a tracee left with a breakpoint planted dies of `SIGTRAP` the
/// next time it runs into it.
///
/// Every panic counts, even one that is caught later: after it, the program's tracers hold
/// nothing and attach nothing more. A panic on a tracer's own thread (a bug in a request)
/// ends that tracer after it has detached, with or without this hook.
pub fn detach_on_panic() {
    static INSTALLED: std::sync::Once = std::sync::Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let _ = detach_everything();
            previous(info);
        }));
    });
}

extern "C" fn on_exit() {
    // Never unwind into libc's exit(): a panic here ends in an abort instead.
    let _ = std::panic::catch_unwind(detach_everything);
}

/// Registers an `atexit` handler (once) that makes the program [`detach_everything`] when it
/// exits through `exit(3)`: `std::process::exit`, or `main` returning while a tracer is still
/// owned by another thread or leaked — ways out that run no destructor. A tool that always
/// drops its tracers does not need it; it costs nothing otherwise. Not run on `_exit`, on
/// `abort` (see [`detach_on_panic`]), or when the tool is killed by a signal (see
/// [`detach_on_signals`]; `SIGKILL` cannot be caught: the kernel detaches, but breakpoint
/// bytes stay planted).
pub fn detach_at_exit() -> Result<()> {
    static INSTALLED: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    // SAFETY: `on_exit` is an `extern "C" fn()` with no state of its own that never unwinds;
    // atexit(3) only records the pointer.
    let rc = *INSTALLED.get_or_init(|| unsafe { libc::atexit(on_exit) });
    if rc != 0 {
        return Err(control_err(
            Pid::from_raw(0),
            "install an atexit handler",
            "atexit(3) failed",
        ));
    }
    Ok(())
}

/// The write end of the request pipe (-1 before [`on_request_signal`]).
static REQUEST_PIPE: AtomicI32 = AtomicI32::new(-1);

extern "C" fn on_request(_signal: libc::c_int) {
    let fd = REQUEST_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; `byte` lives for the call; the pipe does not
        // block (O_NONBLOCK), and a failed write (full pipe) means a request is pending anyway.
        let _ = unsafe { libc::write(fd, (&raw const byte).cast(), 1) };
    }
}

/// Makes `signal` (e.g. `SIGUSR1`) a request to the program instead of its default action:
/// each delivery sends `()` on the returned channel (deliveries close together may arrive as
/// one). The handler only writes a byte to a pipe; a thread forwards it. Handlers are reset by
/// `exec`, so launched starters and their ranks keep the signal's default disposition and
/// mask. Call it once per signal; a second call returns an error.
pub fn on_request_signal(signal: Signal) -> Result<mpsc::Receiver<()>> {
    let err = |e: &dyn std::fmt::Display| {
        control_err(Pid::from_raw(0), "install the request signal handler", e)
    };
    if REQUEST_PIPE.load(Ordering::SeqCst) >= 0 {
        return Err(err(&"a request signal is already installed"));
    }
    let (mut reader, writer) = std::io::pipe().map_err(|e| err(&e))?;
    let flags = nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_GETFL).map_err(|e| err(&e))?;
    let flags = nix::fcntl::OFlag::from_bits_truncate(flags) | nix::fcntl::OFlag::O_NONBLOCK;
    nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_SETFL(flags)).map_err(|e| err(&e))?;
    REQUEST_PIPE.store(writer.into_raw_fd(), Ordering::SeqCst);
    let (tx, rx) = mpsc::channel();
    std::thread::Builder::new()
        .name("mpir-requests".into())
        .spawn(move || {
            let mut byte = [0u8];
            while reader.read_exact(&mut byte).is_ok() {
                if tx.send(()).is_err() {
                    return;
                }
            }
        })
        .map_err(|e| err(&e))?;
    let action = SigAction::new(
        SigHandler::Handler(on_request),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    // SAFETY: `on_request` only loads an atomic and calls write(2), async-signal-safe; it
    // allocates nothing and takes no lock.
    unsafe { sigaction(signal, &action) }.map_err(|e| err(&e))?;
    Ok(rx)
}
