//! `queues`: the message queues of every rank. The session holds (stops) the ranks only while
//! they are read, then releases them running; what is read is one consistent snapshot per
//! rank.

use std::process::ExitCode;

use mpir_session::{QueueRead, RankError, Session, chain};

use crate::args::{RankArgs, ReaderArgs, RemoteArgs};
use crate::render::queues::{print_doc, queues_doc};
use crate::{Common, progress};

/// Exit status when some ranks could not be read (the others are in the output).
pub(crate) const PARTIAL: u8 = 4;

#[derive(clap::Args)]
pub(crate) struct QueuesArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    #[command(flatten)]
    pub(crate) ranks: RankArgs,
    #[command(flatten)]
    pub(crate) reader: ReaderArgs,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// Reads the queues of the session's ranks (on every node it reaches), with a progress bar.
pub(crate) fn read(session: &mut Session) -> anyhow::Result<QueueRead> {
    if session.reaches_other_nodes() {
        let spin = progress::spinner("reading queues on every node");
        let read = session.queues();
        spin.finish_and_clear();
        return Ok(read?);
    }
    let bar = progress::bar(0, "reading queues");
    let read = session.queues_with(|p| {
        bar.set_length(p.total as u64);
        bar.set_position(p.done as u64);
    });
    bar.finish_and_clear();
    let read = read?;
    if let Some(why) = &read.fallback {
        tracing::info!(%why, "no native walker; the MPI's DLL reads the queues");
    }
    Ok(read)
}

/// The hint of the line for [`mpir_session::QueueRead::missing_types`].
pub(crate) const TYPES_HINT: &str = crate::errors::TYPES_HINT;

/// The error when nothing at all could be read because no engine could be set up, or no
/// rank could be stopped (a per-rank reading failure is a partial result instead).
pub(crate) fn nothing_readable(read: &QueueRead) -> anyhow::Result<()> {
    if read.ranks.iter().any(|r| r.queues.is_ok()) {
        return Ok(());
    }
    let errors = || read.ranks.iter().filter_map(|r| r.queues.as_ref().err());
    if let Some(e) = errors().find_map(|e| match e {
        RankError::NoReader(e) => Some(anyhow::Error::new(e.clone())),
        RankError::Elsewhere { .. } => Some(anyhow::anyhow!("{e}")),
        _ => None,
    }) {
        return Err(e);
    }
    if errors().all(|e| matches!(e, RankError::Unreadable(_))) {
        let why: Vec<String> = read
            .ranks
            .iter()
            .filter_map(|r| {
                Some(format!(
                    "pid {}: {}",
                    r.pid,
                    chain(r.queues.as_ref().err()?)
                ))
            })
            .collect();
        anyhow::bail!(
            "no rank could be stopped to read its queues ({})",
            why.join("; ")
        );
    }
    Ok(())
}

pub(crate) fn run(args: &QueuesArgs) -> anyhow::Result<ExitCode> {
    // The queues document shows no stacks: no rank stays stopped for them.
    let options = args.reader.options(&args.common)?.with_queue_stacks(false);
    let mut session = args.ranks.open(options)?;
    args.remote.reach(&mut session)?;
    let read = read(&mut session)?;
    if let Some(e) = read.not_exported() {
        // Not a failure to fix: the MPI keeps no queue to read. One line, every rank unread.
        if args.common.json {
            print_doc(&queues_doc(&read, args.reader.types_given()), true)?;
        }
        eprintln!(
            "mpir: error: {}; `mpir stacks` shows where its ranks wait",
            on_node(&e)
        );
        return Ok(ExitCode::from(PARTIAL));
    }
    if let Some(missing) = read.missing_types() {
        // Nothing the tool can read without the MPI's types: one line, every rank unread.
        if args.common.json {
            print_doc(&queues_doc(&read, args.reader.types_given()), true)?;
        }
        eprintln!(
            "mpir: error: no rank's message queues can be read: {} (hint: {TYPES_HINT})",
            on_node(&missing)
        );
        return Ok(ExitCode::from(PARTIAL));
    }
    nothing_readable(&read)?;
    let doc = queues_doc(&read, args.reader.types_given());
    print_doc(&doc, args.common.json)?;
    Ok(exit_code(&read))
}

/// A reason as a line, naming the node when it was met on another one.
fn on_node(why: &mpir_types::unread::NotRead) -> String {
    match &why.host {
        Some(host) => format!("on {host}: {why}"),
        None => why.to_string(),
    }
}

/// 0 when every rank was read, [`PARTIAL`] otherwise.
pub(crate) fn exit_code(read: &QueueRead) -> ExitCode {
    if read.is_complete() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(PARTIAL)
    }
}
