//! The stack unwinder offline, per frame (issue 18): a C fixture (mpir-target's
//! `unwind_chain.c`, `-O2 -g`, frame pointers omitted) parked 1000 calls deep in a recursion,
//! copied once by `snapshot_live`, then
//!
//! - `unwind/deep`: `Unwinder::unwind` over the copy (CFI rows already remembered after the
//!   first walk, as in every sample after the first), throughput in frames;
//! - `symbolise/deep`: the same walk turned into the stack model (`Unwinder::thread_stack`:
//!   function names, file:line and inline frames from the shared `SymbolCache`);
//! - `snapshot/deep`: `snapshot_live` itself (freeze every thread, copy registers and the live
//!   stacks, let go): how long a sample costs the process.
//!
//! Results in BENCHMARKS.md; the end-to-end comparison with gdb and eu-stack is `compare
//! --only stacks`.

use std::process::{Command, Stdio};
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mpir_benches::Scratch;
use mpir_target::debuginfo::{DebugOptions, ProcessImages};
use mpir_target::live::tracer::Tracer;
use mpir_target::unwind::{SnapshotOptions, SymbolCache, UnwindOptions, Unwinder, snapshot_live};
use mpir_types::DataModel;

fn bench(c: &mut Criterion) {
    let dir = Scratch::new("unwind");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mpir-target/tests/fixtures/unwind_chain.c");
    let exe = dir.0.join("deep");
    let built = Command::new("cc")
        .args(["-O2", "-g", "-fomit-frame-pointer", "-pthread", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .expect("cc");
    assert!(built.success(), "compiling {}", src.display());
    let mut child = Command::new(&exe)
        .args(["deep", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn the fixture");
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id();

    let tracer = Tracer::new().expect("tracer");
    let snap = snapshot_live(&tracer, pid, DataModel::LP64, &SnapshotOptions::default())
        .expect("snapshot");
    let images = ProcessImages::for_pid(pid, DebugOptions::default()).expect("images");
    let cache = SymbolCache::new();
    let unwinder = Unwinder::with_cache(&images, UnwindOptions::default(), &cache);
    let main_thread = snap
        .threads
        .iter()
        .find(|t| t.tid == pid)
        .expect("the main thread");
    let regs = main_thread.registers.clone().expect("its registers");
    let frames = unwinder.unwind(&snap.stacks, &regs).frames.len();
    assert!(frames > 1000, "the deep fixture gave {frames} frames");

    let mut g = c.benchmark_group("unwind");
    g.throughput(Throughput::Elements(frames as u64));
    g.bench_function("deep", |b| b.iter(|| unwinder.unwind(&snap.stacks, &regs)));
    g.finish();

    let stack = unwinder.unwind(&snap.stacks, &regs);
    let mut g = c.benchmark_group("symbolise");
    g.throughput(Throughput::Elements(frames as u64));
    g.bench_function("deep", |b| b.iter(|| unwinder.thread_stack(pid, &stack)));
    g.finish();

    let mut g = c.benchmark_group("snapshot");
    g.bench_function("deep", |b| {
        b.iter(|| {
            snapshot_live(&tracer, pid, DataModel::LP64, &SnapshotOptions::default())
                .expect("snapshot")
        })
    });
    g.finish();

    let _ = child.kill();
    let _ = child.wait();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
