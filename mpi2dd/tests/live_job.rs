//! The reference provider in a live job (`tests/fixtures/job.c`: a metadirectory that is also
//! the starter, two directories, two ranks each) is acquired whole, and identically, from a
//! rank, a directory and the metadirectory, by reading the running processes (no stop).
//! The oracles are the kernel's view of the processes (parent pids, `/proc/PID/exe`) and what
//! the fixture prints, not our own decoders.

#![cfg(target_os = "linux")]

mod support;

use mpi2dd::connect::{LocalConnector, ProcessKey};
use mpi2dd::flags::MpiFlags;
use mpi2dd::job::{Problem, Role};
use mpi2dd::traverse::{TraverseOptions, traverse};
use support::*;

#[test]
fn the_live_job_is_the_same_from_a_rank_a_directory_and_the_metadirectory() {
    let dir = scratch("live-job");
    let Some(exe) = build_job(&dir) else { return };
    let mut job = RunningJob::start(&exe, 2, 2);
    let c = LocalConnector::new();
    let host = hostname();
    let opts = TraverseOptions::default();
    let meta = job.meta_pid();

    let from_meta = traverse(&c, "localhost", meta, &opts).unwrap();
    let j = &from_meta.job;
    assert!(j.problems.is_empty(), "{:?}", j.problems);
    assert!(j.unreachable.is_empty(), "{:?}", j.unreachable);
    assert_eq!(j.metadirectory, Some(ProcessKey::new(host.as_str(), meta)));

    // The processes read: the metadirectory and the two directories it started.
    let exe_path = std::fs::canonicalize(&exe).unwrap();
    let exe_str = exe_path.to_str().unwrap();
    let mut expected: Vec<i32> = job.dirs.clone();
    expected.push(meta);
    expected.sort();
    let mut got: Vec<i32> = j.processes.iter().map(|p| p.process.pid).collect();
    got.sort();
    assert_eq!(got, expected);
    for p in &j.processes {
        assert_eq!(&*p.process.host, host);
        assert_eq!(p.executable.as_deref(), Some(exe_str));
        if p.process.pid == meta {
            assert_eq!(p.mpi_flags, MpiFlags::I_AM_METADIR | MpiFlags::I_AM_STARTER);
            assert_eq!(p.listed_as, [Role::Metadirectory].into());
        } else {
            assert_eq!(
                ppid(p.process.pid),
                meta,
                "directories are the meta's children"
            );
            assert_eq!(p.mpi_flags, MpiFlags::I_AM_DIR);
            assert_eq!(p.listed_by, [ProcessKey::new(host.as_str(), meta)].into());
            assert_eq!(p.proctable_entries, 2);
        }
    }

    // One world of four ranks; rank r was started by directory r / 2.
    assert_eq!(j.worlds.len(), 1);
    let w = &j.worlds[0];
    assert_eq!(&*w.id, format!("job{meta}.w0"));
    assert!(w.spawned_by.is_none());
    assert_eq!(j.roots, std::slice::from_ref(&w.id));
    let ranks: Vec<i32> = w.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 1, 2, 3]);
    for r in &w.ranks {
        let d = job.dirs[r.rank as usize / 2];
        assert_eq!(
            ppid(r.process.pid),
            d,
            "rank {} is a child of its directory",
            r.rank
        );
        assert_eq!(r.listed_by, [ProcessKey::new(host.as_str(), d)].into());
        let real_exe = std::fs::read_link(format!("/proc/{}/exe", r.process.pid)).unwrap();
        assert_eq!(r.executable.as_deref(), real_exe.to_str());
    }

    // The same job from a directory and from a rank (named by another host alias).
    let rank2 = w.ranks[2].process.pid;
    for (h, pid) in [(host.as_str(), job.dirs[1]), ("127.0.0.1", rank2)] {
        let t = traverse(&c, h, pid, &opts).unwrap();
        assert_eq!(t.entry, ProcessKey::new(host.as_str(), pid));
        assert_eq!(t.job, *j, "from {h}:{pid}");
    }

    // Reading changed nothing: the job still works and exits cleanly.
    let spawned = job.spawn(0, 1, 1);
    assert_eq!(spawned.len(), 1);
    assert!(job.meta.finish().success());
}

