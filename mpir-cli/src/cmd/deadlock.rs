//! `deadlock`: who waits for whom across the ranks, and whether it is a cycle. The session
//! samples the queues several times, holding the ranks only while each sample is read; a
//! cycle is reported only when the same pending operations form it in every sample (a
//! progressing job never shows the same ones twice).

use std::process::ExitCode;
use std::time::Duration;

use mpir_mqd::MqdError;
use mpir_session::{DeadlockRead, EngineUsed, RankError};

use crate::Common;
use crate::args::{RankArgs, ReaderArgs, RemoteArgs};
use crate::cmd::queues;
use crate::render::deadlock::{CoverageOut, doc};
use crate::render::queues::printed_notes;

use crate::cmd::HANG;

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
    /// Also write a self-contained HTML report of the analysis (verdict, wait-for graph,
    /// pending operations, and the ranks' merged stacks, read once more after the samples)
    /// to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// What to do when ranks the session could stop were not read with the MPI's DLL, or no
/// shipped layout set fits them, and no types were given: the usual cause is an MPI library
/// without debug information.
fn types_hint(read: &DeadlockRead, types_given: bool) -> Option<&'static str> {
    let dll = matches!(read.engine, Some(EngineUsed::Dll { .. }));
    let reader_failed = read
        .coverage
        .not_read
        .iter()
        .chain(&read.coverage.stacks_only)
        .any(|n| !matches!(n.reason, RankError::Unreadable(_)));
    // No shipped layout set fits the stock Open MPI (on some rank, or on the probe).
    let refused = read
        .coverage
        .not_read
        .iter()
        .chain(&read.coverage.stacks_only)
        .any(|n| {
            matches!(
                n.reason,
                RankError::NoReader(MqdError::Layouts(_)) | RankError::Read(MqdError::Layouts(_))
            )
        });
    ((reader_failed && dll || refused) && !types_given).then_some(crate::errors::TYPES_HINT)
}

/// The text lines on ranks covered by their stacks alone: each distinct reason their queues
/// were not read, with the ranks it concerns.
fn stacks_only_lines(coverage: &CoverageOut) -> Vec<String> {
    let mut by_reason: Vec<(String, Vec<String>)> = Vec::new();
    for u in &coverage.stacks_only {
        let who = u.rank.map_or(format!("pid {}", u.pid), |r| r.to_string());
        match by_reason.iter_mut().find(|(r, _)| *r == u.reason) {
            Some((_, ranks)) => ranks.push(who),
            None => by_reason.push((u.reason.clone(), vec![who])),
        }
    }
    by_reason
        .into_iter()
        .map(|(reason, ranks)| {
            let more = ranks.len().saturating_sub(16);
            let mut list = ranks.into_iter().take(16).collect::<Vec<_>>().join(", ");
            if more > 0 {
                list.push_str(&format!(" and {more} more"));
            }
            format!("queues not read, stacks used instead: rank {list}: {reason}")
        })
        .collect()
}

pub(crate) fn run(args: &DeadlockArgs) -> anyhow::Result<ExitCode> {
    let options = args.reader.options(&args.common)?;
    let mut session = args.ranks.open(options)?;
    args.remote.reach(&mut session)?;
    let read = crate::cmd::report::sample(
        &mut session,
        args.samples,
        Duration::from_millis(args.interval_ms),
    )?;
    let types_given = args.reader.types_given();
    let coverage = CoverageOut::of(&read.coverage, types_given);
    let notes = printed_notes(read.engine.as_ref(), &read.printed);
    let mut doc = doc(&read, &coverage, &notes, args.samples, types_given);
    if let Some(path) = &args.html {
        if read.report.is_none() {
            doc.error = Some(coverage.nothing_read(types_hint(&read, types_given)));
        }
        let mut documents: Vec<serde_json::Value> = mpir_json::job(&session).into_iter().collect();
        documents.push(serde_json::to_value(&doc)?);
        // The stacks once more, for the page's tree (their read holds each rank briefly).
        let interval = Duration::from_millis(args.interval_ms);
        let options = crate::cmd::report::stack_options(
            1,
            interval,
            false,
            Some(mpir_types::stacks::PythonView::Interleaved),
        );
        match crate::cmd::report::read_stacks(&mut session, &options) {
            Ok(s) => documents.push(mpir_json::stacks(
                &s,
                crate::cmd::report::source_of(&session),
                interval,
            )),
            Err(e) => eprintln!(
                "mpir: warning: the report has no stacks: {}",
                crate::errors::report(&e)
            ),
        }
        doc.error = None;
        crate::cmd::report::write(path, documents, &[])?;
    }
    crate::args::let_go(session);
    let Some(report) = &read.report else {
        // Nothing was read: no verdict at all, never "no cycle".
        let message = coverage.nothing_read(types_hint(&read, types_given));
        if args.common.json {
            doc.error = Some(message.clone());
            outln!("{}", serde_json::to_string_pretty(&doc)?);
        } else {
            for n in &notes {
                eprintln!("mpir: note: {n}");
            }
        }
        eprintln!("mpir: error: {message}");
        return Ok(ExitCode::from(queues::PARTIAL));
    };
    if args.dot {
        out!("{}", report.to_dot());
    } else if args.common.json {
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        let how = if coverage.stacks_only.is_empty() {
            doc.engine.clone()
        } else if coverage.stacks_only.len() == coverage.read {
            "stacks only: no rank's queues could be read".to_string()
        } else {
            format!(
                "{}; stacks only for {} ranks whose queues could not be read",
                doc.engine,
                coverage.stacks_only.len()
            )
        };
        outln!("wait-for analysis ({how}), {} ranks", report.ranks);
        out!("{report}");
        if let Some(c) = coverage.caveat() {
            outln!("{c}");
        }
        for l in stacks_only_lines(&coverage) {
            outln!("{l}");
        }
        for u in &coverage.wait_states_not_used {
            let who = u
                .rank
                .map_or(format!("pid {}", u.pid), |r| format!("rank {r}"));
            outln!("wait-state export not used for {who}: {}", u.reason);
        }
        // Ranks covered by their stacks have their reason once above, not once per sample.
        let by_stacks: std::collections::HashSet<(Option<u64>, u32)> = read
            .coverage
            .stacks_only
            .iter()
            .map(|n| (n.rank, n.pid))
            .collect();
        for u in mpir_json::deadlock::unread_lines_where(&read, types_given, |n| {
            !by_stacks.contains(&(n.rank, n.pid))
        }) {
            outln!("not read: {u}");
        }
        for line in crate::render::cooperative_lines(
            read.coverage
                .cooperative
                .iter()
                .map(|(rank, _, d)| (*rank, d)),
            read.coverage.announced.as_ref(),
        ) {
            outln!("{line}");
        }
        for n in &notes {
            outln!("note: {n}");
        }
        if let Some(h) = types_hint(&read, types_given) {
            outln!("hint: {h}");
        }
    }
    Ok(exit_code(report, coverage.complete))
}

/// 3 for a hang among the ranks read (real whatever the others do); 4 when some ranks were
/// not read, or are inside MPI waiting for what no queue shows while others may progress (no
/// claim is made about them); 0 otherwise.
fn exit_code(report: &mpir_types::deadlock::DeadlockReport, complete: bool) -> ExitCode {
    if report.has_hang() {
        ExitCode::from(HANG)
    } else if !complete || report.has_unknown_waits() {
        ExitCode::from(queues::PARTIAL)
    } else {
        ExitCode::SUCCESS
    }
}
