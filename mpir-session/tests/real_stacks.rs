//! Sessions over real MPI jobs: stock Open MPI (with the types sidecar
//! `scripts/openmpi-types-sidecar.sh` builds) and the debugger-enabled MPICH. Each skips with a
//! reason when its stack, or the shared fixture `mpir-cli/tests/fixtures/deadlock.c`, is absent.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_session::StackOptions;
use mpir_session::{Engine, ReaderOptions, Session, SessionOptions};
use mpir_target::testkit::{assert_untouched, have, run, scratch, skip, wait_for};
use mpir_types::deadlock::Verdict;
use mpir_types::stacks::{NodeId, StackTree};

mod oracle;

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

/// The ring's stacks: every rank under `main` and in `MPI_Recv` (the MPI's own name for it:
/// `MPI_Recv` or `PMPI_Recv`) right below it, the stacks the same in two samples; each rank's
/// main thread as gdb sees it; the same from gcore cores of the ranks; every rank left running
/// untraced.
fn check_stacks(dir: &Path, job: &Job, options: SessionOptions) {
    let mut session = Session::attach(job.launcher.id(), options).unwrap();
    let read = session
        .stacks(
            &StackOptions::default()
                .with_samples(2)
                .with_interval(Duration::from_millis(100)),
        )
        .unwrap();
    drop(session);
    oracle::assert_running_untraced(&job.pids);
    let last = read.last();
    assert!(last.unreached.is_empty(), "{:?}", last.unreached);
    assert_eq!(last.ranks.len(), 3);
    let text = read.tree().to_text();
    assert_ring_in_recv(read.tree());
    // Two samples were compared outside MPI: every rank of the ring stays blocked in MPI_Recv
    // (the frames the progress engine polls in below it are not compared), so none moved.
    assert_eq!(
        read.unmoved.as_ref().map(ToString::to_string).as_deref(),
        Some("0-2"),
        "{text}"
    );
    for s in &last.stops {
        assert!(s.stopped_for < Duration::from_secs(1), "{s:?}");
    }
    // The oracle must see the same instant: the ranks poll in the MPI's progress engine, so
    // their innermost frames change from one moment to the next. Frozen (SIGSTOP), the ranks
    // are read by pid, by gdb, and dumped by gcore; then let go (SIGCONT).
    let signal = |sig: &str| {
        for &p in &job.pids {
            run(Command::new("kill").args([sig, &p.to_string()])).unwrap();
        }
    };
    signal("-STOP");
    assert!(wait_for(10, || job.pids.iter().all(|&p| {
        mpir_target::testkit::status_field(p, "State:").starts_with('T')
    })));
    let mut frozen = Session::pids(job.pids.iter().copied(), SessionOptions::default()).unwrap();
    let frozen_read = frozen.stacks(&StackOptions::default());
    drop(frozen);
    let cores = have("gcore")
        .then(|| mpir_target::testkit::gcore(dir, &job.pids).unwrap_or_else(|e| panic!("{e}")));
    let gdb: Option<Vec<_>> = have("gdb").then(|| {
        job.pids
            .iter()
            .map(|&p| oracle::gdb_main_thread(p))
            .collect()
    });
    signal("-CONT");
    let frozen_read = frozen_read.unwrap();
    let frozen_last = frozen_read.last();
    assert!(
        frozen_last.unreached.is_empty(),
        "{:?}",
        frozen_last.unreached
    );
    assert_ring_in_recv(frozen_read.tree());
    match gdb {
        Some(gdb) => {
            for (pid, g) in job.pids.iter().zip(&gdb) {
                let r = frozen_last.ranks.iter().find(|r| r.pid == *pid).unwrap();
                let ours = oracle::main_thread_to_main(r);
                assert_eq!(ours.last().map(String::as_str), Some("main"), "{ours:?}");
                oracle::assert_same_as_gdb(*pid, &ours, g);
            }
        }
        None => skip("gdb is not installed"),
    }
    match cores {
        Some(cores) => {
            let mut from_cores = Session::cores(&cores, SessionOptions::default()).unwrap();
            let core_read = from_cores.stacks(&StackOptions::default()).unwrap();
            let sample = core_read.last();
            assert!(sample.unreached.is_empty(), "{:?}", sample.unreached);
            assert_ring_in_recv(core_read.tree());
            for r in &sample.ranks {
                let live = frozen_last.ranks.iter().find(|l| l.pid == r.pid).unwrap();
                assert_eq!(
                    oracle::main_thread_to_main(r),
                    oracle::main_thread_to_main(live)
                );
            }
            for c in &cores {
                let _ = std::fs::remove_file(c);
            }
        }
        None => skip("gcore is not installed"),
    }
    assert!(wait_for(10, || {
        std::panic::catch_unwind(|| oracle::assert_running_untraced(&job.pids)).is_ok()
    }));
    for &p in &job.pids {
        assert_untouched(p);
    }
}

/// All three ranks under `main`, and all three in the MPI's receive right below it.
fn assert_ring_in_recv(tree: &StackTree) {
    let text = tree.to_text();
    let main = tree
        .nodes()
        .find(|(_, n)| &*n.key().function == "main")
        .map(|(id, n)| (id, n.ranks().to_string()));
    let Some((main, ranks)) = main else {
        panic!("no main in\n{text}")
    };
    assert_eq!(ranks, "0-2", "{text}");
    let recv: Vec<NodeId> = tree
        .node(main)
        .unwrap()
        .children()
        .iter()
        .copied()
        .filter(|&c| tree.node(c).unwrap().key().function.ends_with("MPI_Recv"))
        .collect();
    assert_eq!(recv.len(), 1, "{text}");
    assert_eq!(
        tree.node(recv[0]).unwrap().ranks().to_string(),
        "0-2",
        "{text}"
    );
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
    let Some((dir, job)) = ring("session-ompi", Path::new("mpicc.openmpi"), &launcher) else {
        return;
    };
    check_stacks(
        &dir,
        &job,
        SessionOptions::default().with_timeout(Duration::from_secs(30)),
    );
    check_ring(
        &job,
        SessionOptions::default()
            .with_timeout(Duration::from_secs(30))
            .with_types_sidecar(&sidecar),
        "native Open MPI ob1",
    );
    // With no types given: the shipped layouts, proven on each rank, find the same ring.
    check_ring(
        &job,
        SessionOptions::default().with_timeout(Duration::from_secs(30)),
        "native Open MPI ob1",
    );
    // With no types at all (the shipped layouts off) no native walker fits stock Open MPI, and
    // the reason is typed: kept as the fallback reason when the DLL is used, or with the DLL's
    // own failure when it cannot be either (its helper process is another crate's binary,
    // built or not).
    let mut session = Session::attach(
        job.launcher.id(),
        SessionOptions::default()
            .with_timeout(Duration::from_secs(30))
            .without_shipped_layouts(),
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
    let Some((dir, job)) = ring("session-mpich", &mpich.join("bin/mpicc"), &launcher) else {
        return;
    };
    check_stacks(
        &dir,
        &job,
        SessionOptions::default().with_timeout(Duration::from_secs(30)),
    );
    let native = SessionOptions::default()
        .with_timeout(Duration::from_secs(30))
        .with_reader_options(ReaderOptions::default().with_engine(Engine::Native));
    // Built --with-device=ch3:nemesis (/work/shared/notes/real-peers.md): ch3's queues.
    check_ring(&job, native, "native MPICH ch3");
}
