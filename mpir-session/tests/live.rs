//! Sessions over real processes: fake MPIR starters and ranks (the C fixtures of
//! `mpir-acquire`, compiled at test time), decoy processes that must never be touched, and
//! plain processes named by pid. Skipped, with a reason, where the fixtures or a C compiler
//! are missing (e.g. from a crate tarball).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use mpir_session::{RankError, ReleaseProblem, Session, SessionOptions, Unreadable};
use mpir_target::testkit::{Decoys, Scratch, assert_untouched, run, scratch, skip, status_field};
use mpir_target::{MemoryExt, SymbolLookupExt};

struct Fixtures {
    _dir: Scratch,
    dir: PathBuf,
    starter: PathBuf,
    rank: PathBuf,
}

/// The fake starter and rank of `mpir-acquire`'s tests, compiled into a scratch directory.
fn fixtures(name: &str) -> Option<Fixtures> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures");
    if !src.join("starter.c").is_file() {
        skip(&format!("the C fixtures are not at {}", src.display()));
        return None;
    }
    let dir = scratch(name);
    let build = |name: &str, flags: &[&str]| -> Option<PathBuf> {
        let exe = dir.join(name);
        match run(Command::new("cc")
            .args(flags)
            .arg("-pthread")
            .arg(src.join(format!("{name}.c")))
            .arg("-o")
            .arg(&exe))
        {
            Ok(_) => Some(exe),
            Err(e) => {
                skip(&e);
                None
            }
        }
    };
    let starter = build("starter", &["-g"])?;
    let rank = build("rank", &["-g", "-O1"])?;
    let path = dir.to_path_buf();
    Some(Fixtures {
        _dir: dir,
        dir: path,
        starter,
        rank,
    })
}

fn starter_command(f: &Fixtures, opts: &[String]) -> Command {
    let mut c = Command::new(&f.starter);
    // Ranks wait for stdin (the starter's, inherited) to close.
    c.args(opts).arg("--").arg(&f.rank).arg("stdin");
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    c
}

fn options() -> SessionOptions {
    SessionOptions::default().with_timeout(Duration::from_secs(20))
}

/// Reads the job's output until `n` ranks have printed "rank R pid P".
/// Waits (up to 20 s) until the fake starter `pid` has announced its spawn
/// (`MPIR_debug_state` = `MPIR_DEBUG_SPAWNED`): its ranks print before it fills the table, and
/// attaching in that window catches the spawn event, which holds the ranks for the gate.
fn wait_spawned(pid: u32) {
    let state = || {
        let t = mpir_target::live::LiveTarget::open(pid, Default::default()).ok()?;
        let a = t.require_symbol("MPIR_debug_state").ok()?.address;
        t.read_c_int(a, "MPIR_debug_state").ok()
    };
    assert!(
        mpir_target::testkit::wait_for(20, || state() == Some(1)),
        "starter {pid} never announced its spawn"
    );
}

fn wait_ranks(out: &mut BufReader<ChildStdout>, n: usize) {
    let mut seen = String::new();
    while seen.lines().filter(|l| l.starts_with("rank ")).count() < n {
        assert!(
            out.read_line(&mut seen).unwrap() > 0,
            "the job ended: {seen}"
        );
    }
}

/// Closes the starter's stdin (the ranks end), reads the rest, and gives the exit code.
fn finish(mut child: Child, mut out: BufReader<ChildStdout>) -> i32 {
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    child.wait().unwrap().code().unwrap_or(-1)
}

fn traced(pid: u32) -> bool {
    status_field(pid, "TracerPid:") != "0"
}

