//! `mpir queues` as a user runs it, on real jobs: stock Open MPI (no debug information, no
//! `--types`: the layouts shipped with mpir; the same with its types sidecar) and the debugger-enabled MPICH (its `libtvmpich.so`), by starter and by pid, in
//! JSON and table form; and its one-line errors. Each job runs the programs of mpir-mqd's tests,
//! which post known operations, so the expected values come from those programs' sources.
//! Skipped without the stacks, failed under `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{Job, mpich_root, mpir, ompi_sidecar};
use mpir_target::testkit::{assert_untouched, have, run, scratch, skip};
use serde_json::Value;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mpir-mqd/tests/fixtures")
        .join(name)
}

fn json(out: &Output) -> Value {
    common::json_doc(out)
}

fn rank(doc: &Value, r: u64) -> &Value {
    doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["rank"] == r)
        .unwrap_or_else(|| panic!("no rank {r} in {doc:#}"))
}

fn comm<'a>(rank: &'a Value, name: &str) -> &'a Value {
    rank["communicators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no communicator {name} in {rank:#}"))
}

fn op<'a>(comm: &'a Value, class: &str, tag: i64) -> &'a Value {
    comm["operations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["class"] == class && o["tag"] == tag)
        .unwrap_or_else(|| panic!("no {class} with tag {tag} in {comm:#}"))
}

#[test]
fn queues_of_an_open_mpi_job_by_starter_and_by_pid() {
    if !have("mpicc.openmpi") || !have("orterun") {
        skip("needs Open MPI (mpicc.openmpi, orterun)");
        return;
    }
    let types = ompi_sidecar();
    if types.is_none() {
        skip("no Open MPI types sidecar: no comparison with the sidecar's read");
    }
    let dir = scratch("cli-queues-ompi");
    let app = dir.join("pending");
    run(Command::new("mpicc.openmpi")
        .args(["-g", "-o"])
        .arg(&app)
        .arg(fixture("ompi_pending.c")))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut launcher = Command::new("orterun");
    launcher
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
        .arg(&app)
        .arg(&*dir)
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut launcher, &dir, 2, Duration::from_millis(200));

    let out = mpir()
        .args(["queues", "--json", "--starter"])
        .arg(job.starter().to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    assert_eq!(doc["schema"], "mpir.queues/1");
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 2);
    for r in 0..2u64 {
        let peer = (r + 1) % 2;
        let ranked = rank(&doc, r);
        assert_eq!(ranked["pid"], job.pids[r as usize]);
        assert!(ranked["error"].is_null(), "{ranked:#}");
        let world = comm(ranked, "MPI_COMM_WORLD");
        assert_eq!(world["size"], 2);
        assert_eq!(world["local_rank"], r);
        // ompi_pending.c: Irecv of 4 ints from the next rank, tag 77.
        let recv = op(world, "receive", 77);
        assert_eq!(recv["peer_local"], peer);
        assert_eq!(recv["any_source"], false);
        assert_eq!(recv["length_bytes"], 16);
        assert_eq!(recv["status"], "pending");
        // Isend of 2^18 doubles, tag 44, and of 2^17 doubles on "mpir_dup", tag 55.
        assert_eq!(op(world, "send", 44)["length_bytes"], 8 << 18);
        let dup = op(comm(ranked, "mpir_dup"), "send", 55);
        assert_eq!(dup["peer_local"], peer);
        assert_eq!(dup["length_bytes"], 8 << 17);
    }
    // Read with the shipped layouts, proven on each rank; with the types sidecar, the same.
    for r in 0..2u64 {
        let notes = rank(&doc, r)["notes"].to_string();
        assert!(
            notes.contains("types: shipped layouts of openmpi 4.1.4 debian lp64"),
            "{notes}"
        );
    }
    if let Some(types) = &types {
        let out = mpir()
            .args(["queues", "--json", "--types"])
            .arg(types)
            .arg("--starter")
            .arg(job.starter().to_string())
            .output()
            .unwrap();
        let typed = json(&out);
        for r in 0..2u64 {
            assert_eq!(
                rank(&typed, r)["communicators"],
                rank(&doc, r)["communicators"],
                "rank {r}: the sidecar and the shipped layouts disagree"
            );
            assert!(!rank(&typed, r)["notes"].to_string().contains("shipped"));
        }
    }
    // The job runs on: nothing stopped or traced.
    for &pid in job.pids.iter().chain([job.starter()].iter()) {
        assert_untouched(pid);
    }

    // The same ranks by pid, in the table form: the rank is learnt from MPI_COMM_WORLD.
    let pids = format!("{},{}", job.pids[0], job.pids[1]);
    let out = mpir().args(["queues", "--pid", &pids]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for (r, pid) in job.pids.iter().enumerate() {
        assert!(text.contains(&format!("rank {r} (pid {pid}):")), "{text}");
    }
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("tag 77") && l.contains("16 bytes"))
            .count(),
        2,
        "{text}"
    );
    for &pid in &job.pids {
        assert_untouched(pid);
    }

    // From core files (gcore of the starter and both ranks): the same queues, the ranks
    // numbered from the starter's core.
    if !have("gcore") {
        skip("no gcore (gdb) to dump the job's cores");
        return;
    }
    let all: Vec<u32> = [job.starter()].iter().chain(&job.pids).copied().collect();
    let cores = mpir_target::testkit::gcore(&dir, &all).unwrap_or_else(|e| panic!("{e}"));
    let out = mpir()
        .args(["core", "--json"])
        .args(&cores)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let from_cores = json(&out);
    assert_eq!(from_cores["job"]["ranks"].as_array().unwrap().len(), 2);
    for r in 0..2u64 {
        let live = rank(&doc, r);
        let dumped = rank(&from_cores, r);
        assert_eq!(dumped["pid"], live["pid"]);
        assert_eq!(
            dumped["communicators"], live["communicators"],
            "rank {r}: the core and the live process disagree"
        );
    }
}

