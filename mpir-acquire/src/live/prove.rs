//! The facts behind [`crate::identity`]: what `/proc` says of a rank, weighed against the
//! starter and the table. Reads only; never stops or signals anything.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use mpir_target::live::procfs::{self, FileId, ProcessFacts};

use crate::container::Contained;
use crate::error::AcquireError;
use crate::identity::{Proven, Refusal};

/// Most parent hops walked looking for the starter (process trees are shallow; a loop in a
/// hostile `/proc` is not followed for ever).
const MAX_ANCESTRY: usize = 64;

/// A rank shown to be the table's: its facts as proven (the start time is re-checked right
/// before acting) and how it stands.
#[derive(Debug, Clone)]
pub(crate) struct ProvenRank {
    /// The facts of the rank's process (inside a container: of the process found there, whose
    /// pid is [`ProcessFacts::pid`], not the table's).
    pub(crate) facts: ProcessFacts,
    pub(crate) proven: Proven,
    /// When the table's pid runs a container runtime: the rank found inside.
    pub(crate) container: Option<Contained>,
}

/// Proves ranks against one starter.
#[derive(Debug)]
pub(crate) struct Prover {
    starter: ProcessFacts,
    starter_cwd: Option<PathBuf>,
    starter_path: Vec<PathBuf>,
    tool: u32,
    allow_other_users: bool,
    /// pid → the first rank that named it.
    seen: HashMap<u32, u64>,
    /// How many PID namespaces the starter is below this tool's (0: the same): the table's
    /// pids are then that namespace's, translated before anything else.
    starter_level: usize,
    /// The starter's namespace's pids → ours, read once when first needed.
    translation: Option<HashMap<u32, u32>>,
}

/// The starter's `PATH` (bounded read of its environment).
fn path_of(pid: u32) -> Vec<PathBuf> {
    use std::io::Read;
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return Vec::new();
    };
    let mut env = Vec::new();
    if f.take(1 << 20).read_to_end(&mut env).is_err() {
        return Vec::new();
    }
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(b"PATH="))
        .map(|p| {
            p.split(|&b| b == b':')
                .filter(|d| d.first() == Some(&b'/'))
                .take(256)
                .map(|d| PathBuf::from(<OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(d)))
                .collect()
        })
        .unwrap_or_default()
}

impl Prover {
    /// A prover for the ranks of starter `starter`.
    pub(crate) fn new(starter: u32, allow_other_users: bool) -> Result<Self, AcquireError> {
        let facts = ProcessFacts::read(starter)
            .map_err(AcquireError::target("read the starter's /proc facts"))?;
        Ok(Prover {
            starter: facts,
            starter_cwd: procfs::cwd_of(starter),
            starter_path: path_of(starter),
            tool: std::process::id(),
            allow_other_users,
            seen: HashMap::new(),
            starter_level: super::container::ns_level(starter),
            translation: None,
        })
    }

    /// Whether `facts` (a process) runs the program `reported` names.
    pub(crate) fn runs(&self, facts: &ProcessFacts, reported: &str) -> bool {
        let Some(exe_id) = facts.exe_id else {
            return false;
        };
        let same = |p: &Path| FileId::of(p) == Some(exe_id);
        let path = Path::new(reported);
        if path.is_absolute() {
            return facts.exe.as_deref() == Some(path) || same(path);
        }
        if reported.is_empty() {
            return false;
        }
        // From the starter's own working directory (its path may be valid only in its mount
        // namespace); compared by identity, so no link can make another file count.
        if same(&Path::new(&format!("/proc/{}/cwd", self.starter.pid)).join(path)) {
            return true;
        }
        if self
            .starter_cwd
            .as_ref()
            .is_some_and(|cwd| same(&cwd.join(path)))
        {
            return true;
        }
        if !reported.contains('/') && self.starter_path.iter().any(|d| same(&d.join(path))) {
            return true;
        }
        let base = |p: &Path| p.file_name().map(OsStr::to_os_string);
        facts.exe.as_deref().and_then(base).is_some()
            && facts.exe.as_deref().and_then(base) == base(path)
    }

    /// Whether `facts` descends from the starter (bounded walk up the parents).
    fn descends_from_starter(&self, facts: &ProcessFacts) -> bool {
        parent_line_reaches(facts.ppid, self.starter.pid)
    }

