//! Slurm jobs named by id (`J` or `J.S`): the step id type, the facts `scontrol` gives about a
//! job (its output parsed defensively: bounded in time and size, unknown fields ignored), and
//! the errors of looking a step's `srun` up. [`crate::live::find_srun`] finds the `srun` of a
//! step among this node's processes.

use std::fmt;
use std::io::Read;
use std::process::{Command, Stdio};
use std::str::FromStr;
use std::time::{Duration, Instant};

use thiserror::Error;

/// A Slurm job, or one step of it: `J` or `J.S` (decimal numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct StepId {
    /// The job id.
    pub job: u64,
    /// The step id, when one was given.
    pub step: Option<u64>,
}

impl StepId {
    /// Job `job`, step `step` if any.
    pub fn new(job: u64, step: Option<u64>) -> Self {
        StepId { job, step }
    }
}

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            Some(s) => write!(f, "{}.{s}", self.job),
            None => write!(f, "{}", self.job),
        }
    }
}

impl FromStr for StepId {
    type Err = SlurmError;

    fn from_str(text: &str) -> Result<Self, SlurmError> {
        let bad = |reason: &str| SlurmError::BadStepId {
            text: text.chars().take(64).collect(),
            reason: reason.to_string(),
        };
        let number = |s: &str| -> Result<u64, SlurmError> {
            if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad("expected J or J.S, decimal numbers (e.g. 42 or 42.0)"));
            }
            s.parse().map_err(|_| bad("the number is too large"))
        };
        match text.split_once('.') {
            Some((job, step)) => Ok(StepId::new(number(job)?, Some(number(step)?))),
            None => Ok(StepId::new(number(text)?, None)),
        }
    }
}

/// Why the `srun` of a Slurm job could not be found on this node.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum SlurmError {
    /// Not a job id.
    #[error("{text:?} is not a Slurm job id: {reason}")]
    BadStepId {
        /// The text (at most 64 characters of it).
        text: String,
        /// Why.
        reason: String,
    },
    /// Slurm does not know the job.
    #[error("Slurm job {job} does not exist (scontrol: {said})")]
    NoSuchJob {
        /// The job.
        job: u64,
        /// What `scontrol` said (its first line).
        said: String,
    },
    /// The job exists, but no `srun` of it runs on this node.
    #[error(
        "Slurm job {job} ({state}, nodes {nodes}, submitted from {alloc_node}) has no srun on \
         this node ({this_node}): its srun runs where the job was started, or it is a batch job \
         with no step running"
    )]
    NotOnThisNode {
        /// The job.
        job: u64,
        /// `JobState` as `scontrol` gave it (`?` when absent).
        state: String,
        /// `NodeList`, where its tasks run (`?` when absent).
        nodes: String,
        /// `AllocNode` (of `AllocNode:Sid`), where it was submitted from (`?` when absent).
        alloc_node: String,
        /// This node's name.
        this_node: String,
    },
    /// The job has several steps with an `srun` here and none was named.
    #[error("Slurm job {job} has {} steps here ({}): name one, as {job}.S", steps.len(), list(steps))]
    SeveralSteps {
        /// The job.
        job: u64,
        /// The steps found here: (step, srun pid).
        steps: Vec<(u64, u32)>,
    },
    /// The job has an `srun` here, but not of the step named.
    #[error(
        "Slurm job {job} has no step {step} here; its steps here: {}",
        list(steps)
    )]
    NoSuchStep {
        /// The job.
        job: u64,
        /// The step named.
        step: u64,
        /// The steps found here: (step, srun pid).
        steps: Vec<(u64, u32)>,
    },
    /// `scontrol` could not be asked (absent, failed, or too slow).
    #[error("no srun of Slurm job {job} on this node, and scontrol cannot say more: {reason}")]
    NoScontrol {
        /// The job.
        job: u64,
        /// Why.
        reason: String,
    },
}

fn list(steps: &[(u64, u32)]) -> String {
    let v: Vec<String> = steps
        .iter()
        .map(|(s, pid)| format!("step {s} (srun pid {pid})"))
        .collect();
    v.join(", ")
}

/// What `scontrol show job -o J` says of a job (the fields this crate uses).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct JobFacts {
    /// `JobId`.
    pub job: Option<u64>,
    /// `JobState` (`RUNNING`, `PENDING`…).
    pub state: Option<String>,
    /// `NodeList`: where the tasks run.
    pub nodes: Option<String>,
    /// `AllocNode` of `AllocNode:Sid`: where the job was submitted from.
    pub alloc_node: Option<String>,
}

/// Longest value kept of a field (a hostile or broken output is cut, never trusted whole).
const MAX_FIELD: usize = 256;

