//! Test support for mpir-acquire's live tests: C fixtures compiled at test time, skip-or-fail
//! for missing MPI stacks, and process-state checks.
#![allow(dead_code, unused_imports, unreachable_pub, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub use mpir_target::testkit::{
    Scratch, assert_untouched, have, run, scratch, skip, status_field, wait_for,
};

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Compiles fixture `name`.c into `dir` with extra flags; `None` (and a skip) without a C
/// compiler.
pub fn build(dir: &Path, name: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let exe = dir.join(out);
    let r = run(Command::new("cc")
        .args(flags)
        .arg("-pthread")
        .arg(fixtures().join(format!("{name}.c")))
        .arg("-o")
        .arg(&exe));
    match r {
        Ok(_) => Some(exe),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

/// The (rank, pid) pairs a job's ranks printed ("rank R pid P").
pub fn printed_ranks(output: &str) -> Vec<(u64, i64)> {
    let mut v: Vec<(u64, i64)> = output
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "pid", p] => Some((r.parse().ok()?, p.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    v.sort_unstable();
    v
}

/// `AT_ENTRY` of process `pid` (from `/proc/PID/auxv`, a 64-bit process).
pub fn entry_point(pid: u32) -> u64 {
    let auxv = std::fs::read(format!("/proc/{pid}/auxv")).unwrap();
    auxv.chunks_exact(16)
        .map(|kv| {
            let (k, v) = kv.split_at(8);
            (
                u64::from_ne_bytes(k.try_into().unwrap()),
                u64::from_ne_bytes(v.try_into().unwrap()),
            )
        })
        .find(|&(k, _)| k == 9)
        .map(|(_, v)| v)
        .expect("AT_ENTRY")
}

/// The run-time address of `name` in `pid`.
pub fn symbol_address(pid: u32, name: &str) -> u64 {
    use mpir_target::SymbolLookupExt;
    let t = mpir_target::live::LiveTarget::open(pid, Default::default()).unwrap();
    t.require_symbol(name).unwrap().address
}

/// Asserts that the loaded segment holding each run-time address of `addresses` reads, in
/// process `pid`, exactly as in the ELF file mapped there: no breakpoint byte (or any other
/// change) is left in that code. The file is the oracle, not anything we recorded while
/// tracing.
pub fn assert_code_as_in_file(pid: u32, addresses: &[u64]) {
    use mpir_target::MemoryExt;
    let images = mpir_target::debuginfo::ProcessImages::for_pid(pid, Default::default())
        .unwrap_or_else(|e| panic!("images of {pid}: {e}"));
    let memory = mpir_target::live::LiveMemory::new(pid, mpir_types::DataModel::host());
    for &address in addresses {
        let (image, seg) = images
            .images()
            .iter()
            .find_map(|i| {
                let link = address.wrapping_sub(i.bias());
                i.elf()
                    .segments()
                    .iter()
                    .find(|s| (s.vaddr..s.vaddr + s.file_size).contains(&link))
                    .map(|s| (i, *s))
            })
            .unwrap_or_else(|| panic!("pid {pid}: {address:#x} is in no loaded segment"));
        let file = std::fs::read(image.path()).unwrap();
        let start = seg.offset as usize;
        let want = &file[start..start + seg.file_size as usize];
        let got = memory
            .read_vec(seg.vaddr + image.bias(), seg.file_size)
            .unwrap_or_else(|e| panic!("pid {pid}: read the segment of {address:#x}: {e}"));
        if let Some(i) = want.iter().zip(&got).position(|(a, b)| a != b) {
            panic!(
                "pid {pid}: {} differs from its file at {:#x} (segment of {address:#x}): \
                 {:#04x} in the process, {:#04x} in the file",
                image.path().display(),
                seg.vaddr + image.bias() + i as u64,
                got[i],
                want[i]
            );
        }
    }
}

/// Whether `pid` runs (exists and is not a zombie).
pub fn is_running(pid: u32) -> bool {
    let s = status_field(pid, "State:");
    !s.is_empty() && !s.starts_with('Z')
}

/// The value of the C `int` variable `name` in process `pid`.
pub fn read_int(pid: u32, name: &str) -> i64 {
    use mpir_target::{MemoryExt, SymbolLookupExt};
    let t = mpir_target::live::LiveTarget::open(pid, Default::default()).unwrap();
    let a = t.require_symbol(name).unwrap().address;
    t.read_c_int(a, name).unwrap()
}

/// The job's output lines with every pid replaced by `P`, sorted: what must not change
/// between an undisturbed run and a disturbed one.
pub fn normalized(output: &str) -> Vec<String> {
    let mut v: Vec<String> = output
        .lines()
        .map(|l| {
            let mut out = Vec::new();
            let mut mask = false;
            for w in l.split_whitespace() {
                if mask {
                    out.push("P".to_string());
                    mask = false;
                } else if let Some(rest) = w.strip_prefix("pid=") {
                    out.push(format!("pid={}", if rest.is_empty() { "" } else { "P" }));
                } else {
                    mask = w == "pid";
                    out.push(w.to_string());
                }
            }
            out.join(" ")
        })
        .collect();
    v.sort();
    v
}