#[test]
fn a_launched_jobs_ranks_are_held_only_while_the_guard_lives() {
    let Some(f) = fixtures("session-launch") else {
        return;
    };
    let opts = vec!["-n".to_string(), "2".into()];
    let mut session = Session::launch(starter_command(&f, &opts), options()).unwrap();
    let mut child = session.take_child().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let pids: Vec<u32> = session.job().unwrap().attached_pids();
    assert_eq!(
        pids.len(),
        2,
        "launch mode attaches every rank for the gate"
    );
    // Released running after the launch.
    for &p in &pids {
        assert_untouched(p);
    }
    for round in 0..3 {
        let held = session.hold().unwrap();
        assert_eq!(held.ranks().len(), 2);
        for (i, r) in held.ranks().iter().enumerate() {
            assert_eq!(r.rank, Some(i as u64), "round {round}");
            assert!(traced(r.pid), "round {round}: rank {i} is not held");
            let target = r.target().unwrap_or_else(|e| panic!("rank {i}: {e}"));
            // The rank's own variable, read while it is stopped.
            let gate = target.require_symbol("MPIR_debug_gate").unwrap();
            assert!(target.read_c_int(gate.address, "MPIR_debug_gate").is_ok());
            assert!(r.image.ends_with("rank"), "{}", r.image.display());
        }
        if round == 1 {
            drop(held); // the drop releases as `release` does
        } else {
            let report = held.release();
            assert!(report.is_clean(), "{:?}", report.problems);
            let mut released = report.released.clone();
            released.sort_unstable();
            let mut want = pids.clone();
            want.sort_unstable();
            assert_eq!(released, want, "round {round}");
        }
        for &p in &pids {
            assert_untouched(p);
        }
    }
    drop(session);
    assert_eq!(finish(child, out), 0);
}

/// A session whose job is read from a running starter: the job comes without touching any
/// rank; a hold stops only the selected, proven, local ranks; remote entries and a local pid
/// that is not the table's rank are reported and never touched.
#[test]
fn attach_then_hold_touches_only_selected_proven_local_ranks() {
    let Some(f) = fixtures("session-attach") else {
        return;
    };
    let decoys = Decoys::start(&f.dir, 3).unwrap();
    let d = decoys.pids();
    let mut opts = vec!["-n".to_string(), "3".into()];
    for entry in [
        format!("far-node-1.cluster.invalid:{}", d[0]),
        format!("far-node-2:{}", d[1]),
        format!("=:{}", d[2]),
    ] {
        opts.push("-R".into());
        opts.push(entry);
    }
    let mut child = starter_command(&f, &opts).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_ranks(&mut out, 3);
    wait_spawned(child.id());
    // Ranks 0 and 2 of the job, the two far entries (3, 4) and the local decoy (5).
    let selection = "0,2-5".parse().unwrap();
    let mut session = Session::attach(child.id(), options().with_ranks(selection)).unwrap();
    let job = session.job().unwrap();
    assert_eq!(job.len(), 6);
    assert!(
        job.attached_pids().is_empty(),
        "reading the job touched a rank"
    );
    let rank_pids: Vec<u32> = job.ranks().take(3).map(|r| r.pid as u32).collect();
    for &p in &rank_pids {
        assert_untouched(p);
    }
    {
        let held = session.hold().unwrap();
        let ranks: Vec<Option<u64>> = held.ranks().iter().map(|r| r.rank).collect();
        assert_eq!(ranks, [Some(0), Some(2), Some(3), Some(4), Some(5)]);
        let by_rank = |n: u64| held.ranks().iter().find(|r| r.rank == Some(n)).unwrap();
        for n in [0, 2] {
            assert!(by_rank(n).target().is_ok(), "rank {n}: {:?}", by_rank(n));
            assert!(traced(by_rank(n).pid), "rank {n} is not held");
        }
        // Not selected: never stopped.
        assert!(!traced(rank_pids[1]));
        for n in [3, 4] {
            assert!(
                matches!(by_rank(n).unreadable(), Some(Unreadable::Remote { .. })),
                "rank {n}: {:?}",
                by_rank(n).unreadable()
            );
        }
        let refused = by_rank(5).unreadable();
        assert!(
            matches!(refused, Some(Unreadable::Refused(_))),
            "{refused:?}"
        );
        assert!(
            mpir_session::chain(refused.unwrap()).contains("not this job's process"),
            "{refused:?}"
        );
        decoys.assert_untouched();
    }
    // The guard is gone: everything runs, untraced.
    for &p in rank_pids.iter().chain(&[child.id()]) {
        assert_untouched(p);
    }
    // A second hold takes the same processes again, by pid.
    let (count, report) = session
        .with_held(|held| held.ranks().iter().filter(|r| r.target().is_ok()).count())
        .unwrap();
    assert_eq!(count, 2);
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.released.len(), 2);
    decoys.assert_untouched();
    for &p in &rank_pids {
        assert_untouched(p);
    }
    // Reading queues: the fixture ranks have no MPI, so no engine fits them; the remote and
    // refused entries are reported as such, and still never touched.
    let read = session.queues().unwrap();
    assert!(read.engine.is_none());
    let reasons: Vec<String> = read
        .ranks
        .iter()
        .map(|r| match &r.queues {
            Ok(_) => "read".into(),
            Err(RankError::NoReader(_)) => "no reader".into(),
            Err(RankError::Unreadable(Unreadable::Remote { .. })) => "remote".into(),
            Err(RankError::Unreadable(Unreadable::Refused(_))) => "refused".into(),
            Err(e) => format!("{e:?}"),
        })
        .collect();
    assert_eq!(
        reasons,
        ["no reader", "no reader", "remote", "remote", "refused"]
    );
    assert!(read.release.is_clean(), "{:?}", read.release.problems);
    decoys.assert_untouched();
    for &p in &rank_pids {
        assert_untouched(p);
    }
    drop(session);
    assert_eq!(finish(child, out), 0);
}

