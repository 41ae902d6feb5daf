//! Acquisition through Slurm's `srun` (Debian slurm-wlm 22.05) on the single-node cluster
//! `scripts/ci-slurm.sh` starts: attach mode (the parent `srun`, not its shepherd; the step
//! ids; argv[0] as typed, proven from `/proc`), launch mode (the tasks taken while `srun` sits
//! in `MPIR_Breakpoint`, held, released, the step completing), `srun` killed while its tasks
//! are held (no task left stopped), and steps named by Slurm id. Every table pid must be the
//! pid the task printed itself; every job a test starts is cancelled by its guard.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use mpir_acquire::quirks::{Launcher, QuirkFact};
use mpir_acquire::slurm::{SlurmError, StepId};
use mpir_acquire::testkit::{SlurmJobs, slurm_up};
use mpir_acquire::{AcquireError, AcquireOptions, Note, RankControl, live};
use support::*;

impl Output {
    /// (rank, pid, job, step) of every "rank R pid P job J step S" line, sorted.
    fn tasks(&self) -> Vec<(u64, i64, u64, u64)> {
        let mut v: Vec<_> = self
            .text()
            .lines()
            .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                ["rank", r, "pid", p, "job", j, "step", s] => Some((
                    r.parse().ok()?,
                    p.parse().ok()?,
                    j.parse().ok()?,
                    s.parse().ok()?,
                )),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    }

    fn wait_tasks(&self, n: usize) -> Vec<(u64, i64, u64, u64)> {
        assert!(
            wait_for(30, || self.tasks().len() == n),
            "the step's {n} tasks did not all start:\n{}",
            self.text()
        );
        self.tasks()
    }
}

fn task_program(dir: &Path) -> Option<PathBuf> {
    build(dir, "slurm_task", "slurm_task", &["-g"])
}

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(60))
}

/// Waits (bounded) for the `srun` the test spawned to exit; its success.
fn wait_exit(child: &mut Child) -> bool {
    let mut status = None;
    assert!(
        wait_for(60, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        }),
        "srun (pid {}) did not finish",
        child.id()
    );
    status.is_some_and(|s| s.success())
}

/// The shepherd child of `srun` `pid` (same executable and command line).
fn shepherd_of(pid: u32) -> Option<u32> {
    let mut found = None;
    wait_for(10, || {
        found = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|c| c.parse::<u32>().ok())
            .find(|&c| live::shepherd_parent(c) == Some(pid));
        found.is_some()
    });
    found
}

#[test]
fn attach_reads_the_parent_srun_with_its_step_ids_and_proves_bare_names() {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-attach");
    let Some(program) = task_program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new("attach");
    // A bare name, found through PATH, as a user types `srun -n 4 app`.
    let path = format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = jobs.srun(&["-n", "4", "slurm_task", "30"]);
    cmd.env("PATH", path);
    let mut srun = cmd.spawn().unwrap();
    jobs.track(&srun);
    let out = Output::of(&mut srun);
    let printed = out.wait_tasks(4);
    let parent = srun.id();

    // The shepherd has srun's command line, but not the job: refused, naming the parent.
    let shepherd = shepherd_of(parent).expect("srun forks a shepherd child");
    match live::attach(shepherd, options()) {
        Err(AcquireError::NotTheStarter { pid, starter, .. }) => {
            assert_eq!((pid, starter), (shepherd, parent));
        }
        other => panic!("attach to the shepherd: {other:?}"),
    }
    assert_untouched(shepherd);

    let acquired = live::attach(parent, options()).unwrap();
    let job = acquired.job();
    assert_eq!(job.starter.launcher, Some(Launcher::Slurm));
    assert!(job.notes.contains(&Note::Quirk(QuirkFact::SlurmStepIds)));
    let (_, _, job_id, step_id) = printed[0];
    assert_eq!(job.starter.job_id, Some(job_id), "totalview_jobid");
    assert_eq!(job.starter.step_id, Some(step_id), "totalview_stepid");
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    let pids: Vec<(u64, i64)> = printed.iter().map(|&(r, p, _, _)| (r, p)).collect();
    assert_eq!(table, pids, "every pid is the one the task printed itself");
    for r in job.ranks() {
        assert_eq!(r.executable, Some("slurm_task"), "argv[0] as typed");
        assert_eq!(job.control(r.rank), &RankControl::NotAttached);
    }
    // Normalised: each local task proven from /proc, named by the file it runs.
    for n in live::normalize(job) {
        assert!(n.local_host);
        assert_eq!(n.executable.as_deref(), Some(program.as_path()));
    }
    drop(acquired);
    for &(_, pid, _, _) in &printed {
        assert_untouched(pid as u32);
    }
    assert_untouched(parent);
    // Named by its Slurm id, the step's srun is the parent, never the shepherd.
    let debug = Default::default();
    assert_eq!(
        live::find_srun(StepId::new(job_id, None), &debug, Duration::from_secs(10)).unwrap(),
        parent
    );
    assert_eq!(
        live::find_srun(
            StepId::new(job_id, Some(step_id)),
            &debug,
            Duration::from_secs(10)
        )
        .unwrap(),
        parent
    );
    match live::find_srun(
        StepId::new(job_id, Some(step_id + 5)),
        &debug,
        Duration::from_secs(10),
    ) {
        Err(AcquireError::Slurm(SlurmError::NoSuchStep { steps, .. })) => {
            assert_eq!(steps, vec![(step_id, parent)]);
        }
        other => panic!("{other:?}"),
    }
}

