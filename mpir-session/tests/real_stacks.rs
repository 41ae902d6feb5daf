//! Sessions over real MPI jobs: stock Open MPI (with the types sidecar
//! `scripts/openmpi-types-sidecar.sh` builds) and the debugger-enabled MPICH. Each skips with a
//! reason when its stack, or the shared fixture `mpir-cli/tests/fixtures/deadlock.c`, is absent.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_session::{Engine, ReaderOptions, Session, SessionOptions};
use mpir_target::testkit::{assert_untouched, have, run, scratch, skip, wait_for};
use mpir_types::deadlock::Verdict;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A running job: the launcher and its ranks' pids (from the pid files the fixture writes);
/// killed on drop.
struct Job {
    launcher: Child,
    pids: Vec<u32>,
}

impl Drop for Job {
    fn drop(&mut self) {
        for &p in &self.pids {
            let _ = Command::new("kill")
                .args(["-KILL", &p.to_string()])
                .status();
        }
        mpir_target::testkit::stop_launcher(&mut self.launcher);
    }
}

/// Compiles the deadlock fixture with `mpicc` and runs MODE "ring" on 3 ranks.
fn ring(
    name: &str,
    mpicc: &Path,
    launcher: &[String],
) -> Option<(mpir_target::testkit::Scratch, Job)> {
    let src = root().join("mpir-cli/tests/fixtures/deadlock.c");
    if !src.is_file() {
        skip(&format!(
            "the fixture {} is not in this tree",
            src.display()
        ));
        return None;
    }
    let dir = scratch(name);
    let exe = dir.join("deadlock");
    run(Command::new(mpicc).args(["-g", "-o"]).arg(&exe).arg(&src))
        .unwrap_or_else(|e| panic!("{e}"));
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    let launcher = Command::new(&launcher[0])
        .args(&launcher[1..])
        .args(["-n", "3"])
        .arg(&exe)
        .arg("ring")
        .arg(&sub)
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut job = Job {
        launcher,
        pids: Vec::new(),
    };
    let file = |r: usize| sub.join(format!("{r}.pid"));
    assert!(
        wait_for(60, || (0..3).all(|r| file(r).is_file())),
        "the ranks did not write their pid files"
    );
    // The files are written just before the blocking call: let every rank get into it.
    std::thread::sleep(Duration::from_millis(700));
    job.pids = (0..3)
        .map(|r| {
            std::fs::read_to_string(file(r))
                .unwrap()
                .trim()
                .parse()
                .unwrap()
        })
        .collect();
    Some((dir, job))
}

fn ompi_sidecar() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIR_OMPI_TYPES_SIDECAR") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let out = Command::new(root().join("scripts/openmpi-types-sidecar.sh"))
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    String::from_utf8(out.stdout)
        .ok()?
        .lines()
        .last()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

/// The ring's verdict through a session: native engine, a deadlock of ranks 0-2 confirmed
/// over two samples, every rank covered and left running.
fn check_ring(job: &Job, options: SessionOptions, engine: &str) {
    let mut session = Session::attach(job.launcher.id(), options).unwrap();
    assert_eq!(session.job().unwrap().len(), 3);
    let found = session.deadlock(2, Duration::from_millis(200)).unwrap();
    let used = found.engine.as_ref().map(ToString::to_string);
    assert_eq!(used.as_deref(), Some(engine));
    assert!(found.coverage.is_complete(), "{:?}", found.coverage);
    let report = found.report.expect("a verdict");
    assert_eq!(report.verdict, Verdict::Deadlock, "{report}");
    let ranks: Vec<u64> = report.cycles.iter().flat_map(|c| c.ranks.clone()).collect();
    assert_eq!(ranks, [0, 1, 2], "{report}");
    for r in &found.releases {
        assert!(r.is_clean(), "{:?}", r.problems);
    }
    drop(session);
    for &p in &job.pids {
        assert_untouched(p);
    }
}

#[test]
fn a_ring_deadlock_on_open_mpi() {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return;
    }
    let Some(sidecar) = ompi_sidecar() else {
        skip("no Open MPI types sidecar");
        return;
    };
    let launcher: Vec<String> = ["orterun", "--allow-run-as-root", "--oversubscribe"]
        .map(String::from)
        .to_vec();
    let Some((_dir, job)) = ring("session-ompi", Path::new("mpicc.openmpi"), &launcher) else {
        return;
    };
    check_ring(
        &job,
        SessionOptions::default()
            .with_timeout(Duration::from_secs(30))
            .with_types_sidecar(&sidecar),
        "native Open MPI ob1",
    );
    // Without the types no native walker fits stock Open MPI, and the reason is typed: kept
    // as the fallback reason when the DLL is used, or with the DLL's own failure when it
    // cannot be either (its helper process is another crate's binary, built or not).
    let mut session = Session::attach(
        job.launcher.id(),
        SessionOptions::default().with_timeout(Duration::from_secs(30)),
    )
    .unwrap();
    let read = session.queues().unwrap();
    match &read.engine {
        Some(mpir_session::EngineUsed::Dll { .. }) => {
            assert!(read.fallback.is_some(), "{read:?}");
        }
        None => {
            for r in &read.ranks {
                assert!(
                    matches!(
                        r.queues,
                        Err(mpir_session::RankError::NoReader(
                            mpir_mqd::MqdError::NoEngine { .. }
                        ))
                    ),
                    "{r:?}"
                );
            }
        }
        other => panic!("a native engine without the types: {other:?}"),
    }
    drop(session);
    for &p in &job.pids {
        assert_untouched(p);
    }
}

#[test]
fn a_ring_deadlock_on_the_debugger_enabled_mpich() {
    let mpich = PathBuf::from(
        std::env::var("MPIR_MPICH_DEBUGINFO")
            .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into()),
    );
    if !mpich.join("bin/mpicc").is_file() {
        skip(&format!("no debugger-enabled MPICH at {}", mpich.display()));
        return;
    }
    let launcher = vec![mpich.join("bin/mpiexec.hydra").display().to_string()];
    let Some((_dir, job)) = ring("session-mpich", &mpich.join("bin/mpicc"), &launcher) else {
        return;
    };
    let native = SessionOptions::default()
        .with_timeout(Duration::from_secs(30))
        .with_reader_options(ReaderOptions::default().with_engine(Engine::Native));
    // Built --with-device=ch3:nemesis (/work/shared/notes/real-peers.md): ch3's queues.
    check_ring(&job, native, "native MPICH ch3");
}
