//! Reading a 1M-entry process descriptor table from a live process (a fake starter compiled at
//! run time, its table already filled), against a raw floor in the same run.
//!
//! - `ours/<strings>`: `read_proctable` over `LiveTarget`: symbols and DWARF layout from the
//!   process's images, one bulk table read, batched and coalesced string reads, resolution
//!   into ranks.
//! - `floor/<strings>`: the least a reader must do, written for this one layout: one
//!   `process_vm_readv` of the table, `from_le_bytes`, the distinct string addresses sorted, and
//!   `process_vm_readv` of 64 bytes per string, 1024 strings per call, and one `(host index,
//!   executable index, pid)` per rank. No symbols, no checks, no string decoding.
//!
//! `<strings>` is `shared` (16 host strings and one executable string, as the spec asks) or
//! `dup` (two strings per entry, as some starters do). After each mode, a `compare/<strings>`
//! line gives medians of ours and the floor and one run of gdb's Python walk of the same table
//! (`gdb/proctable.py`; skipped when `MPIR_BENCH_NO_GDB` is set). Results in BENCHMARKS.md.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mpir_benches::proctable::{compile, floor, gdb_walk, start};
use mpir_benches::{Scratch, median};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::proctable::{ReadOptions, read_proctable};

const N: usize = 1 << 20;

/// The comparison in one run: ours, the floor and gdb on the same process.
fn compare(mode: &str, pid: u32, table: u64, target: &LiveTarget) {
    let ours = median(5, || {
        read_proctable(target, &ReadOptions::default()).unwrap()
    });
    let raw = median(5, || floor(pid, table, N));
    let gdb = if std::env::var_os("MPIR_BENCH_NO_GDB").is_some() {
        Err("MPIR_BENCH_NO_GDB is set".to_string())
    } else {
        gdb_walk(pid)
    };
    let gdb_text = match gdb {
        Ok(g) => format!("gdb {g:.2} s, gdb/ours {:.0}x", g / ours),
        Err(e) => format!("gdb not measured ({e})"),
    };
    println!(
        "compare/{mode}: ours {:.1} ms, floor {:.1} ms, ours/floor {:.2}x, {gdb_text} \
         (medians of 5)",
        ours * 1e3,
        raw * 1e3,
        ours / raw
    );
}

fn bench(c: &mut Criterion) {
    let dir = Scratch::new("live");
    let exe = compile(&dir.0);
    let mut g = c.benchmark_group("live_proctable_1M");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    for mode in ["shared", "dup"] {
        let starter = start(&exe, N, mode);
        let pid = starter.pid();
        let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
        g.bench_function(format!("ours/{mode}"), |b| {
            b.iter(|| {
                let t = read_proctable(&target, &ReadOptions::default()).unwrap();
                assert_eq!(t.resolved.entries.len(), N);
                t
            })
        });
        g.bench_function(format!("floor/{mode}"), |b| {
            b.iter(|| floor(black_box(pid), starter.table, N))
        });
        compare(mode, pid, starter.table, &target);
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
