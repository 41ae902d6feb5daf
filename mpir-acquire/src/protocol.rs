//! The MPIR acquisition protocol (MPIR 1.1 chapters 6–9, `mpich-attach.txt`) as a sans-IO
//! state machine.
//!
//! [`Acquisition`] consumes [`Event`]s — the starter stopped at a new program, attached, a
//! breakpoint hit, the starter gone, a wait that timed out, ranks attached — and emits
//! [`Action`]s for a driver to carry out: plant or remove a breakpoint, return from
//! `MPIR_Breakpoint`, continue the starter, write the attach FIFO, attach ranks. It reads and
//! writes the starter's *variables* itself, through any [`Target`] handed to
//! [`Acquisition::handle`] (an `mpir_target` `MockTarget` in tests, a
//! [`LiveTarget`](mpir_target::live::LiveTarget) in [`crate::live`]); it never touches
//! processes, threads or clocks. The only writes it makes are the ones the spec asks of a
//! tool: `MPIR_being_debugged`, and, when asked for, `MPIR_executable_path` and
//! `MPIR_server_arguments`.
//!
//! Launch mode: at the first stop (after `exec`) a breakpoint goes on the program's entry
//! point; there every library the program links is mapped (Open MPI's MPIR symbols live in
//! `libopen-rte.so`), `main` has not run, and `MPIR_being_debugged` is set before any job can
//! be spawned. A program without `MPIR_Breakpoint` at its entry may be a wrapper
//! (`sh -c 'exec mpiexec …'`): the machine waits for the next `exec`. Attach mode: a filled
//! table is read at once; an empty one means waiting for the spawn event.

use std::collections::{BTreeMap, VecDeque};

use mpir_target::proctable::{ProcTable, read_proctable};
use mpir_target::{MemoryExt, SymbolLookupExt, Target, TargetError};
use mpir_types::mpir::{DebugState, Flag, MpirFlags, symbols};

use crate::error::AcquireError;
use crate::identity::{Proven, Refusal};
use crate::job::{Job, RankControl, Starter};
use crate::note::Note;
use crate::options::AcquireOptions;
use crate::quirks::{self, QuirkFact, Quirks};

mod discovered;
mod variables;

/// How the starter came under control.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    clippy::exhaustive_enums,
    reason = "MPIR 1.1 defines two ways to acquire a job: launch and attach"
)]
pub enum Mode {
    /// The tool started it (stopped at its first instruction after `exec`).
    Launch,
    /// The tool attached to it while it ran.
    Attach,
}

/// What happened to the starter (the driver's report).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// Launch mode: the starter is stopped at the start of a new program (after `exec`), whose
    /// entry point (`AT_ENTRY`) is `entry`. The target handed in now describes that program.
    Exec {
        /// The new program's entry point.
        entry: u64,
    },
    /// Attach mode: attached, every thread stopped.
    Attached,
    /// Thread `tid` hit the breakpoint at `address`, one of those the machine asked for.
    Breakpoint {
        /// The thread.
        tid: u32,
        /// The breakpoint.
        address: u64,
    },
    /// The starter is gone: "exited with status 3", "was killed by signal 9"…
    Ended {
        /// How.
        how: String,
    },
    /// The wait that followed [`Action::Continue`] ended with nothing to report.
    Timeout,
    /// The outcome of [`Action::AttachRanks`], rank by rank: attached (proven first), refused
    /// (not shown to be the rank: never touched), or failed.
    RanksAttached(Vec<AttachOutcome>),
}

/// How one rank asked for by [`Action::AttachRanks`] was handled
/// ([`Event::RanksAttached`]): [`RankControl::Attached`], [`RankControl::Refused`] or
/// [`RankControl::Failed`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AttachOutcome {
    /// The rank.
    pub rank: u64,
    /// What was done to it.
    pub control: RankControl,
    /// When the table's pid runs a container runtime: the rank found inside it, whose pid
    /// was the one handled ([`Job::containers`](crate::Job::containers)).
    pub container: Option<crate::container::Contained>,
}