/// Parses one job's `scontrol show job -o` line: `Key=Value` words (values without blanks for
/// the fields used here); anything else is skipped. The first record only.
pub fn parse_job_facts(text: &str) -> JobFacts {
    let mut facts = JobFacts::default();
    let line = text.lines().find(|l| l.contains("JobId=")).unwrap_or("");
    for word in line.split_ascii_whitespace() {
        let Some((key, value)) = word.split_once('=') else {
            continue;
        };
        let value: String = value
            .chars()
            .filter(|c| !c.is_control())
            .take(MAX_FIELD)
            .collect();
        match key {
            "JobId" if facts.job.is_none() => facts.job = value.parse().ok(),
            "JobState" => facts.state = Some(value),
            "NodeList" => facts.nodes = Some(value),
            "AllocNode:Sid" => {
                facts.alloc_node = Some(value.split(':').next().unwrap_or_default().to_string())
            }
            _ => {}
        }
    }
    facts
}

/// Runs `command` with stdin closed and stderr merged into the answer, for at most `timeout`;
/// keeps at most 1 MiB of its output. Returns (exited successfully, output).
pub(crate) fn run_bounded(
    command: &mut Command,
    timeout: Duration,
) -> Result<(bool, String), String> {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let (tx, rx) = std::sync::mpsc::channel();
    let pipes = [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ];
    for pipe in pipes.into_iter().flatten() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let _ = pipe.take(1 << 20).read_to_end(&mut out);
            let _ = tx.send(out);
        });
    }
    drop(tx);
    let deadline = Instant::now() + timeout;
    let mut output = Vec::new();
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(part) => output.extend(part),
            Err(_) => break,
        }
    }
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let text = String::from_utf8_lossy(&output).into_owned();
    match status {
        Some(s) => Ok((s.success(), text)),
        None => Err(format!("no answer within {timeout:?}")),
    }
}

/// Asks `scontrol` about job `job` (bounded by `timeout`, at most 10 s): its facts, or why Slurm
/// does not know it.
pub fn job_facts(job: u64, timeout: Duration) -> Result<JobFacts, SlurmError> {
    let mut cmd = Command::new("scontrol");
    cmd.args(["show", "job", "-o", &job.to_string()]);
    let (ok, text) =
        run_bounded(&mut cmd, timeout.min(Duration::from_secs(10))).map_err(|reason| {
            SlurmError::NoScontrol {
                job,
                reason: format!("scontrol show job {job}: {reason}"),
            }
        })?;
    let first = || {
        text.lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(MAX_FIELD)
            .collect::<String>()
    };
    if !ok {
        if text.contains("Invalid job id") {
            return Err(SlurmError::NoSuchJob { job, said: first() });
        }
        return Err(SlurmError::NoScontrol {
            job,
            reason: format!("scontrol show job {job}: {}", first()),
        });
    }
    let facts = parse_job_facts(&text);
    if facts.job != Some(job) {
        return Err(SlurmError::NoScontrol {
            job,
            reason: format!("scontrol show job {job} did not describe it: {}", first()),
        });
    }
    Ok(facts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn step_ids_parse_strictly() {
        assert_eq!("42".parse::<StepId>(), Ok(StepId::new(42, None)));
        assert_eq!("42.0".parse::<StepId>(), Ok(StepId::new(42, Some(0))));
        assert_eq!(StepId::new(7, Some(3)).to_string(), "7.3");
        for bad in [
            "",
            "x",
            "42.",
            ".1",
            "4 2",
            "-1",
            "42.1.2",
            "1e3",
            "99999999999999999999",
        ] {
            let e = bad.parse::<StepId>().unwrap_err();
            assert!(matches!(e, SlurmError::BadStepId { .. }), "{bad}: {e}");
        }
    }

    #[test]
    fn scontrol_lines_give_only_the_fields_used() {
        let line = "JobId=12 JobName=sleep UserId=root(0) JobState=RUNNING Reason=None \
                    Command=/bin/sleep 100 AllocNode:Sid=login1:4242 NodeList=n[1-4] \
                    BatchHost=n1\n";
        let f = parse_job_facts(line);
        assert_eq!(f.job, Some(12));
        assert_eq!(f.state.as_deref(), Some("RUNNING"));
        assert_eq!(f.nodes.as_deref(), Some("n[1-4]"));
        assert_eq!(f.alloc_node.as_deref(), Some("login1"));
        // Hostile: control characters dropped, huge values cut, garbage skipped.
        let hostile = format!(
            "noise\nJobId=3 JobState=RUN\u{1b}[2J NodeList={} =x JobId=9\n",
            "a".repeat(10_000)
        );
        let f = parse_job_facts(&hostile);
        assert_eq!(f.job, Some(3));
        assert_eq!(f.state.as_deref(), Some("RUN[2J"));
        assert_eq!(f.nodes.map(|n| n.len()), Some(MAX_FIELD));
        assert_eq!(parse_job_facts(""), JobFacts::default());
    }

    #[test]
    fn commands_are_bounded_in_time() {
        let t = Instant::now();
        let r = run_bounded(
            Command::new("sh").args(["-c", "echo hi; exec sleep 30"]),
            Duration::from_millis(300),
        );
        assert!(r.is_err(), "{r:?}");
        assert!(t.elapsed() < Duration::from_secs(5));
        let (ok, out) = run_bounded(
            Command::new("sh").args(["-c", "echo out; echo err >&2; exit 3"]),
            Duration::from_secs(5),
        )
        .unwrap();
        assert!(!ok);
        assert!(out.contains("out") && out.contains("err"), "{out}");
    }
}
