//! Our core writer (`corefile::write::write_core`) on a real process: the call-chain fixture
//! (`unwind_chain.c`: main -> a -> b -> via (inline) -> c -> pause, and a second thread blocked
//! in read), held stopped by the tracer, written, let go. gdb is the oracle: its backtraces of
//! our core equal its backtraces of the live process, for both threads; our own reader
//! (`CoreTarget` + the unwinder) reads the same frames. Bad destinations and limits are typed
//! errors that leave no file.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use mpir_target::corefile::CoreTarget;
use mpir_target::corefile::write::{CoreOptions, CoreWriteError, write_core};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::tracer::Tracer;
use mpir_target::unwind::{SymbolCache, UnwindOptions, Unwinder, vdso_address};
use support::*;

/// The fixture's own frames (gdb places them in its source), innermost first, up to `main`.
fn gdb_fixture_names(frames: &[GdbFrame]) -> Vec<String> {
    let mut names = Vec::new();
    for f in frames.iter().filter(|f| in_fixture(f)) {
        names.push(f.name.clone());
        if f.name == "main" {
            break;
        }
    }
    names
}

/// gdb's `thread apply all bt` of core `core` of `exe`, by thread id.
fn gdb_core_stacks(exe: &Path, core: &Path) -> HashMap<u32, Vec<GdbFrame>> {
    let out = run(Command::new("timeout")
        .args(["120", "gdb", "-nx", "-batch"])
        .args(["-ex", "set pagination off", "-ex", "thread apply all bt"])
        .arg(exe)
        .arg(core))
    .unwrap_or_else(|e| panic!("gdb on our core: {e}"));
    mpir_target::testkit::parse_gdb_backtraces(&out)
}

/// The files in `dir`.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Process `pid` runs on, untraced: `TracerPid` 0 and no stop.
fn assert_running_untraced(pid: u32) {
    assert_untouched(pid);
    assert_eq!(status_field(pid, "TracerPid:"), "0");
    let state = status_field(pid, "State:");
    assert!(
        !state.starts_with('t') && !state.starts_with('T'),
        "left stopped: {state}"
    );
}

#[test]
fn our_core_of_a_live_process_reads_as_gdb_reads_the_process() {
    let dir = scratch("core-writer");
    let Some(exe) = build_chain(&dir, &["-O0"]) else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    assert!(
        wait_for(20, || all_asleep(pid)),
        "the fixture's threads never blocked"
    );

    // Held stopped by the tracer, written, let go.
    let core = dir.join("rank.core");
    let tracer = Tracer::new().unwrap();
    let tids = tracer.attach(pid).unwrap();
    assert_eq!(tids.len(), 2);
    let written = write_core(&tracer, pid, &core, &CoreOptions::default());
    tracer.detach(pid).unwrap();
    drop(tracer);
    let written = written.unwrap();
    eprintln!("{written:?}");
    assert_running_untraced(pid);
    assert_eq!((written.pid, written.threads), (pid, 2));
    assert_eq!(written.bytes, std::fs::metadata(&core).unwrap().len());
    assert!(written.dumped_segments > 0 && written.dumped_segments < written.segments);
    // Only the core in the directory (no temporary file), readable by its owner only.
    let mut want = vec!["rank.core".to_string(), "unwind_chain".to_string()];
    want.sort();
    assert_eq!(listing(&dir), want);
    let mode = std::fs::metadata(&core).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // Our reader: the process's threads, main first, with registers (fs_base included).
    let target = CoreTarget::open(&core, DebugOptions::default()).unwrap();
    assert!(target.core().truncation().is_none());
    assert_eq!(target.core().pid(), Some(pid));
    assert_eq!(target.core().executable(), Some(exe.as_path()));
    let threads = target.core().threads();
    let mut core_tids: Vec<u32> = threads.iter().map(|t| t.tid).collect();
    assert_eq!(core_tids[0], pid);
    core_tids.sort_unstable();
    let mut live_tids = tids.clone();
    live_tids.sort_unstable();
    assert_eq!(core_tids, live_tids);
    let pointers: Vec<u64> = threads
        .iter()
        .map(|t| t.registers.unwrap().thread_pointer().unwrap())
        .collect();
    assert!(pointers.iter().all(|&p| p != 0) && pointers[0] != pointers[1]);
    let cache = SymbolCache::new();
    let mut unwinder = Unwinder::with_cache(target.images(), UnwindOptions::default(), &cache);
    let vdso = vdso_address(target.core().auxv()).expect("NT_AUXV names the vDSO");
    unwinder.add_vdso(&target, vdso).unwrap();
    let exe_name = exe.display().to_string();
    let ours: HashMap<u32, Vec<String>> = threads
        .iter()
        .map(|t| {
            let stack = unwinder.unwind(&target, &t.registers.unwrap());
            let symbolised = unwinder.thread_stack(t.tid, &stack);
            let mut names = Vec::new();
            for f in &symbolised.frames {
                if let (Some(name), true) = (f.symbol.as_deref(), *f.module == *exe_name) {
                    names.push(name.to_string());
                    if name == "main" && !f.inline {
                        break;
                    }
                }
            }
            (t.tid, names)
        })
        .collect();
    assert_eq!(ours[&pid], ["c", "via", "b", "a", "main"], "{ours:?}");
    let worker = core_tids.iter().find(|&&t| t != pid).unwrap();
    assert_eq!(ours[worker], ["reader_thread"], "{ours:?}");

    // gdb, the independent reader: its backtraces of our core are its backtraces of the
    // process itself, thread by thread.
    if !have("gdb") {
        return skip("gdb is not installed");
    }
    let live = gdb_stacks(pid);
    let from_core = gdb_core_stacks(&exe, &core);
    assert_eq!(from_core.len(), 2, "gdb saw {from_core:?}");
    for (tid, frames) in &live {
        let want = gdb_fixture_names(frames);
        let got = gdb_fixture_names(&from_core[tid]);
        assert!(!want.is_empty(), "thread {tid}: {frames:?}");
        assert_eq!(got, want, "thread {tid}");
        // Every frame gdb shows live, it shows in the core (C library frames too).
        let names = |f: &[GdbFrame]| f.iter().map(|f| f.name.clone()).collect::<Vec<_>>();
        assert_eq!(names(&from_core[tid]), names(frames), "thread {tid}");
        assert_eq!(ours[tid], want, "thread {tid}: ours against gdb's");
    }
    // The x87/SSE state (NT_FPREGSET, from PTRACE_GETFPREGS): gdb reads the same control and
    // status words from our core as from the process.
    let fp = |target: &[&std::ffi::OsStr]| {
        let out = run(Command::new("timeout")
            .args(["120", "gdb", "-nx", "-batch"])
            .args([
                "-ex",
                "p/x $mxcsr",
                "-ex",
                "p/x $fctrl",
                "-ex",
                "p/x $fstat",
            ])
            .args(target))
        .unwrap_or_else(|e| panic!("gdb: {e}"));
        out.lines()
            .filter(|l| l.starts_with('$'))
            .map(|l| {
                l.split_once(" = ")
                    .map(|(_, v)| v.to_string())
                    .unwrap_or_default()
            })
            .collect::<Vec<_>>()
    };
    let pid_s = pid.to_string();
    let live_fp = fp(&["-p".as_ref(), pid_s.as_ref()]);
    let core_fp = fp(&[exe.as_os_str(), core.as_os_str()]);
    assert_eq!(live_fp.len(), 3, "gdb said {live_fp:?}");
    assert_eq!(core_fp, live_fp, "the FP state in our core");
    assert_running_untraced(pid);
    assert!(
        child.child.try_wait().unwrap().is_none(),
        "the fixture ended"
    );
}

