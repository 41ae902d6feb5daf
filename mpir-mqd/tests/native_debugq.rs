//! The native MPICH walker on the MPICH ≥ 4.1 debug-queue layout: a C fixture laid out with
//! MPICH 4.1's type and member names (`fixtures/mpich41_debugq.c`, compiled here with `-g`),
//! walked live, from a core file (gcore), with a long queue, and while another thread keeps
//! freeing and relinking a communicator.

mod common;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use mpir_mqd::native::{self, NativeError, ProcessInfo, Walk, WalkOptions, WalkerKind};
use mpir_mqd::{
    CommOrigin, CommunicatorQueues, EngineUsed, QueueReader, ReadNote, ReadRank, ReaderOptions,
};
use mpir_target::corefile::CoreTarget;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit;
use mpir_types::mqd::{OpStatus, Peer};

fn build(dir: &Path) -> Option<PathBuf> {
    build_with(dir, &[])
}

/// The fixture compiled with `extra` flags (`-m32`: an i386 rank); `None` after a skip (no C
/// compiler, or no 32-bit support: gcc-multilib). Under `MPIR_REQUIRE_PEERS=1` a skip fails.
fn build_with(dir: &Path, extra: &[&str]) -> Option<PathBuf> {
    if !testkit::have("cc") {
        testkit::skip("no C compiler (cc)");
        return None;
    }
    let exe = dir.join("debugq");
    let built = testkit::run(
        Command::new("cc")
            .args(extra)
            .args(["-g", "-O0", "-pthread", "-o"])
            .arg(&exe)
            .arg(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/tests/fixtures/mpich41_debugq.c"
            )),
    );
    match built {
        Ok(_) => Some(exe),
        Err(e) if !extra.is_empty() => {
            testkit::skip(&format!("cc {}: {e} (gcc-multilib?)", extra.join(" ")));
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The fixture in `mode`, with its buffer addresses; killed when dropped.
struct Fixture {
    child: Child,
    sbuf: u64,
    rbuf: u64,
}

impl Fixture {
    fn start(exe: &Path, args: &[&str]) -> Fixture {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the fixture");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("ready line");
        let w: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(w.first(), Some(&"ready"), "{line}");
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).expect("address");
        Fixture {
            sbuf: hex(w[1]),
            rbuf: hex(w[2]),
            child,
        }
    }
    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn comm<'a>(w: &'a Walk, name: &str) -> &'a CommunicatorQueues {
    common::comm(&w.communicators, name)
}

/// The fixture's known layout (see the comment at the top of the C file).
fn check_known(w: &Walk, f: &Fixture) {
    assert_eq!(w.communicators.len(), 5, "{:#?}", w.communicators);
    let names: Vec<_> = w
        .communicators
        .iter()
        .map(|c| c.communicator.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "MPI_COMM_WORLD",
            "MPI_COMM_SELF",
            "MPI_ICOMM_WORLD",
            "odds",
            ""
        ],
        "sorted by context id"
    );

    let world = comm(w, "MPI_COMM_WORLD");
    assert_eq!(world.origin, CommOrigin::Predefined);
    assert_eq!(
        (world.communicator.local_rank, world.communicator.size),
        (1, 4)
    );
    assert_eq!(
        world.group.as_deref(),
        Some(&[Some(0), Some(1), Some(2), Some(3)][..])
    );
    let s = world.sends.operations();
    assert_eq!(s.len(), 1, "{world:#?}");
    assert_eq!(
        (s[0].peer_local, s[0].peer_global, s[0].tag),
        (Peer::Rank(2), Some(2), Some(8))
    );
    assert_eq!(s[0].status, OpStatus::Complete, "cc 0");
    assert_eq!(
        (s[0].length.elements, s[0].length.bytes, s[0].buffer),
        (Some(3), None, f.sbuf)
    );
    let r = world.receives.operations();
    assert!(!r.is_empty());
    assert_eq!(
        (r[0].peer_local, r[0].peer_global, r[0].tag),
        (Peer::Any, None, None)
    );
    assert_eq!(
        (r[0].length.elements, r[0].buffer, r[0].status),
        (Some(4), f.rbuf, OpStatus::Pending)
    );
    let u = world.unexpected.operations();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].peer_local, u[0].peer_global, u[0].tag),
        (Peer::Rank(3), Some(3), Some(11))
    );
    assert_eq!(
        (u[0].length.bytes, u[0].length.elements),
        (None, None),
        "remembered without a count"
    );
    assert!(u[0].system_buffer);

    let me = comm(w, "MPI_COMM_SELF");
    assert_eq!(me.origin, CommOrigin::Predefined);
    assert_eq!(
        me.group.as_deref(),
        Some(&[Some(1)][..]),
        "no group: this process's world rank"
    );
    assert_eq!(comm(w, "MPI_ICOMM_WORLD").origin, CommOrigin::Internal);

    let odds = comm(w, "odds");
    assert_eq!(odds.origin, CommOrigin::User);
    assert_eq!(odds.group.as_deref(), Some(&[Some(1), Some(3)][..]));
    let s = odds.sends.operations();
    assert_eq!(s.len(), 1);
    assert_eq!(
        (s[0].peer_local, s[0].peer_global, s[0].tag),
        (Peer::Rank(1), Some(3), Some(7))
    );
    assert_eq!(
        (s[0].length.elements, s[0].status),
        (Some(10), OpStatus::Pending)
    );
    let r = odds.receives.operations();
    assert_eq!(r.len(), 1);
    assert_eq!(
        (r[0].peer_local, r[0].peer_global, r[0].tag),
        (Peer::Rank(0), Some(1), Some(9))
    );
    assert!(odds.unexpected.operations().is_empty());

    let node = comm(w, "");
    assert_eq!(node.origin, CommOrigin::Internal, "hierarchy_kind NODE");
    assert_eq!(node.group.as_deref(), Some(&[Some(0), Some(1)][..]));
    // The entry of context 1 (the world's collectives) belongs to no communicator.
    let all: usize = w
        .communicators
        .iter()
        .map(|c| {
            c.receives
                .operations()
                .iter()
                .filter(|o| o.tag == Some(-10))
                .count()
        })
        .sum();
    assert_eq!(all, 0);
    assert!(
        w.missing.iter().any(|m| m.contains("MPIR_Datatype_direct")),
        "the fixture has no datatype table: {:?}",
        w.missing
    );
}

