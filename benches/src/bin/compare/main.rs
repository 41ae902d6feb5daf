//! `compare`: our crates against gdb doing the same job and against a raw floor, in one run,
//! printed as the Markdown tables of BENCHMARKS.md.
//!
//! ```text
//! cargo run --release -p mpir-benches --bin compare [-- --quick] [-- --no-gdb]
//! ```
//!
//! 1. Process table of 1K / 100K / 1M entries, shared and duplicated strings, from a live fake
//!    starter: `read_proctable` (ours), the raw floor (`proctable::floor`), gdb's Python walk.
//! 2. Attach mode on a running 64-rank Open MPI job: `live::attach` (table only, and with all
//!    ranks attached and released) against `gdb -p` reading the table.
//! 3. Launch overhead on each installed stack: the 4-rank job plainly, under
//!    `live::launch`, and under gdb; for Open MPI also its own debugger handshake without a
//!    tracer (`debug_mode`).
//!
//! 4. `mpir attach --json` end to end (the process, from spawn to exit, its JSON document read
//!    to the end) on a 100K- and a 1M-entry table whose hosts are all other nodes, against
//!    the raw floor of the same job (the table read raw, the same document written by a
//!    minimal hand-written formatter into the same kind of pipe) and gdb's walk; checked to
//!    have attached no rank.
//!
//! 5. Stacks of every rank (issue 18) on a running 64-rank Open MPI job: how long each rank is
//!    stopped per sample (`snapshot_live`, median over many samples of one rank, with its thread
//!    count), then every rank's stacks end to end (`mpir stacks PID --json`, spawn to exit)
//!    against gdb (`attach`, `thread apply all bt`, `detach` for every rank in one gdb) and
//!    elfutils' `eu-stack -p` per rank; each peer checked to have reached `main` in every rank.
//!
//! 6. Attach mode on a running 32-task Slurm step (`srun`): `live::attach` (table only, and
//!    with every task attached and released) against `gdb -p` on the same `srun`.
//!
//! 7. Attach to a running 64-rank Open MPI 5 job through PMIx, table only: `mpir-pmix` in
//!    process against a C PMIx tool doing the same query (`benches/pmix/ptable.c`).
//!
//! 8. Ranks on other nodes (issue 21) on the simulated cluster: agents started and every
//!    node's first answer, one stacks request through agents against the same request read
//!    directly, `mpir stacks` end to end, and gdb per rank on its node.
//!
//! 9. The wait-state library (issue 29): what it adds to an MPI call (a 2-rank ping-pong on
//!    MPICH and Open MPI with and without it preloaded, the run without it the floor), and
//!    reading its export from 64 held Open MPI ranks against reading their queues.
//!
//! 10. Python frames (issue 34): `mpir stacks` on a 16-rank mpi4py job with and without
//!     them, each rank's stop, and py-spy's dump of every rank.
//!
//! 11. The HTML report and `mpir watch` (issue 33): a 4,096-rank report made and drawn in
//!     headless Chromium against the same data parsed only; the watch's CPU per round and
//!     peak memory on a 64-rank Open MPI job against one round's work as a one-shot command.
//!
//! 12. Agents at scale (issue 31, point 6; only with `--only agents-scale`): start time,
//!     one stacks answer and the front end's CPU per node for 16, 64 and 252 simulated nodes
//!     (`--scale-max N` stops at N), hydra's one job against a command per node.
//!
//! 13. `mpir stacks` one-shot on small Open MPI jobs (`stacks-small`): the fixed cost of
//!     `mpir stacks --json --starter` end to end on 4, 16 and 32 ranks, with the persistent
//!     symbol cache (`MPIR_SYMBOL_CACHE`) cold and warm, against gdb per rank and eu-stack per
//!     rank in the same run; for 4 ranks, where the time goes.
//!
//! `--quick` takes fewer samples and skips the 1M tables; `--no-gdb` skips gdb; `--only
//! NAME` (`proctable`, `attach64`, `launch`, `attach-e2e`, `stacks`, `srun`, `pmix`,
//! `agents`, `agents-scale`, `waits`, `python`, `report`, `stacks-small`) runs one section.
//! Medians.

