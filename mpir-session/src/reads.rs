//! What reads of queues and of who waits for whom return: each rank's outcome and why it
//! was not read, a queue read, a deadlock read and what its verdict covers. Data only: the
//! reads themselves are `queues.rs` and `deadlock.rs`.

use std::path::PathBuf;

use mpir_mqd::native::NativeError;
use mpir_mqd::output::OutputLog;
use mpir_mqd::{EngineUsed, MqdError, RankQueues};
use mpir_types::deadlock::{self, DeadlockReport, JobSnapshot};
use mpir_types::ranks::RankSet;
use mpir_types::stacks::{RankStacks, classify_threads};
use thiserror::Error;

use crate::error::{SessionError, Unreadable};
use crate::known::Announced;
use crate::release::ReleaseReport;

/// Why one rank's queues are not in a result.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum RankError {
    /// The rank could not be held or opened (remote, refused, exited…): nothing was read.
    #[error(transparent)]
    Unreadable(Unreadable),
    /// The rank was held and opened, but the engine failed on it.
    #[error("reading its queues")]
    Read(#[source] MqdError),
    /// No engine could be set up for the job (from the first rank that could be read).
    #[error("no queue reader for this job")]
    NoReader(#[source] MqdError),
    /// The rank runs on another node, whose agent held it but did not read its queues: its
    /// reason as the agent made it, carried as is (a newer agent's code is kept).
    #[error("on {host}: {why}")]
    Elsewhere {
        /// The rank's node.
        host: String,
        /// The agent's reason.
        why: mpir_types::unread::NotRead,
    },
}

impl RankError {
    /// The one "not read" form of this reason ([`NotRead`](mpir_types::unread::NotRead)),
    /// the same as a stacks read gives for the same cause.
    pub fn not_read(&self) -> mpir_types::unread::NotRead {
        use mpir_types::unread::{NotRead, ReasonCode};
        match self {
            RankError::Unreadable(u) => u.not_read(),
            RankError::Read(e) | RankError::NoReader(e) => {
                let code = if matches!(self, RankError::Read(_)) {
                    ReasonCode::ReadFailed
                } else {
                    ReasonCode::NoReader
                };
                if let Some(m) = MissingTypes::of(e) {
                    return NotRead::new(ReasonCode::MissingTypes, format!("{m}"))
                        .with_missing_types(vec![m.types.clone()]);
                }
                if matches!(e, MqdError::NotExported { .. }) {
                    return NotRead::new(ReasonCode::NotExported, crate::error::chain(e));
                }
                NotRead::new(code, crate::error::chain(e))
            }
            RankError::Elsewhere { host, why } => match why.host {
                Some(_) => why.clone(),
                None => why.clone().on(host.clone()),
            },
        }
    }

    /// The kernel's refusal behind it, if that is why the rank was not read.
    pub fn denial(&self) -> Option<&mpir_types::access::AccessDenial> {
        match self {
            RankError::Unreadable(u) => u.denial(),
            _ => None,
        }
    }
}

/// One rank's outcome of a read.
#[derive(Debug)]
#[non_exhaustive]
pub struct RankRead {
    /// Its `MPI_COMM_WORLD` rank: the table's, else (pids, cores without a starter core) its
    /// own `MPI_COMM_WORLD` communicator's once read.
    pub rank: Option<u64>,
    /// Its pid.
    pub pid: u32,
    /// Its executable.
    pub image: PathBuf,
    /// Core files: the core read.
    pub core: Option<PathBuf>,
    /// Its communicators and their queues, or why not.
    pub queues: Result<RankQueues, RankError>,
    /// Every thread's stack at the same instant (innermost frame first), read while the rank
    /// was held for its queues; `None` when the rank was not held (see `queues`' reason) or
    /// the session leaves stacks out of queue reads
    /// ([`SessionOptions::with_queue_stacks`](crate::SessionOptions::with_queue_stacks)).
    pub stacks: Option<Vec<mpir_types::stacks::ThreadStack>>,
    /// Its wait-state export (mpir-rs's preload library), read while it was held: `None` when
    /// the process has none (the library is not preloaded) or the rank was not held.
    pub waits: Option<Result<mpir_types::waits::WaitStates, crate::waits::WaitsReadError>>,
    /// Read through its cooperative channel, because the kernel refused this tool the
    /// process (this refusal): not stopped while read.
    pub cooperative: Option<mpir_types::access::AccessDenial>,
}

/// Where a read stands, after one rank ([`Session::queues_with`](crate::Session::queues_with),
/// [`Session::deadlock_with`](crate::Session::deadlock_with)).
#[derive(Debug)]
#[non_exhaustive]
pub struct Progress<'a> {
    /// The sample (1-based; always 1 for [`Session::queues_with`](crate::Session::queues_with)).
    pub sample: u32,
    /// Samples in all.
    pub samples: u32,
    /// Ranks of this sample read so far (this one included).
    pub done: usize,
    /// Ranks in a sample.
    pub total: usize,
    /// The rank just read.
    pub rank: &'a RankRead,
}

