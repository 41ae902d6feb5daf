//! The native Open MPI walker (PML ob1) against Open MPI's own DLL (`libompi_dbg_msgq.so`)
//! on live ranks of stock Open MPI 4.1 running `fixtures/ompi_pending.c` (no debug
//! information, no types sidecar: types from the shipped layout set proven on each rank), plus
//! the unexpected messages the DLL leaves out, and the same walk from core files of those ranks
//! (gcore). Skipped without Open MPI,
//! failed under `MPIR_REQUIRE_PEERS=1`.

mod common;

use common::Job;
use common::compare::{DllGaps, assert_native_matches_dll};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;

use mpir_mqd::native::{self, ProcessInfo, WalkOptions, WalkerKind};
use mpir_mqd::{Host, HostOptions, ProcessSpec, discover_dll};
use mpir_target::Target;
use mpir_target::corefile::CoreTarget;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit;

const OMPI_GAPS: DllGaps = DllGaps {
    unnamed: None,
    no_global_ranks: false,
    unexpected_placeholders: false,
    no_unexpected: true,
    send_actual_global_is_local: true,
};

fn open_core(dir: &Path, pid: u32, rank: usize) -> (Rc<dyn Target>, PathBuf) {
    let prefix = dir.join(format!("core{rank}"));
    testkit::run(
        Command::new("gcore")
            .arg("-o")
            .arg(&prefix)
            .arg(pid.to_string()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let path = PathBuf::from(format!("{}.{pid}", prefix.display()));
    let core = CoreTarget::open(&path, DebugOptions::default()).expect("open core");
    (common::with_shipped(core, Some(rank as u64)), path)
}

#[test]
fn native_open_mpi_walker_equals_the_dll_and_adds_unexpected_messages() {
    if !testkit::have("mpicc.openmpi") || !testkit::have("orterun") {
        testkit::skip("needs Open MPI (mpicc.openmpi, orterun)");
        return;
    }
    let with_cores = testkit::have("gcore");
    if !with_cores {
        testkit::skip("gcore (gdb) is not installed: live ranks only");
    }
    let dir = testkit::scratch("mqd-native-ompi");
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
    let probe = LiveTarget::open(job.pids[0], DebugOptions::default()).expect("open rank 0");
    let (dll, _) = discover_dll(&probe, None).expect("discover the DLL");
    // SAFETY: Open MPI's own MQD DLL for this machine, from the MPI under test.
    let mut host = unsafe { Host::load(&dll, HostOptions::default()) }.expect("load the DLL");

    for (rank, &pid) in job.pids.iter().enumerate() {
        let target = common::with_shipped(
            LiveTarget::open(pid, DebugOptions::default()).expect("open rank"),
            Some(rank as u64),
        );
        let walker = native::detect(&*target, &WalkOptions::default()).expect("detect");
        assert_eq!(walker.kind(), WalkerKind::OpenMpiOb1);
        assert!(walker.missing().is_empty(), "{:?}", walker.missing());
        let info = ProcessInfo::with_global_rank(rank as u64);
        let live = walker.queues(&*target, &info).expect("native walk");
        eprintln!(
            "rank {rank}: native walk {:?}, {} hops, {} target reads, {} attempt(s); missing {:?}",
            live.elapsed, live.hops, live.target_reads, live.attempts, live.missing
        );
        common::check_ompi_unexpected(&live.communicators, rank as u64);

        let p = host
            .attach(ProcessSpec::new(
                app.display().to_string(),
                target.clone(),
                Some(rank as u64),
            ))
            .expect("attach the DLL");
        let dll_comms = host.queues(p).expect("DLL queues");
        host.detach(p).expect("detach");
        let matched = assert_native_matches_dll(&dll_comms, &live.communicators, OMPI_GAPS);
        assert_eq!(
            matched.len(),
            live.communicators.len(),
            "same communicators"
        );

        if with_cores {
            let (core, path) = open_core(&dir, pid, rank);
            let walker = native::detect(&*core, &WalkOptions::default()).expect("detect (core)");
            let from_core = walker
                .queues(&*core, &info)
                .expect("native walk of the core");
            // Live ranks progress between the walks; their queues cannot change (nothing
            // matches), so the core shows the same communicators and operations.
            assert_eq!(from_core.communicators, live.communicators, "core == live");
            std::fs::remove_file(&path).ok();
        }
        testkit::assert_untouched(pid);
    }
}
