//! The PML proof on live Open MPI ranks (`fixtures/ompi_ring.c`: three ranks, each blocked in
//! `MPI_Recv` from its left neighbour, tag 42, 4 ints, nobody sending). Under the UCX PML
//! (`--mca pml ucx --mca pml_ucx_tls any --mca pml_ucx_devices any`: without the last two, 4.1
//! enables UCX only on InfiniBand) ob1's structures exist and stay empty, so both Open MPI
//! engines — the native ob1 walker and Open MPI's DLL — must refuse every rank
//! ([`MqdError::Blind`]) instead of reporting nothing pending; under the default PML (ob1) the
//! proof passes and both read the three receives. Open MPI 5 (the wheel of `MPIR_OMPI5_PREFIX`)
//! is read the same under its default PML. Both are stock builds without debug information:
//! their types come from the shipped layout sets. Skipped without the MPI or the UCX PML;
//! failed under `MPIR_REQUIRE_PEERS=1`.

mod common;

use common::Job;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;

use mpir_mqd::{
    BlindReason, Engine, EngineUsed, HelperOptions, MqdError, QueueReader, ReadRank, ReaderOptions,
    native::{self, ProcessInfo, WalkOptions, WalkerKind},
};
use mpir_target::Target;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit;
use mpir_types::mqd::{OpStatus, Peer};

const RANKS: usize = 3;
const UCX: [&str; 6] = ["--mca", "pml", "ucx", "--mca", "pml_ucx_tls", "any"];
const UCX_DEVICES: [&str; 3] = ["--mca", "pml_ucx_devices", "any"];

fn options(engine: Engine) -> ReaderOptions {
    ReaderOptions::default()
        .with_engine(engine)
        .with_helper(HelperOptions::default().with_program(env!("CARGO_BIN_EXE_mpir-mqd-host")))
}

fn ring_source() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ompi_ring.c")
}

/// Open MPI 4.1 (Debian's `mpicc.openmpi`, `orterun`), or a skip. Stock: no debug
/// information, no types sidecar; the readers prove a shipped layout set on each rank.
fn open_mpi_4() -> Option<()> {
    if !testkit::have("mpicc.openmpi") || !testkit::have("orterun") {
        testkit::skip("needs Open MPI (mpicc.openmpi, orterun)");
        return None;
    }
    Some(())
}

/// Starts the ring with `orterun` and `mca` options; the job once every rank wrote its pid.
fn start_ring(dir: &Path, app: &Path, mca: &[&str]) -> Job {
    let mut launcher = Command::new("orterun");
    launcher
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "3"])
        .args(mca)
        .arg(app)
        .arg(dir)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Job::start(&mut launcher, dir, RANKS)
}

