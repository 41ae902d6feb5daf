//! The tracer's state and every ptrace request; runs on the tracer thread only.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use mpir_types::DataModel;
use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::unistd::Pid;

mod detach;
mod memory;
mod refused;

use super::sys::{self, Status};
use super::{StopEvent, TracerOptions, arch, control_err, control_err_as, launch};
use crate::error::Result;
use crate::ext::MemoryExt;
use crate::live::LiveMemory;
use refused::{thread_exited, traced_by_us, unattachable, unattachable_task};

/// Most rounds of "seize the threads that appeared meanwhile" during an attach.
const ATTACH_ROUNDS: usize = 64;
/// Options of every tracee: follow new threads, report execs.
const OPTIONS: Options = Options::PTRACE_O_TRACECLONE.union(Options::PTRACE_O_TRACEEXEC);

#[derive(Debug, Default)]
struct ThreadState {
    /// In a ptrace-stop we caused or hold (not running, not listening).
    stopped: bool,
    /// A signal to deliver when the thread runs again. Set only while the thread sits in the
    /// signal-delivery-stop of that signal (the only stop from which the kernel injects one).
    pending: i32,
    /// The process is in a job-control stop (`SIGSTOP`…): resume means "listen", not "run".
    group_stop: bool,
}

#[derive(Debug)]
struct Traced {
    threads: BTreeMap<i32, ThreadState>,
    /// Original bytes under each breakpoint.
    breakpoints: BTreeMap<u64, Vec<u8>>,
    /// Bytes to write just before detaching, whichever way we let go (see
    /// [`super::Tracer::write_on_detach`]).
    parting: BTreeMap<u64, Vec<u8>>,
    memory: LiveMemory,
}

impl Traced {
    fn new(pid: i32) -> Self {
        Traced {
            threads: BTreeMap::new(),
            breakpoints: BTreeMap::new(),
            parting: BTreeMap::new(),
            memory: LiveMemory::new(pid as u32, DataModel::host()),
        }
    }
}

