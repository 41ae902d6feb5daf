//! Slurm's `srun` over live processes ([`Launcher::Slurm`]): which `srun` of a process tree
//! is the starter, and the wake-up of tasks `srun` stopped for the debugger.
//!
//! Facts (Debian slurm-wlm 22.05; [`QuirkFact::SlurmBreakpointWakesTasks`]): with
//! `MPIR_being_debugged` set, slurmstepd stops every task (`SIGSTOP`, no tracer) at the dynamic
//! loader's entry; `srun`'s `MPIR_Breakpoint` forwards `SIG_DEBUG_WAKE` to the step, on which
//! slurmstepd continues the tasks. Acquisition takes the tasks while `srun` sits at the
//! breakpoint's entry and lets `srun` run the body when it lets go of it; a task the tracer
//! held is then in that job-control stop again after its detach, until the wake-up arrives.
//! If `srun` is gone (killed while the tasks were held) no wake-up ever comes: [`wake_ranks`]
//! continues such tasks itself, so that no task is ever left stopped.
//!
//! [`QuirkFact::SlurmBreakpointWakesTasks`]: crate::quirks::QuirkFact::SlurmBreakpointWakesTasks

use std::time::{Duration, Instant};

use mpir_target::live::procfs::ProcessFacts;

use crate::error::AcquireError;
use crate::note::Note;
use crate::quirks::{self, Launcher};

/// Longest wait for `srun`'s own wake-up of the released tasks before continuing them here.
const WAKE_WAIT: Duration = Duration::from_secs(3);

/// `/proc/PID/cmdline`, bounded (a hostile process may have a huge one).
fn cmdline(pid: u32) -> Option<Vec<u8>> {
    use std::io::Read;
    let f = std::fs::File::open(format!("/proc/{pid}/cmdline")).ok()?;
    let mut out = Vec::new();
    f.take(1 << 20).read_to_end(&mut out).ok()?;
    Some(out)
}

/// When `pid` is `srun`'s shepherd — the child `srun` forks with the same executable and
/// command line, which has no table of the job — the parent `srun`, which has it.
pub fn shepherd_parent(pid: u32) -> Option<u32> {
    let me = ProcessFacts::read(pid).ok()?;
    let exe = me.exe.as_deref()?.to_str()?;
    if quirks::identify(Some(exe), None) != Some(Launcher::Slurm) || me.ppid <= 1 {
        return None;
    }
    let parent = ProcessFacts::read(me.ppid).ok()?;
    let same_program = me.exe_id.is_some() && parent.exe_id == me.exe_id;
    let same_command = cmdline(pid).is_some_and(|c| Some(c) == cmdline(me.ppid));
    (same_program && same_command).then_some(me.ppid)
}

/// Refuses `pid` when it is `srun`'s shepherd, naming the `srun` to use instead.
pub(super) fn refuse_shepherd(pid: u32) -> Result<(), AcquireError> {
    match shepherd_parent(pid) {
        Some(parent) => Err(AcquireError::NotTheStarter {
            pid,
            starter: parent,
            why: "it is srun's shepherd child (same command line, no table of the job)",
        }),
        None => Ok(()),
    }
}

/// Whether `pid` is in a job-control stop, not traced (`T` in `/proc/PID/stat`).
fn stopped(pid: u32) -> bool {
    ProcessFacts::read(pid).is_ok_and(|f| f.state == 'T')
}

/// After the release of a job whose launcher wakes its tasks from `MPIR_Breakpoint`: waits
/// (bounded) for the launcher's wake-up of the released `ranks`, and continues with `SIGCONT`
/// any that is still stopped — at once when the starter `starter` (started at `started`, its
/// start time) has ended. Each rank is checked to still be the same process (its start time)
/// before it is signalled. Returns a note per rank continued here.
pub(super) fn wake_ranks(starter: u32, ranks: &[(u32, u64)], timeout: Duration) -> Vec<Note> {
    let starter_gone =
        || ProcessFacts::read(starter).map_or(true, |f| f.is_gone() || f.state == 'X');
    let deadline = Instant::now() + timeout.min(WAKE_WAIT);
    let mut waiting: Vec<(u32, u64)> = ranks.to_vec();
    let mut notes = Vec::new();
    loop {
        waiting.retain(|&(pid, _)| stopped(pid));
        if waiting.is_empty() {
            return notes;
        }
        let why = if starter_gone() {
            "the starter has ended: its wake-up will never come"
        } else if Instant::now() >= deadline {
            "the starter's wake-up did not come in time"
        } else {
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        for &(pid, start_time) in &waiting {
            notes.extend(super::release::continue_stopped(pid, start_time, why));
        }
        return notes;
    }
}

/// Whether `job`'s launcher wakes its ranks from `MPIR_Breakpoint` (and so, in launch mode,
/// stopped them itself).
pub(super) fn wakes_ranks(job: &crate::Job) -> bool {
    job.starter
        .launcher
        .is_some_and(|l| quirks::Quirks::of(l).breakpoint_wakes_ranks)
}

/// The attached ranks of `job` with their start times (to check later that a pid is still the
/// same process), for [`wake_ranks`].
pub(super) fn held_ranks(job: &crate::Job) -> Vec<(u32, u64)> {
    job.attached_pids()
        .into_iter()
        .filter_map(|pid| Some((pid, ProcessFacts::read(pid).ok()?.start_time)))
        .collect()
}

/// The job and step ids `srun` `pid` holds (`totalview_jobid`, `totalview_stepid`), read
/// without stopping it; `None` when it is no `srun` with a filled step.
fn step_of(pid: u32, debug: &mpir_target::debuginfo::DebugOptions) -> Option<(u64, u64)> {
    use mpir_target::{MemoryExt, SymbolLookup};
    let target = mpir_target::live::LiveTarget::open(pid, debug.clone()).ok()?;
    let read = |name: &'static str| -> Option<u64> {
        let sym = target.symbol(name).ok().flatten()?;
        let p = target.read_pointer(sym.address, name).ok()?;
        if p == 0 {
            return None;
        }
        crate::job::parse_launcher_id(&target.read_c_string(p, 32).ok()?).ok()
    };
    Some((
        read(crate::LAUNCHER_JOB_ID)?,
        read(crate::LAUNCHER_STEP_ID)?,
    ))
}

