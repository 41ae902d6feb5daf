//! Stack traces of every selected rank, merged like STAT: [`Session::stacks`] (one read, or a
//! few samples compared) and [`Session::sample_stacks`] (a profiler's periodic samples).
//!
//! A live rank is stopped only for its own snapshot ([`snapshot_live`]: every thread frozen,
//! registers and the live part of each stack copied in one batched read, let go), then unwound
//! offline; the time each process was stopped is measured and reported. Before its first
//! snapshot each rank is proven to be the table's rank by the session's first
//! [`hold`](Session::hold) (the acquisition's proof), and every snapshot is taken only while
//! the pid still names that process (its start time, read before and after the snapshot; a
//! snapshot of a pid that changed meanwhile is thrown away). Core files are unwound from the
//! threads' `NT_PRSTATUS` registers and the core's memory.

use std::ops::ControlFlow;
use std::rc::Rc;
use std::time::{Instant, SystemTime};

use mpir_target::corefile::CoreTarget;
use mpir_target::live::procfs;
use mpir_target::live::tracer::Tracer;
use mpir_target::live::{LiveMemory, LiveTarget};
use mpir_target::unwind::{ProcessSnapshot, ThreadSnapshot, Unwinder, snapshot_live_while};
use mpir_target::{ControlCause, Memory};
use mpir_types::ranks::RankSet;
use mpir_types::stacks::{NotRead, RankStacks, ReasonCode, StackTree, TreeOptions, Unreached};

use crate::error::{SessionError, Unreadable};
use crate::held_stacks::{core_stacks, core_unwinder, live_unwinder};
use crate::known::Known;
use crate::python;
use crate::release::ReleaseReport;
use crate::session::{Session, Source};
use crate::stack_reads::{
    SamplingSummary, StackOptions, StackProgress, StackSample, StacksRead, StopTime, unmoved_of,
};

/// Why a rank is unreached, from why the session could not read it.
fn unreached_reason(why: &Unreadable) -> NotRead {
    why.not_read()
}

/// A thread's name (`comm`), when it can be read.
fn thread_name(pid: u32, tid: u32) -> Option<String> {
    let name = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
    Some(name.trim_end().to_string()).filter(|n| !n.is_empty())
}

/// Ranks without a table numbered by position: (number, pid).
type Numbered = Vec<(u64, u32)>;

/// One live process to sample.
struct LiveRank {
    rank: u64,
    pid: u32,
    start: u64,
    target: Rc<LiveTarget>,
    /// Read through its cooperative channel (the kernel refuses this tool the process).
    coop: Option<crate::channel::CoopRank>,
}

/// What a run samples: live processes (with their unwinders made once) or cores.
enum Ranks {
    Live(Vec<LiveRank>),
    Cores(Vec<(u64, Rc<CoreTarget>)>),
}

impl Session {
    /// The stacks of every selected rank, merged: one sample, or
    /// [`StackOptions::with_samples`] samples [`interval`](StackOptions::with_interval) apart,
    /// with the ranks whose stacks did not move across them. Live ranks are each stopped only
    /// for their own snapshot, each proven first to be the rank (the session's first hold) and
    /// read only while its pid names that process; core files are read from their
    /// threads' registers and memory.
    ///
    /// # Errors
    /// As [`hold`](Session::hold) for the first read of a live job (the proof of identity);
    /// [`SessionError::Control`] when no tracer can be started; [`SessionError::Unsupported`]
    /// for an MPI2DD-only session. Per-rank trouble is in [`StackSample::unreached`].
    pub fn stacks(&mut self, options: &StackOptions) -> Result<StacksRead, SessionError> {
        self.stacks_among(options, None, &mut |_| {})
    }

    /// [`stacks`](Session::stacks), telling `progress` before each live rank's snapshot and
    /// once each sample is taken (a progress bar's ranks read / total).
    ///
    /// # Errors
    /// As [`stacks`](Session::stacks).
    pub fn stacks_with(
        &mut self,
        options: &StackOptions,
        mut progress: impl FnMut(StackProgress),
    ) -> Result<StacksRead, SessionError> {
        self.stacks_among(options, None, &mut progress)
    }

    /// [`stacks`](Session::stacks) of the ranks in `only` alone: the others are neither
    /// stopped nor reported (a watch's cheap round reads a few ranks this way). Only this
    /// node's ranks are read: the other nodes ([`Session::reach_other_nodes`]) are not asked.
    ///
    /// # Errors
    /// As [`stacks`](Session::stacks).
    pub fn stacks_of(
        &mut self,
        options: &StackOptions,
        only: &RankSet,
    ) -> Result<StacksRead, SessionError> {
        self.stacks_among(options, Some(only), &mut |_| {})
    }

