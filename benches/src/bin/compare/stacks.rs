//! Section 5 of `compare`: stacks of every rank of a running 64-rank Open MPI job (issue 18).

use std::time::Instant;

use mpir_acquire::{AcquireOptions, RankSelection, live};
use mpir_benches::backtraces::{eu_stack_all, gdb_all, gdb_each};
use mpir_benches::stacks::running_job;
use mpir_benches::{have, median};
use mpir_target::debuginfo::{DebugOptions, FileCache, ProcessImages};
use mpir_target::live::tracer::Tracer;
use mpir_target::unwind::{SnapshotOptions, SymbolCache, UnwindOptions, Unwinder, snapshot_live};
use mpir_types::DataModel;

use super::{Config, mpir_binary, ms, run_to_end, verdict};

/// The ranks' pids of the running job of starter `pid` (the table only, no rank touched).
pub(super) fn rank_pids(pid: u32) -> Vec<u32> {
    let o = AcquireOptions::default().with_ranks(RankSelection::None);
    let a = live::attach(pid, o).expect("attach");
    a.job()
        .ranks()
        .map(|r| u32::try_from(r.pid).expect("a pid"))
        .collect()
}

pub(super) fn stacks_64(cfg: &Config, dir: &std::path::Path) {
    println!("## Stacks of every rank, 64-rank Open MPI job\n");
    let Some(program) = super::ompi_ranks_program(dir, "ranks_ompi_stacks") else {
        return;
    };
    eprintln!("compare: stacks");
    let running = running_job(&program, 64);
    let starter = running.0.id();
    let pids = rank_pids(starter);
    assert_eq!(pids.len(), 64, "the job's table");

    // How long one rank is stopped per sample: a rank of this job (asleep), and a rank of a
    // 2-rank ring deadlock, which busy-polls in Open MPI's progress engine (sched_yield), one
    // rank per core as on a cluster node (oversubscribed, a rank that is not on a CPU is
    // stopped only once the scheduler runs it: milliseconds).
    let tracer = Tracer::new().expect("tracer");
    let samples = if cfg.quick { 21 } else { 101 };
    println!(
        "| one rank stopped per sample (freeze, copy registers and stacks, release) | median | worst of {samples} | threads |"
    );
    println!("|---|---|---|---|");
    let sleeping = stop_times(&tracer, pids[0], samples);
    println!(
        "| a rank of this job (asleep in `sleep`) | {} | {} | {} |",
        ms(sleeping.0),
        ms(sleeping.1),
        sleeping.2
    );
    let polling = polling_rank(dir).map(|(ring, pid)| {
        let t = stop_times(&tracer, pid, samples);
        drop(ring);
        t
    });
    match polling {
        Some(p) => println!(
            "| a rank of a 2-rank ring deadlock (polling in `MPI_Recv`, one rank per core) | {} | {} | {} |",
            ms(p.0),
            ms(p.1),
            p.2
        ),
        None => println!("| a rank of a 2-rank ring deadlock | not measured | | |"),
    }
    println!(
        "\nTarget: each rank stopped ≤ 1 ms per sample (median): {}.\n",
        verdict(sleeping.0 <= 1e-3 && polling.is_none_or(|p| p.0 <= 1e-3))
    );
    scaling(cfg, &tracer, &pids);

    // Every rank's stacks, end to end.
    let mpir = mpir_binary();
    let check = run_to_end(
        std::process::Command::new(&mpir)
            .args(["stacks", "--json", "--starter"])
            .arg(starter.to_string()),
        true,
    )
    .1;
    let text = String::from_utf8_lossy(&check);
    assert!(
        text.contains("\"main\""),
        "mpir stacks reached no main: {text:.2000}"
    );
    let ours = median(cfg.runs, || {
        run_to_end(
            std::process::Command::new(&mpir)
                .args(["stacks", "--json", "--starter"])
                .arg(starter.to_string()),
            false,
        )
    });
    let eu = (have("eu-stack")).then(|| {
        let mut runs: Vec<(f64, usize)> = (0..cfg.gdb_runs)
            .map(|_| {
                let r = eu_stack_all(&pids).expect("eu-stack");
                (r.took.as_secs_f64(), r.with_main)
            })
            .collect();
        runs.sort_by(|a, b| a.0.total_cmp(&b.0));
        runs[runs.len() / 2]
    });
    // gdb both ways: one gdb per rank, as a user or a tool such as padb runs it (the issue's
    // 0.43–1.2 s per process), and one gdb attaching to every rank in turn (its best case: one
    // start-up, one symbol cache).
    let gdb_each = (cfg.gdb && have("gdb")).then(|| {
        let r = gdb_each(&pids, &[]).expect("gdb");
        (r.took.as_secs_f64(), r.with_main)
    });
    let gdb = (cfg.gdb && have("gdb")).then(|| {
        let r = gdb_all(&pids, &[]).expect("gdb");
        (r.took.as_secs_f64(), r.with_main)
    });
    println!(
        "| what | ours (`mpir stacks --json --starter`) | eu-stack | gdb, one per rank | gdb, one for all | eu-stack/ours | gdb/ours (one per rank, one for all) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let peer = |p: Option<(f64, usize)>| {
        p.map_or("–".to_string(), |(t, n)| {
            if n == pids.len() {
                ms(t)
            } else {
                format!("{} ({n} of {} reached main)", ms(t), pids.len())
            }
        })
    };
    let ratio =
        |p: Option<(f64, usize)>| p.map_or("–".to_string(), |(t, _)| format!("{:.0}×", t / ours));
    println!(
        "| stacks of 64 ranks, merged | {} | {} | {} | {} | {} | {} / {} |",
        ms(ours),
        peer(eu),
        peer(gdb_each),
        peer(gdb),
        ratio(eu),
        ratio(gdb_each),
        ratio(gdb)
    );
    if let (Some((each, _)), Some((all, _))) = (gdb_each, gdb) {
        println!(
            "\nTarget: ≥ 100× faster than gdb: against one gdb per rank {} ({:.0}×); against one gdb for all ranks {} ({:.0}×).",
            verdict(each / ours >= 100.0),
            each / ours,
            verdict(all / ours >= 100.0),
            all / ours
        );
    }
    if let Some((e, _)) = eu {
        println!(
            "Target: faster than eu-stack: {} ({:.1}×).\n",
            verdict(e > ours),
            e / ours
        );
    }
}

