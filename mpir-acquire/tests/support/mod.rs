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
