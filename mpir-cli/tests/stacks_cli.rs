//! `mpir stacks` on the bundled demo job (no MPI needed; ranks 0-2 sit in its `MPI_Recv`, rank
//! 3 in its `MPI_Waitall`, under `main`: mpir-demo/demo/rank.c) from a starter, from pids and from gcore cores, in every
//! output form (text, `mpir.stacks/2` JSON validated against docs/schema, DOT, folded), and on
//! a real Open MPI and MPICH ring (every rank under `main` in `MPI_Recv`). Each leaves the job
//! running untraced.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_target::testkit::{assert_untouched, have, run, scratch, skip};
use serde_json::Value;

#[path = "common/demo_paths.rs"]
mod demo_paths;
use demo_paths::demo;

mod common;
use common::{Job, mpich_root, mpir};

fn stacks(args: &[&str]) -> (i32, String, String) {
    let out = mpir().arg("stacks").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn stacks_json(args: &[&str]) -> (i32, Value) {
    let out = mpir()
        .arg("stacks")
        .arg("--json")
        .args(args)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), common::json_doc(&out))
}

/// The functions of the nodes on the path from the root to the first node named `leaf`, with
/// their rank sets.
fn path_to(doc: &Value, leaf: &str) -> Vec<(String, String)> {
    let nodes = doc["nodes"].as_array().unwrap();
    let Some(mut i) = nodes
        .iter()
        .position(|n| n["function"].as_str().is_some_and(|f| f.contains(leaf)))
    else {
        panic!("no {leaf} in {doc:#}")
    };
    let mut path = Vec::new();
    loop {
        let n = &nodes[i];
        path.push((
            n["function"].as_str().unwrap().to_string(),
            n["ranks"].as_str().unwrap().to_string(),
        ));
        match n["parent"].as_u64() {
            Some(p) => i = p as usize,
            None => break,
        }
    }
    path.reverse();
    path
}

#[test]
fn stacks_of_the_demo_job_in_every_form() {
    let demo = demo(4);
    let starter = demo.starter.id().to_string();

    // Text, two samples: the demo's ranks 0-2 wait in its MPI_Recv, rank 3 in its MPI_Waitall
    // (demo/rank.c, step 4), each in pause below it; nothing moved.
    let (code, text, err) = stacks(&["--starter", &starter, "--samples", "2", "--interval", "50"]);
    assert_eq!(code, 0, "{text}{err}");
    assert!(
        text.starts_with("stacks of 4 ranks (starter), 2 samples\n"),
        "{text}"
    );
    assert!(
        text.contains("\n        main [0-3] 4 ranks, 4 threads\n"),
        "{text}"
    );
    assert!(
        text.contains("\n          MPI_Recv [0-2] 3 ranks, 3 threads\n"),
        "{text}"
    );
    assert!(
        text.contains("\n          MPI_Waitall [3] 1 rank, 1 thread\n"),
        "{text}"
    );
    assert!(text.contains("did not move in 2 samples: [0-3]"), "{text}");
    assert!(text.contains("each process stopped at most"), "{text}");

    // JSON (validated against docs/schema/stacks.v2.json by json_doc).
    let (code, doc) = stacks_json(&["--starter", &starter, "--samples", "2", "--interval", "20"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["source"], "starter");
    assert_eq!(doc["view"], "process");
    assert_eq!(doc["samples"], 2);
    assert_eq!(doc["unmoved"], "0-3");
    assert_eq!(doc["coverage"]["read"], 4);
    assert_eq!(doc["coverage"]["complete"], true);
    let stops = doc["stops"].as_array().unwrap();
    assert_eq!(stops.len(), 2);
    for sample in stops {
        let mut pids: Vec<u64> = sample
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["pid"].as_u64().unwrap())
            .collect();
        pids.sort_unstable();
        let mut want: Vec<u64> = demo.ranks.iter().map(|&p| u64::from(p)).collect();
        want.sort_unstable();
        assert_eq!(pids, want);
    }
    let path = path_to(&doc, "MPI_Recv");
    let names: Vec<&str> = path.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(names.first(), Some(&"/"));
    assert!(path.contains(&("main".into(), "0-3".into())), "{path:?}");
    assert_eq!(path.last(), Some(&("MPI_Recv".into(), "0-2".into())));
    let path = path_to(&doc, "MPI_Waitall");
    assert_eq!(path.last(), Some(&("MPI_Waitall".into(), "3".into())));

    // Per thread, a rank selection: the main thread kind under the root, ranks 1-2 only.
    let (code, doc) = stacks_json(&["--starter", &starter, "--threads", "--ranks", "1-2"]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["view"], "thread");
    let path = path_to(&doc, "pause");
    assert_eq!(path[1], ("main thread".to_string(), "1-2".to_string()));

    // Folded and DOT.
    let (code, folded, err) = stacks(&["--starter", &starter, "--folded"]);
    assert_eq!(code, 0, "{err}");
    let line = |call: &str| {
        folded
            .lines()
            .find(|l| l.contains(&format!(";main;{call};")))
            .unwrap_or_else(|| panic!("{folded}"))
    };
    assert!(line("MPI_Recv").ends_with("pause 3"), "{folded}");
    assert!(line("MPI_Waitall").ends_with("pause 1"), "{folded}");
    let (code, dot, err) = stacks(&["--starter", &starter, "--dot"]);
    assert_eq!(code, 0, "{err}");
    assert!(dot.starts_with("digraph G {"), "{dot}");
    assert!(dot.contains("label=\"4:[0-3]\""), "{dot}");

    // By pid: numbered by position.
    let pids: Vec<String> = demo.ranks.iter().map(ToString::to_string).collect();
    let (code, doc) = stacks_json(&["--pid", &pids.join(",")]);
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(doc["source"], "pids");
    assert_eq!(doc["numbered"].as_array().unwrap().len(), 4);
    assert_eq!(doc["numbered"][2]["pid"], demo.ranks[2]);

    for &p in demo.ranks.iter().chain([demo.starter.id()].iter()) {
        assert_untouched(p);
    }

    // From gcore cores of the ranks: the same path, no stop times.
    if have("gcore") {
        let dir = scratch("stacks-cli-cores");
        let cores =
            mpir_target::testkit::gcore(&dir, &demo.ranks).unwrap_or_else(|e| panic!("{e}"));
        let mut args = vec!["--core".to_string()];
        args.extend(cores.iter().map(|c| c.display().to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, doc) = stacks_json(&args);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(doc["source"], "cores");
        assert_eq!(doc["stops"], serde_json::json!([[]]));
        let path = path_to(&doc, "MPI_Recv");
        assert!(path.contains(&("main".into(), "0-3".into())), "{path:?}");
        assert_eq!(path.last(), Some(&("MPI_Recv".into(), "0-2".into())));
        // Without the starter's core the ranks are numbered by position; with it, by its
        // table: no numbering reported, rank 2 only with --ranks 2.
        assert_eq!(doc["numbered"].as_array().unwrap().len(), 4);
        let starter_core = mpir_target::testkit::gcore(&dir, &[demo.starter.id()])
            .unwrap_or_else(|e| panic!("{e}"));
        let mut args = vec!["--ranks".to_string(), "2".to_string(), "--core".to_string()];
        args.extend(
            starter_core
                .iter()
                .chain(&cores)
                .map(|c| c.display().to_string()),
        );
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, doc) = stacks_json(&args);
        assert_eq!(code, 0, "{doc:#}");
        assert_eq!(doc["numbered"], serde_json::json!([]));
        assert_eq!(doc["coverage"]["read"], 1);
        let path = path_to(&doc, "pause");
        assert!(path.iter().all(|(_, r)| r == "2"), "{path:?}");
    } else {
        skip("no gcore (gdb) for the core part");
    }
}

