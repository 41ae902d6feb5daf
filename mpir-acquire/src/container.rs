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
//! table's pid is kept ([`Contained::table_pid`]) for what is told to the user.
//!
//! A starter that runs in another PID namespace than this tool (`bwrap --unshare-pid mpiexec
//! …`) fills its table with that namespace's pids: each is translated to this tool's by the
//! facts (the starter's descendant whose `NSpid` at the starter's level is the table's pid),
//! then proven as any rank ([`Contained::runtime`] is `None`).

use std::path::PathBuf;

/// A rank whose process is not the pid the table names as this tool sees it: the table's
/// pid runs a container runtime and the rank is its descendant, or the starter itself runs in
/// another PID namespace and the table's pids are that namespace's.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct Contained {
    /// The rank's pid in this tool's PID namespace (the one every read and attach uses).
    pub pid: u32,
    /// The rank's pid inside its own (innermost) PID namespace, as it knows itself
    /// (`getpid()` there; the last field of `NSpid` in `/proc/PID/status`), when in another
    /// namespace than this tool.
    pub ns_pid: Option<u32>,
    /// The pid the table names (the runtime's process, or the rank's pid in the starter's
    /// namespace).
    pub table_pid: u32,
    /// The runtime's executable (`/proc/PID/exe` of the table's pid) when the table names a
    /// container runtime; `None` when the table's pid is the rank's own in the starter's
    /// namespace.
    pub runtime: Option<PathBuf>,
    /// The program the rank runs, by its path inside the container (`/proc/PID/exe`: a path
    /// valid in the rank's mount namespace, perhaps not on this host).
    pub executable: PathBuf,
    /// Whether the rank is in another PID namespace than the table's pid (a runtime), or
    /// than this tool (a starter in a namespace).
    pub new_pid_namespace: bool,
    /// Whether the rank is in another mount namespace than the table's pid (a runtime), or
    /// than this tool (a starter in a namespace).
    pub new_mount_namespace: bool,
}

impl std::fmt::Display for Contained {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {}", self.pid)?;
        match &self.runtime {
            Some(runtime) => {
                if let Some(n) = self.ns_pid {
                    write!(f, " ({n} in its namespace)")?;
                }
                let runtime = runtime.file_name().map_or_else(
                    || runtime.display().to_string(),
                    |n| n.to_string_lossy().into(),
                );
                write!(f, " in a container under {runtime} pid {}", self.table_pid)
            }
            None => write!(f, " ({} in the starter's PID namespace)", self.table_pid),
        }
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
            table_pid: 4240,
            runtime: Some("/usr/bin/bwrap".into()),
            executable: "/opt/app/ring".into(),
            new_pid_namespace: true,
            new_mount_namespace: true,
        };
        assert_eq!(
            c.to_string(),
            "pid 4242 (2 in its namespace) in a container under bwrap pid 4240"
        );
        let t = Contained {
            runtime: None,
            ns_pid: Some(7),
            table_pid: 7,
            ..c
        };
        assert_eq!(t.to_string(), "pid 4242 (7 in the starter's PID namespace)");
        let p = ContainerProblem::Ambiguous {
            candidates: vec![7, 9],
        };
        assert_eq!(
            p.to_string(),
            "2 processes in its container could be the rank (pids 7, 9)"
        );
    }
}