/// What [`Session::queues`](crate::Session::queues) read: one consistent snapshot per rank.
#[derive(Debug)]
#[non_exhaustive]
pub struct QueueRead {
    /// The engine used (its `Display` is the short name: `native MPICH debug queues`,
    /// `dll /path/libtvmpich.so`), or `None` when no rank could be read at all or no engine
    /// could be set up.
    pub engine: Option<EngineUsed>,
    /// Why [`Engine::Auto`](mpir_mqd::Engine::Auto) fell back to the MPI's DLL: the native
    /// walkers did not recognise the MPI.
    pub fallback: Option<NativeError>,
    /// Every selected rank, in the job's order.
    pub ranks: Vec<RankRead>,
    /// What the MPI's DLL printed on its own during the read (each distinct line once, with
    /// its count).
    pub printed: OutputLog,
    /// How letting the ranks go went.
    pub release: ReleaseReport,
}

/// Why no rank's queues could be read although the MPI keeps them: a native walker finds every
/// symbol it reads them from, but the types to read them by are not there, and the MPI's
/// message-queue DLL does not exist either (the PyPI Open MPI 5 wheel: stripped, no headers,
/// and its `MPIR_dll_name` names a file it does not install). Giving the types (a types
/// sidecar, debug information) makes the queues readable. See [`QueueRead::missing_types`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MissingTypes {
    /// The walkers that found every symbol they read the queues from (e.g. `Open MPI ob1`).
    pub walkers: Vec<String>,
    /// The types not there, in words: `missing: a, b`, or the one only declared
    /// (`ompi_communicator_t: only a declaration of ompi_communicator_t exists`).
    pub types: String,
    /// Why the MPI's DLL could not be used.
    pub dll: String,
}

impl MissingTypes {
    /// What is missing when `e`, a rank's [`RankError::NoReader`], says that its queues
    /// cannot be read only because the MPI's types are missing and it has no DLL: an
    /// [`MqdError::NoEngine`] whose walkers lack only types, and whose DLL is
    /// [`MqdError::NoDll`]. `None` for any other error.
    pub fn of(e: &MqdError) -> Option<MissingTypes> {
        let MqdError::NoEngine { native, dll } = e else {
            return None;
        };
        let MqdError::NoDll { reason } = dll.as_ref() else {
            return None;
        };
        if native.lacks_queue_symbols() {
            return None;
        }
        Some(MissingTypes {
            walkers: typed_walkers(native),
            types: untyped(native)?,
            dll: reason.to_string(),
        })
    }
}

impl std::fmt::Display for MissingTypes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the MPI library keeps them")?;
        if !self.walkers.is_empty() {
            write!(f, " (the {} walker finds them)", self.walkers.join(", "))?;
        }
        write!(
            f,
            " but ships no debug information or headers for their types ({}) and no \
             message-queue DLL ({})",
            self.types, self.dll
        )
    }
}

impl QueueRead {
    /// Whether every rank was read.
    pub fn is_complete(&self) -> bool {
        self.ranks.iter().all(|r| r.queues.is_ok())
    }

