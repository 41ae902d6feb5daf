//! Builds the bundled demo job (`demo/starter.c`, `demo/rank.c`) into `OUT_DIR` with the C
//! compiler (`$CC`, else `cc`), with `-g -O0` so that the ranks' DWARF describes the MPICH
//! structures as declared. `src/lib.rs` embeds the results.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let dir = Path::new("demo");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    println!("cargo:rerun-if-env-changed=CC");
    println!("cargo:rerun-if-changed=demo/mpich41.h");
    for (src, exe) in [
        ("starter.c", "mpir-demo-starter"),
        ("rank.c", "mpir-demo-rank"),
    ] {
        println!("cargo:rerun-if-changed=demo/{src}");
        let mut cmd = Command::new(&cc);
        cmd.args(["-std=gnu11", "-g", "-O0", "-Wall", "-Wextra", "-o"])
            .arg(out.join(exe))
            .arg(dir.join(src));
        let status = cmd.status().unwrap_or_else(|e| {
            panic!(
                "mpir-demo: the bundled demo job needs a C compiler, and `{cc}` cannot be run ({e}). \
                 Install one (e.g. `apt-get install gcc`) or point CC at it."
            )
        });
        assert!(
            status.success(),
            "mpir-demo: compiling the demo job failed: {cmd:?} exited with {status}"
        );
    }
}
