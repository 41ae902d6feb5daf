//! Process control through ptrace, from one dedicated thread (ptrace is per-thread: every
//! request about a tracee must come from the thread that attached it).
//!
//! [`Tracer`] owns that thread; each method sends a closure to it and waits for the answer.
//! What it does today: attach to a running process and all its threads (SEIZE + INTERRUPT),
//! follow new threads, software breakpoints (x86_64 `int3`), a wait loop that reports
//! breakpoint hits and exits and re-injects every signal that is not ours, stopping all
//! threads, emulating the return of a `void f(void)` such as `MPIR_Breakpoint`, and detach that
//! restores every byte it changed and leaves every thread running. Dropping the tracer detaches
//! from everything. Launching a command under control is the next step.

use std::collections::{BTreeMap, HashMap};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpir_types::DataModel;
use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;

use super::LiveMemory;
use crate::error::{Result, TargetError};
use crate::ext::MemoryExt;
use crate::traits::Memory;

/// The x86 breakpoint instruction.
const INT3: u8 = 0xcc;
/// Most rounds of "seize the threads that appeared meanwhile" during an attach.
const ATTACH_ROUNDS: usize = 64;

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
}

#[derive(Debug, Default)]
struct ThreadState {
    stopped: bool,
    /// A signal that arrived while we held the thread, delivered when it runs again.
    pending: Option<Signal>,
}

#[derive(Debug)]
struct Traced {
    threads: BTreeMap<i32, ThreadState>,
    breakpoints: BTreeMap<u64, u8>,
    memory: LiveMemory,
}

#[derive(Debug, Default)]
struct Control {
    procs: HashMap<i32, Traced>,
    /// Thread id to process id.
    owner: HashMap<i32, i32>,
    /// Breakpoint hits seen while doing something else, reported by the next wait.
    queued: Vec<StopEvent>,
}

fn control_err(pid: i32, operation: &str, e: impl std::fmt::Display) -> TargetError {
    TargetError::Control {
        pid: pid as u32,
        operation: operation.to_string(),
        reason: e.to_string(),
    }
}