/// Symbolisation per distinct build-id: the stacks of the first `n` ranks read with one shared
/// symbol cache (and file cache), for n = 4, 16, 64: the images parsed stay those of one rank
/// (the ranks run the same executable and libraries), and the time per rank falls.
fn scaling(cfg: &Config, tracer: &Tracer, pids: &[u32]) {
    println!(
        "| ranks | images parsed | reused | DWARF loaded | snapshots (all ranks) | unwind + symbols (all ranks) | per rank |"
    );
    println!("|---|---|---|---|---|---|---|");
    for n in [4usize, 16, 64].into_iter().filter(|&n| n <= pids.len()) {
        // Medians of fresh runs: a new cache each time, so each run pays for the parsing once.
        let mut runs: Vec<(f64, f64, mpir_target::unwind::SymbolCacheStats)> = (0..cfg.runs.min(3))
            .map(|_| {
                let files = std::sync::Arc::new(FileCache::new());
                let cache = SymbolCache::new();
                let mut snap_time = 0.0;
                let mut unwind_time = 0.0;
                for &pid in &pids[..n] {
                    let start = Instant::now();
                    let snap =
                        snapshot_live(tracer, pid, DataModel::LP64, &SnapshotOptions::default())
                            .expect("snapshot");
                    snap_time += start.elapsed().as_secs_f64();
                    let start = Instant::now();
                    let images = ProcessImages::for_pid_with_cache(
                        pid,
                        DebugOptions::default(),
                        std::sync::Arc::clone(&files),
                    )
                    .expect("images");
                    let unwinder = Unwinder::with_cache(&images, UnwindOptions::default(), &cache);
                    let stacks = unwinder.thread_stacks(&snap);
                    unwind_time += start.elapsed().as_secs_f64();
                    assert!(
                        stacks
                            .iter()
                            .any(|t| t.frames.iter().any(|f| f.symbol.as_deref() == Some("main"))),
                        "rank pid {pid}: no thread reached main"
                    );
                }
                (snap_time, unwind_time, cache.stats())
            })
            .collect();
        runs.sort_by(|a, b| a.1.total_cmp(&b.1));
        let (snap, unwind, stats) = runs.swap_remove(runs.len() / 2);
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} |",
            stats.images_parsed,
            stats.images_reused,
            stats.dwarf_loaded,
            ms(snap),
            ms(unwind),
            ms((snap + unwind) / n as f64)
        );
    }
    println!(
        "\nThe images parsed do not grow with the ranks: symbolisation costs once per distinct build-id.\n"
    );
}

/// Median and worst stop of `samples` snapshots of `pid`, and its thread count.
fn stop_times(tracer: &Tracer, pid: u32, samples: usize) -> (f64, f64, usize) {
    let mut stops: Vec<f64> = Vec::with_capacity(samples);
    let mut threads = 0;
    for _ in 0..samples {
        let snap = snapshot_live(tracer, pid, DataModel::LP64, &SnapshotOptions::default())
            .expect("snapshot");
        threads = snap.threads.len();
        stops.push(snap.stopped_for.as_secs_f64());
    }
    stops.sort_by(f64::total_cmp);
    (stops[stops.len() / 2], stops[stops.len() - 1], threads)
}

/// A 2-rank Open MPI ring deadlock (`mpir-cli/tests/fixtures/deadlock.c ring`) and the pid of
/// its rank 0, once every rank is in its `MPI_Recv`; killed when the guard drops.
fn polling_rank(dir: &std::path::Path) -> Option<(mpir_benches::stacks::Running, u32)> {
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mpir-cli/tests/fixtures/deadlock.c");
    let exe = dir.join("ring_ompi");
    let built = std::process::Command::new("mpicc.openmpi")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .status()
        .ok()?
        .success();
    if !built {
        return None;
    }
    let pids = dir.join("ring-pids");
    std::fs::create_dir_all(&pids).ok()?;
    let child = std::process::Command::new("orterun")
        .args(["--oversubscribe", "-n", "2"])
        .arg(&exe)
        .arg("ring")
        .arg(&pids)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let ring = mpir_benches::stacks::Running(child);
    let pid_file = pids.join("0.pid");
    for _ in 0..200 {
        if let Ok(text) = std::fs::read_to_string(&pid_file)
            && let Ok(pid) = text.trim().parse::<u32>()
        {
            // Each rank writes its pid just before its MPI_Recv: let them all get in.
            std::thread::sleep(std::time::Duration::from_millis(500));
            return Some((ring, pid));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    None
}
