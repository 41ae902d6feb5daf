//! `Session::stacks` and `Session::sample_stacks` on real processes: the bundled demo job
//! (compiled here; its ranks 0-2 sit in its `MPI_Recv`, rank 3 in its `MPI_Waitall`, each in
//! `pause`, under `main`), checked against gdb's `thread apply all bt` and on gcore cores of the
//! same ranks. Skipped, with a reason, where the demo sources, a C compiler, gdb or gcore are
//! missing (MPIR_REQUIRE_PEERS=1 makes that a failure).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::io::{BufRead, BufReader};
use std::ops::ControlFlow;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_session::{FoldedStacks, Session, SessionOptions, StackOptions};
use mpir_target::testkit::{gcore, have, run, scratch, skip};

mod oracle;
use oracle::{assert_running_untraced, assert_same_as_gdb, gdb_main_thread, main_thread_to_main};

mod demo_build;
use demo_build::demo;

/// Starts the demo (4 ranks) and waits until every rank is ready: (starter, rank pids).
fn start_demo(starter: &Path) -> (Child, Vec<u32>) {
    let mut child = Command::new(starter)
        .args(["-n", "4", "--lifetime", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut pids = Vec::new();
    while pids.len() < 4 {
        let l = lines.next().expect("the demo ended early").unwrap();
        // "rank R pid P ready"
        if let Some(p) = l
            .strip_suffix(" ready")
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|p| p.parse().ok())
        {
            pids.push(p);
        }
    }
    (child, pids)
}

#[test]
fn the_demo_jobs_stacks_merged_sampled_and_as_gdb_sees_them() {
    let Some((dir, starter)) = demo("session-stacks") else {
        return;
    };
    let (mut child, pids) = start_demo(&starter);
    let options = SessionOptions::default().with_timeout(Duration::from_secs(20));
    let mut session = Session::attach(child.id(), options).unwrap();
    let read = session
        .stacks(
            &StackOptions::default()
                .with_samples(2)
                .with_interval(Duration::from_millis(50)),
        )
        .unwrap();
    assert_running_untraced(&pids);
    assert_running_untraced(&[child.id()]);
    let proof = read.proof_release.as_ref().expect("the first read proves");
    assert!(proof.is_clean(), "{proof:?}");
    assert_eq!(read.samples.len(), 2);
    let last = read.last();
    assert!(last.unreached.is_empty(), "{:?}", last.unreached);
    let mut got: Vec<u32> = last.ranks.iter().map(|r| r.pid).collect();
    got.sort_unstable();
    let mut want = pids.clone();
    want.sort_unstable();
    assert_eq!(got, want);
    // Each process stopped once per sample, briefly.
    assert_eq!(last.stops.len(), 4);
    for s in &last.stops {
        assert!(s.stopped_for < Duration::from_secs(1), "{s:?}");
    }
    // As demo/rank.c's step 4 says: ranks 0-2 in MPI_Recv, rank 3 in MPI_Waitall, under main;
    // none moved.
    let text = read.tree().to_text();
    assert!(text.contains("main [0-3] 4 ranks"), "{text}");
    assert!(text.contains("MPI_Recv [0-2] 3 ranks"), "{text}");
    assert!(text.contains("MPI_Waitall [3] 1 rank"), "{text}");
    assert_eq!(
        read.unmoved.as_ref().map(ToString::to_string).as_deref(),
        Some("0-3")
    );
    assert_eq!(read.tree().classes().len(), 2, "{text}");

    // gdb as the oracle, on every rank (they are not traced any more).
    if have("gdb") {
        for r in &last.ranks {
            let ours = main_thread_to_main(r);
            assert_eq!(ours.last().map(String::as_str), Some("main"), "{ours:?}");
            assert_same_as_gdb(r.pid, &ours, &gdb_main_thread(r.pid));
        }
    } else {
        skip("gdb is not installed");
    }

    // The same stacks from gcore cores of the ranks.
    if have("gcore") {
        let cores = gcore(&dir, &pids).unwrap();
        let mut from_cores = Session::cores(&cores, SessionOptions::default()).unwrap();
        let core_read = from_cores.stacks(&StackOptions::default()).unwrap();
        assert_eq!(core_read.samples.len(), 1);
        let sample = core_read.last();
        assert!(sample.unreached.is_empty(), "{:?}", sample.unreached);
        assert!(sample.stops.is_empty());
        // No starter core: numbered by position.
        assert_eq!(core_read.numbered.len(), 4);
        for r in &sample.ranks {
            let live = last.ranks.iter().find(|l| l.pid == r.pid).unwrap();
            assert_eq!(main_thread_to_main(r), main_thread_to_main(live));
        }
    } else {
        skip("gcore is not installed");
    }

    // A profiler's sampling: bounded samples, every stop measured, folded stacks summed.
    let mut folded = FoldedStacks::default();
    let mut seen = 0;
    let summary = session
        .sample_stacks(
            &StackOptions::default()
                .with_interval(Duration::from_millis(10))
                .with_max_stop(Some(Duration::from_secs(1))),
            5,
            |s| {
                seen += 1;
                assert_eq!(s.stops.len(), 4);
                folded.add(&s.tree);
                if seen == 3 {
                    ControlFlow::Break(())
                } else {
                    ControlFlow::Continue(())
                }
            },
        )
        .unwrap();
    assert_eq!(summary.samples, 3);
    assert_eq!(summary.overran, 0);
    assert!(summary.max_stop > Duration::ZERO);
    assert!(summary.proof_release.is_none(), "proven once per session");
    let count = |call: &str| {
        folded
            .iter()
            .find(|(p, _)| {
                p.rsplit_once(&format!(";main;{call};"))
                    .is_some_and(|(_, leaf)| leaf.contains("pause"))
            })
            .unwrap_or_else(|| panic!("{folded}"))
            .1
    };
    // Ranks 0-2's main threads in MPI_Recv, rank 3's in MPI_Waitall, in each of 3 samples.
    assert_eq!(count("MPI_Recv"), 9, "{folded}");
    assert_eq!(count("MPI_Waitall"), 3, "{folded}");
    assert_running_untraced(&pids);

    let _ = child.kill();
    let _ = child.wait();
}

/// A stop bound no snapshot can meet: every sample reports every rank as overrunning, and
/// the ranks still run on untraced.
#[test]
fn a_stop_bound_that_is_overrun_is_reported() {
    let Some((_dir, starter)) = demo("session-stacks-bound") else {
        return;
    };
    let (mut child, pids) = start_demo(&starter);
    let mut session = Session::pids(pids.iter().copied(), SessionOptions::default()).unwrap();
    let summary = session
        .sample_stacks(
            &StackOptions::default()
                .with_interval(Duration::from_millis(5))
                .with_max_stop(Some(Duration::from_nanos(1))),
            2,
            |s| {
                assert_eq!(s.overran.len(), 4, "{:?}", s.stops);
                ControlFlow::Continue(())
            },
        )
        .unwrap();
    assert_eq!(summary.overran, 2);
    assert_running_untraced(&pids);
    let _ = child.kill();
    let _ = child.wait();
}

/// A process that exits between samples is unreached with a reason, never dropped (the
/// demo's starter stops the whole job when a rank dies: the process killed is a `sleep`).
#[test]
fn an_exited_process_is_unreached_not_dropped() {
    let Some((_dir, starter)) = demo("session-stacks-exit") else {
        return;
    };
    let (mut child, pids) = start_demo(&starter);
    let mut sleeper = Command::new("sleep").arg("60").spawn().unwrap();
    let mut session =
        Session::pids([pids[0], sleeper.id(), pids[1]], SessionOptions::default()).unwrap();
    let first = session.stacks(&StackOptions::default()).unwrap();
    assert!(first.last().unreached.is_empty());
    assert_eq!(
        first.numbered,
        vec![(0, pids[0]), (1, sleeper.id()), (2, pids[1])]
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let second = session.stacks(&StackOptions::default()).unwrap();
    let s = second.last();
    assert_eq!(s.ranks.len(), 2);
    assert_eq!(s.unreached.len(), 1, "{:?}", s.unreached);
    assert_eq!(s.unreached[0].rank, 1);
    assert_eq!(
        s.unreached[0].reason.code,
        mpir_types::unread::ReasonCode::Exited
    );
    let text = s.tree.to_text();
    let sleeper_pid = sleeper.id();
    assert!(
        text.contains(&format!(
            "unreached [1]: pid {sleeper_pid} exited (or names another process now); left alone"
        )),
        "{text}"
    );
    assert_running_untraced(&[pids[0], pids[1]]);
    let _ = child.kill();
    let _ = child.wait();
}

/// A profiler's callback that panics mid-run: the panic goes through `sample_stacks`, and
/// every rank runs on untraced (each was let go after its snapshot; the tracer's drop lets go
/// of anything else).
#[test]
fn a_panic_in_the_sampling_callback_leaves_every_rank_running() {
    let Some((_dir, starter)) = demo("session-stacks-panic") else {
        return;
    };
    let (mut child, pids) = start_demo(&starter);
    let mut session = Session::attach(child.id(), SessionOptions::default()).unwrap();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = session.sample_stacks(&StackOptions::default(), 5, |s| {
            if s.index == 2 {
                panic!("the profiler's own bug");
            }
            ControlFlow::Continue(())
        });
    }));
    assert!(result.is_err(), "the callback's panic propagates");
    drop(session);
    assert_running_untraced(&pids);
    assert_running_untraced(&[child.id()]);
    let _ = child.kill();
    let _ = child.wait();
}