    /// Proves that `pid` (reported as rank `rank`'s, running `executable`) is that rank.
    pub(crate) fn prove(
        &mut self,
        rank: u64,
        pid: i64,
        executable: Option<&str>,
    ) -> Result<ProvenRank, Refusal> {
        // A starter in another PID namespace names its ranks by that namespace's pids.
        let table_pid = pid;
        let pid = if self.starter_level > 0 {
            let in_ns = u32::try_from(pid)
                .ok()
                .filter(|&p| p > 0)
                .ok_or(Refusal::InvalidPid { pid })?;
            let (starter, level) = (self.starter.pid, self.starter_level);
            let here = self
                .translation
                .get_or_insert_with(|| super::container::translation(starter, level))
                .get(&in_ns)
                .copied()
                .ok_or_else(|| Refusal::NoProcess {
                    reason: format!(
                        "no process of the starter's PID namespace has pid {in_ns} there"
                    ),
                })?;
            i64::from(here)
        } else {
            pid
        };
        let translated = (self.starter_level > 0).then_some(table_pid);
        let mut proven = self.prove_here(rank, pid, executable)?;
        if let Some(table_pid) = translated.and_then(|p| u32::try_from(p).ok()) {
            match &mut proven.container {
                Some(c) => c.table_pid = table_pid,
                None => {
                    proven.container = Some(super::container::translated(&proven.facts, table_pid));
                }
            }
        }
        Ok(proven)
    }

    /// [`Prover::prove`] of a pid of this tool's namespace.
    fn prove_here(
        &mut self,
        rank: u64,
        pid: i64,
        executable: Option<&str>,
    ) -> Result<ProvenRank, Refusal> {
        let (pid, facts) = admit(rank, pid, self.tool, &mut self.seen)?;
        if facts.uid != self.starter.uid && !self.allow_other_users {
            return Err(Refusal::OtherUser {
                pid,
                uid: facts.uid,
                starter_uid: self.starter.uid,
            });
        }
        if facts.start_time < self.starter.start_time {
            return Err(Refusal::StartedBefore {
                pid,
                start_time: facts.start_time,
                starter_start_time: self.starter.start_time,
            });
        }
        // A process whose executable no longer resolves (`/proc/PID/exe` gives "not found"
        // once its memory is gone) is exiting: it is no other program, it is no process to
        // take. Either way it is left alone.
        if facts.exe_id.is_none()
            && std::fs::metadata(format!("/proc/{pid}/exe"))
                .is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        {
            return Err(Refusal::NoProcess {
                reason: format!("pid {pid} is exiting (its executable no longer resolves)"),
            });
        }
        // Its executable cannot be read because the kernel refuses this tool (a non-dumpable
        // process, a user namespace, a security module): it may well be the job's; say why it
        // cannot be proven, and leave it alone.
        if facts.exe.is_none()
            && let Err(e) = std::fs::read_link(format!("/proc/{pid}/exe"))
            && let Some(errno @ (nix::errno::Errno::EACCES | nix::errno::Errno::EPERM)) =
                e.raw_os_error().map(nix::errno::Errno::from_raw)
        {
            return Err(Refusal::Denied {
                pid,
                denial: mpir_target::live::access::diagnose(pid, errno, false),
            });
        }
        // A container runtime (bwrap, Apptainer's starter…): the rank is its descendant in
        // another namespace, found by facts (issue 32), and checked as a rank again.
        if let Some((leaf, container)) = super::container::resolve(&facts, rank)? {
            if let Some(&first) = self.seen.get(&leaf.pid) {
                return Err(Refusal::Duplicate {
                    pid: leaf.pid,
                    first,
                });
            }
            self.seen.insert(leaf.pid, rank);
            if leaf.uid != self.starter.uid && !self.allow_other_users {
                return Err(Refusal::OtherUser {
                    pid: leaf.pid,
                    uid: leaf.uid,
                    starter_uid: self.starter.uid,
                });
            }
            return Ok(ProvenRank {
                facts: leaf,
                proven: Proven::InProgram,
                container: Some(container),
            });
        }
        if executable.is_some_and(|e| self.runs(&facts, e)) {
            return Ok(ProvenRank {
                facts,
                proven: Proven::InProgram,
                container: None,
            });
        }
        // Not (yet) the reported program: a child of the job between its fork and its exec
        // still runs its parent's image.
        let parent_image = FileId::of(Path::new(&format!("/proc/{}/exe", facts.ppid)));
        if facts.exe_id.is_some()
            && parent_image == facts.exe_id
            && self.descends_from_starter(&facts)
        {
            return Ok(ProvenRank {
                facts,
                proven: Proven::BeforeExec,
                container: None,
            });
        }
        Err(Refusal::OtherProgram {
            pid,
            runs: facts
                .exe
                .as_deref()
                .map_or_else(|| "?".into(), |p| p.display().to_string()),
            reported: executable.unwrap_or("?").to_string(),
        })
    }
}

