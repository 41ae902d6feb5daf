//! `mpir deadlock` with the wait-state library (issue 29): the ranks of a job run with
//! `LD_PRELOAD="$(mpir preload)"` record what each thread waits for, and the analysis reads
//! who waits for whom from that export on every MPI — Debian's stock MPICH (whose queues no
//! reader can see), Debian's Open MPI without a types sidecar, Intel MPI, Open MPI 5 and MPICH
//! 5 from PyPI: a ring of blocking receives is a cycle with each rank's receive (peer, tag,
//! communicator), and a ring that keeps going is none. `mpir launch --record-waits` sets the
//! library for a job itself. Programs: tests/fixtures/deadlock.c. Skipped without a stack,
//! failed under `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::stock::{
    Stack, build, intel_mpi, mpich_5, mpich_stock, open_mpi, open_mpi_5, start, untouched,
};
use common::{Job, json_doc, mpir, validate};
use mpir_target::testkit::scratch;
use serde_json::{Value, json};

/// `mpir preload`'s answer: the library's path.
fn preload() -> PathBuf {
    let out = mpir().arg("preload").output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let path = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    assert!(path.is_absolute() && path.is_file(), "{}", path.display());
    path
}

/// The stack with the library in its launcher's environment: `LD_PRELOAD` (which hydra and a
/// one-node Open MPI pass on) and Open MPI's own forwarding list.
fn recording(stack: &Stack, lib: &Path) -> Stack {
    let mut env = stack.env.clone();
    env.push(("LD_PRELOAD".into(), lib.display().to_string()));
    env.push(("OMPI_MCA_mca_base_env_list".into(), "LD_PRELOAD".into()));
    Stack {
        name: stack.name,
        mpicc: stack.mpicc.clone(),
        env,
        launcher: stack.launcher.clone(),
        extra: stack.extra.clone(),
    }
}

fn deadlock(stack: &Stack, args: &[String]) -> (i32, Value, String) {
    let run = |json: bool| {
        let mut c = mpir();
        c.arg("deadlock");
        if json {
            c.arg("--json");
        }
        c.args(args).args(&stack.extra).output().unwrap()
    };
    let out = run(true);
    let doc = json_doc(&out);
    validate(&doc);
    let text = run(false);
    (
        out.status.code().unwrap_or(-1),
        doc,
        String::from_utf8_lossy(&text.stdout).into_owned(),
    )
}

fn starter_args(job: &Job) -> Vec<String> {
    vec!["--starter".into(), job.starter().to_string()]
}