/// The unwinder's C fixture (mpir-target/tests/fixtures/unwind_chain.c), -O0 and -O2: a main
/// thread in `main -> a -> b -> c -> pause`, or in `pause` inside a signal handler, and a
/// second thread blocked in `read`. Every thread of every process against gdb's, and the
/// per-thread tree.
#[test]
fn every_thread_of_a_c_fixture_as_gdb_sees_it() {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-target/tests/fixtures/unwind_chain.c");
    if !src.is_file() {
        skip(&format!(
            "the fixture {} is not in this tree",
            src.display()
        ));
        return;
    }
    if !have("gdb") {
        skip("gdb is not installed");
        return;
    }
    let dir = scratch("session-stacks-fixture");
    let mut children = Killed(Vec::new());
    for (opt, mode) in [
        ("-O0", "chain"),
        ("-O2", "chain"),
        ("-O0", "signal"),
        ("-O2", "signal"),
    ] {
        let exe = dir.join(format!("unwind_chain{opt}"));
        if !exe.is_file()
            && let Err(e) = run(Command::new("cc")
                .args(["-g", "-pthread", opt, "-o"])
                .arg(&exe)
                .arg(&src))
        {
            skip(&e);
            return;
        }
        let mut child = Command::new(&exe)
            .arg(mode)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line, "ready\n");
        children.0.push(child);
    }
    let pids: Vec<u32> = children.0.iter().map(Child::id).collect();
    // Every thread asleep in its system call.
    assert!(mpir_target::testkit::wait_for(10, || pids.iter().all(
        |p| {
            std::fs::read_dir(format!("/proc/{p}/task")).is_ok_and(|d| {
                d.filter_map(Result::ok).all(|t| {
                    std::fs::read_to_string(t.path().join("stat"))
                        .ok()
                        .and_then(|s| s.rsplit_once(") ").map(|(_, r)| r.starts_with('S')))
                        .unwrap_or(false)
                })
            })
        }
    )));
    let mut session = Session::pids(pids.iter().copied(), SessionOptions::default()).unwrap();
    let read = session
        .stacks(&StackOptions::default().with_per_thread(true))
        .unwrap();
    drop(session);
    assert_running_untraced(&pids);
    let last = read.last();
    assert!(last.unreached.is_empty(), "{:?}", last.unreached);
    for r in &last.ranks {
        assert_eq!(r.threads.len(), 2, "{r:?}");
        let gdb = oracle::gdb_threads(r.pid);
        for t in &r.threads {
            let g = gdb
                .get(&t.tid)
                .unwrap_or_else(|| panic!("gdb has no thread {}", t.tid));
            // gdb stops at main (`backtrace past-main` is off).
            let mut ours = oracle::names(t);
            if let Some(i) = ours.iter().position(|n| n == "main") {
                ours.truncate(i + 1);
            }
            assert_same_as_gdb(r.pid, &ours, g);
            assert!(t.truncated.is_none(), "{t:?}");
        }
    }
    // Per thread: every main thread under "main thread", each reader under its own thread
    // kind (its name, the executable's); the two executables (processes 0, 2 at -O0 and 1, 3
    // at -O2) are different modules, so their frames are different nodes; the signal
    // handler's frames only in processes 2 and 3.
    let text = read.tree().to_text();
    assert!(
        text.contains("\n  main thread [0-3] 4 ranks, 4 threads\n"),
        "{text}"
    );
    for (handler, reader) in [("[2]", "[0,2]"), ("[3]", "[1,3]")] {
        assert!(
            text.contains(&format!("in_handler {handler} 1 rank, 1 thread")),
            "{text}"
        );
        assert!(
            text.contains(&format!("reader_thread {reader} 2 ranks, 2 threads")),
            "{text}"
        );
    }
    assert_eq!(text.matches("in_handler").count(), 2, "{text}");
}

/// Child processes killed when the test ends, failed or not.
struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
