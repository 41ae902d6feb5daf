//! [`Watcher`]: the MPI2DD event watch ([`crate::mpi2dd_watch::Watch`]) over live processes.

use std::collections::HashMap;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use mpi2dd::connect::{LocalConnector, ProcessKey};
use mpi2dd::events::{breakpoint_address, read_event, update_debugger_flags};
use mpi2dd::flags::{DebugState, DebuggerFlags};
use mpi2dd::traverse::{TraverseOptions, traverse};
use mpir_target::SymbolLookup;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::{StopEvent, Tracer};

use super::{entry_point, open_for};
use crate::error::AcquireError;
use crate::mpi2dd_watch::{Watch, WatchAction, WatchInput, WatchReport};
use crate::options::AcquireOptions;

/// One process held by the watcher.
#[derive(Debug)]
struct Held {
    target: LiveTarget,
    breakpoint: u64,
    info: u64,
}

/// Holds every process of an MPI2DD job and reports its events (spawns, connects, directory
/// changes, aborts) as they come; new processes are held as they appear. Dropping it (or
/// [`Watcher::release`]) detaches from everything; the `debugger_flags` it set stay set, as
/// the draft has the debugger write them.
#[derive(Debug)]
pub struct Watcher {
    tracer: Tracer,
    watch: Watch,
    connector: LocalConnector,
    held: HashMap<i32, (ProcessKey, Held)>,
    options: AcquireOptions,
    /// A process held stopped in `MPI2DD_breakpoint` while the first holds are made (launch).
    in_event: Option<i32>,
    /// Processes that could not be held, and why.
    pub not_held: Vec<(ProcessKey, AcquireError)>,
}

/// Waits (bounded) for a stop of `pid` that `want` accepts.
fn wait_for(
    tracer: &Tracer,
    pid: u32,
    timeout: Duration,
    what: &str,
    want: impl Fn(&StopEvent) -> bool,
) -> Result<StopEvent, AcquireError> {
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tracer
            .wait(left)
            .map_err(AcquireError::target("wait for the starter"))?
        {
            Some(ev) if ev.pid() == pid && want(&ev) => return Ok(ev),
            Some(ev) if ev.pid() == pid && ev.is_end() => {
                return Err(AcquireError::StarterEnded {
                    pid,
                    how: format!("{ev:?}"),
                    waiting_for: what.into(),
                });
            }
            Some(_) => {}
            None => {
                return Err(AcquireError::Timeout {
                    pid,
                    waiting_for: what.into(),
                    after: timeout,
                });
            }
        }
    }
}

impl Watcher {
    /// Traverses the job from local process `pid` (a rank, directory or metadirectory) and
    /// holds every process of it.
    pub fn attach(pid: u32, options: AcquireOptions) -> Result<Watcher, AcquireError> {
        let connector = LocalConnector::new().with_debug_options(options.debug.clone());
        let host = connector.hostname().clone();
        let job = traverse(&connector, &host, pid as i32, &TraverseOptions::default())
            .map_err(|source| AcquireError::Mpi2dd { pid, source })?
            .job;
        let tracer = Tracer::with_options(options.tracer_options())
            .map_err(AcquireError::target("start the tracer"))?;
        let mut w = Watcher {
            tracer,
            watch: Watch::new(job),
            connector,
            held: HashMap::new(),
            options,
            in_event: None,
            not_held: Vec::new(),
        };
        let mut reports = Vec::new();
        w.run(&mut reports)?;
        Ok(w)
    }

