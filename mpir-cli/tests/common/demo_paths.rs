//! The demo job's programs, for the tests that run the demo job itself: the crate `mpir-demo`
//! writes them out (or `$MPIR_DEMO_DIR` names them), as `mpir demo` does. Tests include it with
//! `#[path = "common/demo_paths.rs"] mod demo_paths;`.
//!
//! The starter: `mpir-demo-starter [-n N] [--lifetime SECS] [--rank PATH] [-q]` (4 ranks and
//! 300 s by default; it finds `mpir-demo-rank` next to itself).

#![allow(dead_code)] // each program that includes this uses part of it

use std::path::PathBuf;

/// The starter, ready to run; an error saying why not.
pub(crate) fn starter() -> Result<PathBuf, String> {
    mpir_demo::starter().map_err(|e| format!("the demo job's starter: {e}"))
}

/// The rank program (next to the starter), canonical.
pub(crate) fn rank() -> PathBuf {
    let starter = starter().unwrap_or_else(|e| panic!("{e}"));
    std::fs::canonicalize(starter.with_file_name("mpir-demo-rank")).unwrap()
}

/// A running demo job whose ranks have all said they are ready; killed on drop.
pub(crate) struct Demo {
    pub(crate) starter: std::process::Child,
    /// The ranks' pids, by rank.
    pub(crate) ranks: Vec<u32>,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.starter.kill();
        let _ = self.starter.wait();
    }
}

/// Starts an `n`-rank demo job living 60 s and waits until every rank printed
/// `rank R pid P ready` (in whatever order they get there); the pids come by rank.
pub(crate) fn demo(n: usize) -> Demo {
    use std::io::BufRead;
    let path = starter().unwrap_or_else(|e| panic!("{e}"));
    let mut starter = std::process::Command::new(path)
        .args(["-n", &n.to_string(), "--lifetime", "60"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(starter.stdout.take().unwrap());
    let mut ranks = Vec::new();
    while ranks.len() < n {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the demo job ended early"
        );
        if line.trim_end().ends_with(" ready") {
            let mut words = line.split_whitespace();
            let rank: u32 = words.nth(1).unwrap().parse().unwrap();
            let pid: u32 = words.nth(1).unwrap().parse().unwrap();
            ranks.push((rank, pid));
        }
    }
    ranks.sort_unstable();
    let ranks = ranks.into_iter().map(|(_, pid)| pid).collect();
    Demo { starter, ranks }
}
