//! Process control on live processes: a breakpoint on MPIR_Breakpoint hit from a secondary
//! thread, the call's return emulated, and detach leaving the process exactly as found (text
//! bytes identical, every thread running and untraced, output and exit status as without us).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::{StopEvent, Tracer};
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_target::{MemoryExt, SymbolLookupExt};
use support::*;

/// Every thread of `pid`: (state letter, tracer pid).
fn thread_states(pid: u32) -> Vec<(String, u32)> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let status = std::fs::read_to_string(e.ok()?.path().join("status")).ok()?;
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .map(|v| v.trim().to_string())
                    .unwrap_or_default()
            };
            let state = field("State:").chars().next()?.to_string();
            Some((state, field("TracerPid:").parse().ok()?))
        })
        .collect()
}

fn assert_untouched(pid: u32) {
    let states = thread_states(pid);
    assert!(!states.is_empty());
    for (state, tracer) in &states {
        assert_eq!(*tracer, 0, "a thread is still traced: {states:?}");
        assert_ne!(state, "t", "a thread is left in tracing stop: {states:?}");
        assert_ne!(state, "T", "a thread is left stopped: {states:?}");
    }
}

fn build(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    let src = fixtures().join(format!("{name}.c"));
    cc(&dir.join(name), &["-O2", "-g", "-pthread", src.to_str()?])
        .map_err(|e| skip(&e))
        .ok()
}

#[test]
fn breakpoint_from_a_secondary_thread_and_clean_detach() {
    let dir = scratch("tracer-threads");
    let Some(exe) = build(&dir, "threaded") else {
        return;
    };
    let mut child = Spawned::new(&mut Command::new(&exe));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let bp = target.require_symbol("MPIR_Breakpoint").unwrap().address;
    let state = target.require_symbol("MPIR_debug_state").unwrap().address;
    let text_before = target.read_vec(bp, 16).unwrap();

    let tracer = Tracer::new().unwrap();
    let tids = tracer.attach(pid).unwrap();
    assert_eq!(tids.len(), 4, "main thread and three workers: {tids:?}");
    tracer.insert_breakpoint(pid, bp).unwrap();
    assert_eq!(target.read_vec(bp, 1).unwrap(), [0xcc]);
    tracer.resume(pid).unwrap();
    child.send("go");
    let ev = tracer
        .wait(Duration::from_secs(20))
        .unwrap()
        .expect("breakpoint hit");
    let StopEvent::Breakpoint {
        pid: p,
        tid,
        address,
    } = ev
    else {
        panic!("{ev:?}")
    };
    assert_eq!((p, address), (pid, bp));
    assert_ne!(tid, pid, "hit from a secondary thread");
    tracer.stop_all(pid).unwrap();
    assert_eq!(target.read_c_int(state, "MPIR_debug_state").unwrap(), 1);
    tracer.return_from_call(pid, tid).unwrap();
    tracer.detach(pid).unwrap();

    assert_eq!(
        target.read_vec(bp, 16).unwrap(),
        text_before,
        "text bytes restored"
    );
    let line = child.line();
    assert_eq!(
        line.trim(),
        "returned state=1",
        "the call returned normally"
    );
    assert_untouched(pid);
    assert!(child.finish().success(), "the process finished normally");
}

#[test]
fn dropping_the_tracer_detaches_and_restores() {
    let dir = scratch("tracer-drop");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let starter = FakeStarter::start(&exe, 8, "shared");
    let pid = starter.pid();
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let bp = target.require_symbol("MPIR_Breakpoint").unwrap().address;
    let before = target.read_vec(bp, 16).unwrap();
    {
        let tracer = Tracer::new().unwrap();
        tracer.attach(pid).unwrap();
        tracer.insert_breakpoint(pid, bp).unwrap();
        // Read while stopped: the table is consistent.
        let table = read_proctable(&target, &ReadOptions::default()).unwrap();
        assert_eq!(table.resolved.entries.len(), 8);
        // No detach: the drop must do it.
    }
    assert_eq!(target.read_vec(bp, 16).unwrap(), before);
    assert_untouched(pid);
    assert!(starter.finish());
}

#[test]
fn errors_name_the_process() {
    let tracer = Tracer::new().unwrap();
    let e = tracer.attach(999_999_999).unwrap_err();
    assert!(e.to_string().contains("999999999"), "{e}");
    let e = tracer.detach(12345).unwrap_err();
    assert!(e.to_string().contains("not attached"), "{e}");
    assert_eq!(tracer.wait(Duration::from_millis(10)).unwrap(), None);
    // "No timeout" must not overflow the deadline.
    assert_eq!(tracer.wait(Duration::MAX).unwrap(), None);
}

#[test]
fn open_mpi_attach_read_detach_and_the_job_completes() {
    if !have("orterun") || !have("mpicc.openmpi") {
        return skip("Open MPI (orterun, mpicc.openmpi) is not installed");
    }
    let dir = scratch("tracer-ompi");
    let src = fixtures().join("mpi_hello.c");
    let app = dir.join("mpi_hello");
    if let Err(e) = run(Command::new("mpicc.openmpi").arg(&src).arg("-o").arg(&app)) {
        return skip(&e);
    }
    let mut job = Command::new("orterun")
        .args(["--oversubscribe", "-n", "2"])
        .arg(&app)
        .arg("4")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = job.id();
    // Both ranks have started (and printed their pids) once two lines came.
    let mut out = BufReader::new(job.stdout.take().unwrap());
    let mut printed = Vec::new();
    for _ in 0..2 {
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let pid: i64 = line.split_whitespace().nth(3).unwrap().parse().unwrap();
        printed.push(pid);
    }
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let tracer = Tracer::new().unwrap();
    let threads = tracer.attach(pid).unwrap();
    assert!(threads.len() > 1, "orterun is multi-threaded: {threads:?}");
    let table = read_proctable(&target, &ReadOptions::default()).unwrap();
    let mut pids: Vec<i64> = table.resolved.entries.iter().map(|e| e.pid).collect();
    pids.sort_unstable();
    printed.sort_unstable();
    assert_eq!(
        pids, printed,
        "every proctable pid is a rank's own getpid()"
    );
    tracer.detach(pid).unwrap();
    assert_untouched(pid);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(job.wait().unwrap().success(), "the job completed");
    assert_eq!(rest.matches("done").count(), 2, "{rest}");
}

#[test]
fn detach_all_releases_every_process() {
    let dir = scratch("tracer-all");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let starters = [
        FakeStarter::start(&exe, 2, "shared"),
        FakeStarter::start(&exe, 3, "dup"),
    ];
    let tracer = Tracer::new().unwrap();
    let mut before = Vec::new();
    for s in &starters {
        let target = LiveTarget::open(s.pid(), DebugOptions::default()).unwrap();
        let bp = target.require_symbol("MPIR_Breakpoint").unwrap().address;
        before.push((bp, target.read_vec(bp, 16).unwrap()));
        tracer.attach(s.pid()).unwrap();
        tracer.insert_breakpoint(s.pid(), bp).unwrap();
    }
    let mut released = tracer.detach_all().unwrap();
    released.sort_unstable();
    let mut pids: Vec<u32> = starters.iter().map(FakeStarter::pid).collect();
    pids.sort_unstable();
    assert_eq!(released, pids);
    for (s, (bp, bytes)) in starters.iter().zip(&before) {
        let target = LiveTarget::open(s.pid(), DebugOptions::default()).unwrap();
        assert_eq!(&target.read_vec(*bp, 16).unwrap(), bytes);
        assert_untouched(s.pid());
    }
    for s in starters {
        assert!(s.finish());
    }
}