fn tasks(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

impl Control {
    fn traced(&mut self, pid: i32) -> Result<&mut Traced> {
        self.procs
            .get_mut(&pid)
            .ok_or_else(|| control_err(pid, "find", "not attached"))
    }

    fn attach(&mut self, pid: i32) -> Result<Vec<u32>> {
        if self.procs.contains_key(&pid) {
            return Err(control_err(pid, "attach", "already attached"));
        }
        let memory = LiveMemory::new(pid as u32, DataModel::host());
        let mut traced = Traced {
            threads: BTreeMap::new(),
            breakpoints: BTreeMap::new(),
            memory,
        };
        // Threads can appear while we seize: repeat until a round finds none new.
        for _ in 0..ATTACH_ROUNDS {
            let fresh: Vec<i32> = tasks(pid)
                .into_iter()
                .filter(|t| !traced.threads.contains_key(t))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for t in fresh {
                match ptrace::seize(Pid::from_raw(t), Options::PTRACE_O_TRACECLONE) {
                    Ok(()) => {
                        traced.threads.insert(t, ThreadState::default());
                        self.owner.insert(t, pid);
                    }
                    Err(Errno::ESRCH) => {} // the thread exited meanwhile
                    Err(e) => {
                        // Leave nothing half-attached.
                        for &done in traced.threads.keys() {
                            let _ = ptrace::detach(Pid::from_raw(done), None);
                            self.owner.remove(&done);
                        }
                        return Err(control_err(pid, "attach (PTRACE_SEIZE)", e));
                    }
                }
            }
        }
        if traced.threads.is_empty() {
            return Err(control_err(pid, "attach", "no such process"));
        }
        self.procs.insert(pid, traced);
        self.stop_all(pid)?;
        Ok(self
            .traced(pid)?
            .threads
            .keys()
            .map(|&t| t as u32)
            .collect())
    }

    /// Interrupts every running thread of `pid` and waits until each is stopped.
    fn stop_all(&mut self, pid: i32) -> Result<()> {
        let running: Vec<i32> = self
            .traced(pid)?
            .threads
            .iter()
            .filter(|(_, s)| !s.stopped)
            .map(|(&t, _)| t)
            .collect();
        for &t in &running {
            let _ = ptrace::interrupt(Pid::from_raw(t));
        }
        for t in running {
            self.wait_for_stop(pid, t)?;
        }
        Ok(())
    }

    /// Waits for thread `t`, which was interrupted, to report a stop.
    fn wait_for_stop(&mut self, pid: i32, t: i32) -> Result<()> {
        loop {
            match waitpid(Pid::from_raw(t), Some(WaitPidFlag::__WALL)) {
                Ok(WaitStatus::PtraceEvent(_, _, _)) => break,
                Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => {
                    // A breakpoint hit raced with our interrupt: keep it for the next wait,
                    // then collect the interrupt's stop.
                    if let Some(ev) = self.breakpoint_hit(pid, t)? {
                        self.queued.push(ev);
                    } else {
                        self.set_pending(pid, t, Signal::SIGTRAP);
                    }
                    let _ = ptrace::cont(Pid::from_raw(t), None);
                }
                Ok(WaitStatus::Stopped(_, sig)) => {
                    // Someone else's signal: remember it, deliver it when the thread resumes.
                    self.set_pending(pid, t, sig);
                    let _ = ptrace::cont(Pid::from_raw(t), None);
                }
                Ok(WaitStatus::Exited(..) | WaitStatus::Signaled(..)) | Err(Errno::ECHILD) => {
                    self.forget_thread(pid, t);
                    return Ok(());
                }
                Ok(_) => {}
                Err(Errno::EINTR) => {}
                Err(e) => return Err(control_err(t, "wait for stop", e)),
            }
        }
        if let Some(s) = self.traced(pid)?.threads.get_mut(&t) {
            s.stopped = true;
        }
        Ok(())
    }

    fn set_pending(&mut self, pid: i32, t: i32, sig: Signal) {
        if let Some(s) = self.procs.get_mut(&pid).and_then(|p| p.threads.get_mut(&t)) {
            s.pending = Some(sig);
        }
    }

    fn forget_thread(&mut self, pid: i32, t: i32) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.threads.remove(&t);
        }
        self.owner.remove(&t);
    }

    /// If `t` stopped just after one of our `int3`s, rewinds it and says so.
    fn breakpoint_hit(&mut self, pid: i32, t: i32) -> Result<Option<StopEvent>> {
        let mut regs =
            ptrace::getregs(Pid::from_raw(t)).map_err(|e| control_err(t, "PTRACE_GETREGS", e))?;
        let address = regs.rip.wrapping_sub(1);
        if !self.traced(pid)?.breakpoints.contains_key(&address) {
            return Ok(None);
        }
        regs.rip = address;
        ptrace::setregs(Pid::from_raw(t), regs).map_err(|e| control_err(t, "PTRACE_SETREGS", e))?;
        if let Some(s) = self.traced(pid)?.threads.get_mut(&t) {
            s.stopped = true;
        }
        Ok(Some(StopEvent::Breakpoint {
            pid: pid as u32,
            tid: t as u32,
            address,
        }))
    }

    fn insert_breakpoint(&mut self, pid: i32, address: u64) -> Result<()> {
        let traced = self.traced(pid)?;
        if traced.breakpoints.contains_key(&address) {
            return Ok(());
        }
        let mut original = [0u8];
        traced.memory.read_exact(address, &mut original)?;
        traced.memory.write(address, &[INT3])?;
        traced.breakpoints.insert(address, original[0]);
        Ok(())
    }

    fn remove_breakpoint(&mut self, pid: i32, address: u64) -> Result<()> {
        let traced = self.traced(pid)?;
        if let Some(original) = traced.breakpoints.remove(&address) {
            traced.memory.write(address, &[original])?;
        }
        Ok(())
    }

    fn resume(&mut self, pid: i32) -> Result<()> {
        let traced = self.traced(pid)?;
        let mut gone = Vec::new();
        for (&t, s) in traced.threads.iter_mut().filter(|(_, s)| s.stopped) {
            match ptrace::cont(Pid::from_raw(t), s.pending.take()) {
                Ok(()) => s.stopped = false,
                Err(Errno::ESRCH) => gone.push(t),
                Err(e) => return Err(control_err(t, "PTRACE_CONT", e)),
            }
        }
        for t in gone {
            self.forget_thread(pid, t);
        }
        Ok(())
    }

    /// Emulates `ret` in thread `t` stopped at the entry of a `void f(void)`.
    fn return_from_call(&mut self, pid: i32, t: i32) -> Result<()> {
        let tp = Pid::from_raw(t);
        let mut regs = ptrace::getregs(tp).map_err(|e| control_err(t, "PTRACE_GETREGS", e))?;
        let memory = &self.traced(pid)?.memory;
        regs.rip = memory.read_pointer(regs.rsp, "return address")?;
        regs.rsp = regs.rsp.wrapping_add(8);
        ptrace::setregs(tp, regs).map_err(|e| control_err(t, "PTRACE_SETREGS", e))
    }

    /// Waits for the next event of a traced thread. Only traced threads are polled: a
    /// `waitpid(-1)` would also reap children the host program started for other reasons.
    fn wait(&mut self, timeout: Duration) -> Result<Option<StopEvent>> {
        if !self.queued.is_empty() {
            return Ok(Some(self.queued.remove(0)));
        }
        // A caller may pass Duration::MAX for "no timeout".
        let deadline = Instant::now().checked_add(timeout);
        loop {
            if self.procs.is_empty() {
                return Ok(None);
            }
            let mut seen = false;
            let tids: Vec<(i32, i32)> = self.owner.iter().map(|(&t, &p)| (t, p)).collect();
            for (t, pid) in tids {
                let flags = WaitPidFlag::__WALL | WaitPidFlag::WNOHANG;
                let status = match waitpid(Pid::from_raw(t), Some(flags)) {
                    Ok(WaitStatus::StillAlive) | Err(Errno::EINTR) => continue,
                    Ok(s) => s,
                    Err(Errno::ECHILD) => {
                        self.forget_thread(pid, t);
                        continue;
                    }
                    Err(e) => return Err(control_err(t, "waitpid", e)),
                };
                seen = true;
                if let Some(ev) = self.handle(pid, t, status)? {
                    return Ok(Some(ev));
                }
            }
            if !seen {
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(None);
                }
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    }

    /// Acts on one wait status of thread `t` of `pid`; returns what the caller must hear of.
    fn handle(&mut self, pid: i32, t: i32, status: WaitStatus) -> Result<Option<StopEvent>> {
        match status {
            WaitStatus::PtraceEvent(_, _, ev) if ev == ptrace::Event::PTRACE_EVENT_CLONE as i32 => {
                if let Ok(new) = ptrace::getevent(Pid::from_raw(t)) {
                    let new = new as i32;
                    self.owner.insert(new, pid);
                    if let Some(p) = self.procs.get_mut(&pid) {
                        p.threads.entry(new).or_default();
                    }
                }
                let _ = ptrace::cont(Pid::from_raw(t), None);
            }
            WaitStatus::PtraceEvent(..) => {
                // A new thread's first stop, or a group-stop: let it run.
                let _ = ptrace::cont(Pid::from_raw(t), None);
            }
            WaitStatus::Stopped(_, Signal::SIGTRAP) => match self.breakpoint_hit(pid, t)? {
                Some(ev) => return Ok(Some(ev)),
                None => {
                    let _ = ptrace::cont(Pid::from_raw(t), Signal::SIGTRAP);
                }
            },
            WaitStatus::Stopped(_, sig) => {
                let _ = ptrace::cont(Pid::from_raw(t), sig); // not ours: deliver it
            }
            WaitStatus::Exited(_, status) => {
                self.forget_thread(pid, t);
                if t == pid {
                    self.procs.remove(&pid);
                    return Ok(Some(StopEvent::Exited {
                        pid: pid as u32,
                        status,
                    }));
                }
            }
            WaitStatus::Signaled(_, sig, _) => {
                self.forget_thread(pid, t);
                if t == pid {
                    self.procs.remove(&pid);
                    return Ok(Some(StopEvent::Killed {
                        pid: pid as u32,
                        signal: sig as i32,
                    }));
                }
            }
            _ => {}
        }
        Ok(None)
    }

    /// Stops every thread, restores every byte, detaches every thread (they run again).
    fn detach(&mut self, pid: i32) -> Result<()> {
        self.stop_all(pid)?;
        let addresses: Vec<u64> = self.traced(pid)?.breakpoints.keys().copied().collect();
        let mut first_error = None;
        for a in addresses {
            if let Err(e) = self.remove_breakpoint(pid, a) {
                first_error.get_or_insert(e);
            }
        }
        let traced = self
            .procs
            .remove(&pid)
            .ok_or_else(|| control_err(pid, "detach", "not attached"))?;
        for (t, s) in traced.threads {
            self.owner.remove(&t);
            match ptrace::detach(Pid::from_raw(t), s.pending) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => {
                    first_error.get_or_insert(control_err(t, "PTRACE_DETACH", e));
                }
            }
        }
        self.queued
            .retain(|ev| !matches!(ev, StopEvent::Breakpoint { pid: p, .. } if *p as i32 == pid));
        first_error.map_or(Ok(()), Err)
    }

    /// Detaches from every process; returns the first error, after trying them all.
    fn detach_all(&mut self) -> Result<Vec<u32>> {
        let pids: Vec<i32> = self.procs.keys().copied().collect();
        let mut first_error = None;
        for &pid in &pids {
            if let Err(e) = self.detach(pid) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(pids.iter().map(|&p| p as u32).collect()), Err)
    }
}

