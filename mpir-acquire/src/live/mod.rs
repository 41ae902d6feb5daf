//! The protocol over live processes: [`launch`] a starter command under control, or [`attach`]
//! to a running starter, and get the [`Job`].
//!
//! One [`Tracer`] (one ptrace thread) holds the starter and the ranks; a [`LiveTarget`] reads
//! and writes the starter's variables. Every wait is bounded by
//! [`AcquireOptions::with_timeout`]. On any failure every process is left as found: breakpoints
//! out, `MPIR_being_debugged` back to 0 if we set it, every thread detached and running.
//!
//! The same holds when the tool goes away without releasing (told to stop with
//! [`detach_on_signals`](mpir_target::live::tracer::detach_on_signals), a panic with
//! [`detach_on_panic`](mpir_target::live::tracer::detach_on_panic), an `exit` with
//! [`detach_at_exit`](mpir_target::live::tracer::detach_at_exit)): as soon as we set
//! `MPIR_being_debugged`, its reset is registered with the tracer
//! ([`Tracer::write_on_detach`]), and so is `MPIR_debug_gate` = 1 in every held rank whose gate
//! the release would open. A held rank is always in its own program: one listed between its
//! fork and its exec is first run to its program's entry point (where its gate is mapped).

use std::collections::HashSet;
use std::process::{Child, Command};
use std::sync::Arc;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::{StopEvent, Tracer};

mod any;
mod container;
pub mod discover;
pub mod node_prove;
mod normalize;
pub mod pmix;
mod prove;
mod release;
mod slurm;
mod watch;

pub use any::{AnyJob, attach_any};
pub use node_prove::{
    NodeExpectations, NodeRank, RankClaim, environment, process_started_unix, prove_on_node,
    started_unix,
};
pub use normalize::{LocalRank, find_containers, normalize};
use release::{
    Release, arm_being_debugged, arm_gates, open_gate, release, settle_ranks, writes_gate,
};
pub use slurm::{find_srun, shepherd_parent, srun_steps};
pub use watch::Watcher;

use crate::error::AcquireError;
use crate::identity::Refusal;
use crate::interface::InterfaceChoice;
use crate::job::{Job, RankControl};
use crate::note::Note;
use crate::options::{AcquireOptions, GateRelease, RankSelection};
use crate::protocol::{Acquisition, Action, AttachOutcome, Event, Mode, undo_writes};

/// A job acquired from live processes. Unless [`AcquireOptions::with_hold`] was set, everything has
/// already been released and detached; otherwise the attached ranks and the starter are held
/// stopped until [`Acquired::release`] (or drop, which does the same).
#[derive(Debug)]
pub struct Acquired {
    job: Job,
    debug: DebugOptions,
    gate: GateRelease,
    timeout: std::time::Duration,
    tracer: Option<Tracer>,
    starter: Option<LiveTarget>,
    child: Option<Child>,
    held: bool,
    /// Ranks whose `MPIR_debug_gate` opens when the tracer detaches from them.
    armed: HashSet<u32>,
    /// Ranks (pid, start time) the launcher stopped and wakes from `MPIR_Breakpoint`
    /// ([`crate::quirks::Quirks::breakpoint_wakes_ranks`]): seen running after the release.
    wake: Vec<(u32, u64)>,
    /// The starter's thread held at the entry of such an `MPIR_Breakpoint`
    /// ([`Acquisition::parked`]).
    parked: Option<u32>,
    /// A job acquired through PMIx ([`pmix`]): the tool connection and what the release owes.
    pmix: Option<Box<pmix::Control>>,
}

impl Acquired {
    /// The job.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// Launch mode: the starter process (its pid and pipes). Wait on it only once released.
    pub fn child(&mut self) -> Option<&mut Child> {
        self.child.as_mut()
    }

    /// Launch mode: takes the starter process (to wait for it once released).
    pub fn take_child(&mut self) -> Option<Child> {
        self.child.take()
    }

    /// Whether ranks and starter are still held stopped.
    pub fn is_held(&self) -> bool {
        self.held
    }

    /// The tracer holding the processes, while held (for a tool that wants to do more with
    /// them, e.g. read rank memory while stopped).
    pub fn tracer(&self) -> Option<&Tracer> {
        self.tracer.as_ref().filter(|_| self.held)
    }

