//! Section 9 of `compare`, second part: reading the wait-state export of 64 held ranks of an
//! Open MPI job against reading the same ranks' message queues (Open MPI's ob1 walker, with
//! `$MPIR_OMPI_TYPES_SIDECAR` as the types), rank by rank on the same held target.

use std::hint::black_box;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::Instant;

use mpir_benches::have;
use mpir_benches::stacks::Running;
use mpir_mqd::{QueueReader, ReadRank};
use mpir_session::{Engine, ReaderOptions, Session, SessionOptions, read_waits};
use mpir_target::Target;
use mpir_types::waits::{Arg, State};

use super::waits::compile_c;
use super::{Config, ms, verdict};

const RANKS: usize = 64;
/// The tag each rank's pending receive waits for (`benches/waits/ranks.c`).
const TAG: u32 = 29;

/// Starts the 64-rank job of `ranks.c`, with `lib` preloaded in its ranks (`-x LD_PRELOAD`)
/// when given, once every rank has posted its receive and printed its line.
pub(super) fn start(exe: &Path, lib: Option<&Path>) -> Running {
    let mut c = Command::new("orterun");
    c.env_remove("LD_PRELOAD")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(RANKS.to_string());
    if let Some(lib) = lib {
        c.arg("-x").arg(format!("LD_PRELOAD={}", lib.display()));
    }
    c.arg(exe)
        .arg("3600")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut running = Running(c.spawn().expect("start orterun"));
    let mut out = BufReader::new(running.0.stdout.take().expect("stdout"));
    let mut line = String::new();
    for _ in 0..RANKS {
        line.clear();
        out.read_line(&mut line).expect("a rank's line");
    }
    running
}

/// Seconds `f` took.
fn timed<R>(f: impl FnOnce() -> R) -> (f64, R) {
    let start = Instant::now();
    let r = black_box(f());
    (start.elapsed().as_secs_f64(), r)
}

/// The median of `v` (not empty).
pub(super) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// One held rank: its world rank, image and target.
struct Rank {
    rank: u64,
    image: PathBuf,
    target: Rc<dyn Target>,
}

/// The rank's export is recording and shows its pending receive: an active `MPI_Irecv` from
/// its right neighbour with the benchmark's tag.
fn check_waits(r: &Rank) {
    let w = read_waits(&*r.target, None)
        .unwrap_or_else(|e| panic!("rank {}: {e}", r.rank))
        .unwrap_or_else(|| panic!("rank {}: no wait-state export", r.rank));
    assert_eq!(w.header.state, State::Recording, "rank {}", r.rank);
    let right = u32::try_from((r.rank + 1) % RANKS as u64).expect("a rank");
    assert!(
        w.requests.iter().any(|q| q.active
            && q.kind.name() == Some("MPI_Irecv")
            && q.peer == Arg::Value(right)
            && q.tag == Arg::Value(TAG)),
        "rank {}: no pending MPI_Irecv in {:?}",
        r.rank,
        w.requests
    );
}

/// The rank's queues have its pending receive.
fn check_queues(r: &Rank, q: &mpir_mqd::RankQueues) {
    let posted: usize = q
        .communicators
        .iter()
        .map(|c| match &c.receives {
            mpir_mqd::Queue::Operations(v) => v.len(),
            _ => 0,
        })
        .sum();
    assert!(
        posted >= 1,
        "rank {}: no posted receive in its queues",
        r.rank
    );
}

/// Per rank and method, the first read's time and every later read's times.
#[derive(Default)]
struct Times {
    first: Vec<f64>,
    again: Vec<f64>,
    /// Each later pass over all ranks, summed.
    passes: Vec<f64>,
}

