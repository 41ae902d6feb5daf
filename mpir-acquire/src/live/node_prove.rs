//! The proof an agent on a rank's own node makes (issue 21): the starter is on another node,
//! so what [`crate::identity`] checks against the starter's process is checked here against
//! the facts the front end sends ([`NodeExpectations`]) and what the rank's own `/proc` says.
//! Reads only; never stops or signals anything.
//!
//! A table entry is proven to be its rank on this node when:
//! 1. its host is this node ([`ThisNode::classify`]);
//! 2. the pid names a live process (not pid 1, not this agent, not a pid named twice, not a
//!    zombie or an exiting process);
//! 3. it belongs to the job's user (the starter's uid, as the front end read it — on a
//!    cluster, one account has one uid on every node);
//! 4. it started no earlier than the job by the wall clock, less the allowed clock skew
//!    between nodes ([`NodeExpectations::clock_skew`]);
//! 5. it runs the table's executable: the same absolute path or file, or, for a relative
//!    name, the same base name (no starter's working directory or `PATH` to resolve it by);
//!    a process caught before its exec is refused (on another node than the starter there is
//!    no parent line to prove it by);
//! 6. the launcher's rank variables in its environment, where present, name the table's rank
//!    (`OMPI_COMM_WORLD_RANK`, `PMIX_RANK`, `PMI_RANK`), and every variable the front end
//!    knows the job by ([`NodeExpectations::job_env`], e.g. Slurm's `SLURM_JOB_ID`) is there
//!    with that value. The environment is read from `/proc/PID/environ`, bounded (1 MiB).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use mpir_target::live::procfs::{FileId, ProcessFacts};
use mpir_types::node::ThisNode;

use crate::identity::{Proven, Refusal};

/// The launcher variables that give a process's rank in `MPI_COMM_WORLD` (Open MPI, PMIx,
/// PMI-1/2 of MPICH's hydra and Intel MPI). Each is checked only where set.
pub const RANK_VARIABLES: &[&str] = &["OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"];

/// Largest environment read from a process.
const MAX_ENVIRON: u64 = 1 << 20;

/// A rank as the starter's table gives it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RankClaim {
    /// Its rank in `MPI_COMM_WORLD`.
    pub rank: u64,
    /// The pid the table gives (meaningful on `host` only).
    pub pid: i64,
    /// The host the table gives.
    pub host: String,
    /// The executable the table gives.
    pub executable: Option<String>,
}

impl RankClaim {
    /// A table entry.
    pub fn new(rank: u64, pid: i64, host: impl Into<String>, executable: Option<String>) -> Self {
        RankClaim {
            rank,
            pid,
            host: host.into(),
            executable,
        }
    }
}

/// What the front end knows of the job, which each rank on this node must agree with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct NodeExpectations {
    /// The job's user: the starter's real uid.
    pub uid: u32,
    /// Ranks of other users are proven too (a privileged tool that said so).
    pub allow_other_users: bool,
    /// When the starter started, seconds since the Unix epoch (no rank starts earlier).
    pub job_started_unix: Option<u64>,
    /// Clock skew allowed between the front end's node and this one.
    pub clock_skew: Duration,
    /// Variables every rank of the job has, with their values (`SLURM_JOB_ID`…).
    pub job_env: Vec<(String, String)>,
}

impl NodeExpectations {
    /// A job of user `uid`; 120 s of clock skew allowed, nothing else known.
    pub fn new(uid: u32) -> Self {
        NodeExpectations {
            uid,
            allow_other_users: false,
            job_started_unix: None,
            clock_skew: Duration::from_secs(120),
            job_env: Vec::new(),
        }
    }

    /// The starter's start, seconds since the Unix epoch.
    pub fn with_job_started_unix(mut self, seconds: Option<u64>) -> Self {
        self.job_started_unix = seconds;
        self
    }

    /// The clock skew allowed between nodes.
    pub fn with_clock_skew(mut self, skew: Duration) -> Self {
        self.clock_skew = skew;
        self
    }

    /// Ranks of other users are proven too.
    pub fn with_allow_other_users(mut self, allow: bool) -> Self {
        self.allow_other_users = allow;
        self
    }

    /// A variable every rank of the job has, with its value.
    pub fn with_job_env(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.job_env.push((name.into(), value.into()));
        self
    }
}