    /// Writes `MPIR_debug_gate` = 1 now in every attached rank that defines it (whatever
    /// [`GateRelease`] says); the ranks stay held. Returns, per attached rank, whether its
    /// gate was written and if not, why: a rank that fails does not stop the others. Fails
    /// only when the job is no longer held.
    pub fn release_gate(&self) -> Result<Vec<GateOpening>, AcquireError> {
        let Some(tracer) = self.tracer() else {
            return Err(AcquireError::Usage(
                "release_gate: the job is not held (already released)".into(),
            ));
        };
        Ok(self
            .job
            .attached()
            .into_iter()
            .map(|(rank, pid, proven)| GateOpening {
                rank,
                pid,
                outcome: match open_gate(tracer, pid, proven, &self.debug, self.timeout) {
                    Ok(true) => GateOutcome::Written,
                    Ok(false) => GateOutcome::NotDefined,
                    Err(error) => GateOutcome::Failed(error),
                },
            })
            .collect())
    }

    /// Hands the held job over to another tool: the attached ranks are detached but left
    /// stopped (a job-control stop, as after `SIGSTOP`: the other tool attaches, and `SIGCONT`
    /// lets them run), `MPIR_being_debugged` goes back to 0 and the starter is detached,
    /// running. The gate is left to the other tool. A starter whose `MPIR_Breakpoint` wakes
    /// the ranks (Slurm's `srun`) is made to return from it without waking them. Returns the
    /// pids left stopped.
    pub fn hand_over(&mut self) -> Result<Vec<u32>, AcquireError> {
        if !self.held {
            return Err(AcquireError::Usage(
                "hand_over: the job is not held (already released)".into(),
            ));
        }
        self.held = false;
        if self.pmix.is_some() {
            return Ok(pmix::hand_over(self));
        }
        let (Some(tracer), Some(starter)) = (self.tracer.take(), self.starter.take()) else {
            return Ok(Vec::new());
        };
        let ranks = self.job.attached_pids();
        let mut stopped = Vec::new();
        for &pid in &ranks {
            // The gate is the other tool's to open.
            let forgotten = tracer.forget_writes_on_detach(pid);
            match forgotten.and_then(|()| tracer.detach_leaving_stopped(pid)) {
                Ok(()) => stopped.push(pid),
                Err(error) => self.job.notes.push(Note::HandOverFailed { pid, error }),
            }
        }
        // A starter whose MPIR_Breakpoint wakes the ranks (srun) returns from it without running
        // its body: the ranks handed over stay stopped, for the other tool to continue.
        let returned = match self.parked {
            Some(tid) => tracer
                .return_from_call(self.job.starter.pid, tid)
                .map_err(AcquireError::target("return from MPIR_Breakpoint")),
            None => Ok(()),
        };
        let undo = undo_writes(&starter, &self.job.starter);
        let detached = tracer
            .detach(self.job.starter.pid)
            .map_err(AcquireError::target("detach the starter"));
        returned.and(undo).and(detached)?;
        Ok(stopped)
    }

    /// Releases the job: `MPIR_debug_gate` = 1 in the attached ranks as [`GateRelease`] says,
    /// ranks detached (running), `MPIR_being_debugged` back to 0, the starter's breakpoints
    /// removed and the starter detached (running). Returns per-rank problems met while
    /// releasing ([`Note::NoGate`], [`Note::GateFailed`], [`Note::DetachFailed`]), which do
    /// not stop the release.
    pub fn release(&mut self) -> Result<Vec<Note>, AcquireError> {
        if !self.held {
            return Ok(Vec::new());
        }
        self.held = false;
        if self.pmix.is_some() {
            return pmix::release(self);
        }
        let (Some(tracer), Some(starter)) = (self.tracer.take(), self.starter.take()) else {
            return Ok(Vec::new());
        };
        let released = release(
            &tracer,
            &Release {
                starter: &starter,
                job: &self.job,
                debug: &self.debug,
                gate: self.gate,
                timeout: self.timeout,
                armed: &self.armed,
            },
        );
        drop(tracer);
        // Whatever the release met (a starter killed meanwhile), no rank stays stopped; the
        // notes of that are kept in the job too (the release may still fail on the starter).
        let woken = slurm::wake_ranks(self.job.starter.pid, &self.wake, self.timeout);
        self.job.notes.extend(woken.iter().cloned());
        let mut notes = released?;
        notes.extend(woken);
        Ok(notes)
    }
}

