//! `launch` and `attach`: the job (MPIR proctable or MPI2DD traversal), through a session.

use anyhow::Context as _;
use std::os::fd::AsFd;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use mpir_session::Session;

use crate::args::RemoteArgs;
use crate::render::job::{job_out, mpi2dd_job_out, print};
use crate::{Common, session_options};

/// `launch`'s options beside the common ones.
pub(crate) struct LaunchArgs<'a> {
    pub(crate) hold: bool,
    pub(crate) ranks: Option<mpir_types::ranks::RankSet>,
    pub(crate) timeout: u64,
    pub(crate) verify: Option<&'a RemoteArgs>,
    pub(crate) record_waits: bool,
    pub(crate) watch: Option<&'a crate::cmd::watch::WatchOpts>,
}

pub(crate) fn launch(
    common: &Common,
    args: &LaunchArgs<'_>,
    starter: &[String],
) -> anyhow::Result<ExitCode> {
    let (program, starter_args) = starter.split_first().context("no starter command given")?;
    let mut cmd = Command::new(program);
    cmd.args(starter_args);
    if args.record_waits {
        mpir_waits::record_waits(&mut cmd)?;
    }
    if common.json {
        // The job's stdout goes to our stderr: stdout carries the JSON only.
        let err = std::io::stderr().as_fd().try_clone_to_owned()?;
        cmd.stdout(Stdio::from(err));
    }
    let timeout = Duration::from_secs(args.timeout);
    let mut options = session_options(common)
        .with_timeout(timeout)
        .with_hold_from_acquisition(args.hold);
    if let Some(r) = args.ranks.clone() {
        options = options.with_ranks(r);
    }
    // Agents prepared before the launch: a starter with the tool-daemon extension starts
    // them with the job.
    let prepared = match args.verify {
        Some(remote) => remote
            .front_options()
            .map(mpir_agent::LaunchedAgents::prepare)
            .transpose()?,
        None => None,
    };
    if let Some(p) = &prepared {
        options = p.session_options(options);
    }
    // SIGUSR1 asks a watch for a bundle: the handler is in place before the job starts (an
    // exec resets it, so the job keeps the signal's default).
    let requests = args
        .watch
        .and_then(|_| crate::cmd::watch::request_channel());
    let mut session = Session::launch(cmd, options)?;
    let mut child = session.take_child().context("no starter process")?;
    if args.hold {
        let stopped = session.hand_over()?;
        let job = session.job().context("a launch has a job")?;
        let mut out = job_out(job, "mpir");
        out.notes.push(format!(
            "{} ranks left stopped for another tool (SIGCONT lets them run)",
            stopped.len()
        ));
        let remote = session.ranks_elsewhere().len();
        if remote > 0 {
            out.notes.push(format!(
                "{remote} ranks on other nodes run on: only this node's ranks can be handed \
                 over stopped (an agent lets go of everything when it ends)"
            ));
        }
        print(&out, common.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    let verified = match (args.verify, prepared) {
        (Some(remote), Some(prepared)) => Some(verified_notes(
            &remote.reach_launched(&mut session, prepared)?,
        )),
        _ => None,
    };
    let mut out = job_out(session.job().context("a launch has a job")?, "mpir");
    out.notes.extend(verified.into_iter().flatten());
    print(&out, common.json)?;
    if let Some(opts) = args.watch {
        let slurm_job = crate::cmd::watch::slurm_job_of(&session);
        let code = crate::cmd::watch::watch(
            crate::cmd::watch::Watched {
                session: &mut session,
                child: Some(&mut child),
                slurm_job,
                samples: 3,
                interval: Duration::from_millis(150),
                types_given: false,
            },
            opts,
            requests,
        )?;
        drop(session);
        // The watch ended before the job (--then detach, --for): the job runs on, and the
        // tool waits for it as `launch` does.
        let status = child.wait()?;
        tracing::info!(%status, "the watched job ended");
        return Ok(code);
    }
    drop(session);
    let status = child.wait()?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

pub(crate) fn attach(
    common: &Common,
    timeout: u64,
    pid: Option<u32>,
    slurm_job: Option<mpir_acquire::slurm::StepId>,
    verify: Option<&RemoteArgs>,
) -> anyhow::Result<ExitCode> {
    let options = session_options(common).with_timeout(Duration::from_secs(timeout));
    let mut session = match (pid, slurm_job) {
        (Some(pid), _) => Session::attach(pid, options)?,
        (None, Some(step)) => Session::attach_slurm(step, options)?,
        (None, None) => anyhow::bail!("no starter pid or Slurm job given"),
    };
    // Agents first: they may need the session's acquisition let go (Open MPI 4's daemons).
    let verified = match verify {
        Some(remote) if session.job().is_some() => {
            Some(verified_notes(&remote.reach(&mut session)?))
        }
        _ => None,
    };
    let pid = session.job().map_or(pid.unwrap_or(0), |j| j.starter.pid);
    match (session.job(), session.mpi2dd()) {
        (Some(job), mpi2dd) => {
            let mut out = job_out(job, "mpir");
            if let Some(m) = mpi2dd {
                out.interfaces.push("mpi2dd");
                out.notes
                    .extend(m.mismatches.iter().map(|m| format!("MPIR vs MPI2DD: {m}")));
            }
            out.notes.extend(verified.into_iter().flatten());
            print(&out, common.json)?;
        }
        (None, Some(m)) => {
            print(&mpi2dd_job_out(m, pid, &session.node_facts()), common.json)?;
        }
        (None, None) => anyhow::bail!("nothing acquired"),
    }
    Ok(ExitCode::SUCCESS)
}

/// What the agents said of their nodes' ranks: one line for the proven ones, one per rank
/// that was not.
fn verified_notes(states: &[mpir_session::NodeState]) -> Vec<String> {
    if states.is_empty() {
        return vec!["no rank on another node was verified (no agent started)".into()];
    }
    let mut notes = Vec::new();
    let (mut proven, mut total) = (0usize, 0usize);
    for n in states {
        total += n.ranks.len();
        match &n.down {
            Some((failure, detail)) => notes.push(format!(
                "ranks of {} not verified: {failure}: {detail}",
                std::iter::once(n.host.as_str())
                    .chain(n.subtree.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
            None => {
                proven += n.ranks.len() - n.refused.len();
                for (rank, why) in &n.refused {
                    notes.push(format!(
                        "rank {rank} not verified by its node's agent: {why}"
                    ));
                }
            }
        }
    }
    let nodes: usize = states.iter().map(|n| 1 + n.subtree.len()).sum();
    notes.insert(
        0,
        format!("{proven} of {total} ranks on {nodes} other nodes proven on their nodes by agents"),
    );
    notes
}