    fn stacks_among(
        &mut self,
        options: &StackOptions,
        only: Option<&RankSet>,
        progress: &mut dyn FnMut(StackProgress),
    ) -> Result<StacksRead, SessionError> {
        if only.is_some() {
            return self.stacks_here(options, only, progress);
        }
        self.with_others(|session, others| {
            let Some(o) = others else {
                return session.stacks_here(options, None, progress);
            };
            o.start_stacks(options);
            let read = session.stacks_here(options, None, progress);
            let samples = read.as_ref().map_or(0, |r| r.samples.len());
            // Every other node's answer is awaited, even when this node's part failed.
            let parts = o.finish_stacks(options, samples);
            let mut read = read?;
            read.merge_remote(&parts, options);
            Ok(read)
        })
    }

    /// This node's part of a stacks read.
    fn stacks_here(
        &mut self,
        options: &StackOptions,
        only: Option<&RankSet>,
        progress: &mut dyn FnMut(StackProgress),
    ) -> Result<StacksRead, SessionError> {
        let mut samples = Vec::new();
        let (proof_release, numbered) =
            self.run_samples(options, options.samples, only, progress, |s| {
                samples.push(s);
                ControlFlow::Continue(())
            })?;
        let unmoved = unmoved_of(&samples, options);
        let cooperative = self
            .known
            .iter()
            .flatten()
            .filter_map(|k| {
                let c = self.coop.get(&k.pid)?;
                let rank = k.rank?;
                samples
                    .last()?
                    .ranks
                    .iter()
                    .any(|r| r.rank == rank)
                    .then(|| (rank, c.denial.clone()))
            })
            .collect();
        Ok(StacksRead {
            samples,
            unmoved,
            proof_release,
            numbered,
            cooperative,
            announced: self.announced.clone(),
        })
    }

    /// A profiler's sampling: up to `max_samples` samples of every selected rank's stacks,
    /// [`StackOptions::with_interval`] apart (its `samples` is ignored), each handed to
    /// `on_sample` as soon as it is taken; `on_sample` returns [`ControlFlow::Break`] to stop
    /// early. Each process is stopped only for its own snapshot, one after the other; a stop
    /// longer than [`StackOptions::with_max_stop`] is reported in the sample. The unwinders
    /// (CFI and symbols of each image, read once) are kept for the whole run.
    ///
    /// ```no_run
    /// use std::ops::ControlFlow;
    /// use std::time::Duration;
    /// use mpir_session::{FoldedStacks, Session, SessionOptions, StackOptions};
    ///
    /// let mut session = Session::attach(4242, SessionOptions::default())?;
    /// let options = StackOptions::default()
    ///     .with_interval(Duration::from_millis(20))
    ///     .with_max_stop(Some(Duration::from_millis(2)));
    /// let mut folded = FoldedStacks::default();
    /// let summary = session.sample_stacks(&options, 50, |sample| {
    ///     folded.add(&sample.tree);
    ///     ControlFlow::Continue(())
    /// })?;
    /// print!("{folded}");
    /// eprintln!("{} samples, longest stop {:?}", summary.samples, summary.max_stop);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`stacks`](Session::stacks).
    pub fn sample_stacks(
        &mut self,
        options: &StackOptions,
        max_samples: u32,
        mut on_sample: impl FnMut(StackSample) -> ControlFlow<()>,
    ) -> Result<SamplingSummary, SessionError> {
        let mut summary = SamplingSummary::default();
        let (proof, _) = self.run_samples(options, max_samples, None, &mut |_| {}, |s| {
            summary.samples += 1;
            if !s.overran.is_empty() {
                summary.overran += 1;
            }
            summary.max_stop = summary.max_stop.max(s.max_stop().unwrap_or_default());
            on_sample(s)
        })?;
        summary.proof_release = proof;
        Ok(summary)
    }

