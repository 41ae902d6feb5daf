//! [`Session::deadlock`]: who waits for whom, confirmed over several samples, and which ranks
//! the verdict covers.

use std::time::Duration;

use mpir_types::deadlock::{self, JobSnapshot};

use crate::error::{SessionError, chain};
use crate::nodes::OtherNodes;
use crate::queues::ReaderState;
use crate::reads::{Cover, Coverage, DeadlockRead, NotCovered, Progress, RankRead, snapshot};
use crate::session::Session;

impl Session {
    /// Reads `samples` snapshots of the selected ranks' queues, `interval` apart, holding the
    /// ranks only while each is read (each hold re-checks every pid's start time), and keeps
    /// the wait-for cycles whose operations are the same in every sample
    /// ([`deadlock::confirm`]). One sample gives a potential deadlock. A rank whose queues
    /// were not read in some sample (an MPI that exports none, a reader that cannot prove it
    /// reads where this MPI keeps them) but whose stacks were, in every sample, is covered by
    /// its stacks alone ([`Coverage::stacks_only`]; a rank blocked inside MPI then waits for
    /// something unknown, and a job whose every rank is so is a hang:
    /// [`Verdict::BlockedInMpi`](mpir_types::deadlock::Verdict::BlockedInMpi)). A rank of
    /// which neither was read is not covered (its absence would read as progress).
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
        self.with_others(|session, mut others| {
            let read = session.deadlock_sampled(samples, interval, progress, others.as_deref_mut());
            let mut read = read?;
            if read.engine.is_none() {
                read.engine = others.and_then(|o| o.engine());
            }
            Ok(read)
        })
    }

    /// The samples of [`deadlock_with`](Session::deadlock_with): in each, the other nodes'
    /// reads (if any are reached) are started before this node's ranks are held, and their
    /// results put into the sample's ranks once this node's are read. The verdict covers every
    /// rank read in every sample, wherever it runs.
    fn deadlock_sampled(
        &mut self,
        samples: u32,
        interval: Duration,
        mut progress: impl FnMut(Progress<'_>),
        mut others: Option<&mut (dyn OtherNodes + 'static)>,
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
            if let Some(o) = others.as_deref_mut() {
                o.start_queues();
            }
            let held = match self.hold() {
                Ok(held) => held,
                Err(e) => {
                    // The other nodes' answers are awaited (and dropped) all the same.
                    if let Some(o) = others.as_deref_mut() {
                        o.finish_queues(&mut []);
                    }
                    return Err(e);
                }
            };
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
            // The answers found, for the next run (the ranks are running again).
            self.save_answers();
            if let Some(o) = others.as_deref_mut() {
                o.finish_queues(&mut read);
            }
            reads.push(read);
        }
        let (engine, fallback, printed) = state.finish();
        // Per rank (by position: every hold lists the same ranks in the same order): the first
        // sample where its queues were not read, and whether its stacks were read in every
        // sample (then the analysis covers it by its stacks).
        let first = reads.first().map_or(0, Vec::len);
        let mut queues_missing: Vec<Option<NotCovered>> = vec![None; first];
        let mut unread: Vec<NotCovered> = Vec::new();
        for (s, sample) in reads.iter().enumerate() {
            for (i, r) in sample.iter().enumerate() {
                if let Err(reason) = &r.queues {
                    let n = NotCovered {
                        rank: r.rank,
                        pid: r.pid,
                        sample: u32::try_from(s + 1).unwrap_or(u32::MAX),
                        reason: reason.clone(),
                    };
                    if let Some(slot @ None) = queues_missing.get_mut(i) {
                        *slot = Some(n.clone());
                    }
                    unread.push(n);
                }
            }
        }
        let stacks_everywhere = |i: usize| {
            reads.iter().all(|sample| {
                sample
                    .get(i)
                    .is_some_and(|r| r.rank.is_some() && r.stacks.is_some())
            })
        };
        // The wait-state export, usable in every sample, is the best source of a rank's waits.
        let waits_everywhere = |i: usize| {
            reads.iter().all(|sample| {
                sample
                    .get(i)
                    .is_some_and(|r| r.rank.is_some() && matches!(r.waits, Some(Ok(_))))
            })
        };
        let mut cover = vec![Cover::Queues; first];
        let mut not_read: Vec<NotCovered> = Vec::new();
        let mut stacks_only: Vec<NotCovered> = Vec::new();
        let mut waits_problems = Vec::new();
        for (i, slot) in cover.iter_mut().enumerate() {
            if waits_everywhere(i) {
                *slot = Cover::Waits;
            }
        }
        let any_waits = cover.contains(&Cover::Waits);
        for i in 0..first {
            if cover.get(i) == Some(&Cover::Waits) {
                continue;
            }
            // Why this rank's export was not used: said when it has one that failed, or when
            // other ranks of the job have theirs (a rank without the library falls back).
            let Some(r) = reads.first().and_then(|s| s.get(i)) else {
                continue;
            };
            let why = reads.iter().find_map(|s| match s.get(i).map(|r| &r.waits) {
                Some(Some(Err(e))) => Some(chain(e)),
                _ => None,
            });
            match why {
                Some(why) => waits_problems.push((r.rank, r.pid, why)),
                None if any_waits => waits_problems.push((
                    r.rank,
                    r.pid,
                    "no wait-state export in this process (the preload library is not loaded)"
                        .to_string(),
                )),
                None => {}
            }
        }
        for (i, missing) in queues_missing.into_iter().enumerate() {
            let Some(n) = missing else { continue };
            if cover.get(i) == Some(&Cover::Waits) {
                continue;
            }
            if stacks_everywhere(i) {
                stacks_only.push(n);
                cover[i] = Cover::Stacks;
            } else {
                not_read.push(n);
                cover[i] = Cover::Nothing;
            }
        }
        let unread_count = not_read.len() as u64;
        let snapshots: Vec<JobSnapshot> = reads
            .iter()
            .map(|sample| {
                snapshot(sample.iter().enumerate().filter_map(|(i, r)| {
                    match cover.get(i).copied().unwrap_or(Cover::Nothing) {
                        Cover::Nothing => None,
                        c => Some((r, c)),
                    }
                }))
                .with_unread(unread_count)
            })
            .collect();
        let read = first - not_read.len();
        let report = if read == 0 {
            None
        } else {
            Some(deadlock::confirm(&snapshots).map_err(SessionError::Analysis)?)
        };
        not_read.sort_by_key(|n| (n.rank, n.pid));
        stacks_only.sort_by_key(|n| (n.rank, n.pid));
        Ok(DeadlockRead {
            engine,
            fallback,
            report,
            coverage: Coverage {
                ranks: first,
                read,
                stacks_only,
                not_read,
                waits_problems,
                selection: self.options.ranks.clone(),
                cooperative: reads
                    .first()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| Some((r.rank, r.pid, r.cooperative.clone()?)))
                    .collect(),
                announced: self.announced.clone(),
            },
            unread,
            releases,
            printed,
        })
    }
}