#[test]
fn a_deadlock_analysis_that_reads_nothing_has_no_verdict() {
    let Some(f) = fixtures("session-no-verdict") else {
        return;
    };
    let decoys = Decoys::start(&f.dir, 2).unwrap();
    let mut session = Session::pids(decoys.pids(), options()).unwrap();
    let found = session.deadlock(2, Duration::from_millis(10)).unwrap();
    assert!(found.report.is_none(), "a verdict from nothing read");
    assert_eq!((found.coverage.ranks, found.coverage.read), (2, 0));
    assert!(!found.coverage.is_complete());
    assert_eq!(found.coverage.not_read.len(), 2);
    for n in &found.coverage.not_read {
        assert_eq!(n.sample, 1);
        assert!(matches!(n.reason, RankError::NoReader(_)), "{:?}", n.reason);
    }
    assert_eq!(found.releases.len(), 2);
    for r in &found.releases {
        assert!(r.is_clean(), "{:?}", r.problems);
        assert_eq!(r.released.len(), 2);
    }
    for p in decoys.pids() {
        assert_untouched(p);
    }
}

fn read_something(session: &mut Session) -> Result<usize, String> {
    let held = session.hold().map_err(|e| e.to_string())?;
    let n = held.ranks().len();
    if n > 0 {
        // An error half-way through a read: the guard is dropped on the way out.
        return Err("the tool's own error".into());
    }
    Ok(n)
}

#[test]
fn ranks_are_released_on_errors_and_panics() {
    let Some(f) = fixtures("session-errors") else {
        return;
    };
    let opts = vec!["-n".to_string(), "2".into()];
    let mut child = starter_command(&f, &opts).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_ranks(&mut out, 2);
    let mut session = Session::attach(child.id(), options()).unwrap();
    let pids: Vec<u32> = session
        .job()
        .unwrap()
        .ranks()
        .map(|r| r.pid as u32)
        .collect();
    assert_eq!(
        read_something(&mut session),
        Err("the tool's own error".into())
    );
    for &p in &pids {
        assert_untouched(p);
    }
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let held = session.hold().unwrap();
        assert!(held.ranks().iter().all(|r| traced(r.pid)));
        panic!("the tool's bug while ranks are held");
    }));
    assert!(panicked.is_err());
    for &p in &pids {
        assert_untouched(p);
    }
    // The session still works after both.
    let (n, report) = session.with_held(|h| h.ranks().len()).unwrap();
    assert_eq!(n, 2);
    assert!(report.is_clean(), "{:?}", report.problems);
    drop(session);
    assert_eq!(finish(child, out), 0);
}