    /// Whether every rank's waits were read: by its queues or by its wait-state export.
    pub fn waits_read_everywhere(&self) -> bool {
        self.ranks
            .iter()
            .all(|r| r.queues.is_ok() || matches!(r.waits, Some(Ok(_))))
    }

    /// When no rank was read because the MPI keeps no message queue any engine reads
    /// ([`MqdError::NotExported`], on this node or as another node's agent said): why, code
    /// [`ReasonCode::NotExported`](mpir_types::unread::ReasonCode::NotExported).
    pub fn not_exported(&self) -> Option<mpir_types::unread::NotRead> {
        self.no_reader_of(&mpir_types::unread::ReasonCode::NotExported)
    }

    /// When no rank was read only because the MPI's types are missing and it has no DLL
    /// ([`MissingTypes`], decided from the errors' kinds, never from the MPI's name; on this
    /// node or as another node's agent said): why, code
    /// [`ReasonCode::MissingTypes`](mpir_types::unread::ReasonCode::MissingTypes), with the
    /// types.
    pub fn missing_types(&self) -> Option<mpir_types::unread::NotRead> {
        self.no_reader_of(&mpir_types::unread::ReasonCode::MissingTypes)
    }

    /// The first reason of `code` among the ranks' when no rank was read and no queue engine
    /// could be set up (here, or on an agent's node).
    fn no_reader_of(
        &self,
        code: &mpir_types::unread::ReasonCode,
    ) -> Option<mpir_types::unread::NotRead> {
        if self.ranks.iter().any(|r| r.queues.is_ok()) {
            return None;
        }
        self.ranks.iter().find_map(|r| match &r.queues {
            Err(e @ (RankError::NoReader(_) | RankError::Elsewhere { .. })) => {
                Some(e.not_read()).filter(|why| &why.code == code)
            }
            _ => None,
        })
    }

    /// How the analysis covers the rank at `r`: its queues, its stacks alone, or nothing.
    fn cover(r: &RankRead) -> Cover {
        if r.rank.is_some() && matches!(r.waits, Some(Ok(_))) {
            return Cover::Waits;
        }
        match (&r.queues, r.rank, &r.stacks) {
            (Ok(_), _, _) => Cover::Queues,
            (Err(_), Some(_), Some(_)) => Cover::Stacks,
            (Err(_), _, _) => Cover::Nothing,
        }
    }

    /// Which ranks this one read covers (as [`Session::deadlock`](crate::Session::deadlock)'s coverage with one
    /// sample; `selection` is the session's rank selection).
    pub fn coverage(&self, selection: Option<RankSet>) -> Coverage {
        let (mut not_read, mut stacks_only) = (Vec::new(), Vec::new());
        let mut waits_problems = Vec::new();
        for r in &self.ranks {
            if let Some(Err(e)) = &r.waits {
                waits_problems.push((r.rank, r.pid, crate::error::chain(e)));
            }
            if Self::cover(r) == Cover::Waits {
                continue;
            }
            let Err(reason) = &r.queues else { continue };
            let n = NotCovered {
                rank: r.rank,
                pid: r.pid,
                sample: 1,
                reason: reason.clone(),
            };
            match Self::cover(r) {
                Cover::Stacks => stacks_only.push(n),
                _ => not_read.push(n),
            }
        }
        not_read.sort_by_key(|n| (n.rank, n.pid));
        stacks_only.sort_by_key(|n| (n.rank, n.pid));
        Coverage {
            ranks: self.ranks.len(),
            read: self.ranks.len() - not_read.len(),
            stacks_only,
            not_read,
            waits_problems,
            selection,
            cooperative: self
                .ranks
                .iter()
                .filter_map(|r| Some((r.rank, r.pid, r.cooperative.clone()?)))
                .collect(),
            announced: None,
        }
    }

