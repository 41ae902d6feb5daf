//! gdb as the oracle for stacks (shared by the stack tests): gdb's `thread apply all bt` of a
//! process's main thread against ours, and the check that a process runs on untraced.

#![allow(dead_code, unreachable_pub)]

use mpir_target::SymbolLookup;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::testkit::status_field;
use std::collections::HashMap;

use mpir_types::stacks::{Frame, RankStacks, ThreadStack};

/// Every process runs on, untraced: `TracerPid` 0 and a state other than stopped.
pub fn assert_running_untraced(pids: &[u32]) {
    for &p in pids {
        let tracer = status_field(p, "TracerPid:");
        let state = status_field(p, "State:");
        assert_eq!(tracer, "0", "pid {p} still traced");
        assert!(
            !state.starts_with('t') && !state.starts_with('T'),
            "pid {p} left stopped: {state}"
        );
    }
}

/// The main thread's function names, innermost first, up to `main`.
pub fn main_thread_to_main(r: &RankStacks) -> Vec<String> {
    let t = r
        .threads
        .iter()
        .find(|t| t.tid == r.pid)
        .expect("a main thread");
    let mut names = Vec::new();
    for f in &t.frames {
        let n = f.function_label();
        let stop = n == "main";
        names.push(n);
        if stop {
            break;
        }
    }
    names
}

pub use mpir_target::testkit::GdbFrame;

/// gdb's frames of every thread of `pid`, by thread id, innermost first.
pub fn gdb_threads(pid: u32) -> HashMap<u32, Vec<GdbFrame>> {
    mpir_target::testkit::gdb_backtraces(pid)
}

/// gdb's frames of `pid`'s main thread, innermost first, up to `main`.
pub fn gdb_main_thread(pid: u32) -> Vec<GdbFrame> {
    let mut frames = gdb_threads(pid).remove(&pid).unwrap_or_default();
    if let Some(i) = frames.iter().position(|f| f.name == "main") {
        frames.truncate(i + 1);
    }
    frames
}

/// Every frame's function label of a thread, innermost first.
pub fn names(t: &ThreadStack) -> Vec<String> {
    t.frames.iter().map(Frame::function_label).collect()
}

/// Ours against gdb's: each of our frames is one of gdb's, in order — the same name (without
/// glibc's `__GI_`/underscore prefixes and `_impl` suffixes), or two names of one address in
/// the process (gdb names a function by its DWARF name, we by its ELF symbol). gdb's frames
/// that are none of ours must be inline entries: a frame without a pc past frame 0, or next
/// to one (gdb prints an inlined function and the function it is inlined into as two frames,
/// one of them without a pc). gdb's `<signal handler called>` is the signal trampoline, `__restore_rt`.
pub fn assert_same_as_gdb(pid: u32, ours: &[String], gdb: &[GdbFrame]) {
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let norm = |n: &str| {
        let n = n.trim_start_matches('_');
        let n = n.strip_prefix("GI_").unwrap_or(n).trim_start_matches('_');
        n.strip_suffix("_impl").unwrap_or(n).to_string()
    };
    let address = |n: &str| target.symbol(n).ok().flatten().map(|s| s.address);
    let same = |o: &str, g: &str| {
        norm(o) == norm(g)
            || (address(o).is_some() && address(o) == address(g))
            || (g == "<signal handler called>" && o == "__restore_rt")
    };
    // A frame past frame 0 printed without a pc belongs to an inline chain: gdb prints each
    // inlined function and the function it is inlined into as frames of one physical frame,
    // one of them without a pc.
    let pcless = |j: usize| j > 0 && gdb.get(j).is_some_and(|f| f.pc.is_none());
    let inline_entry = |i: usize| pcless(i) || pcless(i + 1) || (i > 0 && pcless(i - 1));
    let names: Vec<&str> = gdb.iter().map(|g| g.name.as_str()).collect();
    let mut g = 0;
    for o in ours {
        loop {
            assert!(
                g < gdb.len(),
                "pid {pid}: our {o} is not in gdb's stack (in order)\nours: {ours:?}\ngdb:  {names:?}"
            );
            if same(o, &gdb[g].name) {
                g += 1;
                break;
            }
            assert!(
                inline_entry(g),
                "pid {pid}: looking for our {o}, gdb's {} (a physical frame) is not ours\n\
                 ours: {ours:?}\ngdb:  {names:?}",
                gdb[g].name
            );
            g += 1;
        }
    }
    assert_eq!(
        g,
        gdb.len(),
        "pid {pid}: gdb has more frames\nours: {ours:?}\ngdb:  {names:?}"
    );
}