use std::process::Stdio;
use std::time::Instant;

use mpir_acquire::{AcquireOptions, RankSelection, live};
use mpir_benches::stacks::{
    Stack, compile, debug_mode_shim, gdb_attach, gdb_launch, job, running_job, stacks,
};
use mpir_benches::{Scratch, have, median, proctable};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::proctable::{ReadOptions, read_proctable};

mod agents;
mod agents_scale;
mod layouts;
mod pmix;
mod python;
mod report;
mod srun;
mod stacks;
mod stacks_small;
mod waits;
mod waits_reads;

struct Config {
    runs: usize,
    gdb_runs: usize,
    quick: bool,
    gdb: bool,
}

fn ms(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.1} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "**not met**" }
}

fn proctables(cfg: &Config, dir: &std::path::Path) {
    let exe = proctable::compile(dir);
    println!("## Process table from a live starter\n");
    println!(
        "| entries | strings | ours | ours incl. attach+symbols | raw floor | ours/floor | gdb walk | gdb/ours |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let sizes: &[usize] = if cfg.quick {
        &[1_000, 100_000]
    } else {
        &[1_000, 100_000, 1 << 20]
    };
    let mut worst_floor: f64 = 0.0;
    let mut worst_gdb = f64::INFINITY;
    for &n in sizes {
        for mode in ["shared", "dup"] {
            eprintln!("compare: proctable {n} {mode}");
            let starter = proctable::start(&exe, n, mode);
            let pid = starter.pid();
            let target = LiveTarget::open(pid, DebugOptions::default()).expect("open the starter");
            let ours = median(cfg.runs, || {
                let t = read_proctable(&target, &ReadOptions::default()).expect("read");
                assert_eq!(t.resolved.entries.len(), n);
                t
            });
            let whole = median(cfg.runs, || {
                let t = LiveTarget::open(pid, DebugOptions::default()).expect("open");
                read_proctable(&t, &ReadOptions::default()).expect("read")
            });
            let floor = median(cfg.runs, || proctable::floor(pid, starter.table, n));
            let gdb = if cfg.gdb {
                let runs = if n > 100_000 { 1 } else { cfg.gdb_runs };
                let mut v: Vec<f64> = (0..runs)
                    .filter_map(|_| proctable::gdb_walk(pid).ok())
                    .collect();
                v.sort_by(f64::total_cmp);
                v.get(v.len() / 2).copied()
            } else {
                None
            };
            worst_floor = worst_floor.max(ours / floor);
            if let Some(g) = gdb {
                worst_gdb = worst_gdb.min(g / ours);
            }
            println!(
                "| {n} | {mode} | {} | {} | {} | {:.2}× | {} | {} |",
                ms(ours),
                ms(whole),
                ms(floor),
                ours / floor,
                gdb.map_or("–".into(), ms),
                gdb.map_or("–".into(), |g| format!("{:.0}×", g / ours)),
            );
        }
    }
    println!();
    println!(
        "Targets: ours ≤ 1.5× the floor: {} (worst {:.2}×); ours ≥ 30× faster than gdb: {}.\n",
        verdict(worst_floor <= 1.5),
        worst_floor,
        if worst_gdb.is_finite() {
            format!("{} (worst {:.0}×)", verdict(worst_gdb >= 30.0), worst_gdb)
        } else {
            "not measured".into()
        }
    );
}

/// The rank program `mpi_ranks.c` built with Open MPI's `mpicc` as `name` in `dir`; `None`,
/// said in the section, when Open MPI is not installed or the build fails.
pub(crate) fn ompi_ranks_program(dir: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    if !have("orterun") || !have("mpicc.openmpi") {
        println!("Open MPI is not installed: not measured.\n");
        return None;
    }
    let program = compile("mpicc.openmpi", dir, name);
    if program.is_none() {
        println!("mpicc.openmpi failed: not measured.\n");
    }
    program
}