/// The ring's cycle, read from the ranks' exports: every rank receives from the next, tag 10.
fn assert_ring_cycle(name: &str, code: i32, doc: &Value, text: &str) {
    assert_eq!(code, 3, "{name} ring: {doc:#}");
    assert_eq!(doc["verdict"], "deadlock", "{name}: {doc:#}");
    assert_eq!(
        doc["sources"],
        json!([{ "source": "wait_states", "ranks": "0-2" }]),
        "{name}: {doc:#}"
    );
    assert_eq!(
        doc["cycles"][0]["ranks"],
        json!([0, 1, 2]),
        "{name}: {doc:#}"
    );
    let mut steps: Vec<(u64, Value, Value, Value, u64)> = doc["cycles"][0]["chain"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["rank"].as_u64().unwrap(),
                s["op"]["class"].clone(),
                s["op"]["peer"].clone(),
                s["op"]["tag"].clone(),
                s["waits_for"].as_u64().unwrap(),
            )
        })
        .collect();
    steps.sort_by_key(|s| s.0);
    let expected: Vec<(u64, Value, Value, Value, u64)> = (0..3u64)
        .map(|r| {
            let next = (r + 1) % 3;
            (
                r,
                json!("receive"),
                json!({ "rank": next }),
                json!(10),
                next,
            )
        })
        .collect();
    assert_eq!(steps, expected, "{name}: {doc:#}");
    for s in doc["cycles"][0]["chain"].as_array().unwrap() {
        assert_eq!(s["op"]["comm"]["name"], "MPI_COMM_WORLD", "{name}: {s}");
    }
    assert!(
        doc["coverage"]["stacks_only"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert!(
        doc["coverage"]["wait_states_not_used"]
            .as_array()
            .unwrap()
            .is_empty(),
        "{name}: {doc:#}"
    );
    assert!(
        text.contains("waits read from: wait-state export for ranks 0-2"),
        "{name}: {text}"
    );
}

fn on_stack(stack: Option<Stack>) {
    let Some(stack) = stack else { return };
    let name = stack.name;
    let dir = scratch(&format!("waits-{name}"));
    let program = build(&stack, &dir);
    let with = recording(&stack, &preload());

    let job = start(&with, &dir, &program, "ring", 3);
    let (code, doc, text) = deadlock(&with, &starter_args(&job));
    assert_ring_cycle(name, code, &doc, &text);
    untouched(&job);
    // The same from gcore cores of the ranks (one instant: a potential deadlock), each rank
    // numbered by its own export.
    if name == "mpich-stock" {
        let cores = mpir_target::testkit::gcore(&dir, &job.pids).unwrap_or_else(|e| panic!("{e}"));
        let out = mpir()
            .args(["core", "--json"])
            .args(&stack.extra)
            .args(&cores)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc = json_doc(&out);
        validate(&doc);
        let d = &doc["deadlock"];
        assert_eq!(d["verdict"], "potential_deadlock", "{name} cores: {d:#}");
        assert_eq!(
            d["cycles"][0]["ranks"],
            json!([0, 1, 2]),
            "{name} cores: {d:#}"
        );
        assert_eq!(
            d["sources"],
            json!([{ "source": "wait_states", "ranks": "0-2" }]),
            "{name} cores: {d:#}"
        );
    }
    drop(job);

    // The correct twin: a ring of MPI_Sendrecv that keeps going is no deadlock (each thread's
    // count of entered calls moves between samples).
    let job = start(&with, &dir, &program, "progress", 3);
    let (code, doc, _) = deadlock(&with, &starter_args(&job));
    assert_ne!(code, 3, "{name} progress: {doc:#}");
    assert_eq!(doc["verdict"], "no_cycle", "{name} progress: {doc:#}");
    assert_eq!(
        doc["sources"][0]["source"], "wait_states",
        "{name}: {doc:#}"
    );
    untouched(&job);
}

#[test]
fn stock_mpich() {
    on_stack(mpich_stock());
}

#[test]
fn stock_open_mpi_without_types() {
    on_stack(open_mpi(false));
}

#[test]
fn intel_mpi_2021() {
    on_stack(intel_mpi());
}

#[test]
fn open_mpi_5_wheel() {
    on_stack(open_mpi_5());
}

#[test]
fn mpich_5_wheel() {
    on_stack(mpich_5());
}

#[test]
fn launch_record_waits_sets_the_library_for_the_job() {
    // `mpir launch --record-waits` starts the job with the library; the ranks, named by pid
    // (no starter needed: each export carries its rank), are read from their exports.
    let Some(stack) = mpich_stock() else { return };
    let dir = scratch("waits-launch");
    let program = build(&stack, &dir);
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    let mut launch = mpir();
    launch
        .args(["launch", "--record-waits", "--"])
        .args(&stack.launcher)
        .args(["-n", "3"])
        .arg(&program)
        .arg("ring")
        .arg(&sub)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut launch, &sub, 3, Duration::from_millis(700));
    let pids: Vec<String> = job.pids.iter().map(u32::to_string).collect();
    let (code, doc, text) = deadlock(&stack, &["--pid".into(), pids.join(",")]);
    assert_ring_cycle("launch --record-waits", code, &doc, &text);
    // The library is first in each rank's LD_PRELOAD.
    for &pid in &job.pids {
        let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        let preload = env
            .split(|&b| b == 0)
            .find_map(|v| v.strip_prefix(b"LD_PRELOAD="))
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        assert!(
            preload.starts_with(&preload_path()),
            "rank pid {pid}: LD_PRELOAD={preload}"
        );
    }
    drop(job);
}

fn preload_path() -> String {
    preload().display().to_string()
}

#[test]
fn the_same_program_in_a_shell_is_untouched() {
    // Preloaded into a program that never calls MPI_Init (here the shell the tests use), the
    // library changes nothing: same output, same status.
    let lib = preload();
    let run = |preload: bool| {
        let mut c = Command::new("sh");
        c.args(["-c", "echo out; echo err >&2; exit 7"]);
        if preload {
            c.env("LD_PRELOAD", &lib);
        }
        c.output().unwrap()
    };
    let (with, without) = (run(true), run(false));
    assert_eq!(with.status.code(), Some(7));
    assert_eq!(
        (with.status.code(), &with.stdout, &with.stderr),
        (without.status.code(), &without.stdout, &without.stderr)
    );
}

