//! Proving that a pid named by a table is the rank it names, before anything is done to it.
//!
//! A pid means something only on its own node, and only for the life of one process. Before
//! the library attaches to, stops, signals or writes a process a table names, the process
//! must be shown to be that rank ([`crate::live`] gathers the facts from `/proc`):
//! 1. its host is this node ([`mpir_types::node::ThisNode`]);
//! 2. the pid names a live process (not pid 1, not this tool, not a thread);
//! 3. it belongs to the starter's user (unless the caller is privileged and said so:
//!    [`AcquireOptions::with_allow_other_users`](crate::AcquireOptions::with_allow_other_users));
//! 4. it started no earlier than the starter;
//! 5. it runs the reported `executable_name`: the same path, or the same file (device and
//!    inode; a relative name is resolved against the starter's working directory, then its
//!    `PATH`), or, for a relative name, the same base name; or else it has not exec'd yet,
//!    which is known only from facts: it descends from the starter and still runs its
//!    parent's image. Sharing the starter's image alone proves nothing.
//!
//! A rank that fails any check is never touched and is reported with a [`Refusal`]. Right
//! before attaching, the start time is read again, so a pid that exits and is reused between
//! the check and the attach is caught.

/// How a proven rank stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Proven {
    /// It runs the executable the table reports.
    InProgram,
    /// It has not exec'd its program yet: a descendant of the starter still running its
    /// parent's image.
    BeforeExec,
}

/// Why a rank named by the table was not touched.
#[derive(Debug, Clone, PartialEq, Eq, Hash, thiserror::Error)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case", tag = "kind"))]
#[non_exhaustive]
pub enum Refusal {
    /// Its host is another node (or no usable host name was reported).
    #[error("remote: on host {host}, not this node")]
    Remote {
        /// The host as reported (`?` when none could be read).
        host: String,
    },
    /// The pid is not a valid process id.
    #[error("invalid pid {pid}")]
    InvalidPid {
        /// As reported.
        pid: i64,
    },
    /// The pid is one this tool never touches (pid 1, this tool itself).
    #[error("not this job's process: pid {pid} is {what}")]
    Reserved {
        /// The pid.
        pid: u32,
        /// "init", "this tool".
        what: &'static str,
    },
    /// An earlier rank of the table has the same pid.
    #[error("not this job's process: pid {pid} is also rank {first}'s")]
    Duplicate {
        /// The pid.
        pid: u32,
        /// The first rank with it.
        first: u64,
    },
    /// No such process (or it exited, or it is a thread, not a process).
    #[error("not this job's process: {reason}")]
    NoProcess {
        /// What `/proc` said.
        reason: String,
    },
    /// It belongs to another user than the starter's.
    #[error(
        "not this job's process: pid {pid} belongs to uid {uid}, the starter to uid {starter_uid}"
    )]
    OtherUser {
        /// The pid.
        pid: u32,
        /// Its real uid.
        uid: u32,
        /// The starter's.
        starter_uid: u32,
    },
    /// It started before the starter.
    #[error(
        "not this job's process: pid {pid} started before the starter (at tick {start_time}, \
         the starter at {starter_start_time})"
    )]
    StartedBefore {
        /// The pid.
        pid: u32,
        /// Its start time (clock ticks after boot).
        start_time: u64,
        /// The starter's.
        starter_start_time: u64,
    },
    /// It runs another program than the table reports, and is not a child of the job caught
    /// before its exec.
    #[error("not this job's process: pid {pid} runs {runs}, the table says {reported}")]
    OtherProgram {
        /// The pid.
        pid: u32,
        /// What it runs (`/proc/PID/exe`, or `?`).
        runs: String,
        /// The reported `executable_name` (`?` when none could be read).
        reported: String,
    },
    /// The kernel refuses this tool what the proof needs to read (`/proc/PID/exe` of a
    /// non-dumpable process, of a process in another user namespace…): it may be the job's
    /// process, but it cannot be proven, so it is left alone.
    #[error("cannot prove pid {pid} is this job's process: refused: {denial}")]
    Denied {
        /// The pid.
        pid: u32,
        /// Why.
        denial: mpir_types::access::AccessDenial,
    },
    /// Its pid was reused between the check and the attach.
    #[error("not this job's process: pid {pid} exited and was reused before the attach")]
    Reused {
        /// The pid.
        pid: u32,
    },
    /// Its environment names another rank (or another job) than the table: the launcher's
    /// own variable (`OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `PMIX_RANK`, `SLURM_JOB_ID`…)
    /// disagrees. Checked by an agent on a rank's own node ([`crate::live::prove_on_node`]).
    #[error("not this job's process: pid {pid} has {variable}={found}, the job says {expected}")]
    OtherRank {
        /// The pid.
        pid: u32,
        /// The variable.
        variable: String,
        /// Its value in the process's environment (`(unset)` when a required one is missing).
        found: String,
        /// What the table or the job says.
        expected: String,
    },
    /// It started before the job did, by the wall clock (an agent on another node than the
    /// starter compares wall-clock times, allowing for the nodes' clock skew).
    #[error(
        "not this job's process: pid {pid} started at {started_unix} (Unix time), before the \
         job started at {job_started_unix} (less {skew_s} s of allowed clock skew)"
    )]
    StartedBeforeJob {
        /// The pid.
        pid: u32,
        /// Its start, seconds since the Unix epoch.
        started_unix: u64,
        /// The job's (its starter's) start, seconds since the Unix epoch.
        job_started_unix: u64,
        /// The clock skew allowed between the nodes.
        skew_s: u64,
    },
    /// The pid runs a container runtime (it has descendants in another PID or mount
    /// namespace), and which of them is the rank could not be told ([`crate::container`]).
    #[error(
        "not this job's process: pid {pid} runs the container runtime {runtime}, and {problem}"
    )]
    Container {
        /// The pid the table names.
        pid: u32,
        /// What it runs (`/proc/PID/exe`, or `?`).
        runtime: String,
        /// Why no rank was found in it.
        problem: crate::container::ContainerProblem,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_say_remote_or_not_this_jobs_process() {
        let r = Refusal::Remote {
            host: "node9".into(),
        };
        assert!(r.to_string().starts_with("remote"));
        let o = Refusal::OtherProgram {
            pid: 7,
            runs: "/usr/bin/python3".into(),
            reported: "./solver".into(),
        };
        assert_eq!(
            o.to_string(),
            "not this job's process: pid 7 runs /usr/bin/python3, the table says ./solver"
        );
    }
}