    /// Takes up to `count` samples; returns the proof's release and the numbering of ranks
    /// without a table.
    fn run_samples(
        &mut self,
        options: &StackOptions,
        count: u32,
        only: Option<&RankSet>,
        progress: &mut dyn FnMut(StackProgress),
        mut on_sample: impl FnMut(StackSample) -> ControlFlow<()>,
    ) -> Result<(Option<ReleaseReport>, Numbered), SessionError> {
        let (ranks, unreached, proof, numbered) = self.stack_ranks(only)?;
        let symbols = &self.symbols;
        let count = if matches!(ranks, Ranks::Cores(_)) {
            1
        } else {
            count.max(1)
        };
        let tree_options = options.tree_options();
        match &ranks {
            Ranks::Cores(cores) => {
                let unwinders: Vec<Unwinder<'_>> = cores
                    .iter()
                    .map(|(_, t)| core_unwinder(t, options.unwind, symbols))
                    .collect();
                let started = Instant::now();
                let taken_at = SystemTime::now();
                let stacks: Vec<RankStacks> = cores
                    .iter()
                    .zip(&unwinders)
                    .map(|((rank, t), u)| {
                        let pid = t.core().pid().unwrap_or(0);
                        let threads = core_stacks(t, u, options.python);
                        python::rank_stacks(*rank, pid, threads.0, threads.1)
                    })
                    .collect();
                let tree = StackTree::build(&stacks, &unreached, &tree_options);
                let _ = on_sample(StackSample {
                    index: 1,
                    taken_at,
                    elapsed: started.elapsed(),
                    ranks: stacks,
                    unreached,
                    stops: Vec::new(),
                    overran: Vec::new(),
                    tree,
                });
            }
            Ranks::Live(live) => {
                let tracer = self.new_tracer()?;
                let unwinders: Vec<Unwinder<'_>> = live
                    .iter()
                    .map(|l| live_unwinder(&l.target, l.pid, options.unwind, symbols))
                    .collect();
                // Each rank's interpreter, found once from its symbols (not while stopped).
                let pythons: Vec<python::Found<'_>> = live
                    .iter()
                    .map(|l| options.python.and_then(|_| python::find(&l.target)))
                    .collect();
                let mut next = Instant::now();
                for index in 1..=count {
                    if index > 1 {
                        next += options.interval;
                        if let Some(wait) = next.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                    let mut tell = |done: usize| {
                        progress(StackProgress {
                            sample: index,
                            samples: count,
                            done,
                            total: live.len(),
                        })
                    };
                    let sample = live_sample(
                        &tracer,
                        live,
                        &unwinders,
                        &pythons,
                        &unreached,
                        options,
                        &tree_options,
                        index,
                        &mut tell,
                    );
                    tell(live.len());
                    // The answers found, for the next run (every rank is running again).
                    self.save_answers();
                    if on_sample(sample).is_break() {
                        break;
                    }
                }
            }
        }
        self.save_answers();
        Ok((proof, numbered))
    }

    /// The ranks to read: live ones proven (the first hold, if none was made yet) with their
    /// targets, or the rank cores; the others unreached; the proof's release; the numbering of
    /// ranks without a table.
    #[allow(clippy::type_complexity)]
    fn stack_ranks(
        &mut self,
        only: Option<&RankSet>,
    ) -> Result<
        (
            Ranks,
            Vec<Unreached>,
            Option<ReleaseReport>,
            Vec<(u64, u32)>,
        ),
        SessionError,
    > {
        let mut numbered = Vec::new();
        let mut unreached = Vec::new();
        if let Source::Cores(_) = &self.source {
            let held = self.core_ranks()?;
            let mut cores = Vec::new();
            let Source::Cores(all) = &self.source else {
                unreachable!("checked above")
            };
            for (i, r) in held.iter().enumerate() {
                let rank = r.rank.unwrap_or_else(|| {
                    numbered.push((i as u64, r.pid));
                    i as u64
                });
                if only.is_some_and(|o| !o.contains(rank)) {
                    continue;
                }
                match all.ranks.iter().find(|c| Some(&c.path) == r.core.as_ref()) {
                    Some(c) => cores.push((rank, Rc::clone(&c.target))),
                    None => unreached.push(Unreached::new(
                        rank,
                        NotRead::new(ReasonCode::NoCore, "no core file"),
                    )),
                }
            }
            return Ok((Ranks::Cores(cores), unreached, None, numbered));
        }
        if let Source::Mpi2dd(_) = &self.source {
            return Err(SessionError::Unsupported {
                operation: "stacks",
                source_kind: "an MPI2DD process (no rank proven to read)",
            });
        }
        // The proof of identity: the session's first hold (each rank proven to be the
        // table's, its start time recorded), let go at once.
        // Targets the proof hold opens now are current for this read: their maps are not
        // read again a few milliseconds later (0.4 ms a rank of Open MPI).
        let proved_now = self.known.is_none();
        let proof = match self.known {
            Some(_) => self.proof_release.take(),
            None => Some(self.hold()?.release()),
        };
        let known: Vec<Known> = self.known.clone().unwrap_or_default();
        let debug = self.options.acquire.debug.clone();
        let mut live = Vec::new();
        for (i, k) in known.iter().enumerate() {
            let rank = k.rank.unwrap_or_else(|| {
                numbered.push((i as u64, k.pid));
                i as u64
            });
            if only.is_some_and(|o| !o.contains(rank)) {
                continue;
            }
            let opened = match &k.state {
                Ok(start) => match if proved_now {
                    self.targets.get(&(k.pid, *start)).map(Rc::clone)
                } else {
                    self.current_target((k.pid, *start))
                } {
                    Some(t) => Ok((*start, t)),
                    None => match Session::open_live(&self.files, k.pid, debug.clone()) {
                        Ok(t) => {
                            let t = Rc::new(t);
                            self.targets.insert((k.pid, *start), Rc::clone(&t));
                            Ok((*start, t))
                        }
                        Err(e) => Err(Unreadable::Open(e)),
                    },
                },
                Err(why) => Err(why.clone()),
            };
            match opened {
                Ok((start, target)) => live.push(LiveRank {
                    rank,
                    pid: k.pid,
                    start,
                    target,
                    coop: None,
                }),
                Err(why) => {
                    // Refused by the kernel for good: the rank may answer for itself.
                    let coop = crate::channel::permanent_denial(&why)
                        .cloned()
                        .and_then(|d| self.cooperate(k.pid, k.rank, &d));
                    match coop {
                        Some(c) => live.push(LiveRank {
                            rank,
                            pid: k.pid,
                            start: c.start,
                            target: Rc::clone(&c.target),
                            coop: Some(c),
                        }),
                        None => unreached.push(Unreached::new(rank, unreached_reason(&why))),
                    }
                }
            }
        }
        Ok((Ranks::Live(live), unreached, proof, numbered))
    }
}

/// One sample of live processes: each snapshot taken only while its pid names the process
/// proven (start time before and after), unwound offline with that process's unwinder.
#[allow(clippy::too_many_arguments)]
fn live_sample(
    tracer: &Tracer,
    live: &[LiveRank],
    unwinders: &[Unwinder<'_>],
    pythons: &[python::Found<'_>],
    unreached_before: &[Unreached],
    options: &StackOptions,
    tree_options: &TreeOptions,
    index: u32,
    progress: &mut dyn FnMut(usize),
) -> StackSample {
    let taken_at = SystemTime::now();
    let started = Instant::now();
    let mut unreached = unreached_before.to_vec();
    let mut stops = Vec::with_capacity(live.len());
    let mut overran = Vec::new();
    // The tracer copies each process in turn (this thread asks it); a second thread unwinds
    // and symbolises each copy as soon as it is taken, so that loading an image's line tables
    // (tens of milliseconds for a C library's DWARF, once per session) overlaps the next
    // processes' snapshots instead of following them. The worker never touches a process.
    let ranks = std::thread::scope(|scope| {
        let (to_worker, jobs) = std::sync::mpsc::channel::<Copied>();
        let view = options.python.unwrap_or_default();
        let worker = scope.spawn(move || {
            jobs.into_iter()
                .map(|(i, rank, pid, snap, py)| {
                    let threads = unwinders[i]
                        .thread_stacks(&snap)
                        .into_iter()
                        .map(|t| {
                            let tid = t.tid;
                            match thread_name(pid, tid) {
                                Some(n) => t.with_name(n),
                                None => t,
                            }
                        })
                        .collect();
                    let found = pythons.get(i).copied().flatten();
                    let (threads, read) = python::merge(threads, found, py, view);
                    python::rank_stacks(rank, pid, threads, read)
                })
                .collect::<Vec<RankStacks>>()
        });
        for (i, l) in live.iter().enumerate() {
            progress(i);
            let same = || procfs::start_time(l.pid).is_ok_and(|t| t == l.start);
            if !same() {
                unreached.push(Unreached::new(
                    l.rank,
                    Unreadable::Changed { pid: l.pid }.not_read(),
                ));
                continue;
            }
            // The stacks' mappings as read with the images (re-read only for a new stack).
            let mappings = l.target.images().writable_mappings();
            let model = l.target.data_model();
            let found = pythons.get(i).copied().flatten();
            let read_python = |memory: &LiveMemory, threads: &[ThreadSnapshot]| {
                let ids =
                    python::thread_ids(threads.iter().map(|t| (t.tid, t.registers.as_ref().ok())));
                python::read(found, memory, &ids)
            };
            let taken = match &l.coop {
                // Not stopped: each thread copies its own registers and stack when asked.
                Some(c) => c
                    .memory
                    .with_client(|client| client.threads())
                    .map(|snap| {
                        let py = read_python(l.target.memory(), &snap.threads);
                        (snap, py)
                    })
                    .map_err(|e| mpir_target::TargetError::Control {
                        pid: l.pid,
                        operation: "THREADS over the cooperative channel".into(),
                        reason: e.to_string(),
                        cause: ControlCause::Other,
                    }),
                None => snapshot_live_while(
                    tracer,
                    l.pid,
                    model,
                    &options.snapshot,
                    mappings,
                    read_python,
                ),
            };
            let (snap, py) = match taken {
                Ok(s) => s,
                Err(e) => {
                    unreached.push(Unreached::new(l.rank, Unreadable::Stop(e).not_read()));
                    continue;
                }
            };
            // A pid reused between the check and the stop: what was copied is another
            // process's.
            if !same() {
                unreached.push(Unreached::new(
                    l.rank,
                    Unreadable::Changed { pid: l.pid }.not_read(),
                ));
                continue;
            }
            // A rank read through its channel was not stopped: its threads copied themselves.
            if l.coop.is_none() {
                stops.push(StopTime {
                    rank: l.rank,
                    pid: l.pid,
                    stopped_for: snap.stopped_for,
                });
                if options.max_stop.is_some_and(|m| snap.stopped_for > m) {
                    overran.push(l.rank);
                }
            }
            if to_worker.send((i, l.rank, l.pid, snap, py)).is_err() {
                // The worker is gone (it panicked): its join below says why.
                break;
            }
        }
        drop(to_worker);
        match worker.join() {
            Ok(ranks) => ranks,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    });
    let tree = StackTree::build(&ranks, &unreached, tree_options);
    StackSample {
        index,
        taken_at,
        elapsed: started.elapsed(),
        ranks,
        unreached,
        stops,
        overran,
        tree,
    }
}

/// A snapshot on its way to the unwinding thread: the rank's index, rank, pid, the copy, and
/// its Python frames when it runs Python.
type Copied = (usize, u64, u32, ProcessSnapshot, python::Read);

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_target::TargetError;

    #[test]
    fn unreadable_ranks_get_typed_reasons() {
        let code = |u: &Unreadable| unreached_reason(u).code;
        assert_eq!(code(&Unreadable::Changed { pid: 5 }), ReasonCode::Exited);
        let denied = TargetError::Control {
            pid: 5,
            operation: "PTRACE_SEIZE".into(),
            reason: "Operation not permitted".into(),
            cause: mpir_target::ControlCause::PermissionDenied,
        };
        // Not diagnosed: not stopped, with the error's text.
        let r = unreached_reason(&Unreadable::Stop(denied));
        assert_eq!(r.code, ReasonCode::NotStopped);
        assert!(r.text.contains("Operation not permitted"), "{r}");
        let gdb = mpir_types::access::AccessDenial::TracedBy {
            pid: 9,
            name: "gdb".into(),
        };
        let diagnosed = TargetError::Denied {
            pid: 5,
            operation: "attach".into(),
            denial: gdb.clone(),
        };
        let read = TargetError::Unreadable {
            address: 0x1000,
            len: 8,
            fault: mpir_target::Fault::Denied(gdb.clone()),
        };
        // The same refusal met attaching or reading: the same reason, word for word.
        let attach = unreached_reason(&Unreadable::AttachFailed(diagnosed));
        let open = unreached_reason(&Unreadable::Open(read));
        assert_eq!(attach, NotRead::denied(gdb.clone()));
        assert_eq!(open, attach);
        // The kind decides, not the text: a stop timeout and a vanished process.
        let control = |cause| TargetError::Control {
            pid: 5,
            operation: "stop".into(),
            reason: "anything".into(),
            cause,
        };
        assert_eq!(
            code(&Unreadable::Stop(control(ControlCause::NotStopped))),
            ReasonCode::NotStopped
        );
        assert_eq!(
            code(&Unreadable::Stop(control(ControlCause::Gone))),
            ReasonCode::Exited
        );
        let remote = unreached_reason(&Unreadable::Remote { host: "n2".into() });
        assert_eq!(remote.code, ReasonCode::Remote);
        assert_eq!(remote.host.as_deref(), Some("n2"));
    }
}
