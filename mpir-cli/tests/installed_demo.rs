//! `mpir demo` after `cargo install`: the binary alone, copied away from the build and run from
//! an empty directory with an empty cache, must run the demo job — the programs it runs are the
//! ones embedded in it, written into its private cache directory, not the build's `OUT_DIR`
//! (beside the symbol store, which is on by default in the same cache).
//! (`.ci/run` runs the real `cargo install --path mpir-cli` and then `mpir demo`; this test is
//! the same check without a second build.)

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};

use mpir_target::testkit::scratch;

mod common;

fn demo(bin: &Path, cwd: &Path, cache: &Path, json: bool) -> Output {
    let mut cmd = Command::new(bin);
    cmd.arg("demo")
        .current_dir(cwd)
        .env_remove("MPIR_DEMO_DIR")
        .env("XDG_CACHE_HOME", cache);
    if json {
        cmd.arg("--json");
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "mpir demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn the_installed_binary_runs_the_demo_from_an_empty_directory() {
    let root = scratch("installed");
    let bin = root.join("bin/mpir");
    std::fs::create_dir_all(bin.parent().unwrap()).unwrap();
    std::fs::copy(env!("CARGO_BIN_EXE_mpir"), &bin).unwrap();
    let cwd = root.join("cwd");
    let cache = root.join("cache");
    std::fs::create_dir_all(&cwd).unwrap();
    let out = demo(&bin, &cwd, &cache, false);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("The demo job was stopped; nothing is left running."),
        "{text}"
    );
    // The programs are in a private directory of the cache; beside it only the symbol store
    // (on by default, in the same cache), private too.
    let base = cache.join("mpir");
    let mut dirs: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    assert_eq!(dirs.len(), 2, "{dirs:?}");
    assert!(
        dirs[0]
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("demo-")),
        "{dirs:?}"
    );
    assert_eq!(dirs[1], base.join("symbols"), "{dirs:?}");
    let dir = &dirs[0];
    for d in [&base, dir, &dirs[1]] {
        assert_eq!(std::fs::metadata(d).unwrap().mode() & 0o777, 0o700, "{d:?}");
    }
    for f in std::fs::read_dir(&dirs[1]).unwrap() {
        let f = f.unwrap().path();
        assert_eq!(
            std::fs::metadata(&f).unwrap().mode() & 0o777,
            0o600,
            "{f:?}"
        );
    }
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["mpir-demo-rank", "mpir-demo-starter"]);
    assert!(
        std::fs::read_dir(&cwd).unwrap().next().is_none(),
        "cwd left untouched"
    );

    // A program changed behind the tool's back is rewritten before it runs, and the job's
    // ranks are that directory's program.
    let rank = dir.join("mpir-demo-rank");
    std::fs::write(&rank, b"#!/bin/sh\nexit 0\n").unwrap();
    let out = demo(&bin, &cwd, &cache, true);
    let doc: serde_json::Value = common::json_doc(&out);
    assert_eq!(doc["left_running"], serde_json::json!([]));
    for r in doc["job"]["ranks"].as_array().unwrap() {
        assert_eq!(
            Path::new(r["executable"].as_str().unwrap()),
            rank.as_path(),
            "{r}"
        );
    }
    assert!(std::fs::metadata(&rank).unwrap().len() > 1000, "rewritten");
}
