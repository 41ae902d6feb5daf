//! Helpers for test suites that run real processes — this workspace's own integration tests,
//! and those of tools built on these crates: skip-or-fail when a peer (an MPI stack, gdb, a C
//! compiler) is missing, scratch directories, running commands, and the check that a process
//! was left as found.
//!
//! These helpers panic on failure, as test code does; they are not for library code.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Skips the calling test with a printed reason — or, when the environment variable
/// `MPIR_REQUIRE_PEERS` is `1` (as in CI), fails it: a missing peer must not pass silently.
///
/// # Panics
/// Under `MPIR_REQUIRE_PEERS=1`.
pub fn skip(reason: &str) {
    if std::env::var("MPIR_REQUIRE_PEERS").as_deref() == Ok("1") {
        panic!("required by MPIR_REQUIRE_PEERS=1: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

/// A fresh directory for one test's files, removed when dropped.
#[derive(Debug)]
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A new, empty scratch directory named after the test process and `name`.
///
/// # Panics
/// If the directory cannot be created.
pub fn scratch(name: &str) -> Scratch {
    let dir = std::env::temp_dir().join(format!("mpir-test-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    Scratch(dir)
}

/// Runs `cmd` to completion: its stdout, or an error naming the command and its stderr.
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

/// Whether `tool` is on the `PATH`.
pub fn have(tool: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let p = dir.join(tool);
            p.is_file()
                && std::fs::metadata(&p).is_ok_and(|m| {
                    std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o111 != 0
                })
        })
    })
}

/// Field `name` (e.g. `"State:"`, `"TracerPid:"`) of `/proc/PID/status`, trimmed; empty when
/// the process is gone.
pub fn status_field(pid: u32, name: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
        .unwrap_or_default()
}

/// Asserts that every thread of `pid` is untraced and neither stopped nor in a tracing stop
/// (a process that is gone, or a zombie thread, passes).
///
/// # Panics
/// When a thread is still traced or stopped.
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
            "pid {pid}: a thread is still traced:\n{status}"
        );
        assert!(
            !status.contains("(stopped)") && !status.contains("(tracing stop)"),
            "pid {pid}: a thread is left stopped:\n{status}"
        );
    }
}

/// Polls `cond` until it holds (true) or `secs` seconds pass (false).
pub fn wait_for(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
