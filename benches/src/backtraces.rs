//! The peers of the stack benchmarks (issue 18): gdb's `thread apply all bt` and elfutils'
//! `eu-stack` over the same processes as ours, each run checked to have produced a stack for
//! every process (a peer that printed nothing is not "fast").

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What one peer run did: its wall time and how many processes it printed a stack of.
#[derive(Debug, Clone, Copy)]
pub struct PeerRun {
    /// Wall time from spawn to exit of every peer process.
    pub took: Duration,
    /// Processes with at least one frame of `main` in the output.
    pub with_main: usize,
}

/// gdb, one process for all `pids` (its best case: one start-up, one symbol cache): for each
/// pid `attach`, `thread apply all bt`, `detach`. `debug_dirs` are added to gdb's
/// debug-file directory (as our tools get them).
pub fn gdb_all(pids: &[u32], debug_dirs: &[&Path]) -> Result<PeerRun, String> {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch", "-iex", "set pagination off"]);
    if !debug_dirs.is_empty() {
        let dirs: Vec<String> = debug_dirs.iter().map(|d| d.display().to_string()).collect();
        cmd.arg("-iex").arg(format!(
            "set debug-file-directory /usr/lib/debug:{}",
            dirs.join(":")
        ));
    }
    for pid in pids {
        cmd.arg("-ex").arg(format!("attach {pid}"));
        cmd.arg("-ex").arg("thread apply all bt");
        cmd.arg("-ex").arg("detach");
    }
    let start = Instant::now();
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("gdb: {e}"))?;
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(PeerRun {
        took,
        with_main: count_main_per_process(&text, ") detached]"),
    })
}

/// gdb as a user (or a tool such as padb) runs it on each rank: `gdb -p PID -batch -ex 'thread
/// apply all bt'`, one gdb per process, one after the other.
pub fn gdb_each(pids: &[u32], debug_dirs: &[&Path]) -> Result<PeerRun, String> {
    let start = Instant::now();
    let mut with_main = 0;
    for &pid in pids {
        let run = gdb_all(&[pid], debug_dirs)?;
        with_main += run.with_main;
    }
    Ok(PeerRun {
        took: start.elapsed(),
        with_main,
    })
}

/// eu-stack, one process per pid (it takes one `-p`), run one after the other.
pub fn eu_stack_all(pids: &[u32]) -> Result<PeerRun, String> {
    let start = Instant::now();
    let mut with_main = 0;
    for pid in pids {
        let out = Command::new("eu-stack")
            .arg("-p")
            .arg(pid.to_string())
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| format!("eu-stack: {e}"))?;
        if String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim_end().ends_with(" main"))
        {
            with_main += 1;
        }
    }
    Ok(PeerRun {
        took: start.elapsed(),
        with_main,
    })
}

/// In gdb's output for several processes (each ended by a line containing `separator`), how
/// many have a frame in `main`.
fn count_main_per_process(text: &str, separator: &str) -> usize {
    let mut n = 0;
    let mut seen = false;
    for line in text.lines() {
        if line.contains(" in main (") || line.starts_with("#0  main (") {
            seen = true;
        }
        if line.contains(separator) {
            n += usize::from(seen);
            seen = false;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_output_is_counted_per_process() {
        // As gdb 13 prints it: the stacks, then `[Inferior 1 (process N) detached]`.
        let text = "#3  0x1 in main () at a.c:3\n[Inferior 1 (process 1) detached]\n\
                    #0  0x2 in poll ()\n[Inferior 1 (process 2) detached]\n\
                    #0  main () at a.c:9\n[Inferior 1 (process 3) detached]\n";
        assert_eq!(count_main_per_process(text, ") detached]"), 2);
    }
}
