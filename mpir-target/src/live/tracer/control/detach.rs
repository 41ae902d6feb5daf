//! Detaching: every byte restored, every thread let go (running, or in the job-control stop
//! it was in).

use nix::errno::Errno;
use nix::unistd::Pid;

use super::super::{control_err, sys};
use super::Control;
use crate::error::Result;

impl Control {
    /// Detaches from many processes: all are stopped (pipelined), their bytes restored, and
    /// every thread detached, running (or stopped, if it was in a job-control stop).
    pub(in crate::live::tracer) fn detach_many(&mut self, pids: &[u32]) -> Vec<Result<()>> {
        let held: Vec<i32> = pids
            .iter()
            .map(|&p| p as i32)
            .filter(|p| self.procs.contains_key(p))
            .collect();
        let stopped = self.stop_processes(&held);
        pids.iter()
            .map(|&pid| {
                stopped.clone()?;
                self.detach_stopped(pid as i32, false)
            })
            .collect()
    }

    pub(in crate::live::tracer) fn detach(&mut self, pid: i32) -> Result<()> {
        self.traced(pid)?;
        self.stop_processes(&[pid])?;
        self.detach_stopped(pid, false)
    }

    /// Detaches from `pid` as [`Control::detach`] does, but leaves it in a job-control stop
    /// (`SIGSTOP`), for another tool to attach to; `SIGCONT` lets it run.
    pub(in crate::live::tracer) fn detach_leaving_stopped(&mut self, pid: i32) -> Result<()> {
        self.traced(pid)?;
        self.stop_processes(&[pid])?;
        self.detach_stopped(pid, true)?;
        // The queued SIGSTOP takes effect as each thread leaves its ptrace-stop: wait (briefly,
        // bounded) until the process shows it, so that the caller finds it stopped.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while !job_control_stopped(pid) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
        Ok(())
    }

    /// Restores the bytes of `pid` (all threads stopped), makes the writes registered with
    /// [`Control::write_on_detach`], and detaches every thread; with
    /// `leave_stopped`, a process-directed `SIGSTOP` is queued first, so the threads enter a
    /// job-control stop as they leave their ptrace-stops (signals held for them are kept).
    pub(in crate::live::tracer) fn detach_stopped(
        &mut self,
        pid: i32,
        leave_stopped: bool,
    ) -> Result<()> {
        let addresses: Vec<u64> = self.traced(pid)?.breakpoints.keys().copied().collect();
        let mut first_error = None;
        for a in addresses {
            if let Err(e) = self.remove_breakpoint(pid, a) {
                first_error.get_or_insert(e);
            }
        }
        let parting = std::mem::take(&mut self.traced(pid)?.parting);
        for (a, bytes) in parting {
            if let Err(e) = self.write_bytes(pid, a, &bytes) {
                first_error.get_or_insert(e);
            }
        }
        if leave_stopped
            && let Err(e) = nix::sys::signal::kill(Pid::from_raw(pid), nix::sys::signal::SIGSTOP)
        {
            first_error.get_or_insert(control_err(Pid::from_raw(pid), "kill(SIGSTOP)", e));
        }
        let traced = self
            .procs
            .remove(&pid)
            .ok_or_else(|| control_err(Pid::from_raw(pid), "detach", "not attached"))?;
        for (t, s) in traced.threads {
            self.owner.remove(&t);
            match sys::detach(Pid::from_raw(t), s.pending) {
                Ok(()) | Err(Errno::ESRCH) => {}
                Err(e) => {
                    first_error.get_or_insert(control_err(Pid::from_raw(t), "PTRACE_DETACH", e));
                }
            }
        }
        self.queued.retain(|ev| ev.pid() as i32 != pid);
        first_error.map_or(Ok(()), Err)
    }

    /// Detaches from every process; returns their pids, or the first error after trying all.
    pub(in crate::live::tracer) fn detach_all(&mut self) -> Result<Vec<u32>> {
        let pids = self.pids();
        let results = self.detach_many(&pids);
        match results.into_iter().find_map(Result::err) {
            Some(e) => Err(e),
            None => Ok(pids),
        }
    }
}

/// Whether every live thread of `pid` is in a job-control stop (`T`), or the process is gone.
fn job_control_stopped(pid: i32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return true;
    };
    tasks.filter_map(|t| t.ok()).all(|t| {
        std::fs::read_to_string(t.path().join("stat"))
            .ok()
            .and_then(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, r)| r.trim_start().chars().next())
            })
            .is_none_or(|state| matches!(state, 'T' | 'Z' | 'X'))
    })
}