impl Acquired {
    /// A job launched through PMIx and held in `PMIx_Init` by its launcher: releases only
    /// `ranks` (`PMIX_DEBUGGER_RELEASE` to those ranks; PRRTE delivers it to them alone, and an
    /// MPI rank then waits in `MPI_Init` for the others). The job stays held for
    /// [`Acquired::release`].
    ///
    /// # Errors
    /// [`AcquireError::Usage`] for any other job (MPIR has no partial release: its ranks wait
    /// at their gate or run); [`AcquireError::Pmix`] when PMIx refuses.
    pub fn release_ranks(&mut self, ranks: &[u32]) -> Result<(), AcquireError> {
        pmix::release_ranks(self, ranks)
    }

    /// A job acquired through PMIx: starts `per_node` tool daemons running `argv` on each node
    /// of the job (`PMIx_Spawn` with `PMIX_DEBUGGER_DAEMONS`, `PMIX_DEBUG_TARGET` the job's
    /// namespace); their stdout and stderr are forwarded to this process's. Returns the
    /// daemons' namespace. A daemon that calls `PMIx_Init` finds its target with
    /// `PMIx_Get(<its namespace>:WILDCARD, PMIX_DEBUG_TARGET)`.
    ///
    /// # Errors
    /// [`AcquireError::Usage`] for a job not acquired through PMIx; [`AcquireError::Pmix`].
    pub fn spawn_tool_daemons(
        &self,
        argv: &[String],
        per_node: u16,
    ) -> Result<String, AcquireError> {
        pmix::spawn_tool_daemons(self, argv, per_node)
    }

    /// A job acquired through PMIx: a handle on the tool connection, to keep it for a later
    /// acquisition of the same job (see [`pmix::Connection`]).
    pub fn pmix_connection(&self) -> Option<pmix::Connection> {
        self.pmix.as_ref().map(|c| c.connection())
    }

    /// A job acquired through PMIx: waits up to `timeout` for its end (`PMIX_EVENT_JOB_END`,
    /// or the server gone); `None` when it did not end meanwhile. Release the job first.
    ///
    /// # Errors
    /// [`AcquireError::Usage`] for a job not acquired through PMIx.
    pub fn wait_job_end(
        &mut self,
        timeout: std::time::Duration,
    ) -> Result<Option<crate::pmix::JobEnd>, AcquireError> {
        pmix::wait_job_end(self, timeout)
    }
}

/// How [`Acquired::release_gate`] did with one attached rank.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GateOpening {
    /// The rank.
    pub rank: u64,
    /// Its pid.
    pub pid: u32,
    /// Whether its `MPIR_debug_gate` was written, and if not, why.
    pub outcome: GateOutcome,
}

impl GateOpening {
    /// Whether the gate was written.
    pub fn written(&self) -> bool {
        self.outcome == GateOutcome::Written
    }
}

/// Whether a rank's `MPIR_debug_gate` was written ([`GateOpening`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GateOutcome {
    /// `MPIR_debug_gate` = 1 was written.
    Written,
    /// The rank defines no `MPIR_debug_gate` (in its program, where a rank caught before its
    /// exec was first run to).
    NotDefined,
    /// Looking the gate up or writing it failed.
    Failed(AcquireError),
}

impl Drop for Acquired {
    fn drop(&mut self) {
        let _ = self.release();
    }
}

/// The value of `AT_ENTRY` in `/proc/PID/auxv`, read with the program's own word size (an
/// i386 starter or rank under this 64-bit tool has 4-byte entries).
fn entry_point(pid: u32) -> Result<u64, AcquireError> {
    mpir_target::live::procfs::entry_point(pid)
        .map_err(AcquireError::target("find the entry point"))
}

fn open_target(pid: u32, debug: &DebugOptions) -> Result<LiveTarget, AcquireError> {
    LiveTarget::open(pid, debug.clone())
        .map_err(AcquireError::target(format!("open process {pid}")))
}