/// A rank proven on this node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeRank {
    /// Its rank.
    pub rank: u64,
    /// Its pid (on this node).
    pub pid: u32,
    /// Its start time in clock ticks after this node's boot: with the pid, it names the
    /// process (checked again before each stop).
    pub start_time: u64,
    /// The executable it runs (`/proc/PID/exe`).
    pub image: std::path::PathBuf,
    /// How it stands.
    pub proven: Proven,
    /// When the entry's pid runs a container runtime: the rank found inside it
    /// ([`crate::container`]), whose pid is [`NodeRank::pid`].
    pub container: Option<crate::container::Contained>,
}

/// Proves each claim against this node's `/proc` (see the [module](self) for the rules). One
/// result per claim, in order; a rank whose host is another node is
/// [`Refusal::Remote`] and its pid is not even looked at.
pub fn prove_on_node(
    claims: &[RankClaim],
    expect: &NodeExpectations,
    this: &ThisNode,
) -> Vec<Result<NodeRank, Refusal>> {
    let me = std::process::id();
    let mut seen: HashMap<u32, u64> = HashMap::new();
    claims
        .iter()
        .map(|c| {
            if !this.classify(Some(&c.host)).is_local() {
                return Err(Refusal::Remote {
                    host: c.host.clone(),
                });
            }
            prove_one(c, expect, me, &mut seen)
        })
        .collect()
}

fn prove_one(
    c: &RankClaim,
    expect: &NodeExpectations,
    me: u32,
    seen: &mut HashMap<u32, u64>,
) -> Result<NodeRank, Refusal> {
    let (pid, facts) = super::prove::admit(c.rank, c.pid, me, seen)?;
    if facts.uid != expect.uid && !expect.allow_other_users {
        return Err(Refusal::OtherUser {
            pid,
            uid: facts.uid,
            starter_uid: expect.uid,
        });
    }
    if let Some(job) = expect.job_started_unix {
        let started = started_unix(facts.start_time).ok_or_else(|| Refusal::NoProcess {
            reason: format!("pid {pid}: its start time cannot be read against the clock"),
        })?;
        let skew = expect.clock_skew.as_secs();
        if started.saturating_add(skew) < job {
            return Err(Refusal::StartedBeforeJob {
                pid,
                started_unix: started,
                job_started_unix: job,
                skew_s: skew,
            });
        }
    }
    // A container runtime: the rank is its descendant found by facts, checked again.
    if let Some((leaf, container)) = super::container::resolve(&facts, c.rank)? {
        if let Some(&first) = seen.get(&leaf.pid) {
            return Err(Refusal::Duplicate {
                pid: leaf.pid,
                first,
            });
        }
        seen.insert(leaf.pid, c.rank);
        if leaf.uid != expect.uid && !expect.allow_other_users {
            return Err(Refusal::OtherUser {
                pid: leaf.pid,
                uid: leaf.uid,
                starter_uid: expect.uid,
            });
        }
        check_environment(leaf.pid, c.rank, expect)?;
        return Ok(NodeRank {
            rank: c.rank,
            pid: leaf.pid,
            start_time: leaf.start_time,
            image: container.executable.clone(),
            proven: Proven::InProgram,
            container: Some(container),
        });
    }
    let Some(image) = facts.exe.clone() else {
        return Err(Refusal::NoProcess {
            reason: format!("pid {pid}: its executable cannot be read (exiting?)"),
        });
    };
    let reported = c.executable.as_deref().unwrap_or("");
    if !runs(&facts, reported) {
        return Err(Refusal::OtherProgram {
            pid,
            runs: image.display().to_string(),
            reported: c.executable.clone().unwrap_or_else(|| "?".into()),
        });
    }
    check_environment(pid, c.rank, expect)?;
    Ok(NodeRank {
        rank: c.rank,
        pid,
        start_time: facts.start_time,
        image,
        proven: Proven::InProgram,
        container: None,
    })
}

/// Whether `facts` runs `reported`: the same absolute path or file, or the same base name.
fn runs(facts: &ProcessFacts, reported: &str) -> bool {
    if reported.is_empty() {
        return false;
    }
    let path = Path::new(reported);
    if path.is_absolute() {
        return facts.exe.as_deref() == Some(path)
            || facts.exe_id.is_some() && FileId::of(path) == facts.exe_id;
    }
    let base = |p: &Path| p.file_name().map(std::ffi::OsStr::to_os_string);
    facts.exe.as_deref().and_then(base).is_some()
        && facts.exe.as_deref().and_then(base) == base(path)
}

