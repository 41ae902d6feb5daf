//! Holding ranks stopped only while they are read: [`Session::hold`], [`Held`],
//! [`ReleaseReport`].

use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::rc::Rc;

use mpir_acquire::live::{self, Acquired};
use mpir_acquire::{GateRelease, Job, RankControl, RankSelection};
use mpir_target::Target;
use mpir_target::live::procfs;
use mpir_target::live::tracer::{Tracer, TracerOptions};

use crate::error::{ReleaseProblem, SessionError, Unreadable};
use crate::known::Known;
use crate::release::ReleaseReport;
use crate::session::{Session, Source};

/// One rank while the session holds it: which rank, which process, and its target (memory,
/// symbols, types) or why it cannot be read.
#[derive(Clone)]
#[non_exhaustive]
pub struct HeldRank {
    /// Rank in `MPI_COMM_WORLD`, when a table says (processes named by pid, and cores without
    /// a starter core, learn it from their own `MPI_COMM_WORLD` once read).
    pub rank: Option<u64>,
    /// The process id (of the process, or recorded in the core).
    pub pid: u32,
    /// The executable it runs (for a message-queue DLL, which names images by path).
    pub image: PathBuf,
    /// Core files: the core this rank is read from.
    pub core: Option<PathBuf>,
    target: Result<Rc<dyn Target>, Unreadable>,
    /// The same target, concrete: what the unwinder needs (images, threads' registers).
    pub(crate) frozen: Option<Frozen>,
}

/// A held rank's target as the unwinder reads it.
#[derive(Clone)]
pub(crate) enum Frozen {
    /// A live process, stopped by the hold's tracer.
    Live(Rc<mpir_target::live::LiveTarget>),
    /// A core file.
    Core(Rc<mpir_target::corefile::CoreTarget>),
    /// A live process the kernel refuses this tool, read through its cooperative channel
    /// (not stopped: each thread copies its own registers and stack when asked).
    Coop(crate::channel::CoopRank),
}

impl std::fmt::Debug for HeldRank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldRank")
            .field("rank", &self.rank)
            .field("pid", &self.pid)
            .field("image", &self.image)
            .field("core", &self.core)
            .field("readable", &self.target.as_ref().map(|_| ()))
            .finish()
    }
}

impl HeldRank {
    /// The rank's memory, symbols and types — stopped while the [`Held`] lives (a live
    /// process), or a core file — or why it cannot be read. An unreadable rank was not
    /// touched, unless the reason says stopping or opening it failed.
    pub fn target(&self) -> Result<&Rc<dyn Target>, &Unreadable> {
        self.target.as_ref()
    }

    /// Why it cannot be read, if it cannot.
    pub fn unreadable(&self) -> Option<&Unreadable> {
        self.target.as_ref().err()
    }

    /// When the kernel refused this tool the rank and it is read through its cooperative
    /// channel instead: the refusal.
    pub fn cooperative(&self) -> Option<&mpir_types::access::AccessDenial> {
        match &self.frozen {
            Some(Frozen::Coop(c)) => Some(&c.denial),
            _ => None,
        }
    }
}

/// Who holds the ranks stopped.
pub(crate) enum Control {
    /// A job acquired with `hold`: the starter and its attached ranks.
    Job(Box<Acquired>),
    /// A tracer holding these pids.
    Pids(Tracer, Vec<u32>),
    /// Nothing (core files).
    Nothing,
}

impl Control {
    /// The tracer holding live ranks stopped (none for cores).
    pub(crate) fn tracer(&self) -> Option<&Tracer> {
        match self {
            Control::Job(a) => a.tracer(),
            Control::Pids(tracer, _) => Some(tracer),
            Control::Nothing => None,
        }
    }

    fn release(self) -> ReleaseReport {
        match self {
            Control::Job(mut a) => {
                let released = a.job().attached_pids();
                let problems = match a.release() {
                    Ok(p) => p.into_iter().map(ReleaseProblem::Job).collect(),
                    Err(e) => vec![ReleaseProblem::Acquire(e)],
                };
                ReleaseReport { released, problems }
            }
            Control::Pids(tracer, pids) => match tracer.detach_many(&pids) {
                Ok(results) => {
                    let mut report = ReleaseReport::default();
                    for (r, &pid) in results.into_iter().zip(&pids) {
                        match r {
                            Ok(()) => report.released.push(pid),
                            Err(source) => {
                                report.problems.push(ReleaseProblem::Detach { pid, source })
                            }
                        }
                    }
                    report
                }
                Err(e) => ReleaseReport {
                    released: Vec::new(),
                    problems: vec![ReleaseProblem::Tracer(e)],
                },
            },
            Control::Nothing => ReleaseReport::default(),
        }
    }
}

