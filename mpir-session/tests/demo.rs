//! Sessions over the bundled demo job (`mpir-demo/demo/*.c`, compiled here): its ranks keep
//! MPICH 4.1 debug queues with a deadlock among ranks 0-2. Skipped, with a reason, where the
//! sources or a C compiler are missing (e.g. from a crate tarball).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_session::{Engine, ReaderOptions, Session, SessionOptions};
use mpir_target::testkit::assert_untouched;

mod demo_build;
use demo_build::demo;

#[test]
fn the_demo_jobs_queues_and_deadlock_through_one_session() {
    let Some((_dir, starter)) = demo("session-demo") else {
        return;
    };
    let mut cmd = Command::new(&starter);
    cmd.args(["-n", "4", "--lifetime", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let options = SessionOptions::default()
        .with_timeout(Duration::from_secs(20))
        .with_reader_options(ReaderOptions::default().with_engine(Engine::Native));
    let mut session = Session::launch(cmd, options).unwrap();
    let mut child = session.take_child().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ready = 0;
    while ready < 4 {
        let l = lines.next().expect("the demo ended early").unwrap();
        ready += usize::from(l.ends_with(" ready"));
    }
    let pids = session.job().unwrap().attached_pids();
    assert_eq!(pids.len(), 4);

    let mut progress = Vec::new();
    let read = session
        .queues_with(|p| progress.push((p.sample, p.done, p.total, p.rank.pid)))
        .unwrap();
    let want: Vec<(u32, usize, usize, u32)> = read
        .ranks
        .iter()
        .enumerate()
        .map(|(i, r)| (1, i + 1, 4, r.pid))
        .collect();
    assert_eq!(progress, want);
    let engine = read.engine.as_ref().map(ToString::to_string);
    assert_eq!(engine.as_deref(), Some("native MPICH debug queues"));
    assert!(read.fallback.is_none());
    assert!(read.printed.is_empty());
    assert!(read.is_complete(), "{read:?}");
    assert!(read.release.is_clean(), "{:?}", read.release.problems);
    assert_eq!(read.ranks.len(), 4);
    for (i, r) in read.ranks.iter().enumerate() {
        assert_eq!(r.rank, Some(i as u64));
        let q = r.queues.as_ref().unwrap();
        assert!(q.world_rank() == Some(i as u64), "rank {i}: {q:?}");
        let ops: usize = q
            .communicators
            .iter()
            .map(|c| c.receives.operations().len() + c.sends.operations().len())
            .sum();
        assert!(ops > 0, "rank {i} has no pending operation: {q:?}");
        // Its stacks at the same instant: ranks 0-2 in the demo's MPI_Recv, rank 3 in its
        // MPI_Waitall (rank.c, step 4).
        let stacks = r.stacks.as_ref().expect("stacks read with the queues");
        let want = if i < 3 { "MPI_Recv" } else { "MPI_Waitall" };
        assert!(
            stacks
                .iter()
                .any(|t| t.frames.iter().any(|f| f.symbol.as_deref() == Some(want))),
            "rank {i}: {stacks:?}"
        );
    }
    for &p in &pids {
        assert_untouched(p);
    }
    // The one snapshot's analysis (what a core file gives): the cycle among 0-2, potential
    // only, over every rank read.
    let coverage = read.coverage(None);
    assert_eq!((coverage.ranks, coverage.read), (4, 4));
    assert!(coverage.is_complete());
    let one = read.analyze().unwrap().expect("every rank was read");
    assert_eq!(one.samples, 1);
    assert_eq!(
        one.verdict,
        mpir_types::deadlock::Verdict::PotentialDeadlock
    );
    let mut in_cycle: Vec<u64> = one.cycles.iter().flat_map(|c| c.ranks.clone()).collect();
    in_cycle.sort_unstable();
    in_cycle.dedup();
    assert_eq!(in_cycle, [0, 1, 2]);

    let dl = session.deadlock(3, Duration::from_millis(50)).unwrap();
    let engine = dl.engine.as_ref().map(ToString::to_string);
    assert_eq!(engine.as_deref(), Some("native MPICH debug queues"));
    assert!(dl.coverage.is_complete(), "{:?}", dl.coverage);
    assert_eq!((dl.coverage.ranks, dl.coverage.read), (4, 4));
    assert_eq!(dl.releases.len(), 3);
    let report = dl.report.unwrap();
    assert_eq!(report.samples, 3);
    assert_eq!(report.verdict, mpir_types::deadlock::Verdict::Deadlock);
    let mut in_cycles: Vec<u64> = report
        .cycles
        .iter()
        .flat_map(|c| c.ranks.iter().copied())
        .collect();
    in_cycles.sort_unstable();
    in_cycles.dedup();
    assert_eq!(in_cycles, [0, 1, 2]);
    for &p in &pids {
        assert_untouched(p);
    }
    drop(session);

    // A tool that shows queues only leaves the stacks out (no rank held longer for them).
    let options = SessionOptions::default()
        .with_timeout(Duration::from_secs(20))
        .with_reader_options(ReaderOptions::default().with_engine(Engine::Native))
        .with_queue_stacks(false);
    let mut session = Session::pids(pids.iter().copied(), options).unwrap();
    let read = session.queues().unwrap();
    assert!(read.is_complete(), "{read:?}");
    assert!(read.ranks.iter().all(|r| r.stacks.is_none()), "{read:?}");
    drop(session);
    for &p in &pids {
        assert_untouched(p);
    }
    let _ = child.kill();
    let _ = child.wait();
}
