//! Per-hop cost of mpir-mqd's native walker on a long queue of a live process: the MPICH
//! 4.1 debug-queue fixture of mpir-mqd's tests (`mpir-mqd/tests/fixtures/mpich41_debugq.c`,
//! compiled here with `cc -g`) holding N receives on one list, walked through `LiveTarget`
//! (snapshot reads: one 64 KiB block per miss). Throughput is list entries per second; the
//! target is ≤ 2 µs per hop.
//!
//! - `live_debugq/<n>`: `native::Walker::queues` on the whole process (5 communicators, the
//!   three queues; the long list dominates).

use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mpir_mqd::native::{self, ProcessInfo, WalkOptions};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;

const SIZES: [u64; 2] = [10_000, 100_000];

fn fixture() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mpir-bench-native-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let out = dir.join("debugq");
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../mpir-mqd/tests/fixtures/mpich41_debugq.c"
    );
    let status = Command::new("cc")
        .args(["-g", "-O0", "-pthread", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed");
    out
}

fn walks(c: &mut Criterion) {
    let exe = fixture();
    let mut g = c.benchmark_group("native_walk");
    for n in SIZES {
        let mut child = Command::new(&exe)
            .args(["long", &n.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the fixture");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("ready");
        let target = LiveTarget::open(child.id(), DebugOptions::default()).expect("open");
        let walker = native::detect(&target, &WalkOptions::default()).expect("detect");
        let info = ProcessInfo::with_global_rank(1);
        let hops = walker.queues(&target, &info).expect("walk").hops;
        g.throughput(Throughput::Elements(hops));
        g.bench_with_input(BenchmarkId::new("live_debugq", n), &n, |b, _| {
            b.iter(|| black_box(walker.queues(&target, &info).expect("walk")))
        });
        let _ = child.kill();
        let _ = child.wait();
    }
    g.finish();
}

criterion_group!(benches, walks);
criterion_main!(benches);
