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
use std::io::{BufRead, BufReader, IoSliceMut};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::proctable::{ReadOptions, read_proctable};
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

const N: usize = 1 << 20;

struct Starter {
    child: Child,
    table: u64,
}

impl Drop for Starter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(exe: &Path, mode: &str) -> Starter {
    let mut child = Command::new(exe)
        .args([N.to_string().as_str(), mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the fake starter");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    let table = u64::from_str_radix(
        line.split_whitespace()
            .next()
            .unwrap()
            .trim_start_matches("table=0x"),
        16,
    )
    .unwrap();
    Starter { child, table }
}

fn floor(pid: u32, table: u64) -> (usize, Vec<(u32, u32, i32)>) {
    let pid = Pid::from_raw(pid as i32);
    let mut bytes = vec![0u8; N * 24];
    let got = process_vm_readv(
        pid,
        &mut [IoSliceMut::new(&mut bytes)],
        &[RemoteIoVec {
            base: table as usize,
            len: N * 24,
        }],
    )
    .unwrap();
    assert_eq!(got, N * 24);
    let mut addrs: Vec<u64> = bytes
        .chunks_exact(24)
        .flat_map(|e| {
            [
                u64::from_le_bytes(e[0..8].try_into().unwrap()),
                u64::from_le_bytes(e[8..16].try_into().unwrap()),
            ]
        })
        .collect();
    addrs.sort_unstable();
    addrs.dedup();
    let mut strings = vec![0u8; addrs.len() * 64];
    let mut total = 0;
    for (chunk_addrs, chunk_buf) in addrs.chunks(1024).zip(strings.chunks_mut(1024 * 64)) {
        let remote: Vec<RemoteIoVec> = chunk_addrs
            .iter()
            .map(|&a| RemoteIoVec {
                base: a as usize,
                len: 64,
            })
            .collect();
        let mut local: Vec<IoSliceMut<'_>> =
            chunk_buf.chunks_mut(64).map(IoSliceMut::new).collect();
        total += process_vm_readv(pid, &mut local, &remote).unwrap_or(0);
    }
    // One result per rank, as a reader must give: string indices and the pid.
    let index = |a: u64| addrs.binary_search(&a).map_or(u32::MAX, |i| i as u32);
    let ranks = bytes
        .chunks_exact(24)
        .map(|e| {
            (
                index(u64::from_le_bytes(e[0..8].try_into().unwrap())),
                index(u64::from_le_bytes(e[8..16].try_into().unwrap())),
                i32::from_le_bytes(e[16..20].try_into().unwrap()),
            )
        })
        .collect();
    (total, ranks)
}

/// Seconds gdb's Python walk of the same table takes (after attach and symbol loading), or
/// why it could not run.
fn gdb_walk(pid: u32) -> Result<f64, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("gdb/proctable.py");
    let out = Command::new("gdb")
        .args(["-nx", "-batch", "-p", &pid.to_string(), "-x"])
        .arg(&script)
        .output()
        .map_err(|e| format!("gdb: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| l.split("seconds=").nth(1)?.trim().parse().ok())
        .ok_or_else(|| {
            format!(
                "no result from gdb: {}",
                String::from_utf8_lossy(&out.stderr)
            )
        })
}

/// Median of `runs` timings of `f`, in seconds.
fn median<R>(runs: usize, mut f: impl FnMut() -> R) -> f64 {
    let mut t: Vec<f64> = (0..runs)
        .map(|_| {
            let start = std::time::Instant::now();
            black_box(f());
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[runs / 2]
}

/// The comparison in one run: ours, the floor and gdb on the same process.
fn compare(mode: &str, pid: u32, table: u64, target: &LiveTarget) {
    let ours = median(5, || {
        read_proctable(target, &ReadOptions::default()).unwrap()
    });
    let raw = median(5, || floor(pid, table));
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
    let dir = std::env::temp_dir().join(format!("mpir-bench-live-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-target/tests/fixtures");
    let exe = dir.join("fake_starter");
    let ok = Command::new("cc")
        .args(["-O2", "-g"])
        .arg(format!("-I{}", fixtures.display()))
        .arg(fixtures.join("fake_starter.c"))
        .arg("-o")
        .arg(&exe)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "cannot compile the fake starter");
    let mut g = c.benchmark_group("live_proctable_1M");
    g.throughput(Throughput::Elements(N as u64));
    g.sample_size(10);
    for mode in ["shared", "dup"] {
        let starter = start(&exe, mode);
        let pid = starter.child.id();
        let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
        g.bench_function(format!("ours/{mode}"), |b| {
            b.iter(|| {
                let t = read_proctable(&target, &ReadOptions::default()).unwrap();
                assert_eq!(t.resolved.entries.len(), N);
                t
            })
        });
        g.bench_function(format!("floor/{mode}"), |b| {
            b.iter(|| floor(black_box(pid), starter.table))
        });
        compare(mode, pid, starter.table, &target);
    }
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