/// The rank variables and the job's variables of `pid`'s environment, against the claim.
fn check_environment(pid: u32, rank: u64, expect: &NodeExpectations) -> Result<(), Refusal> {
    let env = environment(pid).map_err(|reason| Refusal::NoProcess { reason })?;
    let get = |name: &str| -> Option<&str> {
        env.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    };
    for var in RANK_VARIABLES {
        if let Some(v) = get(var)
            && v.trim() != rank.to_string()
        {
            return Err(Refusal::OtherRank {
                pid,
                variable: (*var).to_string(),
                found: v.to_string(),
                expected: rank.to_string(),
            });
        }
    }
    for (name, value) in &expect.job_env {
        let found = get(name);
        if found != Some(value.as_str()) {
            return Err(Refusal::OtherRank {
                pid,
                variable: name.clone(),
                found: found.unwrap_or("(unset)").to_string(),
                expected: value.clone(),
            });
        }
    }
    Ok(())
}

/// `NAME=value` pairs of `/proc/PID/environ` (bounded to 1 MiB; invalid UTF-8 replaced), or
/// why it cannot be read.
pub fn environment(pid: u32) -> Result<Vec<(String, String)>, String> {
    use std::io::Read;
    let path = format!("/proc/{pid}/environ");
    let f = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
    let mut raw = Vec::new();
    f.take(MAX_ENVIRON)
        .read_to_end(&mut raw)
        .map_err(|e| format!("{path}: {e}"))?;
    Ok(raw
        .split(|&b| b == 0)
        .filter_map(|kv| {
            let kv = String::from_utf8_lossy(kv);
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.to_string()))
        })
        .collect())
}

/// A start time in clock ticks after boot, as seconds since the Unix epoch (`btime` of
/// `/proc/stat` plus the ticks).
pub fn started_unix(start_ticks: u64) -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let btime: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .and_then(|h| u64::try_from(h).ok())
        .filter(|&h| h > 0)?;
    Some(btime.saturating_add(start_ticks / hz))
}

/// When process `pid` started, seconds since the Unix epoch.
pub fn process_started_unix(pid: u32) -> Option<u64> {
    started_unix(mpir_target::live::procfs::start_time(pid).ok()?)
}