#[test]
fn debug_queue_layout_live_and_from_a_core() {
    let dir = testkit::scratch("mqd-native-debugq");
    let Some(exe) = build(&dir) else { return };
    let f = Fixture::start(&exe, &["known"]);
    let target = LiveTarget::open(f.pid(), DebugOptions::default()).expect("open");
    let walker = native::detect(&target, &WalkOptions::default()).expect("detect");
    assert_eq!(walker.kind(), WalkerKind::MpichDebugq);
    let info = ProcessInfo::with_global_rank(1);
    let live = walker.queues(&target, &info).expect("walk");
    check_known(&live, &f);
    assert_eq!(live.attempts, 1);

    // The reader picks this walker by itself and gives the same model, with typed notes.
    let shared: std::rc::Rc<dyn mpir_target::Target> =
        std::rc::Rc::new(LiveTarget::open(f.pid(), DebugOptions::default()).expect("open"));
    let mut reader = QueueReader::open(&*shared, ReaderOptions::default()).expect("reader");
    assert_eq!(reader.engine(), EngineUsed::Native(WalkerKind::MpichDebugq));
    assert_eq!(reader.engine().to_string(), "native MPICH debug queues");
    assert_eq!(reader.fallback_reason(), None);
    let read = reader
        .read(&ReadRank::new(Some(1), &exe), shared)
        .expect("read");
    assert_eq!(read.communicators, live.communicators);
    assert!(
        read.notes.iter().any(|n| matches!(
            n,
            ReadNote::NotRead { what } if what.contains("MPIR_Datatype_direct")
        )),
        "{:?}",
        read.notes
    );
    assert!(reader.finish().is_empty());

    if testkit::have("gcore") {
        let prefix = dir.join("core");
        testkit::run(
            Command::new("gcore")
                .arg("-o")
                .arg(&prefix)
                .arg(f.pid().to_string()),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let path = PathBuf::from(format!("{}.{}", prefix.display(), f.pid()));
        let core = CoreTarget::open(&path, DebugOptions::default()).expect("core");
        let from_core = native::detect(&core, &WalkOptions::default())
            .expect("detect (core)")
            .queues(&core, &info)
            .expect("walk (core)");
        assert_eq!(from_core.communicators, live.communicators);
    } else {
        testkit::skip("gcore (gdb) is not installed: no core part");
    }
    testkit::assert_untouched(f.pid());
}

#[test]
fn an_i386_rank_is_walked_from_the_64_bit_tool() {
    // The same fixture as a 32-bit process: 4-byte pointers and longs, read by DWARF width.
    let dir = testkit::scratch("mqd-native-debugq-m32");
    let Some(exe) = build_with(&dir, &["-m32"]) else {
        return;
    };
    let f = Fixture::start(&exe, &["known"]);
    let target = LiveTarget::open(f.pid(), DebugOptions::default()).expect("open");
    assert_eq!(
        mpir_target::Memory::data_model(&target),
        mpir_types::DataModel::ILP32
    );
    let walker = native::detect(&target, &WalkOptions::default()).expect("detect");
    assert_eq!(walker.kind(), WalkerKind::MpichDebugq);
    let live = walker
        .queues(&target, &ProcessInfo::with_global_rank(1))
        .expect("walk");
    check_known(&live, &f);
    testkit::assert_untouched(f.pid());
}

#[test]
fn long_queue_is_walked_with_few_reads_and_bounded() {
    let dir = testkit::scratch("mqd-native-debugq-long");
    let Some(exe) = build(&dir) else { return };
    const N: usize = 100_000;
    let f = Fixture::start(&exe, &["long", &N.to_string()]);
    let target = LiveTarget::open(f.pid(), DebugOptions::default()).expect("open");
    let walker = native::detect(&target, &WalkOptions::default()).expect("detect");
    let w = walker
        .queues(&target, &ProcessInfo::with_global_rank(1))
        .expect("walk");
    let r = comm(&w, "MPI_COMM_WORLD").receives.operations();
    assert_eq!(r.len(), N + 1);
    assert!(
        r.iter()
            .skip(1)
            .enumerate()
            .all(|(i, o)| o.tag == Some(i as i64)),
        "list order"
    );
    let per_hop = w.elapsed.as_secs_f64() * 1e6 / w.hops as f64;
    eprintln!(
        "{} hops in {:?} ({per_hop:.3} µs/hop), {} target reads",
        w.hops, w.elapsed, w.target_reads
    );
    assert!(
        w.target_reads < (N / 100) as u64,
        "snapshot reads: {}",
        w.target_reads
    );

    // A bound below the list's length: that queue fails with its partial operations, the
    // others are whole.
    let short = walker
        .queues_with(
            &target,
            &ProcessInfo::with_global_rank(1),
            &WalkOptions::default().with_bounds(64, 1000),
        )
        .expect("walk");
    let world = comm(&short, "MPI_COMM_WORLD");
    match &world.receives {
        mpir_mqd::Queue::Failed { partial, error } => {
            assert_eq!(
                partial.len(),
                998,
                "1000 entries admitted, two of other contexts"
            );
            assert!(
                matches!(
                    error,
                    mpir_mqd::MqdError::Native(NativeError::TooLong { limit: 1000, .. })
                ),
                "{error}"
            );
        }
        q => panic!("expected a failed queue: {q:?}"),
    }
    assert_eq!(world.sends.operations().len(), 1);
    testkit::assert_untouched(f.pid());
}

#[test]
fn communicators_freed_during_the_walk_are_retried_boundedly() {
    let dir = testkit::scratch("mqd-native-debugq-churn");
    let Some(exe) = build(&dir) else { return };
    let f = Fixture::start(&exe, &["churn"]);
    let target = LiveTarget::open(f.pid(), DebugOptions::default()).expect("open");
    let walker = native::detect(&target, &WalkOptions::default()).expect("detect");
    let info = ProcessInfo::with_global_rank(1);
    let (mut retried, mut unstable, mut ok) = (0, 0, 0);
    // At least 200 walks, and on until the churn was seen: on a loaded machine the churning
    // thread may not run during 200 fast walks. Bounded, so a walker that never notices a
    // change still fails below.
    let started = std::time::Instant::now();
    while ok + unstable < 200
        || (retried + unstable == 0 && started.elapsed() < std::time::Duration::from_secs(30))
    {
        match walker.queues_with(&target, &info, &WalkOptions::default().with_attempts(3)) {
            Ok(w) => {
                ok += 1;
                if w.attempts > 1 {
                    retried += 1;
                }
                // A walk that is returned saw one sequence number throughout: the stable
                // communicators are all there, with their queues.
                for name in ["MPI_COMM_WORLD", "MPI_COMM_SELF", "odds"] {
                    assert!(
                        w.communicators.iter().any(|c| c.communicator.name == name),
                        "{name}"
                    );
                }
                assert_eq!(comm(&w, "odds").sends.operations().len(), 1);
            }
            Err(NativeError::Unstable { attempts: 3 }) => unstable += 1,
            Err(e) => panic!("{e}"),
        }
    }
    eprintln!(
        "{} walks under churn in {:?}: {ok} ok ({retried} retried), {unstable} unstable",
        ok + unstable,
        started.elapsed()
    );
    assert!(
        retried + unstable > 0,
        "the churning thread changed the list during some walk"
    );
    testkit::assert_untouched(f.pid());
}