#[test]
fn a_dead_directory_is_unreachable_and_the_rest_of_the_job_is_still_found() {
    let dir = scratch("live-dead-dir");
    let Some(exe) = build_job(&dir) else { return };
    let job = RunningJob::start(&exe, 2, 2);
    let c = LocalConnector::new();
    let host = hostname();
    let meta = job.meta_pid();
    let dead = job.dirs[1];
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &dead.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    // It stays a zombie (the metadirectory reaps it only at the end), still listed.
    assert!(wait_until(|| std::fs::read_to_string(format!(
        "/proc/{dead}/stat"
    ))
    .is_ok_and(|s| s.contains(") Z "))));

    let opts = TraverseOptions::default();
    let j = traverse(&c, "localhost", meta, &opts).unwrap().job;
    assert_eq!(j.unreachable.len(), 1, "{:?}", j.unreachable);
    let u = &j.unreachable[0];
    assert_eq!(u.process, ProcessKey::new(host.as_str(), dead));
    assert_eq!(u.listed_by, [ProcessKey::new(host.as_str(), meta)].into());
    assert_eq!(u.listed_as, [Role::Directory].into());
    let ranks: Vec<i32> = j.worlds[0].ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [0, 1], "only the live directory's ranks");
    // From a rank of the live directory: the same partial job.
    let rank0 = j.worlds[0].ranks[0].process.pid;
    assert_eq!(traverse(&c, &host, rank0, &opts).unwrap().job, j);
    // The fixture itself notices the killed directory.
    assert_eq!(job.meta.finish().code(), Some(1));
}

fn wait_until(mut cond: impl FnMut() -> bool) -> bool {
    for _ in 0..200 {
        if cond() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    false
}

/// The provider publishes entries before the size and a grown table before its pointer, and
/// the reader re-reads `MPI2DD_info` until pointers and sizes are stable: every snapshot taken
/// while the table grows (bursts of 2000 entries, reallocated as it doubles) and found
/// stable is a clean prefix of ranks, never garbage; one that kept changing says so
/// (`Problem::Unstable`).
#[test]
fn a_proctable_growing_while_read_always_reads_as_a_clean_prefix() {
    let dir = scratch("live-growing");
    let Some(exe) = cc(
        &dir.join("growing"),
        &["-O2", "-g"],
        &["provider/mpi2dd_provider.c", "tests/fixtures/growing.c"],
    )
    .map_err(|e| skip(&e))
    .ok() else {
        return;
    };
    let mut p = Spawned::new(&mut std::process::Command::new(&exe));
    assert_eq!(p.line(), "ready");
    let c = LocalConnector::new();
    let opts = TraverseOptions::default();
    let pid = p.pid() as i32;
    // Bursts 200 ms apart: quiet windows far longer than a snapshot of a few 10 000 entries.
    p.send("grow 2000 200");
    let (mut stable, mut unstable, mut last, mut grew) = (0, 0, 0usize, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while grew < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "{stable} stable, {unstable} unstable"
        );
        let t = traverse(&c, "localhost", pid, &opts).unwrap();
        if t.job
            .problems
            .iter()
            .any(|p| matches!(p, Problem::Unstable { .. }))
        {
            unstable += 1;
            continue;
        }
        stable += 1;
        assert!(t.job.problems.is_empty(), "{:?}", t.job.problems);
        let ranks = t.job.worlds.first().map_or(&[][..], |w| &w.ranks[..]);
        for (i, r) in ranks.iter().enumerate() {
            assert_eq!((r.rank, r.process.pid), (i as i32, 1_000_000 + i as i32));
        }
        assert!(ranks.len() >= last, "the table never shrinks");
        if ranks.len() > last {
            grew += 1;
        }
        last = ranks.len();
        // No directory or metadirectory table: the metadirectory is the only directory.
        assert_eq!(t.entry_snapshot.info.directory_table, 0);
        assert_eq!(t.job.processes.len(), 1);
    }
    p.send("stop");
    let line = p.line();
    let grown: usize = line.strip_prefix("grown ").unwrap().parse().unwrap();
    assert!(grown >= last, "{line}");
    eprintln!("snapshots: {stable} stable ({grew} saw growth), {unstable} unstable; {grown} ranks");
    assert!(p.finish().success());
}
