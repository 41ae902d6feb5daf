//! # mpir-benches
//!
//! Criterion benchmarks of the mpir-rs crates (`cargo bench -p mpir-benches`) and the
//! comparison command (`cargo run --release -p mpir-benches --bin compare`), which measures,
//! in one run, our crates against gdb doing the same job and against a raw floor. Results are
//! recorded in `BENCHMARKS.md` at the repository root.
//!
//! This library holds what both share: the fake starter with a large process table and the
//! raw floor that reads it ([`proctable`]), and the real MPI jobs, gdb runs and timing helpers
//! ([`stacks`]), and the peers of the stack benchmarks: gdb and eu-stack backtraces of the same
//! processes ([`backtraces`]).

pub mod backtraces;
pub mod proctable;
pub mod stacks;

use std::hint::black_box;
use std::time::Instant;

/// Median of `runs` timings of `f`, in seconds.
pub fn median<R>(runs: usize, f: impl FnMut() -> R) -> f64 {
    median_spaced(runs, std::time::Duration::ZERO, f)
}

/// [`median`] of runs spaced `gap` apart: the wait before each run is not timed (a PRRTE
/// server needs its PMIx tools apart, see `mpir_pmix::TURN_GAP`).
pub fn median_spaced<R>(runs: usize, gap: std::time::Duration, mut f: impl FnMut() -> R) -> f64 {
    let mut t: Vec<f64> = (0..runs.max(1))
        .map(|_| {
            std::thread::sleep(gap);
            let start = Instant::now();
            black_box(f());
            start.elapsed().as_secs_f64()
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Whether `tool` is on `PATH`.
pub fn have(tool: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A scratch directory for one bench run, removed on drop.
pub struct Scratch(pub std::path::PathBuf);

impl Scratch {
    /// `$TMPDIR/mpir-bench-<name>-<pid>`.
    pub fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("mpir-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
