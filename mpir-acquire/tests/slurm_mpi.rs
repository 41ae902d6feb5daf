//! Real MPI jobs under Slurm's `srun` (the cluster of `scripts/ci-slurm.sh`): Debian's Open MPI
//! 4.1.4 (`--mpi=pmix`) and the debugger-enabled MPICH (`--mpi=pmi2`), in launch and attach
//! modes, every table pid equal to the pid the rank printed itself and the job completing; and
//! Open MPI 4.1.4's `MPIR_debug_gate` protocol, which shows only under `srun`
//! (`ORTE_TEST_DEBUGGER_ATTACH=1`): the ranks wait in `MPI_Init` until each one's gate is
//! written, then run on.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::Duration;

use mpir_acquire::quirks::Launcher;
use mpir_acquire::testkit::{SlurmJobs, slurm_up};
use mpir_acquire::{AcquireOptions, GateRelease, Note, RankControl, live};
use support::*;

#[derive(Clone, Copy, Debug)]
enum Mpi {
    /// Debian's Open MPI 4.1.4, `srun --mpi=pmix`.
    OpenMpi,
    /// The debugger-enabled MPICH (`MPIR_MPICH_DEBUGINFO`), `srun --mpi=pmi2`.
    Mpich,
}

impl Mpi {
    fn mpicc(self) -> Option<PathBuf> {
        match self {
            Mpi::OpenMpi if have("mpicc.openmpi") => Some(PathBuf::from("mpicc.openmpi")),
            Mpi::OpenMpi => {
                skip("no Open MPI (mpicc.openmpi)");
                None
            }
            Mpi::Mpich => {
                let dir = PathBuf::from(
                    std::env::var("MPIR_MPICH_DEBUGINFO")
                        .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into()),
                );
                let cc = dir.join("bin/mpicc");
                if cc.is_file() {
                    Some(cc)
                } else {
                    skip(&format!("no debugger-enabled MPICH at {}", dir.display()));
                    None
                }
            }
        }
    }

    fn plugin(self) -> &'static str {
        match self {
            Mpi::OpenMpi => "--mpi=pmix",
            Mpi::Mpich => "--mpi=pmi2",
        }
    }

    fn program(self, dir: &Path) -> Option<PathBuf> {
        let cc = self.mpicc()?;
        let exe = dir.join("mpi_ranks");
        let built = run(Command::new(cc)
            .arg("-g")
            .arg(fixtures().join("mpi_ranks.c"))
            .arg("-o")
            .arg(&exe));
        built.map(|_| exe).map_err(|e| panic!("{e}")).ok()
    }
}

fn wait_exit(child: &mut Child) -> bool {
    let mut status = None;
    assert!(
        wait_for(90, || {
            status = child.try_wait().ok().flatten();
            status.is_some()
        }),
        "srun did not finish"
    );
    status.is_some_and(|s| s.success())
}

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(60))
}

/// `MPIR_proctable_size` of `srun` `pid`, once it can be read (not while `srun` is still
/// starting).
fn table_size(pid: u32) -> Option<i64> {
    use mpir_target::{MemoryExt, SymbolLookup};
    let t = mpir_target::live::LiveTarget::open(pid, Default::default()).ok()?;
    let sym = t.symbol("MPIR_proctable_size").ok().flatten()?;
    t.read_c_int(sym.address, "MPIR_proctable_size").ok()
}

fn table(job: &mpir_acquire::Job) -> Vec<(u64, i64)> {
    job.ranks().map(|r| (r.rank, r.pid)).collect()
}

fn launch(mpi: Mpi, hold: bool) {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-mpi-launch");
    let Some(program) = mpi.program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new(&format!("{mpi:?}-launch-{hold}"));
    let cmd = jobs.srun(&[mpi.plugin(), "-n", "4", program.to_str().unwrap(), "1"]);
    let mut acquired = live::launch(cmd, options().with_hold(hold)).unwrap();
    let mut srun = acquired.take_child().unwrap();
    jobs.track(&srun);
    let out = Output::of(&mut srun);
    let job = acquired.job().clone();
    assert_eq!(job.starter.launcher, Some(Launcher::Slurm));
    assert_eq!(job.attached_pids().len(), 4, "{:?}", job.control);
    if hold {
        std::thread::sleep(Duration::from_millis(1000));
        assert!(printed_ranks(&out.text()).is_empty(), "held ranks ran");
        acquired.release().unwrap();
    }
    drop(acquired);
    assert!(wait_exit(&mut srun), "the job failed:\n{}", out.text());
    assert!(wait_for(10, || out.text().matches(" done").count() == 4));
    assert_eq!(printed_ranks(&out.text()), table(&job), "{}", out.text());
}

fn attach(mpi: Mpi) {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-mpi-attach");
    let Some(program) = mpi.program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new(&format!("{mpi:?}-attach"));
    let mut srun = jobs
        .srun(&[mpi.plugin(), "-n", "4", program.to_str().unwrap(), "4"])
        .spawn()
        .unwrap();
    jobs.track(&srun);
    let out = Output::of(&mut srun);
    assert!(
        wait_for(30, || printed_ranks(&out.text()).len() == 4),
        "{}",
        out.text()
    );
    let acquired = live::attach(srun.id(), options()).unwrap();
    let job = acquired.job().clone();
    drop(acquired);
    assert_eq!(table(&job), printed_ranks(&out.text()));
    assert!(job.starter.job_id.is_some());
    for (_, pid) in table(&job) {
        assert_untouched(pid as u32);
    }
    assert!(wait_exit(&mut srun), "the job failed:\n{}", out.text());
    assert_eq!(out.text().matches(" done").count(), 4);
}

