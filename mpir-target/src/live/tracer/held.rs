//! Waiting out another tracer: a process refused because someone else traces it
//! ([`AccessDenial::TracedBy`], the one transient denial) is attached again once that tracer
//! has let go, within a bound ([`TracerOptions::held_wait`](super::TracerOptions)).
//!
//! **Where the wait happens.** On the caller's thread, between two requests to the tracer
//! thread, never inside one: the tracer thread is the only one that may serve the processes
//! this tracer already holds (deliver their signals, follow their threads, collect their
//! events — it keeps polling them between requests), and a request that slept for seconds
//! would freeze all that, and every other caller of the same tracer, for as long. The
//! attach request itself stays as short as before; the caller polls `/proc` and asks again.
//!
//! **A tracer gone before it was seen.** An `EPERM` that nothing in `/proc` explains may be a
//! tracer that let go between the refusal and the diagnosis; it is asked again a few times,
//! 10 ms apart ([`unexplained`]), then reported as it is.
//!
//! **What is waited for.** Only `TracedBy`: the `TracerPid` of every thread in
//! `/proc/PID/task/*/status`, polled every [`POLL`] (no busy loop) until all are 0 or the
//! bound passes (a tracer letting go detaches the threads one by one; a refusal of one thread
//! is diagnosed from that thread's facts). Any other denial,
//! or any other error, is reported at once. Once the bound passes, the process is asked for
//! one last time, so the refusal reported names the holder as it is then.
//!
//! **Two tools, one job.** Two tools attaching the same ranks at once may each seize some of
//! them and be refused the others: each would hold what the other waits for, until both bounds
//! pass. So a batch that was refused some processes by another tracer lets go of the ones it
//! got before it waits, and takes the whole batch again once the holders are gone (after a
//! pause of a few milliseconds that differs between tools, so that they do not collide again).
//!
//! **Not twice for the same holder.** A holder that kept a process for a whole bound (gdb at
//! its prompt) is remembered, in this program, with the process: a later attach of that process
//! while the same holder has it is refused at once, instead of the bound again at every sample
//! of a sampled read.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use mpir_types::access::AccessDenial;

use crate::error::TargetError;

/// Pause between two looks at the holders' `TracerPid`.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// How many more times an unexplained refusal ([`unexplained`]) is asked.
pub(crate) const UNEXPLAINED_TRIES: u32 = 5;
/// Most threads of one process looked at for a tracer.
const MAX_TASKS: usize = 65_536;
/// Most (process, holder) pairs remembered as having outlasted a bound.
const REMEMBERED: usize = 4096;

/// (process, holder) pairs that outlasted a whole bound, oldest first.
static OUTLASTED: Mutex<Vec<(u32, u32)>> = Mutex::new(Vec::new());

/// The holder named by a transient refusal of an attach: `(pid, holder)`.
pub(crate) fn held_by(error: &TargetError) -> Option<(u32, u32)> {
    match error {
        TargetError::Denied {
            pid,
            denial: denial @ AccessDenial::TracedBy { pid: holder, .. },
            ..
        } if denial.is_transient() => Some((*pid, *holder)),
        _ => None,
    }
}

/// Whether `error` is an attach refused for a reason nothing in `/proc` shows
/// ([`AccessDenial::Unexplained`]): a security module, or a tracer that let go between the
/// refusal and the look at `/proc` (it leaves no trace). Asked again [`UNEXPLAINED_TRIES`]
/// times, [`POLL`] apart, which tells the two apart at a cost of at most 50 ms.
pub(crate) fn unexplained(error: &TargetError) -> bool {
    matches!(
        error,
        TargetError::Denied {
            denial: AccessDenial::Unexplained { .. },
            ..
        }
    )
}

/// Whether `holder` already kept `pid` for a whole bound.
pub(crate) fn outlasted(pid: u32, holder: u32) -> bool {
    OUTLASTED
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .contains(&(pid, holder))
}

/// Remembers that `holder` kept `pid` for a whole bound.
fn remember(pid: u32, holder: u32) {
    let mut all = OUTLASTED.lock().unwrap_or_else(|e| e.into_inner());
    if all.contains(&(pid, holder)) {
        return;
    }
    if all.len() >= REMEMBERED {
        all.remove(0);
    }
    all.push((pid, holder));
}

/// The tracer of task `status` (its `TracerPid`), `None` when untraced or unreadable.
fn tracer_in(status: &str) -> Option<u32> {
    let tracer: u32 = status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))?
        .trim()
        .parse()
        .ok()?;
    (tracer != 0).then_some(tracer)
}

/// Whether any thread of `pid` is traced now: a tracer letting go detaches the threads one by
/// one, and the process is free only once all are. At most [`MAX_TASKS`] threads are looked
/// at (more count as traced until the bound); a process gone is free.
fn traced_now(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let mut seen = 0usize;
    for task in tasks.filter_map(|t| t.ok()) {
        seen += 1;
        if seen > MAX_TASKS {
            return true;
        }
        let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
        if tracer_in(&status).is_some() {
            return true;
        }
    }
    false
}

/// Waits, polling every [`POLL`], until no process of `held` (process, holder) is traced any
/// more, or `deadline`. Returns whether all were let go; otherwise the pairs still held are
/// remembered as having outlasted the bound.
pub(crate) fn wait_for_release(held: &[(u32, u32)], deadline: Instant) -> bool {
    loop {
        let still: Vec<(u32, u32)> = held
            .iter()
            .filter(|(pid, _)| traced_now(*pid))
            .copied()
            .collect();
        if still.is_empty() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            for (pid, holder) in still {
                remember(pid, holder);
            }
            return false;
        }
        std::thread::sleep(POLL.min(deadline - now));
    }
}

/// A pause of 0–9 ms, different between tools (and between tries), before a batch that let go
/// of what it had is taken again.
pub(crate) fn stagger() {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let spread = (nanos ^ std::process::id().wrapping_mul(2_654_435_761)) % 10_000;
    std::thread::sleep(Duration::from_micros(u64::from(spread)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_traced_by_is_waited_for() {
        let traced = TargetError::Denied {
            pid: 7,
            operation: "attach (PTRACE_SEIZE)".into(),
            denial: AccessDenial::TracedBy {
                pid: 9,
                name: "gdb".into(),
            },
        };
        assert_eq!(held_by(&traced), Some((7, 9)));
        let other = TargetError::Denied {
            pid: 7,
            operation: "attach (PTRACE_SEIZE)".into(),
            denial: AccessDenial::NotDumpable,
        };
        assert_eq!(held_by(&other), None);
        assert!(!unexplained(&other));
        let unknown = TargetError::Denied {
            pid: 7,
            operation: "attach (PTRACE_SEIZE)".into(),
            denial: AccessDenial::Unexplained {
                errno: "Operation not permitted".into(),
            },
        };
        assert!(unexplained(&unknown) && held_by(&unknown).is_none());
    }

    #[test]
    fn a_holder_that_outlasted_a_bound_is_remembered_with_its_process() {
        // Pids no process has (above the kernel's maximum of 2^22).
        let (pid, holder) = (u32::MAX - 3, u32::MAX - 4);
        assert!(!outlasted(pid, holder));
        remember(pid, holder);
        remember(pid, holder);
        assert!(outlasted(pid, holder));
        assert!(!outlasted(pid, holder - 1), "another holder is waited for");
        let all = OUTLASTED.lock().unwrap_or_else(|e| e.into_inner());
        assert_eq!(all.iter().filter(|p| **p == (pid, holder)).count(), 1);
    }
}
