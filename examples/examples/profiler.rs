//! A profiler: how many messages wait in every rank's queues, sampled periodically.
//!
//! ```text
//! cargo run -p mpir-examples --example profiler -- STARTER_PID [SAMPLES [INTERVAL_MS]]
//! ```
//!
//! Through `mpir_session` only: the job is read from the running starter without touching
//! any rank; each sample holds the ranks just while their queues are read (the first hold
//! proves each one to be the table's rank, later ones check that each pid still names the same
//! process) and lets them run again. The engine is the library's choice (the native walker
//! when the MPI's types are known, else the MPI's message-queue DLL). Prints, per sample and
//! rank, `sample S rank R: sends A receives B unexpected C` (or why it was not read), then a
//! line per rank with the most messages seen waiting.

use std::collections::BTreeMap;
use std::time::Duration;

use mpir_mqd::CommunicatorQueues;
use mpir_session::{Session, SessionOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: profiler STARTER_PID [SAMPLES [INTERVAL_MS]]";
    let pid: u32 = args.first().ok_or(usage)?.parse()?;
    let samples: u32 = args.get(1).map_or(Ok(5), |s| s.parse())?;
    let interval = Duration::from_millis(args.get(2).map_or(Ok(1000), |s| s.parse())?);

    // Whatever happens to this program, the ranks it holds are let go.
    mpir_session::install_cleanup()?;
    let mut session = Session::attach(pid, SessionOptions::default())?;
    let job = session.job().ok_or("no job")?;
    println!(
        "job: starter pid {pid}, {} ranks on {} nodes",
        job.len(),
        job.nodes().len()
    );

    // Per rank: the most sends, receives and unexpected messages seen waiting at once.
    let mut peak: BTreeMap<u64, [usize; 3]> = BTreeMap::new();
    for s in 1..=samples {
        if s > 1 {
            std::thread::sleep(interval);
        }
        let read = session.queues()?;
        let engine = read
            .engine
            .as_ref()
            .map_or("no engine".to_string(), ToString::to_string);
        println!("sample {s} ({engine}, {} ranks)", read.ranks.len());
        for r in &read.ranks {
            let rank = r.rank.map_or("?".to_string(), |n| n.to_string());
            match &r.queues {
                Ok(q) => {
                    let counts = count(&q.communicators);
                    println!(
                        "sample {s} rank {rank}: sends {} receives {} unexpected {}",
                        counts[0], counts[1], counts[2]
                    );
                    if let Some(n) = r.rank {
                        let p = peak.entry(n).or_default();
                        for (p, c) in p.iter_mut().zip(counts) {
                            *p = (*p).max(c);
                        }
                    }
                }
                Err(e) => println!(
                    "sample {s} rank {rank}: not read: {}",
                    mpir_session::chain(e)
                ),
            }
        }
        for line in read.printed.notes() {
            println!("sample {s}: the MPI's DLL printed: {line}");
        }
        for p in &read.release.problems {
            eprintln!("sample {s}: while releasing: {}", mpir_session::chain(p));
        }
    }
    for (rank, [sends, receives, unexpected]) in peak {
        println!("rank {rank} peak: sends {sends} receives {receives} unexpected {unexpected}");
    }
    Ok(())
}

/// Sends, receives and unexpected messages pending over every communicator.
fn count(comms: &[CommunicatorQueues]) -> [usize; 3] {
    comms.iter().fold([0; 3], |[s, r, u], c| {
        [
            s + c.sends.operations().len(),
            r + c.receives.operations().len(),
            u + c.unexpected.operations().len(),
        ]
    })
}
