//! Hosting an MQD DLL in process and out of process, on a job with thousands of pending
//! operations: the C walker DLL of mpir-mqd's tests (`mpir-mqd/tests/fixtures/walker_dll.c`,
//! compiled here with `cc`) walks a MockTarget holding one communicator with N pending
//! receives and N pending sends, purely through the callbacks (per operation: 7 field reads
//! and their byte-order conversions).
//!
//! - `in_process/<n>`: `mpir_mqd::Host` (DLL in this process).
//! - `out_of_process/<n>`: `mpir_mqd::OutOfProcessHost` (DLL in `mpir-mqd-host`, every read
//!   and lookup a question over the pipe; the default page cache on).
//! - `out_of_process_uncached/<n>`: the same with the read cache off (one round trip per
//!   `fetch_data`): the cost the cache removes.
//!
//! The helper is built here (`cargo build --release -p mpir-mqd --bin mpir-mqd-host`) and
//! found next to this executable, or taken from `$MPIR_MQD_HOST`. Results and the command are in BENCHMARKS.md.

use std::hint::black_box;
use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use mpir_mqd::{HelperOptions, Host, HostOptions, OutOfProcessHost, ProcessSpec, QueueHost};
use mpir_target::MockTarget;
use mpir_types::mqd::LengthUnit;
use mpir_types::{DataModel, LayoutSource, TypeLayout};

const SIZES: [u64; 2] = [1_000, 10_000];

fn walker_dll() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpir-bench-mqd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let out = dir.join("libwalker.so");
    let src = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../mpir-mqd/tests/fixtures/walker_dll.c"
    );
    let status = Command::new("cc")
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(src)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc failed");
    out
}

fn helper() -> PathBuf {
    if std::env::var_os(mpir_mqd::HELPER_ENV).is_none() {
        // Always (re)built: a helper left from an older checkout speaks an older protocol.
        let status = Command::new(env!("CARGO"))
            .args([
                "build",
                "--release",
                "-p",
                "mpir-mqd",
                "--bin",
                mpir_mqd::HELPER_NAME,
            ])
            .status()
            .expect("run cargo");
        assert!(status.success(), "building the helper failed");
    }
    mpir_mqd::find_helper(None).expect("the helper")
}

/// LP64 layouts of the walker's `fake_comm` and `fake_op` (see walker_dll.c).
fn target(n: u64) -> MockTarget {
    let m = DataModel::LP64;
    let mut b = MockTarget::builder(m);
    let comm = TypeLayout::new("fake_comm", 64, LayoutSource::Given)
        .with_member("next", 0, 8)
        .with_member("id", 8, 8)
        .with_member("rank", 16, 4)
        .with_member("size", 20, 4)
        .with_member("name", 24, 8)
        .with_member("group", 32, 8)
        .with_member("sends", 40, 8)
        .with_member("recvs", 48, 8)
        .with_member("unexpected", 56, 8);
    let op = TypeLayout::new("fake_op", 48, LayoutSource::Given)
        .with_member("next", 0, 8)
        .with_member("peer", 8, 4)
        .with_member("tag", 12, 4)
        .with_member("count", 16, 8)
        .with_member("buf", 24, 8)
        .with_member("seq", 32, 8)
        .with_member("flags", 40, 2);
    b.type_layout(comm);
    b.type_layout(op);
    b.function("fake_mpi_init");
    // Each list in one contiguous block, like objects of a real heap (mapped by whole pages;
    // the mock leaves holes between separate allocations, which no real heap page has).
    let list = |b: &mut mpir_target::mock::MockTargetBuilder, tag_base: i64| {
        let block = b.alloc(48 * n);
        let mut next = 0u64;
        for i in (0..n).rev() {
            let at = block + 48 * i;
            b.write_with(at, 48, |v| {
                v.put_uint(0, 8, next, "next")?;
                v.put_int(8, 4, (i % 2) as i64, "peer")?;
                v.put_int(12, 4, tag_base + (i % 1000) as i64, "tag")?;
                v.put_int(16, 8, 64, "count")?;
                v.put_uint(24, 8, 0x10_0000 + i * 64, "buf")?;
                v.put_int(32, 8, i as i64, "seq")?;
                v.put_int(40, 2, 0, "flags")
            });
            next = at;
        }
        next
    };
    let sends = list(&mut b, 0);
    let recvs = list(&mut b, 5000);
    let name = b.cstring("MPI_COMM_WORLD");
    let group = b.alloc(8);
    b.write_with(group, 8, |v| {
        v.put_int(0, 4, 0, "g0")?;
        v.put_int(4, 4, 1, "g1")
    });
    let c = b.alloc(64);
    b.write_with(c, 64, |v| {
        v.put_uint(0, 8, 0, "next")?;
        v.put_uint(8, 8, 1, "id")?;
        v.put_int(16, 4, 0, "rank")?;
        v.put_int(20, 4, 2, "size")?;
        v.put_uint(24, 8, name, "name")?;
        v.put_uint(32, 8, group, "group")?;
        v.put_uint(40, 8, sends, "sends")?;
        v.put_uint(48, 8, recvs, "recvs")?;
        v.put_uint(56, 8, 0, "unexpected")
    });
    b.pointer_variable("fake_comm_head", c);
    b.build()
}

fn walk(host: &mut dyn QueueHost, p: mpir_mqd::ProcessId, n: u64) {
    let comms = host.queues(p).expect("queues");
    assert_eq!(comms[0].sends.operations().len() as u64, n);
    assert_eq!(comms[0].receives.operations().len() as u64, n);
    black_box(comms);
}

fn attach(host: &mut dyn QueueHost, target: &Rc<MockTarget>) -> mpir_mqd::ProcessId {
    host.attach(ProcessSpec::new(
        "/bench/app",
        Rc::clone(target) as Rc<dyn mpir_target::Target>,
        Some(0),
    ))
    .expect("attach")
}

fn bench(c: &mut Criterion) {
    let dll = walker_dll();
    let helper = helper();
    let options = HostOptions::default().with_length_unit(LengthUnit::Bytes);
    let mut g = c.benchmark_group("mqd_walk");
    g.sample_size(20);
    for n in SIZES {
        let target = Rc::new(target(n));
        g.throughput(Throughput::Elements(2 * n));
        {
            // SAFETY: the walker DLL is the project's own test fixture, built for this host.
            let mut host = unsafe { Host::load(&dll, options.clone()) }.expect("load");
            let p = attach(&mut host, &target);
            g.bench_with_input(BenchmarkId::new("in_process", n), &n, |b, &n| {
                b.iter(|| walk(&mut host, p, n))
            });
        }
        for (name, cache) in [("out_of_process", true), ("out_of_process_uncached", false)] {
            let mut host = OutOfProcessHost::spawn(
                &dll,
                options.clone(),
                HelperOptions::default()
                    .with_program(&helper)
                    .with_read_cache(cache),
            )
            .expect("spawn");
            let p = attach(&mut host, &target);
            g.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                b.iter(|| walk(&mut host, p, n))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
