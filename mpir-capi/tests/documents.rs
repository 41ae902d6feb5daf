//! The session calls the examples do not make, through the exported functions themselves (the
//! rlib), on the demo job: the job, queues and stacks documents agree with the typed rank
//! table; after release only the table remains; and the launch rule — release ends the job and
//! reaps the starter, unless the caller asked to leave it running (then it is the caller's).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::ffi::{CStr, CString, c_char};
use std::sync::Mutex;
use std::time::Duration;

use common::{alive, gone_within};
use mpir::{
    mpir_last_error, mpir_options_free, mpir_options_new, mpir_options_set_leave_running,
    mpir_options_set_timeout_ms, mpir_rank, mpir_session, mpir_session_deadlock_json,
    mpir_session_free, mpir_session_job_json, mpir_session_launch, mpir_session_queues_json,
    mpir_session_rank, mpir_session_rank_count, mpir_session_release, mpir_session_stacks_json,
    mpir_session_starter_pid, mpir_status, mpir_string_free,
};
use serde_json::Value;

/// One demo job at a time (two cores).
static ONE_JOB: Mutex<()> = Mutex::new(());

fn ok(what: &str, s: mpir_status) {
    // SAFETY: a NUL-terminated string of this thread, read before the next call.
    let msg = unsafe { CStr::from_ptr(mpir_last_error()) }.to_string_lossy();
    assert_eq!(s, mpir_status::MPIR_STATUS_OK, "{what}: {msg}");
}

/// Launches the demo job (4 ranks) with `leave_running`.
fn launch(leave_running: bool) -> *mut mpir_session {
    let starter = mpir_demo::starter().expect("the demo job");
    let args: Vec<CString> = [starter.to_str().unwrap(), "-n", "4"]
        .iter()
        .map(|a| CString::new(*a).unwrap())
        .collect();
    let argv: Vec<*const c_char> = args.iter().map(|a| a.as_ptr()).collect();
    let mut opts = std::ptr::null_mut();
    // SAFETY: `opts` is writable.
    ok("options", unsafe { mpir_options_new(&mut opts) });
    ok("timeout", mpir_options_set_timeout_ms(opts, 30_000));
    ok(
        "leave running",
        mpir_options_set_leave_running(opts, i32::from(leave_running)),
    );
    let mut s = std::ptr::null_mut();
    // SAFETY: `argv` holds `argv.len()` NUL-terminated strings; `s` is writable.
    ok("launch", unsafe {
        mpir_session_launch(argv.as_ptr(), argv.len(), opts, &mut s)
    });
    ok("free options", mpir_options_free(opts));
    s
}

/// Takes a returned document.
fn doc(what: &str, call: impl FnOnce(*mut *mut c_char) -> mpir_status) -> Value {
    let mut p = std::ptr::null_mut();
    ok(what, call(&mut p));
    // SAFETY: a NUL-terminated string the library returned.
    let v = serde_json::from_slice(unsafe { CStr::from_ptr(p) }.to_bytes()).unwrap();
    ok("string free", mpir_string_free(p));
    v
}

fn table(s: *mut mpir_session) -> Vec<(u64, u32)> {
    let mut n = 0;
    // SAFETY: `n` is writable.
    ok("count", unsafe { mpir_session_rank_count(s, &mut n) });
    (0..n)
        .map(|i| {
            let mut r = std::mem::MaybeUninit::<mpir_rank>::uninit();
            // SAFETY: `r` is writable; filled on success.
            ok("rank", unsafe { mpir_session_rank(s, i, r.as_mut_ptr()) });
            // SAFETY: written by the successful call.
            let r = unsafe { r.assume_init() };
            (r.rank, r.pid)
        })
        .collect()
}

