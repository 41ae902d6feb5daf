//! The reference tool `mpir` as a user runs it: launch, attach and core on fake starters
//! (C fixtures of mpir-acquire) and on the real Open MPI, in table and JSON form, and its
//! one-line errors.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;

use common::{fixtures, mpir};
use mpir_target::testkit::{assert_untouched, have, run, scratch, skip, status_field, wait_for};

/// "rank R pid P" lines, sorted.
fn printed(text: &str) -> Vec<(u64, i64)> {
    let mut v: Vec<(u64, i64)> = text
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "pid", p] => Some((r.parse().ok()?, p.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    v.sort_unstable();
    v
}

fn json(out: &Output) -> serde_json::Value {
    common::json_doc(out)
}

fn ranks_of(v: &serde_json::Value) -> Vec<(u64, i64)> {
    let mut r: Vec<(u64, i64)> = v["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["pid"].as_i64().unwrap()))
        .collect();
    r.sort_unstable();
    r
}

#[test]
fn launch_json_lists_every_rank_and_the_job_completes() {
    let Some(f) = fixtures("cli-launch") else {
        return;
    };
    let out = mpir()
        .args(["launch", "--json", "--"])
        .arg(&f.starter)
        .args(["-n", "3", "-t", "--"])
        .arg(&f.rank)
        .arg("linger")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["interface"], "mpir");
    assert_eq!(v["layout"], "debug_info");
    assert_eq!(v["flags"]["i_am_starter"]["present"], true);
    let ranks = ranks_of(&v);
    assert_eq!(ranks.len(), 3);
    for r in v["ranks"].as_array().unwrap() {
        assert_eq!(r["control"], "attached", "{r}");
        assert_eq!(r["executable"], f.rank.to_str().unwrap());
    }
    // The job's own output went to stderr: the ranks' pids are theirs.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(printed(&stderr), ranks, "{stderr}");
    assert!(stderr.contains("starter done failed=0"), "{stderr}");
}

#[test]
fn launch_hold_hands_the_ranks_over_stopped() {
    let Some(f) = fixtures("cli-hold") else {
        return;
    };
    let out = mpir()
        .args(["launch", "--json", "--hold", "--"])
        .arg(&f.starter)
        .args(["-n", "2", "--"])
        .arg(&f.rank)
        .arg("linger")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json(&out);
    let starter = v["starter"]["pid"].as_u64().unwrap() as u32;
    let ranks = ranks_of(&v);
    assert_eq!(ranks.len(), 2);
    for &(_, pid) in &ranks {
        let pid = pid as u32;
        assert!(wait_for(5, || status_field(pid, "State:").starts_with('T')));
        assert_eq!(status_field(pid, "TracerPid:"), "0");
        assert!(
            Command::new("kill")
                .args(["-CONT", &pid.to_string()])
                .status()
                .unwrap()
                .success()
        );
    }
    // Once the ranks run, the (orphaned) starter finishes.
    assert!(wait_for(20, || status_field(starter, "State:").is_empty()
        || status_field(starter, "State:").starts_with('Z')));
}

#[test]
fn attach_prints_a_running_job_and_leaves_it_running() {
    let Some(f) = fixtures("cli-attach") else {
        return;
    };
    let mut child = Command::new(&f.starter)
        .args(["-n", "2", "--"])
        .arg(&f.rank)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while printed(&seen).len() < 2 {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0);
    }
    let o = mpir()
        .args(["attach", &child.id().to_string()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.starts_with(&format!("starter pid {}", child.id())),
        "{text}"
    );
    for (rank, pid) in printed(&seen) {
        assert!(
            text.lines().any(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                w.first() == Some(&rank.to_string().as_str())
                    && w.get(2) == Some(&pid.to_string().as_str())
                    // Reading a running job touches no rank.
                    && w.get(3) == Some(&"not_attached")
            }),
            "rank {rank} pid {pid} in:\n{text}"
        );
    }
    assert_untouched(child.id());
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
}

