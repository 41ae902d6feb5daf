//! `Session::write_core` on the bundled demo job (compiled here; ranks 0-2 sit in its
//! `MPI_Recv`, rank 3 in its `MPI_Waitall`, each in `pause`): the core of one proven rank,
//! written while only that rank is stopped, reads as the live rank does — gdb's backtrace of
//! the core equals gdb's of the process, and our own core reader (`Session::cores`) gives the
//! stacks the live read gives. The rank runs on untraced; bad destinations and limits are
//! typed errors that leave no file. Skipped, with a reason, where the demo sources, a C
//! compiler or gdb are missing (MPIR_REQUIRE_PEERS=1 makes that a failure).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_session::{Session, SessionError, SessionOptions, StackOptions};
use mpir_target::corefile::write::{CoreOptions, CoreWriteError};
use mpir_target::testkit::{have, parse_gdb_backtraces, run, skip};

mod oracle;
use oracle::{assert_running_untraced, gdb_threads, main_thread_to_main};

mod demo_build;
use demo_build::demo;

/// Starts the demo (4 ranks) and waits until every rank is ready: the starter and each
/// rank's pid by rank.
fn start_demo(starter: &Path) -> (Child, HashMap<u64, u32>) {
    let mut child = Command::new(starter)
        .args(["-n", "4", "--lifetime", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut pids = HashMap::new();
    while pids.len() < 4 {
        let l = lines.next().expect("the demo ended early").unwrap();
        // "rank R pid P ready"
        let words: Vec<&str> = l.split_whitespace().collect();
        if let ["rank", r, "pid", p, "ready"] = words[..] {
            pids.insert(r.parse().unwrap(), p.parse().unwrap());
        }
    }
    (child, pids)
}

/// gdb's frame names of the main thread of `pid`, in the process or in a core of it.
fn gdb_main_names(
    threads: &HashMap<u32, Vec<mpir_target::testkit::GdbFrame>>,
    pid: u32,
) -> Vec<String> {
    threads[&pid].iter().map(|f| f.name.clone()).collect()
}

#[test]
fn a_ranks_core_reads_as_the_live_rank_and_the_rank_runs_on() {
    let Some((dir, starter)) = demo("session-write-core") else {
        return;
    };
    let (mut child, pids) = start_demo(&starter);
    let all: Vec<u32> = pids.values().copied().collect();
    let options = SessionOptions::default().with_timeout(Duration::from_secs(20));
    let mut session = Session::attach(child.id(), options).unwrap();

    let core = dir.join("rank3.core");
    let written = session
        .write_core(3, &core, &CoreOptions::default())
        .unwrap();
    eprintln!("{written:?}");
    assert_running_untraced(&all);
    assert_running_untraced(&[child.id()]);
    assert_eq!((written.rank, written.pid), (3, pids[&3]));
    assert!(
        written
            .proof_release
            .as_ref()
            .expect("the first read proves")
            .is_clean()
    );
    assert_eq!(written.core.path, core);
    assert_eq!(written.core.bytes, std::fs::metadata(&core).unwrap().len());
    assert!(written.core.threads >= 1);
    assert!(written.stopped_for >= written.core.duration);

    // Our reader: the core's stacks are the live rank's.
    let live = session.stacks(&StackOptions::default()).unwrap();
    let live3 = live.last().ranks.iter().find(|r| r.rank == 3).unwrap();
    let mut from_core =
        Session::cores(std::slice::from_ref(&core), SessionOptions::default()).unwrap();
    let read = from_core.stacks(&StackOptions::default()).unwrap();
    let sample = read.last();
    assert!(sample.unreached.is_empty(), "{:?}", sample.unreached);
    assert_eq!(sample.ranks.len(), 1);
    let ours = main_thread_to_main(&sample.ranks[0]);
    assert_eq!(ours, main_thread_to_main(live3));
    assert!(ours.iter().any(|n| n == "MPI_Waitall"), "{ours:?}");
    assert_eq!(ours.last().map(String::as_str), Some("main"));

    // gdb, the independent reader: its backtrace of our core is its backtrace of the rank.
    if have("gdb") {
        let out = run(Command::new("timeout")
            .args(["120", "gdb", "-nx", "-batch"])
            .args(["-ex", "set pagination off", "-ex", "thread apply all bt"])
            .arg(dir.join("mpir-demo-rank"))
            .arg(&core))
        .unwrap();
        let in_core = parse_gdb_backtraces(&out);
        let in_process = gdb_threads(pids[&3]);
        assert_eq!(in_core.len(), in_process.len());
        let names = gdb_main_names(&in_core, pids[&3]);
        assert_eq!(names, gdb_main_names(&in_process, pids[&3]));
        assert!(names.iter().any(|n| n == "MPI_Waitall"), "{names:?}");
    } else {
        skip("gdb is not installed");
    }
    assert_running_untraced(&all);

    // No such rank; a directory that does not exist; a limit the core does not fit: typed
    // errors, no file, and the rank runs on.
    let e = session
        .write_core(9, &dir.join("rank9.core"), &CoreOptions::default())
        .unwrap_err();
    assert!(matches!(e, SessionError::NoSuchRank { rank: 9 }), "{e}");
    let e = session
        .write_core(1, &dir.join("gone/rank1.core"), &CoreOptions::default())
        .unwrap_err();
    assert!(
        matches!(
            &e,
            SessionError::WriteCore {
                rank: 1,
                source: CoreWriteError::NoDirectory { .. },
                ..
            }
        ),
        "{e}"
    );
    let small = CoreOptions::default().with_max_bytes(4096);
    let e = session
        .write_core(1, &dir.join("rank1.core"), &small)
        .unwrap_err();
    let SessionError::WriteCore {
        rank: 1,
        pid,
        source: CoreWriteError::TooLarge {
            size, limit: 4096, ..
        },
    } = e
    else {
        panic!("not TooLarge");
    };
    assert_eq!(pid, pids[&1]);
    assert!(size > 4096);
    assert!(!dir.join("rank1.core").exists());
    let stray: Vec<_> = std::fs::read_dir(&*dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(stray.is_empty(), "{stray:?}");
    assert_running_untraced(&all);

    // Cores are not live ranks.
    let e = from_core
        .write_core(0, &dir.join("again.core"), &CoreOptions::default())
        .unwrap_err();
    assert!(matches!(e, SessionError::Unsupported { .. }), "{e}");

    let _ = child.kill();
    let _ = child.wait();
}