/// Launch mode: with `hold`, the tasks are attached before their `main` (nothing printed), stay
/// so while held, and run to completion once released; without, the step just completes.
fn launch(hold: bool) {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-launch");
    let Some(program) = task_program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new(if hold { "launch-hold" } else { "launch" });
    let prog = program.to_str().unwrap();
    let cmd = jobs.srun(&["-n", "4", prog, "1"]);
    let mut acquired = live::launch(cmd, options().with_hold(hold)).unwrap();
    let mut srun = acquired.take_child().unwrap();
    jobs.track(&srun);
    let out = Output::of(&mut srun);
    let job = acquired.job().clone();
    assert_eq!(job.len(), 4);
    assert_eq!(job.starter.launcher, Some(Launcher::Slurm));
    assert!(
        job.notes
            .contains(&Note::Quirk(QuirkFact::SlurmBreakpointWakesTasks))
    );
    assert!(job.starter.job_id.is_some() && job.starter.step_id.is_some());
    let attached = job.attached_pids();
    assert_eq!(attached.len(), 4, "{:?}", job.control);
    if hold {
        assert!(acquired.is_held());
        std::thread::sleep(Duration::from_millis(1500));
        assert_eq!(out.tasks(), [], "held tasks ran: {}", out.text());
        for &pid in &attached {
            let state = status_field(pid, "State:");
            assert!(
                state.starts_with('t') || state.starts_with('T'),
                "{pid}: {state}"
            );
        }
        let notes = acquired.release().unwrap();
        assert!(
            !notes
                .iter()
                .any(|n| matches!(n, Note::RankContinued { .. })),
            "srun woke its own tasks: {notes:?}"
        );
    }
    drop(acquired);
    assert!(wait_exit(&mut srun), "the step failed:\n{}", out.text());
    let printed: Vec<(u64, i64)> = out.tasks().iter().map(|&(r, p, _, _)| (r, p)).collect();
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(table, printed, "{}", out.text());
    assert!(wait_for(10, || out.text().matches(" done").count() == 4));
    for (_, _, j, s) in out.tasks() {
        assert_eq!(
            (Some(j), Some(s)),
            (job.starter.job_id, job.starter.step_id)
        );
    }
}

#[test]
fn launch_takes_the_tasks_in_mpir_breakpoint_and_the_step_completes() {
    launch(false);
}

#[test]
fn launch_holds_the_tasks_until_release_then_the_step_completes() {
    launch(true);
}

#[test]
fn tasks_handed_over_stay_stopped_until_continued_then_the_step_completes() {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-hand-over");
    let Some(program) = task_program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new("hand-over");
    let cmd = jobs.srun(&["-n", "2", program.to_str().unwrap(), "1"]);
    let mut acquired = live::launch(cmd, options().with_hold(true)).unwrap();
    let mut srun = acquired.take_child().unwrap();
    jobs.track(&srun);
    let out = Output::of(&mut srun);
    let stopped = acquired.hand_over().unwrap();
    assert_eq!(stopped.len(), 2);
    drop(acquired);
    // srun runs on without waking them: they stay in their stop, untraced, printing nothing.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(out.tasks(), [], "{}", out.text());
    for &pid in &stopped {
        assert!(status_field(pid, "State:").starts_with('T'), "{pid}");
        assert_eq!(status_field(pid, "TracerPid:"), "0");
    }
    assert!(
        srun.try_wait().unwrap().is_none(),
        "srun waits for its step"
    );
    for &pid in &stopped {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGCONT,
        )
        .unwrap();
    }
    assert!(wait_exit(&mut srun), "the step failed:\n{}", out.text());
    assert!(wait_for(10, || out.text().matches(" done").count() == 2));
}

