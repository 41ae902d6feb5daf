//! A core file of one live rank, written by us ([`Session::write_core`]): what `mpir watch`
//! keeps of one representative rank per stack equivalence class once a hang is confirmed.
//!
//! Only that rank is stopped, and only while its core is written: it is proven first (the
//! session's first hold, as for every read), held by pid only while its start time is the
//! proof's, written with [`mpir_target::corefile::write::write_core`], and let go running —
//! on an error too, and on a panic (the tracer lets go of everything when dropped).

use std::path::Path;
use std::time::{Duration, Instant};

use mpir_target::corefile::write::{CoreOptions, CoreWritten, write_core};
use mpir_target::live::procfs;

use crate::error::{SessionError, Unreadable};
use crate::release::ReleaseReport;
use crate::session::{Session, Source};

/// What [`Session::write_core`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoreOfRank {
    /// The rank (as [`Session::stacks`] numbers it: the table's, or the position of a pid).
    pub rank: u64,
    /// Its process.
    pub pid: u32,
    /// The core: path, size, threads, how long writing it took.
    pub core: CoreWritten,
    /// How long the rank was stopped: from the request to stop it until it was let go.
    pub stopped_for: Duration,
    /// The first read of a live job proves its ranks (every selected local rank held once,
    /// then let go): how that release went; `None` when an earlier read had proven them.
    pub proof_release: Option<ReleaseReport>,
}

impl Session {
    /// Writes an ELF core file of rank `global_rank` to `path` (replacing a file there), as
    /// `gcore` would, holding only that rank and only while the core is written; the rank
    /// runs on afterwards, untraced, whatever happened. See
    /// [`mpir_target::corefile::write`] for what the core holds and how `options` bound it.
    ///
    /// The rank is touched only when proven to be the job's rank on this node: the first
    /// read of a live job proves its ranks (a [`hold`](Session::hold), let go at once), and the
    /// rank is then stopped only while its pid still names the process proven (its start
    /// time, checked before stopping it and again while it is stopped).
    ///
    /// ```no_run
    /// use mpir_session::{Session, SessionOptions};
    /// use mpir_target::corefile::write::CoreOptions;
    ///
    /// let mut session = Session::attach(4242, SessionOptions::default())?;
    /// let path = std::path::Path::new("/scratch/hang/rank3.core");
    /// let written = session.write_core(3, path, &CoreOptions::default())?;
    /// eprintln!("{} bytes, {} threads", written.core.bytes, written.core.threads);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// As [`hold`](Session::hold) for the first read of a live job;
    /// [`SessionError::Unsupported`] for a session of cores or of an MPI2DD process;
    /// [`SessionError::NoSuchRank`] when the session has no such rank;
    /// [`SessionError::RankUnreadable`] when the rank is not touched (remote, refused, exited)
    /// or cannot be stopped; [`SessionError::WriteCore`] when the core cannot be written (too
    /// large, no directory, no space: no file is left); [`SessionError::Control`] when no tracer
    /// can be started, or letting the rank go failed after its core was written.
    pub fn write_core(
        &mut self,
        global_rank: u64,
        path: &Path,
        options: &CoreOptions,
    ) -> Result<CoreOfRank, SessionError> {
        let source_kind = match &self.source {
            Source::Cores(_) => Some("core files"),
            Source::Mpi2dd(_) => Some("an MPI2DD process (no rank proven to read)"),
            Source::Starter { .. } | Source::Pids(_) => None,
        };
        if let Some(source_kind) = source_kind {
            return Err(SessionError::Unsupported {
                operation: "write_core",
                source_kind,
            });
        }
        // The proof of identity: the session's first hold, let go at once.
        let proof_release = match self.known {
            Some(_) => None,
            None => Some(self.hold()?.release()),
        };
        let rank = global_rank;
        let known = self
            .known
            .as_deref()
            .unwrap_or_default()
            .iter()
            .enumerate()
            .find(|(i, k)| k.rank.unwrap_or(*i as u64) == rank)
            .map(|(_, k)| k.clone())
            .ok_or(SessionError::NoSuchRank { rank })?;
        let pid = known.pid;
        let start = known
            .state
            .map_err(|reason| SessionError::RankUnreadable { rank, reason })?;
        let same = || procfs::start_time(pid).is_ok_and(|t| t == start);
        let changed = || SessionError::RankUnreadable {
            rank,
            reason: Unreadable::Changed { pid },
        };
        if !same() {
            return Err(changed());
        }
        let tracer = self.new_tracer()?;
        let stopped_at = Instant::now();
        tracer
            .attach(pid)
            .map_err(|e| SessionError::RankUnreadable {
                rank,
                reason: Unreadable::Stop(e),
            })?;
        // Held: the pid must still name the process proven, or it is let go untouched.
        let written = same().then(|| write_core(&tracer, pid, path, options));
        let detached = tracer.detach(pid);
        let stopped_for = stopped_at.elapsed();
        drop(tracer);
        let core = match written {
            None => return Err(changed()),
            Some(Err(source)) => return Err(SessionError::WriteCore { rank, pid, source }),
            Some(Ok(core)) => core,
        };
        detached.map_err(|source| SessionError::Control {
            context: format!(
                "letting rank {rank} (pid {pid}) go after writing its core {}",
                path.display()
            ),
            source,
        })?;
        Ok(CoreOfRank {
            rank,
            pid,
            core,
            stopped_for,
            proof_release,
        })
    }
}
