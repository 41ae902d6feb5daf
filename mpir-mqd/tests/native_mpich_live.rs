//! The native MPICH walker (ch3 layout) against MPICH's own DLL (`libtvmpich.so`) on live
//! ranks of the `--enable-debuginfo` MPICH running `fixtures/mpich_pending.c`, and on core
//! files of the same ranks (gcore). Needs `$MPIR_MPICH_DEBUGINFO` (default
//! `/var/cache/mpir-rs/mpich-debuginfo`); skipped without it, failed under
//! `MPIR_REQUIRE_PEERS=1`.

mod common;

use common::Job;
use common::compare::{DllGaps, assert_native_matches_dll};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::rc::Rc;

use mpir_mqd::native::{self, ProcessInfo, WalkOptions, WalkerKind};
use mpir_mqd::{
    CommOrigin, CommunicatorQueues, Engine, Host, HostOptions, ProcessSpec, QueueReader, ReadRank,
    ReaderOptions,
};
use mpir_target::corefile::CoreTarget;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit;
use mpir_types::mqd::{OpClass, OpStatus, Peer};

const MPICH_GAPS: DllGaps = DllGaps {
    unnamed: Some("--unnamed--"),
    no_global_ranks: true,
    unexpected_placeholders: true,
    no_unexpected: false,
    send_actual_global_is_local: false,
};

fn by_name<'a>(comms: &'a [CommunicatorQueues], name: &str) -> &'a CommunicatorQueues {
    common::comm(comms, name)
}

/// What the fixture program posted, checked on a native walk of rank `rank` (of 2): the
/// known operations with their lengths in bytes, global ranks, groups and origins.
fn check_known_program(comms: &[CommunicatorQueues], rank: u64) {
    let peer = (rank + 1) % 2;
    let world = by_name(comms, "MPI_COMM_WORLD");
    assert_eq!(world.origin, CommOrigin::Predefined);
    assert_eq!(world.group.as_deref(), Some(&[Some(0), Some(1)][..]));
    assert_eq!(world.communicator.local_rank, rank as i64);
    let recv: Vec<_> = world
        .receives
        .operations()
        .iter()
        .filter(|o| o.tag == Some(77))
        .collect();
    assert_eq!(recv.len(), 1, "{world:#?}");
    assert_eq!(recv[0].peer_local, Peer::Rank(peer));
    assert_eq!(recv[0].peer_global, Some(peer));
    assert_eq!(recv[0].status, OpStatus::Pending);
    assert_eq!(
        (recv[0].length.elements, recv[0].length.bytes),
        (Some(4), Some(16)),
        "4 ints"
    );

    let dup = by_name(comms, "mpir_dup");
    assert_eq!(dup.origin, CommOrigin::User);
    assert_eq!(dup.group.as_deref(), Some(&[Some(0), Some(1)][..]));
    let send: Vec<_> = dup
        .sends
        .operations()
        .iter()
        .filter(|o| o.tag == Some(55))
        .collect();
    assert_eq!(send.len(), 1, "{dup:#?}");
    assert_eq!(send[0].peer_global, Some(peer));
    assert_eq!(send[0].length.bytes, Some(8 << 18), "2^18 doubles");
    let unexpected: Vec<_> = dup
        .unexpected
        .operations()
        .iter()
        .filter(|o| o.tag == Some(55))
        .collect();
    assert_eq!(
        unexpected.len(),
        1,
        "the peer's rendezvous request: {dup:#?}"
    );
    assert_eq!(unexpected[0].peer_local, Peer::Rank(peer));
    assert_eq!(unexpected[0].peer_global, Some(peer));
    assert_eq!(
        unexpected[0].length.bytes,
        Some(8 << 18),
        "the message's size"
    );
    assert!(
        !unexpected[0].system_buffer && unexpected[0].buffer == 0,
        "a rendezvous header: the data is still in the sender's buffer"
    );

    let icomm = by_name(comms, "MPI_ICOMM_WORLD");
    assert_eq!(icomm.origin, CommOrigin::Internal);
    let me = by_name(comms, "MPI_COMM_SELF");
    assert_eq!(me.origin, CommOrigin::Predefined);
    assert_eq!(me.group.as_deref(), Some(&[Some(rank)][..]));
    // Unnamed communicators are MPICH's node / node-roots communicators (the fixture makes
    // no unnamed one): all internal, with groups of world ranks.
    let unnamed: Vec<_> = comms
        .iter()
        .filter(|c| c.communicator.name.is_empty())
        .collect();
    assert!(!unnamed.is_empty());
    for c in unnamed {
        assert_eq!(c.origin, CommOrigin::Internal, "{c:#?}");
        let g = c.group.as_deref().expect("group");
        assert!(g.contains(&Some(rank)), "{c:#?}");
    }
    for c in comms {
        for class in OpClass::ALL {
            assert!(
                c.queue(class).operations().iter().all(|o| o.class == class),
                "{c:#?}"
            );
        }
    }
}

