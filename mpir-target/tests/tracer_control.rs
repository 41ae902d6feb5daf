//! Process control beyond a plain attach: launching under control, following a wrapper's
//! exec, a process that execs while one of its threads is held, signals (real-time ones too)
//! and job-control stops, many processes attached at once while some exit, and stepping over
//! a breakpoint that stays planted, written with `PTRACE_POKEDATA`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::{StopEvent, Tracer, TracerOptions, WriteMode};
use mpir_target::{MemoryExt, SymbolLookupExt};
use support::*;

const WAIT: Duration = Duration::from_secs(20);

fn build(dir: &Path, name: &str) -> Option<PathBuf> {
    let src = fixtures().join(format!("{name}.c"));
    cc(&dir.join(name), &["-O2", "-g", "-pthread", src.to_str()?])
        .map_err(|e| skip(&e))
        .ok()
}

/// Whether `pid` is traced by a thread of this test process.
fn traced_by_us(pid: u32) -> bool {
    let tracer = status_field(pid, "TracerPid:");
    tracer != "0" && Path::new(&format!("/proc/self/task/{tracer}")).exists()
}

fn piped(exe: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    cmd
}

fn breakpoint_of(pid: u32) -> (LiveTarget, u64) {
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let bp = target.require_symbol("MPIR_Breakpoint").unwrap().address;
    (target, bp)
}

/// Runs the `threaded` fixture's scenario on `pid` (stopped, `child` its stdio): breakpoint,
/// hit from a secondary thread, emulated return, detach; the process finishes normally.
fn drive_threaded(tracer: &Tracer, mut child: Spawned) {
    let pid = child.pid();
    let (target, bp) = breakpoint_of(pid);
    let text = target.read_vec(bp, 16).unwrap();
    tracer.insert_breakpoint(pid, bp).unwrap();
    tracer.resume(pid).unwrap();
    assert_eq!(child.line(), "ready");
    child.send("go");
    let ev = tracer.wait(WAIT).unwrap().expect("breakpoint hit");
    let StopEvent::Breakpoint { tid, address, .. } = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(address, bp);
    assert_ne!(tid, pid, "hit from the worker thread");
    tracer.return_from_call(pid, tid).unwrap();
    tracer.detach(pid).unwrap();
    assert_eq!(target.read_vec(bp, 16).unwrap(), text, "text restored");
    assert_eq!(child.line(), "returned state=1");
    assert_untouched(pid);
    assert!(child.finish().success());
}

#[test]
fn launch_stops_at_exec_before_any_library_is_loaded() {
    let dir = scratch("launch-exec");
    let Some(exe) = build(&dir, "threaded") else {
        return;
    };
    let tracer = Tracer::new().unwrap();
    let child = tracer.launch(piped(&exe)).unwrap();
    let pid = child.id();
    assert!(traced_by_us(pid));
    assert!(
        status_field(pid, "State:").starts_with('t'),
        "in a tracing stop"
    );
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        !maps.contains("libc.so"),
        "stopped before libc is mapped:\n{maps}"
    );
    assert_eq!(tracer.pids().unwrap(), [pid]);
    drive_threaded(&tracer, Spawned::adopt(child));
}

#[test]
fn a_wrapper_that_execs_the_starter_is_followed() {
    let dir = scratch("launch-wrapper");
    let Some(exe) = build(&dir, "threaded") else {
        return;
    };
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg("exec \"$0\"").arg(&exe);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
    let tracer = Tracer::new().unwrap();
    let child = tracer.launch(cmd).unwrap();
    let pid = child.id();
    let first = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_ne!(first, exe, "first stop is the shell");
    tracer.resume(pid).unwrap();
    let ev = tracer.wait(WAIT).unwrap();
    assert!(
        matches!(ev, Some(StopEvent::Exec { pid: p, .. }) if p == pid),
        "{ev:?}"
    );
    assert_eq!(std::fs::read_link(format!("/proc/{pid}/exe")).unwrap(), exe);
    drive_threaded(&tracer, Spawned::adopt(child));
}

#[test]
fn exec_while_a_thread_is_held_forgets_the_old_image() {
    let dir = scratch("exec-held");
    let Some(exe) = build(&dir, "exec_held") else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let (_, bp) = breakpoint_of(pid);
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer.insert_breakpoint(pid, bp).unwrap();
    tracer.resume(pid).unwrap();
    child.send("go");
    let ev = tracer.wait(WAIT).unwrap().expect("breakpoint hit");
    assert!(
        matches!(ev, StopEvent::Breakpoint { tid, .. } if tid != pid),
        "{ev:?}"
    );
    // The worker stays held; the main thread execs meanwhile and the held worker dies with it.
    let ev = tracer.wait(WAIT).unwrap();
    assert!(
        matches!(ev, Some(StopEvent::Exec { pid: p, former_tid }) if p == pid && former_tid == pid),
        "{ev:?}"
    );
    let exe_now = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap();
    assert_ne!(exe_now, exe, "the new program");
    // Detach must not write the old image's bytes into the new one.
    tracer.detach(pid).unwrap();
    assert_eq!(child.rest(), "after-exec\n");
    assert_eq!(child.child.wait().unwrap().code(), Some(7));
}