#[test]
fn an_unreadable_pid_is_listed_and_the_status_says_partial() {
    let demo = demo(1);
    // A pid that names no process: unreached, listed, exit status 4.
    let (code, doc) = stacks_json(&["--pid", &format!("{},999999999", demo.ranks[0])]);
    assert_eq!(code, 4, "{doc:#}");
    assert_eq!(doc["coverage"]["complete"], false);
    assert_eq!(doc["unreached"][0]["rank"], 1);
    assert_running(demo.ranks[0]);
}

fn assert_running(pid: u32) {
    assert_untouched(pid);
}

/// A ring of blocking receives on a real MPI (deadlock.c): every rank under `main` in the
/// MPI's receive.
fn ring_on(name: &str, mpicc: &Path, launcher: &[String]) {
    let dir = scratch(&format!("stacks-cli-{name}"));
    let program = dir.join("deadlock");
    run(Command::new(mpicc)
        .args(["-g", "-o"])
        .arg(&program)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deadlock.c")))
    .unwrap_or_else(|e| panic!("{e}"));
    let sub = dir.join("ring");
    std::fs::create_dir_all(&sub).unwrap();
    let mut cmd = Command::new(&launcher[0]);
    cmd.args(&launcher[1..])
        .args(["-n", "3"])
        .arg(&program)
        .arg("ring")
        .arg(&sub)
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut cmd, &sub, 3, Duration::from_millis(700));
    let (code, doc) = stacks_json(&["--starter", &job.starter().to_string()]);
    assert_eq!(code, 0, "{name}: {doc:#}");
    let path = path_to(&doc, "MPI_Recv");
    let names: Vec<&str> = path.iter().map(|(f, _)| f.as_str()).collect();
    let main = names.iter().position(|&n| n == "main").expect("main");
    assert!(names[main + 1].ends_with("MPI_Recv"), "{name}: {names:?}");
    assert!(path.iter().all(|(_, r)| r == "0-2"), "{name}: {path:?}");
    let (code, text, err) = stacks(&["--starter", &job.starter().to_string()]);
    assert_eq!(code, 0, "{err}");
    assert!(text.contains("main [0-2] 3 ranks"), "{name}: {text}");
    for &p in job.pids.iter().chain([job.starter()].iter()) {
        assert_untouched(p);
    }
}

#[test]
fn a_ring_on_open_mpi_is_all_in_mpi_recv() {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return;
    }
    let launcher = ["orterun", "--allow-run-as-root", "--oversubscribe"].map(String::from);
    ring_on("openmpi", Path::new("mpicc.openmpi"), &launcher);
}

#[test]
fn a_ring_on_mpich_is_all_in_mpi_recv() {
    let root = mpich_root();
    if !root.join("bin/mpicc").is_file() {
        skip(&format!("no debugger-enabled MPICH at {}", root.display()));
        return;
    }
    let launcher = [root.join("bin/mpiexec.hydra").display().to_string()];
    ring_on("mpich", &root.join("bin/mpicc"), &launcher);
}
