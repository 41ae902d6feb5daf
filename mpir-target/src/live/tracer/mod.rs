//! Process control through ptrace, from one dedicated thread (ptrace is per-thread: every
//! request about a tracee must come from the thread that attached it).
//!
//! [`Tracer`] owns that thread; each method sends a request to it and waits for the answer.
//!
//! - **Launch** a command stopped at its first instruction after `exec`
//!   ([`Tracer::launch`]), or **attach** to running processes and all their threads
//!   (`PTRACE_SEIZE` + `PTRACE_INTERRUPT`; [`Tracer::attach`], pipelined for many pids with
//!   [`Tracer::attach_many`]). New threads are followed; `exec`s are reported
//!   ([`StopEvent::Exec`]) and forget the old image's breakpoints instead of "restoring" bytes
//!   into the new one.
//! - **Breakpoints** (x86_64 `int3`; other instruction sets get
//!   [`TargetError::Unsupported`]) with explicit
//!   inserted/removed state; a hit stops only the thread that hit it. [`Tracer::step_over`]
//!   executes the instruction under a breakpoint with every other thread stopped;
//!   [`Tracer::return_from_call`] emulates the return of a `void f(void)` such as
//!   `MPIR_Breakpoint`.
//! - **Signals** that are not ours are delivered to the tracee as they arrive — also while the
//!   caller is not waiting: between requests, the tracer thread keeps polling its tracees.
//!   Job-control stops (`SIGSTOP`, `SIGTSTP`…) are kept (`PTRACE_LISTEN`), not undone.
//! - **Detach** stops the process, restores every byte it changed, and detaches every thread,
//!   which then runs on (or stays in the job-control stop it was in). Dropping the tracer
//!   detaches from everything; [`Tracer::detach_all`] is the public way for a tool to clean up
//!   when it receives `SIGINT`/`SIGTERM`. [`Tracer::write_on_detach`] adds writes of the
//!   caller's own to every way of letting go.
//! - **When the tool goes away** without dropping its tracers — told to stop, a panic, an
//!   `exit` — [`detach_on_signals`], [`detach_on_panic`] and [`detach_at_exit`] let go of
//!   every process first (see [`detach_everything`]). A panic inside a request on the tracer
//!   thread itself ends that tracer after it has detached from everything.
//!
//! Waiting polls each traced thread with `waitpid(tid, __WALL | WNOHANG)` rather than blocking
//! in `waitpid(-1)`: a library must not reap the children that the program hosting it started
//! for other reasons.

mod arch;
mod cleanup;
mod control;
mod held;
mod launch;
mod sys;

pub use cleanup::{
    detach_at_exit, detach_everything, detach_on_panic, detach_on_signals, on_request_signal,
};

use std::process::{Child, Command};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::unistd::Pid;

use crate::error::{Result, TargetError};
use control::Control;

/// What [`Tracer::wait`] saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopEvent {
    /// Thread `tid` of process `pid` hit the breakpoint at `address`; it is stopped there (its
    /// instruction pointer rewound to `address`), the other threads run on.
    Breakpoint {
        /// The process.
        pid: u32,
        /// The thread that hit it.
        tid: u32,
        /// The breakpoint.
        address: u64,
    },
    /// The process exec'd a new program and is stopped at the start of it, with one thread.
    /// Its breakpoints were in the old image and are gone; symbols must be looked up anew.
    Exec {
        /// The process.
        pid: u32,
        /// The thread that called `exec` (it now has the process id).
        former_tid: u32,
    },
    /// The process exited with `status`.
    Exited {
        /// The process.
        pid: u32,
        /// Its exit status.
        status: i32,
    },
    /// The process was killed by `signal`.
    Killed {
        /// The process.
        pid: u32,
        /// The signal.
        signal: i32,
    },
    /// The process is no longer ours and its end was not reported to us (another thread of
    /// this program collected its exit status).
    Gone {
        /// The process.
        pid: u32,
    },
}

impl StopEvent {
    /// The process concerned.
    pub fn pid(&self) -> u32 {
        match *self {
            StopEvent::Breakpoint { pid, .. }
            | StopEvent::Exec { pid, .. }
            | StopEvent::Exited { pid, .. }
            | StopEvent::Killed { pid, .. }
            | StopEvent::Gone { pid } => pid,
        }
    }

    /// Whether the process is gone (and no longer traced).
    pub fn is_end(&self) -> bool {
        matches!(
            self,
            StopEvent::Exited { .. } | StopEvent::Killed { .. } | StopEvent::Gone { .. }
        )
    }
}

