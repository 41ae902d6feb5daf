//! gdb's `thread apply all bt` as the unwinder's oracle, and the call-chain fixture
//! (`unwind_chain.c`) it is asked about: shared by `unwind_live` and `symbols_live`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::{cc, fixtures, skip};

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

pub use mpir_target::testkit::GdbFrame;

/// Whether gdb placed frame `f` in the call-chain fixture's source.
pub fn in_fixture(f: &GdbFrame) -> bool {
    f.location.as_ref().is_some_and(|(file, _)| file == SOURCE)
}

/// A path's base name.
pub fn basename(path: &str) -> String {
    path.rsplit('/').next().unwrap_or(path).to_string()
}

/// gdb's `thread apply all bt`, by thread id.
pub fn gdb_stacks(pid: u32) -> HashMap<u32, Vec<GdbFrame>> {
    mpir_target::testkit::gdb_backtraces(pid)
}