fn build_ring(name: &str) -> (testkit::Scratch, PathBuf) {
    let dir = testkit::scratch(name);
    let app = dir.join("ring");
    testkit::run(
        Command::new("mpicc.openmpi")
            .args(["-g", "-o"])
            .arg(&app)
            .arg(ring_source()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (dir, app)
}

/// A rank as it is: a stock process, its types to be proven by the reader.
fn open_rank(pid: u32) -> Rc<dyn Target> {
    Rc::new(LiveTarget::open(pid, DebugOptions::default()).expect("open rank"))
}

/// A rank with the shipped set proven on it, for the walker driven directly.
fn typed_rank(pid: u32, rank: Option<u64>) -> Rc<dyn Target> {
    common::with_shipped(
        LiveTarget::open(pid, DebugOptions::default()).expect("open rank"),
        rank,
    )
}

/// Reads `rank` until its world receive from the left neighbour shows (the rank writes its pid
/// just before entering `MPI_Recv`), for 10 s at most, and checks it: tag 42, 16 bytes,
/// pending — the fixture's receive.
fn assert_ring_receive(reader: &mut QueueReader, rank: usize, pid: u32, app: &Path) {
    let left = (rank + RANKS - 1) % RANKS;
    let mut last = None;
    let found = testkit::wait_for(10, || {
        let q = reader
            .read(&ReadRank::new(Some(rank as u64), app), open_rank(pid))
            .unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        let world = q
            .communicators
            .iter()
            .find(|c| c.communicator.name == "MPI_COMM_WORLD")
            .cloned();
        last = Some(q);
        world.is_some_and(|w| !w.receives.operations().is_empty())
    });
    let q = last.expect("read at least once");
    assert!(found, "rank {rank}: no pending receive in {q:#?}");
    let world = common::comm(&q.communicators, "MPI_COMM_WORLD");
    let recvs = world.receives.operations();
    assert_eq!(recvs.len(), 1, "rank {rank}: {world:#?}");
    assert_eq!(recvs[0].tag, Some(42));
    assert_eq!(recvs[0].peer_local, Peer::Rank(left as u64));
    assert_eq!(recvs[0].length.bytes, Some(16), "4 ints");
    assert_eq!(recvs[0].status, OpStatus::Pending);
}

fn assert_blind(e: &MqdError, rank: usize, engine: &str) {
    let line = e.to_string();
    match e {
        MqdError::Blind { why, .. } => assert!(
            matches!(**why, BlindReason::Ob1NotLoaded | BlindReason::NotOb1),
            "rank {rank} ({engine}): {why:?}"
        ),
        other => panic!("rank {rank} ({engine}): not Blind: {other:?}"),
    }
    assert!(
        line.contains("ob1") && line.contains("PML"),
        "rank {rank} ({engine}): {line}"
    );
    eprintln!("rank {rank} ({engine}): {line}");
}

#[test]
fn open_mpi_engines_refuse_ranks_whose_pml_is_ucx() {
    let Some(()) = open_mpi_4() else { return };
    if !testkit::run(Command::new("ompi_info").arg("--parsable"))
        .unwrap_or_default()
        .contains("mca:pml:ucx:")
    {
        testkit::skip("this Open MPI has no UCX PML (ompi_info lists no mca:pml:ucx)");
        return;
    }
    let (dir, app) = build_ring("mqd-pml-ucx");
    let mca: Vec<&str> = UCX.iter().chain(&UCX_DEVICES).copied().collect();
    let job = start_ring(&dir, &app, &mca);
    let probe = typed_rank(job.pids[0], Some(0));

    // What the proof prevents: the ob1 walker run anyway finds ob1's structures, and they are
    // empty although every rank waits in MPI_Recv (the false all-clear of issue 29).
    let walker = native::detect(&*probe, &WalkOptions::default()).expect("detect ob1's layout");
    for (rank, &pid) in job.pids.iter().enumerate() {
        let walk = walker
            .queues(
                &*typed_rank(pid, Some(rank as u64)),
                &ProcessInfo::with_global_rank(rank as u64),
            )
            .expect("the unproven walk reads");
        let world = common::comm(&walk.communicators, "MPI_COMM_WORLD");
        assert!(
            world.receives.operations().is_empty(),
            "rank {rank}: {world:#?}"
        );
    }

    for (engine, name) in [
        (Engine::Native, "native"),
        (Engine::Dll, "dll"),
        (Engine::Auto, "auto"),
    ] {
        let mut reader = QueueReader::open(&*probe, options(engine))
            .unwrap_or_else(|e| panic!("open the {name} engine: {e}"));
        if engine == Engine::Native {
            assert_eq!(reader.engine(), EngineUsed::Native(WalkerKind::OpenMpiOb1));
        }
        for (rank, &pid) in job.pids.iter().enumerate() {
            let e = reader
                .read(&ReadRank::new(Some(rank as u64), &app), open_rank(pid))
                .expect_err("a UCX rank must not be read as ob1");
            assert_blind(&e, rank, name);
        }
        reader.finish();
    }
    for &pid in &job.pids {
        testkit::assert_untouched(pid);
    }
}

#[test]
fn open_mpi_engines_read_the_ring_under_ob1_after_the_proof() {
    let Some(()) = open_mpi_4() else { return };
    let (dir, app) = build_ring("mqd-pml-ob1");
    let job = start_ring(&dir, &app, &[]);
    let probe = open_rank(job.pids[0]);
    for engine in [Engine::Native, Engine::Dll] {
        let mut reader = QueueReader::open(&*probe, options(engine)).expect("open the engine");
        for (rank, &pid) in job.pids.iter().enumerate() {
            assert_ring_receive(&mut reader, rank, pid, &app);
        }
        reader.finish();
    }
    for &pid in &job.pids {
        testkit::assert_untouched(pid);
    }
}

#[test]
fn open_mpi_5_passes_the_proof_under_ob1_and_is_refused_under_ucx() {
    let Some(wheel) = testkit::Wheel::find(&testkit::OMPI5_WHEEL) else {
        return;
    };
    let dir = testkit::scratch("mqd-pml-ompi5");
    let app = dir.join("ring");
    wheel
        .compile(&ring_source(), &app, &["-g"])
        .unwrap_or_else(|e| panic!("{e}"));
    let start = |mca: &[&str]| {
        for r in 0..RANKS {
            std::fs::remove_file(dir.join(format!("{r}.pid"))).ok();
        }
        let mut launcher = Command::new(wheel.bin("mpirun"));
        launcher
            .args(["--allow-run-as-root", "--oversubscribe", "-n", "3"])
            .args(mca)
            .arg(&app)
            .arg(&*dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Job::start(&mut launcher, &dir, RANKS)
    };

    let job = start(&[]);
    let probe = open_rank(job.pids[0]);
    let mut reader = QueueReader::open(&*probe, options(Engine::Native)).expect("open");
    for (rank, &pid) in job.pids.iter().enumerate() {
        assert_ring_receive(&mut reader, rank, pid, &app);
        testkit::assert_untouched(pid);
    }
    reader.finish();
    drop(job);

    // The same wheel under UCX. It builds its PMLs into libmpi, so ob1's module stays in the
    // process: the refusal comes from comparing it with the selected one.
    let mca: Vec<&str> = UCX.iter().chain(&UCX_DEVICES).copied().collect();
    let job = start(&mca);
    let probe = open_rank(job.pids[0]);
    let ob1_in_process = probe.symbol("mca_pml_ob1").expect("lookup").is_some();
    let mut reader = QueueReader::open(&*probe, options(Engine::Native)).expect("open");
    for (rank, &pid) in job.pids.iter().enumerate() {
        let e = reader
            .read(&ReadRank::new(Some(rank as u64), &app), open_rank(pid))
            .expect_err("a UCX rank must not be read as ob1");
        assert_blind(&e, rank, "native, Open MPI 5");
        if ob1_in_process {
            assert!(
                matches!(&e, MqdError::Blind { why, .. } if **why == BlindReason::NotOb1),
                "{e:?}"
            );
        }
        testkit::assert_untouched(pid);
    }
}