/// How the tracer writes into a tracee.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum WriteMode {
    /// `/proc/PID/mem`, falling back to `PTRACE_POKEDATA` (kernels booted with
    /// `proc_mem.force_override=never` refuse `/proc/PID/mem` writes to read-only text).
    #[default]
    Auto,
    /// `/proc/PID/mem` only.
    ProcMem,
    /// `PTRACE_POKEDATA` only, word by word through a stopped thread.
    Ptrace,
}

/// Settings of a [`Tracer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct TracerOptions {
    /// How breakpoints and [`Tracer::write_memory`] write.
    pub write_mode: WriteMode,
    /// How long interrupted threads get to report their stop (attach, stop-all, detach)
    /// before the request fails naming them; a thread in uninterruptible sleep (a hung NFS
    /// read) can take arbitrarily long. Default 10 s.
    pub stop_timeout: Duration,
    /// How long an attach refused because another tracer holds the process
    /// ([`AccessDenial::TracedBy`](mpir_types::access::AccessDenial::TracedBy), the one
    /// transient denial) waits for that tracer to let go before it is reported as refused;
    /// every other refusal is reported at once. Zero reports it at once too.
    ///
    /// Default 5 s: long enough for another `mpir` read of the same job to finish. Measured on
    /// the 3-rank MPICH ring of `mpir-cli`'s tests (Debian's MPICH 4.0.2, 2 busy cores, a
    /// debug build of `mpir deadlock --json`, 3 samples, `TracerPid` polled every 0.3 ms):
    /// the starter is held 0.86–1.02 s (from the acquisition to the end of the first sample,
    /// which reads the ranks held from the acquisition), each rank 0.66–0.86 s in that first
    /// sample and 2–16 ms in each later one; the whole command takes 1.45–1.70 s. Two such
    /// commands started together: the second waited 0.9–1.2 s for the starter; with two
    /// CPU hogs on the same 2 cores, each held the starter 1.1–4.4 s and a whole command took
    /// 4.7–9.0 s. The default, 15 s, covers one whole other read on that loaded machine (the
    /// holder may be at any point of its command when this one starts); a holder that never
    /// lets go (a debugger at its prompt) is reported once 15 s have passed, once per program.
    /// Give more on a busy node or for a large job, less where waiting costs more than a
    /// missing rank.
    /// A holder that outlasts the whole wait is not waited for again, in this program, for the
    /// same process (a sampled read reports it at once in later samples).
    pub held_wait: Duration,
}

impl Default for TracerOptions {
    fn default() -> Self {
        TracerOptions {
            write_mode: WriteMode::default(),
            stop_timeout: Duration::from_secs(10),
            held_wait: Duration::from_secs(15),
        }
    }
}

impl TracerOptions {
    /// With this stop timeout.
    pub fn with_stop_timeout(mut self, stop_timeout: Duration) -> Self {
        self.stop_timeout = stop_timeout;
        self
    }

    /// With this wait for another tracer to let go of a process ([`TracerOptions::held_wait`]).
    pub fn with_held_wait(mut self, held_wait: Duration) -> Self {
        self.held_wait = held_wait;
        self
    }

    /// With `write_mode`.
    pub fn with_write_mode(mut self, write_mode: WriteMode) -> Self {
        self.write_mode = write_mode;
        self
    }
}

pub(crate) fn control_err(pid: Pid, operation: &str, e: impl std::fmt::Display) -> TargetError {
    control_err_as(pid, operation, e, crate::ControlCause::Other)
}

/// A [`TargetError::Control`] of a known kind.
pub(crate) fn control_err_as(
    pid: Pid,
    operation: &str,
    e: impl std::fmt::Display,
    cause: crate::ControlCause,
) -> TargetError {
    TargetError::Control {
        pid: pid.as_raw().max(0) as u32,
        operation: operation.to_string(),
        reason: e.to_string(),
        cause,
    }
}

/// The kind of failure an `errno` from a ptrace request means.
pub(crate) fn cause_of(e: nix::errno::Errno) -> crate::ControlCause {
    match e {
        nix::errno::Errno::EPERM | nix::errno::Errno::EACCES => {
            crate::ControlCause::PermissionDenied
        }
        nix::errno::Errno::ESRCH => crate::ControlCause::Gone,
        _ => crate::ControlCause::Other,
    }
}

