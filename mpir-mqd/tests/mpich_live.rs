//! MPICH's own MQD DLL (`libtvmpich.so` from the `--enable-debuginfo` build) hosted in and out
//! of process against live ranks of a program that posts known operations (`fixtures/mpich_pending.c`).
//! Needs `$MPIR_MPICH_DEBUGINFO` (default `/var/cache/mpir-rs/mpich-debuginfo`); skipped
//! without it, failed under `MPIR_REQUIRE_PEERS=1`.

mod common;

use common::{Hosting, Job, comm};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::rc::Rc;

use mpir_mqd::{HelperOptions, HostOptions, ProcessSpec};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit;
use mpir_types::mqd::{OpClass, Peer};

#[test]
fn mpich_dll_reports_posted_operations_of_live_ranks() {
    let root = PathBuf::from(
        std::env::var("MPIR_MPICH_DEBUGINFO")
            .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into()),
    );
    let dll = root.join("lib/libtvmpich.so");
    if !dll.is_file() || !root.join("bin/mpicc").is_file() {
        testkit::skip(&format!("no debugger-enabled MPICH at {}", root.display()));
        return;
    }
    let dir = testkit::scratch("mqd-mpich");
    let app = dir.join("pending");
    testkit::run(
        Command::new(root.join("bin/mpicc"))
            .args(["-g", "-o"])
            .arg(&app)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/mpich_pending.c"
            )),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut launcher = Command::new(root.join("bin/mpiexec.hydra"));
    launcher
        .args(["-n", "2"])
        .arg(&app)
        .arg(&*dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut launcher, &dir, 2);

    for hosting in [
        Hosting::OutOfProcess(
            HelperOptions::default().with_program(env!("CARGO_BIN_EXE_mpir-mqd-host")),
        ),
        Hosting::InProcess,
    ] {
        // SAFETY: MPICH's own MQD DLL, built for this machine with the MPI under test.
        let mut host = unsafe { common::open_host(&dll, hosting.clone(), HostOptions::default()) }
            .expect("load libtvmpich");
        for (rank, &pid) in job.pids.iter().enumerate() {
            let peer = (rank as u64 + 1) % 2;
            let target = LiveTarget::open(pid, DebugOptions::default()).expect("open rank");
            let p = host
                .attach(ProcessSpec::new(
                    app.display().to_string(),
                    Rc::new(target),
                    Some(rank as u64),
                ))
                .unwrap_or_else(|e| panic!("attach rank {rank}: {e}"));
            let comms = host
                .queues(p)
                .unwrap_or_else(|e| panic!("queues rank {rank}: {e}"));

            let world = comm(&comms, "MPI_COMM_WORLD");
            let recv = world
                .queue(OpClass::Receive)
                .operations()
                .iter()
                .find(|o| o.tag == Some(77))
                .unwrap_or_else(|| panic!("rank {rank}: no tag-77 receive in {world:#?}"));
            assert_eq!(recv.peer_local, Peer::Rank(peer));
            assert_eq!(recv.length.elements, Some(4), "MPICH counts elements");

            let dup = comm(&comms, "mpir_dup");
            let send = dup
                .queue(OpClass::Send)
                .operations()
                .iter()
                .find(|o| o.tag == Some(55))
                .unwrap_or_else(|| panic!("rank {rank}: no tag-55 send in {dup:#?}"));
            assert_eq!(send.peer_local, Peer::Rank(peer));
            assert_eq!(send.length.elements, Some(1 << 18));
            let unexpected = dup.queue(OpClass::Unexpected).operations();
            assert!(
                unexpected
                    .iter()
                    .any(|o| o.tag == Some(55) && o.peer_local == Peer::Rank(peer)),
                "rank {rank}: the peer's rendezvous send is unexpected here: {dup:#?}"
            );
            host.detach(p).expect("detach");
            testkit::assert_untouched(pid);
        }
    }
}
