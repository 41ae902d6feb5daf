//! Two tools on one job (issue 31, point 5): two `mpir deadlock` started together on the same
//! job both succeed with the same verdict (each waits for the other to let go of the starter
//! or a rank, `--held-wait`), and a rank that gdb holds for ever is named with its holder once
//! the wait passes, every other rank read.
//!
//! The jobs are Debian's MPICH rings (tests/fixtures/deadlock.c, mode `ring`): rank r waits in
//! `MPI_Recv` for rank r-1.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use mpir_target::testkit::{have, scratch, skip, status_field};
use serde_json::Value;

mod common;
use common::stock::{Stack, build, mpich_stock, start, untouched};
use common::{json_doc, mpir};

/// Rounds of two commands at once: each round is a new race for the starter and the ranks.
const ROUNDS: usize = 5;
/// `--held-wait` of the two commands.
const WAIT: [&str; 2] = ["--held-wait", "30"];

/// `mpir deadlock --json --starter S` + the stack's arguments + `extra`, not yet run.
fn deadlock(stack: &Stack, starter: u32, extra: &[&str]) -> Command {
    let mut cmd = mpir();
    cmd.args(["deadlock", "--json", "--starter", &starter.to_string()])
        .args(&stack.extra)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// What two reads of one job must agree on: the exit code, the verdict, the cycles, and how
/// many ranks were read of how many.
fn verdict(out: &Output, doc: &Value) -> (Option<i32>, Value, Value, Value, Value) {
    (
        out.status.code(),
        doc["verdict"].clone(),
        doc["cycles"].clone(),
        doc["coverage"]["read"].clone(),
        doc["coverage"]["ranks"].clone(),
    )
}

#[test]
fn two_deadlock_reads_started_together_both_succeed_with_one_verdict() {
    let Some(stack) = mpich_stock() else { return };
    let dir = scratch("concurrent");
    let program = build(&stack, &dir);
    let job = start(&stack, &dir, &program, "ring", 3);
    let mut first = None;
    for round in 1..=ROUNDS {
        // A bound far above any hold: this checks that each waits for the other, not that the
        // default (5 s) covers a debug build on a machine shared with other builders (measured
        // there: the starter held up to 4.4 s by one read of this ring).
        let a = deadlock(&stack, job.starter(), &WAIT).spawn().unwrap();
        let b = deadlock(&stack, job.starter(), &WAIT).spawn().unwrap();
        let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
        let (da, db) = (json_doc(&a), json_doc(&b));
        for (out, doc) in [(&a, &da), (&b, &db)] {
            let err = String::from_utf8_lossy(&out.stderr);
            // Exit 3: a hang among the ranks read (the ring); never 1 (a refusal).
            assert_eq!(out.status.code(), Some(3), "round {round}: {err}\n{doc}");
            assert_eq!(
                doc["coverage"]["read"], 3,
                "round {round}: every rank read: {doc}"
            );
            assert_eq!(doc["coverage"]["complete"], true, "round {round}: {doc}");
        }
        let (va, vb) = (verdict(&a, &da), verdict(&b, &db));
        assert_eq!(va, vb, "round {round}: the two reads disagree");
        // The same verdict in every round (the job does not change).
        assert_eq!(
            first.get_or_insert_with(|| va.clone()),
            &va,
            "round {round}"
        );
    }
    // Left running, untraced, as found.
    untouched(&job);
}

#[test]
fn a_rank_gdb_holds_for_ever_is_named_after_the_wait_and_the_others_are_read() {
    let Some(stack) = mpich_stock() else { return };
    if !have("gdb") {
        skip("needs gdb");
        return;
    }
    let dir = scratch("concurrent-gdb");
    let program = build(&stack, &dir);
    let job = start(&stack, &dir, &program, "ring", 3);
    let held = job.pids[1];
    // gdb at its prompt, holding rank 1 until its input closes.
    let mut gdb = Command::new("gdb")
        .args(["-q", "-nx", "-p", &held.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let tracer = loop {
        let t: u32 = status_field(held, "TracerPid:").parse().unwrap();
        if t != 0 {
            break t;
        }
        assert!(Instant::now() < deadline, "gdb did not attach");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(tracer, gdb.id(), "the holder is gdb itself");
    let started = Instant::now();
    let out = deadlock(&stack, job.starter(), &["--held-wait", "1"])
        .output()
        .unwrap();
    let took = started.elapsed();
    let doc = json_doc(&out);
    // It finishes: the wait is bounded (a generous bound, not a speed target).
    assert!(took < Duration::from_secs(60), "took {took:?}");
    // Exit 4: some ranks were not read; never 1 (the command failed).
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}\n{doc}",
        String::from_utf8_lossy(&out.stderr)
    );
    let not_read = doc["coverage"]["not_read"].as_array().unwrap();
    assert!(!not_read.is_empty(), "{doc}");
    for r in not_read {
        assert_eq!(r["rank"], 1, "only rank 1 is not read: {doc}");
        assert_eq!(r["denial"]["code"], "traced_by", "{r}");
        assert_eq!(r["denial"]["pid"], gdb.id(), "{r}");
        assert_eq!(r["denial"]["name"], "gdb", "{r}");
    }
    // Ranks 0 and 2 read: the other two of three.
    assert_eq!(doc["coverage"]["ranks"], 3, "{doc}");
    assert_eq!(doc["coverage"]["read"], 2, "{doc}");
    drop(gdb.stdin.take());
    let _ = gdb.kill();
    let _ = gdb.wait();
    untouched(&job);
}
