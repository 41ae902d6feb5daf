//! Builds the wait-state preload library (`lib/mpir_waits.c`, which includes
//! `lib/mpir_waits_calls.inc` and `lib/mpir_waits.h`, and the cooperative channel
//! `lib/mpir_coop.c` with `lib/mpir_coop.h`, COOP.md) into `OUT_DIR/libmpir_waits.so` with the
//! C compiler (`$CC`, else `cc`). It links only libc (and libdl): no MPI library, so that one
//! binary serves every MPI it is preloaded under. `src/lib.rs` embeds the result.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    println!("cargo:rerun-if-env-changed=CC");
    for f in [
        "mpir_waits.c",
        "mpir_waits_calls.inc",
        "mpir_waits.h",
        "mpir_coop.c",
        "mpir_coop.h",
    ] {
        println!("cargo:rerun-if-changed=lib/{f}");
    }
    let mut cmd = Command::new(&cc);
    cmd.args([
        "-std=gnu11",
        "-O2",
        "-g",
        "-fPIC",
        "-shared",
        "-fvisibility=hidden",
        "-Wall",
        "-Wextra",
        "-Werror",
        "-o",
    ])
    .arg(out.join("libmpir_waits.so"))
    .arg("lib/mpir_waits.c")
    .arg("lib/mpir_coop.c")
    .args(["-ldl", "-pthread"]);
    let status = cmd.status().unwrap_or_else(|e| {
        panic!(
            "mpir-waits: the preload library needs a C compiler, and `{cc}` cannot be run ({e}). \
             Install one (e.g. `apt-get install gcc`) or point CC at it."
        )
    });
    assert!(
        status.success(),
        "mpir-waits: compiling the preload library failed: {cmd:?} exited with {status}"
    );
}