fn attach_64(cfg: &Config, dir: &std::path::Path) {
    println!("## Attach mode, 64-rank Open MPI job\n");
    let Some(program) = ompi_ranks_program(dir, "ranks_ompi64") else {
        return;
    };
    eprintln!("compare: attach_64");
    let running = running_job(&program, 64);
    let pid = running.0.id();
    let table = median(cfg.runs, || {
        let o = AcquireOptions::default().with_ranks(RankSelection::None);
        let a = live::attach(pid, o).expect("attach");
        assert_eq!(a.job().len(), 64);
    });
    let all = median(cfg.runs, || {
        // Holding: every rank attached (proven first), then released on drop.
        let a = live::attach(pid, AcquireOptions::default().with_hold(true)).expect("attach");
        assert_eq!(a.job().attached_pids().len(), 64);
    });
    let gdb = (cfg.gdb && have("gdb")).then(|| median(cfg.gdb_runs, || gdb_attach(pid, 64)));
    attach_table("attach, read table, detach", "64 ranks", table, all, gdb);
}

/// The attach table of a section: ours reading the table only, ours with every rank (`ranks`:
/// "64 ranks") attached and released, and gdb, in seconds; then the target's verdict.
fn attach_table(what: &str, ranks: &str, table: f64, all: f64, gdb: Option<f64>) {
    println!(
        "| what | ours (table) | ours (all {ranks} attached and released) | gdb -p | gdb/ours |"
    );
    println!("|---|---|---|---|---|");
    println!(
        "| {what} | {} | {} | {} | {} |",
        ms(table),
        ms(all),
        gdb.map_or("–".into(), ms),
        gdb.map_or("–".into(), |g| format!(
            "{:.0}× / {:.0}×",
            g / table,
            g / all
        )),
    );
    match gdb {
        Some(g) => println!(
            "\nTarget: ≥ 10× faster than `gdb -p`: {} ({:.0}× table only, {:.0}× with all {ranks}).\n",
            verdict(g / all >= 10.0),
            g / table,
            g / all
        ),
        None => println!(),
    }
}

/// The `mpir` binary of this build profile (built by cargo first).
fn mpir_binary() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().expect("target dir");
    let status =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .args([
                "build",
                "--quiet",
                "--release",
                "-p",
                "mpir-cli",
                "--bin",
                "mpir",
            ])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .expect("run cargo");
    assert!(status.success(), "cargo build --release --bin mpir failed");
    dir.join("mpir")
}

/// Runs `cmd` with stdout piped and read to the end through a 64 KiB buffer (as the floor's
/// document is): seconds from spawn to exit. With `keep`, the output is kept too (for the
/// checks, outside the timed runs).
fn run_to_end(cmd: &mut std::process::Command, keep: bool) -> (f64, Vec<u8>) {
    use std::io::Read;
    let start = Instant::now();
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let mut out = Vec::new();
    let mut stdout = child.stdout.take().expect("stdout");
    let mut buf = vec![0u8; 1 << 16];
    loop {
        let k = stdout.read(&mut buf).expect("read the output");
        if k == 0 {
            break;
        }
        if keep {
            out.extend_from_slice(buf.get(..k).unwrap_or_default());
        }
    }
    let status = child.wait().expect("wait");
    let took = start.elapsed().as_secs_f64();
    assert!(status.success(), "{cmd:?}: {status}");
    (took, out)
}

/// Occurrences of `needle` in `hay`.
fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

