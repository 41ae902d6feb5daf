//! The bundled demo job (`mpir-demo/demo/*.c`) compiled for a test: shared by the session's
//! tests that run it.

#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::Command;

use mpir_target::testkit::{Scratch, run, scratch, skip};

/// The demo's starter and rank, compiled side by side into scratch directory `name` (the
/// starter finds the rank there): the directory and the starter; `None` after a skip (no
/// sources, as in a crate tarball, or no C compiler).
pub fn demo(name: &str) -> Option<(Scratch, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-demo/demo");
    if !src.join("starter.c").is_file() {
        skip(&format!("the demo sources are not at {}", src.display()));
        return None;
    }
    let dir = scratch(name);
    for (c, exe) in [
        ("starter.c", "mpir-demo-starter"),
        ("rank.c", "mpir-demo-rank"),
    ] {
        if let Err(e) = run(Command::new("cc")
            .args(["-std=gnu11", "-g", "-O0", "-o"])
            .arg(dir.join(exe))
            .arg(src.join(c)))
        {
            skip(&e);
            return None;
        }
    }
    let starter = dir.join("mpir-demo-starter");
    Some((dir, starter))
}
