//! The facts that decide whether this tool may trace or read a process, read from `/proc`
//! right after a refusal, and the one reason they give ([`mpir_types::access`]).
//!
//! Everything here reads world-readable files only (`/proc/PID/status`, `/proc/PID/stat`, the
//! owner of `/proc/PID`), so it works where the refused access does not, and it never retries
//! the refused request: a permanent denial is reported at once.

use std::os::unix::fs::MetadataExt;

use mpir_types::access::{AccessDenial, AccessFacts};

/// `CAP_SYS_PTRACE`'s bit in the capability sets.
const CAP_SYS_PTRACE: u32 = 19;
/// How many parents are followed to decide whether a process descends from this tool.
const MAX_ANCESTORS: usize = 512;

fn status_of(pid: &str) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

fn field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .map(str::trim)
}

fn numbers(status: &str, name: &str) -> Option<Vec<u32>> {
    let v: Vec<u32> = field(status, name)?
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    (!v.is_empty()).then_some(v)
}

/// Whether `pid` descends from `ancestor` (its parent chain, at most 512 steps, reaches it);
/// `None` when the chain cannot be read to its end.
pub fn descends_from(pid: u32, ancestor: u32) -> Option<bool> {
    let mut p = pid;
    for _ in 0..MAX_ANCESTORS {
        if p == ancestor {
            return Some(p != pid);
        }
        if p <= 1 {
            return Some(false);
        }
        p = super::procfs::parent_of(p)?;
    }
    None
}

/// The command name of `pid`, `?` when unreadable.
pub fn command_name(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|s| s.trim_end().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// The process tracing `pid`, other than this tool: its pid and command name.
pub fn tracer_of(pid: u32) -> Option<(u32, String)> {
    let status = status_of(&pid.to_string())?;
    let tracer: u32 = field(&status, "TracerPid:")?.parse().ok()?;
    (tracer != 0 && tracer != std::process::id()).then(|| (tracer, command_name(tracer)))
}

/// Gathers what `/proc` tells about this tool, `pid` and the system.
pub fn access_facts(pid: u32) -> AccessFacts {
    let mut facts = AccessFacts::new(pid);
    facts.yama_scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok());
    if let Some(me) = status_of("self") {
        facts.tool_cap_sys_ptrace = field(&me, "CapEff:")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .map(|caps| caps & (1 << CAP_SYS_PTRACE) != 0);
        facts.tool_uid = numbers(&me, "Uid:").and_then(|v| Some((*v.first()?, *v.get(1)?)));
        facts.tool_seccomp_filter = field(&me, "Seccomp:").map(|s| s == "2");
        facts.tool_no_new_privs = field(&me, "NoNewPrivs:").map(|s| s == "1");
    }
    let Some(target) = status_of(&pid.to_string()) else {
        facts.exited = true;
        return facts;
    };
    if field(&target, "State:").is_some_and(|s| s.starts_with('Z') || s.starts_with('X')) {
        facts.exited = true;
    }
    let uids = numbers(&target, "Uid:");
    facts.target_uids = uids
        .as_ref()
        .and_then(|v| Some((*v.first()?, *v.get(1)?, *v.get(2)?)));
    // The kernel gives a non-dumpable process's private /proc files (`mem`, `environ`…) to
    // root (task_dump_owner): such a file owned by root in a process whose effective uid is
    // not root says so. A root process's dumpable flag cannot be told from outside.
    if let (Ok(meta), Some((_, euid, _))) = (
        std::fs::metadata(format!("/proc/{pid}/environ")),
        facts.target_uids,
    ) && euid != 0
    {
        facts.target_dumpable = Some(meta.uid() == euid);
    }
    facts.tracer = tracer_of(pid);
    facts.target_is_descendant = descends_from(pid, std::process::id());
    facts.other_user_namespace = match (
        std::fs::read_link("/proc/self/ns/user"),
        std::fs::read_link(format!("/proc/{pid}/ns/user")),
    ) {
        (Ok(a), Ok(b)) => Some(a != b && !owned_by_our_namespace(pid)),
        _ => None,
    };
    facts
}

/// Whether the target's user namespace was made by a process of our user namespace and user:
/// then this tool (with its capabilities) has rights in it. Read from the target's `uid_map`:
/// a namespace whose map sends some id to our uid is one we (or our user) made.
fn owned_by_our_namespace(pid: u32) -> bool {
    let Ok(map) = std::fs::read_to_string(format!("/proc/{pid}/uid_map")) else {
        return false;
    };
    // This process's effective uid, from its own status.
    let me = status_of("self")
        .and_then(|s| numbers(&s, "Uid:"))
        .and_then(|v| v.get(1).copied());
    let Some(me) = me else { return false };
    map.lines().any(|l| {
        let f: Vec<u64> = l
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        let me = u64::from(me);
        matches!(f.as_slice(), [_, outside, count] if *outside <= me && me < outside + count)
    })
}

/// The one reason access to `pid` was refused with `errno`, from the facts as they stand now.
/// `attach` says whether the refused request was an attach.
pub fn diagnose(pid: u32, errno: nix::errno::Errno, attach: bool) -> AccessDenial {
    access_facts(pid).diagnose(errno.desc(), attach)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(
        miri,
        ignore = "runs a process and reads /proc: Miri's isolation has neither (HARDENING.md, section Miri)"
    )]
    fn facts_of_a_child_of_ours() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        let facts = access_facts(child.id());
        assert_eq!(facts.target_is_descendant, Some(true));
        assert_eq!(facts.tracer, None);
        assert!(!facts.exited);
        assert_eq!(
            facts.target_dumpable,
            facts
                .target_uids
                .and_then(|(_, e, _)| (e != 0).then_some(true))
        );
        assert_eq!(facts.tool_seccomp_filter, Some(false));
        assert_eq!(facts.other_user_namespace, Some(false));
        let _ = child.kill();
        let _ = child.wait();
        assert!(access_facts(child.id()).exited);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "reads /proc: Miri's isolation has no file system (HARDENING.md, section Miri)"
    )]
    fn init_is_not_our_descendant() {
        assert_eq!(access_facts(1).target_is_descendant, Some(false));
    }
}
