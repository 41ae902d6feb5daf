//! Ranks started through a container runtime (issue 32; `docs/containers.md`).
//!
//! A launcher that runs `bwrap … ./app` (or any wrapper of the kind: Apptainer's starter,
//! `unshare`, a runtime that keeps a monitor process) names the runtime's process in its table:
//! the pid runs the runtime, and the rank is a descendant of it, usually in a new PID and mount
//! namespace, whose files are valid only inside the container. The rank is found by facts,
//! never by a name alone ([`crate::live`] gathers them from `/proc`):
//! 1. the table's pid is proven as any rank is (this node, owner, start time);
//! 2. it has descendants in another PID or mount namespace than its own, and maps no MPI
//!    library itself (an MPI rank that starts a container of its own stays the rank);
//! 3. among those descendants, the one that maps an MPI library, or else the one that runs
//!    another program than the runtime; two or more, or none, is a refusal
//!    ([`ContainerProblem`]);
//! 4. that process passes the rank's checks again (owner, start time after the runtime's), its
//!    environment names no other rank (`OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `PMIX_RANK`), and the
//!    program it runs is named by the runtime's arguments (the path inside the container, or a
//!    relative one naming the same file from the rank's working directory, or a bare name).
//!
//! The rank is then known by its pid in this tool's namespace ([`Contained::pid`]), and the
//! table's pid is kept ([`Contained::runtime_pid`]) for what is told to the user.

use std::path::PathBuf;

/// A rank found inside a container: the process the table names runs the runtime, the rank is
/// its descendant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Contained {
    /// The rank's pid in this tool's PID namespace (the one every read and attach uses).
    pub pid: u32,
    /// The rank's pid inside its own (innermost) PID namespace, as it knows itself
    /// (`getpid()` there; the last field of `NSpid` in `/proc/PID/status`), when in another
    /// namespace.
    pub ns_pid: Option<u32>,
    /// The pid the table names: the runtime's process.
    pub runtime_pid: u32,
    /// The runtime's executable (`/proc/PID/exe` of [`Contained::runtime_pid`]).
    pub runtime: PathBuf,
    /// The program the rank runs, by its path inside the container (`/proc/PID/exe`: a path
    /// valid in the rank's mount namespace, perhaps not on this host).
    pub executable: PathBuf,
    /// Whether the rank is in another PID namespace than the runtime's process.
    pub new_pid_namespace: bool,
    /// Whether the rank is in another mount namespace than the runtime's process.
    pub new_mount_namespace: bool,
}

impl std::fmt::Display for Contained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {}", self.pid)?;
        if let Some(n) = self.ns_pid {
            write!(f, " ({n} in its namespace)")?;
        }
        let runtime = self.runtime.file_name().map_or_else(
            || self.runtime.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        write!(
            f,
            " in a container under {runtime} pid {}",
            self.runtime_pid
        )
    }
}

/// Why the rank inside a container could not be told.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "kind"))]
#[non_exhaustive]
pub enum ContainerProblem {
    /// Its processes in the container all run the runtime itself (the rank has not exec'd
    /// yet, or it is gone).
    #[error("no process in its container runs another program than the runtime")]
    NoRank,
    /// More than one process in the container could be the rank.
    #[error("{} processes in its container could be the rank (pids {})", candidates.len(), list(candidates))]
    Ambiguous {
        /// Their pids (in this tool's namespace).
        candidates: Vec<u32>,
    },
    /// The process in the container runs a program the runtime's arguments do not name.
    #[error(
        "its process {pid} in the container runs {runs}, which the runtime's arguments do not name"
    )]
    NotNamed {
        /// The process (in this tool's namespace).
        pid: u32,
        /// What it runs (its path inside the container).
        runs: String,
    },
    /// The runtime's descendants are more than this tool walks (a bound against a hostile
    /// process tree).
    #[error("it has more than {limit} descendants")]
    TooManyDescendants {
        /// The bound.
        limit: usize,
    },
}

fn list(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_contained_rank_says_where_it_is() {
        let c = Contained {
            pid: 4242,
            ns_pid: Some(2),
            runtime_pid: 4240,
            runtime: "/usr/bin/bwrap".into(),
            executable: "/opt/app/ring".into(),
            new_pid_namespace: true,
            new_mount_namespace: true,
        };
        assert_eq!(
            c.to_string(),
            "pid 4242 (2 in its namespace) in a container under bwrap pid 4240"
        );
        let p = ContainerProblem::Ambiguous {
            candidates: vec![7, 9],
        };
        assert_eq!(
            p.to_string(),
            "2 processes in its container could be the rank (pids 7, 9)"
        );
    }
}