fn send_signal(pid: u32, name: &str) {
    let ok = Command::new("/bin/kill")
        .args(["-s", name, &pid.to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -s {name} {pid}");
}

#[test]
fn signals_reach_the_tracee_even_when_nobody_waits() {
    let dir = scratch("signals");
    let Some(exe) = build(&dir, "signals") else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    send_signal(pid, "USR1"); // while stopped: held, delivered on resume
    std::thread::sleep(Duration::from_millis(50));
    tracer.resume(pid).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    send_signal(pid, "RTMIN+1"); // real-time: nix's waitpid cannot even decode it
    std::thread::sleep(Duration::from_millis(100));
    send_signal(pid, "USR1");
    // No wait() call: the tracer thread delivers on its own. Still attached:
    assert!(wait_for(10, || {
        child.send("report");
        child.line() == "usr1=2 rt=1"
    }));
    assert!(traced_by_us(pid));
    tracer.detach(pid).unwrap();
    assert_untouched(pid);
    assert!(child.finish().success());
}

#[test]
fn a_job_control_stop_survives_attach_and_detach() {
    let dir = scratch("jobstop");
    let Some(exe) = build(&dir, "signals") else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    tracer.resume(pid).unwrap();
    send_signal(pid, "STOP");
    std::thread::sleep(Duration::from_millis(200));
    tracer.detach(pid).unwrap();
    // As found before the detach: stopped by job control, not by us, and not running.
    assert!(
        wait_for(5, || status_field(pid, "State:").starts_with('T')),
        "{}",
        status_field(pid, "State:")
    );
    assert_eq!(status_field(pid, "TracerPid:"), "0");
    send_signal(pid, "CONT");
    child.send("report");
    assert_eq!(child.line(), "usr1=0 rt=0");
    assert_untouched(pid);
    assert!(child.finish().success());
}

#[test]
fn attach_many_while_processes_exit() {
    let tracer = Tracer::new().unwrap();
    for round in 0..3u64 {
        let mut children: Vec<std::process::Child> = (0..24u64)
            .map(|i| {
                Command::new("sleep")
                    .arg(format!("0.{:03}", (i * 7 + round * 3) % 60))
                    .spawn()
                    .unwrap()
            })
            .collect();
        let zombie = Command::new("true").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(100)); // it exits; nobody reaps it yet
        let mut pids: Vec<u32> = children.iter().map(|c| c.id()).collect();
        pids.push(zombie.id());
        pids.push(999_999_999);
        let results = tracer.attach_many(&pids).unwrap();
        assert_eq!(results.len(), pids.len());
        let mut held = Vec::new();
        for (pid, r) in pids.iter().zip(&results) {
            match r {
                Ok(tids) => {
                    assert_eq!(tids, &[*pid], "sleep has one thread");
                    assert!(status_field(*pid, "State:").starts_with('t'));
                    held.push(*pid);
                }
                Err(e) => assert!(e.to_string().contains(&pid.to_string()), "{e}"),
            }
        }
        let zombie_error = results[pids.len() - 2].as_ref().unwrap_err().to_string();
        assert!(zombie_error.contains("exited"), "{zombie_error}");
        assert_eq!(tracer.pids().unwrap(), {
            let mut h = held.clone();
            h.sort_unstable();
            h
        });
        for r in tracer.detach_many(&held).unwrap() {
            r.unwrap();
        }
        assert!(tracer.pids().unwrap().is_empty());
        for (c, r) in children.iter_mut().zip(&results) {
            match c.wait() {
                Ok(status) => assert!(status.success()),
                // It exited while seized: the tracer collected its exit.
                Err(_) => assert!(r.is_err()),
            }
        }
        let _ = { zombie }.wait();
    }
}

#[test]
fn step_over_keeps_the_breakpoint_for_every_call_with_ptrace_writes() {
    let dir = scratch("step-over");
    let Some(exe) = build(&dir, "repeat") else {
        return;
    };
    let mut child = Spawned::new(Command::new(&exe).arg("5"));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let (target, bp) = breakpoint_of(pid);
    let state = target.require_symbol("MPIR_debug_state").unwrap().address;
    let text = target.read_vec(bp, 16).unwrap();
    let tracer =
        Tracer::with_options(TracerOptions::default().with_write_mode(WriteMode::Ptrace)).unwrap();
    tracer.attach(pid).unwrap();
    tracer.insert_breakpoint(pid, bp).unwrap();
    assert_eq!(target.read_vec(bp, 1).unwrap(), [0xcc]);
    tracer.resume(pid).unwrap();
    child.send("go");
    for call in 1..=5 {
        let ev = tracer.wait(WAIT).unwrap().expect("breakpoint hit");
        let StopEvent::Breakpoint { tid, .. } = ev else {
            panic!("{ev:?}")
        };
        assert_eq!(target.read_c_int(state, "state").unwrap(), call);
        tracer.step_over(pid, tid).unwrap();
        assert_eq!(target.read_vec(bp, 1).unwrap(), [0xcc], "still planted");
        if call < 5 {
            tracer.resume(pid).unwrap();
        }
    }
    tracer.detach(pid).unwrap();
    assert_eq!(child.line(), "calls=5");
    assert_eq!(target.read_vec(bp, 16).unwrap(), text);
    assert_untouched(pid);
    assert!(child.finish().success());
}

#[test]
fn launch_failures_are_errors_and_short_programs_end() {
    let tracer = Tracer::new().unwrap();
    let e = tracer
        .launch(Command::new("/nonexistent/mpiexec"))
        .unwrap_err();
    assert!(e.to_string().contains("launch"), "{e}");
    assert!(tracer.pids().unwrap().is_empty());
    let mut child = tracer.launch(Command::new("true")).unwrap();
    let pid = child.id();
    tracer.resume(pid).unwrap();
    assert_eq!(
        tracer.wait(WAIT).unwrap(),
        Some(StopEvent::Exited { pid, status: 0 })
    );
    assert!(tracer.pids().unwrap().is_empty());
    // As documented: the tracer collected the exit, no zombie is left for the Child.
    assert!(child.wait().is_err());
}

#[test]
fn a_process_can_be_handed_over_stopped_to_another_tool() {
    let dir = scratch("handover");
    let Some(exe) = build(&dir, "signals") else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let first = Tracer::new().unwrap();
    first.attach(pid).unwrap();
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let main = target.require_symbol("main").unwrap().address;
    let text = target.read_vec(main, 8).unwrap();
    first.insert_breakpoint(pid, main).unwrap();
    first.detach_leaving_stopped(pid).unwrap();
    assert_eq!(target.read_vec(main, 8).unwrap(), text, "bytes restored");
    assert!(
        wait_for(5, || status_field(pid, "State:").starts_with('T')),
        "stopped by job control: {}",
        status_field(pid, "State:")
    );
    assert_eq!(status_field(pid, "TracerPid:"), "0");
    // Another tool takes it over, then lets it go as found (still stopped).
    let second = Tracer::new().unwrap();
    second.attach(pid).unwrap();
    second.detach(pid).unwrap();
    // The kernel puts a detached thread back into its group-stop as it leaves the trap: give
    // it the moment it takes on a loaded machine.
    assert!(
        wait_for(5, || status_field(pid, "State:").starts_with('T')),
        "still stopped after the second tool: {}",
        status_field(pid, "State:")
    );
    send_signal(pid, "CONT");
    child.send("report");
    assert_eq!(child.line(), "usr1=0 rt=0");
    assert_untouched(pid);
    assert!(child.finish().success());
}

#[test]
fn a_refused_or_vanished_attach_says_which_kind_of_failure_it_is() {
    use mpir_target::{ControlCause, TargetError};
    let cause = |e: TargetError| match e {
        TargetError::Control { cause, .. } => cause,
        other => panic!("not a control error: {other}"),
    };
    // A process another tracer already holds: the kernel refuses (EPERM).
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let first = Tracer::new().unwrap();
    first.attach(pid).unwrap();
    let second = Tracer::new().unwrap();
    // The refusal is diagnosed: the holder is named (the first tracer's thread).
    let tracer: u32 = mpir_target::testkit::status_field(pid, "TracerPid:")
        .parse()
        .unwrap();
    match second.attach(pid).unwrap_err() {
        TargetError::Denied { denial, .. } => assert_eq!(
            denial,
            mpir_types::access::AccessDenial::TracedBy {
                pid: tracer,
                name: std::fs::read_to_string(format!("/proc/{tracer}/comm"))
                    .unwrap()
                    .trim_end()
                    .to_string(),
            }
        ),
        other => panic!("not a diagnosed refusal: {other}"),
    }
    first.detach(pid).unwrap();
    // A process that is gone.
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(cause(second.attach(pid).unwrap_err()), ControlCause::Gone);
    assert_untouched(pid);
}