#[test]
fn srun_killed_while_its_tasks_are_held_leaves_no_task_stopped() {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-killed");
    let Some(program) = task_program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new("killed");
    let cmd = jobs.srun(&["-n", "3", program.to_str().unwrap(), "1"]);
    let mut acquired = live::launch(cmd, options().with_hold(true)).unwrap();
    let mut srun = acquired.take_child().unwrap();
    jobs.track(&srun);
    let tasks = acquired.job().attached_pids();
    assert_eq!(tasks.len(), 3);
    srun.kill().unwrap();
    let _ = srun.wait();
    // The release copes (srun is gone: its MPIR_being_debugged cannot be reset, which it says).
    let _ = acquired.release();
    let notes = acquired.job().notes.clone();
    let continued: Vec<u32> = notes
        .iter()
        .filter_map(|n| match n {
            Note::RankContinued { pid, .. } => Some(*pid),
            _ => None,
        })
        .collect();
    for &pid in &tasks {
        assert!(
            wait_for(10, || !status_field(pid, "State:").starts_with('T')),
            "task {pid} left stopped: {}; notes {notes:?}",
            status_field(pid, "State:")
        );
        assert_untouched(pid);
    }
    // The tasks that were still there when srun died were continued by us (srun's wake-up
    // never came); slurmstepd may have ended some meanwhile.
    assert!(continued.iter().all(|p| tasks.contains(p)), "{continued:?}");
}

#[test]
fn slurm_ids_of_jobs_missing_elsewhere_or_with_several_steps_are_clear_errors() {
    if !slurm_up() {
        return;
    }
    let debug = Default::default();
    let t = Duration::from_secs(10);
    // No such job.
    match live::find_srun(StepId::new(4_000_000_000, None), &debug, t) {
        Err(AcquireError::Slurm(SlurmError::NoSuchJob { job, .. })) => {
            assert_eq!(job, 4_000_000_000);
        }
        other => panic!("{other:?}"),
    }
    let jobs = SlurmJobs::new("ids");
    // A job whose srun is not here (a batch job with no step: its srun, if any, would run where
    // it was started).
    let batch = jobs.sbatch(&[], "sleep 60");
    assert!(wait_for(20, || matches!(
        mpir_acquire::slurm::job_facts(batch, t).map(|f| f.state),
        Ok(Some(s)) if s == "RUNNING"
    )));
    let err = live::find_srun(StepId::new(batch, None), &debug, t).unwrap_err();
    match &err {
        AcquireError::Slurm(SlurmError::NotOnThisNode { job, state, .. }) => {
            assert_eq!((*job, state.as_str()), (batch, "RUNNING"));
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string().contains(&format!("Slurm job {batch}")),
        "{err}"
    );
    // Two steps of one job here, none named: which one?
    let two = jobs.sbatch(
        &[],
        "srun --overlap -n1 sleep 60 & srun --overlap -n1 sleep 60 & wait",
    );
    let mut steps = Vec::new();
    assert!(
        wait_for(30, || {
            steps = live::srun_steps(&debug)
                .into_iter()
                .filter(|&(j, _, _)| j == two)
                .map(|(_, s, pid)| (s, pid))
                .collect();
            steps.len() == 2
        }),
        "{steps:?}"
    );
    match live::find_srun(StepId::new(two, None), &debug, t) {
        Err(AcquireError::Slurm(SlurmError::SeveralSteps { job, steps: found })) => {
            assert_eq!((job, &found), (two, &steps));
        }
        other => panic!("{other:?}"),
    }
    for &(s, pid) in &steps {
        assert_eq!(
            live::find_srun(StepId::new(two, Some(s)), &debug, t).unwrap(),
            pid
        );
    }
}
