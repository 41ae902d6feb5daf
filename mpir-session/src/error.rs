//! What can go wrong: for the whole session ([`SessionError`]), for one rank
//! ([`Unreadable`]), and while letting the ranks go ([`ReleaseProblem`]).

use std::path::PathBuf;

use mpir_acquire::{AcquireError, Refusal};
use mpir_target::{ControlCause, TargetError};
use mpir_types::unread::{NotRead, ReasonCode};
use thiserror::Error;

/// Why a session step failed as a whole. Trouble with single ranks is not an error: it is an
/// [`Unreadable`] next to the ranks that were read.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Acquiring the job from its starter failed (launch or attach).
    #[error("acquiring the job of starter pid {pid}")]
    Acquire {
        /// The starter (for a launch: the launched process, 0 when it never started).
        pid: u32,
        /// Why.
        #[source]
        source: AcquireError,
    },
    /// A Slurm job step named by id could not be turned into its `srun` on this node.
    #[error("finding the srun of Slurm job {step}")]
    SlurmStep {
        /// The job (and step) named.
        step: mpir_acquire::slurm::StepId,
        /// Why (boxed: the error stays small).
        #[source]
        source: Box<AcquireError>,
    },
    /// Starting a tracer, or stopping processes named by pid, failed as a whole.
    #[error("{context}")]
    Control {
        /// What we were doing.
        context: String,
        /// Why.
        #[source]
        source: TargetError,
    },
    /// A core file could not be opened.
    #[error("core {}", path.display())]
    Core {
        /// The core file.
        path: PathBuf,
        /// Why.
        #[source]
        source: TargetError,
    },
    /// A file the caller named does not exist (a core, `--exe`, a types sidecar, a DLL).
    #[error("{what} {}: no such file", path.display())]
    NoSuchFile {
        /// What the file was given as ("core", "executable"…).
        what: &'static str,
        /// The path.
        path: PathBuf,
    },
    /// More than one of the cores given is a starter's: a session reads one job.
    #[error("several starter cores given ({}): one job at a time", list(paths))]
    SeveralStarterCores {
        /// Their paths.
        paths: Vec<PathBuf>,
    },
    /// The source has nothing to read (no core, no pid given, or the rank selection leaves
    /// none).
    #[error("nothing to read: {0}")]
    Empty(&'static str),
    /// The deadlock analysis refused its input.
    #[error("the wait-for analysis")]
    Analysis(#[source] mpir_types::deadlock::AnalysisError),
    /// The rank asked for is not one of the session's (not in the job, or outside the rank
    /// selection).
    #[error("rank {rank}: not a rank of this session")]
    NoSuchRank {
        /// The rank.
        rank: u64,
    },
    /// The rank asked for is not read: it is not touched (remote, refused, exited), or
    /// stopping it failed, as the reason says.
    #[error("rank {rank}")]
    RankUnreadable {
        /// The rank.
        rank: u64,
        /// Why.
        #[source]
        reason: Unreadable,
    },
    /// Writing a rank's core failed (no file is left); the rank was let go.
    #[error("writing the core of rank {rank} (pid {pid})")]
    WriteCore {
        /// The rank.
        rank: u64,
        /// Its process.
        pid: u32,
        /// Why.
        #[source]
        source: mpir_target::corefile::write::CoreWriteError,
    },
    /// The operation needs a source the session does not have (e.g. `hand_over` on core
    /// files).
    #[error("{operation}: not possible for a session of {source_kind}")]
    Unsupported {
        /// What was asked.
        operation: &'static str,
        /// The session's source ("core files", "processes named by pid"…).
        source_kind: &'static str,
    },
}

fn list(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why one rank was not read. Each says whether the rank was touched: only
/// [`Unreadable::Open`] (and a failed attach) concern a rank we tried to stop; every other
/// reason means nothing was done to its pid.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum Unreadable {
    /// On another node: nothing on this machine was done to its pid.
    #[error("remote: on host {host}, not this node")]
    Remote {
        /// The host as reported (`?` when none could be read).
        host: String,
    },
    /// Not touched: it could not be proven to be the rank the starter's table names.
    #[error("refused")]
    Refused(#[source] Refusal),
    /// Proven, but stopping it failed (it exited meanwhile, another tracer holds it…).
    #[error("not stopped")]
    AttachFailed(#[source] TargetError),
    /// Stopping a process named by pid failed.
    #[error("not stopped")]
    Stop(#[source] TargetError),
    /// The acquisition did not attach it (and no other reason is known).
    #[error("not attached")]
    NotAttached,
    /// The pid no longer names the process first held (it exited, and the pid may name
    /// another process now): left alone.
    #[error("pid {pid} exited (or names another process now); left alone")]
    Changed {
        /// The pid.
        pid: u32,
    },
    /// A pid named by the caller names no process: nothing was done.
    #[error("no such process (pid {pid})")]
    NoSuchProcess {
        /// The pid.
        pid: u32,
    },
    /// The starter's table gives no usable pid.
    #[error("no valid pid in the process table ({pid})")]
    NoPid {
        /// As reported.
        pid: i64,
    },
    /// Stopped, but its memory, symbols or types could not be opened.
    #[error("opening its memory and images")]
    Open(#[source] TargetError),
    /// On another node, and that node's agent (`mpir agent`, issue 21) did not read it:
    /// nothing was done to it from this node.
    #[error("on {host}: {failure}: {detail}")]
    Agent {
        /// The rank's host (the node whose agent was asked).
        host: String,
        /// What went wrong.
        failure: AgentFailure,
        /// The details, as one line.
        detail: String,
        /// When the kernel on that node refused the agent the rank: why (carried over the
        /// wire as is).
        denial: Option<mpir_types::access::AccessDenial>,
        /// The agent's own reason, as it sent it (`None` from an agent that sends none).
        why: Option<Box<NotRead>>,
    },
}

impl Unreadable {
    /// The one "not read" form of this reason ([`NotRead`]): its code, its text and its
    /// detail, the same in queues, stacks and deadlock reads, the documents, the wire and the
    /// bindings for the same cause. A reason an agent sent is returned as it came.
    pub fn not_read(&self) -> NotRead {
        match self {
            Unreadable::Remote { host } => NotRead::new(
                ReasonCode::Remote,
                format!("on another node ({host}): not read from here"),
            )
            .on(host.clone()),
            Unreadable::Refused(Refusal::Denied { denial, .. }) => NotRead::denied(denial.clone()),
            Unreadable::Refused(r) => {
                NotRead::new(ReasonCode::Refused, format!("refused: {}", chain(r)))
            }
            Unreadable::AttachFailed(e) | Unreadable::Stop(e) => {
                target_not_read(e, ReasonCode::NotStopped)
            }
            Unreadable::Open(e) => target_not_read(e, ReasonCode::OpenFailed),
            Unreadable::NotAttached => {
                NotRead::new(ReasonCode::NotAttached, "not attached by the acquisition")
            }
            Unreadable::Changed { pid } => NotRead::new(
                ReasonCode::Exited,
                format!("pid {pid} exited (or names another process now); left alone"),
            ),
            Unreadable::NoSuchProcess { pid } => NotRead::new(
                ReasonCode::NoSuchProcess,
                format!("no such process (pid {pid})"),
            ),
            Unreadable::NoPid { pid } => NotRead::new(
                ReasonCode::NoPid,
                format!("no valid pid in the process table ({pid})"),
            ),
            Unreadable::Agent {
                host,
                failure,
                detail,
                denial,
                why,
            } => match (why, denial) {
                (Some(why), _) => {
                    let mut why = NotRead::clone(why);
                    why.host.get_or_insert_with(|| host.clone());
                    why
                }
                (None, Some(d)) => NotRead::denied(d.clone()).on(host.clone()),
                (None, None) => {
                    NotRead::new(failure.code(), format!("on {host}: {failure}: {detail}"))
                        .on(host.clone())
                }
            },
        }
    }

    /// The kernel's refusal behind it, if that is why the rank was not read (the same
    /// [`AccessDenial`](mpir_types::access::AccessDenial) in every command and document).
    pub fn denial(&self) -> Option<&mpir_types::access::AccessDenial> {
        match self {
            Unreadable::Refused(Refusal::Denied { denial, .. }) => Some(denial),
            Unreadable::AttachFailed(e) | Unreadable::Stop(e) | Unreadable::Open(e) => e.denial(),
            Unreadable::Agent { denial, .. } => denial.as_ref(),
            _ => None,
        }
    }
}

/// A target error's reason: the kernel's refusal if that was it, a vanished process, a stop
/// that timed out, else `otherwise` with the error's text. Decided from the error's kind,
/// never its text.
pub(crate) fn target_not_read(e: &TargetError, otherwise: ReasonCode) -> NotRead {
    if let Some(denial) = e.denial() {
        return NotRead::denied(denial.clone());
    }
    match e {
        TargetError::Control { cause, .. } => match cause {
            ControlCause::Gone => NotRead::new(ReasonCode::Exited, "the process exited"),
            ControlCause::NotStopped => {
                NotRead::new(ReasonCode::NotStopped, "did not stop in time")
            }
            _ => NotRead::new(otherwise, chain(e)),
        },
        TargetError::Unreadable {
            fault: mpir_target::Fault::ProcessGone,
            ..
        } => NotRead::new(ReasonCode::Exited, "the process exited"),
        _ => NotRead::new(otherwise, chain(e)),
    }
}

/// Why a node's agent did not read a rank ([`Unreadable::Agent`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AgentFailure {
    /// The agent could not be started there (no engine, the launcher refused, it exited
    /// before its handshake).
    NotStarted,
    /// The agent started but the node cannot be reached any more (its connection broke).
    Unreachable,
    /// The agent did not answer in time.
    TimedOut,
    /// The agent refused the rank: its proof on its own node failed.
    Refused,
    /// The agent held the rank but reading it failed.
    ReadFailed,
    /// The agent answered something this front end cannot use (garbage, another rank's
    /// answer, another protocol).
    BadAnswer,
}

impl AgentFailure {
    /// Its code in the one "not read" vocabulary.
    pub fn code(self) -> ReasonCode {
        match self {
            AgentFailure::NotStarted => ReasonCode::AgentNotStarted,
            AgentFailure::Unreachable => ReasonCode::AgentUnreachable,
            AgentFailure::TimedOut => ReasonCode::AgentTimedOut,
            AgentFailure::Refused => ReasonCode::Refused,
            AgentFailure::ReadFailed => ReasonCode::ReadFailed,
            AgentFailure::BadAnswer => ReasonCode::AgentBadAnswer,
        }
    }
}

impl std::fmt::Display for AgentFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AgentFailure::NotStarted => "its agent could not be started",
            AgentFailure::Unreachable => "its agent cannot be reached",
            AgentFailure::TimedOut => "its agent did not answer in time",
            AgentFailure::Refused => "its agent refused it",
            AgentFailure::ReadFailed => "its agent could not read it",
            AgentFailure::BadAnswer => "its agent answered wrongly",
        })
    }
}

