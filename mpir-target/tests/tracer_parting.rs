//! `Tracer::write_on_detach`: a write of the caller's own, made whichever way the tracer lets
//! go of a process (detach, hand-over, drop), never made twice, forgotten on request and when
//! the process execs; a write that fails does not stop the detach.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::{StopEvent, Tracer};
use mpir_target::{MemoryExt, SymbolLookupExt};
use support::*;

fn start(name: &str) -> Option<(Scratch, Spawned, u64)> {
    let dir = scratch(name);
    let src = fixtures().join("parting.c");
    let exe: PathBuf = cc(&dir.join("parting"), &["-O1", "-g", src.to_str()?])
        .map_err(|e| skip(&e))
        .ok()?;
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let flag = flag_address(child.pid());
    Some((dir, child, flag))
}

fn flag_address(pid: u32) -> u64 {
    let t = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    t.require_symbol("parting_flag").unwrap().address
}

fn report(child: &mut Spawned) -> String {
    child.send("report");
    child.line()
}

fn read_flag(pid: u32, flag: u64) -> i32 {
    let t = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    i32::from_le_bytes(t.read_vec(flag, 4).unwrap().try_into().unwrap())
}

#[test]
fn the_write_is_made_on_detach_and_only_then() {
    let Some((_dir, mut child, flag)) = start("parting-detach") else {
        return;
    };
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer
        .write_on_detach(pid, flag, &1i32.to_le_bytes())
        .unwrap();
    // Replaced by a later registration at the same address.
    tracer
        .write_on_detach(pid, flag, &3i32.to_le_bytes())
        .unwrap();
    assert_eq!(read_flag(pid, flag), 7, "nothing written before the detach");
    tracer.detach(pid).unwrap();
    assert_untouched(pid);
    assert_eq!(report(&mut child), "flag=3");
    // Made once: a second attach and detach writes nothing.
    tracer.attach(pid).unwrap();
    tracer.write_memory(pid, flag, &9i32.to_le_bytes()).unwrap();
    tracer.detach(pid).unwrap();
    assert_eq!(report(&mut child), "flag=9");
    assert!(child.finish().success());
}

#[test]
fn dropping_the_tracer_and_handing_over_make_the_write() {
    let Some((_dir, mut child, flag)) = start("parting-drop") else {
        return;
    };
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer
        .write_on_detach(pid, flag, &11i32.to_le_bytes())
        .unwrap();
    drop(tracer);
    assert_untouched(pid);
    assert_eq!(report(&mut child), "flag=11");

    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer
        .write_on_detach(pid, flag, &12i32.to_le_bytes())
        .unwrap();
    tracer.detach_leaving_stopped(pid).unwrap();
    assert!(wait_for(5, || status_field(pid, "State:").starts_with('T')));
    assert_eq!(read_flag(pid, flag), 12, "written before the hand-over");
    assert!(
        Command::new("kill")
            .args(["-CONT", &pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(report(&mut child), "flag=12");
    assert!(child.finish().success());
}

#[test]
fn forgotten_writes_and_empty_data_are_not_made() {
    let Some((_dir, mut child, flag)) = start("parting-forget") else {
        return;
    };
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer
        .write_on_detach(pid, flag, &1i32.to_le_bytes())
        .unwrap();
    tracer.forget_writes_on_detach(pid).unwrap();
    tracer.write_on_detach(pid, flag + 4, &[0xff]).unwrap();
    tracer.write_on_detach(pid, flag + 4, &[]).unwrap();
    let text_before = LiveTarget::open(pid, DebugOptions::default())
        .unwrap()
        .read_vec(flag, 8)
        .unwrap();
    tracer.detach(pid).unwrap();
    let after = LiveTarget::open(pid, DebugOptions::default())
        .unwrap()
        .read_vec(flag, 8)
        .unwrap();
    assert_eq!(after, text_before);
    assert_eq!(report(&mut child), "flag=7");
    // Not attached: an error naming the process.
    let e = tracer.write_on_detach(pid, flag, &[1]).unwrap_err();
    assert!(e.to_string().contains(&pid.to_string()), "{e}");
    assert!(child.finish().success());
}

#[test]
fn a_failing_write_is_reported_and_the_process_is_still_detached() {
    let Some((_dir, mut child, flag)) = start("parting-fail") else {
        return;
    };
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer.write_on_detach(pid, 8, &[1]).unwrap(); // page 0: never mapped
    tracer
        .write_on_detach(pid, flag, &5i32.to_le_bytes())
        .unwrap();
    let e = tracer.detach(pid).unwrap_err();
    assert!(
        matches!(e, mpir_target::TargetError::Unwritable { address: 8, .. }),
        "{e}"
    );
    assert_untouched(pid);
    assert_eq!(tracer.pids().unwrap(), Vec::<u32>::new());
    assert_eq!(report(&mut child), "flag=5", "the other write was made");
    assert!(child.finish().success());
}

#[test]
fn an_exec_forgets_the_writes_of_the_old_image() {
    let Some((_dir, mut child, flag)) = start("parting-exec") else {
        return;
    };
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer
        .write_on_detach(pid, flag, &1i32.to_le_bytes())
        .unwrap();
    tracer.resume(pid).unwrap();
    child.send("exec");
    let ev = tracer.wait(Duration::from_secs(20)).unwrap();
    assert!(matches!(ev, Some(StopEvent::Exec { .. })), "{ev:?}");
    tracer.detach(pid).unwrap();
    assert_eq!(child.line(), "ready");
    assert_eq!(report(&mut child), "flag=7");
    assert!(child.finish().success());
}