/// Opens `pid` as [`open_target`] does, its files parsed into the caller's cache when
/// `options` shares one ([`AcquireOptions::with_files`]).
fn open_for(pid: u32, options: &AcquireOptions) -> Result<LiveTarget, AcquireError> {
    match &options.files {
        Some(files) => {
            LiveTarget::open_with_cache(pid, options.debug.clone(), Arc::clone(&files.0))
                .map_err(AcquireError::target(format!("open process {pid}")))
        }
        None => open_target(pid, &options.debug),
    }
}

/// Opens the FIFO read-write and without blocking (so that it works whether or not the starter
/// has it open yet, and a FIFO nobody will read is never a hang), and writes byte 1. The file
/// is returned to be kept open until the starter has had a chance to read: closing the last
/// descriptor of a FIFO discards what it holds. Refuses anything that is not a FIFO: the path
/// comes from the target.
fn write_fifo(path: &str) -> Result<std::fs::File, AcquireError> {
    use std::io::Write;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let fail = |reason: String| AcquireError::Usage(format!("attach FIFO {path}: {reason}"));
    let meta = std::fs::metadata(path).map_err(|e| fail(e.to_string()))?;
    if !meta.file_type().is_fifo() {
        return Err(fail("not a FIFO; nothing written".into()));
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| fail(e.to_string()))?;
    f.write_all(&[1]).map_err(|e| fail(e.to_string()))?;
    Ok(f)
}

struct Driver {
    tracer: Tracer,
    pid: u32,
    target: LiveTarget,
    options: AcquireOptions,
    /// Attach FIFOs written, kept open until acquisition ends.
    fifos: Vec<std::fs::File>,
    /// `MPIR_Breakpoint`, once the protocol found it.
    starter_breakpoint: Option<u64>,
    /// Whether the reset of `MPIR_being_debugged` is registered with the tracer.
    armed_being_debugged: bool,
    /// A starter without MPIR symbols: its discovered table ([`discover`]).
    discovered: Option<mpir_types::mpir::discover::Discovered>,
}

impl Driver {
    /// Hands `event` to the protocol; once it has set `MPIR_being_debugged`, registers the
    /// reset with the tracer (again after an exec: the tracer forgets the old image's).
    fn handle(&mut self, acq: &mut Acquisition, event: Event) -> Result<(), AcquireError> {
        if matches!(event, Event::Exec { .. }) {
            self.armed_being_debugged = false;
        }
        if let Event::Breakpoint { address, .. } = event {
            discover::refuse_launch(self.pid, &self.target, address)?;
        }
        match &self.discovered {
            Some(d) => acq.handle(&discover::DiscoveredTarget::new(&self.target, d), event),
            None => acq.handle(&self.target, event),
        }
        if !self.armed_being_debugged
            && acq
                .starter()
                .is_some_and(|s| s.set_being_debugged && !s.keeps_being_debugged)
        {
            arm_being_debugged(&self.tracer, &self.target, self.pid)?;
            self.armed_being_debugged = true;
        }
        Ok(())
    }

