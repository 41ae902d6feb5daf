//! The C and C++ examples (examples/job.c, examples/job.cpp), compiled against the committed
//! header and this build of libmpir, run on the bundled demo job: the rank table they print
//! must name each rank's own pid (the ranks print it themselves), the deadlock they print must
//! be the demo's cycle 0 → 1 → 2, and after release no rank may be left running. One run is
//! under AddressSanitizer, linked statically, with the starter given on the command line.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::{alive, compile_asan, compile_dynamic, crate_dir, gone_within, have_asan, need, run};
use mpir_target::testkit::skip;

/// One demo job at a time: each holds four ranks and a tracer on a machine of two cores.
static ONE_JOB: Mutex<()> = Mutex::new(());

/// A row of the rank table as the examples print it.
#[derive(Debug)]
struct Row {
    pid: u32,
    local: String,
    executable: String,
    control: String,
}

fn field<'a>(line: &'a str, name: &str, next: Option<&str>) -> &'a str {
    let start = line
        .find(&format!(" {name} "))
        .unwrap_or_else(|| panic!("no {name} in {line:?}"))
        + name.len()
        + 2;
    let rest = &line[start..];
    match next.and_then(|n| rest.find(&format!(" {n} "))) {
        Some(end) => &rest[..end],
        None => rest,
    }
}

/// Checks an example's run on the demo job.
fn check_demo_run(out: &common::Run) {
    assert_eq!(
        out.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    let mut ready: BTreeMap<u64, u32> = BTreeMap::new();
    let mut table: BTreeMap<u64, Row> = BTreeMap::new();
    let mut count = None;
    let mut verdict = None;
    let mut released_after_verdict = false;
    for line in out.stdout.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        match words.as_slice() {
            // Printed by the demo's ranks themselves (their getpid()).
            ["rank", r, "pid", p, "ready"] => {
                ready.insert(r.parse().unwrap(), p.parse().unwrap());
            }
            ["rank", r, "pid", p, "host", ..] => {
                let row = Row {
                    pid: p.parse().unwrap(),
                    local: field(line, "local", Some("executable")).to_string(),
                    executable: field(line, "executable", Some("control")).to_string(),
                    control: field(line, "control", None).to_string(),
                };
                assert!(table.insert(r.parse().unwrap(), row).is_none(), "{line}");
            }
            [n, "ranks"] => count = Some(n.parse::<usize>().unwrap()),
            ["deadlock", ..] => {
                let doc: serde_json::Value =
                    serde_json::from_str(line.strip_prefix("deadlock ").unwrap())
                        .unwrap_or_else(|e| panic!("{e}: {line}"));
                verdict = Some(doc);
            }
            ["released"] => released_after_verdict = verdict.is_some(),
            _ => {}
        }
    }
    assert_eq!(count, Some(4), "{}", out.stdout);
    assert_eq!(table.keys().copied().collect::<Vec<_>>(), [0, 1, 2, 3]);
    let pids: BTreeMap<u64, u32> = table.iter().map(|(r, row)| (*r, row.pid)).collect();
    assert_eq!(pids, ready, "the table's pids are not the ranks' own");
    for (r, row) in &table {
        assert_eq!(row.local, "yes", "rank {r}: {row:?}");
        assert_eq!(row.control, "attached", "rank {r}: {row:?}");
        assert!(
            row.executable.ends_with("/mpir-demo-rank"),
            "rank {r}: {row:?}"
        );
    }
    let doc = verdict.expect("no deadlock line");
    assert_eq!(doc["schema"], "mpir.deadlock/4");
    assert_eq!(doc["verdict"], "deadlock", "{doc}");
    assert_eq!(doc["samples"], 3);
    let cycles = doc["cycles"].as_array().expect("cycles");
    assert_eq!(cycles.len(), 1, "{doc}");
    let mut in_cycle: Vec<u64> = cycles[0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_u64().unwrap())
        .collect();
    in_cycle.sort_unstable();
    assert_eq!(in_cycle, [0, 1, 2]);
    assert!(released_after_verdict, "{}", out.stdout);
    // Released means ended: no rank is left (a zombie awaiting its parent counts as gone).
    let pids: Vec<u32> = pids.values().copied().collect();
    gone_within(&pids, 10);
    let left: Vec<u32> = pids.into_iter().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "ranks left running: {left:?}");
}

