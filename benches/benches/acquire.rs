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

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group, criterion_main};
use mpir_acquire::{AcquireOptions, RankSelection, live};
use mpir_benches::stacks::{
    compile, debug_mode_shim, gdb_attach, gdb_launch, job, running_job, stacks,
};
use mpir_benches::{Scratch, have};

fn launch_overhead(c: &mut Criterion, dir: &Path) {
    let stacks = stacks(dir);
    let mut g = c.benchmark_group("launch_overhead");
    g.sample_size(10);
    for st in &stacks {
        let (name, run, program, debug) = (&st.name, &st.run, &st.program, &st.debug);
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
                let o = AcquireOptions::default().with_debug(debug.clone());
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

fn attach_64(c: &mut Criterion, dir: &Path) {
    if !have("orterun") || !have("mpicc.openmpi") {
        eprintln!("attach_64: Open MPI not installed; skipped");
        return;
    }
    let Some(program) = compile("mpicc.openmpi", dir, "ranks_ompi64") else {
        return;
    };
    let running = running_job(&program, 64);
    let pid = running.0.id();
    let mut g = c.benchmark_group("attach_64");
    g.sample_size(10);
    g.bench_function("ours/table", |b| {
        b.iter(|| {
            let o = AcquireOptions::default().with_ranks(RankSelection::None);
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
    let gdb_once = || gdb_attach(pid, 64);
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
                let o = AcquireOptions::default().with_ranks(RankSelection::None);
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
    let dir = Scratch::new("acquire");
    launch_overhead(c, &dir.0);
    attach_64(c, &dir.0);
}

criterion_group!(benches, bench);
criterion_main!(benches);
