//! Section `layouts` of `compare` (issue 30): what the shipped Open MPI layouts cost. A 64-rank
//! job of stock Open MPI 4.1.4 (`benches/waits/ranks.c`: one posted receive per rank) is read
//! with the shipped layouts and with the types sidecar they replace
//! (`$MPIR_OMPI_TYPES_SIDECAR`), in the same run: `mpir queues` end to end, and per held rank
//! the proof alone (`layouts::prove_again`) against the raw floor of the reads it makes (the
//! same structs read by `process_vm_readv`, no decoding). gdb has no equivalent: without debug
//! information it cannot decode these structs at all.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::time::Instant;

use mpir_benches::have;
use mpir_mqd::layouts::{self, Expect};
use mpir_session::{Session, SessionOptions};
use mpir_target::{MemoryExt, Target};

use super::waits::compile_c;
use super::waits_reads::median;
use super::{Config, mpir_binary, ms, verdict};

const RANKS: usize = 64;

/// Seconds of one `mpir queues --json --starter PID` (with `extra`), checked: every rank read,
/// and the note says which types were used.
fn queues_once(mpir: &Path, starter: u32, extra: &[&str], shipped: bool) -> f64 {
    let start = Instant::now();
    let out = Command::new(mpir)
        .args(["queues", "--json", "--starter", &starter.to_string()])
        .args(extra)
        .output()
        .expect("run mpir queues");
    let took = start.elapsed().as_secs_f64();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one document");
    let ranks = doc["ranks"].as_array().expect("ranks");
    assert_eq!(ranks.len(), RANKS);
    for r in ranks {
        assert!(r["error"].is_null(), "{r}");
        let noted = r["notes"].to_string().contains("shipped layouts");
        assert_eq!(noted, shipped, "{r}");
    }
    took
}

pub(super) fn layouts(cfg: &Config, dir: &Path) {
    println!("## Shipped Open MPI layouts against the types sidecar\n");
    if !have("orterun") || !have("mpicc.openmpi") {
        println!("Open MPI is not installed: not measured.\n");
        return;
    }
    let Some(sidecar) = std::env::var_os("MPIR_OMPI_TYPES_SIDECAR")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
    else {
        println!("No `$MPIR_OMPI_TYPES_SIDECAR` to compare with: not measured.\n");
        return;
    };
    let Some(exe) = compile_c("mpicc.openmpi", "ranks.c", dir, "layouts_ranks") else {
        println!("mpicc.openmpi failed: not measured.\n");
        return;
    };
    eprintln!("compare: layouts");
    let mpir = mpir_binary();
    let job = super::waits_reads::start(&exe, None);
    let starter = job.0.id();
    let sidecar_arg = sidecar.display().to_string();
    let (mut shipped, mut typed) = (Vec::new(), Vec::new());
    for i in 0..cfg.runs {
        // Taking turns going first.
        if i % 2 == 0 {
            shipped.push(queues_once(&mpir, starter, &[], true));
            typed.push(queues_once(
                &mpir,
                starter,
                &["--types", &sidecar_arg],
                false,
            ));
        } else {
            typed.push(queues_once(
                &mpir,
                starter,
                &["--types", &sidecar_arg],
                false,
            ));
            shipped.push(queues_once(&mpir, starter, &[], true));
        }
    }

    // The proof alone, per held rank, against the raw floor of the structs it reads.
    let options = SessionOptions::default().with_hold_from_acquisition(true);
    let mut session = Session::attach(starter, options).expect("attach the job");
    let held = session.hold().expect("hold the ranks");
    let targets: Vec<(u64, Rc<dyn Target>)> = held
        .ranks()
        .iter()
        .map(|r| {
            (
                r.rank.expect("a rank"),
                Rc::clone(r.target().expect("held")),
            )
        })
        .collect();
    let t0 = Instant::now();
    let chosen = layouts::choose(&*targets[0].1, Expect::nothing()).expect("a set fits");
    let choose_first = t0.elapsed().as_secs_f64();
    let set = &chosen.set;
    let comm = set.get("ompi_communicator_t").expect("type");
    let group = set.get("ompi_group_t").expect("type");
    let (mut proofs, mut floors) = (Vec::new(), Vec::new());
    for (rank, t) in &targets {
        let start = Instant::now();
        let proof =
            layouts::prove_again(&**t, &chosen, Expect::rank(Some(*rank), Some(RANKS as u64)))
                .unwrap_or_else(|e| panic!("rank {rank}: {e}"));
        proofs.push(start.elapsed().as_secs_f64());
        assert_eq!(proof.world_rank, *rank);
        // The floor: the two communicators and the world's group, read raw.
        let start = Instant::now();
        for sym in ["ompi_mpi_comm_world", "ompi_mpi_comm_self"] {
            let s = t.symbol(sym).expect("lookup").expect("symbol");
            let bytes = t.read_vec(s.address, comm.byte_size).expect("read");
            std::hint::black_box(&bytes);
        }
        let g = t
            .read_pointer(
                t.symbol("ompi_mpi_comm_world").unwrap().unwrap().address
                    + comm.member("c_local_group").unwrap().offset,
                "group",
            )
            .expect("read");
        std::hint::black_box(t.read_vec(g, group.byte_size).expect("read"));
        floors.push(start.elapsed().as_secs_f64());
    }
    drop(targets);
    let release = held.release();
    assert!(release.is_clean(), "release: {:?}", release.problems);
    drop(session);
    drop(job);

    let (s, t) = (median(&shipped), median(&typed));
    println!(
        "{RANKS}-rank job of stock Open MPI 4.1.4 (Debian), one receive posted per rank. `mpir \
         queues --json --starter` (release build), medians of {} runs taking turns; every rank \
         read, each noting its types. Per rank: the proof of the chosen set on a held rank \
         (`layouts::prove_again`: identity, both predefined communicators, their groups, ob1's \
         state and list), and the raw floor of reading the two communicators and the world's \
         group (`read_vec`, no decoding). gdb cannot decode these structs without debug \
         information, so it has no column.\n",
        cfg.runs
    );
    println!("| measure | shipped layouts | types sidecar | shipped/sidecar |");
    println!("|---|---|---|---|");
    println!(
        "| `mpir queues`, {RANKS} ranks | {} | {} | {:.2}× |",
        ms(s),
        ms(t),
        s / t
    );
    println!();
    println!("| per rank | proof | raw floor | proof/floor |");
    println!("|---|---|---|---|");
    let (p, f) = (median(&proofs), median(&floors));
    println!("| median | {} | {} | {:.1}× |", ms(p), ms(f), p / f);
    println!(
        "| all {RANKS} ranks | {} | {} | {:.1}× |",
        ms(proofs.iter().sum()),
        ms(floors.iter().sum()),
        proofs.iter().sum::<f64>() / floors.iter().sum::<f64>()
    );
    println!(
        "\nThe first choice (identity, and the proof of each candidate of the release on rank 0): \
         {}.\n",
        ms(choose_first)
    );
    println!(
        "Target: the shipped layouts cost no more than the sidecar end to end (within 10 %): {}.\n",
        verdict(s <= t * 1.10)
    );
}