    /// Waits for the starter's next event (events of other processes are not expected before
    /// the ranks are attached, and are left alone).
    fn wait_starter(&mut self) -> Result<Event, AcquireError> {
        let deadline = std::time::Instant::now() + self.options.timeout;
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            let ev = self
                .tracer
                .wait(left)
                .map_err(AcquireError::target("wait for the starter"))?;
            let Some(ev) = ev else {
                return Ok(Event::Timeout);
            };
            if ev.pid() != self.pid {
                continue;
            }
            return Ok(match ev {
                StopEvent::Breakpoint { tid, address, .. } => {
                    // At the entry point the libraries are loaded since the exec: look again.
                    // MPIR events use the images seen then (the MPIR symbols live in the
                    // starter's executable or the libraries it links), which spares opening
                    // the dozens of plugins a starter dlopens meanwhile.
                    if self.starter_breakpoint != Some(address) {
                        self.target
                            .refresh()
                            .map_err(AcquireError::target("reload the starter's images"))?;
                    }
                    Event::Breakpoint { tid, address }
                }
                StopEvent::Exec { .. } => {
                    self.target = open_for(self.pid, &self.options)?;
                    Event::Exec {
                        entry: entry_point(self.pid)?,
                    }
                }
                StopEvent::Exited { status, .. } => Event::Ended {
                    how: format!("exited with status {status}"),
                },
                StopEvent::Killed { signal, .. } => Event::Ended {
                    how: format!("was killed by signal {signal}"),
                },
                _ => Event::Ended {
                    how: "disappeared".into(),
                },
            });
        }
    }

    /// Attaches the ranks the protocol asks for ([`attach_proven`]).
    fn attach_proven(
        &mut self,
        acq: &Acquisition,
        ranks: &[(u64, u32)],
    ) -> Result<Vec<AttachOutcome>, AcquireError> {
        attach_proven(
            &self.tracer,
            self.pid,
            self.options.allow_other_users,
            acq.table().map(|t| &t.resolved),
            ranks,
        )
    }

    fn run(&mut self, acq: &mut Acquisition) -> Result<Job, AcquireError> {
        let pid = self.pid;
        loop {
            let Some(action) = acq.poll_action() else {
                return Err(AcquireError::Usage("the protocol stalled".into()));
            };
            match action {
                Action::InsertBreakpoint { address } => self
                    .tracer
                    .insert_breakpoint(pid, address)
                    .map_err(AcquireError::target("plant a breakpoint"))?,
                Action::RemoveBreakpoint { address } => self
                    .tracer
                    .remove_breakpoint(pid, address)
                    .map_err(AcquireError::target("remove a breakpoint"))?,
                Action::ReturnFromCall { tid } => self
                    .tracer
                    .return_from_call(pid, tid)
                    .map_err(AcquireError::target("return from MPIR_Breakpoint"))?,
                Action::StepOverBreakpoint { tid } => self
                    .tracer
                    .step_over(pid, tid)
                    .map_err(AcquireError::target("step into MPIR_Breakpoint"))?,
                Action::Continue => {
                    self.starter_breakpoint = acq.starter().map(|s| s.breakpoint);
                    self.tracer
                        .resume(pid)
                        .map_err(AcquireError::target("continue the starter"))?;
                    let ev = self.wait_starter()?;
                    if !matches!(ev, Event::Ended { .. } | Event::Timeout) {
                        self.tracer
                            .stop_all(pid)
                            .map_err(AcquireError::target("stop the starter"))?;
                    }
                    self.handle(acq, ev)?;
                }
                Action::WriteAttachFifo { path } => self.fifos.push(write_fifo(&path)?),
                Action::AttachRanks(ranks) => {
                    let ev = self.attach_proven(acq, &ranks)?;
                    self.handle(acq, Event::RanksAttached(ev))?;
                }
                Action::Finished => {
                    return acq
                        .take_job()
                        .ok_or_else(|| AcquireError::Usage("finished without a job".into()));
                }
                Action::Failed(e) => return Err(e),
            }
        }
    }
}

/// Attaches `ranks` of starter `starter`'s table, each only once proven to be the rank the
/// table names (and its start time checked again right before and right after the
/// attach: a pid reused in between is let go at once and refused).
fn attach_proven(
    tracer: &Tracer,
    starter: u32,
    allow_other_users: bool,
    entries: Option<&mpir_types::mpir::ResolvedTable>,
    ranks: &[(u64, u32)],
) -> Result<Vec<AttachOutcome>, AcquireError> {
    let mut prover = prove::Prover::new(starter, allow_other_users)?;
    let mut out = Vec::with_capacity(ranks.len());
    let mut proven = Vec::new();
    for &(rank, pid) in ranks {
        let executable = entries
            .and_then(|t| t.rank(usize::try_from(rank).ok()?))
            .and_then(|r| r.executable);
        match prover.prove(rank, i64::from(pid), executable) {
            Ok(p) => proven.push((rank, pid, p)),
            Err(reason) => out.push(AttachOutcome::refused(rank, reason)),
        }
    }
    // Inside a container the rank is the process found there, not the table's pid.
    let proven: Vec<_> = proven
        .into_iter()
        .map(|(rank, _, p)| (rank, p.facts.pid, p))
        .collect();
    // Right before attaching: the pid still names the proven process.
    let (proven, reused): (Vec<_>, Vec<_>) = proven
        .into_iter()
        .partition(|(_, pid, p)| prove::still_same(*pid, &p.facts));
    out.extend(
        reused
            .into_iter()
            .map(|(rank, pid, _)| AttachOutcome::refused(rank, Refusal::Reused { pid })),
    );
    let pids: Vec<u32> = proven.iter().map(|&(_, pid, _)| pid).collect();
    let results = tracer
        .attach_many(&pids)
        .map_err(AcquireError::target("attach the ranks"))?;
    for ((rank, pid, p), r) in proven.into_iter().zip(results) {
        let control = match r {
            // Right after: still the same process (else it was reused in between).
            Ok(_) if !prove::still_same(pid, &p.facts) => {
                let _ = tracer.detach(pid);
                RankControl::Refused {
                    reason: Refusal::Reused { pid },
                }
            }
            Ok(threads) => RankControl::Attached {
                threads,
                proven: p.proven,
            },
            Err(error) => RankControl::Failed { error },
        };
        out.push(AttachOutcome::new(rank, control).with_container(p.container));
    }
    Ok(out)
}

