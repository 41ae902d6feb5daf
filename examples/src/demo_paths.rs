//! Where the bundled demo job's programs are: `build.rs` compiles `../mpir-cli/demo/starter.c`
//! and `rank.c` into the build's `OUT_DIR`, and these paths are baked in at compile time.
//!
//! Use it from a program of this crate with
//! `#[path = "../demo_paths.rs"] mod demo_paths;` (from `src/bin/`) or
//! `#[path = "../src/demo_paths.rs"] mod demo_paths;` (from `tests/`).
//!
//! The starter: `mpir-demo-starter [-n N] [--lifetime SECS] [--rank PATH] [-q]` (4 ranks and
//! 300 s by default; it finds `mpir-demo-rank` next to itself).

#![allow(dead_code)] // each program that includes this uses part of it

use std::path::PathBuf;

/// The starter as built (it finds the rank program next to itself).
pub(crate) const STARTER: &str = concat!(env!("OUT_DIR"), "/mpir-demo-starter");
/// The rank program as built.
pub(crate) const RANK: &str = concat!(env!("OUT_DIR"), "/mpir-demo-rank");

/// The starter: `$MPIR_DEMO_DIR/mpir-demo-starter` when that variable is set (for a copy
/// installed elsewhere), else [`STARTER`]; an error saying so when it is not there.
pub(crate) fn starter() -> Result<PathBuf, String> {
    let path = match std::env::var_os("MPIR_DEMO_DIR") {
        Some(dir) => PathBuf::from(dir).join("mpir-demo-starter"),
        None => PathBuf::from(STARTER),
    };
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "the demo job's starter is not at {} (it is built by mpir-examples' build script; \
             rebuild, or set MPIR_DEMO_DIR to a directory holding mpir-demo-starter and mpir-demo-rank)",
            path.display()
        ))
    }
}