#[test]
fn pids_are_held_again_only_while_they_name_the_same_process() {
    let Some(f) = fixtures("session-pids") else {
        return;
    };
    let decoys = Decoys::start(&f.dir, 2).unwrap();
    let d = decoys.pids();
    // A pid named twice is held once.
    let mut session = Session::pids([d[0], d[1], d[0]], options()).unwrap();
    {
        let held = session.hold().unwrap();
        assert_eq!(held.ranks().len(), 2);
        for r in held.ranks() {
            assert_eq!(r.rank, None, "no table: no rank number");
            assert!(r.target().is_ok(), "{r:?}");
            assert!(traced(r.pid));
        }
        let report = held.release();
        assert!(report.is_clean(), "{:?}", report.problems);
    }
    for &p in &d {
        assert_untouched(p);
    }
    // The decoys go away: their pids are left alone from then on.
    drop(decoys);
    let mut session2 = Session::pids(d.clone(), options()).unwrap();
    let gone = session2.hold().unwrap();
    assert!(
        gone.ranks()
            .iter()
            .all(|r| matches!(r.unreadable(), Some(Unreadable::NoSuchProcess { .. }))),
        "{:?}",
        gone.ranks()
    );
    drop(gone);
    let held = session.hold().unwrap();
    for r in held.ranks() {
        assert!(
            matches!(r.unreadable(), Some(Unreadable::Changed { .. })),
            "{r:?}"
        );
    }
    let report = held.release();
    assert!(report.released.is_empty());
    assert!(
        !report
            .problems
            .iter()
            .any(|p| matches!(p, ReleaseProblem::Detach { .. }))
    );
}

#[test]
fn cores_and_pids_without_anything_to_read_are_errors() {
    assert!(Session::pids([], options()).is_err());
    // A pid that names no process is said to be one, and nothing is held.
    let mut session = Session::pids([999_999_999], options()).unwrap();
    let held = session.hold().unwrap();
    assert!(
        matches!(
            held.ranks()[0].unreadable(),
            Some(mpir_session::Unreadable::NoSuchProcess { pid: 999_999_999 })
        ),
        "{held:?}"
    );
    assert!(held.release().released.is_empty());
    let none: [&str; 0] = [];
    assert!(Session::cores(none, options()).is_err());
    let e = Session::cores(["/nonexistent/core.1"], options()).unwrap_err();
    assert!(e.to_string().contains("/nonexistent/core.1"), "{e}");
    let e = Session::cores(
        ["/nonexistent/core.1"],
        options().with_exe("/nonexistent/exe"),
    )
    .unwrap_err();
    assert!(
        matches!(e, mpir_session::SessionError::NoSuchFile { .. }),
        "{e}"
    );
}

/// `gcore` of `pid` into `dir`: the core's path.
fn gcore(dir: &Path, pid: u32) -> PathBuf {
    mpir_target::testkit::gcore(dir, &[pid])
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0)
}

#[test]
fn cores_give_the_job_and_the_ranks_numbered_from_the_starters_table() {
    if !mpir_target::testkit::have("gcore") {
        skip("needs gcore (gdb)");
        return;
    }
    let Some(f) = fixtures("session-cores") else {
        return;
    };
    let opts = vec!["-n".to_string(), "3".into()];
    let mut child = starter_command(&f, &opts).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_ranks(&mut out, 3);
    // The job's pids, from a session over the live starter (touching no rank).
    let session = Session::attach(child.id(), options()).unwrap();
    let pids: Vec<u32> = session
        .job()
        .unwrap()
        .ranks()
        .map(|r| r.pid as u32)
        .collect();
    drop(session);
    let starter_core = gcore(&f.dir, child.id());
    let rank_core = gcore(&f.dir, pids[2]);
    assert_eq!(finish(child, out), 0);

    let mut session = Session::cores([&rank_core, &starter_core], options()).unwrap();
    let starter = session.starter_core().unwrap();
    assert_eq!(starter.path, starter_core);
    assert_eq!(starter.table.resolved.len(), 3);
    let info = session.core_files();
    assert_eq!(info.len(), 2);
    assert!(info[0].not_starter.is_some(), "{info:?}");
    assert!(info[1].not_starter.is_none(), "{info:?}");
    // Both executables are where the cores say.
    assert!(info.iter().all(|i| i.executable_gone.is_none()), "{info:?}");
    assert!(session.job().is_none());
    let (ranks, report) = session
        .with_held(|h| {
            h.ranks()
                .iter()
                .map(|r| (r.rank, r.pid, r.core.clone(), r.target().is_ok()))
                .collect::<Vec<_>>()
        })
        .unwrap();
    assert_eq!(ranks, [(Some(2), pids[2], Some(rank_core.clone()), true)]);
    assert!(report.released.is_empty() && report.is_clean());
    // A selection that leaves the one rank core out leaves nothing to read.
    let mut session = Session::cores(
        [&rank_core, &starter_core],
        options().with_ranks("0-1".parse().unwrap()),
    )
    .unwrap();
    assert!(matches!(
        session.hold().unwrap_err(),
        mpir_session::SessionError::Empty(_)
    ));
    // Two starter cores are two jobs.
    let e = Session::cores([&starter_core, &starter_core], options()).unwrap_err();
    assert!(
        matches!(e, mpir_session::SessionError::SeveralStarterCores { .. }),
        "{e}"
    );
}

