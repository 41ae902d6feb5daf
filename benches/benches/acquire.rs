//! Acquisition on the real stacks, against a plain run and against gdb, in one run.
//!
//! - `launch_overhead/{plain,ours}/<stack>`: a whole 4-rank job (`mpi_ranks 0`: each rank
//!   prints and exits) run plainly, and run under `mpir_acquire::live::launch` (exec stop,
//!   entry point, spawn event, 4 ranks attached and released) until it exits. Target: ours ≤
//!   plain + 10%.
//! - `attach_64/ours/{table,all_ranks}`: `live::attach` on a running 64-rank Open MPI job —
//!   attach the starter, load its symbols, read the table, (attach and release all 64 ranks),
//!   detach. `attach_64/gdb`: `gdb -p` with `gdb/attach_table.py` reading the same table,
//!   timed whole. Target: ours ≥ 10× faster than gdb.
//!
//! Needs Open MPI (`orterun`, `mpicc.openmpi`); hydra is measured too when `mpiexec.hydra`,
//! `mpicc.mpich` and its rebuilt symbol file (`MPIR_HYDRA_DEBUG_DIR`, default
//! `/var/cache/mpir-rs/debug`) are there. Results in BENCHMARKS.md.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mpir_acquire::{AcquireOptions, RankSelection, live};
use mpir_target::debuginfo::DebugOptions;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn compile(cc: &str, dir: &Path, name: &str) -> Option<PathBuf> {
    let src =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures/mpi_ranks.c");
    let exe = dir.join(name);
    Command::new(cc)
        .arg(src)
        .arg("-o")
        .arg(&exe)
        .status()
        .ok()?
        .success()
        .then_some(exe)
}

fn job(run: &str, n: usize, program: &Path, seconds: u32) -> Command {
    let mut c = Command::new(run);
    if run == "orterun" {
        c.arg("--oversubscribe")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MPIR_DO_NOT_WARN", "1");
    }
    c.arg("-n")
        .arg(n.to_string())
        .arg(program)
        .arg(seconds.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

fn hydra_debug() -> Option<DebugOptions> {
    let dir = std::env::var_os("MPIR_HYDRA_DEBUG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/debug"));
    dir.join(".build-id").is_dir().then(|| {
        let mut d = DebugOptions::default();
        d.debug_dirs.push(dir);
        d
    })
}

fn launch_overhead(c: &mut Criterion, dir: &Path) {
    let mut stacks = Vec::new();
    if have("orterun") && have("mpicc.openmpi") {
        if let Some(p) = compile("mpicc.openmpi", dir, "ranks_ompi") {
            stacks.push(("openmpi", "orterun", p, DebugOptions::default()));
        }
    }
    if have("mpiexec.hydra") && have("mpicc.mpich") {
        if let (Some(p), Some(d)) = (compile("mpicc.mpich", dir, "ranks_mpich"), hydra_debug()) {
            stacks.push(("hydra", "mpiexec.hydra", p, d));
        }
    }
    let mut g = c.benchmark_group("launch_overhead");
    g.sample_size(10);
    for (name, run, program, debug) in &stacks {
        g.bench_function(format!("plain/{name}"), |b| {
            b.iter(|| assert!(job(run, 4, program, 0).status().unwrap().success()))
        });
        g.bench_function(format!("ours/{name}"), |b| {
            b.iter(|| {
                let o = AcquireOptions::default().debug(debug.clone());
                let mut a = live::launch(job(run, 4, program, 0), o).unwrap();
                assert_eq!(a.job().len(), 4);
                let mut child = a.take_child().unwrap();
                drop(a);
                assert!(child.wait().unwrap().success());
            })
        });
    }
    g.finish();
}

struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn attach_64(c: &mut Criterion, dir: &Path) {
    if !have("orterun") || !have("mpicc.openmpi") {
        eprintln!("attach_64: Open MPI not installed; skipped");
        return;
    }
    let Some(program) = compile("mpicc.openmpi", dir, "ranks_ompi64") else {
        return;
    };
    let mut cmd = job("orterun", 64, &program, 3600);
    cmd.stdout(Stdio::piped());
    let mut running = Running(cmd.spawn().unwrap());
    let pid = running.0.id();
    let mut out = BufReader::new(running.0.stdout.take().unwrap());
    let mut line = String::new();
    for _ in 0..64 {
        line.clear();
        out.read_line(&mut line).unwrap();
    }
    let mut g = c.benchmark_group("attach_64");
    g.sample_size(10);
    g.bench_function("ours/table", |b| {
        b.iter(|| {
            let o = AcquireOptions::default().ranks(RankSelection::None);
            let a = live::attach(pid, o).unwrap();
            assert_eq!(a.job().len(), 64);
        })
    });
    g.bench_function("ours/all_ranks", |b| {
        b.iter(|| {
            let a = live::attach(pid, AcquireOptions::default()).unwrap();
            assert_eq!(a.job().attached_pids().len(), 64);
        })
    });
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("gdb/attach_table.py");
    let gdb_once = || {
        let start = Instant::now();
        let o = Command::new("gdb")
            .args(["-nx", "-batch", "-p", &pid.to_string(), "-x"])
            .arg(&script)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(text.contains("gdb-attach entries=64"), "{text}");
        start.elapsed()
    };
    if have("gdb") {
        g.bench_function("gdb", |b| b.iter(gdb_once));
    }
    g.finish();
    // One line with both, measured back to back.
    if have("gdb") {
        let med = |mut v: Vec<Duration>| {
            v.sort();
            v[v.len() / 2]
        };
        let ours = med((0..5)
            .map(|_| {
                let t = Instant::now();
                let o = AcquireOptions::default().ranks(RankSelection::None);
                drop(live::attach(pid, o).unwrap());
                t.elapsed()
            })
            .collect());
        let gdb = med((0..5).map(|_| gdb_once()).collect());
        println!(
            "compare/attach_64: ours {:.1} ms, gdb -p {:.0} ms, gdb/ours {:.0}x (medians of 5)",
            ours.as_secs_f64() * 1e3,
            gdb.as_secs_f64() * 1e3,
            gdb.as_secs_f64() / ours.as_secs_f64()
        );
    }
}

fn bench(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("mpir-bench-acquire-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    launch_overhead(c, &dir);
    attach_64(c, &dir);
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
