//! Section 9 of `compare`: the wait-state library (issue 29). What the library costs the job
//! (`benches/waits/pingpong.c`, with and without it in `LD_PRELOAD`, on MPICH and Open MPI),
//! and what reading its export costs a tool against reading the same ranks' queues
//! (`waits_reads.rs`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mpir_benches::have;

use super::{Config, verdict};

/// The target: the library adds at most this much to an MPI call.
const TARGET_ADDED: f64 = 0.02;

pub(super) fn waits(cfg: &Config, dir: &Path) {
    println!("## The wait-state library (issue 29)\n");
    let lib = match mpir_waits::library() {
        Ok(lib) => lib,
        Err(e) => {
            println!("The library could not be written out ({e}): not measured.\n");
            return;
        }
    };
    overhead(cfg, dir, &lib);
    super::waits_reads::reads_64(cfg, dir, &lib);
}

/// A stack the ping-pong runs on.
struct PingPong {
    name: &'static str,
    cc: &'static str,
    run: &'static str,
}

const STACKS: [PingPong; 2] = [
    PingPong {
        name: "mpich",
        cc: "mpicc.mpich",
        run: "mpiexec.hydra",
    },
    PingPong {
        name: "openmpi",
        cc: "mpicc.openmpi",
        run: "orterun",
    },
];

/// `benches/waits/<file>` compiled with `cc` (`-O2`, the library's header on the include
/// path) into `dir/name`.
pub(super) fn compile_c(cc: &str, file: &str, dir: &Path, name: &str) -> Option<PathBuf> {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let exe = dir.join(name);
    Command::new(cc)
        .arg("-O2")
        .arg("-I")
        .arg(here.join("../mpir-waits/lib"))
        .arg(here.join("waits").join(file))
        .arg("-o")
        .arg(&exe)
        .stdout(Stdio::null())
        .status()
        .ok()?
        .success()
        .then_some(exe)
}

/// One 2-rank run of the ping-pong of `n` round trips, with `lib` preloaded in the ranks or
/// not: nanoseconds per round trip as rank 0 timed them, after checking (untimed, the program
/// reads it once its loop is done) that the library recorded at least the loop's calls, or
/// was absent.
fn ping_pong(st: &PingPong, exe: &Path, n: u64, lib: Option<&Path>) -> f64 {
    let mut c = Command::new(st.run);
    // Whatever this process was started with, the ranks get the library only when asked.
    c.env_remove("LD_PRELOAD");
    if st.run == "orterun" {
        c.arg("--allow-run-as-root")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    c.args(["-n", "2"]);
    if let Some(lib) = lib {
        if st.run == "orterun" {
            c.arg("-x").arg(format!("LD_PRELOAD={}", lib.display()));
        } else {
            c.arg("-genv").arg("LD_PRELOAD").arg(lib);
        }
    }
    let out = c
        .arg(exe)
        .arg(n.to_string())
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("run the ping-pong");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{c:?}: {}: {text}", out.status);
    let line = text
        .lines()
        .find(|l| l.starts_with("ns_per_round_trip="))
        .unwrap_or_else(|| panic!("{c:?}: no result in {text:?}"));
    let field = |key: &str| {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key} in {line:?}"))
    };
    let ns: f64 = field("ns_per_round_trip=").parse().expect("a number");
    match lib {
        None => assert_eq!(field("waits="), "absent", "{line}"),
        Some(_) => {
            assert_eq!(field("waits="), "recording", "{}: {line}", st.name);
            let calls: u64 = field("calls=").parse().expect("a count");
            assert!(
                calls >= 2 * n,
                "{}: recorded {calls} calls: {line}",
                st.name
            );
        }
    }
    ns
}

fn median_of(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn overhead(cfg: &Config, dir: &Path, lib: &Path) {
    let n: u64 = if cfg.quick { 200_000 } else { 1_000_000 };
    let runs = if cfg.quick { 3 } else { 5 };
    println!("### Overhead per MPI call: 8-byte ping-pong between 2 ranks of one node\n");
    println!(
        "{n} round trips per run (each is an `MPI_Send` and an `MPI_Recv` in each rank), timed by \
         rank 0 with `MPI_Wtime`; median of {runs} runs with and {runs} without the library, \
         interleaved. The floor is the same program without the library.\n"
    );
    println!(
        "| stack | without (floor), per round trip | with the library | added per round trip | added per MPI call | added |"
    );
    println!("|---|---|---|---|---|---|");
    let mut notes = Vec::new();
    for st in &STACKS {
        if !have(st.cc) || !have(st.run) {
            println!("| {} | not installed | | | | |", st.name);
            continue;
        }
        let Some(exe) = compile_c(st.cc, "pingpong.c", dir, &format!("pingpong_{}", st.name))
        else {
            println!("| {} | {} failed | | | | |", st.name, st.cc);
            continue;
        };
        eprintln!("compare: waits overhead {}", st.name);
        let (mut without, mut with) = (Vec::new(), Vec::new());
        for i in 0..runs {
            // ABBA: neither side always runs first.
            if i % 2 == 0 {
                without.push(ping_pong(st, &exe, n, None));
                with.push(ping_pong(st, &exe, n, Some(lib)));
            } else {
                with.push(ping_pong(st, &exe, n, Some(lib)));
                without.push(ping_pong(st, &exe, n, None));
            }
        }
        let (without, with) = (median_of(without), median_of(with));
        let added = with - without;
        // Each rank makes 2 recorded calls per round trip: the whole difference is put on them.
        let per_call = added / 2.0;
        let share = added / without;
        println!(
            "| {} | {without:.0} ns | {with:.0} ns | {added:+.1} ns | {per_call:+.1} ns | {:+.2}% |",
            st.name,
            share * 100.0
        );
        notes.push(format!(
            "- {}: added ≤ {:.0}% per MPI call: {} ({:+.2}%, {per_call:+.1} ns per call)",
            st.name,
            TARGET_ADDED * 100.0,
            verdict(share <= TARGET_ADDED),
            share * 100.0
        ));
    }
    println!(
        "\nChecked in every run: with the library, rank 0's export was recording and had counted \
         at least the loop's 2×{n} calls; without it, the process had no `mpir_waits` symbol.\n"
    );
    for n in notes {
        println!("{n}");
    }
    println!();
}
