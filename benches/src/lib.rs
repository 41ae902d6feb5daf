//! # mpir-benches
//!
//! Criterion benchmarks of the mpir-rs crates; run with `cargo bench -p mpir-benches`.
//! Results, with the raw floor measured in the same run, are recorded in `BENCHMARKS.md` at the
//! repository root. Later issues add string reading from live processes, queue walking, and a
//! comparison command against gdb.
