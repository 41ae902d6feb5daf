//! `detach_everything`: the way out for a tool told to stop. It acts on every tracer of the
//! program, so it has this test binary to itself (tests of one binary run in parallel).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::Tracer;
use mpir_target::{MemoryExt, SymbolLookupExt};
use support::*;

fn build(dir: &Path, name: &str) -> Option<PathBuf> {
    let src = fixtures().join(format!("{name}.c"));
    cc(&dir.join(name), &["-O2", "-g", "-pthread", src.to_str()?])
        .map_err(|e| skip(&e))
        .ok()
}

#[test]
fn detach_everything_ends_waits_and_lets_go_of_every_process() {
    let dir = scratch("everything");
    let Some(exe) = build(&dir, "signals") else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let main = target.require_symbol("main").unwrap().address;
    let text = target.read_vec(main, 8).unwrap();
    let tracer = std::sync::Arc::new(Tracer::new().unwrap());
    tracer.attach(pid).unwrap();
    tracer.insert_breakpoint(pid, main).unwrap();
    tracer.resume(pid).unwrap();
    let waiter = {
        let t = std::sync::Arc::clone(&tracer);
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let ev = t.wait(Duration::from_secs(60)).unwrap();
            (ev, start.elapsed())
        })
    };
    std::thread::sleep(Duration::from_millis(200));
    let released = mpir_target::live::tracer::detach_everything();
    assert!(
        released
            .iter()
            .any(|r| r.as_ref().is_ok_and(|p| p.contains(&pid))),
        "{released:?}"
    );
    let (ev, took) = waiter.join().unwrap();
    assert_eq!(ev, None);
    assert!(
        took < Duration::from_secs(10),
        "the wait ended early: {took:?}"
    );
    assert_eq!(target.read_vec(main, 8).unwrap(), text, "bytes restored");
    assert_untouched(pid);
    let e = tracer.attach(pid).unwrap_err().to_string();
    assert!(e.contains("let go of everything"), "{e}");
    assert!(child.finish().success());
}