#[test]
fn a_rank_without_the_library_falls_back_and_the_report_says_so() {
    // hydra's MPMD form gives the library to rank 0 only: ranks 1-2 are read by their stacks
    // (stock MPICH has no queues), rank 0 by its export; every rank blocked in MPI_Recv,
    // rank 0 waiting on rank 1, which is blocked for something unknown: a hang.
    let Some(stack) = mpich_stock() else { return };
    let dir = scratch("waits-mixed");
    let program = build(&stack, &dir);
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    let lib = preload();
    let mut hydra = Command::new(&stack.launcher[0]);
    hydra
        .args(["-n", "1", "-env", "LD_PRELOAD"])
        .arg(&lib)
        .arg(&program)
        .arg("ring")
        .arg(&sub)
        .args([":", "-n", "2"])
        .arg(&program)
        .arg("ring")
        .arg(&sub)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut hydra, &sub, 3, Duration::from_millis(700));
    let (code, doc, text) = deadlock(&stack, &starter_args(&job));
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["verdict"], "blocked_in_mpi", "{doc:#}");
    assert_eq!(
        doc["sources"],
        json!([{ "source": "wait_states", "ranks": "0" }, { "source": "stacks", "ranks": "1-2" }]),
        "{doc:#}"
    );
    let not_used: Vec<(u64, String)> = doc["coverage"]["wait_states_not_used"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["rank"].as_u64().unwrap(),
                u["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(not_used.len(), 2, "{doc:#}");
    for (rank, reason) in &not_used {
        assert!(*rank == 1 || *rank == 2, "{doc:#}");
        assert!(reason.contains("no wait-state export"), "{reason}");
    }
    assert_eq!(doc["stack_waits"]["waits_on_blocked"], "0", "{doc:#}");
    assert!(
        text.contains("wait-state export not used for rank 1: no wait-state export"),
        "{text}"
    );
    untouched(&job);
}

#[test]
fn a_program_linked_statically_against_mpi_is_said_and_read_by_its_stacks() {
    // Debian's libmpich.a linked into the program: its calls go to its own MPI_* functions,
    // which no preloaded library can replace. The export stays "loaded"; mpir says why it is
    // not used (the executable defines PMPI_Init) and reads the ranks by their stacks.
    let Some(stack) = mpich_stock() else { return };
    let archive = Path::new("/usr/lib/x86_64-linux-gnu/libmpich.a");
    if !archive.is_file() || !mpir_target::testkit::have("pkg-config") {
        mpir_target::testkit::skip("no libmpich.a (libmpich-dev) or pkg-config");
        return;
    }
    let dir = scratch("waits-static");
    let program = dir.join("static_ring");
    let libs =
        mpir_target::testkit::run(Command::new("pkg-config").args(["--libs", "--static", "mpich"]))
            .unwrap_or_else(|e| panic!("{e}"));
    let mut cc = Command::new("gcc");
    cc.args(["-g", "-o"])
        .arg(&program)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deadlock.c"))
        .arg("-I/usr/include/x86_64-linux-gnu/mpich")
        .arg(archive)
        .args(libs.split_whitespace().filter(|a| *a != "-lmpich"));
    mpir_target::testkit::run(&mut cc).unwrap_or_else(|e| panic!("{e}"));
    let with = recording(&stack, &preload());
    let job = start(&with, &dir, &program, "ring", 3);
    let (code, doc, text) = deadlock(&with, &starter_args(&job));
    assert_eq!(code, 3, "{doc:#}");
    assert_eq!(doc["verdict"], "blocked_in_mpi", "{doc:#}");
    assert_eq!(
        doc["sources"],
        json!([{ "source": "stacks", "ranks": "0-2" }]),
        "{doc:#}"
    );
    let not_used = doc["coverage"]["wait_states_not_used"].as_array().unwrap();
    assert_eq!(not_used.len(), 3, "{doc:#}");
    for u in not_used {
        let reason = u["reason"].as_str().unwrap();
        assert!(
            reason.contains("linked statically") && reason.contains("PMPI_Init"),
            "{reason}"
        );
    }
    assert!(text.contains("linked statically against its MPI"), "{text}");
    untouched(&job);
}