/// The selected ranks, held stopped until [`Held::release`] or the drop lets them run (on any
/// error path too: an early return or a panic drops the guard). Processes on other nodes, and
/// processes not proven to be the table's ranks, are listed with their reason and never
/// touched.
pub struct Held<'s> {
    ranks: Vec<HeldRank>,
    pub(crate) control: Option<Control>,
    _session: PhantomData<&'s mut Session>,
}

impl std::fmt::Debug for Held<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Held")
            .field("ranks", &self.ranks)
            .finish_non_exhaustive()
    }
}

impl Held<'_> {
    /// The ranks, in the job's order (or the pids' or cores' order as given).
    pub fn ranks(&self) -> &[HeldRank] {
        &self.ranks
    }

    /// Lets every held process run again, untraced, and says how it went.
    pub fn release(mut self) -> ReleaseReport {
        self.control
            .take()
            .map(Control::release)
            .unwrap_or_default()
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.control.take() {
            let _ = c.release();
        }
    }
}

impl Session {
    /// Stops the selected ranks and opens each one's target; they run again when the guard is
    /// released or dropped. Read quickly: a stopped rank stops its peers too.
    ///
    /// - From a starter, the first hold attaches to the starter with the ranks held and the
    ///   gate left alone, and `mpir-acquire` proves each selected local rank to be the table's
    ///   before stopping it (remote and refused ranks are listed, untouched). Later holds
    ///   stop the same processes again by pid, each only while its start time is the one read
    ///   when it was first held (a pid that exited is left alone: it may name another process).
    /// - From pids: the same, the first hold taking the pids at the caller's word.
    /// - From cores: nothing to stop; the ranks are the rank cores.
    ///
    /// # Errors
    /// When the job cannot be acquired again, or no tracer can be started. Per-rank trouble
    /// is in each [`HeldRank`].
    pub fn hold(&mut self) -> Result<Held<'_>, SessionError> {
        let (ranks, control) = if let Some(known) = self.known.clone() {
            self.hold_known(&known)?
        } else {
            match &mut self.source {
                Source::Starter { pid, held, .. } => {
                    let pid = *pid;
                    let acquired = match held.take() {
                        Some(a) => a,
                        None => Box::new(self.attach_held(pid)?),
                    };
                    let known = known_of_job(acquired.job(), self.options.ranks.as_ref());
                    let ranks = self.open_known(&known);
                    self.known = Some(known);
                    (ranks, Control::Job(acquired))
                }
                Source::Pids(pids) => {
                    let known: Vec<Known> = pids
                        .iter()
                        .map(|&pid| Known {
                            rank: None,
                            pid,
                            image: std::fs::read_link(format!("/proc/{pid}/exe"))
                                .unwrap_or_else(|_| PathBuf::from("?")),
                            // The start time before the first attach; checked again once held.
                            state: procfs::start_time(pid).map_err(|e| {
                                if std::path::Path::new(&format!("/proc/{pid}")).exists() {
                                    Unreadable::Stop(e)
                                } else {
                                    Unreadable::NoSuchProcess { pid }
                                }
                            }),
                        })
                        .collect();
                    let (ranks, control, known) = self.stop(&known)?;
                    self.known = Some(known);
                    (ranks, control)
                }
                Source::Cores(_) => (self.core_ranks()?, Control::Nothing),
                Source::Mpi2dd(_) => {
                    return Err(SessionError::Unsupported {
                        operation: "hold",
                        source_kind: "an MPI2DD process (no rank proven to hold)",
                    });
                }
            }
        };
        Ok(Held {
            ranks,
            control: Some(control),
            _session: PhantomData,
        })
    }

    /// The rank cores (the selection applied by the starter core's numbering).
    pub(crate) fn core_ranks(&self) -> Result<Vec<HeldRank>, SessionError> {
        let Source::Cores(cores) = &self.source else {
            return Ok(Vec::new());
        };
        let by_pid: HashMap<i64, u64> = cores
            .starter
            .as_ref()
            .map(|s| s.table.resolved.ranks().map(|r| (r.pid, r.rank)).collect())
            .unwrap_or_default();
        let selection = self.options.ranks.as_ref();
        let ranks: Vec<HeldRank> = cores
            .ranks
            .iter()
            .filter_map(|c| {
                let rank = by_pid.get(&i64::from(c.pid)).copied();
                if let (Some(sel), Some(r)) = (selection, rank)
                    && !sel.contains(r)
                {
                    return None;
                }
                Some(HeldRank {
                    rank,
                    pid: c.pid,
                    image: c.image.clone(),
                    core: Some(c.path.clone()),
                    target: Ok(Rc::clone(&c.target) as Rc<dyn Target>),
                    frozen: Some(Frozen::Core(Rc::clone(&c.target))),
                })
            })
            .collect();
        if ranks.is_empty() {
            return Err(SessionError::Empty(
                "no rank core (or the rank selection leaves none)",
            ));
        }
        Ok(ranks)
    }

    /// [`hold`](Session::hold), `f` with the held ranks, then the release: `f`'s result and
    /// the release report. The ranks are released also when `f` panics.
    ///
    /// # Errors
    /// As [`hold`](Session::hold).
    pub fn with_held<R>(
        &mut self,
        f: impl FnOnce(&Held<'_>) -> R,
    ) -> Result<(R, ReleaseReport), SessionError> {
        let held = self.hold()?;
        let r = f(&held);
        Ok((r, held.release()))
    }

    /// Attaches to the starter with the selected ranks held and the gate left alone (reading
    /// must not change the job).
    fn attach_held(&self, pid: u32) -> Result<Acquired, SessionError> {
        let mut options = self
            .options
            .acquire
            .clone()
            .with_hold(true)
            .with_gate(GateRelease::Never);
        if let Some(sel) = &self.options.ranks {
            options = options.with_ranks(RankSelection::Only(sel.clone()));
        }
        live::attach(pid, options).map_err(|source| SessionError::Acquire { pid, source })
    }

    /// The first hold of ranks known from their announcements (the starter refused): each is
    /// stopped as a proof, or refused for the reason the kernel gives, then let go; the known
    /// ranks keep that outcome, so that a refused rank is read through its channel.
    pub(crate) fn prove_announced(&mut self, known: &[Known]) -> Result<(), SessionError> {
        let (ranks, control, after) = self.stop(known)?;
        self.known = Some(after);
        let report = Held {
            ranks,
            control: Some(control),
            _session: PhantomData,
        }
        .release();
        // Reported by the first read, as the proof hold of any other job is.
        self.proof_release = Some(report);
        Ok(())
    }

    /// Holds the known ranks again: each proven one whose pid still names the same process.
    fn hold_known(&mut self, known: &[Known]) -> Result<(Vec<HeldRank>, Control), SessionError> {
        let now: Vec<Known> = known
            .iter()
            .map(|k| {
                let mut k = k.clone();
                if let Ok(start) = k.state {
                    let same = procfs::start_time(k.pid).is_ok_and(|t| t == start);
                    if !same {
                        k.state = Err(Unreadable::Changed { pid: k.pid });
                    }
                }
                k
            })
            .collect();
        let (ranks, control, _) = self.stop(&now)?;
        Ok((ranks, control))
    }

    /// Stops every known rank whose state is a start time, checks the start time again once
    /// it is stopped (a pid reused in between is let go at once), and opens the targets.
    /// Returns the ranks, the control, and the known ranks with this hold's outcome.
    fn stop(
        &mut self,
        known: &[Known],
    ) -> Result<(Vec<HeldRank>, Control, Vec<Known>), SessionError> {
        let to_stop: Vec<u32> = known
            .iter()
            .filter(|k| k.state.is_ok())
            .map(|k| k.pid)
            .collect();
        let tracer = self.new_tracer()?;
        let results = tracer
            .attach_many(&to_stop)
            .map_err(|source| SessionError::Control {
                context: format!("stopping {} processes", to_stop.len()),
                source,
            })?;
        let mut outcome: HashMap<u32, Result<(), Unreadable>> = HashMap::new();
        let mut held = Vec::new();
        for (&pid, r) in to_stop.iter().zip(results) {
            outcome.insert(pid, r.map(|_| ()).map_err(Unreadable::Stop));
        }
        let mut after = Vec::with_capacity(known.len());
        for k in known {
            let mut k = k.clone();
            if let Ok(start) = k.state {
                match outcome.get(&k.pid) {
                    Some(Ok(())) if procfs::start_time(k.pid).is_ok_and(|t| t == start) => {
                        held.push(k.pid);
                    }
                    Some(Ok(())) => {
                        let _ = tracer.detach(k.pid);
                        k.state = Err(Unreadable::Changed { pid: k.pid });
                    }
                    Some(Err(e)) => k.state = Err(e.clone()),
                    None => k.state = Err(Unreadable::NotAttached),
                }
            }
            after.push(k);
        }
        let ranks = self.open_known(&after);
        Ok((ranks, Control::Pids(tracer, held), after))
    }

    /// A tracer of its own for this session, with the session's stop timeout and wait for
    /// another tracer to let go.
    pub(crate) fn new_tracer(&self) -> Result<Tracer, SessionError> {
        Tracer::with_options(
            TracerOptions::default()
                .with_stop_timeout(self.options.acquire.timeout)
                .with_held_wait(self.options.acquire.held_wait),
        )
        .map_err(|source| SessionError::Control {
            context: "starting a tracer".into(),
            source,
        })
    }

    /// Opens the target of every known rank that is held (cached by pid and start time); the
    /// ones not opened yet all at once ([`Session::open_live_many`]).
    fn open_known(&mut self, known: &[Known]) -> Vec<HeldRank> {
        let debug = self.options.acquire.debug.clone();
        let to_open: Vec<(u32, u64)> = known
            .iter()
            .filter_map(|k| Some((k.pid, *k.state.as_ref().ok()?)))
            .filter(|key| self.current_target(*key).is_none())
            .collect();
        let pids: Vec<u32> = to_open.iter().map(|&(pid, _)| pid).collect();
        let mut failed = std::collections::HashMap::new();
        for (key, opened) in
            to_open
                .into_iter()
                .zip(Session::open_live_many(&self.files, &pids, &debug))
        {
            match opened {
                Ok(t) => {
                    self.targets.insert(key, Rc::new(t));
                }
                Err(e) => {
                    failed.insert(key, e);
                }
            }
        }
        let mut ranks = Vec::with_capacity(known.len());
        for k in known {
            let live = match &k.state {
                Err(e) => Err(e.clone()),
                Ok(start) => match self.targets.get(&(k.pid, *start)) {
                    Some(t) => Ok(Rc::clone(t)),
                    None => match failed.get(&(k.pid, *start)) {
                        Some(e) => Err(Unreadable::Open(e.clone())),
                        None => unreachable!("every known rank held was opened or failed"),
                    },
                },
            };
            // Refused by the kernel for good: the rank may answer for itself.
            let coop = match &live {
                Err(why) => crate::channel::permanent_denial(why)
                    .cloned()
                    .and_then(|d| self.cooperate(k.pid, k.rank, &d)),
                Ok(_) => None,
            };
            let (frozen, target) = match (coop, live) {
                (Some(c), _) => (
                    Some(Frozen::Coop(c.clone())),
                    Ok(Rc::clone(&c.target) as Rc<dyn Target>),
                ),
                (None, live) => (
                    live.as_ref().ok().map(|t| Frozen::Live(Rc::clone(t))),
                    live.map(|t| t as Rc<dyn Target>),
                ),
            };
            ranks.push(HeldRank {
                rank: k.rank,
                pid: k.pid,
                image: k.image.clone(),
                core: None,
                frozen,
                target,
            });
        }
        ranks
    }
}