#[test]
fn open_mpi_under_srun_launch_held_and_released() {
    launch(Mpi::OpenMpi, true);
}

#[test]
fn open_mpi_under_srun_launch() {
    launch(Mpi::OpenMpi, false);
}

#[test]
fn open_mpi_under_srun_attach() {
    attach(Mpi::OpenMpi);
}

#[test]
fn mpich_under_srun_pmi2_launch_held_and_released() {
    launch(Mpi::Mpich, true);
}

#[test]
fn mpich_under_srun_pmi2_attach() {
    attach(Mpi::Mpich);
}

/// `ORTE_TEST_DEBUGGER_ATTACH=1`: Open MPI 4.1.4's ranks poll `MPIR_debug_gate` in `MPI_Init`
/// (`ompi_rte_wait_for_debugger`). They stay there until a tool writes each one's gate.
#[test]
fn open_mpi_debug_gate_under_srun_is_written_in_every_rank_and_the_ranks_run_on() {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-gate");
    let Some(program) = Mpi::OpenMpi.program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new("gate");
    let mut cmd = jobs.srun(&["--mpi=pmix", "-n", "3", program.to_str().unwrap(), "1"]);
    cmd.env("ORTE_TEST_DEBUGGER_ATTACH", "1");
    let mut srun = cmd.spawn().unwrap();
    jobs.track(&srun);
    let out = Output::of(&mut srun);
    let srun_pid = srun.id();
    assert!(
        wait_for(30, || table_size(srun_pid) == Some(3)),
        "srun never filled its table"
    );
    // Waiting at the gate: nothing printed, however long.
    std::thread::sleep(Duration::from_millis(1500));
    assert!(printed_ranks(&out.text()).is_empty(), "{}", out.text());
    let gate = options().with_gate(GateRelease::Always);
    let mut acquired = live::attach(srun_pid, gate).unwrap();
    let job = acquired.job().clone();
    let ranks = job.attached_pids();
    assert_eq!(ranks.len(), 3, "{:?}", job.control);
    for r in job.ranks() {
        assert!(matches!(job.control(r.rank), RankControl::Attached { .. }));
    }
    let problems = acquired.release().unwrap();
    assert!(
        !problems
            .iter()
            .any(|n| matches!(n, Note::NoGate { .. } | Note::GateFailed { .. })),
        "{problems:?}"
    );
    drop(acquired);
    for &pid in &ranks {
        assert_untouched(pid);
    }
    assert!(wait_exit(&mut srun), "the job failed:\n{}", out.text());
    assert_eq!(printed_ranks(&out.text()), table(&job), "{}", out.text());
    assert_eq!(out.text().matches(" done").count(), 3);
}

/// Launch mode with `ORTE_TEST_DEBUGGER_ATTACH=1`: srun stops the ranks before their libraries
/// are loaded; to write each one's gate they are run to their program's entry point (held
/// there), and once released they pass `MPI_Init` and complete.
fn launch_with_gates(hold: bool) {
    if !slurm_up() {
        return;
    }
    let dir = scratch("slurm-gate-launch");
    let Some(program) = Mpi::OpenMpi.program(&dir) else {
        return;
    };
    let mut jobs = SlurmJobs::new(&format!("gate-launch-{hold}"));
    let mut cmd = jobs.srun(&["--mpi=pmix", "-n", "3", program.to_str().unwrap(), "1"]);
    cmd.env("ORTE_TEST_DEBUGGER_ATTACH", "1");
    let options = options().with_gate(GateRelease::Always).with_hold(hold);
    let mut acquired = live::launch(cmd, options).unwrap();
    let mut srun = acquired.take_child().unwrap();
    jobs.track(&srun);
    let out = Output::of(&mut srun);
    let job = acquired.job().clone();
    assert_eq!(job.attached_pids().len(), 3, "{:?}", job.control);
    assert!(
        !job.notes
            .iter()
            .any(|n| matches!(n, Note::NotRunToProgram { .. })),
        "{:?}",
        job.notes
    );
    let problems = if hold {
        std::thread::sleep(Duration::from_millis(1000));
        assert!(printed_ranks(&out.text()).is_empty(), "held ranks ran");
        acquired.release().unwrap()
    } else {
        job.notes.clone()
    };
    assert!(
        !problems
            .iter()
            .any(|n| matches!(n, Note::NoGate { .. } | Note::GateFailed { .. })),
        "{problems:?}"
    );
    drop(acquired);
    assert!(wait_exit(&mut srun), "the job failed:\n{}", out.text());
    assert_eq!(printed_ranks(&out.text()), table(&job), "{}", out.text());
    assert_eq!(out.text().matches(" done").count(), 3);
}

#[test]
fn open_mpi_debug_gate_under_srun_launch_held_then_released() {
    launch_with_gates(true);
}

#[test]
fn open_mpi_debug_gate_under_srun_launch() {
    launch_with_gates(false);
}