impl AttachOutcome {
    /// `rank` was handled as `control` says.
    pub fn new(rank: u64, control: RankControl) -> Self {
        AttachOutcome {
            rank,
            control,
            container: None,
        }
    }

    /// The rank was found inside a container ([`AttachOutcome::container`]).
    pub fn with_container(mut self, container: Option<crate::container::Contained>) -> Self {
        self.container = container;
        self
    }

    /// `rank` is attached (proven first as `proven` says); these are its threads.
    pub fn attached(rank: u64, threads: Vec<u32>, proven: Proven) -> Self {
        AttachOutcome::new(rank, RankControl::Attached { threads, proven })
    }

    /// `rank` was not touched: it could not be shown to be the rank the table names.
    pub fn refused(rank: u64, reason: Refusal) -> Self {
        AttachOutcome::new(rank, RankControl::Refused { reason })
    }

    /// `rank` was proven, but attaching it failed.
    pub fn failed(rank: u64, error: TargetError) -> Self {
        AttachOutcome::new(rank, RankControl::Failed { error })
    }
}

/// What the driver must do next.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Plant a breakpoint in the starter.
    InsertBreakpoint {
        /// Where.
        address: u64,
    },
    /// Remove a breakpoint from the starter, restoring its bytes.
    RemoveBreakpoint {
        /// Where.
        address: u64,
    },
    /// Make thread `tid`, stopped at the entry of `MPIR_Breakpoint`, return from it.
    ReturnFromCall {
        /// The thread.
        tid: u32,
    },
    /// Make thread `tid`, stopped at the entry of `MPIR_Breakpoint`, execute the instruction
    /// under the breakpoint (the breakpoint stays), and stay stopped: the starter runs the rest
    /// of the function's body when it next runs. For launchers whose `MPIR_Breakpoint` does
    /// something ([`Quirks::breakpoint_wakes_ranks`]: Slurm's `srun` wakes its tasks there),
    /// before a [`Action::Continue`]; when the event ends acquisition instead, the thread stays
    /// at the entry ([`Acquisition::parked`]).
    StepOverBreakpoint {
        /// The thread.
        tid: u32,
    },
    /// Let the starter run, wait for its next event (bounded by the options' timeout) and
    /// report it.
    Continue,
    /// Attach FIFO extension: open the FIFO at `path` for writing, without blocking, and
    /// write one byte of value 1.
    WriteAttachFifo {
        /// The FIFO.
        path: String,
    },
    /// Attach to these ranks (rank, pid), each on this node by the table, once proven to be
    /// the rank the table names ([`crate::identity`]; the table is
    /// [`Acquisition::table`]), and report [`Event::RanksAttached`].
    AttachRanks(Vec<(u64, u32)>),
    /// The job is acquired: [`Acquisition::take_job`] has it. The starter is stopped.
    Finished,
    /// Acquisition failed; the driver must leave every process as it found it.
    Failed(AcquireError),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    /// Launch: waiting for the entry-point breakpoint.
    ToEntry(u64),
    /// Launch: the program was not a starter; waiting for it to exec one.
    ToExec,
    /// Waiting for the spawn event at `MPIR_Breakpoint`.
    ToSpawn,
    /// Waiting for the ranks to be attached.
    Attaching,
    Done,
}