/// The selected ranks of a job acquired with `hold`, each with its start time (read while
/// held) or why it is left alone.
fn known_of_job(job: &Job, selection: Option<&mpir_types::ranks::RankSet>) -> Vec<Known> {
    let local = live::normalize(job);
    job.ranks()
        .zip(local)
        .filter(|(r, _)| selection.is_none_or(|s| s.contains(r.rank)))
        .map(|(r, l)| {
            // Inside a container, the rank found there (the table names the runtime).
            let pid = match &l.container {
                Some(c) => Some(c.pid),
                None => u32::try_from(r.pid).ok().filter(|&p| p > 0),
            };
            let state = match (job.control(r.rank), pid) {
                (RankControl::Attached { .. }, Some(pid)) => {
                    procfs::start_time(pid).map_err(|_| Unreadable::Changed { pid })
                }
                (RankControl::Attached { .. }, None) => Err(Unreadable::NoPid { pid: r.pid }),
                (RankControl::Failed { error }, _) => Err(Unreadable::AttachFailed(error.clone())),
                (RankControl::Refused { reason }, _) => Err(Unreadable::Refused(reason.clone())),
                (RankControl::Remote, _) => Err(Unreadable::Remote {
                    host: r.host.unwrap_or("?").to_string(),
                }),
                _ if !l.local_host => Err(Unreadable::Remote {
                    host: r.host.unwrap_or("?").to_string(),
                }),
                _ => Err(Unreadable::NotAttached),
            };
            Known {
                rank: Some(r.rank),
                pid: pid.unwrap_or(0),
                image: l.executable.unwrap_or_else(|| PathBuf::from("?")),
                state,
            }
        })
        .collect()
}