/// Every `srun` of this node (not a shepherd) with the step it runs: (job, step, pid), from
/// the process table and each `srun`'s own `totalview_jobid`/`totalview_stepid`.
pub fn srun_steps(debug: &mpir_target::debuginfo::DebugOptions) -> Vec<(u64, u64, u32)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<(u64, u64, u32)> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .take(1 << 22)
        .filter(|&pid| {
            std::fs::read_link(format!("/proc/{pid}/exe"))
                .is_ok_and(|exe| quirks::identify(exe.to_str(), None) == Some(Launcher::Slurm))
        })
        .filter(|&pid| shepherd_parent(pid).is_none())
        .filter_map(|pid| step_of(pid, debug).map(|(job, step)| (job, step, pid)))
        .collect();
    out.sort_unstable();
    out
}

/// The `srun` of Slurm step `id` on this node: its pid. With no step in `id`, the job's only
/// step here. When none is here, `scontrol` (bounded by `timeout`) says whether the job
/// exists and where it runs, for a clear error.
pub fn find_srun(
    id: crate::slurm::StepId,
    debug: &mpir_target::debuginfo::DebugOptions,
    timeout: Duration,
) -> Result<u32, AcquireError> {
    use crate::slurm::SlurmError;
    let steps: Vec<(u64, u32)> = srun_steps(debug)
        .into_iter()
        .filter(|&(job, _, _)| job == id.job)
        .map(|(_, step, pid)| (step, pid))
        .collect();
    if let Some(&(_, pid)) = steps.iter().find(|&&(step, _)| Some(step) == id.step) {
        return Ok(pid);
    }
    match (id.step, steps.as_slice()) {
        (None, [(_, pid)]) => Ok(*pid),
        (None, [_, _, ..]) => Err(SlurmError::SeveralSteps { job: id.job, steps }.into()),
        (Some(step), [_, ..]) => Err(SlurmError::NoSuchStep {
            job: id.job,
            step,
            steps,
        }
        .into()),
        (_, []) => {
            let facts = crate::slurm::job_facts(id.job, timeout)?;
            let unknown = |v: Option<String>| v.unwrap_or_else(|| "?".into());
            Err(SlurmError::NotOnThisNode {
                job: id.job,
                state: unknown(facts.state),
                nodes: unknown(facts.nodes),
                alloc_node: unknown(facts.alloc_node),
                this_node: mpir_target::live::node::this_node()
                    .names()
                    .first()
                    .cloned()
                    .unwrap_or_else(|| "?".into()),
            }
            .into())
        }
    }
}

/// Runs every attached rank of `job` that the launcher stopped at the dynamic loader's entry
/// to its program's entry point (`AT_ENTRY`), where its libraries — and `MPIR_debug_gate` —
/// are mapped; it is left stopped there, held. The launcher's job-control stop is ended first
/// (`SIGCONT`, which the launcher's own wake-up would send). Returns a note per rank that
/// could not be (it stays held where it is).
pub(super) fn run_to_program(
    tracer: &mpir_target::live::tracer::Tracer,
    job: &crate::Job,
    timeout: Duration,
) -> Vec<Note> {
    let run = |pid: u32| -> Result<(), AcquireError> {
        let entry = super::entry_point(pid)?;
        super::release::run_to_breakpoint(tracer, pid, entry, timeout, "a task", || {
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGCONT,
            )
            .map_err(|e| AcquireError::Usage(format!("continue task {pid}: {e}")))
        })
    };
    job.attached_pids()
        .into_iter()
        .filter_map(|pid| {
            run(pid)
                .err()
                .map(|error| Note::NotRunToProgram { pid, error })
        })
        .collect()
}
