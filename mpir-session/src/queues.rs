//! [`Session::queues`]: every selected rank's message queues, read while held.

use std::path::PathBuf;

use mpir_mqd::native::NativeError;
use mpir_mqd::output::OutputLog;
use mpir_mqd::{EngineUsed, MqdError, QueueReader, RankQueues, ReadRank, ReaderOptions};
use thiserror::Error;

use mpir_types::deadlock::{self, DeadlockReport};
use mpir_types::ranks::RankSet;

use crate::deadlock::{Coverage, NotCovered};
use crate::error::{SessionError, Unreadable};
use crate::hold::{Held, ReleaseReport};
use crate::session::Session;

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

/// Where a read stands, after one rank ([`Session::queues_with`],
/// [`Session::deadlock_with`]).
#[derive(Debug)]
#[non_exhaustive]
pub struct Progress<'a> {
    /// The sample (1-based; always 1 for [`Session::queues_with`]).
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

/// What [`Session::queues`] read: one consistent snapshot per rank.
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
    /// ([`MqdError::NotExported`]): that error.
    pub fn not_exported(&self) -> Option<&MqdError> {
        if self.ranks.iter().any(|r| r.queues.is_ok()) {
            return None;
        }
        self.ranks.iter().find_map(|r| match &r.queues {
            Err(RankError::NoReader(e @ MqdError::NotExported { .. })) => Some(e),
            _ => None,
        })
    }

    /// When no rank was read only because the MPI's types are missing and it has no DLL:
    /// what is missing ([`MissingTypes`]), decided from the errors' kinds
    /// ([`MqdError::NoEngine`] whose walkers lack only types, and whose DLL is
    /// [`MqdError::NoDll`]), never from the MPI's name.
    pub fn missing_types(&self) -> Option<MissingTypes> {
        if self.ranks.iter().any(|r| r.queues.is_ok()) {
            return None;
        }
        self.ranks.iter().find_map(|r| match &r.queues {
            Err(RankError::NoReader(e)) => MissingTypes::of(e),
            _ => None,
        })
    }

    /// How the analysis covers the rank at `r`: its queues, its stacks alone, or nothing.
    fn cover(r: &RankRead) -> crate::deadlock::Cover {
        use crate::deadlock::Cover;
        if r.rank.is_some() && matches!(r.waits, Some(Ok(_))) {
            return Cover::Waits;
        }
        match (&r.queues, r.rank, &r.stacks) {
            (Ok(_), _, _) => Cover::Queues,
            (Err(_), Some(_), Some(_)) => Cover::Stacks,
            (Err(_), _, _) => Cover::Nothing,
        }
    }

    /// Which ranks this one read covers (as [`Session::deadlock`]'s coverage with one
    /// sample; `selection` is the session's rank selection).
    pub fn coverage(&self, selection: Option<RankSet>) -> Coverage {
        use crate::deadlock::Cover;
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
        use crate::deadlock::Cover;
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
        let snapshot = crate::deadlock::snapshot(covered()).with_unread(unread as u64);
        deadlock::analyze(&snapshot)
            .map(Some)
            .map_err(SessionError::Analysis)
    }
}

impl Session {
    /// Holds the selected ranks, reads every one's message queues with the engine the
    /// [`ReaderOptions`] pick ([`SessionOptions::with_reader_options`]: by default the native
    /// walker when the MPI's types are known, else the MPI's DLL in a helper process), and
    /// releases them.
    ///
    /// [`SessionOptions::with_reader_options`]: crate::SessionOptions::with_reader_options
    ///
    /// # Errors
    /// As [`Session::hold`]. An engine that cannot be set up is not an error of the session:
    /// every rank that could be held then carries [`RankError::NoReader`].
    pub fn queues(&mut self) -> Result<QueueRead, SessionError> {
        self.queues_with(|_| {})
    }