type Job = Box<dyn FnOnce(&mut Control) + Send>;

/// A ptrace tracer on its own thread. See the [module documentation](self).
#[derive(Debug)]
pub struct Tracer {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Tracer {
    /// Starts the tracer thread.
    pub fn new() -> Result<Self> {
        let (jobs, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("mpir-tracer".into())
            .spawn(move || {
                let mut control = Control::default();
                while let Ok(job) = rx.recv() {
                    job(&mut control);
                }
                // The tracer is going away: leave every tracee as we found it.
                let _ = control.detach_all();
            })
            .map_err(|e| control_err(0, "start the tracer thread", e))?;
        Ok(Tracer {
            jobs: Some(jobs),
            thread: Some(thread),
        })
    }

    fn call<R: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Control) -> Result<R> + Send + 'static,
    ) -> Result<R> {
        let (tx, rx) = mpsc::channel();
        let job: Job = Box::new(move |c| {
            let _ = tx.send(f(c));
        });
        let gone = || control_err(0, "call the tracer thread", "it has stopped");
        self.jobs
            .as_ref()
            .ok_or_else(gone)?
            .send(job)
            .map_err(|_| gone())?;
        rx.recv().map_err(|_| gone())?
    }

    /// Attaches to `pid` and all its threads, leaving them stopped; returns the thread ids.
    pub fn attach(&self, pid: u32) -> Result<Vec<u32>> {
        self.call(move |c| c.attach(pid as i32))
    }

