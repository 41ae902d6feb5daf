//! What the starter reported, normalised with what this node's `/proc` says of each rank.

use std::path::PathBuf;

use super::prove;
use crate::job::{Job, RankControl};

/// A rank as reported, with what the local system says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LocalRank {
    /// Rank.
    pub rank: u64,
    /// The executable the rank runs: `/proc/PID/exe` when the rank is proven to be a local
    /// process in its program (attached, or proven now from `/proc` without touching it),
    /// else the reported name made absolute against the starter's working directory.
    pub executable: Option<PathBuf>,
    /// Whether the rank's host is this node ([`Job::locality`]).
    pub local_host: bool,
    /// When the table's pid runs a container runtime: the rank found inside it (attached, or
    /// proven now from `/proc`), whose pid is the one to read ([`Job::pid`] for attached
    /// ranks); [`LocalRank::executable`] is then its program's path inside the container.
    pub container: Option<crate::container::Contained>,
}

/// Normalises what the starter reported: relative executable names (`./a.out`, or a bare
/// `sleep` found through `PATH`, as Slurm's `srun` reports `argv[0]` as typed) resolved. A
/// local rank is proven from `/proc` as acquisition proves ranks (same user as the starter,
/// started after it, running the reported program; reads only), and then named by the
/// executable it runs. A pid that is not proven to be the rank is not looked at: on another
/// node, or unproven, it may name an unrelated process.
pub fn normalize(job: &Job) -> Vec<LocalRank> {
    let cwd = mpir_target::live::procfs::cwd_of(job.starter.pid);
    let mut prover = prove::Prover::new(job.starter.pid, false).ok();
    job.ranks()
        .map(|r| {
            let local = job.locality(r.rank).is_local();
            let (proven, container) = match job.control(r.rank) {
                RankControl::Attached { proven, .. } => {
                    (Some(*proven), job.containers.get(&r.rank).cloned())
                }
                _ if local => prover
                    .as_mut()
                    .and_then(|p| p.prove(r.rank, r.pid, r.executable).ok())
                    .map_or((None, None), |p| (Some(p.proven), p.container)),
                _ => (None, None),
            };
            let pid = container.as_ref().map_or(r.pid, |c| i64::from(c.pid));
            let from_proc = if proven == Some(crate::Proven::InProgram) && pid > 0 {
                std::fs::read_link(format!("/proc/{pid}/exe")).ok()
            } else {
                None
            };
            let reported = r.executable.map(PathBuf::from);
            let executable = from_proc.or_else(|| match (reported, &cwd) {
                (Some(p), Some(cwd)) if p.is_relative() => Some(cwd.join(p)),
                (p, _) => p,
            });
            LocalRank {
                rank: r.rank,
                executable,
                local_host: local,
                container,
            }
        })
        .collect()
}

/// Records in [`Job::containers`] the ranks of `job` on this node that run inside a container
/// ([`crate::container`]): each local rank not yet handled is proven from `/proc` as
/// [`normalize`] proves it (reads only), and the ones whose table pid runs a container
/// runtime are listed with the rank found inside. Ranks acquisition already handled keep
/// what it found.
pub fn find_containers(job: &mut Job) {
    let found: Vec<_> = normalize(job)
        .into_iter()
        .filter_map(|l| Some((l.rank, l.container?)))
        .collect();
    for (rank, c) in found {
        job.containers.entry(rank).or_insert(c);
    }
}
