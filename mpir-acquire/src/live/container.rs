//! The facts behind [`crate::container`]: whether a proven pid runs a container runtime, and
//! which of its descendants is the rank. Reads `/proc` only; never stops or signals anything.

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};

use mpir_target::live::procfs::{FileId, ProcessFacts};

use crate::container::{Contained, ContainerProblem};
use crate::identity::Refusal;

/// Most descendants of one runtime process looked at (a runtime has a handful: its monitor,
/// the container's init, the rank, perhaps a shell).
pub(crate) const MAX_DESCENDANTS: usize = 256;
/// Deepest level of descendants walked.
const MAX_DEPTH: usize = 16;
/// Most bytes of a `/proc/PID/maps` read when looking for an MPI library (an MPI rank's map
/// is tens of kilobytes).
const MAX_MAPS: u64 = 16 << 20;
/// Most bytes of a runtime's command line read.
const MAX_CMDLINE: u64 = 1 << 20;

/// What a process's namespaces are: the targets of `/proc/PID/ns/{pid,mnt}`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Namespaces {
    pid: Option<OsString>,
    mnt: Option<OsString>,
}

impl Namespaces {
    fn of(pid: u32) -> Self {
        let ns = |kind: &str| {
            std::fs::read_link(format!("/proc/{pid}/ns/{kind}"))
                .ok()
                .map(PathBuf::into_os_string)
        };
        Namespaces {
            pid: ns("pid"),
            mnt: ns("mnt"),
        }
    }

    /// Whether `other` is known to be in another PID namespace, and in another mount
    /// namespace, than `self`.
    fn differs(&self, other: &Namespaces) -> (bool, bool) {
        let differs =
            |a: &Option<OsString>, b: &Option<OsString>| a.is_some() && b.is_some() && a != b;
        (
            differs(&self.pid, &other.pid),
            differs(&self.mnt, &other.mnt),
        )
    }
}

/// The children of `pid` (every thread's `children` file), in order; empty when unreadable.
fn children(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten().take(4096) {
        let mut text = String::new();
        let Ok(f) = std::fs::File::open(task.path().join("children")) else {
            continue;
        };
        if f.take(1 << 20).read_to_string(&mut text).is_err() {
            continue;
        }
        out.extend(
            text.split_ascii_whitespace()
                .filter_map(|p| p.parse::<u32>().ok()),
        );
    }
    out
}

/// Most processes of a starter's namespace translated (a job's ranks and their launchers'
/// helpers; a bound against a hostile tree).
const MAX_TRANSLATED: usize = 1 << 20;

/// The descendants of `pid`, breadth first, at most [`MAX_DESCENDANTS`]; `Err` when it has more.
fn descendants(pid: u32) -> Result<Vec<u32>, ContainerProblem> {
    descendants_bounded(pid, MAX_DESCENDANTS)
}

/// The descendants of `pid`, breadth first, at most `limit`; `Err` when it has more.
fn descendants_bounded(pid: u32, limit: usize) -> Result<Vec<u32>, ContainerProblem> {
    let mut seen: HashSet<u32> = HashSet::from([pid]);
    let mut out = Vec::new();
    let mut level = vec![pid];
    for _ in 0..MAX_DEPTH {
        let mut next = Vec::new();
        for p in level {
            for c in children(p) {
                if seen.insert(c) {
                    if out.len() == limit {
                        return Err(ContainerProblem::TooManyDescendants { limit });
                    }
                    out.push(c);
                    next.push(c);
                }
            }
        }
        if next.is_empty() {
            break;
        }
        level = next;
    }
    Ok(out)
}

/// Whether `file` (a path from a memory map) names an MPI library: `libmpi*.so*` (Open MPI's
/// `libmpi.so.40`, MPICH's `libmpich.so.12`, Intel MPI's `libmpi.so.12`, Cray's
/// `libmpich_*.so`).
fn is_mpi_library(file: &str) -> bool {
    let base = file.rsplit('/').next().unwrap_or(file);
    base.starts_with("libmpi") && base.contains(".so")
}

