//! A fake starter (mpir-target's `fake_starter.c`) holding an N-entry `MPIR_proctable`, the
//! raw floor that reads it, and gdb's walk of the same table.

use std::io::{BufRead, BufReader, IoSliceMut};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

/// A running fake starter whose table is filled. Killed on drop.
pub struct Starter {
    /// The process.
    pub child: Child,
    /// Address of its table.
    pub table: u64,
    /// Entries.
    pub n: usize,
}

impl Starter {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Starter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Compiles the fake starter into `dir` (optimised, with DWARF).
pub fn compile(dir: &Path) -> PathBuf {
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
    exe
}

/// Starts the fake starter with `n` entries; `mode` is `shared` (16 host strings and one
/// executable string, as the spec asks) or `dup` (two strings per entry).
pub fn start(exe: &Path, n: usize, mode: &str) -> Starter {
    let mut child = Command::new(exe)
        .args([n.to_string().as_str(), mode])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the fake starter");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("the starter's first line");
    let table = line
        .split_whitespace()
        .next()
        .and_then(|w| u64::from_str_radix(w.trim_start_matches("table=0x"), 16).ok())
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
    Starter { child, table, n }
}

/// The least a reader must do, written for this one layout: one `process_vm_readv` of the
/// table, `from_le_bytes`, the distinct string addresses sorted, `process_vm_readv` of 64
/// bytes per string, 1024 strings per call, and one `(host index, executable index, pid)` per
/// rank. No symbols, no checks, no string decoding.
pub fn floor(pid: u32, table: u64, n: usize) -> (usize, Vec<(u32, u32, i32)>) {
    let pid = Pid::from_raw(pid as i32);
    let mut bytes = vec![0u8; n * 24];
    let got = process_vm_readv(
        pid,
        &mut [IoSliceMut::new(&mut bytes)],
        &[RemoteIoVec {
            base: table as usize,
            len: n * 24,
        }],
    )
    .expect("read the table");
    assert_eq!(got, n * 24);
    let word = |e: &[u8], at: usize| u64::from_le_bytes(e[at..at + 8].try_into().unwrap());
    let mut addrs: Vec<u64> = bytes
        .chunks_exact(24)
        .flat_map(|e| [word(e, 0), word(e, 8)])
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
    let index = |a: u64| addrs.binary_search(&a).map_or(u32::MAX, |i| i as u32);
    let ranks = bytes
        .chunks_exact(24)
        .map(|e| {
            (
                index(word(e, 0)),
                index(word(e, 8)),
                i32::from_le_bytes(e[16..20].try_into().unwrap()),
            )
        })
        .collect();
    (total, ranks)
}

/// Seconds gdb's Python walk of the table takes (`gdb/proctable.py`, timed inside gdb after
/// attach and symbol loading), or why it could not run.
pub fn gdb_walk(pid: u32) -> Result<f64, String> {
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

/// The least a tool must do for `mpir attach --json` on this table: [`floor`]'s raw read,
/// then the same per-rank JSON records (`rank`, `host`, `local`, `executable`, `pid`,
/// `control`, pretty-printed the way `mpir` prints them) written by a minimal formatter,
/// without escaping or checks, through a 256 KiB buffer into a pipe read to the end by another
/// thread — the output `mpir` must produce, at the least cost. Seconds.
pub fn floor_document(pid: u32, table: u64, n: usize) -> f64 {
    use std::io::{Read, Write};
    let (mut reader, writer) = std::io::pipe().expect("pipe");
    let drain = std::thread::spawn(move || {
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0usize;
        while let Ok(k) = reader.read(&mut buf) {
            if k == 0 {
                break;
            }
            total += k;
        }
        total
    });
    let start = std::time::Instant::now();
    let (_, ranks) = floor(pid, table, n);
    let mut w = std::io::BufWriter::with_capacity(1 << 18, writer);
    // The names: in the fake starter, host i % 16 is node%02d and one executable.
    let hosts: Vec<String> = (0..16).map(|h| format!("node{h:02}")).collect();
    w.write_all(b"{\n  \"ranks\": [\n").expect("write");
    for (i, (h, _e, p)) in ranks.iter().enumerate() {
        let host = hosts.get(*h as usize % 16).map_or("?", String::as_str);
        write!(
            w,
            "    {{\n      \"rank\": {i},\n      \"host\": \"{host}\",\n      \"local\": false,\n      \"executable\": \"/x/fake_starter\",\n      \"pid\": {p},\n      \"control\": \"remote\"\n    }},\n"
        )
        .expect("write");
    }
    w.write_all(b"  ]\n}\n").expect("write");
    drop(w);
    let _ = drain.join();
    start.elapsed().as_secs_f64()
}