/// The acquisition of one job. See the [module documentation](self).
#[derive(Debug)]
pub struct Acquisition {
    pid: u32,
    mode: Mode,
    options: AcquireOptions,
    phase: Phase,
    actions: VecDeque<Action>,
    starter: Option<Starter>,
    table: Option<ProcTable>,
    control: BTreeMap<u64, RankControl>,
    containers: BTreeMap<u64, crate::container::Contained>,
    notes: Vec<Note>,
    events: u32,
    /// Whether the job was spawned while we held the starter (so its ranks may wait at
    /// `MPIR_debug_gate` for us).
    spawned_here: bool,
    /// Attach mode, the job already running: tool daemons asked for through the attach FIFO,
    /// whose spawn event is theirs, not the job's (its ranks are read as a running job's).
    daemons_for_running_job: bool,
    host_locality: Vec<Option<mpir_types::node::Locality>>,
    job: Option<Job>,
    /// A starter without MPIR symbols whose table was found by a search: never written into.
    discovered: Option<mpir_types::mpir::discover::Discovered>,
    /// The starter's thread left stopped at the entry of `MPIR_Breakpoint`.
    parked: Option<u32>,
}

/// The starter's presence flags (MPIR 1.1 §9.10–9.14) as `target` defines them: from a live
/// starter, or from a starter's core file.
pub fn read_flags<T: Target + ?Sized>(target: &T) -> MpirFlags {
    let mut flags = MpirFlags::default();
    flags.i_am_starter = read_flag(target, &[symbols::I_AM_STARTER]);
    flags.acquired_pre_main = read_flag(target, &[symbols::ACQUIRED_PRE_MAIN]);
    flags.force_to_main = read_flag(target, &[symbols::FORCE_TO_MAIN]);
    flags.partial_attach_ok = read_flag(target, &[symbols::PARTIAL_ATTACH_OK]);
    flags.ignore_queues = read_flag(target, &symbols::IGNORE_QUEUES_SPELLINGS);
    flags
}

fn read_flag<T: Target + ?Sized>(target: &T, names: &[&str]) -> Flag {
    for name in names {
        if let Ok(Some(sym)) = target.symbol(name) {
            return Flag::present(target.read_c_int(sym.address, name).ok());
        }
    }
    Flag::ABSENT
}

impl Acquisition {
    /// A new acquisition of starter `pid`.
    pub fn new(pid: u32, mode: Mode, options: AcquireOptions) -> Self {
        Acquisition {
            pid,
            mode,
            options,
            phase: Phase::Start,
            actions: VecDeque::new(),
            starter: None,
            table: None,
            control: BTreeMap::new(),
            containers: BTreeMap::new(),
            notes: Vec::new(),
            events: 0,
            spawned_here: false,
            daemons_for_running_job: false,
            host_locality: Vec::new(),
            job: None,
            discovered: None,
            parked: None,
        }
    }

    /// The starter's thread stopped at the entry of `MPIR_Breakpoint` when acquisition ended
    /// there without returning from it: a launcher whose breakpoint wakes the ranks
    /// ([`Quirks::breakpoint_wakes_ranks`]). Letting the starter go runs the function's body
    /// (the wake-up); [`Action::ReturnFromCall`] on this thread skips it.
    pub fn parked(&self) -> Option<u32> {
        self.parked
    }