/// The facts about this node that acquisition with `options` decides locality by: the ones
/// given ([`AcquireOptions::with_this_node`]), else this machine's (host names, `/etc/hosts`
/// aliases, interface addresses), plus the aliases. A tool that classifies hosts itself (e.g.
/// an MPI2DD-only job's processes) uses the same facts through this.
pub fn node_facts(options: &AcquireOptions) -> mpir_types::node::ThisNode {
    match options.this_node {
        Some(_) => options.node_facts(),
        None => options
            .clone()
            .with_this_node(mpir_target::live::node::this_node())
            .node_facts(),
    }
}

/// The starter, already opened (its images are not read twice), and its table when it was
/// discovered ([`discover`]).
struct Opened {
    target: LiveTarget,
    discovered: Option<mpir_types::mpir::discover::Discovered>,
}

fn acquire(
    tracer: Tracer,
    pid: u32,
    mode: Mode,
    first: Event,
    options: AcquireOptions,
    child: Option<Child>,
    opened: Option<Opened>,
) -> Result<Acquired, AcquireError> {
    let (opened, discovered) = opened.map_or((None, None), |o| (Some(o.target), o.discovered));
    let mut options = options;
    if options.this_node.is_none() {
        options.this_node = Some(mpir_target::live::node::this_node());
    }
    let target = match opened.map_or_else(|| open_for(pid, &options), Ok) {
        Ok(t) => t,
        Err(e) => {
            let _ = tracer.detach_all();
            return Err(e);
        }
    };
    let mut driver = Driver {
        tracer,
        pid,
        target,
        options: options.clone(),
        fifos: Vec::new(),
        starter_breakpoint: None,
        armed_being_debugged: false,
        discovered: discovered.clone(),
    };
    let mut acq = Acquisition::new(pid, mode, options.clone());
    if let Some(d) = discovered {
        acq = acq.with_discovered(d);
    }
    let outcome = driver
        .handle(&mut acq, first)
        .and_then(|()| driver.run(&mut acq));
    match outcome {
        Ok(mut job) => {
            let gates = writes_gate(options.gate, &job);
            let launcher_stopped = mode == Mode::Launch && slurm::wakes_ranks(&job);
            if options.hold || gates {
                let notes = settle_ranks(&driver.tracer, &job, options.timeout);
                job.notes.extend(notes);
            }
            if gates && launcher_stopped {
                // Stopped by the launcher before their libraries were loaded: their gates are
                // mapped once they reach their program's entry point.
                let notes = slurm::run_to_program(&driver.tracer, &job, options.timeout);
                job.notes.extend(notes);
            }
            let armed = if gates {
                arm_gates(&driver.tracer, &job, &options.debug)
            } else {
                HashSet::new()
            };
            let wake = if launcher_stopped {
                slurm::held_ranks(&job)
            } else {
                Vec::new()
            };
            let mut acquired = Acquired {
                job,
                debug: options.debug.clone(),
                gate: options.gate,
                timeout: options.timeout,
                tracer: Some(driver.tracer),
                starter: Some(driver.target),
                child,
                held: true,
                armed,
                wake,
                parked: acq.parked(),
                pmix: None,
            };
            if !options.hold {
                let problems = acquired.release()?;
                acquired.job.notes.extend(problems);
            }
            Ok(acquired)
        }
        Err(e) => {
            // Leave everything as found: our variable writes undone, bytes restored, all
            // threads detached and running.
            if let Some(s) = acq.starter() {
                let _ = undo_writes(&driver.target, s);
            }
            let _ = driver.tracer.detach_all();
            Err(e)
        }
    }
}

