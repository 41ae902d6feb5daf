//! [`Session::queues`]: every selected rank's message queues, read while held.

use mpir_mqd::native::NativeError;
use mpir_mqd::output::OutputLog;
use mpir_mqd::{EngineUsed, MqdError, QueueReader, RankQueues, ReadRank, ReaderOptions};

use crate::error::{SessionError, Unreadable};
use crate::hold::Held;
use crate::reads::{Progress, QueueRead, RankError, RankRead};
use crate::session::Session;

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
        // The answers found, for the next run (the ranks are running again).
        self.save_answers();
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
