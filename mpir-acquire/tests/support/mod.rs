//! Test support for mpir-acquire's live tests: C fixtures compiled at test time, skip-or-fail
//! for missing MPI stacks, and process-state checks.
#![allow(dead_code, unreachable_pub, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Skips the calling test with a printed reason, or fails it under `MPIR_REQUIRE_PEERS=1`.
pub fn skip(reason: &str) {
    if std::env::var("MPIR_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("required by MPIR_REQUIRE_PEERS=1: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

/// A fresh directory for one test's build products, removed when dropped.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("mpir-acq-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    Scratch(dir)
}

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Runs a command, returning stdout or an error with stderr.
pub fn run(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Compiles fixture `name`.c into `dir` with extra flags; `None` (and a skip) without a C
/// compiler.
pub fn build(dir: &Path, name: &str, out: &str, flags: &[&str]) -> Option<PathBuf> {
    let exe = dir.join(out);
    let r = run(Command::new("cc")
        .args(flags)
        .arg("-pthread")
        .arg(fixtures().join(format!("{name}.c")))
        .arg("-o")
        .arg(&exe));
    match r {
        Ok(_) => Some(exe),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Field `name` of /proc/PID/status ("" when gone).
pub fn status_field(pid: u32, name: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// Every thread of `pid` untraced and not stopped (a process that is gone passes).
pub fn assert_untouched(pid: u32) {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return;
    };
    for t in dir.filter_map(|e| e.ok()) {
        let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
        if status.is_empty() || status.contains("State:\tZ") {
            continue;
        }
        assert!(
            status.contains("TracerPid:\t0\n"),
            "pid {pid} thread still traced:\n{status}"
        );
        assert!(
            !status.contains("(stopped)") && !status.contains("(tracing stop)"),
            "pid {pid} thread left stopped:\n{status}"
        );
    }
}

/// The (rank, pid) pairs a job's ranks printed ("rank R pid P").
pub fn printed_ranks(output: &str) -> Vec<(u64, i64)> {
    let mut v: Vec<(u64, i64)> = output
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "pid", p] => Some((r.parse().ok()?, p.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    v.sort_unstable();
    v
}
