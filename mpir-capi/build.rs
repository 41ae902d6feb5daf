//! libmpir.so: the symbol versions of `mpir.map`, and the soname `libmpir.so.0` (cargo-c sets
//! the same when it builds the library).
//!
//! rustc gives the linker its own, anonymous version script for a cdylib. GNU ld refuses a
//! second, named one next to it ("anonymous version tag cannot be combined with other version
//! tags"); LLVM's lld merges them. rustc ≥ 1.90 links with lld on x86_64 Linux already; older
//! toolchains (the workspace's rust-version, 1.88) are told to use the lld they ship too
//! (`gcc-ld/ld.lld` in the sysroot, the wrapper rustc itself uses), for the cdylib only.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    println!("cargo:rerun-if-changed=mpir.map");
    println!("cargo:rerun-if-changed=build.rs");
    match rust_lld_dir() {
        Some(gcc_ld) => {
            println!("cargo:rustc-cdylib-link-arg=-B{}", gcc_ld.display());
            println!("cargo:rustc-cdylib-link-arg=-fuse-ld=lld");
        }
        None => println!(
            "cargo:warning=the toolchain ships no gcc-ld/ld.lld: libmpir.so is linked with the \
             default linker, which must accept two version scripts (GNU ld does not)"
        ),
    }
    println!("cargo:rustc-cdylib-link-arg=-Wl,--version-script={dir}/mpir.map");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmpir.so.0");
}

/// The sysroot's `lib/rustlib/<host>/bin/gcc-ld`, when it holds `ld.lld`.
fn rust_lld_dir() -> Option<PathBuf> {
    let rustc = std::env::var_os("RUSTC")?;
    let host = std::env::var("HOST").ok()?;
    let out = Command::new(rustc)
        .args(["--print", "sysroot"])
        .output()
        .ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let dir = PathBuf::from(sysroot.trim())
        .join("lib/rustlib")
        .join(host)
        .join("bin/gcc-ld");
    dir.join("ld.lld").is_file().then_some(dir)
}
