//! The unwinder's "a thread exits mid-copy" case on a real process: threads are created and
//! exit every 100 µs while `snapshot_live` freezes, copies and releases the process again and
//! again. Each snapshot is either an error that says what failed or a copy whose threads each
//! have registers or the reason they have none, and unwinds offline into stacks that are
//! complete or say where they stop; nothing panics or hangs, and the process is left running
//! untraced after every round.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::time::{Duration, Instant};

use mpir_target::debuginfo::{DebugOptions, ProcessImages};
use mpir_target::live::tracer::Tracer;
use mpir_target::testkit::assert_untouched;
use mpir_target::unwind::{SnapshotOptions, SymbolCache, UnwindOptions, Unwinder, snapshot_live};
use mpir_types::DataModel;
use support::*;

#[test]
fn threads_that_exit_while_the_process_is_copied_give_partial_results_never_a_hang() {
    let dir = scratch("unwind-churn");
    let src = fixtures().join("churn.c");
    let exe = match cc(
        &dir.join("churn"),
        &["-O2", "-g", "-pthread", src.to_str().unwrap()],
    ) {
        Ok(exe) => exe,
        Err(e) => return skip(&e),
    };
    let mut child = Spawned::new(&mut std::process::Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    let images = ProcessImages::for_pid(pid, DebugOptions::default()).unwrap();
    let cache = SymbolCache::new();
    let unwinder = Unwinder::with_cache(&images, UnwindOptions::default(), &cache);
    let started = Instant::now();
    let (mut copies, mut errors, mut threads_seen, mut main_reached) = (0, 0, 0, 0);
    for _ in 0..150 {
        match snapshot_live(&tracer, pid, DataModel::LP64, &SnapshotOptions::default()) {
            Ok(snap) => {
                copies += 1;
                assert!(!snap.threads.is_empty());
                threads_seen = threads_seen.max(snap.threads.len());
                for stack in unwinder.thread_stacks(&snap) {
                    // Complete, or it says where it stops.
                    if stack.frames.is_empty() {
                        assert!(stack.truncated.is_some(), "{stack:?}");
                    }
                    if stack.tid == pid
                        && stack
                            .frames
                            .iter()
                            .any(|f| f.symbol.as_deref() == Some("main"))
                    {
                        main_reached += 1;
                    }
                }
            }
            // A thread gone between listing and seizing it: a typed error naming it.
            Err(e) => {
                errors += 1;
                assert!(!e.to_string().is_empty());
                if errors == 1 {
                    eprintln!("churn: first error: {e}");
                }
            }
        }
        assert_untouched(pid);
    }
    let took = started.elapsed();
    eprintln!(
        "churn: {copies} copies, {errors} errors, up to {threads_seen} threads, main reached \
         {main_reached} times, {took:?}"
    );
    assert!(took < Duration::from_secs(120), "{took:?}");
    // Nearly every round copies the process (threads created by a seized thread are attached
    // by the kernel, exiting ones are skipped), and the main thread reaches main in each.
    assert!(copies >= 140, "{copies} copies of 150");
    assert!(
        main_reached * 10 >= copies * 9,
        "{main_reached} of {copies}"
    );
    // The process still runs: it answers on its own (its threads go on being made).
    assert!(std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok());
    let _ = child.child.kill();
    let _ = child.child.wait();
}