    /// The wait-for analysis of this one snapshot ([`deadlock::analyze`]: a potential
    /// deadlock at most), over the ranks read — by their queues, or by their stacks alone
    /// when only those were read; `None` when no rank was read (no verdict at all, never "no
    /// cycle"). For core files, which are one instant, this is the analysis.
    ///
    /// # Errors
    /// [`SessionError::Analysis`] when the analysis refuses its input.
    pub fn analyze(&self) -> Result<Option<DeadlockReport>, SessionError> {
        let covered = || {
            self.ranks
                .iter()
                .map(|r| (r, Self::cover(r)))
                .filter(|(_, c)| *c != Cover::Nothing)
        };
        if covered().next().is_none() {
            return Ok(None);
        }
        let unread = self.ranks.len() - covered().count();
        let snapshot = snapshot(covered()).with_unread(unread as u64);
        deadlock::analyze(&snapshot)
            .map(Some)
            .map_err(SessionError::Analysis)
    }
}

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
    /// Ranks read in every sample (their queues, or their stacks alone): the verdict covers
    /// these only.
    pub read: usize,
    /// Of [`read`](Self::read), the ranks whose queues were not read in some sample (each
    /// with the first reason) but whose stacks were, in every sample: the verdict covers them
    /// by their stacks alone (a rank blocked inside MPI then waits for something unknown).
    pub stacks_only: Vec<NotCovered>,
    /// The others: neither their queues nor their stacks were read in every sample.
    pub not_read: Vec<NotCovered>,
    /// Ranks whose wait-state export was not used, with why: it could not be read (each
    /// such rank), or it is missing while other ranks of the job have one. `(rank, pid,
    /// why)`.
    pub waits_problems: Vec<(Option<u64>, u32, String)>,
    /// The selection, when one chose the ranks (the others were not looked at).
    pub selection: Option<RankSet>,
    /// Ranks read through their cooperative channel, because the kernel refused this tool
    /// the process: rank, pid and the refusal (counted in `read` when read).
    pub cooperative: Vec<(Option<u64>, u32, mpir_types::access::AccessDenial)>,
    /// The job's table was built from its ranks' announcements (the starter refused).
    pub announced: Option<Announced>,
}

impl Coverage {
    /// Whether every rank asked for was read in every sample.
    pub fn is_complete(&self) -> bool {
        self.not_read.is_empty()
    }
}

/// What [`Session::deadlock`](crate::Session::deadlock) found.
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

/// How the analysis covers one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cover {
    /// By its queues (and its stacks, when read).
    Queues,
    /// By its stacks alone: its queues were not read.
    Stacks,
    /// By its wait-state export (and its stacks, when read).
    Waits,
    /// Not at all.
    Nothing,
}

/// The analysis input from one sample's ranks, each with how it is covered (a rank with no
/// known number is left out: the analysis names ranks by number), joined to the stacks read
/// with them: each rank's activity (the MPI call it is blocked in, or that it is not inside
/// MPI) decides whether its pending operations are waits. A rank covered by its queues but
/// without stacks keeps the queue-only rules; a rank covered by its stacks alone is
/// [`RankQueues::stacks_only`](mpir_types::deadlock::RankSnapshot::stacks_only).
pub(crate) fn snapshot<'a>(
    ranks: impl Iterator<Item = (&'a RankRead, Cover)> + Clone,
) -> JobSnapshot {
    let queued = ranks
        .clone()
        .filter(|(_, c)| *c == Cover::Queues)
        .map(|(r, _)| r);
    let mut job = mpir_mqd::snapshot_of(queued.clone().filter_map(|r| {
        let q = r.queues.as_ref().ok()?;
        Some((r.rank, Some(r.pid), q.communicators.as_slice()))
    }));
    let stacks: Vec<RankStacks> = queued
        .filter(|r| r.queues.is_ok())
        .filter_map(|r| Some(RankStacks::new(r.rank?, r.pid, r.stacks.clone()?)))
        .collect();
    if !stacks.is_empty() {
        job = job.with_stacks(&stacks, &[]);
    }
    for (r, c) in ranks.clone() {
        if c != Cover::Waits {
            continue;
        }
        let (Some(rank), Some(Ok(w))) = (r.rank, r.waits.as_ref()) else {
            continue;
        };
        let (mut q, _notes) = w.rank_queues(rank, Some(i64::from(r.pid)));
        if let Some(threads) = r.stacks.as_ref() {
            q.activity = Some(classify_threads(threads, Some(r.pid)));
        }
        job.ranks.push(q);
    }
    for (r, c) in ranks {
        if c != Cover::Stacks {
            continue;
        }
        let (Some(rank), Some(threads)) = (r.rank, r.stacks.as_ref()) else {
            continue;
        };
        job.ranks
            .push(mpir_types::deadlock::RankSnapshot::stacks_only(
                rank,
                Some(i64::from(r.pid)),
                classify_threads(threads, Some(r.pid)),
            ));
    }
    job
}

