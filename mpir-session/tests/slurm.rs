//! Sessions over real MPI jobs started by Slurm's `srun` (the single-node cluster of
//! `scripts/ci-slurm.sh`): the ring deadlock of `mpir-cli/tests/fixtures/deadlock.c` under
//! Debian's Open MPI 4.1.4 (`srun --mpi=pmix`, native ob1 walker with the types sidecar) and
//! under the debugger-enabled MPICH (`srun --mpi=pmi2`, native ch3 walker): the job found by
//! `srun`'s pid and by its Slurm job id, every rank's queues read (each waits for a receive
//! from the next rank), the ring confirmed as a deadlock, every rank left running. Each test
//! cancels its Slurm job whatever happens.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_acquire::slurm::{SlurmError, StepId};
use mpir_acquire::testkit::{SlurmJobs, slurm_up};
use mpir_acquire::{AcquireError, quirks::Launcher};
use mpir_session::{Engine, ReaderOptions, Session, SessionError, SessionOptions};
use mpir_target::testkit::{assert_untouched, have, run, scratch, skip, wait_for};
use mpir_types::deadlock::Verdict;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A ring of blocking receives on 3 ranks under `srun` (`plugin`: `--mpi=…`), compiled with
/// `mpicc`: the guard (cancels the job), `srun`'s pid and the ranks' pids.
fn ring(jobs: &mut SlurmJobs, dir: &Path, mpicc: &Path, plugin: &str) -> Option<(u32, Vec<u32>)> {
    let src = root().join("mpir-cli/tests/fixtures/deadlock.c");
    if !src.is_file() {
        skip(&format!(
            "the fixture {} is not in this tree",
            src.display()
        ));
        return None;
    }
    let exe = dir.join("deadlock");
    run(Command::new(mpicc).args(["-g", "-o"]).arg(&exe).arg(&src))
        .unwrap_or_else(|e| panic!("{e}"));
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    let mut cmd = jobs.srun(&[plugin, "-n", "3"]);
    cmd.arg(&exe).arg("ring").arg(&sub).stdout(Stdio::null());
    let srun = cmd.spawn().unwrap();
    let srun_pid = srun.id();
    jobs.adopt(srun);
    let file = |r: usize| sub.join(format!("{r}.pid"));
    assert!(
        wait_for(60, || (0..3).all(|r| file(r).is_file())),
        "the ranks did not write their pid files"
    );
    // The files are written just before the blocking call: let every rank get into it.
    std::thread::sleep(Duration::from_millis(700));
    let pids = (0..3)
        .map(|r| {
            std::fs::read_to_string(file(r))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    Some((srun_pid, pids))
}

/// Queues and the deadlock of the ring through `session`, with engine `engine`.
fn check_ring(mut session: Session, pids: &[u32], engine: &str) {
    let job = session.job().unwrap().clone();
    assert_eq!(job.starter.launcher, Some(Launcher::Slurm));
    let table: Vec<u32> = job.ranks().map(|r| r.pid as u32).collect();
    assert_eq!(table, pids, "the table's pids are the ones the ranks wrote");
    let read = session.queues().unwrap();
    assert_eq!(
        read.engine.as_ref().map(ToString::to_string).as_deref(),
        Some(engine)
    );
    assert!(read.is_complete(), "{:?}", read.ranks);
    assert_eq!(read.ranks.len(), 3);
    let found = session.deadlock(2, Duration::from_millis(200)).unwrap();
    assert!(found.coverage.is_complete(), "{:?}", found.coverage);
    let report = found.report.expect("a verdict");
    assert_eq!(report.verdict, Verdict::Deadlock, "{report}");
    let ranks: Vec<u64> = report.cycles.iter().flat_map(|c| c.ranks.clone()).collect();
    assert_eq!(ranks, [0, 1, 2], "{report}");
    drop(session);
    for &p in pids {
        assert_untouched(p);
    }
}

fn options() -> SessionOptions {
    SessionOptions::default().with_timeout(Duration::from_secs(30))
}

#[test]
fn a_ring_deadlock_of_open_mpi_under_srun() {
    if !slurm_up() {
        return;
    }
    if !have("mpicc.openmpi") {
        skip("needs Open MPI (mpicc.openmpi)");
        return;
    }
    let Some(sidecar) = std::env::var_os("MPIR_OMPI_TYPES_SIDECAR")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    else {
        skip("no Open MPI types sidecar (MPIR_OMPI_TYPES_SIDECAR)");
        return;
    };
    let dir = scratch("slurm-ompi-ring");
    let mut jobs = SlurmJobs::new("ompi-ring");
    let Some((srun, pids)) = ring(&mut jobs, &dir, Path::new("mpicc.openmpi"), "--mpi=pmix") else {
        return;
    };
    let session = Session::attach(srun, options().with_types_sidecar(&sidecar)).unwrap();
    check_ring(session, &pids, "native Open MPI ob1");
}

#[test]
fn a_ring_deadlock_of_the_debugger_enabled_mpich_under_srun_named_by_slurm_job_id() {
    if !slurm_up() {
        return;
    }
    let mpich = PathBuf::from(
        std::env::var("MPIR_MPICH_DEBUGINFO")
            .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into()),
    );
    if !mpich.join("bin/mpicc").is_file() {
        skip(&format!("no debugger-enabled MPICH at {}", mpich.display()));
        return;
    }
    let dir = scratch("slurm-mpich-ring");
    let mut jobs = SlurmJobs::new("mpich-ring");
    let Some((srun, pids)) = ring(&mut jobs, &dir, &mpich.join("bin/mpicc"), "--mpi=pmi2") else {
        return;
    };
    // The job id as srun holds it: named by it, the session finds the same srun.
    let job_id = Session::attach(srun, options())
        .unwrap()
        .job()
        .unwrap()
        .starter
        .job_id
        .expect("srun names its job");
    let native =
        options().with_reader_options(ReaderOptions::default().with_engine(Engine::Native));
    let session = Session::attach_slurm(StepId::new(job_id, None), native).unwrap();
    assert_eq!(session.job().unwrap().starter.pid, srun);
    check_ring(session, &pids, "native MPICH ch3");
}

#[test]
fn a_slurm_job_that_does_not_exist_is_a_clear_error() {
    if !slurm_up() {
        return;
    }
    let step = StepId::new(4_000_000_001, Some(0));
    let err = Session::attach_slurm(step, options())
        .expect_err("no session on a job that does not exist");
    assert_eq!(
        err.to_string(),
        "finding the srun of Slurm job 4000000001.0"
    );
    let SessionError::SlurmStep {
        step: named,
        source,
    } = &err
    else {
        panic!("{err:?}");
    };
    assert_eq!(*named, step);
    match &**source {
        AcquireError::Slurm(SlurmError::NoSuchJob { job, .. }) => assert_eq!(*job, 4_000_000_001),
        other => panic!("{other:?}"),
    }
}