type Job = Box<dyn FnOnce(&mut Control) + Send>;

/// Shortest and longest pause between two polls of an idle tracer thread.
const IDLE_POLL: (Duration, Duration) = (Duration::from_millis(1), Duration::from_millis(20));

/// A ptrace tracer on its own thread. See the [module documentation](self).
#[derive(Debug)]
pub struct Tracer {
    id: u64,
    /// [`TracerOptions::held_wait`]: waited out on the caller's thread ([`held`]).
    held_wait: Duration,
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Tracer {
    /// Starts the tracer thread with default options.
    pub fn new() -> Result<Self> {
        Self::with_options(TracerOptions::default())
    }

    /// Starts the tracer thread.
    pub fn with_options(options: TracerOptions) -> Result<Self> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let interrupted = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = std::sync::Arc::clone(&interrupted);
        let id = cleanup::new_id();
        let thread = std::thread::Builder::new()
            .name("mpir-tracer".into())
            .spawn(move || {
                cleanup::mark_tracer_thread(id);
                let mut control = Control::new(options, flag);
                let mut pause = IDLE_POLL.0;
                loop {
                    let job = if control.has_tracees() {
                        rx.recv_timeout(pause)
                    } else {
                        rx.recv().map_err(|_| RecvTimeoutError::Disconnected)
                    };
                    match job {
                        Ok(job) => {
                            // A panic in a request (a bug of ours) must not leave breakpoints
                            // in the tracees: this tracer is finished, but it detaches first.
                            // The caller sees "the tracer thread has stopped".
                            let run = std::panic::AssertUnwindSafe(|| job(&mut control));
                            if std::panic::catch_unwind(run).is_err() {
                                break;
                            }
                            pause = IDLE_POLL.0;
                        }
                        // Between requests: deliver signals, follow threads, queue events.
                        Err(RecvTimeoutError::Timeout) => match control.poll() {
                            Ok(true) => pause = IDLE_POLL.0,
                            _ => pause = (pause * 2).min(IDLE_POLL.1),
                        },
                        Err(RecvTimeoutError::Disconnected) => break,
                    }
                }
                // The tracer is going away: leave every tracee as we found it.
                let _ = control.detach_all();
            })
            .map_err(|e| control_err(Pid::from_raw(0), "start the tracer thread", e))?;
        cleanup::register(id, jobs.clone(), interrupted);
        Ok(Tracer {
            id,
            held_wait: options.held_wait,
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Control) -> R + Send + 'static,
    ) -> Result<R> {
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move |c| {
            let _ = tx.send(f(c));
        });
        let gone = || control_err(Pid::from_raw(0), "call the tracer thread", "it has stopped");
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())
    }

    /// Runs `command` under control: the process is stopped at the first instruction of the
    /// new program (in the dynamic loader, before any library is loaded), traced like an
    /// attached process. Its stdio is as `command` sets it.
    ///
    /// The returned [`Child`] gives the pid and the pipes. Do not `wait` on it while the
    /// process is traced (the tracer collects its stops; its exit is reported by
    /// [`Tracer::wait`], after which the `Child` has nothing left to wait for); after
    /// [`Tracer::detach`], waiting on it is how its exit status is collected.
    pub fn launch(&self, command: Command) -> Result<Child> {
        self.call(move |c| c.launch(command))?
    }

    /// Attaches to `pid` and all its threads, leaving them stopped; returns the thread ids.
    pub fn attach(&self, pid: u32) -> Result<Vec<u32>> {
        let mut results = self.attach_many(&[pid])?;
        results.pop().unwrap_or_else(|| {
            Err(control_err(
                Pid::from_raw(pid as i32),
                "attach",
                "no result",
            ))
        })
    }

    /// Attaches to every process of `pids` (all threads, left stopped), overlapping the
    /// round trips: all are seized, then all interrupted, then all stops collected. One
    /// result per pid, in order; a process that exits meanwhile is an error of its own.
    ///
    /// A process refused because another tracer holds it is attached once that tracer lets
    /// go, waiting up to [`TracerOptions::held_wait`] (on this thread; the tracer thread goes
    /// on serving the processes it holds); while it waits, the processes of this batch that
    /// were attached are let go, and the batch is taken again (two tools attaching the same
    /// job must not each hold what the other waits for). Past the wait, the refusal is
    /// reported as [`TargetError::Denied`] naming the holder. A refusal nothing in `/proc`
    /// explains (`unexplained`: a tracer that let go before it was seen leaves no trace) is
    /// asked again up to 5 times, 10 ms apart. Any other refusal is reported at once.
    pub fn attach_many(&self, pids: &[u32]) -> Result<Vec<Result<Vec<u32>>>> {
        let mut results = self.attach_batch(pids)?;
        if self.held_wait.is_zero() {
            return Ok(results);
        }
        let deadline = std::time::Instant::now() + self.held_wait;
        let mut asked_again = 0;
        loop {
            let held: Vec<(u32, u32)> = results
                .iter()
                .filter_map(|r| held::held_by(r.as_ref().err()?))
                .filter(|&(pid, holder)| !held::outlasted(pid, holder))
                .collect();
            let unexplained = asked_again < held::UNEXPLAINED_TRIES
                && results
                    .iter()
                    .any(|r| r.as_ref().err().is_some_and(held::unexplained));
            if held.is_empty() && !unexplained {
                return Ok(results);
            }
            if unexplained {
                asked_again += 1;
            }
            // Let go of what this batch got, then take it again with the held ones.
            let got: Vec<u32> = pids
                .iter()
                .zip(&results)
                .filter(|(_, r)| r.is_ok())
                .map(|(&p, _)| p)
                .collect();
            let again: Vec<usize> = (0..pids.len())
                .filter(|&i| {
                    results.get(i).is_some_and(|r| match r {
                        Ok(_) => true,
                        Err(e) => {
                            held::held_by(e).is_some() || (unexplained && held::unexplained(e))
                        }
                    })
                })
                .collect();
            if !got.is_empty() {
                self.detach_many(&got)?;
            }
            let free = if held.is_empty() {
                std::thread::sleep(held::POLL);
                true
            } else {
                held::wait_for_release(&held, deadline)
            };
            if free && !got.is_empty() {
                held::stagger();
            }
            let retry: Vec<u32> = again.iter().filter_map(|&i| pids.get(i).copied()).collect();
            for (i, r) in again.into_iter().zip(self.attach_batch(&retry)?) {
                if let Some(slot) = results.get_mut(i) {
                    *slot = r;
                }
            }
            if !free || std::time::Instant::now() >= deadline {
                // The bound passed: the last answer names the holders as they are now.
                return Ok(results);
            }
        }
    }

    /// One attach request for `pids` to the tracer thread, no waiting.
    fn attach_batch(&self, pids: &[u32]) -> Result<Vec<Result<Vec<u32>>>> {
        let pids = pids.to_vec();
        self.call(move |c| c.attach_many(&pids))
    }

    /// The processes this tracer holds.
    pub fn pids(&self) -> Result<Vec<u32>> {
        self.call(|c| c.pids())
    }

    /// Plants a breakpoint at `address` in `pid`.
    pub fn insert_breakpoint(&self, pid: u32, address: u64) -> Result<()> {
        self.call(move |c| c.insert_breakpoint(pid as i32, address))?
    }

    /// Removes the breakpoint at `address`, restoring the original bytes.
    pub fn remove_breakpoint(&self, pid: u32, address: u64) -> Result<()> {
        self.call(move |c| c.remove_breakpoint(pid as i32, address))?
    }

    /// Writes `data` at `address` of `pid` (see [`WriteMode`]).
    pub fn write_memory(&self, pid: u32, address: u64, data: &[u8]) -> Result<()> {
        let data = data.to_vec();
        self.call(move |c| c.write_memory(pid as i32, address, &data))?
    }

    /// Registers a write that this tracer makes into `pid` just before it detaches from it,
    /// whichever way it lets go: [`Tracer::detach`], [`Tracer::detach_many`],
    /// [`Tracer::detach_leaving_stopped`], [`Tracer::detach_all`], dropping the tracer,
    /// [`detach_everything`] (so also [`detach_on_signals`], [`detach_on_panic`] and
    /// [`detach_at_exit`]). This is how a tool makes sure that what the job needs from a
    /// debugger that goes away is done even if the tool is interrupted, e.g. a starter's
    /// `MPIR_being_debugged` back to 0 or a rank's `MPIR_debug_gate` set to 1.
    ///
    /// A later registration at the same address replaces the earlier one; empty `data`
    /// forgets the address. The registrations are forgotten when the process execs (their
    /// addresses belonged to the old image) and once made. Nothing is written now.
    pub fn write_on_detach(&self, pid: u32, address: u64, data: &[u8]) -> Result<()> {
        let data = data.to_vec();
        self.call(move |c| c.write_on_detach(pid as i32, address, &data))?
    }

    /// Forgets every write registered with [`Tracer::write_on_detach`] for `pid` (e.g. before
    /// handing the process over to another tool that will do them itself).
    pub fn forget_writes_on_detach(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.forget_writes_on_detach(pid as i32))?
    }

    /// Lets every stopped thread of `pid` run, delivering signals held for them.
    pub fn resume(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.resume(pid as i32))?
    }

    /// Stops every thread of `pid`.
    pub fn stop_all(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.stop_all(pid as i32))?
    }

    /// Waits up to `timeout` for a breakpoint hit, an exec or an end in any traced process;
    /// `None` on timeout (or when nothing is traced). Signals that are not ours are delivered
    /// as they arrive.
    pub fn wait(&self, timeout: Duration) -> Result<Option<StopEvent>> {
        self.call(move |c| c.wait(timeout))?
    }

    /// Makes thread `tid` of `pid`, stopped at the entry of a `void f(void)` (e.g. at a
    /// breakpoint on `MPIR_Breakpoint`), return from it.
    pub fn return_from_call(&self, pid: u32, tid: u32) -> Result<()> {
        self.call(move |c| c.return_from_call(pid as i32, tid as i32))?
    }

    /// The registers of thread `tid` of `pid`, which must be stopped (attached, or at a
    /// breakpoint), for [`Unwinder`](crate::unwind::Unwinder). x86_64 (and i386 threads under
    /// it) only; elsewhere [`TargetError::Unsupported`].
    pub fn registers(&self, pid: u32, tid: u32) -> Result<crate::unwind::Registers> {
        self.call(move |c| c.registers(pid as i32, tid as i32))?
    }

    /// The registers of several stopped threads of `pid`, in one round trip to the tracer
    /// thread: one result per thread, in order.
    pub fn registers_many(
        &self,
        pid: u32,
        tids: &[u32],
    ) -> Result<Vec<Result<crate::unwind::Registers>>> {
        let tids = tids.to_vec();
        self.call(move |c| {
            tids.iter()
                .map(|&t| c.registers(pid as i32, t as i32))
                .collect()
        })
    }

    /// The registers of several stopped threads of `pid` as a core file stores them (general
    /// and floating-point sets), in one round trip: one result per thread, in order. x86-64
    /// threads only.
    pub(crate) fn core_registers_many(
        &self,
        pid: u32,
        tids: &[u32],
    ) -> Result<Vec<Result<crate::corefile::write::ThreadRegisters>>> {
        let tids = tids.to_vec();
        self.call(move |c| {
            tids.iter()
                .map(|&t| c.core_registers(pid as i32, t as i32))
                .collect()
        })
    }

    /// Executes the instruction under the breakpoint where thread `tid` is stopped, with every
    /// other thread of `pid` stopped, then puts the breakpoint back. All threads are left
    /// stopped; [`Tracer::resume`] continues.
    pub fn step_over(&self, pid: u32, tid: u32) -> Result<()> {
        self.call(move |c| c.step_over(pid as i32, tid as i32))?
    }

    /// Restores every byte changed in `pid`, makes the writes registered with
    /// [`Tracer::write_on_detach`], and detaches from all its threads, which run on.
    pub fn detach(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.detach(pid as i32))?
    }

    /// Restores every byte changed in `pid` and detaches from all its threads, leaving the
    /// process stopped (a job-control stop, as after `SIGSTOP`) for another tool to attach to;
    /// `SIGCONT` lets it run.
    pub fn detach_leaving_stopped(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.detach_leaving_stopped(pid as i32))?
    }

    /// Detaches from every process of `pids` (pipelined like [`Tracer::attach_many`]); one
    /// result per pid.
    pub fn detach_many(&self, pids: &[u32]) -> Result<Vec<Result<()>>> {
        let pids = pids.to_vec();
        self.call(move |c| c.detach_many(&pids))
    }

    /// Detaches from every process this tracer holds (restoring their bytes) and returns their
    /// pids. This is what a tool calls when it is told to stop (SIGINT, SIGTERM): from the
    /// thread that receives the signal (e.g. with the `signal-hook` crate's iterator), call
    /// `detach_all` and then exit. Never call it from inside a signal handler itself.
    pub fn detach_all(&self) -> Result<Vec<u32>> {
        self.call(Control::detach_all)?
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        cleanup::unregister(self.id);
        drop(self.jobs.take()); // the thread detaches from everything, then ends
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