/// Launch mode: runs `command` (the starter, or a wrapper that execs it) under control and
/// acquires the job it spawns.
///
/// A launcher of a PRRTE installation (Open MPI 5's `mpirun`: [`pmix::is_prrte_launcher`]), or
/// any with [`InterfaceChoice::Pmix`], is launched through PMIx instead ([`pmix`]: its ranks
/// held in `PMIx_Init`).
pub fn launch(command: Command, options: AcquireOptions) -> Result<Acquired, AcquireError> {
    let through_pmix = match options.interface {
        InterfaceChoice::Pmix => true,
        InterfaceChoice::Auto => pmix::is_prrte_launcher(command.get_program()),
        _ => false,
    };
    if through_pmix {
        return pmix::launch(command, options);
    }
    let tracer = Tracer::with_options(options.tracer_options())
        .map_err(AcquireError::target("start the tracer"))?;
    let child = tracer
        .launch(command)
        .map_err(AcquireError::target("launch the starter"))?;
    let pid = child.id();
    let entry = match entry_point(pid) {
        Ok(e) => e,
        Err(e) => {
            let _ = tracer.detach_all();
            return Err(e);
        }
    };
    acquire(
        tracer,
        pid,
        Mode::Launch,
        Event::Exec { entry },
        options,
        Some(child),
        None,
    )
}

/// A clear error for a pid that names no process.
fn exists(pid: u32) -> Result<(), AcquireError> {
    if pid == 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
        return Err(AcquireError::Usage(format!("no process with pid {pid}")));
    }
    Ok(())
}

/// Attach mode: acquires the job of the running starter `pid`. A process that defines no MPIR
/// symbols at all but has descendants has its table searched for ([`discover`]): the job is
/// then acquired through the one table found, never writing into the starter, or the search's
/// refusal is returned ([`AcquireError::Discovery`]).
///
/// A process with no MPIR symbol that a valid PMIx tool rendezvous file names (Open MPI 5's
/// `prterun`), or any with [`InterfaceChoice::Pmix`], is attached through PMIx ([`pmix`]).
pub fn attach(pid: u32, options: AcquireOptions) -> Result<Acquired, AcquireError> {
    exists(pid)?;
    slurm::refuse_shepherd(pid)?;
    let target = open_for(pid, &options)?;
    if speaks_pmix(pid, &target, &options)? {
        return pmix::attach(pid, options);
    }
    attach_opened(pid, options, Some(target))
}

/// Whether `pid` is to be acquired through PMIx: asked for, or (auto) no MPIR symbol and a
/// valid tool rendezvous file.
fn speaks_pmix(
    pid: u32,
    target: &LiveTarget,
    options: &AcquireOptions,
) -> Result<bool, AcquireError> {
    Ok(match options.interface {
        InterfaceChoice::Pmix => true,
        InterfaceChoice::Auto => {
            discover::has_no_mpir_symbols(target)? && pmix::is_pmix_server(pid)
        }
        _ => false,
    })
}

/// [`attach`], with the starter's images already opened (they are not read twice).
fn attach_opened(
    pid: u32,
    options: AcquireOptions,
    opened: Option<LiveTarget>,
) -> Result<Acquired, AcquireError> {
    let target = opened.map_or_else(|| open_for(pid, &options), Ok)?;
    let search = discover::searchable(pid, &target)?;
    let tracer = Tracer::with_options(options.tracer_options())
        .map_err(AcquireError::target("start the tracer"))?;
    tracer
        .attach(pid)
        .map_err(AcquireError::target("attach to the starter"))?;
    let discovered = discover::while_held(&tracer, pid, &target, &options, search)?;
    acquire(
        tracer,
        pid,
        Mode::Attach,
        Event::Attached,
        options,
        None,
        Some(Opened { target, discovered }),
    )
}

/// Which ranks a selection attaches (for callers building a selection from a list).
pub fn selection(ranks: impl IntoIterator<Item = u64>) -> RankSelection {
    RankSelection::Only(mpir_types::ranks::RankSet::from_ranks(ranks))
}

/// Whether rank `rank` of `job` is held by us.
pub fn is_attached(job: &Job, rank: u64) -> bool {
    matches!(job.control(rank), RankControl::Attached { .. })
}
