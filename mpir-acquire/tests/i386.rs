//! 32-bit (i386) starters and ranks, live, from this 64-bit tool: the fake starter and rank
//! compiled with `gcc -m32` (gcc-multilib, installed by `.ci/run`). Launch mode (the auxiliary
//! vector's 4-byte entries, the entry breakpoint, the return from `MPIR_Breakpoint` with a
//! 4-byte return address), attach mode, holding, the gate of 32-bit ranks, and the table
//! exact; every process left running and untraced.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_acquire::live;
use mpir_acquire::{AcquireOptions, RankControl};
use mpir_types::DataModel;
use support::*;

struct Fixtures {
    _dir: Scratch,
    starter: PathBuf,
    rank: PathBuf,
}

/// The fake starter and rank as i386 programs; `None` (a skip, or a failure under
/// `MPIR_REQUIRE_PEERS=1`) when `gcc -m32` cannot build them.
fn fixtures_m32(name: &str, starter_flags: &[&str]) -> Option<Fixtures> {
    let dir = scratch(name);
    let mut flags = vec!["-m32"];
    flags.extend_from_slice(starter_flags);
    let starter = build(&dir, "starter", "starter", &flags)?;
    let rank = build(&dir, "rank", "rank", &["-m32", "-g", "-O1"])?;
    Some(Fixtures {
        _dir: dir,
        starter,
        rank,
    })
}

fn command(f: &Fixtures, opts: &[&str], rank_args: &[&str]) -> Command {
    let mut c = Command::new(&f.starter);
    c.args(opts).arg("--").arg(&f.rank).args(rank_args);
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    c
}

fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(20))
}

fn finish(mut child: Child) -> (String, i32) {
    drop(child.stdin.take());
    let mut out = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut out)
        .unwrap();
    (out, child.wait().unwrap().code().unwrap_or(-1))
}

fn is_i386(pid: u32) -> bool {
    mpir_target::live::procfs::word_size(pid).unwrap() == 4
}

#[test]
fn launch_an_i386_job_with_and_without_holding() {
    let Some(f) = fixtures_m32("i386-launch", &["-g", "-O1"]) else {
        return;
    };
    for hold in [false, true] {
        let mut a = live::launch(
            command(&f, &["-n", "3"], &["stdin"]),
            options().with_hold(hold),
        )
        .unwrap();
        let child = a.take_child().unwrap();
        let starter = child.id();
        assert!(is_i386(starter));
        let job = a.job();
        assert_eq!(
            mpir_target::live::LiveTarget::open(starter, Default::default())
                .map(|t| mpir_target::Memory::data_model(&t))
                .unwrap(),
            DataModel::ILP32
        );
        assert_eq!(job.len(), 3);
        // 32-bit MPIR_PROCDESC: 4-byte pointers, read through the DWARF type.
        assert_eq!(job.table.layout.size, 12);
        for r in 0..3 {
            assert!(
                matches!(job.control(r), RankControl::Attached { .. }),
                "rank {r}: {:?}",
                job.control(r)
            );
        }
        assert_eq!(a.is_held(), hold);
        let table: Vec<(u64, i64)> = job.ranks().map(|r| (r.rank, r.pid)).collect();
        drop(a);
        assert_untouched(starter);
        for (_, p) in &table {
            assert_untouched(*p as u32);
        }
        assert_eq!(read_int(starter, "MPIR_being_debugged"), 0);
        let (out, code) = finish(child);
        assert_eq!(code, 0, "{out}");
        assert_eq!(
            printed_ranks(&out),
            table,
            "each pid is the rank's getpid()"
        );
    }
}

#[test]
fn i386_ranks_waiting_at_their_gate_are_released() {
    // MINIMAL: no MPIR_partial_attach_ok; the 32-bit ranks spin on MPIR_debug_gate until the
    // tool writes it.
    let Some(f) = fixtures_m32("i386-gate", &["-g", "-DMINIMAL"]) else {
        return;
    };
    let mut a = live::launch(command(&f, &["-n", "2"], &["gate"]), options()).unwrap();
    let child = a.take_child().unwrap();
    assert_eq!(a.job().attached_pids().len(), 2);
    drop(a);
    let (out, code) = finish(child);
    assert_eq!(code, 0, "{out}");
    assert_eq!(out.matches("released").count(), 2, "{out}");
}

#[test]
fn attach_to_a_running_i386_job() {
    let Some(f) = fixtures_m32("i386-attach", &["-g"]) else {
        return;
    };
    let mut child = command(&f, &["-n", "2"], &["stdin"]).spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while printed_ranks(&seen).len() < 2 {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0, "{seen}");
    }
    for hold in [false, true] {
        let a = live::attach(child.id(), options().with_hold(hold)).unwrap();
        let table: Vec<(u64, i64)> = a.job().ranks().map(|r| (r.rank, r.pid)).collect();
        assert_eq!(table, printed_ranks(&seen));
        assert_eq!(a.job().attached_pids().len(), if hold { 2 } else { 0 });
        for (_, p) in &table {
            assert!(is_i386(*p as u32));
        }
        drop(a);
        assert_untouched(child.id());
        for (_, p) in &table {
            assert_untouched(*p as u32);
        }
    }
    child.stdout = Some(out.into_inner());
    let (rest, code) = finish(child);
    assert_eq!(code, 0, "{rest}");
}
