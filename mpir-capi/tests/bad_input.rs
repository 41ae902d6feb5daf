//! tests/bad_input.c (every item of issue 22's "Bad input": NULL and dangling handles, use
//! after free, double free, the wrong thread, invalid UTF-8 paths, strings freed twice) run
//! three ways: plain, under valgrind (any invalid access or definite leak fails it), and
//! under AddressSanitizer (linked statically). Each check asserts its code and message.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use common::{Lib, compile_asan, compile_dynamic, crate_dir, have_asan, need, run};
use mpir_target::testkit::skip;

/// How many checks bad_input.c makes: a check that silently stops running fails the count.
const CHECKS: usize = 47;

fn build_dynamic(name: &str) -> Option<(Lib, PathBuf)> {
    if !need("cc") {
        return None;
    }
    Some(compile_dynamic(
        "cc",
        name,
        "-std=c11",
        &crate_dir().join("tests/bad_input.c"),
    ))
}

fn assert_all_passed(out: &common::Run) {
    let failures: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}\n{}", out.stderr);
    assert!(
        out.stdout
            .lines()
            .any(|l| l == format!("{CHECKS} passed, 0 failed")),
        "stdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
}

#[test]
fn every_bad_input_is_a_code_and_a_message() {
    let Some((_lib, exe)) = build_dynamic("bad-input") else {
        return;
    };
    assert_all_passed(&run(&mut Command::new(&exe), Duration::from_secs(60)));
}

#[test]
fn bad_input_under_valgrind() {
    if !need("valgrind") {
        return;
    }
    let Some((_lib, exe)) = build_dynamic("bad-input-valgrind") else {
        return;
    };
    let out = run(
        Command::new("valgrind")
            .args([
                "-q",
                "--error-exitcode=99",
                // The library forks to launch; a child that fails to exec is not the test.
                "--child-silent-after-fork=yes",
                "--leak-check=full",
                "--errors-for-leak-kinds=definite",
                "--show-leak-kinds=definite",
            ])
            .arg(&exe),
        Duration::from_secs(300),
    );
    assert!(
        !out.stderr.contains("=="),
        "valgrind reported:\n{}",
        out.stderr
    );
    assert_all_passed(&out);
}

#[test]
fn bad_input_under_address_sanitizer() {
    if !need("gcc") {
        return;
    }
    if !have_asan() {
        skip("gcc's AddressSanitizer runtime (libasan) is not installed");
        return;
    }
    let (_lib, exe) = compile_asan(
        "bad-input-asan",
        "c11",
        &crate_dir().join("tests/bad_input.c"),
    );
    let out = run(
        Command::new(&exe).env("ASAN_OPTIONS", "detect_leaks=1:exitcode=86"),
        Duration::from_secs(120),
    );
    assert!(
        !out.stderr.contains("AddressSanitizer") && !out.stderr.contains("LeakSanitizer"),
        "{}",
        out.stderr
    );
    assert_all_passed(&out);
}