#[test]
fn core_reads_the_table_of_a_starter_core() {
    if !have("gcore") {
        return skip("gcore (gdb) is not installed");
    }
    let Some(f) = fixtures("cli-core") else {
        return;
    };
    let mut child = Command::new(&f.starter)
        .args(["-n", "2", "--"])
        .arg(&f.rank)
        .arg("stdin")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while printed(&seen).len() < 2 {
        assert_ne!(out.read_line(&mut seen).unwrap(), 0);
    }
    let core = mpir_target::testkit::gcore(&f.dir, &[child.id()])
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0);
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let o = mpir()
        .arg("core")
        .arg("--json")
        .arg(&core)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json(&o);
    assert_eq!(ranks_of(&doc), printed(&seen));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("truncated"));
    // The flags the starter's core defines (the fixture defines MPIR_i_am_starter and
    // MPIR_partial_attach_ok as 0, and no MPIR_force_to_main).
    assert_eq!(doc["flags"]["i_am_starter"]["present"], true, "{doc:#}");
    assert_eq!(doc["flags"]["i_am_starter"]["value"], 0);
    assert_eq!(doc["flags"]["partial_attach_ok"]["present"], true);
    assert_eq!(doc["flags"]["force_to_main"]["present"], false);
    // A core's hosts say nothing about this machine.
    assert!(doc["ranks"][0]["local"].is_null());

    // The core cut short (as `ulimit -c` leaves one): a warning that says so, whatever can
    // still be read.
    let bytes = std::fs::read(&core).unwrap();
    let cut = f.dir.join("core.cut");
    std::fs::write(&cut, &bytes[..bytes.len() / 3]).unwrap();
    let o = mpir().arg("core").arg(&cut).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!(
            "mpir: warning: core {} is truncated: its segments need",
            cut.display()
        )) && err.contains(&format!("the file has {}", bytes.len() / 3)),
        "{err}"
    );
}

#[test]
fn errors_are_one_line_and_exit_non_zero() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["attach".into(), sleeper.id().to_string()],
            "MPIR_Breakpoint",
        ),
        (
            vec!["attach".into(), "999999999".into()],
            "no process with pid 999999999",
        ),
        (
            vec!["launch".into(), "--".into(), "/nonexistent/mpiexec".into()],
            "launch",
        ),
        (
            vec!["core".into(), "/nonexistent/core".into()],
            "/nonexistent/core",
        ),
    ];
    for (args, expect) in cases {
        let o = mpir().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("mpir: error: ") && err.contains(expect),
            "{args:?}: {err}"
        );
    }
    assert_untouched(sleeper.id());
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn launch_on_open_mpi() {
    if !have("orterun") || !have("mpicc.openmpi") {
        return skip("Open MPI (orterun, mpicc.openmpi) is not installed");
    }
    let dir = scratch("cli-ompi");
    let app = dir.join("mpi_ranks");
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures/mpi_ranks.c");
    if let Err(e) = run(Command::new("mpicc.openmpi").arg(src).arg("-o").arg(&app)) {
        return skip(&e);
    }
    let out = mpir()
        .args([
            "launch",
            "--json",
            "--",
            "orterun",
            "--oversubscribe",
            "-n",
            "2",
        ])
        .arg(&app)
        .arg("0")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["starter"]["launcher"], "Open MPI (orterun)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(printed(&stderr), ranks_of(&v), "{stderr}");
}

#[test]
fn interrupted_mid_acquisition_it_lets_go_of_the_starter() {
    let Some(f) = fixtures("cli-sigterm") else {
        return;
    };
    // -z: the starter never spawns, so mpir waits for the spawn event with its breakpoint in.
    let mut tool = mpir()
        .args(["launch", "--timeout", "60", "--"])
        .arg(&f.starter)
        .args(["-z", "--"])
        .arg(&f.rank)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(tool.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap(); // the starter's own first line: it runs
    let starter: u32 = line
        .trim()
        .trim_start_matches("starter pid=")
        .parse()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    let bp = {
        let t = mpir_target::live::LiveTarget::open(starter, Default::default()).unwrap();
        mpir_target::SymbolLookupExt::require_symbol(&t, "MPIR_Breakpoint")
            .unwrap()
            .address
    };
    let read_bp = || {
        let t = mpir_target::live::LiveTarget::open(starter, Default::default()).unwrap();
        mpir_target::MemoryExt::read_vec(&t, bp, 1).unwrap()[0]
    };
    assert_eq!(read_bp(), 0xcc, "mpir holds a breakpoint there now");
    assert!(
        Command::new("kill")
            .args(["-TERM", &tool.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    // Keep the starter's stdin open: Child::wait would close it first.
    let stdin = tool.stdin.take();
    let status = tool.wait().unwrap();
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(15),
        "mpir dies of SIGTERM, after letting go"
    );
    assert_ne!(read_bp(), 0xcc, "the breakpoint byte was restored");
    assert_untouched(starter);
    // The starter runs on; closing its stdin ends it.
    drop(stdin);
    assert!(wait_for(10, || status_field(starter, "State:").is_empty()
        || status_field(starter, "State:").starts_with('Z')));
}
