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
use mpir_types::deadlock::{self, DeadlockReport, JobSnapshot};

use crate::render::deadlock::{DEADLOCK_SCHEMA, DeadlockDoc, ReportOut};
use serde::Serialize;

use crate::cmd::queues::{self, EngineChoice, Held, RankArgs, RankProc, ReaderArgs};
use crate::{Common, chain};
use mpir_target::debuginfo::DebugOptions;

/// Exit status when a cycle is found.
pub(crate) const CYCLE: u8 = 3;

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

/// A rank the analysis could not cover, and why.
#[derive(Serialize, Clone, Debug)]
pub(crate) struct UnreadRank {
    pub(crate) rank: Option<u64>,
    pub(crate) pid: u32,
    pub(crate) reason: String,
}

/// Which ranks a verdict rests on: a verdict is only about the ranks read.
#[derive(Serialize, Clone, Debug)]
pub(crate) struct Coverage {
    /// Ranks asked for (the job's, or the pids named).
    pub(crate) ranks: usize,
    /// Ranks read in every sample: the verdict covers these only.
    pub(crate) read: usize,
    /// Whether every rank asked for was read.
    pub(crate) complete: bool,
    /// The others, with the first reason each could not be read.
    pub(crate) not_read: Vec<UnreadRank>,
    /// The ranks asked for, when `--ranks` chose some (the others were not looked at).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) selection: Option<String>,
}

impl Coverage {
    /// From each rank's outcome over the samples: `None` when read in every sample, else why
    /// not (the first reason).
    pub(crate) fn of(ranks: &[RankProc], outcomes: &[Option<String>]) -> Coverage {
        let not_read: Vec<UnreadRank> = ranks
            .iter()
            .zip(outcomes)
            .filter_map(|(r, o)| {
                o.as_ref().map(|reason| UnreadRank {
                    rank: r.rank,
                    pid: r.pid,
                    reason: reason.clone(),
                })
            })
            .collect();
        Coverage {
            ranks: ranks.len(),
            read: ranks.len() - not_read.len(),
            complete: not_read.is_empty(),
            not_read,
            selection: None,
        }
    }

