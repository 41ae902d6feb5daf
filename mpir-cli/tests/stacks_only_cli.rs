//! `mpir deadlock` on the MPIs people actually run, whose message queues no reader can read
//! (issue 29): Debian's stock MPICH 4.0.2 (ch4 over UCX, no debugger support), Debian's Open
//! MPI 4.1.4 without a types sidecar, Intel MPI 2021 (PyPI), and Open MPI 4.1.4 under its UCX
//! PML (whose ob1 structures, which the readers know, stay empty: the readers must refuse, not
//! report "no waiting operation"). The verdict then comes from the ranks' stacks over the
//! samples: a ring of blocking receives is a hang (`blocked_in_mpi`, exit 3) naming each
//! rank's MPI call and the line of `main` that called it; ranks sleeping outside MPI are no
//! hang (exit 0); ranks blocked while one computes are listed, not called a hang (exit 4).
//! Programs: tests/fixtures/deadlock.c, whose source gives every expected line. Skipped without
//! a stack, failed under `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::Path;

use common::stock::{Stack, build, intel_mpi, mpich_stock, open_mpi, start, untouched};
use common::{Job, fixture_line, json_doc, mpir, validate};
use mpir_target::testkit::scratch;
use serde_json::Value;

/// `mpir deadlock` on the job, as JSON (validated) and as text: (exit status, document, text).
fn deadlock(stack: &Stack, job: &Job) -> (i32, Value, String) {
    let run = |json: bool| {
        let mut c = mpir();
        c.arg("deadlock");
        if json {
            c.arg("--json");
        }
        c.arg("--starter")
            .arg(job.starter().to_string())
            .args(&stack.extra)
            .output()
            .unwrap()
    };
    let out = run(true);
    let doc = json_doc(&out);
    validate(&doc);
    let text = run(false);
    assert_eq!(
        text.status.code(),
        out.status.code(),
        "{}: text and JSON runs disagree",
        stack.name
    );
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&text.stdout).into_owned(),
    )
}

