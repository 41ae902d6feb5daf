//! [`Session::queues`]: every selected rank's message queues, read while held.

use std::path::PathBuf;
use std::sync::Arc;

use mpir_mqd::MqdError;
use thiserror::Error;

use crate::engine::{QueueOptions, RankQueues, Reader};
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
    /// No engine could be set up (nothing of the job was read).
    #[error("no queue reader")]
    NoReader(#[source] Arc<SessionError>),
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
}

/// What [`Session::queues`] read: one consistent snapshot per rank.
#[derive(Debug)]
#[non_exhaustive]
pub struct QueueRead {
    /// The engine used (`"native MPICH debug queues"`, `"dll /path/libtvmpich.so"`…), or
    /// `None` when no rank could be read at all or no engine could be set up.
    pub engine: Option<String>,
    /// Every selected rank, in the job's order.
    pub ranks: Vec<RankRead>,
    /// What the engine had to say about the whole read (what the MPI's DLL printed on its
    /// own, each distinct line once with its count).
    pub notes: Vec<String>,
    /// How letting the ranks go went.
    pub release: ReleaseReport,
}

impl QueueRead {
    /// Whether every rank was read.
    pub fn is_complete(&self) -> bool {
        self.ranks.iter().all(|r| r.queues.is_ok())
    }
}

impl Session {
    /// Holds the selected ranks, reads every one's message queues with the engine
    /// [`QueueOptions`] pick (native walker when the MPI's types are known, else the MPI's
    /// DLL in a helper process, or as forced), and releases them.
    ///
    /// # Errors
    /// As [`Session::hold`]. An engine that cannot be set up is not an error of the session:
    /// every rank then carries [`RankError::NoReader`].
    pub fn queues(&mut self, options: &QueueOptions) -> Result<QueueRead, SessionError> {
        let held = self.hold()?;
        let mut state = ReaderState::default();
        let ranks = state.read_held(&held, options);
        let release = held.release();
        Ok(QueueRead {
            engine: state.name(),
            ranks,
            notes: state.finish(),
            release,
        })
    }
}

/// The engine of one read (or of every sample of a deadlock analysis): set up from the
/// first readable rank, then kept.
#[derive(Default)]
pub(crate) struct ReaderState {
    reader: Option<Reader>,
    failed: Option<Arc<SessionError>>,
}

impl ReaderState {
    /// The engine's name, once set up.
    pub(crate) fn name(&self) -> Option<String> {
        self.reader.as_ref().map(Reader::name)
    }

    /// Ends the engine: what the MPI's DLL printed meanwhile, as notes.
    pub(crate) fn finish(self) -> Vec<String> {
        self.reader.map(Reader::finish).unwrap_or_default()
    }

    /// Reads every held rank.
    pub(crate) fn read_held(&mut self, held: &Held<'_>, options: &QueueOptions) -> Vec<RankRead> {
        if self.reader.is_none()
            && self.failed.is_none()
            && let Some(probe) = held.ranks().iter().find_map(|r| r.target().ok())
        {
            match Reader::open(&**probe, options) {
                Ok(r) => self.reader = Some(r),
                Err(e) => self.failed = Some(Arc::new(e)),
            }
        }
        held.ranks()
            .iter()
            .map(|r| {
                let queues = match (r.target(), self.reader.as_mut(), &self.failed) {
                    (Err(why), _, _) => Err(RankError::Unreadable(why.clone())),
                    (Ok(t), Some(reader), _) => reader.read(r, t).map_err(RankError::Read),
                    (Ok(_), None, Some(e)) => Err(RankError::NoReader(Arc::clone(e))),
                    (Ok(_), None, None) => Err(RankError::Unreadable(Unreadable::NotAttached)),
                };
                let rank = r
                    .rank
                    .or_else(|| queues.as_ref().ok().and_then(RankQueues::world_rank));
                RankRead {
                    rank,
                    pid: r.pid,
                    image: r.image.clone(),
                    core: r.core.clone(),
                    queues,
                }
            })
            .collect()
    }
}