fn run_example(source: &str, compiler: &str, std: &str, name: &str) {
    if !need(compiler) {
        return;
    }
    let _one = ONE_JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (_lib, exe) = compile_dynamic(
        compiler,
        name,
        std,
        &crate_dir().join("examples").join(source),
    );
    let out = run(&mut Command::new(&exe), Duration::from_secs(120));
    check_demo_run(&out);
}

#[test]
fn the_c_example_on_the_demo_job() {
    run_example("job.c", "cc", "-std=c99", "job-c");
}

#[test]
fn the_cpp_example_on_the_demo_job() {
    run_example("job.cpp", "c++", "-std=c++17", "job-cpp");
}

#[test]
fn the_c_example_under_address_sanitizer_with_the_starter_given() {
    if !need("gcc") {
        return;
    }
    if !have_asan() {
        skip("gcc's AddressSanitizer runtime (libasan) is not installed");
        return;
    }
    let _one = ONE_JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (_lib, exe) = compile_asan("job-asan", "c99", &crate_dir().join("examples/job.c"));
    let starter = mpir_demo::starter().expect("the demo job's starter");
    let out = run(
        Command::new(&exe).arg(&starter).args(["-n", "4"]).env(
            "ASAN_OPTIONS",
            "detect_leaks=1:abort_on_error=0:exitcode=86",
        ),
        Duration::from_secs(180),
    );
    assert!(
        !out.stderr.contains("AddressSanitizer"),
        "ASan: {}",
        out.stderr
    );
    check_demo_run(&out);
}

/// The C example launching a stock Open MPI job (Debian's `orterun`: no debug information in
/// `libmpi`, no types given) whose three ranks block in a ring of receives
/// (mpir-cli/tests/fixtures/deadlock.c `ring`): the library reads their queues with the layouts
/// shipped for that release, proven on each rank, so the deadlock is confirmed from the queues
/// — without them the verdict could only be `blocked_in_mpi`, and the example would print
/// "not confirmed".
#[test]
fn the_c_example_on_a_stock_open_mpi_ring() {
    if !need("cc") || !need("mpicc.openmpi") || !need("orterun") {
        return;
    }
    let _one = ONE_JOB
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (_lib, exe) = compile_dynamic(
        "cc",
        "job-ompi",
        "-std=c99",
        &crate_dir().join("examples/job.c"),
    );
    let dir = mpir_target::testkit::scratch("capi-ompi-ring");
    let program = dir.join("deadlock");
    mpir_target::testkit::run(
        Command::new("mpicc.openmpi")
            .args(["-g", "-o"])
            .arg(&program)
            .arg(crate_dir().join("../mpir-cli/tests/fixtures/deadlock.c")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let pids = dir.join("ring");
    std::fs::create_dir_all(&pids).unwrap();
    let out = run(
        Command::new(&exe)
            .args([
                "orterun",
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
                "3",
            ])
            .arg(&program)
            .arg("ring")
            .arg(&pids)
            .env("OMPI_MPIR_DO_NOT_WARN", "1"),
        Duration::from_secs(120),
    );
    assert_eq!(out.code, Some(0), "{}\n{}", out.stdout, out.stderr);
    let line = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("deadlock "))
        .unwrap_or_else(|| panic!("no deadlock line: {}", out.stdout));
    let doc: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    assert_eq!(doc["verdict"], "deadlock", "{doc}");
    let mut ring: Vec<u64> = doc["cycles"][0]["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_u64().unwrap())
        .collect();
    ring.sort_unstable();
    assert_eq!(ring, [0, 1, 2], "{doc}");
    assert!(out.stdout.contains("\nreleased"), "{}", out.stdout);
}