#[test]
fn the_documents_agree_with_the_rank_table_and_release_ends_the_job() {
    let _one = ONE_JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = launch(false);
    let ranks = table(s);
    assert_eq!(ranks.iter().map(|r| r.0).collect::<Vec<_>>(), [0, 1, 2, 3]);
    let mut starter = 0;
    // SAFETY: `starter` is writable.
    ok("starter pid", unsafe {
        mpir_session_starter_pid(s, &mut starter)
    });
    assert!(alive(starter));

    let job = doc("job", |out| {
        // SAFETY: `out` is the writable pointer `doc` gives (so in the calls below).
        unsafe { mpir_session_job_json(s, out) }
    });
    assert_eq!(job["schema"], "mpir.job/1");
    assert_eq!(job["starter"]["pid"], starter);
    let job_ranks: Vec<(u64, u32)> = job["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                u32::try_from(r["pid"].as_u64().unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(job_ranks, ranks);

    // The deadlock first: once it is confirmed the ranks are blocked, and the queues and
    // stacks read next see them where they stay.
    let mut deadlock = Value::Null;
    for _ in 0..20 {
        // SAFETY: as above.
        deadlock = doc("deadlock", |out| unsafe {
            mpir_session_deadlock_json(s, 2, 50, out)
        });
        if deadlock["verdict"] == "deadlock" {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    assert_eq!(deadlock["verdict"], "deadlock", "{deadlock}");
    // SAFETY: as above.
    let queues = doc("queues", |out| unsafe { mpir_session_queues_json(s, out) });
    assert_eq!(queues["schema"], "mpir.queues/1");
    let read: Vec<(u64, u32)> = queues["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            assert!(r["error"].is_null(), "{r}");
            (
                r["rank"].as_u64().unwrap(),
                u32::try_from(r["pid"].as_u64().unwrap()).unwrap(),
            )
        })
        .collect();
    assert_eq!(read, ranks);
    // SAFETY: as above.
    let stacks = doc("stacks", |out| unsafe {
        mpir_session_stacks_json(s, 2, 20, out)
    });
    assert_eq!(stacks["schema"], "mpir.stacks/2");
    assert_eq!(stacks["source"], "starter");
    assert_eq!(stacks["samples"], 2);
    assert_eq!(stacks["interval_ms"], 20);
    assert!(
        stacks.to_string().contains("MPI_Recv"),
        "ranks 0-2 wait in MPI_Recv: {stacks}"
    );

    ok("release", mpir_session_release(s));
    let pids: Vec<u32> = ranks.iter().map(|r| r.1).collect();
    assert!(gone_within(&pids, 10), "ranks left after release");
    assert!(
        !alive(starter),
        "the starter is ended (and reaped: no zombie)"
    );
    assert!(
        !std::path::Path::new(&format!("/proc/{starter}")).exists(),
        "the starter was not reaped"
    );
    // Only the table remains.
    assert_eq!(table(s), ranks);
    let mut p = std::ptr::null_mut();
    // SAFETY: `p` is writable.
    let st = unsafe { mpir_session_queues_json(s, &mut p) };
    assert_eq!(st, mpir_status::MPIR_STATUS_RELEASED);
    assert!(p.is_null());
    ok("free", mpir_session_free(s));
}

#[test]
fn a_starter_left_running_is_the_callers() {
    let _one = ONE_JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let s = launch(true);
    let pids: Vec<u32> = table(s).iter().map(|r| r.1).collect();
    let mut starter = 0;
    // SAFETY: `starter` is writable.
    ok("starter pid", unsafe {
        mpir_session_starter_pid(s, &mut starter)
    });
    ok("free", mpir_session_free(s));
    std::thread::sleep(Duration::from_millis(300));
    assert!(alive(starter), "the starter was to be left running");
    assert!(
        pids.iter().all(|&p| alive(p)),
        "the job was to be left running"
    );
    // The caller's now: end it and reap it, as the header says.
    let pid = libc::pid_t::try_from(starter).unwrap();
    // SAFETY: kill and waitpid on our own unreaped child.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    let mut status = 0;
    // SAFETY: as above; `status` is writable.
    let reaped = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(reaped, pid);
    assert!(gone_within(&pids, 10), "ranks left after the starter ended");
}
