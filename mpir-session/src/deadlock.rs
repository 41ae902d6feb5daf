//! [`Session::deadlock`]: who waits for whom, confirmed over several samples, and which ranks
//! the verdict covers.

use std::collections::HashSet;
use std::time::Duration;

use mpir_mqd::EngineUsed;
use mpir_mqd::native::NativeError;
use mpir_mqd::output::OutputLog;
use mpir_types::deadlock::{self, DeadlockReport, JobSnapshot};
use mpir_types::ranks::RankSet;
use mpir_types::stacks::RankStacks;

use crate::error::SessionError;
use crate::hold::ReleaseReport;
use crate::queues::{Progress, RankError, RankRead, ReaderState};
use crate::session::Session;

/// A rank not read in a sample, and why.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct NotCovered {
    /// Its rank, when known.
    pub rank: Option<u64>,
    /// Its pid.
    pub pid: u32,
    /// The sample (1-based) in which it was first not read.
    pub sample: u32,
    /// Why.
    pub reason: RankError,
}

/// Which ranks a verdict rests on: a verdict is about the ranks read in every sample only.
#[derive(Debug)]
#[non_exhaustive]
pub struct Coverage {
    /// Ranks asked for (the selected ranks of the job, the pids named, the rank cores).
    pub ranks: usize,
    /// Ranks read in every sample: the verdict covers these only.
    pub read: usize,
    /// The others.
    pub not_read: Vec<NotCovered>,
    /// The selection, when one chose the ranks (the others were not looked at).
    pub selection: Option<RankSet>,
}

impl Coverage {
    /// Whether every rank asked for was read in every sample.
    pub fn is_complete(&self) -> bool {
        self.not_read.is_empty()
    }
}

/// What [`Session::deadlock`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct DeadlockRead {
    /// The engine used, if any rank could be read.
    pub engine: Option<EngineUsed>,
    /// Why the engine is the DLL although the native walkers were tried.
    pub fallback: Option<NativeError>,
    /// The wait-for analysis over every sample, confirmed (`None` when no rank was read in
    /// every sample: then there is no verdict at all, never "no cycle").
    pub report: Option<DeadlockReport>,
    /// Which ranks the verdict covers.
    pub coverage: Coverage,
    /// Every rank not read in some sample, sample by sample (the coverage keeps only the
    /// first reason of each rank).
    pub unread: Vec<NotCovered>,
    /// Each sample's release.
    pub releases: Vec<ReleaseReport>,
    /// What the MPI's DLL printed on its own over every sample (each line once, counted).
    pub printed: OutputLog,
}

impl Session {
    /// Reads `samples` snapshots of the selected ranks' queues, `interval` apart, holding the
    /// ranks only while each is read (each hold re-checks every pid's start time), and keeps
    /// the wait-for cycles whose operations are the same in every sample
    /// ([`deadlock::confirm`]). One sample gives a potential deadlock. A rank not read in
    /// some sample is not covered (its absence elsewhere would read as progress).
    ///
    /// # Errors
    /// As [`Session::hold`]; [`SessionError::Analysis`] when the analysis refuses its input.
    pub fn deadlock(
        &mut self,
        samples: u32,
        interval: Duration,
    ) -> Result<DeadlockRead, SessionError> {
        self.deadlock_with(samples, interval, |_| {})
    }

