//! One attach API for any interface: a starter exporting MPIR, a process exporting MPI2DD
//! (through mpi2dd's reference provider), and one exporting both, cross-checked.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_acquire::live::{self, AnyJob};
use mpir_acquire::{AcquireError, AcquireOptions, Interface};
use support::*;

/// Builds `both.c` with mpi2dd's reference provider (sources from `mpi2dd::testkit`; and
/// `flags`), and the rank program.
fn build_both(dir: &Path, flags: &[&str]) -> Option<(PathBuf, PathBuf)> {
    let p = mpi2dd::testkit::write_sources(&dir.join("provider")).expect("write the sources");
    let mut args: Vec<String> = vec![format!("-I{}", p.include_dir.display()), "-g".into()];
    args.extend(flags.iter().map(|f| f.to_string()));
    args.push(p.provider.display().to_string());
    let both = dir.join("both");
    let r = run(Command::new("cc")
        .args(&args)
        .arg(fixtures().join("both.c"))
        .arg("-o")
        .arg(&both));
    if let Err(e) = r {
        skip(&e);
        return None;
    }
    Some((both, build(dir, "rank", "rank", &[])?))
}

/// Starts `both` with 3 ranks waiting on stdin; returns once it printed "ready".
fn start(
    both: &Path,
    rank: &Path,
    extra: &[&str],
) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(both)
        .args(extra)
        .arg("3")
        .arg(rank)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("ready") {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0, "{seen}");
    }
    while printed_ranks(&seen).len() < 3 {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0, "{seen}");
    }
    (child, out)
}

fn finish(mut child: Child, mut out: BufReader<std::process::ChildStdout>) {
    drop(child.stdin.take());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success(), "{rest}");
}

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(20))
}

fn mpi2dd_pids(any: &AnyJob) -> Vec<i64> {
    let mut v: Vec<i64> = any
        .mpi2dd
        .as_ref()
        .unwrap()
        .job
        .ranks()
        .map(|(_, r)| i64::from(r.process.pid))
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_starter_exporting_both_is_acquired_through_mpir_and_cross_checked() {
    let dir = scratch("both");
    let Some((both, rank)) = build_both(&dir, &[]) else {
        return;
    };
    let (child, out) = start(&both, &rank, &[]);
    let any = live::attach_any(child.id(), options()).unwrap();
    assert_eq!(any.interface, Interface::Both);
    let job = any.mpir.as_ref().unwrap().job();
    assert_eq!(job.len(), 3);
    let mut pids: Vec<i64> = job.ranks().map(|r| r.pid).collect();
    pids.sort_unstable();
    assert_eq!(mpi2dd_pids(&any), pids);
    assert!(any.mismatches.is_empty(), "{:?}", any.mismatches);
    drop(any);
    assert_untouched(child.id());
    finish(child, out);
}

#[test]
fn disagreeing_interfaces_are_reported_rank_by_rank() {
    let dir = scratch("both-skew");
    let Some((both, rank)) = build_both(&dir, &[]) else {
        return;
    };
    let (child, out) = start(&both, &rank, &["-x"]);
    let any = live::attach_any(child.id(), options()).unwrap();
    assert_eq!(any.mismatches.len(), 1, "{:?}", any.mismatches);
    assert!(
        any.mismatches[0].starts_with("rank 0: MPIR pid"),
        "{:?}",
        any.mismatches
    );
    drop(any);
    finish(child, out);
}

#[test]
fn an_mpi2dd_only_process_is_traversed() {
    let dir = scratch("mpi2dd-only");
    let Some((both, rank)) = build_both(&dir, &["-DNO_MPIR"]) else {
        return;
    };
    let (child, out) = start(&both, &rank, &[]);
    let any = live::attach_any(child.id(), options()).unwrap();
    assert_eq!(any.interface, Interface::Mpi2dd);
    assert!(any.mpir.is_none());
    let t = any.mpi2dd.as_ref().unwrap();
    assert_eq!(t.job.worlds.len(), 1);
    assert_eq!(&*t.job.worlds[0].id, "both.w0");
    assert_eq!(mpi2dd_pids(&any).len(), 3);
    assert_untouched(child.id());
    finish(child, out);
}

#[test]
fn an_mpir_starter_and_a_process_exporting_neither() {
    let dir = scratch("any-mpir");
    let (Some(starter), Some(rank)) = (
        build(&dir, "starter", "starter", &["-g"]),
        build(&dir, "rank", "rank", &[]),
    ) else {
        return;
    };
    let mut child = Command::new(&starter)
        .args(["-n", "2", "--"])
        .arg(&rank)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while printed_ranks(&seen).len() < 2 {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0, "{seen}");
    }
    let any = live::attach_any(child.id(), options()).unwrap();
    assert_eq!(any.interface, Interface::Mpir);
    assert!(any.mpi2dd.is_none());
    assert_eq!(any.mpir.as_ref().unwrap().job().len(), 2);
    drop(any);
    finish(child, out);

    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let e = live::attach_any(sleeper.id(), options()).unwrap_err();
    assert!(matches!(e, AcquireError::NotAStarter { .. }), "{e}");
    assert!(e.to_string().contains("MPI2DD_info"), "{e}");
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}