#[test]
fn queues_of_a_debugger_enabled_mpich_job() {
    let root = mpich_root();
    if !root.join("lib/libtvmpich.so").is_file() || !root.join("bin/mpicc").is_file() {
        skip(&format!("no debugger-enabled MPICH at {}", root.display()));
        return;
    }
    let dir = scratch("cli-queues-mpich");
    let app = dir.join("pending");
    run(Command::new(root.join("bin/mpicc"))
        .args(["-g", "-o"])
        .arg(&app)
        .arg(fixture("mpich_pending.c")))
    .unwrap_or_else(|e| panic!("{e}"));
    let mut launcher = Command::new(root.join("bin/mpiexec.hydra"));
    launcher
        .args(["-n", "2"])
        .arg(&app)
        .arg(&*dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut launcher, &dir, 2, Duration::from_millis(200));

    // MPICH's own DLL, then our walker (what auto picks when the MPI has debug info).
    for (engine, shown) in [("dll", "libtvmpich"), ("auto", "native MPICH ch3")] {
        let out = mpir()
            .args(["queues", "--json", "--engine", engine, "--starter"])
            .arg(job.starter().to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let doc = json(&out);
        assert!(doc["engine"].as_str().unwrap().contains(shown), "{doc:#}");
        for r in 0..2u64 {
            let peer = (r + 1) % 2;
            let ranked = rank(&doc, r);
            assert_eq!(ranked["pid"], job.pids[r as usize]);
            // mpich_pending.c: Irecv from the next rank, tag 77, on MPI_COMM_WORLD; a large
            // Isend (tag 55) on "mpir_dup".
            let recv = op(comm(ranked, "MPI_COMM_WORLD"), "receive", 77);
            assert_eq!(recv["peer_local"], peer);
            let dup = comm(ranked, "mpir_dup");
            let send = op(dup, "send", 55);
            assert_eq!(send["peer_local"], peer);
            if engine == "dll" {
                // MPICH's DLL gives no global ranks and counts elements.
                assert!(send["peer_global"].is_null());
                assert_eq!(send["length_elements"], 1 << 18);
            } else {
                // Ours resolves both, and shows the peer's rendezvous request waiting here.
                assert_eq!(send["peer_global"], peer);
                assert_eq!(recv["peer_global"], peer);
                assert_eq!(send["length_bytes"], 8 << 18);
                assert_eq!(op(dup, "unexpected", 55)["peer_global"], peer);
                assert_eq!(comm(ranked, "MPI_ICOMM_WORLD")["origin"], "internal");
            }
        }
    }
    for &pid in job.pids.iter().chain([job.starter()].iter()) {
        assert_untouched(pid);
    }
}

#[test]
fn queue_errors_are_one_line_and_leave_the_target_alone() {
    let mut sleeper = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = sleeper.id().to_string();
    let check = |args: &[&str], expect: &str, code: i32| {
        let out = mpir().args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
        assert!(err.contains(expect), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
    };
    // Not a starter: say what was looked for.
    check(&["queues", "--starter", &pid], "MPIR_Breakpoint", 1);
    // A DLL that does not exist.
    check(
        &["queues", "--pid", &pid, "--dll", "/nonexistent/libmsgq.so"],
        "/nonexistent/libmsgq.so",
        1,
    );
    // A process without any MPI keeps no queues: said in one line (exit 4, its queues are not
    // read), naming where it looked for a DLL.
    check(&["queues", "--pid", &pid], "exports no message queues", 4);
    check(&["queues", "--pid", &pid], "MPIR_dll_name", 4);
    // A pid that does not exist: the reason per pid.
    check(&["queues", "--pid", "999999999"], "no such process", 1);
    assert_untouched(sleeper.id());
    mpir_target::testkit::stop_launcher(&mut sleeper);
}

#[test]
fn a_core_without_its_executable_says_so_and_exe_fixes_it() {
    if !have("cc") || !have("gcore") {
        skip("needs cc and gcore (gdb)");
        return;
    }
    let dir = scratch("cli-core-noexe");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-target/tests/fixtures");
    let exe = dir.join("starter");
    run(Command::new("cc")
        .args(["-g", "-O1"])
        .arg(format!("-I{}", fixtures.display()))
        .arg(fixtures.join("fake_starter.c"))
        .arg("-o")
        .arg(&exe))
    .unwrap_or_else(|e| panic!("{e}"));
    // The fake starter fills a 10-entry table, prints its address and waits on stdin.
    let mut starter = Command::new(&exe)
        .args(["10", "shared"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(starter.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    let core = mpir_target::testkit::gcore(&dir, &[starter.id()])
        .unwrap_or_else(|e| panic!("{e}"))
        .remove(0);
    mpir_target::testkit::stop_launcher(&mut starter);
    let moved = dir.join("moved-starter");
    std::fs::rename(&exe, &moved).unwrap();

    let out = mpir().arg("core").arg(&core).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("give it with --exe"), "{err}");
    assert!(err.contains(&exe.display().to_string()), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");

    let out = mpir()
        .args(["core", "--json", "--exe"])
        .arg(&moved)
        .arg(&core)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out)["ranks"].as_array().unwrap().len(), 10);
}

/// A stock Open MPI rank that no shipped layout set fits — gdb (not the code under test) points
/// its `MPI_COMM_WORLD` group at nothing — is refused alone, with the reason and the
/// candidate; the job's other ranks are read (the reader proves its set on the next rank when
/// the first does not fit), and nothing is left stopped.
#[test]
fn an_open_mpi_rank_no_shipped_set_fits_is_refused_alone() {
    let Some(stack) = common::stock::open_mpi_stock() else {
        return;
    };
    if !have("gdb") {
        skip("needs gdb to corrupt a rank");
        return;
    }
    let dir = scratch("cli-queues-ompi-corrupt");
    let program = common::stock::build(&stack, &dir);
    let job = common::stock::start(&stack, &dir, &program, "ring", 3);
    // c_local_group's offset in Debian's 4.1.4 build, as gdb's ptype/o of libopenmpi-dev's
    // headers gives it (struct ompi_communicator_t: 248, 8 bytes).
    mpir_target::testkit::gdb_set(
        job.pids[0],
        "*(long *)((char *)&ompi_mpi_comm_world + 248) = 0x10",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = mpir()
        .args(["queues", "--json", "--starter"])
        .arg(job.starter().to_string())
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(4),
        "partial: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = json(&out);
    let bad = rank(&doc, 0)["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        bad.contains("no shipped Open MPI layouts fit")
            && bad.contains("openmpi 4.1.4 debian lp64")
            && bad.contains("c_local_group"),
        "{bad}"
    );
    for r in 1..3u64 {
        let read = rank(&doc, r);
        assert!(read["error"].is_null(), "{read:#}");
        // deadlock.c's ring: a receive from the next rank, tag 10.
        let recv = op(comm(read, "MPI_COMM_WORLD"), "receive", 10);
        assert_eq!(recv["peer_local"], (r + 1) % 3);
    }
    for &pid in job.pids.iter().chain([job.starter()].iter()) {
        assert_untouched(pid);
    }
}
