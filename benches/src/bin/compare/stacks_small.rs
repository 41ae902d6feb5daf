//! Section `stacks-small` of `compare`: the fixed cost of a one-shot `mpir stacks --json
//! --starter PID` on small running Open MPI jobs (4, 16 and 32 ranks), where a process start,
//! the acquisition and the symbols of every image are paid for a handful of ranks, against the
//! same ranks' stacks by gdb and eu-stack in the same run.
//!
//! `mpir stacks` is timed end to end (spawn to exit, its document read from a pipe and checked
//! to have every rank, each reaching `main`) in two states of the persistent symbol cache:
//! cold (`MPIR_SYMBOL_CACHE` a fresh empty directory for each run) and warm (one directory a
//! first, unmeasured run filled), alternating. The peers: one `gdb -p PID -batch -ex 'thread
//! apply all bt'` per rank, one after the other (measured on 4 ranks of each job and scaled
//! per rank past that: gdb takes about half a second per rank), and `eu-stack -p` on each rank
//! in turn. For 4 ranks, a breakdown: the process's own start, and the acquisition, the read
//! and the release done in process by `mpir-session`.

use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::Instant;

use mpir_benches::backtraces::{eu_stack_all, gdb_each};
use mpir_benches::have;
use mpir_benches::stacks::running_job;
use mpir_session::{Session, SessionOptions, StackOptions};
use mpir_types::ranks::RankSet;
use serde_json::Value;

use super::stacks::rank_pids;
use super::{Config, mpir_binary, ms, run_to_end, verdict};

/// The job sizes, in ranks.
const SIZES: [usize; 3] = [4, 16, 32];

/// gdb is run on this many ranks of each job; past that its total is scaled per rank.
const GDB_RANKS: usize = 4;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Checks one `mpir.stacks` document of an `n`-rank job: every rank read, none unreached, and
/// every rank's stack reaching `main`. Returns the ranks' stops of the last sample, summed, in
/// seconds.
fn check(out: &[u8], n: usize) -> f64 {
    let text = String::from_utf8_lossy(out);
    let doc: Value = serde_json::from_slice(out)
        .unwrap_or_else(|e| panic!("mpir stacks printed no JSON ({e}): {text:.2000}"));
    assert!(
        doc["schema"]
            .as_str()
            .is_some_and(|s| s.starts_with("mpir.stacks/")),
        "not a stacks document: {text:.2000}"
    );
    assert_eq!(
        doc["coverage"]["read"].as_u64(),
        Some(n as u64),
        "every rank read: {text:.2000}"
    );
    assert_eq!(
        doc["unreached"].as_array().map(Vec::len),
        Some(0),
        "no rank unreached: {text:.2000}"
    );
    let in_main = doc["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|node| node["function"] == "main")
        .filter_map(|node| node["ranks"].as_str()?.parse::<RankSet>().ok())
        .fold(RankSet::new(), |all, r| all.union(&r));
    assert_eq!(
        in_main.count_within(n as u64),
        n as u64,
        "not every rank reached main: {text:.2000}"
    );
    doc["stops"]
        .as_array()
        .and_then(|samples| samples.last())
        .and_then(Value::as_array)
        .map_or(0.0, |stops| {
            stops
                .iter()
                .filter_map(|s| s["stopped_us"].as_f64())
                .sum::<f64>()
                / 1e6
        })
}

/// One `mpir stacks --json --starter PID` with `MPIR_SYMBOL_CACHE=cache`, spawn to exit, its
/// document checked (after the clock stopped): seconds, and the ranks' summed stop.
fn stacks_once(mpir: &Path, starter: u32, n: usize, cache: &OsStr) -> (f64, f64) {
    let mut cmd = Command::new(mpir);
    cmd.args(["stacks", "--json", "--starter", &starter.to_string()])
        .env("MPIR_SYMBOL_CACHE", cache);
    let (took, out) = run_to_end(&mut cmd, true);
    (took, check(&out, n))
}

/// Files and bytes under `dir`.
fn contents(dir: &Path) -> (usize, u64) {
    let mut files = 0;
    let mut bytes = 0;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            match entry.metadata() {
                Ok(m) if m.is_dir() => todo.push(entry.path()),
                Ok(m) => {
                    files += 1;
                    bytes += m.len();
                }
                Err(_) => {}
            }
        }
    }
    (files, bytes)
}

/// Whether `pid` is gone (or a zombie waiting for its parent).
fn gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X'))
    })
}