    /// Launch mode: runs `command` — a starter that is an MPI2DD metadirectory or directory —
    /// under control, stops it at its program's entry point to plant a breakpoint on
    /// `MPI2DD_breakpoint`, lets it run to its first event (START, once its job exists), and
    /// holds the whole job from there. Returns the watcher, the starter process and the state
    /// of that first event. On failure everything is detached.
    pub fn launch(
        command: Command,
        options: AcquireOptions,
    ) -> Result<(Watcher, Child, DebugState), AcquireError> {
        let tracer = Tracer::with_options(options.tracer_options())
            .map_err(AcquireError::target("start the tracer"))?;
        let child = tracer
            .launch(command)
            .map_err(AcquireError::target("launch the starter"))?;
        let pid = child.id();
        let first = (|| {
            let timeout = options.timeout;
            let entry = entry_point(pid)?;
            tracer
                .insert_breakpoint(pid, entry)
                .and_then(|()| tracer.resume(pid))
                .map_err(AcquireError::target("run to the entry point"))?;
            wait_for(
                &tracer,
                pid,
                timeout,
                "the entry point",
                |ev| matches!(ev, StopEvent::Breakpoint { address, .. } if *address == entry),
            )?;
            tracer
                .remove_breakpoint(pid, entry)
                .map_err(AcquireError::target("remove the entry breakpoint"))?;
            let target = open_for(pid, &options)?;
            let bp = breakpoint_address(&target).map_err(|e| AcquireError::NotAStarter {
                pid,
                symbol: mpi2dd::abi::BREAKPOINT_SYMBOL,
                images: format!("any image of the process ({e})"),
            })?;
            let info = target
                .symbol(mpi2dd::abi::INFO_SYMBOL)
                .map_err(AcquireError::target("look up MPI2DD_info"))?
                .ok_or(AcquireError::NotAStarter {
                    pid,
                    symbol: mpi2dd::abi::INFO_SYMBOL,
                    images: "any image of the process".into(),
                })?
                .address;
            tracer
                .insert_breakpoint(pid, bp)
                .and_then(|()| tracer.resume(pid))
                .map_err(AcquireError::target("plant the MPI2DD breakpoint"))?;
            let ev = wait_for(
                &tracer,
                pid,
                timeout,
                "the first MPI2DD event",
                |ev| matches!(ev, StopEvent::Breakpoint { address, .. } if *address == bp),
            )?;
            let StopEvent::Breakpoint { tid, .. } = ev else {
                return Err(AcquireError::Usage("not a breakpoint".into()));
            };
            tracer
                .stop_all(pid)
                .map_err(AcquireError::target("stop the starter"))?;
            let event = read_event(&target, info, 4096)
                .map_err(|source| AcquireError::Mpi2ddProcess { pid, source })?;
            if let DebugState::Abort = event.state {
                return Err(AcquireError::JobAborted {
                    pid,
                    message: event.abort_message.unwrap_or_default(),
                });
            }
            Ok((tid, event.state))
        })();
        let (tid, state) = match first {
            Ok(v) => v,
            Err(e) => {
                let _ = tracer.detach_all();
                return Err(e);
            }
        };
        let connector = LocalConnector::new().with_debug_options(options.debug.clone());
        let host = connector.hostname().clone();
        let job = match traverse(&connector, &host, pid as i32, &TraverseOptions::default()) {
            Ok(t) => t.job,
            Err(source) => {
                let _ = tracer.detach_all();
                return Err(AcquireError::Mpi2dd { pid, source });
            }
        };
        let mut w = Watcher {
            tracer,
            watch: Watch::new(job),
            connector,
            held: HashMap::new(),
            options,
            in_event: Some(pid as i32),
            not_held: Vec::new(),
        };
        let mut reports = Vec::new();
        let held = w.run(&mut reports);
        w.in_event = None;
        held.and_then(|()| {
            w.tracer
                .return_from_call(pid, tid)
                .and_then(|()| w.tracer.resume(pid))
                .map_err(AcquireError::target("resume the starter after its event"))
        })?;
        Ok((w, child, state))
    }

    /// The job as last traversed.
    pub fn job(&self) -> &mpi2dd::job::Job {
        self.watch.job()
    }

    /// Pids of the processes held.
    pub fn held_pids(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self.held.keys().map(|&p| p as u32).collect();
        v.sort_unstable();
        v
    }

