//! The progress bar of a stacks read: drawn on a terminal (ranks read of every sample's
//! ranks), never when stderr is not one. The terminal is a real pseudo-terminal (util-linux's
//! `script`); the job is the bundled demo job. Skipped without `script`, failed under
//! `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

#[path = "common/demo_paths.rs"]
mod demo_paths;

use std::process::Command;

use demo_paths::demo;
use mpir_target::testkit::{have, skip};

#[test]
fn a_stacks_read_draws_its_bar_on_a_terminal_only() {
    if !have("script") {
        skip("needs util-linux's script (a pseudo-terminal)");
        return;
    }
    let job = demo(4);
    let starter = job.starter.id().to_string();
    let mpir = env!("CARGO_BIN_EXE_mpir");
    // 3 samples of 4 ranks: the bar counts to 12.
    let line = format!("{mpir} stacks --starter {starter} --samples 3 --no-agents");
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tty = String::from_utf8_lossy(&out.stdout);
    assert!(tty.contains("reading stacks"), "{tty}");
    assert!(
        tty.contains("/12 "),
        "the bar counts 3 samples of 4 ranks: {tty}"
    );
    assert!(tty.contains("stacks of 4 ranks"), "{tty}");
    // Piped: the same output without the bar.
    let piped = Command::new(mpir)
        .args([
            "stacks",
            "--starter",
            &starter,
            "--samples",
            "3",
            "--no-agents",
        ])
        .output()
        .unwrap();
    assert!(piped.status.success());
    let err = String::from_utf8_lossy(&piped.stderr);
    assert!(!err.contains("reading stacks"), "{err}");
    assert!(String::from_utf8_lossy(&piped.stdout).starts_with("stacks of 4 ranks"));
}
