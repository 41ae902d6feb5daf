//! `mpir` on Intel MPI 2021.19 (PyPI `impi-rt` + `impi-devel`, `scripts/ci-impi.sh`,
//! `$MPIR_IMPI_PREFIX`): a ring of blocking receives (tests/fixtures/deadlock.c) launched by
//! Intel's `mpiexec.hydra`. Its libraries keep none of the message queues any engine reads (no
//! queue symbols for a native walker, no MQD DLL), so `queues` says exactly that in one line,
//! with exit status 4, and `deadlock` judges the ranks by their stacks alone (a hang, exit 3),
//! while `attach` and `stacks` work on its ranks (including the
//! MPI calls its compiler emits as jump stubs). Skipped without
//! Intel MPI, failed under `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Job, json_doc, mpir, validate};
use mpir_target::testkit::{IMPI_WHEEL, Wheel, assert_untouched, run, scratch};
use serde_json::Value;

/// The one line `mpir` printed on stderr (asserting there is exactly one).
fn one_line(out: &std::process::Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "exactly one line on stderr:\n{err}");
    lines[0].to_string()
}

#[test]
fn intel_mpi_ranks_are_read_and_its_missing_queues_are_said_in_one_line() {
    let Some(wheel) = Wheel::find(&IMPI_WHEEL) else {
        return;
    };
    let prefix = wheel.prefix;
    let dir = scratch("cli-impi");
    let exe = dir.join("deadlock");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deadlock.c");
    run(Command::new(prefix.join("bin/mpicc"))
        .env("I_MPI_ROOT", &prefix)
        .args(["-g", "-o"])
        .arg(&exe)
        .arg(&src))
    .unwrap_or_else(|e| panic!("{e}"));
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    let mut launcher = Command::new(prefix.join("bin/mpiexec.hydra"));
    launcher
        .args(["-n", "3"])
        .arg(&exe)
        .arg("ring")
        .arg(&sub)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut launcher, &sub, 3, Duration::from_millis(700));
    let starter = job.starter().to_string();

    // The job: the table's pids are the ranks' own, read without touching a rank.
    let out = mpir()
        .args(["attach", "--json", &starter])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc = json_doc(&out);
    validate(&doc);
    let pids: Vec<u64> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(
        pids,
        job.pids.iter().map(|&p| u64::from(p)).collect::<Vec<_>>()
    );
    // Intel's mpiexec.hydra carries its MPIR_PROCDESC in its own DWARF.
    assert_eq!(doc["layout"], "debug_info", "{doc}");

    // queues: one line, exit 4, nothing on stdout.
    let out = mpir()
        .args(["queues", "--starter", &starter])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let line = one_line(&out);
    assert!(
        line.starts_with("mpir: error: the process exports no message queues"),
        "{line}"
    );
    assert!(line.contains("no message-queue DLL"), "{line}");
    // Not a missing-types case: no types sidecar is suggested.
    assert!(!line.contains("--types"), "{line}");

    // The JSON form: every rank listed as not read, the same reason.
    let out = mpir()
        .args(["queues", "--json", "--starter", &starter])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    let doc = json_doc(&out);
    validate(&doc);
    let ranks = doc["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 3);
    for r in ranks {
        let e = r["error"].as_str().unwrap_or_default();
        assert!(e.contains("exports no message queues"), "{r}");
    }

    // deadlock: no queue, but the stacks give the verdict: every rank blocked in MPI_Recv,
    // unmoved — a hang, exit 3 (tests/stacks_only_cli.rs checks the document in full).
    let out = mpir()
        .args(["deadlock", "--starter", &starter])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("wait-for analysis (stacks only: no rank's queues could be read)"),
        "{text}"
    );
    assert!(text.contains("exports no message queues"), "{text}");

    // stacks: every rank in main, below it the MPI_Recv the ring's source calls. Intel's
    // libmpi.so names only a 2-byte jump stub `PMPI_Recv`/`MPI_Recv`; the body it jumps to,
    // where the return address lies, has no symbol (gdb prints `??`): it is named after the
    // stub.
    let out = mpir()
        .args(["stacks", "--json", "--starter", &starter])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let doc = json_doc(&out);
    validate(&doc);
    let nodes = doc["nodes"].as_array().unwrap();
    let main = nodes
        .iter()
        .position(|n| n["function"] == "main")
        .unwrap_or_else(|| panic!("no main in {doc}"));
    assert_eq!(nodes[main]["ranks"], "0-2", "{doc}");
    let below: Vec<&Value> = nodes
        .iter()
        .filter(|n| n["parent"].as_u64() == Some(main as u64))
        .collect();
    assert_eq!(below.len(), 1, "{below:?}");
    assert_eq!(below[0]["ranks"], "0-2", "{doc}");
    assert!(
        below[0]["module"]
            .as_str()
            .unwrap_or_default()
            .contains("libmpi.so"),
        "{doc}"
    );
    let recv = below[0]["function"].as_str().unwrap_or_default();
    assert!(
        recv == "MPI_Recv" || recv == "PMPI_Recv",
        "{recv} below main in {doc}"
    );

    job_pids_untouched(&job);
}

/// Every rank and the starter were left as they were (running, untraced).
fn job_pids_untouched(job: &Job) {
    assert_untouched(job.starter());
    for &p in &job.pids {
        assert_untouched(p);
    }
}
