//! The committed header (include/mpir.h) is what cbindgen makes of the crate today, and it
//! compiles as C99 and C++11 with every warning an error. `MPIR_BLESS=1` rewrites it.
//!
//! cbindgen is a tool, not a dependency (its licence is not among those the workspace allows):
//! `$MPIR_CBINDGEN`, else `cbindgen` on the PATH, else CI's cache
//! (/var/cache/mpir-rs/cargo-bin/bin, where scripts/ci-capi.sh installs it).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{crate_dir, need};
use mpir_target::testkit::{have, scratch, skip};

fn cbindgen() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIR_CBINDGEN") {
        return Some(PathBuf::from(p));
    }
    if have("cbindgen") {
        return Some(PathBuf::from("cbindgen"));
    }
    let cached = PathBuf::from("/var/cache/mpir-rs/cargo-bin/bin/cbindgen");
    cached.is_file().then_some(cached)
}

#[test]
fn the_committed_header_is_cbindgens_output() {
    let Some(tool) = cbindgen() else {
        skip("cbindgen is not installed (scripts/ci-capi.sh installs it)");
        return;
    };
    let dir = scratch("header");
    let fresh = dir.join("mpir.h");
    let out = Command::new(&tool)
        .current_dir(crate_dir())
        .args([
            "--quiet",
            "--config",
            "cbindgen.toml",
            "--crate",
            "mpir-capi",
            "--output",
        ])
        .arg(&fresh)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", tool.display()));
    assert!(
        out.status.success(),
        "cbindgen failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fresh = std::fs::read_to_string(&fresh).unwrap();
    let committed_path = crate_dir().join("include/mpir.h");
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    if fresh != committed {
        if std::env::var("MPIR_BLESS").as_deref() == Ok("1") {
            std::fs::write(&committed_path, &fresh).unwrap();
            eprintln!("rewrote {}", committed_path.display());
            return;
        }
        let first = fresh
            .lines()
            .zip(committed.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(fresh.lines().count().min(committed.lines().count()));
        panic!(
            "include/mpir.h is not what cbindgen makes of the crate (first difference at line {}: \
             cbindgen {:?}, committed {:?}); run MPIR_BLESS=1 cargo test -p mpir-capi --test header",
            first + 1,
            fresh.lines().nth(first),
            committed.lines().nth(first)
        );
    }
}

#[test]
fn the_header_compiles_as_c99_and_cpp11() {
    let header = crate_dir().join("include/mpir.h");
    for (compiler, lang, std) in [("cc", "c", "-std=c99"), ("c++", "c++", "-std=c++11")] {
        if !need(compiler) {
            continue;
        }
        let out = Command::new(compiler)
            .args([
                "-x",
                lang,
                std,
                "-Wall",
                "-Wextra",
                "-pedantic",
                "-Werror",
                "-fsyntax-only",
            ])
            .arg(&header)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{compiler} {std}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