pub(super) fn reads_64(cfg: &Config, dir: &Path, lib: &Path) {
    println!("### Reading the wait-states of {RANKS} local ranks against reading their queues\n");
    if !have("orterun") || !have("mpicc.openmpi") {
        println!("Open MPI is not installed: not measured.\n");
        return;
    }
    let Some(sidecar) = std::env::var_os("MPIR_OMPI_TYPES_SIDECAR")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    else {
        println!(
            "No Open MPI types sidecar (`$MPIR_OMPI_TYPES_SIDECAR`, \
             `scripts/openmpi-types-sidecar.sh`): not measured.\n"
        );
        return;
    };
    let Some(exe) = compile_c("mpicc.openmpi", "ranks.c", dir, "waits_ranks") else {
        println!("mpicc.openmpi failed: not measured.\n");
        return;
    };
    eprintln!("compare: waits reads");
    let job = start(&exe, Some(lib));
    let passes = if cfg.quick { 3 } else { 9 };
    let options = SessionOptions::default()
        .with_types_sidecar(&sidecar)
        .with_hold_from_acquisition(true);
    let mut session = Session::attach(job.0.id(), options).expect("attach the job");
    let held = session.hold().expect("hold the ranks");
    let pids: Vec<u32> = held.ranks().iter().map(|r| r.pid).collect();
    let ranks: Vec<Rank> = held
        .ranks()
        .iter()
        .map(|r| Rank {
            rank: r.rank.expect("a world rank"),
            image: r.image.clone(),
            target: Rc::clone(r.target().expect("a held rank")),
        })
        .collect();
    assert_eq!(ranks.len(), RANKS, "every rank held");
    let options = ReaderOptions::default().with_engine(Engine::Native);
    let (open, reader) = timed(|| QueueReader::open(&*ranks[0].target, options));
    let mut reader = reader.expect("the native walker recognises Open MPI's ob1");
    let engine = reader.engine();
    let mut read_queues = |r: &Rank| {
        reader
            .read(
                &ReadRank::new(Some(r.rank), r.image.clone()),
                Rc::clone(&r.target),
            )
            .unwrap_or_else(|e| panic!("rank {}: queues: {e}", r.rank))
    };

    let (mut waits, mut queues) = (Times::default(), Times::default());
    // First reads (each target looks its symbols up): the two methods take turns going first,
    // rank by rank, so that neither always pays for what they share. Checked afterwards.
    for (i, r) in ranks.iter().enumerate() {
        let (tw, tq, q) = if i % 2 == 0 {
            let (tw, _) = timed(|| read_waits(&*r.target, None));
            let (tq, q) = timed(|| read_queues(r));
            (tw, tq, q)
        } else {
            let (tq, q) = timed(|| read_queues(r));
            let (tw, _) = timed(|| read_waits(&*r.target, None));
            (tw, tq, q)
        };
        waits.first.push(tw);
        queues.first.push(tq);
        check_waits(r);
        check_queues(r, &q);
    }
    for pass in 0..passes {
        let (mut sw, mut sq) = (0.0, 0.0);
        for r in &ranks {
            let (tw, tq) = if pass % 2 == 0 {
                (
                    timed(|| read_waits(&*r.target, None)).0,
                    timed(|| read_queues(r)).0,
                )
            } else {
                let tq = timed(|| read_queues(r)).0;
                (timed(|| read_waits(&*r.target, None)).0, tq)
            };
            waits.again.push(tw);
            queues.again.push(tq);
            sw += tw;
            sq += tq;
        }
        waits.passes.push(sw);
        queues.passes.push(sq);
    }
    drop(reader);
    drop(ranks);
    let release = held.release();
    drop(session);
    assert!(release.is_clean(), "release: {:?}", release.problems);
    let stuck = left_stopped_or_traced(&pids);
    assert!(stuck.is_empty(), "ranks left stopped or traced: {stuck:?}");
    drop(job);

    println!(
        "{RANKS}-rank Open MPI job, every rank with the library preloaded and one receive \
         posted, then asleep outside MPI; all ranks held (stopped) while read. Wait-states: \
         `mpir_session::read_waits`; queues: `QueueReader::read` with the native engine ({engine}, \
         opened once: {}, not counted). Per-rank medians; \"read again\": {passes} more passes \
         over every rank, the methods taking turns going first.\n",
        ms(open)
    );
    println!("| read | wait-states | queues | wait-states/queues |");
    println!("|---|---|---|---|");
    let row = |what: &str, w: f64, q: f64| {
        println!("| {what} | {} | {} | {:.2}× |", ms(w), ms(q), w / q);
        w / q
    };
    let sum = |v: &[f64]| v.iter().sum::<f64>();
    let r1 = row(
        "one rank, first read (symbols looked up)",
        median(&waits.first),
        median(&queues.first),
    );
    let r2 = row(
        "one rank, read again",
        median(&waits.again),
        median(&queues.again),
    );
    let r3 = row(
        &format!("all {RANKS} ranks, first read"),
        sum(&waits.first),
        sum(&queues.first),
    );
    let r4 = row(
        &format!("all {RANKS} ranks, read again (median of {passes} passes)"),
        median(&waits.passes),
        median(&queues.passes),
    );
    let worst = r1.max(r2).max(r3).max(r4);
    println!(
        "\nChecked: every rank's export was recording and showed its pending `MPI_Irecv` \
         (peer, tag), its queues the posted receive; afterwards every rank was released, none \
         left stopped or traced.\n"
    );
    println!(
        "Target: wait-states no slower than queues: {} (worst {worst:.2}×).\n",
        verdict(worst <= 1.0)
    );
}

/// The pids among `pids` still stopped (`T`/`t`) or traced, once the release has had a
/// moment (up to a second) to take effect.
fn left_stopped_or_traced(pids: &[u32]) -> Vec<u32> {
    let bad = |pid: &u32| {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return false; // gone: nothing left held
        };
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(str::trim)
                .unwrap_or("")
                .to_string()
        };
        field("State:").starts_with(['T', 't']) || field("TracerPid:") != "0"
    };
    for _ in 0..20 {
        let left: Vec<u32> = pids.iter().filter(|p| bad(p)).copied().collect();
        if left.is_empty() {
            return left;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    pids.iter().filter(|p| bad(p)).copied().collect()
}
