//! The cooperative channel as a session uses it: a rank read through its channel
//! ([`CoopRank`]), when a refusal sends a rank there, and a job table from the ranks'
//! announcements ([`announced_job`]).

use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use mpir_target::live::coop::{self, Announcement, CoopMemory};
use mpir_target::live::{LiveTarget, procfs};
use mpir_types::access::AccessDenial;

use crate::error::Unreadable;
use crate::known::Known;

/// How long one channel may take to answer a request (THREADS gets a second more).
pub(crate) const CHANNEL_TIMEOUT: Duration = Duration::from_secs(2);

/// A rank read through its channel.
#[derive(Clone, Debug)]
pub(crate) struct CoopRank {
    /// Its start time, as it announced it and `/proc` agreed.
    pub(crate) start: u64,
    /// Its memory (through the channel) and its images (from the map it sent).
    pub(crate) target: Rc<LiveTarget>,
    /// The channel, for its threads' registers and stacks.
    pub(crate) memory: Arc<CoopMemory>,
    /// Why the channel stands in.
    pub(crate) denial: AccessDenial,
}

/// The refusal behind `why`, if it is one waiting cannot change.
pub(crate) fn permanent_denial(why: &Unreadable) -> Option<&AccessDenial> {
    why.denial().filter(|d| !d.is_transient())
}

/// The parent chain of `pid` reaches `ancestor`.
fn descends_from(pid: u32, ancestor: u32) -> bool {
    mpir_target::live::access::descends_from(pid, ancestor) == Some(true)
}

/// Why a job could not be built from its ranks' announcements.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AnnouncedJobError {
    /// No process of the starter's announces itself on a channel of this user.
    #[error("no process of starter pid {starter} answers on a cooperative channel ({dir})")]
    NoAnnouncement {
        /// The starter.
        starter: u32,
        /// The channel directory looked in.
        dir: PathBuf,
    },
    /// The announcements do not make one job: ranks missing, repeated, or sizes disagreeing.
    #[error("the announcements of starter pid {starter}'s processes make no job: {problem}")]
    Inconsistent {
        /// The starter.
        starter: u32,
        /// What is wrong.
        problem: String,
    },
}

/// An announcement proven to be a rank of the starter's job: it descends from the starter,
/// belongs to the starter's user, started after it and still is the process that announced
/// (start time), and runs what it says it runs.
fn proven(a: &Announcement, starter: u32, starter_uid: u32, starter_start: u64) -> bool {
    let Ok(facts) = procfs::ProcessFacts::read(a.pid) else {
        return false;
    };
    descends_from(a.pid, starter)
        && facts.uid == starter_uid
        && a.uid == starter_uid
        && facts.start_time == a.start_time
        && facts.start_time >= starter_start
        && facts.exe.as_ref().is_none_or(|exe| *exe == a.executable)
}

/// The job of `starter` as its ranks announce it on their channels, each announcement proven
/// ([`proven`]); ranks `0..size` each exactly once. The known ranks, in rank order.
pub(crate) fn announced_job(starter: u32) -> Result<Vec<Known>, AnnouncedJobError> {
    let facts =
        procfs::ProcessFacts::read(starter).map_err(|e| AnnouncedJobError::Inconsistent {
            starter,
            problem: format!("the starter cannot be read: {e}"),
        })?;
    let uid = facts.uid;
    let dir = coop::channel_dir(uid);
    let none = || AnnouncedJobError::NoAnnouncement {
        starter,
        dir: dir.clone(),
    };
    let heard = coop::announcements(uid, CHANNEL_TIMEOUT).map_err(|_| none())?;
    let mut ranks: Vec<Announcement> = heard
        .into_iter()
        .filter_map(|(_, a)| a.ok())
        .filter(|a| proven(a, starter, uid, facts.start_time))
        .collect();
    if ranks.is_empty() {
        return Err(none());
    }
    let inconsistent = |problem: String| AnnouncedJobError::Inconsistent { starter, problem };
    let size = ranks[0]
        .size
        .ok_or_else(|| inconsistent(format!("pid {} announces no job size", ranks[0].pid)))?;
    ranks.sort_by_key(|a| a.rank);
    for (i, a) in ranks.iter().enumerate() {
        if a.size != Some(size) {
            return Err(inconsistent(format!(
                "pid {} announces size {:?}, pid {} size {size}",
                a.pid, a.size, ranks[0].pid
            )));
        }
        if a.rank != Some(i as u64) {
            return Err(inconsistent(format!(
                "rank {i} is {}",
                match a.rank {
                    Some(r) => format!("missing (pid {} announces rank {r})", a.pid),
                    None => format!("unknown (pid {} announces no rank)", a.pid),
                }
            )));
        }
    }
    if ranks.len() as u64 != size {
        return Err(inconsistent(format!(
            "{} of {size} ranks announce themselves",
            ranks.len()
        )));
    }
    Ok(ranks
        .into_iter()
        .map(|a| Known {
            rank: a.rank,
            pid: a.pid,
            image: a.executable,
            state: Ok(a.start_time),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_descends_and_init_does_not() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(descends_from(child.id(), std::process::id()));
        assert!(!descends_from(std::process::id(), child.id()));
        assert!(!descends_from(1, std::process::id()));
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn only_permanent_refusals_call_for_the_channel() {
        let gdb = Unreadable::AttachFailed(mpir_target::TargetError::Denied {
            pid: 5,
            operation: "attach".into(),
            denial: AccessDenial::TracedBy {
                pid: 9,
                name: "gdb".into(),
            },
        });
        assert!(permanent_denial(&gdb).is_none());
        let filtered = Unreadable::AttachFailed(mpir_target::TargetError::Denied {
            pid: 5,
            operation: "attach".into(),
            denial: AccessDenial::Seccomp,
        });
        assert_eq!(permanent_denial(&filtered), Some(&AccessDenial::Seccomp));
        assert!(permanent_denial(&Unreadable::NotAttached).is_none());
    }
}
