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

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Job, fixture_line, json_doc, mpir, ompi_sidecar, validate};
use mpir_target::testkit::{IMPI_WHEEL, Wheel, assert_untouched, have, run, scratch, skip};
use serde_json::Value;

struct Stack {
    name: &'static str,
    mpicc: PathBuf,
    /// Environment for the compiler and the launcher.
    env: Vec<(String, String)>,
    launcher: Vec<String>,
    /// Extra arguments for mpir.
    extra: Vec<String>,
}

fn mpich_stock() -> Option<Stack> {
    if !have("mpicc.mpich") || !have("mpiexec.hydra") {
        skip("needs Debian's MPICH (mpicc.mpich, mpiexec.hydra)");
        return None;
    }
    let Some(debug) = std::env::var("MPIR_HYDRA_DEBUG_DIR")
        .ok()
        .filter(|d| Path::new(d).is_dir())
    else {
        skip("no hydra debug file (MPIR_HYDRA_DEBUG_DIR, scripts/hydra-debug-symbols.sh)");
        return None;
    };
    Some(Stack {
        name: "mpich-stock",
        mpicc: "mpicc.mpich".into(),
        env: Vec::new(),
        launcher: vec!["mpiexec.hydra".into()],
        extra: vec!["--debug-dir".into(), debug],
    })
}

fn open_mpi(pml_ucx: bool) -> Option<Stack> {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return None;
    }
    let mut launcher: Vec<String> = ["orterun", "--allow-run-as-root", "--oversubscribe"]
        .map(String::from)
        .to_vec();
    let mut extra = Vec::new();
    if pml_ucx {
        // UCX is Open MPI's PML on InfiniBand clusters; 4.1 enables it elsewhere only with
        // these two (docs: ../shared/notes/stock-stacks.md).
        for a in [
            "--mca",
            "pml",
            "ucx",
            "--mca",
            "pml_ucx_tls",
            "any",
            "--mca",
            "pml_ucx_devices",
            "any",
        ] {
            launcher.push(a.into());
        }
        // The types are given: the ob1 reader could read ob1's structures, and must refuse
        // because this job's PML is not ob1.
        let Some(sidecar) = ompi_sidecar() else {
            skip("no Open MPI types sidecar");
            return None;
        };
        extra = vec!["--types".into(), sidecar.display().to_string()];
    }
    Some(Stack {
        name: if pml_ucx {
            "openmpi-ucx"
        } else {
            "openmpi-no-types"
        },
        mpicc: "mpicc.openmpi".into(),
        env: Vec::new(),
        launcher,
        extra,
    })
}

fn intel_mpi() -> Option<Stack> {
    let wheel = Wheel::find(&IMPI_WHEEL)?;
    let prefix = wheel.prefix;
    Some(Stack {
        name: "intel-mpi",
        mpicc: prefix.join("bin/mpicc"),
        env: vec![("I_MPI_ROOT".into(), prefix.display().to_string())],
        launcher: vec![prefix.join("bin/mpiexec.hydra").display().to_string()],
        extra: Vec::new(),
    })
}

fn build(stack: &Stack, dir: &Path) -> PathBuf {
    let program = dir.join("deadlock");
    let mut cc = Command::new(&stack.mpicc);
    cc.envs(stack.env.iter().map(|(k, v)| (k, v)))
        .args(["-g", "-o"])
        .arg(&program)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deadlock.c"));
    run(&mut cc).unwrap_or_else(|e| panic!("{}: {e}", stack.name));
    program
}

fn start(stack: &Stack, dir: &Path, program: &Path, mode: &str, n: usize) -> Job {
    let sub = dir.join(mode);
    std::fs::create_dir_all(&sub).unwrap();
    let mut launcher = Command::new(&stack.launcher[0]);
    launcher
        .args(&stack.launcher[1..])
        .args(["-n", &n.to_string()])
        .arg(program)
        .arg(mode)
        .arg(&sub)
        .envs(stack.env.iter().map(|(k, v)| (k, v)))
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Job::start(&mut launcher, &sub, n, Duration::from_millis(700))
}

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

fn untouched(job: &Job) {
    assert_untouched(job.starter());
    for &p in &job.pids {
        assert_untouched(p);
    }
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
