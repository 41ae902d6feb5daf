//! MPI2DD events in acquisition, sans-IO: which processes of an MPI2DD job to hold and which
//! `debugger_flags` to write in each, and what a stop in `MPI2DD_breakpoint` means for the job (the
//! MPI2DD draft, *An Interface Between a Debugger and an MPI Implementation*; see the repository's
//! [spec list]).
//!
//! [spec list]: https://github.com/mpir-rs/mpir-rs/blob/main/docs/spec/README.md
//!
//! [`Watch`] starts from a traversed [`Job`] and emits [`WatchAction`]s:
//! hold every process (a breakpoint on `MPI2DD_breakpoint`, and the flags the draft lets a
//! debugger write: `REQUEST_DIRECTORY_EVENTS` in directories and metadirectories,
//! `BEING_DEBUGGED` in the starter, `GATE` in ranks once acquired). A stop with START, SPAWN,
//! CONNECT, ACCEPT, JOIN, DIRECTORY_CHANGED or METADIRECTORY_CHANGED asks for a new traversal
//! from the stopped process; the difference with the last job is reported, its new processes
//! held, and the stopped process resumed. ABORT is reported with its message. The driver is
//! [`crate::live::Watcher`].

use std::collections::{BTreeSet, VecDeque};

use mpi2dd::connect::ProcessKey;
use mpi2dd::events::{Event, Reaction};
use mpi2dd::flags::{DebugState, DebuggerFlags, MpiFlags};
use mpi2dd::job::{Job, JobDelta};
use mpi2dd::traverse::TraverseError;

/// What happened to a held process (the driver's report).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchInput {
    /// `process` stopped in `MPI2DD_breakpoint` (thread `tid`), with this event.
    Stopped {
        /// The process.
        process: ProcessKey,
        /// The thread.
        tid: u32,
        /// Its `debug_state` (and abort message).
        event: Event,
    },
    /// The traversal asked for by [`WatchAction::Traverse`], or why it failed.
    Traversed(Result<Job, TraverseError>),
}

/// What the driver must do.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchAction {
    /// Attach to `process`, plant a breakpoint on `MPI2DD_breakpoint`, set `flags` in its
    /// `debugger_flags`, and let it run.
    Hold {
        /// The process.
        process: ProcessKey,
        /// Flags to set.
        flags: DebuggerFlags,
    },
    /// Traverse the job from `from`, which is stopped, and report [`WatchInput::Traversed`].
    Traverse {
        /// The stopped process.
        from: ProcessKey,
    },
    /// Make thread `tid` of `process` return from `MPI2DD_breakpoint`, and let it run.
    Resume {
        /// The process.
        process: ProcessKey,
        /// The thread.
        tid: u32,
    },
    /// Tell the caller.
    Report(WatchReport),
}

/// What the caller hears of an event.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchReport {
    /// The job may have changed (`state` says why); `delta` is what did.
    Changed {
        /// The process that raised the event.
        from: ProcessKey,
        /// Its `debug_state`.
        state: DebugState,
        /// New and gone ranks and processes.
        delta: JobDelta,
    },
    /// The job is aborting.
    Aborting {
        /// The process that raised the event.
        from: ProcessKey,
        /// `abort_string`, if any.
        message: Option<String>,
    },
    /// A `debug_state` the draft does not define.
    Unknown {
        /// The process that raised the event.
        from: ProcessKey,
        /// The value.
        state: u8,
    },
    /// The traversal after an event failed; the job is as it was.
    Failed {
        /// The process that raised the event.
        from: ProcessKey,
        /// Why.
        error: TraverseError,
    },
}

/// MPI2DD events of a held job. See the [module documentation](self).
#[derive(Debug)]
pub struct Watch {
    job: Job,
    held: BTreeSet<ProcessKey>,
    actions: VecDeque<WatchAction>,
    /// The process stopped in an event that awaits its traversal.
    stopped: Option<(ProcessKey, u32, DebugState)>,
}

impl Watch {
    /// Starts watching `job`: every process of it is to be held.
    pub fn new(job: Job) -> Self {
        let mut w = Watch {
            job: Job::default(),
            held: BTreeSet::new(),
            actions: VecDeque::new(),
            stopped: None,
        };
        w.hold_new(&job);
        w.job = job;
        w
    }

    /// The job as last traversed.
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The processes held (or asked to be).
    pub fn held(&self) -> &BTreeSet<ProcessKey> {
        &self.held
    }

    /// The next thing to do, if any.
    pub fn poll_action(&mut self) -> Option<WatchAction> {
        self.actions.pop_front()
    }

    /// Holds what `job` has and is not held yet.
    fn hold_new(&mut self, job: &Job) {
        for record in &job.processes {
            if self.held.insert(record.process.clone()) {
                let mut flags = DebuggerFlags::REQUEST_DIRECTORY_EVENTS;
                if record.mpi_flags.contains(MpiFlags::I_AM_STARTER) {
                    flags = flags.union(DebuggerFlags::BEING_DEBUGGED);
                }
                self.actions.push_back(WatchAction::Hold {
                    process: record.process.clone(),
                    flags,
                });
            }
        }
        for (_, rank) in job.ranks() {
            if self.held.insert(rank.process.clone()) {
                self.actions.push_back(WatchAction::Hold {
                    process: rank.process.clone(),
                    flags: DebuggerFlags::GATE,
                });
            }
        }
    }

    /// Feeds one input.
    pub fn handle(&mut self, input: WatchInput) {
        match input {
            WatchInput::Stopped {
                process,
                tid,
                event,
            } => match event.reaction() {
                Reaction::Refresh => {
                    self.stopped = Some((process.clone(), tid, event.state));
                    self.actions
                        .push_back(WatchAction::Traverse { from: process });
                }
                Reaction::Abort { message } => {
                    self.actions
                        .push_back(WatchAction::Report(WatchReport::Aborting {
                            from: process.clone(),
                            message,
                        }));
                    self.actions.push_back(WatchAction::Resume { process, tid });
                }
                Reaction::Unknown(state) => {
                    self.actions
                        .push_back(WatchAction::Report(WatchReport::Unknown {
                            from: process.clone(),
                            state,
                        }));
                    self.actions.push_back(WatchAction::Resume { process, tid });
                }
                _ => self.actions.push_back(WatchAction::Resume { process, tid }),
            },
            WatchInput::Traversed(result) => {
                let Some((from, tid, state)) = self.stopped.take() else {
                    return;
                };
                let report = match result {
                    Ok(job) => {
                        let delta = self.job.delta(&job);
                        self.hold_new(&job);
                        self.job = job;
                        WatchReport::Changed {
                            from: from.clone(),
                            state,
                            delta,
                        }
                    }
                    Err(error) => WatchReport::Failed {
                        from: from.clone(),
                        error,
                    },
                };
                self.actions.push_back(WatchAction::Report(report));
                self.actions
                    .push_back(WatchAction::Resume { process: from, tid });
            }
        }
    }
}