    /// Plants a breakpoint at `address` in `pid`.
    pub fn insert_breakpoint(&self, pid: u32, address: u64) -> Result<()> {
        self.call(move |c| c.insert_breakpoint(pid as i32, address))
    }

    /// Removes the breakpoint at `address`, restoring the original byte.
    pub fn remove_breakpoint(&self, pid: u32, address: u64) -> Result<()> {
        self.call(move |c| c.remove_breakpoint(pid as i32, address))
    }

    /// Lets every stopped thread of `pid` run, delivering signals held for them.
    pub fn resume(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.resume(pid as i32))
    }

    /// Stops every thread of `pid`.
    pub fn stop_all(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.stop_all(pid as i32))
    }

    /// Waits up to `timeout` for a breakpoint hit or an exit in any traced process; `None` on
    /// timeout. Signals that are not ours are delivered as they arrive.
    pub fn wait(&self, timeout: Duration) -> Result<Option<StopEvent>> {
        self.call(move |c| c.wait(timeout))
    }

    /// Makes thread `tid` of `pid`, stopped at the entry of a `void f(void)` (e.g. at a
    /// breakpoint on `MPIR_Breakpoint`), return from it (x86_64).
    pub fn return_from_call(&self, pid: u32, tid: u32) -> Result<()> {
        self.call(move |c| c.return_from_call(pid as i32, tid as i32))
    }

    /// Restores every byte changed in `pid` and detaches from all its threads, which run on.
    pub fn detach(&self, pid: u32) -> Result<()> {
        self.call(move |c| c.detach(pid as i32))
    }

    /// Detaches from every process this tracer holds (restoring their bytes) and returns their
    /// pids. This is what a tool calls when it is told to stop (SIGINT, SIGTERM): from the
    /// thread that receives the signal (e.g. with the `signal-hook` crate's iterator), call
    /// `detach_all` and then exit. Never call it from inside a signal handler itself.
    pub fn detach_all(&self) -> Result<Vec<u32>> {
        self.call(Control::detach_all)
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        drop(self.jobs.take()); // the thread detaches from everything, then ends
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
