//! `deadlock`: who waits for whom across the ranks, and whether it is a cycle. The queues are
//! sampled several times, the ranks held only while each sample is read; a cycle is reported
//! only when the same pending operations form it in every sample (a progressing job never
//! shows the same ones twice).

use std::cell::RefCell;
use std::collections::HashMap;
use std::process::ExitCode;
use std::rc::Rc;
use std::time::Duration;

use mpir_mqd::CommunicatorQueues;
use mpir_target::Target;
use mpir_types::deadlock::{self, CommQueues, DeadlockReport, JobSnapshot, RankQueues};
use serde::Serialize;

use crate::queues::{self, EngineChoice, Held, RankArgs, RankProc, ReaderArgs};
use crate::{Common, chain};
use mpir_target::debuginfo::DebugOptions;

/// Exit status when a cycle is found.
pub(crate) const CYCLE: u8 = 3;

/// `schema` of a deadlock document (docs/cli-json.md).
pub(crate) const DEADLOCK_SCHEMA: &str = "mpir.deadlock/1";

#[derive(clap::Args)]
pub(crate) struct DeadlockArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) ranks: RankArgs,
    #[command(flatten)]
    pub(crate) reader: ReaderArgs,
    /// Snapshots to compare (1 reports a potential deadlock from a single instant).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) samples: u32,
    /// Time between snapshots, in milliseconds.
    #[arg(long, default_value_t = 150)]
    pub(crate) interval_ms: u64,
    /// Print the wait-for graph in Graphviz DOT instead (`| dot -Tsvg > waits.svg`).
    #[arg(long, conflicts_with = "json")]
    pub(crate) dot: bool,
}

#[derive(Serialize)]
pub(crate) struct DeadlockDoc<'a> {
    pub(crate) schema: &'static str,
    pub(crate) engine: String,
    /// Ranks that could not be read in some sample (the analysis treats them as progressing).
    pub(crate) unread: Vec<String>,
    #[serde(flatten)]
    pub(crate) report: &'a DeadlockReport,
}

/// The analysis input from one sample's queues.
pub(crate) fn snapshot(ranks: &[(Option<u64>, u32, Vec<CommunicatorQueues>)]) -> JobSnapshot {
    JobSnapshot {
        ranks: ranks
            .iter()
            .filter_map(|(rank, pid, comms)| {
                Some(RankQueues {
                    rank: (*rank)?,
                    pid: Some(i64::from(*pid)),
                    communicators: comms.iter().map(comm_queues).collect(),
                })
            })
            .collect(),
    }
}

fn comm_queues(c: &CommunicatorQueues) -> CommQueues {
    let mut q = CommQueues::new(
        c.communicator.unique_id,
        c.communicator.name.clone(),
        u64::try_from(c.communicator.size).unwrap_or(0),
        u64::try_from(c.communicator.local_rank).unwrap_or(u64::MAX),
    );
    q.context_id = c.context_id;
    q.internal = c.origin == mpir_mqd::CommOrigin::Internal;
    q.group = c
        .group
        .as_ref()
        .and_then(|g| g.iter().map(|&r| u64::try_from(r).ok()).collect());
    q.operations = [&c.sends, &c.receives, &c.unexpected]
        .iter()
        .flat_map(|queue| queue.operations().iter().cloned())
        .collect();
    q
}

pub(crate) fn run(args: &DeadlockArgs) -> Result<ExitCode, String> {
    let (debug, choice) = args.reader.prepare(&args.common)?;
    let timeout = Duration::from_secs(args.ranks.timeout);
    // The ranks: from the starter's table once (then by pid for every sample).
    let (held, ranks) = queues::hold_ranks(args.ranks.starter, &args.ranks.pids, &debug, timeout)?;
    let sampled = sample(
        held,
        ranks,
        &choice,
        &debug,
        args.samples,
        Duration::from_millis(args.interval_ms),
    )?;
    let (engine, report, unread) = (sampled.engine, sampled.report, sampled.unread);
    if args.dot {
        out!("{}", report.to_dot());
    } else if args.common.json {
        let doc = DeadlockDoc {
            schema: DEADLOCK_SCHEMA,
            engine,
            unread,
            report: &report,
        };
        outln!(
            "{}",
            serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?
        );
    } else {
        outln!("wait-for analysis ({engine}), {} ranks", report.ranks);
        out!("{report}");
        for u in &unread {
            outln!("not read: {u}");
        }
    }
    Ok(if report.has_cycle() {
        ExitCode::from(CYCLE)
    } else {
        ExitCode::SUCCESS
    })
}

/// What [`sample`] found.
pub(crate) struct Sampled {
    /// The reader used.
    pub(crate) engine: String,
    /// The analysis over every sample.
    pub(crate) report: DeadlockReport,
    /// Ranks not read in some sample, and release problems.
    pub(crate) unread: Vec<String>,
}

/// Reads `samples` snapshots of the queues of `ranks` (the first while `held`, the others
/// holding the ranks again by pid), `interval` apart, releasing the ranks after each, and
/// confirms the cycles across them.
pub(crate) fn sample(
    held: Held,
    mut ranks: Vec<RankProc>,
    choice: &EngineChoice<'_>,
    debug: &DebugOptions,
    samples: u32,
    interval: Duration,
) -> Result<Sampled, String> {
    // Each rank's images are parsed once, for every sample (memory is read afresh each time).
    let live = queues::live_opener(debug);
    let cache: RefCell<HashMap<u32, Rc<dyn Target>>> = RefCell::default();
    let opener = |r: &RankProc| -> Result<Rc<dyn Target>, String> {
        if let Some(t) = cache.borrow().get(&r.pid) {
            return Ok(Rc::clone(t));
        }
        let t = live(r)?;
        cache.borrow_mut().insert(r.pid, Rc::clone(&t));
        Ok(t)
    };
    let mut snapshots = Vec::new();
    let mut unread = Vec::new();
    let mut engine = String::new();
    let mut held = Some(held);
    for i in 0..samples.max(1) {
        if i > 0 {
            std::thread::sleep(interval);
            let pids: Vec<u32> = ranks
                .iter()
                .filter(|r| r.unreadable.is_none())
                .map(|r| r.pid)
                .collect();
            let (h, again) = queues::hold_ranks(None, &pids, debug, interval)?;
            held = Some(h);
            // Keep the job's rank numbers; take this sample's readability.
            for r in &mut ranks {
                if let Some(a) = again.iter().find(|a| a.pid == r.pid) {
                    r.unreadable.clone_from(&a.unreadable);
                }
            }
        }
        let result = queues::read_queues_raw(choice, &ranks, &opener);
        let problems = held.take().map(Held::release).unwrap_or_default();
        let (name, read) = result?;
        engine = name;
        for p in problems {
            unread.push(format!("sample {}: while releasing: {p}", i + 1));
        }
        let mut sample = Vec::new();
        for (r, outcome) in ranks.iter().zip(read) {
            match outcome {
                Ok((rank, q)) => sample.push((rank.or(r.rank), r.pid, q.communicators)),
                Err(e) => unread.push(format!(
                    "sample {}: rank {} (pid {}): {e}",
                    i + 1,
                    r.rank.map_or("?".into(), |r| r.to_string()),
                    r.pid
                )),
            }
        }
        snapshots.push(snapshot(&sample));
    }
    let report = deadlock::confirm(&snapshots).map_err(|e| chain(&e))?;
    Ok(Sampled {
        engine,
        report,
        unread,
    })
}
