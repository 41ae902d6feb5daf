//! MPI2DD events through acquisition: a live job built on mpi2dd's reference provider (a
//! metadirectory, two directories, their ranks) held by `live::Watcher`; a spawn raises the
//! events, the new ranks appear with their parentage and are held in turn, and the job
//! completes after release.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mpir_acquire::AcquireOptions;
use mpir_acquire::live::Watcher;
use mpir_acquire::mpi2dd_watch::WatchReport;
use support::*;

/// Builds mpi2dd's demo job on its reference provider (sources from `mpi2dd::testkit`).
fn build_job(dir: &Path) -> Option<PathBuf> {
    let src = mpi2dd::testkit::write_sources(&dir.join("provider")).expect("write the sources");
    let exe = dir.join("job");
    let r = run(Command::new("cc")
        .arg("-g")
        .arg(format!("-I{}", src.include_dir.display()))
        .arg(&src.provider)
        .arg(&src.job)
        .arg("-o")
        .arg(&exe));
    match r {
        Ok(_) => Some(exe),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

fn traced(pid: u32) -> bool {
    !matches!(status_field(pid, "TracerPid:").as_str(), "0" | "")
}

#[test]
fn a_spawn_is_reported_and_its_ranks_are_held_with_their_parentage() {
    let dir = scratch("mpi2dd-watch");
    let Some(job) = build_job(&dir) else {
        return;
    };
    let mut child = Command::new(&job)
        .args(["meta", "2", "2"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready meta="), "{line}");
    let meta = child.id();

    let o = AcquireOptions::default();
    let mut w = Watcher::attach(meta, o).unwrap();
    assert!(w.not_held.is_empty(), "{:?}", w.not_held);
    // The metadirectory, 2 directories, 4 ranks.
    let held = w.held_pids();
    assert_eq!(held.len(), 7, "{held:?}");
    for &p in &held {
        assert!(traced(p), "{p} held");
    }
    let before = w.job().ranks().count();
    assert_eq!(before, 4);

    // Directory 0 starts two ranks of a world spawned by its rank 1.
    writeln!(child.stdin.as_mut().unwrap(), "spawn 0 1 2").unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut new_ranks = Vec::new();
    let mut states = Vec::new();
    while new_ranks.is_empty() && Instant::now() < deadline {
        match w.next_event(Duration::from_secs(20)).unwrap() {
            Some(WatchReport::Changed { state, delta, .. }) => {
                states.push(state);
                new_ranks = delta.new_ranks;
            }
            Some(other) => panic!("{other:?}"),
            None => break,
        }
    }
    assert_eq!(new_ranks.len(), 2, "events seen: {states:?}");
    let child_world = new_ranks[0].0.clone();
    let spawn = w
        .job()
        .spawns
        .iter()
        .find(|s| s.child_world == child_world)
        .expect("the spawn edge");
    assert_eq!(spawn.parent_rank, 1, "{spawn:?}");
    assert!(spawn.parent_world.ends_with(".w0"), "{spawn:?}");
    // The new ranks are held too.
    for (_, _, key) in &new_ranks {
        assert!(w.held_pids().contains(&(key.pid as u32)), "{key} held");
    }
    // Later events (the parent rank's SPAWN) come and go without news.
    while let Some(r) = w.next_event(Duration::from_millis(500)).unwrap() {
        assert!(matches!(r, WatchReport::Changed { .. }), "{r:?}");
    }
    let all = w.held_pids();
    w.release().unwrap();
    for p in all {
        assert_untouched(p);
    }
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("spawned"), "{rest}");
    assert!(child.wait().unwrap().success(), "{rest}");
}

#[test]
fn launch_mode_acquires_the_job_at_its_start_event() {
    let dir = scratch("mpi2dd-launch");
    let Some(job) = build_job(&dir) else {
        return;
    };
    let mut cmd = Command::new(&job);
    cmd.args(["meta", "2", "3"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    let (w, mut child, state) = Watcher::launch(cmd, AcquireOptions::default()).unwrap();
    assert_eq!(state, mpi2dd::flags::DebugState::Start);
    assert!(w.not_held.is_empty(), "{:?}", w.not_held);
    assert_eq!(w.job().ranks().count(), 6, "2 directories x 3 ranks");
    let held = w.held_pids();
    assert_eq!(
        held.len(),
        9,
        "the metadirectory, 2 directories, 6 ranks: {held:?}"
    );
    for &p in &held {
        assert!(traced(p), "{p} held");
    }
    // The flags the draft has the debugger write, as the processes themselves hold them.
    let flags = |pid: u32| {
        let t = mpir_target::live::LiveTarget::open(pid, Default::default()).unwrap();
        mpi2dd::read::read_info(&t).unwrap().1.debugger_flags
    };
    use mpi2dd::flags::DebuggerFlags as F;
    let starter = flags(child.id());
    assert!(
        starter.contains(F::BEING_DEBUGGED.union(F::REQUEST_DIRECTORY_EVENTS)),
        "{starter:?}"
    );
    for (_, rank) in w.job().ranks() {
        assert!(
            flags(rank.process.pid as u32).contains(F::GATE),
            "rank {rank:?}"
        );
    }
    w.release().unwrap();
    for p in held {
        assert_untouched(p);
    }
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(line.starts_with("ready meta="), "{line}");
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
}