/// The checks every proof starts with (the starter's prover and an agent's,
/// [`super::node_prove`]): a valid pid, not init nor this tool, not named by an earlier rank
/// (`seen`: pid → first rank), a process that is alive. Its pid and facts.
pub(crate) fn admit(
    rank: u64,
    pid: i64,
    tool: u32,
    seen: &mut HashMap<u32, u64>,
) -> Result<(u32, ProcessFacts), Refusal> {
    let pid = u32::try_from(pid)
        .ok()
        .filter(|&p| p > 0)
        .ok_or(Refusal::InvalidPid { pid })?;
    if pid == 1 {
        return Err(Refusal::Reserved { pid, what: "init" });
    }
    if pid == tool {
        return Err(Refusal::Reserved {
            pid,
            what: "this tool",
        });
    }
    if let Some(&first) = seen.get(&pid) {
        return Err(Refusal::Duplicate { pid, first });
    }
    seen.insert(pid, rank);
    let facts = ProcessFacts::read(pid).map_err(|e| Refusal::NoProcess {
        reason: e.to_string(),
    })?;
    if facts.is_gone() {
        return Err(Refusal::NoProcess {
            reason: format!("pid {pid} has exited"),
        });
    }
    Ok((pid, facts))
}

/// Whether `ancestor` is `parent` or one of its ancestors (a bounded walk up the parents; init
/// and unreadable processes end it).
pub(crate) fn parent_line_reaches(parent: u32, ancestor: u32) -> bool {
    let mut pid = parent;
    for _ in 0..MAX_ANCESTRY {
        if pid == ancestor {
            return true;
        }
        if pid <= 1 {
            return false;
        }
        match procfs::parent_of(pid) {
            Some(p) => pid = p,
            None => return false,
        }
    }
    false
}

/// Whether `pid` still names the process proven with `facts` (same start time).
pub(crate) fn still_same(pid: u32, facts: &ProcessFacts) -> bool {
    procfs::start_time(pid).is_ok_and(|t| t == facts.start_time)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A child of this test that sleeps, as a stand-in starter or rank.
    fn sleeper() -> std::process::Child {
        Command::new("sleep")
            .arg("20")
            .stdin(Stdio::null())
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_pid_is_the_same_process_only_with_the_same_start_time() {
        let mut c = sleeper();
        let facts = ProcessFacts::read(c.id()).unwrap();
        assert!(still_same(c.id(), &facts));
        // What a reused pid looks like: a later start time under the same number.
        let mut later = facts.clone();
        later.start_time += 1;
        assert!(!still_same(c.id(), &later));
        c.kill().unwrap();
        c.wait().unwrap();
        assert!(!still_same(c.id(), &facts), "gone");
    }

    #[test]
    fn executables_match_by_path_file_or_name_and_nothing_else() {
        // The test process is the "starter"; its child `sleep` the "rank".
        let mut rank = sleeper();
        let mut prover = Prover::new(std::process::id(), false).unwrap();
        let pid = i64::from(rank.id());
        // Found through the starter's PATH (a relative name), whatever file `sleep` is.
        let p = prover.prove(0, pid, Some("sleep")).unwrap();
        assert_eq!(p.proven, Proven::InProgram);
        // The same file by its absolute path.
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
        let mut prover = Prover::new(std::process::id(), false).unwrap();
        assert!(prover.prove(0, pid, exe.to_str()).is_ok());
        // Another program: refused (it is our child, but runs no image of ours).
        let mut prover = Prover::new(std::process::id(), false).unwrap();
        let e = prover.prove(0, pid, Some("/bin/sh-not-this")).unwrap_err();
        assert!(matches!(e, Refusal::OtherProgram { .. }), "{e}");
        // No name at all: nothing to prove it by.
        let mut prover = Prover::new(std::process::id(), false).unwrap();
        assert!(prover.prove(0, pid, None).is_err());
        // The same pid twice in one table.
        let mut prover = Prover::new(std::process::id(), false).unwrap();
        prover.prove(0, pid, Some("sleep")).unwrap();
        assert_eq!(
            prover.prove(3, pid, Some("sleep")).unwrap_err(),
            Refusal::Duplicate {
                pid: rank.id(),
                first: 0
            }
        );
        rank.kill().unwrap();
        rank.wait().unwrap();
    }

    #[test]
    fn a_process_older_than_the_starter_is_not_its_rank() {
        // Our parent (cargo's test runner) started before us: as a "rank" of ours, refused.
        let parent = std::os::unix::process::parent_id();
        let mut prover = Prover::new(std::process::id(), true).unwrap();
        let e = prover
            .prove(0, i64::from(parent), Some("anything"))
            .unwrap_err();
        assert!(matches!(e, Refusal::StartedBefore { .. }), "{e}");
        assert!(matches!(
            prover.prove(1, 0, Some("x")),
            Err(Refusal::InvalidPid { pid: 0 })
        ));
        assert!(matches!(
            prover.prove(2, i64::from(u32::MAX) + 1, Some("x")),
            Err(Refusal::InvalidPid { .. })
        ));
        assert!(matches!(
            prover.prove(3, 999_999_999, Some("x")),
            Err(Refusal::NoProcess { .. })
        ));
    }
}