    /// The distinct reasons ranks were not read, each with how many ranks gave it (at most
    /// `max`, the most frequent first).
    pub(crate) fn reasons(&self, max: usize) -> Vec<(String, usize)> {
        let mut counts: Vec<(String, usize)> = Vec::new();
        for u in &self.not_read {
            match counts.iter_mut().find(|(r, _)| *r == u.reason) {
                Some((_, n)) => *n += 1,
                None => counts.push((u.reason.clone(), 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        counts.truncate(max);
        counts
    }

    /// One line on what a verdict covers (text output), or `None` when complete.
    pub(crate) fn caveat(&self) -> Option<String> {
        if let (true, Some(sel)) = (self.complete, &self.selection) {
            return Some(format!(
                "the verdict covers only the selected ranks {sel} (the others were not read)"
            ));
        }
        if self.complete {
            return None;
        }
        let ranks: Vec<String> = self
            .not_read
            .iter()
            .take(16)
            .map(|u| u.rank.map_or(format!("pid {}", u.pid), |r| r.to_string()))
            .collect();
        let more = if self.not_read.len() > 16 {
            ", …"
        } else {
            ""
        };
        Some(format!(
            "the verdict covers only the {} of {} ranks read; not read: {}{more}",
            self.read,
            self.ranks,
            ranks.join(", ")
        ))
    }
}

/// The error when no rank at all could be read: there is no verdict. Says why (the distinct
/// reasons) and what to do.
pub(crate) fn nothing_read(coverage: &Coverage, hint: Option<&str>) -> String {
    let reasons: Vec<String> = coverage
        .reasons(3)
        .into_iter()
        .map(|(r, n)| if n > 1 { format!("{r} ({n} ranks)") } else { r })
        .collect();
    let mut s = format!(
        "no rank's queues could be read, so there is no verdict ({} ranks: {})",
        coverage.ranks,
        reasons.join("; ")
    );
    if let Some(h) = hint {
        s.push_str("; ");
        s.push_str(h);
    }
    s
}

/// The analysis input from one sample's queues.
pub(crate) fn snapshot(ranks: &[(Option<u64>, u32, Vec<CommunicatorQueues>)]) -> JobSnapshot {
    mpir_mqd::snapshot_of(
        ranks
            .iter()
            .map(|(rank, pid, comms)| (*rank, Some(*pid), comms.as_slice())),
    )
}

pub(crate) fn run(args: &DeadlockArgs) -> anyhow::Result<ExitCode> {
    let (debug, choice) = args.reader.prepare(&args.common)?;
    let timeout = Duration::from_secs(args.ranks.timeout);
    // The ranks: from the starter's table once (then by pid for every sample).
    let how = queues::HoldOptions {
        base: crate::acquire_options(&args.common).debug(debug.clone()),
        selection: args.ranks.ranks.as_ref(),
        start_times: None,
    };
    let (held, ranks) = queues::hold_ranks(args.ranks.starter, &args.ranks.pids, &how, timeout)?;
    let sampled = sample(
        held,
        ranks,
        &choice,
        &debug,
        args.samples,
        Duration::from_millis(args.interval_ms),
    )?;
    let mut sampled = sampled;
    sampled.coverage.selection = args.ranks.ranks.as_ref().map(ToString::to_string);
    let (engine, report, unread) = (
        sampled.engine.clone(),
        &sampled.report,
        sampled.unread.clone(),
    );
    let coverage = &sampled.coverage;
    let mut doc = DeadlockDoc {
        schema: DEADLOCK_SCHEMA,
        engine: engine.clone(),
        unread,
        coverage,
        reader_notes: &sampled.notes,
        report: ReportOut::from(report),
        error: None,
    };
    if coverage.read == 0 {
        // Nothing was read: no verdict at all, never "no cycle".
        let message = nothing_read(coverage, sampled.hint.as_deref());
        if args.common.json {
            doc.report.verdict = "unknown";
            doc.error = Some(message.clone());
            outln!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            for n in &sampled.notes {
                eprintln!("mpir: note: {n}");
            }
        }
        eprintln!("mpir: error: {message}");
        return Ok(ExitCode::from(queues::PARTIAL));
    }
    if args.dot {
        out!("{}", report.to_dot());
    } else if args.common.json {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!("wait-for analysis ({engine}), {} ranks", report.ranks);
        out!("{report}");
        if let Some(c) = coverage.caveat() {
            outln!("{c}");
        }
        for u in &doc.unread {
            outln!("not read: {u}");
        }
        for n in &sampled.notes {
            outln!("note: {n}");
        }
    }
    Ok(if report.has_cycle() {
        // A cycle among the ranks read is real whatever the others do.
        ExitCode::from(CYCLE)
    } else if !coverage.complete {
        ExitCode::from(queues::PARTIAL)
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
    /// Which ranks the analysis covers.
    pub(crate) coverage: Coverage,
    /// What to do when ranks could not be read, from the facts of the reading.
    pub(crate) hint: Option<String>,
    /// What the reader had to tell (the DLL's own output, each distinct line once).
    pub(crate) notes: Vec<String>,
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
) -> anyhow::Result<Sampled> {
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
    // Per rank: None while read in every sample, else the first reason it was not.
    let mut outcomes: Vec<Option<String>> = vec![None; ranks.len()];
    let mut printed: Option<(String, mpir_mqd::output::OutputLog)> = None;
    // Read while held: later samples hold a pid again only if it still names that process.
    let starts = queues::start_times(&ranks);
    let again_how = queues::HoldOptions {
        base: mpir_acquire::AcquireOptions::default().debug(debug.clone()),
        selection: None,
        start_times: Some(&starts),
    };
    for i in 0..samples.max(1) {
        if i > 0 {
            std::thread::sleep(interval);
            let pids: Vec<u32> = ranks
                .iter()
                .filter(|r| r.unreadable.is_none())
                .map(|r| r.pid)
                .collect();
            let (h, again) = queues::hold_ranks(None, &pids, &again_how, interval)?;
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
        let (name, read) = match result {
            Ok(r) => {
                // What the DLL printed, summed over the samples.
                if let Some((path, log)) = r.printed {
                    match printed.as_mut() {
                        Some((_, all)) => all.merge(&log),
                        None => printed = Some((path, log)),
                    }
                }
                (r.engine, r.reads)
            }
            // No reader, or no rank could be stopped: every rank unread, with the reason.
            Err(e) => (
                if engine.is_empty() {
                    "none".to_string()
                } else {
                    engine.clone()
                },
                ranks
                    .iter()
                    .map(|r| Err(r.unreadable.clone().unwrap_or_else(|| chain(e.as_ref()))))
                    .collect(),
            ),
        };
        engine = name;
        for p in problems {
            unread.push(format!("sample {}: while releasing: {p}", i + 1));
        }
        let mut sample = Vec::new();
        for ((r, outcome), seen) in ranks.iter().zip(read).zip(outcomes.iter_mut()) {
            match outcome {
                Ok((rank, q)) => sample.push((rank.or(r.rank), r.pid, q.communicators)),
                Err(e) => {
                    unread.push(format!(
                        "sample {}: rank {} (pid {}): {e}",
                        i + 1,
                        r.rank.map_or("?".into(), |r| r.to_string()),
                        r.pid
                    ));
                    seen.get_or_insert(e);
                }
            }
        }
        snapshots.push(snapshot(&sample));
    }
    // A rank read in some samples only is not covered: its absence elsewhere would read as
    // progress.
    let covered: std::collections::HashSet<i64> = ranks
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| o.is_none())
        .map(|(r, _)| i64::from(r.pid))
        .collect();
    for s in &mut snapshots {
        s.ranks
            .retain(|q| q.pid.is_some_and(|p| covered.contains(&p)));
    }
    let report = deadlock::confirm(&snapshots)?;
    let coverage = Coverage::of(&ranks, &outcomes);
    // The reader failed on ranks it could stop (not remote, not refused): with the MPI's DLL
    // and no types given, the usual cause is an MPI library without debug information.
    let reader_failed = ranks
        .iter()
        .zip(&outcomes)
        .any(|(r, o)| o.is_some() && r.unreadable.is_none());
    let hint = (reader_failed && engine.starts_with("dll") && !choice.types_given).then(|| {
        "if the MPI library has no debug information (stock Open MPI), build a types \
         sidecar (scripts/openmpi-types-sidecar.sh) and give it with --types"
            .to_string()
    });
    Ok(Sampled {
        engine,
        report,
        unread,
        coverage,
        hint,
        notes: queues::printed_notes(printed.as_ref()),
    })
}