fn attach_end_to_end(cfg: &Config, dir: &std::path::Path) {
    println!(
        "## `mpir attach --json` end to end, every rank on another node
"
    );
    let exe = proctable::compile(dir);
    let mpir = mpir_binary();
    println!(
        "| entries | ours (`mpir attach --json`, whole process) | raw floor (table + same document) | ours/floor | gdb (attach + Python walk, whole process) | gdb/ours | output |"
    );
    println!("|---|---|---|---|---|---|---|");
    let sizes: &[usize] = if cfg.quick {
        &[1_000, 100_000]
    } else {
        &[1_000, 100_000, 1 << 20]
    };
    let mut at_1m = None;
    for &n in sizes {
        eprintln!("compare: attach end to end {n}");
        // 16 host names node00..node15, none of them this machine: every rank is remote.
        let starter = proctable::start(&exe, n, "shared");
        let pid = starter.pid();
        let attach = || {
            let mut c = std::process::Command::new(&mpir);
            c.args(["attach", "--json", &pid.to_string()]);
            c
        };
        // Checked once, untimed: no rank was touched, every one says remote.
        let (_, out) = run_to_end(&mut attach(), true);
        assert_eq!(
            count(&out, b"\"control\": \"remote\""),
            n,
            "every rank remote"
        );
        assert_eq!(count(&out, b"\"control\": \"attached\""), 0);
        let bytes = out.len();
        drop(out);
        let ours = median(cfg.runs, || run_to_end(&mut attach(), false).0);
        let floors: Vec<f64> = (0..cfg.runs)
            .map(|_| proctable::floor_document(pid, starter.table, n))
            .collect();
        let floor = {
            let mut v = floors;
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let gdb = (cfg.gdb && have("gdb")).then(|| {
            let start = Instant::now();
            let _ = proctable::gdb_walk(pid);
            start.elapsed().as_secs_f64()
        });
        if n == 1 << 20 {
            at_1m = Some(ours / floor);
        }
        println!(
            "| {n} | {} | {} | {:.2}× | {} | {} | {:.1} MB |",
            ms(ours),
            ms(floor),
            ours / floor,
            gdb.map_or("–".into(), ms),
            gdb.map_or("–".into(), |g| format!("{:.0}×", g / ours)),
            bytes as f64 / 1e6
        );
    }
    // The floor is in-process code: it starts no process, attaches to nothing and loads no
    // symbols; the small tables show that fixed cost (a few milliseconds).
    match at_1m {
        Some(r) => println!(
            "\nTarget (1M entries): ours ≤ 1.5× the floor end to end, JSON included: {} ({r:.2}×).\n",
            verdict(r <= 1.5)
        ),
        None => println!("\nTarget (1M entries): not measured (--quick).\n"),
    }
}

fn launch_once(st: &Stack) {
    let o = AcquireOptions::default().with_debug(st.debug.clone());
    let mut a = live::launch(job(st.run, 4, &st.program, 0), o).expect("launch");
    assert_eq!(a.job().len(), 4);
    let mut child = a.take_child().expect("the starter");
    drop(a);
    assert!(child.wait().expect("wait").success());
}

fn launch_overhead(cfg: &Config, dir: &std::path::Path) {
    println!("## Launch overhead, 4-rank job to completion\n");
    let stacks = stacks(dir);
    if stacks.is_empty() {
        println!("No MPI stack installed: not measured.\n");
        return;
    }
    println!(
        "| stack | plain | ours | ours/plain | MPI's own debug handshake, no tracer | gdb | gdb/plain |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for st in &stacks {
        eprintln!("compare: launch {}", st.name);
        let plain = median(cfg.runs, || {
            assert!(
                job(st.run, 4, &st.program, 0)
                    .status()
                    .expect("run")
                    .success()
            )
        });
        let ours = median(cfg.runs, || launch_once(st));
        let debug_mode = (st.name == "openmpi")
            .then(|| debug_mode_shim(dir))
            .flatten()
            .map(|shim| {
                median(cfg.runs, || {
                    let mut j = job(st.run, 4, &st.program, 0);
                    j.env("LD_PRELOAD", &shim);
                    assert!(j.status().expect("run").success())
                })
            });
        let gdb = (cfg.gdb && have("gdb")).then(|| {
            let debug_dir = (st.name == "hydra")
                .then(|| st.debug.debug_dirs.last().cloned())
                .flatten();
            median(cfg.gdb_runs, || {
                let mut j = job(st.run, 4, &st.program, 0);
                j.stdout(Stdio::piped());
                gdb_launch(j, debug_dir.as_deref())
            })
        });
        println!(
            "| {} | {} | {} | {:+.0}% | {} | {} | {} |",
            st.name,
            ms(plain),
            ms(ours),
            (ours / plain - 1.0) * 100.0,
            debug_mode.map_or("–".into(), |d| format!(
                "{} ({:+.0}%)",
                ms(d),
                (d / plain - 1.0) * 100.0
            )),
            gdb.map_or("–".into(), ms),
            gdb.map_or("–".into(), |g| format!(
                "{:+.0}%",
                (g / plain - 1.0) * 100.0
            )),
        );
        let ok = ours <= plain * 1.10;
        let mut note = format!(
            "{}: overhead ≤ +10%: {} ({:+.0}%)",
            st.name,
            verdict(ok),
            (ours / plain - 1.0) * 100.0
        );
        if let Some(d) = debug_mode {
            note.push_str(&format!(
                "; against the MPI's own debug handshake: {:+.0}%",
                (ours / d - 1.0) * 100.0
            ));
        }
        notes.push(note);
    }
    println!();
    for n in notes {
        println!("- {n}");
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().is_some_and(|a| a == "--agents-inner") {
        // Run by the `agents` section inside the simulated cluster's node1.
        agents::inner(&args[1..]);
        return;
    }
    if args.first().is_some_and(|a| a == "--agents-scale-inner") {
        // Run by the `agents-scale` section inside its cluster's node1.
        agents_scale::inner(&args[1..]);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let cfg = Config {
        runs: if quick { 3 } else { 7 },
        gdb_runs: if quick { 1 } else { 3 },
        quick,
        gdb: !args.iter().any(|a| a == "--no-gdb") && have("gdb"),
    };
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let sections = [
        "proctable",
        "attach64",
        "launch",
        "attach-e2e",
        "stacks",
        "srun",
        "pmix",
        "agents",
        "agents-scale",
        "waits",
        "python",
        "report",
        "layouts",
        "stacks-small",
    ];
    if let Some(o) = only.as_deref().filter(|o| !sections.contains(o)) {
        eprintln!("compare: unknown section {o:?} (use one of {sections:?})");
        std::process::exit(2);
    }
    if let Some(bad) = args.iter().enumerate().find(|(i, a)| {
        *a != "--quick"
            && *a != "--no-gdb"
            && *a != "--only"
            && *a != "--scale-max"
            && args
                .get(i.wrapping_sub(1))
                .is_none_or(|p| p != "--only" && p != "--scale-max")
    }) {
        eprintln!(
            "compare: unknown argument {:?} (use --quick, --no-gdb, --only NAME, --scale-max N)",
            bad.1
        );
        std::process::exit(2);
    }
    let scale_max: usize = args
        .iter()
        .position(|a| a == "--scale-max")
        .and_then(|i| args.get(i + 1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(252);
    let run = |name: &str| only.as_deref().is_none_or(|o| o == name);
    let dir = Scratch::new("compare");
    let start = Instant::now();
    println!(
        "# mpir-rs against gdb and the raw floor ({} samples per median{})\n",
        cfg.runs,
        if cfg.gdb { "" } else { "; gdb skipped" }
    );
    if run("proctable") {
        proctables(&cfg, &dir.0);
    }
    if run("attach64") {
        attach_64(&cfg, &dir.0);
    }
    if run("launch") {
        launch_overhead(&cfg, &dir.0);
    }
    if run("attach-e2e") {
        attach_end_to_end(&cfg, &dir.0);
    }
    if run("stacks") {
        stacks::stacks_64(&cfg, &dir.0);
    }
    if run("srun") {
        srun::srun_attach(&cfg);
    }
    if run("pmix") {
        pmix::pmix_attach(&cfg, &dir.0);
    }
    if run("agents") {
        agents::agents(&cfg, &dir.0);
    }
    // Not in a whole run (a cluster of 253 nodes, minutes of both cores): asked for by name.
    if only.as_deref() == Some("agents-scale") {
        agents_scale::agents_scale(scale_max, &dir.0);
    }
    if run("waits") {
        waits::waits(&cfg, &dir.0);
    }
    if run("python") {
        python::python(&cfg, &dir.0);
    }
    if run("report") {
        report::report(&cfg, &dir.0);
    }
    if run("layouts") {
        layouts::layouts(&cfg, &dir.0);
    }
    if run("stacks-small") {
        stacks_small::stacks_small(&cfg, &dir.0);
    }
    println!("Whole run: {:.0} s.", start.elapsed().as_secs_f64());
}