    /// The table, once read (until the job is taken).
    pub fn table(&self) -> Option<&ProcTable> {
        self.table.as_ref()
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The acquired job, once [`Action::Finished`] was emitted.
    pub fn take_job(&mut self) -> Option<Job> {
        self.job.take()
    }

    /// The starter, once found (also after a failure, so that a driver knows what to undo).
    pub fn starter(&self) -> Option<&Starter> {
        self.starter.as_ref()
    }

    /// What the machine is waiting for, in words.
    pub fn waiting_for(&self) -> String {
        match self.phase {
            Phase::Start => "the starter to stop".into(),
            Phase::ToEntry(a) => format!("the program's entry point ({a:#x})"),
            Phase::ToExec => "the program to exec an MPIR starter".into(),
            Phase::ToSpawn => {
                let mut s = "the job spawn event (MPIR_Breakpoint with MPIR_DEBUG_SPAWNED)".into();
                if let Some(l) = self.starter.as_ref().and_then(|s| s.launcher)
                    && Quirks::of(l).needs_being_debugged_before_spawn
                    && self.mode == Mode::Attach
                {
                    s = format!(
                        "{s}; note: {l} raises it only if MPIR_being_debugged was set before \
                         the job was spawned"
                    );
                }
                s
            }
            Phase::Attaching => "the ranks to be attached".into(),
            Phase::Done => "nothing".into(),
        }
    }

    fn fail(&mut self, e: AcquireError) {
        self.phase = Phase::Done;
        self.actions.clear();
        self.actions.push_back(Action::Failed(e));
    }

    /// Feeds one event; the starter's variables are read and written through `target`.
    pub fn handle<T: Target + ?Sized>(&mut self, target: &T, event: Event) {
        if let Err(e) = self.step(target, event) {
            self.fail(e);
        }
    }

    fn step<T: Target + ?Sized>(&mut self, target: &T, event: Event) -> Result<(), AcquireError> {
        let pid = self.pid;
        match (self.phase, event) {
            (Phase::Done, _) => Err(AcquireError::Usage(
                "the acquisition is over; no more events".into(),
            )),
            (_, Event::Ended { how }) => {
                if self.phase == Phase::ToExec {
                    return Err(AcquireError::NotAStarter {
                        pid,
                        symbol: symbols::BREAKPOINT,
                        images: format!("the program it ran, which then {how}"),
                    });
                }
                Err(AcquireError::StarterEnded {
                    pid,
                    how,
                    waiting_for: self.waiting_for(),
                })
            }
            (_, Event::Timeout) => Err(AcquireError::Timeout {
                pid,
                waiting_for: self.waiting_for(),
                after: self.options.timeout,
            }),
            (Phase::Start | Phase::ToExec, Event::Exec { entry }) if self.mode == Mode::Launch => {
                self.phase = Phase::ToEntry(entry);
                self.actions
                    .push_back(Action::InsertBreakpoint { address: entry });
                self.actions.push_back(Action::Continue);
                Ok(())
            }
            (Phase::ToEntry(entry), Event::Breakpoint { address, .. }) if address == entry => {
                self.actions
                    .push_back(Action::RemoveBreakpoint { address: entry });
                if self.set_up_starter(target)? {
                    self.phase = Phase::ToSpawn;
                } else {
                    self.notes.push(Note::WaitedForExec);
                    self.phase = Phase::ToExec;
                }
                self.actions.push_back(Action::Continue);
                Ok(())
            }
            (Phase::Start, Event::Attached) if self.mode == Mode::Attach => {
                if !self.set_up_starter(target)? {
                    return Err(AcquireError::NotAStarter {
                        pid,
                        symbol: symbols::BREAKPOINT,
                        images: "any image of the process".into(),
                    });
                }
                let size_sym = target
                    .require_symbol(symbols::PROCTABLE_SIZE)
                    .map_err(AcquireError::target("attach: MPIR_proctable_size"))?;
                let size = target
                    .read_c_int(size_sym.address, symbols::PROCTABLE_SIZE)
                    .map_err(AcquireError::target("attach: read MPIR_proctable_size"))?;
                let state = self.read_debug_state(target);
                if size > 0 {
                    // Tool daemons for a running job: the starter launches them when its
                    // attach FIFO is written, and raises a spawn event (Open MPI 4's orterun:
                    // one per node with ranks, then MPIR_Breakpoint).
                    if self.options.tool_daemon.is_some()
                        && self.discovered.is_none()
                        && self.attach_fifo(target)
                    {
                        self.daemons_for_running_job = true;
                        self.phase = Phase::ToSpawn;
                        self.actions.push_back(Action::Continue);
                        return Ok(());
                    }
                    return self.table_ready(target);
                }
                if self.discovered.is_some() {
                    return Err(self.discovered_empty(size));
                }
                if size < 0 && state == Some(DebugState::Spawned.to_raw()) {
                    return Err(AcquireError::BadTable {
                        pid,
                        size,
                        state: "MPIR_DEBUG_SPAWNED",
                    });
                }
                self.attach_fifo(target);
                self.phase = Phase::ToSpawn;
                self.actions.push_back(Action::Continue);
                Ok(())
            }
            (Phase::ToSpawn, Event::Breakpoint { tid, address })
                if self
                    .starter
                    .as_ref()
                    .is_some_and(|s| s.breakpoint == address) =>
            {
                self.events += 1;
                let runs_body = self
                    .starter
                    .as_ref()
                    .and_then(|s| s.launcher)
                    .is_some_and(|l| Quirks::of(l).breakpoint_wakes_ranks);
                if !runs_body {
                    self.actions.push_back(Action::ReturnFromCall { tid });
                }
                if self.events > self.options.max_events {
                    return Err(AcquireError::TooManyEvents {
                        pid,
                        events: self.events,
                    });
                }
                let before = self.actions.len();
                self.mpir_event(target)?;
                if runs_body {
                    // The body runs when the starter next runs: past the breakpoint before a
                    // continue, else (the job acquired) parked at its entry.
                    let mut next = self.actions.iter().skip(before);
                    match next.position(|a| *a == Action::Continue) {
                        Some(i) => self
                            .actions
                            .insert(before + i, Action::StepOverBreakpoint { tid }),
                        None => self.parked = Some(tid),
                    }
                }
                Ok(())
            }
            (Phase::Attaching, Event::RanksAttached(results)) => {
                for o in results {
                    if let Some(c) = o.container {
                        self.containers.insert(o.rank, c);
                    }
                    self.control.insert(o.rank, o.control);
                }
                self.finish();
                Ok(())
            }
            (_, event) => Err(AcquireError::Usage(format!(
                "unexpected event {event:?} while waiting for {}",
                self.waiting_for()
            ))),
        }
    }

    /// At the point where the starter's images are loaded: find `MPIR_Breakpoint` (false if
    /// absent), read the flags, do the tool daemon writes, set `MPIR_being_debugged`, plant
    /// the breakpoint.
    fn set_up_starter<T: Target + ?Sized>(&mut self, target: &T) -> Result<bool, AcquireError> {
        if self.discovered.is_some() {
            return self.set_up_discovered(target);
        }
        let Some(bp) = target
            .symbol(symbols::BREAKPOINT)
            .map_err(AcquireError::target("look up MPIR_Breakpoint"))?
        else {
            return Ok(false);
        };
        let flags = read_flags(target);
        let image = bp.image.clone().or_else(|| bp.found_in.clone());
        let launcher = quirks::identify(image.as_deref(), image.as_deref());
        // Symbols from a file other than the image: a separate debug file.
        let from_debug_file = bp.found_in.is_some() && bp.found_in != bp.image;
        if let Some(l) = launcher {
            self.notes.extend(
                Quirks::of(l)
                    .facts
                    .iter()
                    .filter(|&&f| f != QuirkFact::HydraStripped || from_debug_file)
                    .map(|&f| Note::Quirk(f)),
            );
        }
        let keeps_being_debugged = target
            .symbol(quirks::INTEL_WAIT_FOR_DEBUGGER)
            .map_err(AcquireError::target("look up HYD_dbg_wait_for_debugger"))?
            .is_some();
        let mut starter = Starter {
            pid: self.pid,
            breakpoint: bp.address,
            image,
            flags,
            launcher,
            set_being_debugged: false,
            keeps_being_debugged: false,
            debug_state: None,
            job_id: None,
            step_id: None,
        };
        if let Some(d) = self.options.tool_daemon.clone() {
            self.write_tool_daemon(target, &d.executable, &d.arguments)?;
        }
        match target
            .symbol(symbols::BEING_DEBUGGED)
            .map_err(AcquireError::target("look up MPIR_being_debugged"))?
        {
            Some(sym) => {
                target
                    .write_c_int(sym.address, 1, symbols::BEING_DEBUGGED)
                    .map_err(AcquireError::target("set MPIR_being_debugged"))?;
                starter.set_being_debugged = true;
                if keeps_being_debugged {
                    starter.keeps_being_debugged = true;
                    self.notes
                        .push(Note::Quirk(QuirkFact::IntelWaitsForDebugger));
                }
            }
            None => self.notes.push(Note::NoBeingDebugged),
        }
        self.starter = Some(starter);
        self.actions.push_back(Action::InsertBreakpoint {
            address: bp.address,
        });
        Ok(true)
    }

    /// An MPIR event: the starter is stopped in `MPIR_Breakpoint`.
    fn mpir_event<T: Target + ?Sized>(&mut self, target: &T) -> Result<(), AcquireError> {
        let state_sym = target
            .require_symbol(symbols::DEBUG_STATE)
            .map_err(AcquireError::target("MPIR event: MPIR_debug_state"))?;
        let raw = target
            .read_c_int(state_sym.address, symbols::DEBUG_STATE)
            .map_err(AcquireError::target("MPIR event: read MPIR_debug_state"))?;
        match DebugState::from_raw(raw) {
            DebugState::Spawned => {
                if let Some(s) = self.starter.as_mut() {
                    s.debug_state = Some(raw);
                }
                let size_sym = target
                    .require_symbol(symbols::PROCTABLE_SIZE)
                    .map_err(AcquireError::target("spawn event: MPIR_proctable_size"))?;
                let size = target
                    .read_c_int(size_sym.address, symbols::PROCTABLE_SIZE)
                    .map_err(AcquireError::target(
                        "spawn event: read MPIR_proctable_size",
                    ))?;
                if size < 0 {
                    return Err(AcquireError::BadTable {
                        pid: self.pid,
                        size,
                        state: "MPIR_DEBUG_SPAWNED",
                    });
                }
                if size == 0 {
                    self.notes.push(Note::EmptySpawn);
                    self.actions.push_back(Action::Continue);
                    return Ok(());
                }
                self.spawned_here = !self.daemons_for_running_job;
                self.table_ready(target)
            }
            DebugState::Aborting => {
                let message = match target.symbol(symbols::DEBUG_ABORT_STRING) {
                    Ok(Some(sym)) => match target
                        .read_pointer(sym.address, symbols::DEBUG_ABORT_STRING)
                        .and_then(|p| {
                            if p == 0 {
                                Ok(b"(MPIR_debug_abort_string is NULL)".to_vec())
                            } else {
                                target.read_c_string(p, 4096)
                            }
                        }) {
                        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                        Err(e) => format!("(MPIR_debug_abort_string unreadable: {e})"),
                    },
                    _ => "(the starter defines no MPIR_debug_abort_string)".into(),
                };
                Err(AcquireError::JobAborted {
                    pid: self.pid,
                    message,
                })
            }
            DebugState::Null => {
                self.actions.push_back(Action::Continue);
                Ok(())
            }
            other => {
                self.notes.push(Note::UnknownEventState {
                    state: other.to_raw(),
                });
                self.actions.push_back(Action::Continue);
                Ok(())
            }
        }
    }

    /// Whether acquisition writes the ranks' `MPIR_debug_gate`, so must attach every rank
    /// (not only the selected ones) to release it: as [`GateRelease`](crate::GateRelease)
    /// says, and under `Auto` only for a job spawned while we held the starter — the ranks of
    /// a job that ran before we came were not made to wait for us.
    fn needs_gate(&self, partial_ok: bool) -> bool {
        match self.options.gate {
            crate::GateRelease::Auto => {
                !partial_ok && (self.spawned_here || self.mode == Mode::Launch)
            }
            crate::GateRelease::Always => true,
            _ => false,
        }
    }

    /// The table is filled: read it and decide which ranks to attach. Only ranks on this node
    /// are candidates (the driver proves each before attaching); in attach mode a job that
    /// already ran is read without touching its ranks unless asked to hold them.
    fn table_ready<T: Target + ?Sized>(&mut self, target: &T) -> Result<(), AcquireError> {
        let table = read_proctable(target, &self.options.read)
            .map_err(AcquireError::target("read the process descriptor table"))?;
        self.read_launcher_ids(target);
        let partial_ok = self
            .starter
            .as_ref()
            .is_some_and(|s| s.flags.partial_attach_ok.present);
        let gate = self.needs_gate(partial_ok);
        let attach_mode_read_only = self.mode == Mode::Attach && !self.spawned_here;
        if !partial_ok && gate && self.options.ranks != crate::RankSelection::All {
            self.notes.push(Note::AllRanksForGate);
        }
        if attach_mode_read_only && !partial_ok && !gate && self.discovered.is_none() {
            self.notes.push(Note::GateLeftAlone);
        }
        // Attach mode reads a running job without touching it, unless asked for control.
        let wanted = |rank: u64| {
            if gate && !partial_ok {
                return true;
            }
            if attach_mode_read_only && !self.options.hold && !gate {
                return false;
            }
            self.options.ranks.contains(rank)
        };
        let node = self.options.node_facts();
        self.host_locality = crate::job::classify_hosts(&table, &node);
        let mut attach = Vec::new();
        for e in &table.resolved.entries {
            if !wanted(e.rank) {
                continue;
            }
            let local = e
                .host
                .and_then(|id| self.host_locality.get(id.index()).cloned().flatten())
                .is_some_and(|l| l.is_local());
            if !local {
                continue; // Job::control says Remote
            }
            match u32::try_from(e.pid) {
                Ok(p) if p > 0 && p == self.pid => {
                    self.notes.push(Note::RankIsStarter {
                        rank: e.rank,
                        pid: p,
                    });
                }
                Ok(p) if p > 0 => attach.push((e.rank, p)),
                _ => {
                    self.control.insert(
                        e.rank,
                        RankControl::Refused {
                            reason: Refusal::InvalidPid { pid: e.pid },
                        },
                    );
                }
            }
        }
        self.table = Some(table);
        if attach.is_empty() {
            self.finish();
        } else {
            self.phase = Phase::Attaching;
            self.actions.push_back(Action::AttachRanks(attach));
        }
        Ok(())
    }

    fn finish(&mut self) {
        self.phase = Phase::Done;
        if let (Some(starter), Some(table)) = (self.starter.clone(), self.table.take()) {
            self.job = Some(Job {
                starter,
                table,
                control: std::mem::take(&mut self.control),
                containers: std::mem::take(&mut self.containers),
                notes: std::mem::take(&mut self.notes),
                this_node: self.options.node_facts(),
                host_locality: std::mem::take(&mut self.host_locality),
                discovered: self.discovered.take(),
                pmix: None,
            });
            self.actions.push_back(Action::Finished);
        } else {
            self.actions.push_back(Action::Failed(AcquireError::Usage(
                "finished without a starter or a table".into(),
            )));
        }
    }
}

/// Detach protocol, variable part: sets `MPIR_being_debugged` back to 0 if this tool set it
/// (and the starter does not wait for it after the spawn event: [`Starter::keeps_being_debugged`]).
/// (Breakpoints come out and processes run again through the driver.)
pub fn undo_writes<T: Target + ?Sized>(target: &T, starter: &Starter) -> Result<(), AcquireError> {
    if !starter.set_being_debugged || starter.keeps_being_debugged {
        return Ok(());
    }
    let sym = target
        .require_symbol(symbols::BEING_DEBUGGED)
        .map_err(AcquireError::target("detach: MPIR_being_debugged"))?;
    target
        .write_c_int(sym.address, 0, symbols::BEING_DEBUGGED)
        .map_err(AcquireError::target("detach: reset MPIR_being_debugged"))
}
