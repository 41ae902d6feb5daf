//! Section 10 of `compare` (issue 34): Python frames in `mpir stacks` on a 16-rank mpi4py job
//! (Debian's python3.11 and Open MPI, the venv of scripts/ci-mpi4py.sh: `$MPIR_MPI4PY_DIR`),
//! each rank blocked in a receive of a ring (mpir-cli/tests/fixtures/python/ring.py).
//!
//! Measured in the same run, alternating so that the machine's state is shared: `mpir stacks
//! --json --starter` end to end with Python frames (the default) and with `--no-python`
//! (native frames only: the floor), each rank's stop per sample from the documents, and
//! py-spy's `dump` of every rank one process after the other (Python frames only, and
//! `--native`), the peer that reads one process's Python stack.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use mpir_benches::have;
use mpir_benches::stacks::Running;

use super::{Config, mpir_binary, ms, run_to_end, verdict};

const RANKS: usize = 16;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The 16-rank ring, started once every rank wrote its pid file; its pids.
fn start(python: &Path, dir: &Path) -> (Running, Vec<u32>) {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-cli/tests/fixtures/python/ring.py");
    let mut c = Command::new("orterun");
    c.env("OMPI_MPIR_DO_NOT_WARN", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(RANKS.to_string())
        .arg(python)
        .arg(&script)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let running = Running(c.spawn().expect("start orterun"));
    let file = |r: usize| dir.join(format!("{r}.pid"));
    let start = Instant::now();
    while !(0..RANKS).all(|r| file(r).is_file()) {
        assert!(start.elapsed().as_secs() < 120, "the ranks did not start");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // Into their receive.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let pids = (0..RANKS)
        .map(|r| {
            std::fs::read_to_string(file(r))
                .expect("pid file")
                .trim()
                .parse()
                .expect("a pid")
        })
        .collect();
    (running, pids)
}

/// The median stop of a rank in a stacks document (µs).
fn stops(doc: &[u8]) -> f64 {
    let v: serde_json::Value = serde_json::from_slice(doc).expect("a stacks document");
    let mut us: Vec<f64> = v["stops"][0]
        .as_array()
        .expect("stops")
        .iter()
        .map(|s| s["stopped_us"].as_f64().expect("stopped_us"))
        .collect();
    median(&mut us)
}

fn py_spy_all(py_spy: &Path, pids: &[u32], native: bool) -> (f64, usize) {
    let start = Instant::now();
    let mut with_frames = 0;
    for &pid in pids {
        let mut c = Command::new(py_spy);
        c.args(["dump", "--pid", &pid.to_string()]);
        if native {
            c.arg("--native");
        }
        let out = c.output().expect("run py-spy");
        if String::from_utf8_lossy(&out.stdout).contains("wait_for_left") {
            with_frames += 1;
        }
    }
    (start.elapsed().as_secs_f64(), with_frames)
}

pub(super) fn python(cfg: &Config, dir: &Path) {
    println!("## Python frames (16-rank mpi4py ring, Open MPI)\n");
    let venvs = std::env::var_os("MPIR_MPI4PY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/cache/mpir-rs/mpi4py".into());
    let python = venvs.join("openmpi/bin/python");
    let py_spy = venvs.join("bin/py-spy");
    if !python.is_file() || !have("orterun") {
        println!("Not measured: no mpi4py venv (scripts/ci-mpi4py.sh) or no orterun.\n");
        return;
    }
    // Built before the job starts: 16 polling ranks on a small machine slow a build down.
    let mpir = mpir_binary();
    let work = dir.join("python-ring");
    std::fs::create_dir_all(&work).expect("scratch");
    let (running, pids) = start(&python, &work);
    let starter = running.0.id().to_string();
    let run = |python: bool, keep: bool| {
        let mut c = Command::new(&mpir);
        c.args(["stacks", "--json", "--starter", &starter]);
        if !python {
            c.arg("--no-python");
        }
        run_to_end(&mut c, keep)
    };
    // Checks, outside the timed runs: every rank's Python frames are there, and absent
    // without them.
    let with = run(true, true).1;
    let text = String::from_utf8_lossy(&with);
    assert!(
        text.contains("\"wait_for_left\"") && text.contains("\"python\""),
        "no Python frames: {text:.2000}"
    );
    let without = run(false, true).1;
    assert!(!String::from_utf8_lossy(&without).contains("\"wait_for_left\""));
    let (mut t_with, mut t_without, mut s_with, mut s_without) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..cfg.runs.max(5) {
        let (t, doc) = run(true, true);
        t_with.push(t);
        s_with.push(stops(&doc));
        let (t, doc) = run(false, true);
        t_without.push(t);
        s_without.push(stops(&doc));
    }
    let (with, without) = (median(&mut t_with), median(&mut t_without));
    let (stop_with, stop_without) = (median(&mut s_with), median(&mut s_without));
    let spy = py_spy.is_file().then(|| {
        let mut runs: Vec<(f64, usize)> = (0..cfg.gdb_runs.max(3))
            .map(|_| py_spy_all(&py_spy, &pids, false))
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        runs[runs.len() / 2]
    });
    let spy_native = py_spy.is_file().then(|| {
        let mut runs: Vec<(f64, usize)> = (0..cfg.gdb_runs.max(3))
            .map(|_| py_spy_all(&py_spy, &pids, true))
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        runs[runs.len() / 2]
    });
    drop(running);
    println!("| what | time | each rank stopped (median) |");
    println!("|---|---|---|");
    println!(
        "| `mpir stacks --json` with Python frames (default) | {} | {:.0} µs |",
        ms(with),
        stop_with
    );
    println!(
        "| `mpir stacks --json --no-python` (native only: the floor) | {} | {:.0} µs |",
        ms(without),
        stop_without
    );
    for (name, r) in [("py-spy dump", spy), ("py-spy dump --native", spy_native)] {
        match r {
            Some((t, n)) => println!(
                "| {name}, each rank in turn ({n} of {RANKS} showed `wait_for_left`) | {} ({} per process) | – |",
                ms(t),
                ms(t / RANKS as f64)
            ),
            None => println!("| {name} | not measured (no py-spy) | – |"),
        }
    }
    let added = with / without - 1.0;
    println!(
        "\nPython frames add {:+.1}% to `mpir stacks` end to end ({:+.0} µs per rank stop). \
         Target: at most +20%: {}.\n",
        added * 100.0,
        stop_with - stop_without,
        verdict(added <= 0.20)
    );
}
