//! `mpir-symbols` on a starter fixture compiled here, and on a binary that is not a starter.

use std::path::Path;
use std::process::Command;

fn symbols(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mpir-symbols"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn reports_symbols_and_layout_source() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-target/tests/fixtures");
    let exe = std::env::temp_dir().join(format!("mpir-symbols-fixture-{}", std::process::id()));
    let status = Command::new("cc")
        .args(["-O2", "-g"])
        .arg(format!("-I{}", fixtures.display()))
        .arg(fixtures.join("starter.c"))
        .arg("-o")
        .arg(&exe)
        .status();
    if !status.is_ok_and(|s| s.success()) {
        if std::env::var("MPIR_REQUIRE_PEERS").as_deref() == Ok("1") {
            panic!("cc failed");
        }
        return eprintln!("SKIPPED: no C compiler");
    }
    let (code, out) = symbols(&[exe.to_str().unwrap()]);
    std::fs::remove_file(&exe).ok();
    assert_eq!(code, Some(0), "{out}");
    let line = out
        .lines()
        .find(|l| l.starts_with("MPIR_executable_path"))
        .unwrap();
    assert!(line.contains("512 bytes"), "{line}");
    assert!(out.contains("MPIR_debug_gate            absent"), "{out}");
    assert!(
        out.contains("MPIR_PROCDESC: 24 bytes, host_name@0 executable_name@8 pid@16 (4 bytes); from debug info in"),
        "{out}"
    );
}

#[test]
fn not_a_starter_and_bad_input() {
    let (code, out) = symbols(&["/bin/true"]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("not an MPIR starter"), "{out}");
    let (code, out) = symbols(&["/nonexistent/mpiexec"]);
    assert_eq!(code, Some(1));
    assert!(out.contains("cannot read /nonexistent/mpiexec"), "{out}");
}