    /// [`deadlock`](Session::deadlock), telling `progress` after each rank of each sample.
    ///
    /// # Errors
    /// As [`deadlock`](Session::deadlock).
    pub fn deadlock_with(
        &mut self,
        samples: u32,
        interval: Duration,
        progress: impl FnMut(Progress<'_>),
    ) -> Result<DeadlockRead, SessionError> {
        self.deadlock_across(samples, interval, progress, &mut NoRemote)
    }

    /// [`deadlock_with`](Session::deadlock_with) for a job with ranks on other nodes: in each
    /// sample, `remote` starts the other nodes' reads before this node's ranks are held, and
    /// puts their results into the sample's ranks once this node's are read (the agents of
    /// `mpir-agent` do). The verdict covers every rank read in every sample, wherever it runs.
    ///
    /// # Errors
    /// As [`deadlock`](Session::deadlock).
    pub fn deadlock_across(
        &mut self,
        samples: u32,
        interval: Duration,
        mut progress: impl FnMut(Progress<'_>),
        remote: &mut dyn RemoteReads,
    ) -> Result<DeadlockRead, SessionError> {
        let samples = samples.max(1);
        let options = self.options.reader.clone();
        let symbols = self.symbols.clone();
        let mut state = ReaderState::default();
        let mut reads: Vec<Vec<RankRead>> = Vec::new();
        let mut releases = Vec::new();
        for i in 0..samples {
            if i > 0 {
                std::thread::sleep(interval);
            }
            remote.start(i + 1);
            let held = self.hold()?;
            let mut read = state.read_held(&held, &options, Some(&symbols), |done, total, rank| {
                progress(Progress {
                    sample: i + 1,
                    samples,
                    done,
                    total,
                    rank,
                });
            });
            releases.push(held.release());
            remote.finish(i + 1, &mut read);
            reads.push(read);
        }
        let (engine, fallback, printed) = state.finish();
        // Per rank (by position: every hold lists the same ranks in the same order): the first
        // sample where it was not read.
        let first = reads.first().map_or(0, Vec::len);
        let mut not_read: Vec<NotCovered> = Vec::new();
        let mut unread: Vec<NotCovered> = Vec::new();
        let mut seen: HashSet<usize> = HashSet::new();
        for (s, sample) in reads.iter().enumerate() {
            for (i, r) in sample.iter().enumerate() {
                if let Err(reason) = &r.queues {
                    let n = NotCovered {
                        rank: r.rank,
                        pid: r.pid,
                        sample: u32::try_from(s + 1).unwrap_or(u32::MAX),
                        reason: reason.clone(),
                    };
                    if seen.insert(i) {
                        not_read.push(n.clone());
                    }
                    unread.push(n);
                }
            }
        }
        let covered = |i: usize| !seen.contains(&i);
        let snapshots: Vec<JobSnapshot> = reads
            .iter()
            .map(|sample| {
                snapshot(
                    sample
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| covered(*i))
                        .map(|(_, r)| r),
                )
            })
            .collect();
        let read = (0..first).filter(|&i| covered(i)).count();
        let report = if read == 0 {
            None
        } else {
            Some(deadlock::confirm(&snapshots).map_err(SessionError::Analysis)?)
        };
        not_read.sort_by_key(|n| (n.rank, n.pid));
        Ok(DeadlockRead {
            engine,
            fallback,
            report,
            coverage: Coverage {
                ranks: first,
                read,
                not_read,
                selection: self.options.ranks.clone(),
            },
            unread,
            releases,
            printed,
        })
    }
}

/// Reads of the ranks on other nodes, one per sample of a
/// [`Session::deadlock_across`] (implemented by `mpir-agent`'s front end).
pub trait RemoteReads {
    /// Sample `sample` (1-based) is about to read this node's ranks: start the others.
    fn start(&mut self, sample: u32);
    /// Sample `sample`'s ranks, this node's read: put in the others' results (each remote
    /// rank's entry is there, unreadable as remote, in the job's order).
    fn finish(&mut self, sample: u32, ranks: &mut [RankRead]);
}

/// No other node.
struct NoRemote;

impl RemoteReads for NoRemote {
    fn start(&mut self, _: u32) {}
    fn finish(&mut self, _: u32, _: &mut [RankRead]) {}
}

/// The analysis input from one sample's read ranks (a rank with no known number is left out:
/// the analysis names ranks by number), joined to the stacks read with them: each rank's
/// activity (the MPI call it is blocked in, or that it is not inside MPI) decides whether its
/// pending operations are waits. A rank without stacks keeps the queue-only rules.
pub(crate) fn snapshot<'a>(ranks: impl Iterator<Item = &'a RankRead> + Clone) -> JobSnapshot {
    let job = mpir_mqd::snapshot_of(ranks.clone().filter_map(|r| {
        let q = r.queues.as_ref().ok()?;
        Some((r.rank, Some(r.pid), q.communicators.as_slice()))
    }));
    let stacks: Vec<RankStacks> = ranks
        .filter(|r| r.queues.is_ok())
        .filter_map(|r| Some(RankStacks::new(r.rank?, r.pid, r.stacks.clone()?)))
        .collect();
    if stacks.is_empty() {
        job
    } else {
        job.with_stacks(&stacks, &[])
    }
}
