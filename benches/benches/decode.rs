//! Decoding a 1M-entry process descriptor table, against a hand-written floor in the same run.
//!
//! - `ours/<model>`: `mpir_types::mpir::decode_proctable` (layout-driven, bounds-checked,
//!   endian- and width-generic).
//! - `floor/lp64`: the fastest honest code for one fixed layout: `chunks_exact(24)` and
//!   `from_le_bytes`, no generality, no error context.
//! - `resolve_shared`: turning the raw entries into ranks with 2 shared strings.
//! - `mock_read_proctable`: the whole synchronous reader over a MockTarget (symbols, bulk read,
//!   batched strings, resolution).
//!
//! Results and the command to reproduce them are in BENCHMARKS.md.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mpir_target::mock::{MockStarter, MockTarget};
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_types::DataModel;
use mpir_types::mpir::{self, ProcDescLayout, RawProcDesc};

const N: u64 = 1 << 20;

fn table(model: &DataModel) -> Vec<u8> {
    let layout = ProcDescLayout::abi(model);
    let raw: Vec<RawProcDesc> = (0..N)
        .map(|i| RawProcDesc {
            host_name: 0x1000 + (i % 64) * 16,
            executable_name: 0x9000,
            pid: (i + 100) as i64,
        })
        .collect();
    let mut bytes = vec![0u8; (layout.size * N) as usize];
    mpir::encode_proctable(model, &layout, 0x10_0000, &raw, &mut bytes).unwrap();
    bytes
}

fn floor_lp64(bytes: &[u8]) -> Vec<RawProcDesc> {
    bytes
        .chunks_exact(24)
        .map(|c| RawProcDesc {
            host_name: u64::from_le_bytes(c[0..8].try_into().unwrap()),
            executable_name: u64::from_le_bytes(c[8..16].try_into().unwrap()),
            pid: i64::from(i32::from_le_bytes(c[16..20].try_into().unwrap())),
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("proctable_decode_1M");
    g.throughput(Throughput::Elements(N));
    g.sample_size(20);
    for model in [DataModel::LP64, DataModel::ILP32_BE] {
        let bytes = table(&model);
        let layout = ProcDescLayout::abi(&model);
        g.bench_function(format!("ours/{model}"), |b| {
            b.iter(|| mpir::decode_proctable(&model, &layout, 0x10_0000, black_box(&bytes), N))
        });
    }
    let bytes = table(&DataModel::LP64);
    g.bench_function("floor/lp64", |b| b.iter(|| floor_lp64(black_box(&bytes))));
    let raw = floor_lp64(&bytes);
    let addresses = mpir::string_addresses(&raw);
    let strings: Vec<Result<&[u8], String>> =
        addresses.iter().map(|_| Ok(&b"node0001"[..])).collect();
    g.bench_function("resolve_shared", |b| {
        b.iter(|| mpir::resolve(black_box(&raw), &addresses, &strings))
    });
    let mut builder = MockTarget::builder(DataModel::LP64);
    MockStarter::uniform(N as usize, 64, "/opt/app/bin/solver", 1000).place(&mut builder);
    let target = builder.build();
    g.bench_function("mock_read_proctable", |b| {
        b.iter(|| read_proctable(&target, &ReadOptions::default()).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