/// Whether process `pid` maps an MPI library (bounded read of its memory map).
fn maps_mpi(pid: u32) -> bool {
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/maps")) else {
        return false;
    };
    let mut text = Vec::new();
    if f.take(MAX_MAPS).read_to_end(&mut text).is_err() {
        return false;
    }
    text.split(|&b| b == b'\n').any(|line| {
        line.iter()
            .position(|&b| b == b'/')
            .and_then(|i| line.get(i..))
            .is_some_and(|p| is_mpi_library(&String::from_utf8_lossy(p)))
    })
}

/// `NSpid` of `/proc/PID/status`: the pid in each PID namespace, outermost first.
pub(crate) fn ns_pids(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| l.strip_prefix("NSpid:")).map(|v| {
                v.split_ascii_whitespace()
                    .take(64)
                    .filter_map(|p| p.parse().ok())
                    .collect()
            })
        })
        .unwrap_or_default()
}

/// The arguments of `pid`'s command line after its program name (bounded).
fn arguments(pid: u32) -> Vec<OsString> {
    use std::os::unix::ffi::OsStrExt;
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/cmdline")) else {
        return Vec::new();
    };
    let mut raw = Vec::new();
    if f.take(MAX_CMDLINE).read_to_end(&mut raw).is_err() {
        return Vec::new();
    }
    raw.split(|&b| b == 0)
        .skip(1)
        .filter(|a| !a.is_empty())
        .map(|a| std::ffi::OsStr::from_bytes(a).to_os_string())
        .collect()
}

/// Whether one of the runtime's `arguments` names the program `leaf` runs: the same path inside
/// the container, a relative path naming the same file from the rank's working directory
/// (compared by identity, so a link cannot make another file count), or a bare name equal to
/// its file name (found through the container's `PATH`).
fn named_by(arguments: &[OsString], leaf: &ProcessFacts) -> bool {
    let (Some(exe), Some(exe_id)) = (leaf.exe.as_deref(), leaf.exe_id) else {
        return false;
    };
    arguments.iter().any(|a| {
        let p = Path::new(a);
        if p == exe {
            return true;
        }
        if p.is_relative() {
            let bytes = a.as_encoded_bytes();
            if bytes.contains(&b'/') {
                let via_cwd = Path::new(&format!("/proc/{}/cwd", leaf.pid)).join(p);
                return FileId::of(&via_cwd) == Some(exe_id);
            }
            return exe.file_name() == Some(a.as_os_str());
        }
        false
    })
}

/// How deep process `pid`'s PID namespace is below this tool's: 0 in the same namespace
/// (or unknown), 1 in a child namespace, and so on (`NSpid` has one field per level).
pub(crate) fn ns_level(pid: u32) -> usize {
    ns_pids(pid).len().saturating_sub(1)
}

/// The pids in this tool's namespace of the starter `starter` and its descendants (bounded
/// walk), by their pids in the namespace `level` levels below ours, where the starter lives:
/// one walk for a whole table. Processes with no pid at that level are left out.
pub(crate) fn translation(starter: u32, level: usize) -> HashMap<u32, u32> {
    let all = descendants_bounded(starter, MAX_TRANSLATED).unwrap_or_default();
    std::iter::once(starter)
        .chain(all)
        .filter_map(|p| ns_pids(p).get(level).map(|&inner| (inner, p)))
        .collect()
}

/// The rank's place when the starter runs in another PID namespace than this tool and the
/// table named it by `table_pid` there: `facts` are the translated process's.
pub(crate) fn translated(facts: &ProcessFacts, table_pid: u32) -> Contained {
    let mine = Namespaces::of(std::process::id());
    let (new_pid, new_mnt) = mine.differs(&Namespaces::of(facts.pid));
    Contained {
        pid: facts.pid,
        ns_pid: ns_pids(facts.pid).last().copied().filter(|_| new_pid),
        table_pid,
        runtime: None,
        executable: facts.exe.clone().unwrap_or_else(|| PathBuf::from("?")),
        new_pid_namespace: new_pid,
        new_mount_namespace: new_mnt,
    }
}