#[test]
fn bad_destinations_and_limits_are_typed_errors_that_leave_no_file() {
    let dir = scratch("core-writer-bad");
    let Some(exe) = build_chain(&dir, &["-O0"]) else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let out = dir.join("out");
    std::fs::create_dir(&out).unwrap();

    // A process this tracer does not hold: no registers, no core.
    let tracer = Tracer::new().unwrap();
    let e = write_core(&tracer, pid, &out.join("c"), &CoreOptions::default()).unwrap_err();
    assert!(
        matches!(e, CoreWriteError::Registers { pid: p, .. } if p == pid),
        "{e}"
    );
    assert_running_untraced(pid);

    tracer.attach(pid).unwrap();
    // A directory that does not exist.
    let missing = dir.join("gone/deeper");
    let e = write_core(&tracer, pid, &missing.join("c"), &CoreOptions::default()).unwrap_err();
    assert!(
        matches!(&e, CoreWriteError::NoDirectory { dir } if *dir == missing),
        "{e}"
    );
    // A limit the core does not fit: refused before anything is written, naming the size.
    let small = CoreOptions::default().with_max_bytes(64 << 10);
    let e = write_core(&tracer, pid, &out.join("c"), &small).unwrap_err();
    let CoreWriteError::TooLarge {
        pid: p,
        size,
        limit,
    } = e
    else {
        panic!("not TooLarge");
    };
    assert_eq!((p, limit), (pid, 64 << 10));
    assert!(size > limit, "{size}");
    let text = CoreWriteError::TooLarge {
        pid: p,
        size,
        limit,
    }
    .to_string();
    assert!(
        text.contains(&size.to_string()) && text.contains("65536"),
        "{text}"
    );
    // The same limit with the code of every file copied as well: larger still.
    let e = write_core(&tracer, pid, &out.join("c"), &small.with_file_backed(true)).unwrap_err();
    assert!(
        matches!(e, CoreWriteError::TooLarge { size: s, .. } if s > size),
        "{e}"
    );
    // A full core of the same process fits a generous limit and is larger than the default.
    let full = write_core(
        &tracer,
        pid,
        &out.join("full"),
        &CoreOptions::default().with_file_backed(true),
    )
    .unwrap();
    let lean = write_core(&tracer, pid, &out.join("lean"), &CoreOptions::default()).unwrap();
    assert!(full.bytes > lean.bytes, "{full:?} {lean:?}");
    assert_eq!(full.segments, lean.segments);
    tracer.detach(pid).unwrap();
    drop(tracer);
    assert_running_untraced(pid);
    // Nothing but the two cores written.
    assert_eq!(listing(&out), ["full", "lean"]);
    assert!(!dir.join("gone").exists());
}