    fn hold(&mut self, process: &ProcessKey, flags: DebuggerFlags) -> Result<(), AcquireError> {
        if process.host != *self.connector.hostname() {
            return Err(AcquireError::Usage(format!(
                "{process} is not on this machine"
            )));
        }
        let pid = u32::try_from(process.pid)
            .map_err(|_| AcquireError::Usage(format!("{process}: invalid pid")))?;
        // The launched starter is attached already, and stopped in its event.
        let in_event = self.in_event == Some(process.pid);
        if !in_event {
            self.tracer
                .attach(pid)
                .map_err(AcquireError::target(format!("attach to {process}")))?;
        }
        let held = (|| {
            let target = open_for(pid, &self.options)?;
            let breakpoint = breakpoint_address(&target)
                .map_err(|source| AcquireError::Mpi2ddProcess { pid, source })?;
            let info = target
                .symbol(mpi2dd::abi::INFO_SYMBOL)
                .map_err(AcquireError::target("look up MPI2DD_info"))?
                .ok_or(AcquireError::NotAStarter {
                    pid,
                    symbol: mpi2dd::abi::INFO_SYMBOL,
                    images: "any image of the process".into(),
                })?
                .address;
            self.tracer
                .insert_breakpoint(pid, breakpoint)
                .map_err(AcquireError::target("plant the MPI2DD breakpoint"))?;
            update_debugger_flags(&target, info, flags, DebuggerFlags::EMPTY)
                .map_err(|source| AcquireError::Mpi2ddProcess { pid, source })?;
            Ok::<_, AcquireError>(Held {
                target,
                breakpoint,
                info,
            })
        })();
        match held {
            Ok(h) => {
                self.held.insert(process.pid, (process.clone(), h));
                if in_event {
                    return Ok(());
                }
                self.tracer
                    .resume(pid)
                    .map_err(AcquireError::target(format!("resume {process}")))
            }
            Err(e) => {
                if !in_event {
                    let _ = self.tracer.detach(pid);
                }
                Err(e)
            }
        }
    }

    /// Carries out the watch's actions; reports go to `reports`.
    fn run(&mut self, reports: &mut Vec<WatchReport>) -> Result<(), AcquireError> {
        while let Some(action) = self.watch.poll_action() {
            match action {
                WatchAction::Hold { process, flags } => {
                    if let Err(e) = self.hold(&process, flags) {
                        self.not_held.push((process, e));
                    }
                }
                WatchAction::Traverse { from } => {
                    let host = self.connector.hostname().clone();
                    let r = traverse(
                        &self.connector,
                        &host,
                        from.pid,
                        &TraverseOptions::default(),
                    )
                    .map(|t| t.job);
                    self.watch.handle(WatchInput::Traversed(r));
                }
                WatchAction::Resume { process, tid } => {
                    let pid = process.pid as u32;
                    self.tracer
                        .return_from_call(pid, tid)
                        .and_then(|()| self.tracer.resume(pid))
                        .map_err(AcquireError::target("resume after an MPI2DD event"))?;
                }
                WatchAction::Report(r) => reports.push(r),
            }
        }
        Ok(())
    }

    /// Waits up to `timeout` for the next MPI2DD event of a held process and handles it:
    /// returns what the caller must hear of it (`None` on timeout). Processes that end are
    /// let go of silently.
    pub fn next_event(&mut self, timeout: Duration) -> Result<Option<WatchReport>, AcquireError> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(ev) = self
                .tracer
                .wait(left)
                .map_err(AcquireError::target("wait for an MPI2DD event"))?
            else {
                return Ok(None);
            };
            let pid = ev.pid() as i32;
            match ev {
                StopEvent::Breakpoint { tid, address, .. } => {
                    let Some((process, held)) = self.held.get(&pid) else {
                        continue;
                    };
                    if address != held.breakpoint {
                        continue;
                    }
                    let process = process.clone();
                    self.tracer
                        .stop_all(pid as u32)
                        .map_err(AcquireError::target("stop a process at an MPI2DD event"))?;
                    let event = read_event(&held.target, held.info, 4096).map_err(|source| {
                        AcquireError::Mpi2ddProcess {
                            pid: pid as u32,
                            source,
                        }
                    })?;
                    self.watch.handle(WatchInput::Stopped {
                        process,
                        tid,
                        event,
                    });
                    let mut reports = Vec::new();
                    self.run(&mut reports)?;
                    if let Some(r) = reports.into_iter().next() {
                        return Ok(Some(r));
                    }
                }
                e if e.is_end() => {
                    self.held.remove(&pid);
                }
                _ => {}
            }
        }
    }

    /// Detaches from every held process (breakpoints removed, all running).
    pub fn release(self) -> Result<(), AcquireError> {
        self.tracer
            .detach_all()
            .map(drop)
            .map_err(AcquireError::target("detach from the MPI2DD job"))
    }
}