    /// [`queues`](Session::queues), telling `progress` after each rank is read (a tool's
    /// progress bar).
    ///
    /// # Errors
    /// As [`queues`](Session::queues).
    pub fn queues_with(
        &mut self,
        mut progress: impl FnMut(Progress<'_>),
    ) -> Result<QueueRead, SessionError> {
        self.with_others(|session, mut others| {
            if let Some(o) = others.as_deref_mut() {
                o.start_queues();
            }
            let read = session.queues_here(&mut progress);
            let Some(o) = others else {
                return read;
            };
            let mut read = match read {
                Ok(read) => read,
                Err(e) => {
                    // Every other node's answer is awaited (and dropped) all the same.
                    o.finish_queues(&mut []);
                    return Err(e);
                }
            };
            o.finish_queues(&mut read.ranks);
            if read.engine.is_none() {
                read.engine = o.engine();
            }
            Ok(read)
        })
    }

    /// This node's part of [`queues_with`](Session::queues_with).
    fn queues_here(
        &mut self,
        progress: &mut dyn FnMut(Progress<'_>),
    ) -> Result<QueueRead, SessionError> {
        let options = self.options.reader.clone();
        let symbols = (!self.options.queues_without_stacks).then(|| self.symbols.clone());
        let held = self.hold()?;
        let mut state = ReaderState::default();
        let ranks = state.read_held(&held, &options, symbols.as_ref(), |done, total, rank| {
            progress(Progress {
                sample: 1,
                samples: 1,
                done,
                total,
                rank,
            });
        });
        let release = held.release();
        let (engine, fallback, printed) = state.finish();
        Ok(QueueRead {
            engine,
            fallback,
            ranks,
            printed,
            release,
        })
    }
}

/// How many ranks are tried as the probe when no shipped layout set fits the first.
const MAX_LAYOUT_PROBES: usize = 4;

/// The engine of one read (or of every sample of a deadlock analysis): set up from the
/// first readable rank, then kept.
#[derive(Default)]
pub(crate) struct ReaderState {
    reader: Option<QueueReader>,
    failed: Option<MqdError>,
}

impl ReaderState {
    /// Ends the engine: which it was, why it was a fallback, and what the MPI's DLL printed
    /// meanwhile.
    pub(crate) fn finish(self) -> (Option<EngineUsed>, Option<NativeError>, OutputLog) {
        match self.reader {
            Some(mut r) => (Some(r.engine()), r.fallback_reason().cloned(), r.finish()),
            None => (None, None, OutputLog::new()),
        }
    }

    /// Reads every held rank (its queues, then, with `symbols`, its threads' stacks while
    /// still held), calling `progress(done, total, rank)` after each.
    pub(crate) fn read_held(
        &mut self,
        held: &Held<'_>,
        options: &ReaderOptions,
        symbols: Option<&mpir_target::unwind::SymbolCache>,
        mut progress: impl FnMut(usize, usize, &RankRead),
    ) -> Vec<RankRead> {
        if self.reader.is_none() && self.failed.is_none() {
            // The first readable rank is the probe. A rank no shipped layout set fits (its own
            // memory corrupt, say) does not stop the others: the next few are tried, and that
            // rank is refused alone when it is read.
            let probes = held
                .ranks()
                .iter()
                .filter_map(|r| r.target().ok())
                .take(MAX_LAYOUT_PROBES);
            for probe in probes {
                match QueueReader::open(&**probe, options.clone()) {
                    Ok(r) => {
                        self.reader = Some(r);
                        self.failed = None;
                        break;
                    }
                    Err(e @ MqdError::Layouts(_)) => {
                        self.failed.get_or_insert(e);
                    }
                    Err(e) => {
                        self.failed = Some(e);
                        break;
                    }
                }
            }
        }
        let total = held.ranks().len();
        held.ranks()
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let queues = match (r.target(), self.reader.as_mut(), &self.failed) {
                    (Err(why), _, _) => Err(RankError::Unreadable(why.clone())),
                    (Ok(t), Some(reader), _) => reader
                        .read(&ReadRank::new(r.rank, r.image.clone()), t.clone())
                        .map_err(RankError::Read),
                    (Ok(_), None, Some(e)) => Err(RankError::NoReader(e.clone())),
                    (Ok(_), None, None) => Err(RankError::Unreadable(Unreadable::NotAttached)),
                };
                let waits = r
                    .target()
                    .ok()
                    .and_then(|t| crate::waits::read(&**t, Some(&r.image)).transpose());
                let rank = r
                    .rank
                    .or_else(|| queues.as_ref().ok().and_then(RankQueues::world_rank))
                    .or_else(|| {
                        let w = waits.as_ref()?.as_ref().ok()?;
                        w.header.world_rank
                    });
                let read = RankRead {
                    rank,
                    pid: r.pid,
                    image: r.image.clone(),
                    core: r.core.clone(),
                    queues,
                    stacks: symbols.and_then(|s| held.stacks_of(i, s, Default::default())),
                    waits,
                    cooperative: r.cooperative().cloned(),
                };
                progress(i + 1, total, &read);
                read
            })
            .collect()
    }
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