/// A problem met while letting the ranks go. The release goes on past each.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum ReleaseProblem {
    /// Detaching from one process failed.
    #[error("pid {pid}: detach")]
    Detach {
        /// The process.
        pid: u32,
        /// Why.
        #[source]
        source: TargetError,
    },
    /// The acquisition's release reported a problem (per rank, typed by `mpir-acquire`).
    #[error("{0}")]
    Job(mpir_acquire::Note),
    /// The acquisition's release failed as a whole.
    #[error("releasing the job")]
    Acquire(#[source] AcquireError),
    /// Detaching as a whole failed.
    #[error("detaching")]
    Tracer(#[source] TargetError),
}

/// The error and its causes on one line (each cause once): for messages and notes.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cause = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each error with a source: its message must not repeat the source's.
    #[test]
    fn no_error_prints_its_source_twice() {
        let target = TargetError::Control {
            pid: 7,
            operation: "attach".into(),
            reason: "Operation not permitted".into(),
            cause: mpir_target::ControlCause::Other,
        };
        let errors: Vec<Box<dyn std::error::Error>> = vec![
            Box::new(SessionError::Control {
                context: "stopping 2 processes".into(),
                source: target.clone(),
            }),
            Box::new(SessionError::Core {
                path: "/tmp/core.7".into(),
                source: target.clone(),
            }),
            Box::new(SessionError::Acquire {
                pid: 7,
                source: AcquireError::Usage("no process with pid 7".into()),
            }),
            Box::new(SessionError::SlurmStep {
                step: mpir_acquire::slurm::StepId::new(7, Some(1)),
                source: Box::new(AcquireError::Usage("no such step".into())),
            }),
            Box::new(Unreadable::Stop(target.clone())),
            Box::new(Unreadable::Open(target.clone())),
            Box::new(Unreadable::Refused(Refusal::Reused { pid: 7 })),
            Box::new(ReleaseProblem::Detach {
                pid: 7,
                source: target.clone(),
            }),
            Box::new(ReleaseProblem::Tracer(target)),
        ];
        for e in errors {
            let source = e.source().expect("these have a source").to_string();
            assert!(!e.to_string().contains(&source), "{e} repeats {source}");
            // The one-line form says both, once each.
            let line = chain(&*e);
            assert_eq!(line.matches(&source).count(), 1, "{line}");
        }
    }
}