/// The MPI's types a native walker could not get, in words: absent (`missing_types`), or only
/// declared (a program compiled with `-g` against `mpi.h` describes `ompi_communicator_t` as an
/// incomplete struct: a lookup that fails in the debug information of that type). `None` when
/// the walker failed for another reason.
fn untyped(native: &NativeError) -> Option<String> {
    use mpir_target::TargetError;
    use mpir_target::debuginfo::DebugInfoError;
    match native {
        NativeError::Lookup {
            source: TargetError::DebugInfo(DebugInfoError::Type { name, reason, .. }),
            ..
        } => Some(format!("{name}: {reason}")),
        e if !e.missing_types().is_empty() => {
            Some(format!("missing: {}", e.missing_types().join(", ")))
        }
        _ => None,
    }
}

/// The walkers that found every symbol they read queues from.
fn typed_walkers(native: &NativeError) -> Vec<String> {
    let NativeError::NotRecognised {
        tried,
        missing_symbols,
        ..
    } = native
    else {
        return Vec::new();
    };
    tried
        .iter()
        .filter(|(w, _)| !missing_symbols.iter().any(|(m, s)| m == w && !s.is_empty()))
        .map(|(w, _)| w.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_types::unread::{NotRead, ReasonCode};

    fn read(errors: Vec<RankError>) -> QueueRead {
        QueueRead {
            engine: None,
            fallback: None,
            ranks: errors
                .into_iter()
                .enumerate()
                .map(|(i, e)| RankRead {
                    rank: Some(i as u64),
                    pid: 100 + i as u32,
                    image: PathBuf::from("/app"),
                    core: None,
                    queues: Err(e),
                    stacks: None,
                    waits: None,
                    cooperative: None,
                })
                .collect(),
            printed: OutputLog::default(),
            release: ReleaseReport::default(),
        }
    }

    #[test]
    fn a_job_whose_mpi_keeps_no_queue_says_so_whichever_node_found_it() {
        let none = MqdError::NotExported {
            symbols: "MPICH: symbol MPIR_All_communicators".into(),
            dll: "MPIR_dll_name is not set".into(),
        };
        let local = RankError::NoReader(none);
        let here = read(vec![local.clone()]).not_exported().expect("here");
        assert_eq!(here, local.not_read());
        assert!(read(vec![local.clone()]).missing_types().is_none());
        // Every rank on other nodes, whose agents found the same.
        let elsewhere = RankError::Elsewhere {
            host: "node2".into(),
            why: local.not_read(),
        };
        let there = read(vec![elsewhere]).not_exported().expect("there");
        assert_eq!((&there.code, &there.text), (&here.code, &here.text));
        assert_eq!(there.host.as_deref(), Some("node2"));
        // Another reason of an agent's: neither.
        let other = RankError::Elsewhere {
            host: "node2".into(),
            why: NotRead::new(ReasonCode::ReadFailed, "torn list"),
        };
        let r = read(vec![other]);
        assert!(r.not_exported().is_none() && r.missing_types().is_none());
    }

    #[test]
    fn missing_types_from_an_agent_are_the_job_s_conclusion_too() {
        let why = NotRead::new(ReasonCode::MissingTypes, "the MPI library keeps them …")
            .with_missing_types(vec!["missing: ompi_communicator_t".into()]);
        let r = read(vec![
            RankError::Unreadable(crate::error::Unreadable::Remote {
                host: "node9".into(),
            }),
            RankError::Elsewhere {
                host: "node3".into(),
                why: why.clone(),
            },
        ]);
        assert_eq!(r.missing_types(), Some(why.on("node3")));
    }
}