/// Now, seconds since the Unix epoch.
#[cfg(test)]
fn now_unix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn sleeper(env: &[(&str, &str)]) -> std::process::Child {
        let mut c = Command::new("sleep");
        c.arg("20").stdin(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        c.spawn().unwrap()
    }

    fn here() -> ThisNode {
        mpir_target::live::node::this_node()
    }

    fn uid() -> u32 {
        nix::unistd::getuid().as_raw()
    }

    #[test]
    fn a_rank_in_a_container_is_proven_on_its_node() {
        if !mpir_target::testkit::have("bwrap") {
            mpir_target::testkit::skip("needs bubblewrap (bwrap)");
            return;
        }
        let mut bwrap = Command::new("bwrap")
            .args(["--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
            .args(["--unshare-pid", "--die-with-parent", "sleep", "20"])
            .env("PMI_RANK", "1")
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let runtime = bwrap.id();
        // The oracle: the sleep under the container's init, pid 2 in its namespace.
        let mut sleep = None;
        assert!(mpir_target::testkit::wait_for(20, || {
            let kids = |p: u32| {
                std::fs::read_to_string(format!("/proc/{p}/task/{p}/children"))
                    .unwrap_or_default()
                    .split_whitespace()
                    .filter_map(|x| x.parse::<u32>().ok())
                    .collect::<Vec<_>>()
            };
            sleep = kids(runtime)
                .into_iter()
                .flat_map(kids)
                .find(|&p| ProcessFacts::read(p).is_ok_and(|f| f.comm == "sleep"));
            sleep.is_some()
        }));
        let sleep = sleep.unwrap();
        let host = here().display_name().to_string();
        let expect = NodeExpectations::new(uid());
        let got = prove_on_node(
            &[
                RankClaim::new(1, i64::from(runtime), host.clone(), Some("bwrap".into())),
                // Another rank naming the same runtime: the rank inside is not taken twice.
                RankClaim::new(2, i64::from(runtime), host, Some("bwrap".into())),
            ],
            &expect,
            &here(),
        );
        let r = got[0].as_ref().unwrap();
        assert_eq!(r.pid, sleep);
        let c = r.container.as_ref().unwrap();
        assert_eq!((c.table_pid, c.ns_pid), (runtime, Some(2)));
        assert!(got[1].is_err(), "{:?}", got[1]);
        bwrap.kill().unwrap();
        bwrap.wait().unwrap();
    }

    #[test]
    fn a_local_rank_is_proven_by_user_program_start_and_environment() {
        let mut a = sleeper(&[("OMPI_COMM_WORLD_RANK", "3"), ("SLURM_JOB_ID", "77")]);
        let pid = i64::from(a.id());
        let host = here().display_name().to_string();
        let start = process_started_unix(std::process::id()).unwrap();
        let expect = NodeExpectations::new(uid())
            .with_job_started_unix(Some(start))
            .with_job_env("SLURM_JOB_ID", "77");
        let claims = [
            RankClaim::new(3, pid, host.clone(), Some("sleep".into())),
            // The same pid as another rank: refused, never looked at twice.
            RankClaim::new(4, pid, host.clone(), Some("sleep".into())),
            // Another node's rank with the same pid: not even looked at.
            RankClaim::new(5, pid, "node-elsewhere-9", Some("sleep".into())),
        ];
        let got = prove_on_node(&claims, &expect, &here());
        let r = got[0].as_ref().unwrap();
        assert_eq!((r.rank, r.pid), (3, a.id()));
        assert_eq!(
            r.start_time,
            mpir_target::live::procfs::start_time(a.id()).unwrap()
        );
        assert_eq!(
            got[1],
            Err(Refusal::Duplicate {
                pid: a.id(),
                first: 3
            })
        );
        assert!(matches!(&got[2], Err(Refusal::Remote { host }) if host == "node-elsewhere-9"));

        // The table's rank disagrees with the launcher's variable.
        let bad = prove_on_node(
            &[RankClaim::new(2, pid, host.clone(), Some("sleep".into()))],
            &expect,
            &here(),
        );
        assert!(
            matches!(&bad[0], Err(Refusal::OtherRank { variable, found, expected, .. })
                if variable == "OMPI_COMM_WORLD_RANK" && found == "3" && expected == "2"),
            "{bad:?}"
        );
        // Another job's process (its SLURM_JOB_ID differs).
        let other_job = NodeExpectations::new(uid()).with_job_env("SLURM_JOB_ID", "78");
        let bad = prove_on_node(
            &[RankClaim::new(3, pid, host.clone(), Some("sleep".into()))],
            &other_job,
            &here(),
        );
        assert!(
            matches!(&bad[0], Err(Refusal::OtherRank { variable, .. }) if variable == "SLURM_JOB_ID"),
            "{bad:?}"
        );
        // A job that started after the process (beyond the skew).
        let later = NodeExpectations::new(uid())
            .with_job_started_unix(Some(start + 3600))
            .with_clock_skew(Duration::from_secs(5));
        let bad = prove_on_node(
            &[RankClaim::new(3, pid, host.clone(), Some("sleep".into()))],
            &later,
            &here(),
        );
        assert!(
            matches!(&bad[0], Err(Refusal::StartedBeforeJob { skew_s: 5, .. })),
            "{bad:?}"
        );
        // Another program.
        let bad = prove_on_node(
            &[RankClaim::new(
                3,
                pid,
                host.clone(),
                Some("/bin/solver".into()),
            )],
            &expect,
            &here(),
        );
        assert!(
            matches!(&bad[0], Err(Refusal::OtherProgram { .. })),
            "{bad:?}"
        );
        // Another user's job.
        let bad = prove_on_node(
            &[RankClaim::new(3, pid, host.clone(), Some("sleep".into()))],
            &NodeExpectations::new(uid().wrapping_add(1)),
            &here(),
        );
        assert!(matches!(&bad[0], Err(Refusal::OtherUser { .. })), "{bad:?}");
        a.kill().unwrap();
        a.wait().unwrap();
        // Gone: no process.
        let gone = prove_on_node(
            &[RankClaim::new(3, pid, host.clone(), Some("sleep".into()))],
            &expect,
            &here(),
        );
        assert!(
            matches!(&gone[0], Err(Refusal::NoProcess { .. })),
            "{gone:?}"
        );
        // Reserved and invalid pids.
        let me = i64::from(std::process::id());
        let odd = prove_on_node(
            &[
                RankClaim::new(0, 1, host.clone(), Some("init".into())),
                RankClaim::new(1, me, host.clone(), Some("x".into())),
                RankClaim::new(2, -4, host.clone(), Some("x".into())),
            ],
            &expect,
            &here(),
        );
        assert!(matches!(
            odd[0],
            Err(Refusal::Reserved { what: "init", .. })
        ));
        assert!(matches!(
            odd[1],
            Err(Refusal::Reserved {
                what: "this tool",
                ..
            })
        ));
        assert!(matches!(odd[2], Err(Refusal::InvalidPid { pid: -4 })));
    }

    #[test]
    fn start_times_convert_to_the_wall_clock() {
        let me = process_started_unix(std::process::id()).unwrap();
        let now = now_unix();
        assert!(me <= now && now - me < 3600, "{me} vs {now}");
    }
}