/// The ring: a hang from the stacks alone, each rank's call and call site named.
fn ring_is_a_hang(stack: &Stack, dir: &Path, program: &Path) {
    let name = stack.name;
    let job = start(stack, dir, program, "ring", 3);
    let (code, doc, text) = deadlock(stack, &job);
    assert_eq!(code, 3, "{name} ring: {doc:#}");
    assert_eq!(doc["verdict"], "blocked_in_mpi", "{name}: {doc:#}");
    assert_eq!(doc["samples"], 3, "{name}: {doc:#}");
    let cov = &doc["coverage"];
    assert_eq!(cov["ranks"], 3, "{name}: {doc:#}");
    assert_eq!(cov["read"], 3, "{name}: {doc:#}");
    assert_eq!(cov["complete"], true, "{name}: {doc:#}");
    let stacks_only = cov["stacks_only"].as_array().unwrap();
    assert_eq!(
        stacks_only.len(),
        3,
        "{name}: every rank by its stacks: {doc:#}"
    );
    for s in stacks_only {
        assert!(
            !s["reason"].as_str().unwrap_or_default().is_empty(),
            "{name}: {s}"
        );
    }
    let w = &doc["stack_waits"];
    assert_eq!(w["hang"], true, "{name}: {doc:#}");
    let blocked = w["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 1, "{name}: one call, one call site: {doc:#}");
    let line = fixture_line("strcmp(mode, \"ring\")", "MPI_Recv");
    assert_eq!(blocked[0]["call"], "MPI_Recv", "{name}: {doc:#}");
    assert_eq!(blocked[0]["ranks"], "0-2", "{name}: {doc:#}");
    assert_eq!(
        blocked[0]["call_site"]["function"], "main",
        "{name}: {doc:#}"
    );
    assert_eq!(
        blocked[0]["call_site"]["location"]["line"], line,
        "{name}: {doc:#}"
    );
    assert_eq!(w["queues_not_read"], "0-2", "{name}: {doc:#}");
    assert!(doc["cycles"].as_array().unwrap().is_empty());
    // The text says the same, and why the queues were not read.
    assert!(
        text.contains("hang: every rank is blocked inside MPI and none moved in all 3 snapshots"),
        "{name}: {text}"
    );
    assert!(
        text.contains("ranks 0-2 in MPI_Recv at main (")
            && text.contains(&format!("deadlock.c:{line})")),
        "{name}: {text}"
    );
    assert!(
        text.contains("queues not read, stacks used instead: rank 0, 1, 2: "),
        "{name}: {text}"
    );
    // Said once, not once per rank and sample.
    assert!(!text.contains("not read: sample"), "{name}: {text}");
    untouched(&job);
}

/// Ranks asleep outside MPI: no hang, exit 0 (their queues do not matter: nothing waits).
fn sleepers_are_no_hang(stack: &Stack, dir: &Path, program: &Path) {
    let name = stack.name;
    let job = start(stack, dir, program, "sleep", 3);
    let (code, doc, text) = deadlock(stack, &job);
    assert_eq!(code, 0, "{name} sleep: {doc:#}");
    assert_eq!(doc["verdict"], "no_cycle", "{name}: {doc:#}");
    assert!(doc["stack_waits"].is_null(), "{name}: {doc:#}");
    assert_eq!(doc["coverage"]["stacks_only"].as_array().unwrap().len(), 3);
    assert!(!text.contains("hang"), "{name}: {text}");
    untouched(&job);
}

/// Ranks blocked while another computes: they may be waiting for it; listed, not a hang, and
/// not "no problem" either (exit 4).
fn blocked_beside_a_computing_rank_is_no_verdict(stack: &Stack, dir: &Path, program: &Path) {
    let name = stack.name;
    let job = start(stack, dir, program, "compute", 3);
    let (code, doc, text) = deadlock(stack, &job);
    assert_eq!(code, 4, "{name} compute: {doc:#}");
    assert_eq!(doc["verdict"], "no_cycle", "{name}: {doc:#}");
    let w = &doc["stack_waits"];
    assert_eq!(w["hang"], false, "{name}: {doc:#}");
    let blocked = w["blocked"].as_array().unwrap();
    assert_eq!(blocked.len(), 1, "{name}: {doc:#}");
    assert_eq!(blocked[0]["call"], "MPI_Recv", "{name}: {doc:#}");
    assert_eq!(blocked[0]["ranks"], "0-1", "{name}: {doc:#}");
    assert_eq!(
        blocked[0]["call_site"]["location"]["line"],
        fixture_line("strcmp(mode, \"compute\")", "MPI_Recv"),
        "{name}: {doc:#}"
    );
    let progressing: Vec<&str> = w["progressing"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["ranks"].as_str().unwrap())
        .collect();
    assert_eq!(progressing, ["2"], "{name}: {doc:#}");
    assert!(
        text.contains("but ranks 0-1 inside MPI waiting for what no queue shows"),
        "{name}: {text}"
    );
    untouched(&job);
}

fn on_stack(stack: &Stack) {
    let dir = scratch(&format!("stacks-only-{}", stack.name));
    let program = build(stack, &dir);
    ring_is_a_hang(stack, &dir, &program);
    sleepers_are_no_hang(stack, &dir, &program);
    blocked_beside_a_computing_rank_is_no_verdict(stack, &dir, &program);
}

#[test]
fn stock_mpich_ch4_ucx() {
    if let Some(s) = mpich_stock() {
        on_stack(&s);
    }
}

#[test]
fn stock_open_mpi_without_types() {
    if let Some(s) = open_mpi(false) {
        on_stack(&s);
    }
}

#[test]
fn intel_mpi_2021() {
    if let Some(s) = intel_mpi() {
        on_stack(&s);
    }
}

#[test]
fn open_mpi_under_its_ucx_pml_is_not_read_through_ob1() {
    let Some(s) = open_mpi(true) else {
        return;
    };
    let dir = scratch("stacks-only-openmpi-ucx");
    let program = build(&s, &dir);
    // The false all-clear this replaces: "no cycle: 3 ranks, 0 waiting operations", exit 0.
    ring_is_a_hang(&s, &dir, &program);
    let job = start(&s, &dir, &program, "ring", 3);
    let (_, doc, _) = deadlock(&s, &job);
    for r in doc["coverage"]["stacks_only"].as_array().unwrap() {
        let reason = r["reason"].as_str().unwrap_or_default();
        assert!(
            reason.contains("ob1") && reason.contains("PML"),
            "the refusal names the reader and the PML: {reason}"
        );
    }
    untouched(&job);
}