/// Everything the tracer thread knows.
#[derive(Debug, Default)]
pub(super) struct Control {
    options: TracerOptions,
    procs: HashMap<i32, Traced>,
    /// Thread id to process id.
    owner: HashMap<i32, i32>,
    /// Events seen while doing something else, reported by the next wait.
    queued: VecDeque<StopEvent>,
    /// Threads that an exec killed, whose exit is still to be collected.
    reap: Vec<i32>,
    /// Set by [`super::detach_everything`]: waits end early, nothing new is attached.
    interrupted: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

fn tasks(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn is_stop_signal(signal: i32) -> bool {
    [libc::SIGSTOP, libc::SIGTSTP, libc::SIGTTIN, libc::SIGTTOU].contains(&signal)
}

impl Control {
    pub(super) fn new(
        options: TracerOptions,
        interrupted: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> Self {
        Control {
            options,
            interrupted,
            ..Control::default()
        }
    }

    fn is_interrupted(&self) -> bool {
        self.interrupted.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn refuse_if_interrupted(&self, pid: i32) -> Result<()> {
        if self.is_interrupted() {
            return Err(control_err(
                Pid::from_raw(pid),
                "trace",
                "the tracer was told to let go of everything (detach_everything)",
            ));
        }
        Ok(())
    }

    fn traced(&mut self, pid: i32) -> Result<&mut Traced> {
        self.procs
            .get_mut(&pid)
            .ok_or_else(|| control_err(Pid::from_raw(pid), "find", "not attached"))
    }

    fn thread(&mut self, pid: i32, t: i32) -> Option<&mut ThreadState> {
        self.procs.get_mut(&pid)?.threads.get_mut(&t)
    }

    /// The processes held.
    pub(super) fn pids(&self) -> Vec<u32> {
        let mut pids: Vec<u32> = self.procs.keys().map(|&p| p as u32).collect();
        pids.sort_unstable();
        pids
    }

    /// Whether there is anything for an idle poll to look at.
    pub(super) fn has_tracees(&self) -> bool {
        !self.procs.is_empty() || !self.reap.is_empty()
    }

    // ---- launch and attach ----

    pub(super) fn launch(&mut self, command: Command) -> Result<Child> {
        self.refuse_if_interrupted(0)?;
        let child = launch::spawn_seized(command, |pid| {
            ptrace::seize(pid, OPTIONS).map_err(|e| unattachable(pid, "launch (PTRACE_SEIZE)", e))
        })?;
        let pid = child.id() as i32;
        let mut traced = Traced::new(pid);
        traced.threads.insert(
            pid,
            ThreadState {
                stopped: true,
                ..ThreadState::default()
            },
        );
        self.owner.insert(pid, pid);
        self.procs.insert(pid, traced);
        Ok(child)
    }

    /// Seizes every thread of `pid` (not yet stopped).
    fn seize_all_threads(&mut self, pid: i32) -> Result<()> {
        let p = Pid::from_raw(pid);
        if self.procs.contains_key(&pid) {
            return Err(control_err(p, "attach", "already attached"));
        }
        if pid <= 0 {
            return Err(control_err(p, "attach", "not a process id"));
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|_| {
            control_err_as(p, "attach", "no such process", crate::ControlCause::Gone)
        })?;
        if let Some(tgid) = status.lines().find_map(|l| l.strip_prefix("Tgid:")) {
            let tgid = tgid.trim();
            if tgid != pid.to_string() {
                return Err(control_err(
                    p,
                    "attach",
                    format!("this is a thread of process {tgid}; attach to the process"),
                ));
            }
        }
        let mut traced = Traced::new(pid);
        // Threads can appear while we seize: repeat until a round finds none new. Threads
        // created by seized threads are followed by the kernel (PTRACE_O_TRACECLONE).
        for _ in 0..ATTACH_ROUNDS {
            let fresh: Vec<i32> = tasks(pid)
                .into_iter()
                .filter(|t| !traced.threads.contains_key(t))
                .collect();
            if fresh.is_empty() {
                break;
            }
            for t in fresh {
                match ptrace::seize(Pid::from_raw(t), OPTIONS) {
                    Ok(()) => {
                        traced.threads.insert(t, ThreadState::default());
                        self.owner.insert(t, pid);
                    }
                    Err(Errno::ESRCH) => {} // the thread exited meanwhile
                    // EPERM for a thread other than the main one is no permission problem when
                    // the thread was created by one already seized (the kernel attached it to
                    // us: its clone event brings it in) or is exiting (the kernel refuses a
                    // task with an exit state).
                    Err(Errno::EPERM)
                        if t != pid && (traced_by_us(pid, t) || thread_exited(pid, t)) => {}
                    Err(e) => {
                        // Leave nothing half-attached (a seized thread must be stopped before
                        // it can be detached: the ordinary detach does both).
                        if !traced.threads.is_empty() {
                            self.procs.insert(pid, traced);
                            let _ = self.detach(pid);
                        }
                        return Err(unattachable_task(
                            p,
                            Pid::from_raw(t),
                            "attach (PTRACE_SEIZE)",
                            e,
                        ));
                    }
                }
            }
        }
        if traced.threads.is_empty() {
            return Err(control_err_as(
                p,
                "attach",
                "no such process",
                crate::ControlCause::Gone,
            ));
        }
        self.procs.insert(pid, traced);
        Ok(())
    }

    /// Attaches to many processes at once: every thread of every process is seized, then all
    /// are interrupted, then all stops are collected — the round trips overlap.
    pub(super) fn attach_many(&mut self, pids: &[u32]) -> Vec<Result<Vec<u32>>> {
        if self.is_interrupted() {
            return pids
                .iter()
                .map(|&p| self.refuse_if_interrupted(p as i32).map(|()| Vec::new()))
                .collect();
        }
        let mut results: Vec<Result<()>> = pids
            .iter()
            .map(|&pid| self.seize_all_threads(pid as i32))
            .collect();
        let fresh: Vec<i32> = pids
            .iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(&p, _)| p as i32)
            .collect();
        let stopped = self.stop_processes(&fresh);
        if let Err(e) = stopped {
            for r in results.iter_mut().filter(|r| r.is_ok()) {
                *r = Err(e.clone());
            }
            for &pid in &fresh {
                let _ = self.detach(pid);
            }
        }
        let fresh: HashSet<i32> = fresh.into_iter().collect();
        // A process that exited while we attached is an attach error, not an event.
        self.queued
            .retain(|ev| !fresh.contains(&(ev.pid() as i32)) || !ev.is_end());
        pids.iter()
            .zip(results)
            .map(|(&pid, r)| {
                r?;
                let p = pid as i32;
                match self.procs.get(&p) {
                    Some(traced) => Ok(traced.threads.keys().map(|&t| t as u32).collect()),
                    None => Err(control_err(
                        Pid::from_raw(p),
                        "attach",
                        "the process exited during the attach",
                    )),
                }
            })
            .collect()
    }

    // ---- stopping ----

    /// Stops every thread of these processes: interrupts all running threads, then collects
    /// all the stops.
    fn stop_processes(&mut self, pids: &[i32]) -> Result<()> {
        let mut running = Vec::new();
        for &pid in pids {
            if let Some(traced) = self.procs.get(&pid) {
                running.extend(
                    traced
                        .threads
                        .iter()
                        .filter(|(_, s)| !s.stopped)
                        .map(|(&t, _)| (pid, t)),
                );
            }
        }
        for &(_, t) in &running {
            let _ = ptrace::interrupt(Pid::from_raw(t));
        }
        self.collect_stops(running)
    }

    pub(super) fn stop_all(&mut self, pid: i32) -> Result<()> {
        self.traced(pid)?;
        self.stop_processes(&[pid])
    }

    /// Waits until every listed (interrupted) thread is stopped or gone.
    fn collect_stops(&mut self, mut left: Vec<(i32, i32)>) -> Result<()> {
        let timeout = self.options.stop_timeout;
        let deadline = Instant::now() + timeout;
        while !left.is_empty() {
            let mut still = Vec::new();
            for (pid, t) in std::mem::take(&mut left) {
                if !self.owner.contains_key(&t) {
                    continue; // gone meanwhile (an exec, or its process exited)
                }
                match sys::wait(Pid::from_raw(t), false) {
                    Ok(Status::Nothing) => still.push((pid, t)),
                    Ok(status) => {
                        if let Some(new) = self.on_stop(pid, t, status)? {
                            still.push((pid, new));
                        }
                    }
                    Err(Errno::ECHILD) => self.thread_vanished(pid, t),
                    Err(e) => return Err(control_err(Pid::from_raw(t), "waitpid", e)),
                }
            }
            left = still;
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                let tids: Vec<i32> = left.iter().map(|&(_, t)| t).collect();
                return Err(control_err_as(
                    Pid::from_raw(left.first().map_or(0, |&(p, _)| p)),
                    "stop",
                    format!("threads {tids:?} did not stop within {timeout:?}"),
                    crate::ControlCause::NotStopped,
                ));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        Ok(())
    }

    /// One status of thread `t` that we interrupted: it now counts as stopped (or gone). A
    /// clone event returns the new thread, which must be collected too.
    fn on_stop(&mut self, pid: i32, t: i32, status: Status) -> Result<Option<i32>> {
        let mut new_thread = None;
        match status {
            Status::Stopped { event, .. } if event == libc::PTRACE_EVENT_EXEC => {
                let ev = self.on_exec(pid);
                self.queued.push_back(ev);
                return Ok(None);
            }
            Status::Stopped { event, .. } if event == libc::PTRACE_EVENT_CLONE => {
                new_thread = self.on_clone(pid, t);
            }
            Status::Stopped { signal, event } if event == libc::PTRACE_EVENT_STOP => {
                if let Some(s) = self.thread(pid, t) {
                    s.group_stop = is_stop_signal(signal);
                }
            }
            Status::Stopped { signal, event: 0 } => {
                if signal == libc::SIGTRAP
                    && let Some(ev) = self.breakpoint_hit(pid, t)?
                {
                    self.queued.push_back(ev);
                } else if let Some(s) = self.thread(pid, t) {
                    // Held in its signal-delivery-stop; delivered when it runs again.
                    s.pending = signal;
                }
            }
            Status::Stopped { .. } => {}
            Status::Exited(_) | Status::Killed(_) => {
                if let Some(ev) = self.thread_ended(pid, t, status) {
                    self.queued.push_back(ev);
                }
                return Ok(None);
            }
            Status::Nothing => return Ok(Some(t)),
        }
        if let Some(s) = self.thread(pid, t) {
            s.stopped = true;
        }
        Ok(new_thread)
    }

    // ---- what stops mean ----

    /// A new thread of `pid`, announced by thread `t`'s clone event.
    fn on_clone(&mut self, pid: i32, t: i32) -> Option<i32> {
        let new = ptrace::getevent(Pid::from_raw(t)).ok()? as i32;
        self.owner.insert(new, pid);
        self.procs.get_mut(&pid)?.threads.entry(new).or_default();
        Some(new)
    }

    /// `pid` exec'd: one thread is left (with the process id), the old image's breakpoints
    /// are gone with it and must not be "restored" into the new one.
    fn on_exec(&mut self, pid: i32) -> StopEvent {
        let former = ptrace::getevent(Pid::from_raw(pid)).map_or(pid, |t| t as i32);
        if let Some(traced) = self.procs.get_mut(&pid) {
            for (&t, _) in traced.threads.iter().filter(|(t, _)| **t != pid) {
                self.owner.remove(&t);
                self.reap.push(t);
            }
            traced.threads.clear();
            traced.threads.insert(
                pid,
                ThreadState {
                    stopped: true,
                    ..ThreadState::default()
                },
            );
            traced.breakpoints.clear();
            // Addresses of the old image mean nothing in the new one.
            traced.parting.clear();
            // A descriptor of /proc/PID/mem opened before the exec reads nothing after it.
            traced.memory = LiveMemory::new(pid as u32, DataModel::host());
        }
        self.owner.insert(pid, pid);
        self.queued
            .retain(|ev| !matches!(ev, StopEvent::Breakpoint { pid: p, .. } if *p as i32 == pid));
        StopEvent::Exec {
            pid: pid as u32,
            former_tid: former as u32,
        }
    }

    /// Thread `t` exited or was killed; if it was the process, says so.
    fn thread_ended(&mut self, pid: i32, t: i32, status: Status) -> Option<StopEvent> {
        self.forget_thread(pid, t);
        if t != pid {
            return None;
        }
        self.forget_process(pid);
        match status {
            Status::Killed(signal) => Some(StopEvent::Killed {
                pid: pid as u32,
                signal,
            }),
            Status::Exited(status) => Some(StopEvent::Exited {
                pid: pid as u32,
                status,
            }),
            _ => None,
        }
    }

    /// `waitpid` says thread `t` is not ours any more (someone else collected it).
    fn thread_vanished(&mut self, pid: i32, t: i32) {
        self.forget_thread(pid, t);
        if t == pid {
            self.forget_process(pid);
            self.queued.push_back(StopEvent::Gone { pid: pid as u32 });
        }
    }

    fn forget_thread(&mut self, pid: i32, t: i32) {
        if let Some(p) = self.procs.get_mut(&pid) {
            p.threads.remove(&t);
        }
        self.owner.remove(&t);
    }

    fn forget_process(&mut self, pid: i32) {
        if let Some(traced) = self.procs.remove(&pid) {
            for t in traced.threads.keys() {
                self.owner.remove(t);
            }
        }
        self.queued
            .retain(|ev| !matches!(ev, StopEvent::Breakpoint { pid: p, .. } if *p as i32 == pid));
    }

    /// If `t` stopped just after one of our breakpoints, rewinds it and says so.
    fn breakpoint_hit(&mut self, pid: i32, t: i32) -> Result<Option<StopEvent>> {
        let has_breakpoints = self
            .procs
            .get(&pid)
            .is_some_and(|p| !p.breakpoints.is_empty());
        if !has_breakpoints {
            return Ok(None);
        }
        let tid = Pid::from_raw(t);
        let address = arch::breakpoint_from_trap_pc(arch::pc(tid)?);
        if !self.traced(pid)?.breakpoints.contains_key(&address) {
            return Ok(None);
        }
        arch::set_pc(tid, address)?;
        if let Some(s) = self.thread(pid, t) {
            s.stopped = true;
        }
        Ok(Some(StopEvent::Breakpoint {
            pid: pid as u32,
            tid: t as u32,
            address,
        }))
    }

    // ---- the event loop ----

    /// Polls every traced thread once (without blocking), handles what happened, and queues
    /// what the caller must hear of. Returns whether anything happened.
    pub(super) fn poll(&mut self) -> Result<bool> {
        let mut seen = false;
        self.reap
            .retain(|&t| matches!(sys::wait(Pid::from_raw(t), false), Ok(Status::Nothing)));
        let tids: Vec<(i32, i32)> = self.owner.iter().map(|(&t, &p)| (t, p)).collect();
        for (t, pid) in tids {
            if !self.owner.contains_key(&t) {
                continue; // forgotten by an earlier status of this pass
            }
            match sys::wait(Pid::from_raw(t), false) {
                Ok(Status::Nothing) => {}
                Ok(status) => {
                    seen = true;
                    if let Some(ev) = self.handle(pid, t, status)? {
                        self.queued.push_back(ev);
                    }
                }
                Err(Errno::ECHILD) => {
                    seen = true;
                    self.thread_vanished(pid, t);
                }
                Err(e) => return Err(control_err(Pid::from_raw(t), "waitpid", e)),
            }
        }
        Ok(seen)
    }

    /// Acts on one status of a thread that was running; returns what the caller must hear of.
    fn handle(&mut self, pid: i32, t: i32, status: Status) -> Result<Option<StopEvent>> {
        let tid = Pid::from_raw(t);
        match status {
            Status::Stopped { event, .. } if event == libc::PTRACE_EVENT_EXEC => {
                return Ok(Some(self.on_exec(pid)));
            }
            Status::Stopped { event, .. } if event == libc::PTRACE_EVENT_CLONE => {
                self.on_clone(pid, t);
                let _ = sys::cont(tid, 0);
            }
            Status::Stopped { signal, event } if event == libc::PTRACE_EVENT_STOP => {
                // A job-control stop is kept (listen); anything else (a new thread's first
                // stop, the end of a group-stop, a late interrupt) runs on.
                let group = is_stop_signal(signal);
                if let Some(s) = self.thread(pid, t) {
                    s.group_stop = group;
                }
                let _ = if group {
                    sys::listen(tid)
                } else {
                    sys::cont(tid, 0)
                };
            }
            Status::Stopped { event: 0, signal } => {
                if signal == libc::SIGTRAP
                    && let Some(ev) = self.breakpoint_hit(pid, t)?
                {
                    return Ok(Some(ev));
                }
                let _ = sys::cont(tid, signal); // not ours: deliver it
            }
            Status::Stopped { .. } => {
                let _ = sys::cont(tid, 0);
            }
            Status::Exited(_) | Status::Killed(_) => return Ok(self.thread_ended(pid, t, status)),
            Status::Nothing => {}
        }
        Ok(None)
    }

    /// The next event, waiting up to `timeout`.
    pub(super) fn wait(&mut self, timeout: Duration) -> Result<Option<StopEvent>> {
        // A caller may pass Duration::MAX for "no timeout".
        let deadline = Instant::now().checked_add(timeout);
        let mut pause = Duration::from_micros(20);
        loop {
            if let Some(ev) = self.queued.pop_front() {
                return Ok(Some(ev));
            }
            if self.procs.is_empty() {
                return Ok(None);
            }
            if self.poll()? {
                pause = Duration::from_micros(20);
                continue;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) || self.is_interrupted() {
                return Ok(None);
            }
            std::thread::sleep(pause);
            // Back off to 1 ms at most: a pass costs one system call per traced thread, and a
            // tool waiting for an event wants it soon.
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }

    // ---- running ----

    pub(super) fn resume(&mut self, pid: i32) -> Result<()> {
        let traced = self.traced(pid)?;
        let mut gone = Vec::new();
        let mut first_error = None;
        for (&t, s) in traced.threads.iter_mut().filter(|(_, s)| s.stopped) {
            let tid = Pid::from_raw(t);
            let r = if s.group_stop {
                sys::listen(tid)
            } else {
                sys::cont(tid, s.pending)
            };
            match r {
                Ok(()) => {
                    s.stopped = false;
                    s.pending = 0;
                }
                Err(Errno::ESRCH) => gone.push(t),
                Err(e) => {
                    first_error.get_or_insert(control_err(tid, "PTRACE_CONT", e));
                }
            }
        }
        for t in gone {
            self.forget_thread(pid, t);
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Makes thread `t`, stopped at the entry of a `void f(void)`, return from it.
    pub(super) fn return_from_call(&mut self, pid: i32, t: i32) -> Result<()> {
        self.require_stopped(pid, t)?;
        let memory = &self.traced(pid)?.memory;
        arch::emulate_return(Pid::from_raw(t), |sp, len| memory.read_vec(sp, len as u64))
    }

    pub(super) fn registers(&mut self, pid: i32, t: i32) -> Result<crate::unwind::Registers> {
        self.require_stopped(pid, t)?;
        arch::registers(Pid::from_raw(t))
    }

    /// The registers of stopped thread `t` as a core file stores them.
    pub(super) fn core_registers(
        &mut self,
        pid: i32,
        t: i32,
    ) -> Result<crate::corefile::write::ThreadRegisters> {
        self.require_stopped(pid, t)?;
        arch::core_registers(Pid::from_raw(t))
    }

    fn require_stopped(&mut self, pid: i32, t: i32) -> Result<()> {
        match self.thread(pid, t) {
            Some(s) if s.stopped => Ok(()),
            Some(_) => Err(control_err(
                Pid::from_raw(t),
                "use a thread",
                "it is running",
            )),
            None => Err(control_err(
                Pid::from_raw(t),
                "use a thread",
                format!("not a traced thread of process {pid}"),
            )),
        }
    }

    /// Executes the instruction under the breakpoint where thread `t` stopped, with every
    /// other thread stopped, and puts the breakpoint back. `t` stays stopped after it.
    pub(super) fn step_over(&mut self, pid: i32, t: i32) -> Result<()> {
        self.require_stopped(pid, t)?;
        let tid = Pid::from_raw(t);
        let address = arch::pc(tid)?;
        let original = self
            .traced(pid)?
            .breakpoints
            .get(&address)
            .cloned()
            .ok_or_else(|| {
                control_err(
                    tid,
                    "step over a breakpoint",
                    format!("no breakpoint at {address:#x}"),
                )
            })?;
        self.stop_all(pid)?;
        self.write_bytes(pid, address, &original)?;
        let stepped = self.single_step(pid, t);
        // Put the breakpoint back even if the step failed, unless the process is gone.
        let reinsert = match arch::breakpoint_instruction() {
            Ok(insn) if self.procs.contains_key(&pid) => self.write_bytes(pid, address, insn),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        stepped.and(reinsert)
    }

    fn single_step(&mut self, pid: i32, t: i32) -> Result<()> {
        let tid = Pid::from_raw(t);
        let start = arch::pc(tid)?;
        let pending = self
            .thread(pid, t)
            .map_or(0, |s| std::mem::take(&mut s.pending));
        // A signal already held is delivered first: its handler runs, and the step stops at
        // the handler's entry or back at `start` if ignored; step until the pc has moved.
        let mut signal = pending;
        for _ in 0..16 {
            sys::step(tid, signal).map_err(|e| control_err(tid, "PTRACE_SINGLESTEP", e))?;
            signal = 0;
            match sys::wait(tid, true) {
                Ok(Status::Stopped {
                    signal: s,
                    event: 0,
                }) if s == libc::SIGTRAP => {
                    if arch::pc(tid)? != start {
                        return Ok(());
                    }
                }
                Ok(Status::Stopped {
                    signal: s,
                    event: 0,
                }) => {
                    // Arrived during the step: hold it, deliver it on resume.
                    if let Some(st) = self.thread(pid, t) {
                        st.pending = s;
                    }
                    return Ok(());
                }
                Ok(Status::Stopped { .. }) => {}
                Ok(status @ (Status::Exited(_) | Status::Killed(_))) => {
                    if let Some(ev) = self.thread_ended(pid, t, status) {
                        self.queued.push_back(ev);
                    }
                    return Err(control_err(tid, "single step", "the thread ended"));
                }
                Ok(Status::Nothing) => {}
                Err(e) => return Err(control_err(tid, "waitpid", e)),
            }
        }
        Err(control_err(
            tid,
            "single step",
            "the program counter did not move",
        ))
    }
}