/// After the job's starter was killed: waits up to 5 s for its ranks `pids` to exit, then
/// kills those still there (by pid) and says so.
fn reap(pids: &[u32]) {
    for _ in 0..100 {
        if pids.iter().all(|&p| gone(p)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let left: Vec<u32> = pids.iter().copied().filter(|&p| !gone(p)).collect();
    eprintln!("compare: stacks-small: ranks {left:?} outlived their starter: killed");
    for p in left {
        if let Ok(p) = i32::try_from(p) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(p),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// One size's results.
struct Row {
    ranks: usize,
    cold: f64,
    warm: f64,
    /// Total, and the ranks that reached `main`.
    eu: Option<(f64, usize)>,
    /// Total over every rank (scaled past [`GDB_RANKS`]), ranks measured, and how many of them
    /// reached `main`.
    gdb: Option<(f64, usize, usize)>,
    /// Files and bytes in the warm cache after its first run.
    cache: (usize, u64),
}

pub(super) fn stacks_small(cfg: &Config, dir: &Path) {
    println!("## `mpir stacks` one-shot on small jobs (fixed cost), Open MPI\n");
    let Some(program) = super::ompi_ranks_program(dir, "ranks_ompi_small") else {
        return;
    };
    let mpir = mpir_binary();
    let runs = if cfg.quick { 5 } else { 11 };
    let gdb = cfg.gdb && have("gdb");
    let mut rows = Vec::new();
    let mut breakdown = None;
    for n in SIZES {
        eprintln!("compare: stacks-small {n}");
        let running = running_job(&program, n);
        let starter = running.0.id();
        let pids = rank_pids(starter);
        assert_eq!(pids.len(), n, "the job's table");

        // The warm cache: filled by a first run, unmeasured (its document checked too).
        let warm_dir = dir.join(format!("symbol-cache-warm-{n}"));
        std::fs::create_dir_all(&warm_dir).expect("create the warm cache directory");
        stacks_once(&mpir, starter, n, warm_dir.as_os_str());
        let cache = contents(&warm_dir);
        let mut cold = Vec::with_capacity(runs);
        let mut warm = Vec::with_capacity(runs);
        let mut stops = Vec::with_capacity(runs);
        for i in 0..runs {
            let cold_dir = dir.join(format!("symbol-cache-cold-{n}-{i}"));
            std::fs::create_dir_all(&cold_dir).expect("create a cold cache directory");
            // Alternating which goes first, so that neither always follows the other.
            let mut one_cold = || cold.push(stacks_once(&mpir, starter, n, cold_dir.as_os_str()).0);
            if i % 2 == 0 {
                one_cold();
            }
            let (t, s) = stacks_once(&mpir, starter, n, warm_dir.as_os_str());
            warm.push(t);
            stops.push(s);
            if i % 2 == 1 {
                one_cold();
            }
            let _ = std::fs::remove_dir_all(&cold_dir);
        }
        let cold = median(&mut cold);
        let warm = median(&mut warm);
        let stopped = median(&mut stops);

        let eu = have("eu-stack").then(|| {
            let mut r: Vec<(f64, usize)> = (0..cfg.gdb_runs)
                .map(|_| {
                    let r = eu_stack_all(&pids).expect("eu-stack");
                    (r.took.as_secs_f64(), r.with_main)
                })
                .collect();
            r.sort_by(|a, b| a.0.total_cmp(&b.0));
            r[r.len() / 2]
        });
        let gdb = gdb.then(|| {
            let measured = &pids[..n.min(GDB_RANKS)];
            let mut r: Vec<(f64, usize)> = (0..cfg.gdb_runs)
                .map(|_| {
                    let r = gdb_each(measured, &[]).expect("gdb");
                    (r.took.as_secs_f64(), r.with_main)
                })
                .collect();
            r.sort_by(|a, b| a.0.total_cmp(&b.0));
            let (t, with_main) = r[r.len() / 2];
            (
                t * n as f64 / measured.len() as f64,
                measured.len(),
                with_main,
            )
        });
        if n == SIZES[0] {
            breakdown = Some(parts(&mpir, starter, n, runs, cold, stopped));
        }
        let _ = std::fs::remove_dir_all(&warm_dir);
        drop(running);
        reap(&pids);
        rows.push(Row {
            ranks: n,
            cold,
            warm,
            eu,
            gdb,
            cache,
        });
    }

    println!(
        "| ranks | mpir cold | mpir warm | eu-stack (all ranks) | gdb per rank (all ranks) | gdb/mpir cold | gdb/mpir warm | eu-stack/mpir warm |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut worst = (f64::INFINITY, f64::INFINITY);
    for r in &rows {
        let eu = r.eu.map_or("–".to_string(), |(t, k)| {
            if k == r.ranks {
                ms(t)
            } else {
                format!("{} ({k} of {} reached main)", ms(t), r.ranks)
            }
        });
        let gdb_cell = r.gdb.map_or("–".to_string(), |(t, m, k)| {
            let mut s = ms(t);
            if m < r.ranks {
                s.push_str(&format!(" ({m} ranks measured, scaled)"));
            }
            if k < m {
                s.push_str(&format!(" ({k} of {m} reached main)"));
            }
            s
        });
        if let Some((g, _, _)) = r.gdb {
            worst = (worst.0.min(g / r.cold), worst.1.min(g / r.warm));
        }
        println!(
            "| {} | {} | {} | {eu} | {gdb_cell} | {} | {} | {} |",
            r.ranks,
            ms(r.cold),
            ms(r.warm),
            r.gdb
                .map_or("–".into(), |(g, _, _)| format!("{:.0}×", g / r.cold)),
            r.gdb
                .map_or("–".into(), |(g, _, _)| format!("{:.0}×", g / r.warm)),
            r.eu.map_or("–".into(), |(e, _)| format!("{:.1}×", e / r.warm)),
        );
    }
    println!(
        "\nMedians of {runs} runs of `mpir stacks --json --starter PID` (spawn to exit, every rank \
         checked to reach `main`), cold and warm alternating; cold: `MPIR_SYMBOL_CACHE` a fresh \
         empty directory per run, warm: one directory filled by a first, unmeasured run (the \
         operating system's page cache is warm in both). gdb: one `gdb -p PID -batch -ex 'thread \
         apply all bt'` per rank in turn, on {GDB_RANKS} ranks of each job, scaled per rank past \
         that; eu-stack: `eu-stack -p` on every rank in turn; medians of {} runs.",
        cfg.gdb_runs
    );
    let filled: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{} ranks: {} files, {} bytes",
                r.ranks, r.cache.0, r.cache.1
            )
        })
        .collect();
    println!(
        "The warm cache after its first run: {}{}.",
        filled.join("; "),
        if rows.iter().all(|r| r.cache.0 == 0) {
            " (nothing written: this `mpir` has no persistent symbol cache, cold and warm are the same)"
        } else {
            ""
        }
    );
    if worst.0.is_finite() {
        println!(
            "\nTarget (the issue's): ≥ 100× faster than gdb at every size: cold {} (worst {:.0}×), warm {} (worst {:.0}×).\n",
            verdict(worst.0 >= 100.0),
            worst.0,
            verdict(worst.1 >= 100.0),
            worst.1
        );
    } else {
        println!(
            "\nTarget (the issue's): ≥ 100× faster than gdb at every size: not measured (no gdb).\n"
        );
    }
    if let Some(b) = breakdown {
        println!("{b}");
    }
}

/// The breakdown of one `n`-rank read (the first size): the process's start alone, the
/// acquisition, read and release in process (`mpir-session`, as the tool calls it), the ranks'
/// stops, and `mpir stacks` with the persistent cache off; as a Markdown table.
fn parts(mpir: &Path, starter: u32, n: usize, runs: usize, cold: f64, stopped: f64) -> String {
    let start = median(
        &mut (0..runs)
            .map(|_| run_to_end(Command::new(mpir).arg("--version"), false).0)
            .collect::<Vec<_>>(),
    );
    let mut attach = Vec::with_capacity(runs);
    let mut read = Vec::with_capacity(runs);
    let mut release = Vec::with_capacity(runs);
    let mut sample = Vec::with_capacity(runs);
    for _ in 0..runs {
        let t = Instant::now();
        let options = SessionOptions::default().with_hold_from_acquisition(true);
        let mut session = Session::attach(starter, options).expect("attach the job");
        attach.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let stacks = session
            .stacks(&StackOptions::default())
            .expect("read the stacks");
        read.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        drop(session);
        release.push(t.elapsed().as_secs_f64());
        let last = stacks.last();
        assert_eq!(last.ranks.len(), n, "every rank read in process");
        assert!(last.unreached.is_empty(), "{:?}", last.unreached);
        sample.push(last.elapsed.as_secs_f64());
    }
    let off = median(
        &mut (0..runs)
            .map(|_| stacks_once(mpir, starter, n, OsStr::new("off")).0)
            .collect::<Vec<_>>(),
    );
    let (attach, read, release, sample) = (
        median(&mut attach),
        median(&mut read),
        median(&mut release),
        median(&mut sample),
    );
    let rest = cold - start - attach - read - release;
    let mut t = format!("Where the time of {n} ranks goes (medians of {runs} runs):\n\n");
    t.push_str("| part | time |\n|---|---|\n");
    for (what, v) in [
        (
            "`mpir --version`, spawn to exit (the process's own start and exit)",
            start,
        ),
        (
            "acquisition: the table read, every rank attached and proven (`Session::attach`, in process)",
            attach,
        ),
        (
            "the read: snapshots, unwinding, symbols, the tree (`Session::stacks`, in process, new caches)",
            read,
        ),
        (
            "… of which the sample itself (`StackSample::elapsed`)",
            sample,
        ),
        (
            "… of which the ranks were stopped (the document's `stops`, summed, warm runs)",
            stopped,
        ),
        ("release (`Session` dropped, in process)", release),
        (
            "the rest of `mpir stacks` cold (document, output; cold minus the rows above)",
            rest,
        ),
        (
            "`mpir stacks` with `MPIR_SYMBOL_CACHE=off`, end to end",
            off,
        ),
        ("`mpir stacks` cold, end to end", cold),
    ] {
        t.push_str(&format!("| {what} | {} |\n", ms(v)));
    }
    t
}
