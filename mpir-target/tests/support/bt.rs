//! gdb's `thread apply all bt` as the unwinder's oracle, and the call-chain fixture
//! (`unwind_chain.c`) it is asked about: shared by `unwind_live` and `symbols_live`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::{cc, fixtures, run, skip};

/// The source of the call-chain fixture.
pub const SOURCE: &str = "unwind_chain.c";

/// The call-chain fixture built into `dir` with `-g -pthread` and `flags` (`None`, said, when
/// the compiler cannot).
pub fn build_chain(dir: &Path, flags: &[&str]) -> Option<PathBuf> {
    let src = fixtures().join(SOURCE);
    let mut args = vec!["-g", "-pthread"];
    args.extend_from_slice(flags);
    args.push(src.to_str()?);
    cc(&dir.join("unwind_chain"), &args)
        .map_err(|e| skip(&e))
        .ok()
}

/// Both threads of the call-chain fixture `pid` are asleep (blocked in a system call).
pub fn all_asleep(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    let states: Vec<char> = tasks
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.ok()?.path().join("stat")).ok()?;
            stat.rsplit_once(") ")?.1.chars().next()
        })
        .collect();
    states.len() == 2 && states.iter().all(|&s| s == 'S')
}

/// One frame as gdb prints it.
#[derive(Debug)]
pub struct GdbFrame {
    pub name: String,
    pub in_fixture: bool,
    /// The pc gdb prints for a physical frame (not for inline ones, nor for a frame 0 at the
    /// start of a line).
    pub pc: Option<u64>,
    /// The source file's base name and the line, where gdb prints them (`at FILE:LINE`).
    pub location: Option<(String, u32)>,
}

/// A path's base name.
pub fn basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// gdb's `thread apply all bt`, by thread id.
pub fn gdb_stacks(pid: u32) -> HashMap<u32, Vec<GdbFrame>> {
    let out = run(Command::new("timeout")
        .args(["120", "gdb", "-nx", "-batch", "-p"])
        .arg(pid.to_string())
        .args(["-ex", "set pagination off", "-ex", "thread apply all bt"]))
    .unwrap_or_else(|e| panic!("gdb: {e}"));
    let mut stacks: HashMap<u32, Vec<GdbFrame>> = HashMap::new();
    let mut current = None;
    for line in out.lines() {
        if let Some(rest) = line.strip_prefix("Thread ") {
            current = rest
                .split_once("(LWP ")
                .and_then(|(_, r)| r.split_once(')'))
                .and_then(|(n, _)| n.parse::<u32>().ok());
            continue;
        }
        let (Some(tid), Some(frame)) = (current, line.strip_prefix('#')) else {
            continue;
        };
        let Some((_, frame)) = frame.split_once(' ') else {
            continue;
        };
        let frame = frame.trim_start();
        let (pc, frame) = match frame.split_once(" in ") {
            Some((addr, rest)) if addr.starts_with("0x") => (
                u64::from_str_radix(addr.trim_start_matches("0x"), 16).ok(),
                rest,
            ),
            _ => (None, frame),
        };
        let name = frame.split(" (").next().unwrap_or_default().to_string();
        let in_fixture = frame.contains(&format!("{SOURCE}:"));
        let location = frame.rsplit_once(" at ").and_then(|(_, at)| {
            let (file, line) = at.trim().rsplit_once(':')?;
            Some((basename(file), line.parse().ok()?))
        });
        stacks.entry(tid).or_default().push(GdbFrame {
            name,
            in_fixture,
            pc,
            location,
        });
    }
    stacks
}