#[test]
fn native_mpich_walker_equals_libtvmpich_on_live_ranks_and_their_cores() {
    let root = PathBuf::from(
        std::env::var("MPIR_MPICH_DEBUGINFO")
            .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into()),
    );
    let dll = root.join("lib/libtvmpich.so");
    if !dll.is_file() || !root.join("bin/mpicc").is_file() {
        testkit::skip(&format!("no debugger-enabled MPICH at {}", root.display()));
        return;
    }
    let with_cores = testkit::have("gcore");
    if !with_cores {
        testkit::skip("gcore (gdb) is not installed: live ranks only");
    }
    let dir = testkit::scratch("mqd-native-mpich");
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

    // SAFETY: MPICH's own MQD DLL, built for this machine with the MPI under test.
    let mut host = unsafe { Host::load(&dll, HostOptions::default()) }.expect("load libtvmpich");
    for (rank, &pid) in job.pids.iter().enumerate() {
        let target = Rc::new(LiveTarget::open(pid, DebugOptions::default()).expect("open rank"));
        let walker = native::detect(&*target, &WalkOptions::default()).expect("detect");
        assert_eq!(walker.kind(), WalkerKind::MpichCh3);
        let info = ProcessInfo::with_global_rank(rank as u64);
        let live = walker.queues(&*target, &info).expect("native walk");
        eprintln!(
            "rank {rank}: native walk {:?}, {} hops, {} target reads, {} attempt(s); missing {:?}",
            live.elapsed, live.hops, live.target_reads, live.attempts, live.missing
        );
        check_known_program(&live.communicators, rank as u64);

        // Through the reader, which first proves from the rank's own device string
        // (MPII_Version_device: ch3:nemesis) that ch3's queues are where it keeps them.
        let options = ReaderOptions::default().with_engine(Engine::Native);
        let mut reader = QueueReader::open(&*target, options).expect("reader");
        let read = reader
            .read(&ReadRank::new(Some(rank as u64), &app), target.clone())
            .expect("a ch3 rank passes the proof");
        assert_eq!(read.communicators, live.communicators);

        let p = host
            .attach(ProcessSpec::new(
                app.display().to_string(),
                target.clone(),
                Some(rank as u64),
            ))
            .expect("attach the DLL");
        let dll_comms = host.queues(p).expect("DLL queues");
        host.detach(p).expect("detach");
        let matched = assert_native_matches_dll(&dll_comms, &live.communicators, MPICH_GAPS);
        assert_eq!(
            matched.len(),
            live.communicators.len(),
            "same communicators"
        );

        if with_cores {
            let prefix = dir.join(format!("core{rank}"));
            testkit::run(
                Command::new("gcore")
                    .arg("-o")
                    .arg(&prefix)
                    .arg(pid.to_string()),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let core_path = PathBuf::from(format!("{}.{pid}", prefix.display()));
            let core = CoreTarget::open(&core_path, DebugOptions::default()).expect("open core");
            let walker = native::detect(&core, &WalkOptions::default()).expect("detect (core)");
            let from_core = walker
                .queues(&core, &info)
                .expect("native walk of the core");
            assert_eq!(from_core.communicators, live.communicators, "core == live");
            std::fs::remove_file(&core_path).ok();
        }
        testkit::assert_untouched(pid);
    }
}
