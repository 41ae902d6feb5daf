//! Acquisition on the real stacks, against a plain run and against gdb, in one run.
//!
//! - `launch_overhead/{plain,ours,gdb}/<stack>`: a whole 4-rank job (`mpi_ranks 0`: each
//!   rank prints and exits) run plainly, under `mpir_acquire::live::launch` (exec stop, entry
//!   point, spawn event, 4 ranks attached and released), and under gdb doing the same
//!   (`gdb/launch.py`), until it exits. Target: ours ≤ plain + 10%. For Open MPI also
//!   `debug_mode/openmpi`: the job with `MPIR_being_debugged` set by an `LD_PRELOAD`ed
//!   constructor and no tracer at all — what Open MPI's own debugger handshake costs.
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

/// A preloadable library that sets `MPIR_being_debugged` before `main` (where the starter
/// defines it) and hides itself from the starter's children.
fn debug_mode_shim(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("shim.c");
    std::fs::write(
        &src,
        "#include <stdlib.h>\n\
         extern int MPIR_being_debugged __attribute__((weak));\n\
         __attribute__((constructor)) static void set(void) {\n\
             if (&MPIR_being_debugged) MPIR_being_debugged = 1;\n\
             unsetenv(\"LD_PRELOAD\");\n\
         }\n",
    )
    .ok()?;
    let so = dir.join("shim.so");
    Command::new("cc")
        .args(["-shared", "-fPIC"])
        .arg(&src)
        .arg("-o")
        .arg(&so)
        .status()
        .ok()?
        .success()
        .then_some(so)
}

/// A gdb run of `gdb/launch.py` on the job, timed until the job's output ends.
fn gdb_launch(mut job: Command, debug_dir: Option<&Path>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("gdb/launch.py");
    let mut gdb = Command::new("gdb");
    gdb.args(["-nx", "-batch"]);
    if let Some(d) = debug_dir {
        gdb.arg("-iex").arg(format!(
            "set debug-file-directory /usr/lib/debug:{}",
            d.display()
        ));
    }
    gdb.arg("-x")
        .arg(&script)
        .arg("--args")
        .arg(job.get_program())
        .args(job.get_args());
    for (k, v) in job.get_envs() {
        if let Some(v) = v {
            gdb.env(k, v);
        }
    }
    job.stdout(Stdio::null());
    let mut child = gdb
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The job inherits gdb's stdout: end of file when both are gone.
    let mut out = String::new();
    std::io::Read::read_to_string(child.stdout.as_mut().unwrap(), &mut out).unwrap();
    child.wait().unwrap();
    assert_eq!(out.matches(" done").count(), 4, "{out}");
}

fn launch_overhead(c: &mut Criterion, dir: &Path) {
    let mut stacks = Vec::new();
    if have("orterun")
        && have("mpicc.openmpi")
        && let Some(p) = compile("mpicc.openmpi", dir, "ranks_ompi")
    {
        stacks.push(("openmpi", "orterun", p, DebugOptions::default()));
    }
    if have("mpiexec.hydra")
        && have("mpicc.mpich")
        && let (Some(p), Some(d)) = (compile("mpicc.mpich", dir, "ranks_mpich"), hydra_debug())
    {
        stacks.push(("hydra", "mpiexec.hydra", p, d));
    }
    let mut g = c.benchmark_group("launch_overhead");
    g.sample_size(10);
    for (name, run, program, debug) in &stacks {
        g.bench_function(format!("plain/{name}"), |b| {
            b.iter(|| assert!(job(run, 4, program, 0).status().unwrap().success()))
        });
        if have("gdb") {
            let debug_dir = (*name == "hydra")
                .then(|| debug.debug_dirs.last().cloned())
                .flatten();
            g.bench_function(format!("gdb/{name}"), |b| {
                b.iter(|| {
                    let mut j = job(run, 4, program, 0);
                    j.stdout(Stdio::piped());
                    gdb_launch(j, debug_dir.as_deref())
                })
            });
        }
        if *name == "openmpi"
            && let Some(shim) = debug_mode_shim(dir)
        {
            g.bench_function(format!("debug_mode/{name}"), |b| {
                b.iter(|| {
                    let mut j = job(run, 4, program, 0);
                    j.env("LD_PRELOAD", &shim);
                    assert!(j.status().unwrap().success())
                })
            });
        }
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