/// The rank inside a container whose runtime `runtime` (proven, the pid the table names for
/// rank `rank`) runs: `Ok(None)` when `runtime` runs no container (no descendant in another
/// namespace) or is an MPI process itself; the rank's facts and how it was found; or why the
/// rank cannot be told.
pub(crate) fn resolve(
    runtime: &ProcessFacts,
    rank: u64,
) -> Result<Option<(ProcessFacts, Contained)>, Refusal> {
    let refuse = |problem| Refusal::Container {
        pid: runtime.pid,
        runtime: runtime
            .exe
            .as_deref()
            .map_or_else(|| "?".into(), |p| p.display().to_string()),
        problem,
    };
    let kids = children(runtime.pid);
    if kids.is_empty() {
        return Ok(None);
    }
    let own = Namespaces::of(runtime.pid);
    let all = descendants(runtime.pid).map_err(refuse)?;
    let inside: Vec<(ProcessFacts, (bool, bool))> = all
        .into_iter()
        .filter_map(|p| {
            let d = own.differs(&Namespaces::of(p));
            if !(d.0 || d.1) {
                return None;
            }
            ProcessFacts::read(p)
                .ok()
                .filter(|f| !f.is_gone())
                .map(|f| (f, d))
        })
        .collect();
    if inside.is_empty() || maps_mpi(runtime.pid) {
        return Ok(None);
    }
    let other_program: Vec<&(ProcessFacts, (bool, bool))> = inside
        .iter()
        .filter(|(f, _)| f.exe_id.is_some() && f.exe_id != runtime.exe_id)
        .collect();
    let mpi: Vec<&(ProcessFacts, (bool, bool))> = other_program
        .iter()
        .copied()
        .filter(|(f, _)| maps_mpi(f.pid))
        .collect();
    let pick = match (mpi.as_slice(), other_program.as_slice()) {
        ([one], _) | ([], [one]) => *one,
        ([], []) => return Err(refuse(ContainerProblem::NoRank)),
        (many, _) if !many.is_empty() => {
            return Err(refuse(ContainerProblem::Ambiguous {
                candidates: many.iter().map(|(f, _)| f.pid).collect(),
            }));
        }
        (_, many) => {
            return Err(refuse(ContainerProblem::Ambiguous {
                candidates: many.iter().map(|(f, _)| f.pid).collect(),
            }));
        }
    };
    let (leaf, (new_pid, new_mnt)) = pick.clone();
    if leaf.start_time < runtime.start_time {
        return Err(Refusal::StartedBefore {
            pid: leaf.pid,
            start_time: leaf.start_time,
            starter_start_time: runtime.start_time,
        });
    }
    if let Ok(env) = super::node_prove::environment(leaf.pid) {
        let expected = rank.to_string();
        for var in super::node_prove::RANK_VARIABLES {
            if let Some((_, v)) = env.iter().find(|(k, _)| k == var)
                && v.trim() != expected
            {
                return Err(Refusal::OtherRank {
                    pid: leaf.pid,
                    variable: (*var).to_string(),
                    found: v.clone(),
                    expected,
                });
            }
        }
    }
    if !named_by(&arguments(runtime.pid), &leaf) {
        return Err(refuse(ContainerProblem::NotNamed {
            pid: leaf.pid,
            runs: leaf
                .exe
                .as_deref()
                .map_or_else(|| "?".into(), |p| p.display().to_string()),
        }));
    }
    let ns_pid = if new_pid {
        ns_pids(leaf.pid).last().copied()
    } else {
        None
    };
    let contained = Contained {
        pid: leaf.pid,
        ns_pid,
        table_pid: runtime.pid,
        runtime: Some(runtime.exe.clone().unwrap_or_else(|| PathBuf::from("?"))),
        executable: leaf.exe.clone().unwrap_or_else(|| PathBuf::from("?")),
        new_pid_namespace: new_pid,
        new_mount_namespace: new_mnt,
    };
    Ok(Some((leaf, contained)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mpi_libraries_by_their_file_names() {
        for yes in [
            "/usr/lib/x86_64-linux-gnu/libmpi.so.40.30.5",
            "/usr/lib/x86_64-linux-gnu/libmpich.so.12.3.0",
            "/opt/cray/lib/libmpich_gnu_123.so.12",
        ] {
            assert!(is_mpi_library(yes), "{yes}");
        }
        for no in [
            "/usr/lib/libc.so.6",
            "/usr/bin/libmpi-runner",
            "/usr/lib/x86_64-linux-gnu/libompi_dbg_msgq.so",
        ] {
            assert!(!is_mpi_library(no), "{no}");
        }
    }

    /// `bwrap` (a new PID namespace, the host's root) running `args`, with `env`, once it
    /// has `processes` descendants, none of them a shell still (every exec done); `None`
    /// (skipped) without bwrap.
    fn bwrap(args: &[&str], env: &[(&str, &str)], processes: usize) -> Option<Killed> {
        if !mpir_target::testkit::have("bwrap") {
            mpir_target::testkit::skip("needs bubblewrap (bwrap)");
            return None;
        }
        let child = std::process::Command::new("bwrap")
            .args(["--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
            .args(["--unshare-pid", "--die-with-parent"])
            .args(args)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let k = Killed(child);
        let me = k.0.id();
        assert!(
            mpir_target::testkit::wait_for(20, || {
                let d = descendants(me).unwrap_or_default();
                d.len() == processes
                    && d.iter().all(|&p| {
                        ProcessFacts::read(p).is_ok_and(|f| f.comm == "sleep" || f.comm == "bwrap")
                    })
            }),
            "bwrap {args:?} never settled"
        );
        Some(k)
    }

    struct Killed(std::process::Child);

    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    fn resolve_child(k: &Killed, rank: u64) -> Result<Option<(ProcessFacts, Contained)>, Refusal> {
        resolve(&ProcessFacts::read(k.0.id()).unwrap(), rank)
    }

    #[test]
    fn the_one_program_in_the_container_is_the_rank() {
        let Some(k) = bwrap(&["sleep", "30"], &[("PMI_RANK", "3")], 2) else {
            return;
        };
        let (leaf, c) = resolve_child(&k, 3).unwrap().expect("a container");
        // The oracle: the sleep among bwrap's descendants, pid 2 in its namespace (bwrap's
        // init is 1).
        let sleep = descendants(k.0.id())
            .unwrap()
            .into_iter()
            .find(|&p| ProcessFacts::read(p).is_ok_and(|f| f.comm == "sleep"))
            .unwrap();
        assert_eq!((leaf.pid, c.pid), (sleep, sleep));
        assert_eq!(c.ns_pid, Some(2));
        assert_eq!(c.table_pid, k.0.id());
        assert!(c.new_pid_namespace && c.new_mount_namespace);
        assert_eq!(c.runtime.as_deref(), Some(Path::new("/usr/bin/bwrap")));
        // Another rank's environment: refused.
        let e = resolve_child(&k, 4).unwrap_err();
        assert!(
            matches!(&e, Refusal::OtherRank { pid, variable, .. } if *pid == sleep && variable == "PMI_RANK"),
            "{e}"
        );
    }

    #[test]
    fn two_programs_in_the_container_are_ambiguous() {
        let Some(k) = bwrap(&["sh", "-c", "sleep 30 & exec sleep 31"], &[], 3) else {
            return;
        };
        let e = resolve_child(&k, 0).unwrap_err();
        assert!(
            matches!(
                &e,
                Refusal::Container { problem: ContainerProblem::Ambiguous { candidates }, .. }
                    if candidates.len() == 2
            ),
            "{e}"
        );
    }

    #[test]
    fn a_program_the_runtimes_arguments_do_not_name_is_refused() {
        let Some(k) = bwrap(&["sh", "-c", "exec sleep 30"], &[], 2) else {
            return;
        };
        let e = resolve_child(&k, 0).unwrap_err();
        assert!(
            matches!(
                &e,
                Refusal::Container {
                    problem: ContainerProblem::NotNamed { .. },
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn a_process_without_children_runs_no_container() {
        let me = ProcessFacts::read(std::process::id()).unwrap();
        // This test's process may have threads but no child process of its own.
        assert!(matches!(resolve(&me, 0), Ok(None)));
        assert_eq!(
            ns_pids(std::process::id()).first(),
            Some(&std::process::id())
        );
    }
}
