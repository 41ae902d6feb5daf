//! Open MPI 4.1's stock MQD DLL (`libompi_dbg_msgq.so`, found through the ranks'
//! `MPIR_dll_name`) hosted in both modes against live ranks of a program that posts known
//! operations (`fixtures/ompi_pending.c`); stock Open MPI has no DWARF: the DLL's type
//! callbacks are answered from the shipped layout set proven on each rank. Skipped without Open MPI,
//! failed under `MPIR_REQUIRE_PEERS=1`.

mod common;

use common::{Hosting, Job, comm};
use std::path::Path;
use std::process::Command;

use mpir_mqd::{DllSource, HelperOptions, HostOptions, QueueHost, discover_dll};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit;
use mpir_types::mqd::{OpClass, Peer};

fn check_rank(host: &mut dyn QueueHost, app: &Path, pid: u32, rank: usize) {
    let peer = (rank as u64 + 1) % 2;
    let target = common::with_shipped(
        LiveTarget::open(pid, DebugOptions::default()).expect("open rank"),
        Some(rank as u64),
    );
    let p = host
        .attach(mpir_mqd::ProcessSpec::new(
            app.display().to_string(),
            target,
            Some(rank as u64),
        ))
        .unwrap_or_else(|e| panic!("attach rank {rank}: {e}"));
    let comms = host
        .queues(p)
        .unwrap_or_else(|e| panic!("queues rank {rank}: {e}"));

    let world = comm(&comms, "MPI_COMM_WORLD");
    assert_eq!(world.communicator.size, 2);
    assert_eq!(world.communicator.local_rank, rank as i64);
    let recv = world
        .queue(OpClass::Receive)
        .operations()
        .iter()
        .find(|o| o.tag == Some(77))
        .unwrap_or_else(|| panic!("rank {rank}: no tag-77 receive in {world:#?}"));
    assert_eq!(recv.peer_local, Peer::Rank(peer));
    assert_eq!(recv.peer_global, Some(peer));
    assert_eq!(recv.length.bytes, Some(16), "4 ints; Open MPI counts bytes");
    let send = world
        .queue(OpClass::Send)
        .operations()
        .iter()
        .find(|o| o.tag == Some(44))
        .unwrap_or_else(|| panic!("rank {rank}: no tag-44 send in {world:#?}"));
    assert_eq!(send.peer_local, Peer::Rank(peer));
    assert_eq!(send.length.bytes, Some(8 << 18));

    let dup = comm(&comms, "mpir_dup");
    let send = dup
        .queue(OpClass::Send)
        .operations()
        .iter()
        .find(|o| o.tag == Some(55))
        .unwrap_or_else(|| panic!("rank {rank}: no tag-55 send in {dup:#?}"));
    assert_eq!(send.peer_local, Peer::Rank(peer));
    assert_eq!(send.peer_global, Some(peer));
    assert_eq!(send.length.bytes, Some(8 << 17));
    assert!(
        dup.queue(OpClass::Receive).operations().is_empty(),
        "nothing was received on the dup: {dup:#?}"
    );
    host.detach(p).expect("detach");
    testkit::assert_untouched(pid);
}

#[test]
fn open_mpi_dll_reports_posted_operations_of_live_ranks_in_both_modes() {
    if !testkit::have("mpicc.openmpi") || !testkit::have("orterun") {
        testkit::skip("needs Open MPI (mpicc.openmpi, orterun)");
        return;
    }
    let dir = testkit::scratch("mqd-ompi");
    let app = dir.join("pending");
    testkit::run(
        Command::new("mpicc.openmpi")
            .args(["-g", "-o"])
            .arg(&app)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/ompi_pending.c"
            )),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut launcher = common::open_mpi_launcher(std::path::Path::new("orterun"), 2, &app, &dir);
    let job = Job::start(&mut launcher, &dir, 2);

    // Discovery: the rank's own MPIR_dll_name names the stock DLL.
    let probe = LiveTarget::open(job.pids[0], DebugOptions::default()).expect("open rank 0");
    let (dll, source) = discover_dll(&probe, None).expect("discover the DLL");
    assert_eq!(source, DllSource::MpirDllName);
    assert_eq!(
        dll.file_name().and_then(|n| n.to_str()),
        Some("libompi_dbg_msgq.so")
    );

    for hosting in [
        Hosting::OutOfProcess(
            HelperOptions::default().with_program(env!("CARGO_BIN_EXE_mpir-mqd-host")),
        ),
        Hosting::InProcess,
    ] {
        // SAFETY: Open MPI's own MQD DLL for this machine, from the MPI under test.
        let mut host = unsafe { common::open_host(&dll, hosting.clone(), HostOptions::default()) }
            .unwrap_or_else(|e| panic!("load {}: {e}", dll.display()));
        assert!(host.version().contains("Open MPI"), "{}", host.version());
        for (rank, &pid) in job.pids.iter().enumerate() {
            check_rank(&mut *host, &app, pid, rank);
        }
    }
}