#[test]
fn holding_from_the_acquisition_takes_the_ranks_once_and_can_hand_them_over() {
    let Some(f) = fixtures("session-hold-early") else {
        return;
    };
    let opts = vec!["-n".to_string(), "3".into()];
    let mut child = starter_command(&f, &opts).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_ranks(&mut out, 3);
    // Attach mode: only the selected rank is held, from the acquisition on.
    let early = options()
        .with_hold_from_acquisition(true)
        .with_ranks("1".parse().unwrap());
    let mut session = Session::attach(child.id(), early).unwrap();
    let pids: Vec<u32> = session
        .job()
        .unwrap()
        .ranks()
        .map(|r| r.pid as u32)
        .collect();
    assert!(traced(pids[1]), "rank 1 is not held after the acquisition");
    assert!(!traced(pids[0]) && !traced(pids[2]));
    {
        let held = session.hold().unwrap();
        let ranks: Vec<(Option<u64>, bool)> = held
            .ranks()
            .iter()
            .map(|r| (r.rank, r.target().is_ok()))
            .collect();
        assert_eq!(ranks, [(Some(1), true)]);
        let report = held.release();
        assert_eq!(report.released, [pids[1]]);
    }
    for &p in &pids {
        assert_untouched(p);
    }
    drop(session);
    assert_eq!(finish(child, out), 0);

    // Launch mode: the held ranks handed over to another tool, stopped and untraced.
    let mut session = Session::launch(
        starter_command(&f, &opts),
        options().with_hold_from_acquisition(true),
    )
    .unwrap();
    let mut child = session.take_child().unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let mut stopped = session.hand_over().unwrap();
    stopped.sort_unstable();
    let mut pids = session.job().unwrap().attached_pids();
    pids.sort_unstable();
    assert_eq!(stopped, pids);
    for &p in &stopped {
        assert!(!traced(p), "pid {p} is still traced");
        let state = status_field(p, "State:");
        assert!(state.starts_with('T'), "pid {p}: {state}");
        sigcont(p);
    }
    assert!(session.hand_over().is_err(), "nothing is left to hand over");
    drop(session);
    assert_eq!(finish(child, out), 0);
}

fn sigcont(pid: u32) {
    run(Command::new("kill").args(["-CONT", &pid.to_string()])).unwrap();
}

#[test]
fn attach_reads_an_mpi2dd_job_and_refuses_to_hold_what_nothing_proved() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let provider = root.join("mpi2dd/provider");
    let both_c = root.join("mpir-acquire/tests/fixtures/both.c");
    if !both_c.is_file() || !provider.join("mpi2dd_provider.c").is_file() {
        skip("the MPI2DD fixtures are not in this tree");
        return;
    }
    let Some(f) = fixtures("session-mpi2dd") else {
        return;
    };
    let both = f.dir.join("both");
    if let Err(e) = run(Command::new("cc")
        .arg(format!("-I{}", provider.display()))
        .args(["-g", "-DNO_MPIR"])
        .arg(provider.join("mpi2dd_provider.c"))
        .arg(&both_c)
        .arg("-o")
        .arg(&both))
    {
        skip(&e);
        return;
    }
    let mut child = Command::new(&both)
        .arg("3")
        .arg(&f.rank)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    wait_ranks(&mut out, 3);
    let mut session = Session::attach(child.id(), options()).unwrap();
    assert!(session.job().is_none(), "no MPIR job");
    let m = session.mpi2dd().unwrap();
    assert_eq!(m.traversal.job.ranks().count(), 3);
    let pids: Vec<u32> = m
        .traversal
        .job
        .ranks()
        .map(|(_, r)| r.process.pid as u32)
        .collect();
    assert!(matches!(
        session.hold().unwrap_err(),
        mpir_session::SessionError::Unsupported { .. }
    ));
    for p in pids.iter().chain([child.id()].iter()) {
        assert_untouched(*p);
    }
    drop(session);
    let _ = finish(child, out);
}
