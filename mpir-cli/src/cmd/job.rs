//! `launch`, `attach` and `core`: the job (MPIR proctable or MPI2DD traversal).

use anyhow::Context as _;
use std::borrow::Cow;
use std::os::fd::AsFd;
use std::process::{Command, ExitCode, Stdio};
use std::time::Duration;

use mpir_acquire::live;
use mpir_acquire::{Interface, Job, RankSelection};
use mpir_target::proctable::ProcTable;
use mpir_types::mpir::MpirFlags;

use crate::{Common, acquire_options};

use crate::render::job::{
    FlagsOut, JOB_SCHEMA, JobOut, NodeOut, RankOut, Ranks, StarterOut, ThisNodeOut,
    debug_state_out, layout_name, local_of, print,
};

fn table_out<'a>(
    table: &'a ProcTable,
    local: impl Fn(u64) -> Option<bool>,
    control: impl Fn(u64) -> Cow<'a, str>,
) -> Vec<RankOut<'a>> {
    table
        .resolved
        .ranks()
        .map(|r| RankOut {
            rank: r.rank,
            host: r.host,
            local: local(r.rank),
            executable: r.executable,
            pid: r.pid,
            control: control(r.rank),
        })
        .collect()
}

pub(crate) fn job_out<'a>(job: &'a Job, interface: &'static str) -> JobOut<'a> {
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: Some(job.starter.pid),
            image: job.starter.image.as_deref(),
            launcher: job.starter.launcher.map(|l| l.to_string()),
            debug_state: debug_state_out(job.starter.debug_state),
        },
        interface,
        interfaces: vec![interface],
        flags: Some(FlagsOut::from(&job.starter.flags)),
        layout: layout_name(&job.table.layout.source),
        nodes: Some(
            job.nodes()
                .into_iter()
                .map(|n| NodeOut {
                    host: n.host,
                    local: local_of(&n.locality),
                    ranks: n.ranks,
                })
                .collect(),
        ),
        this_node: Some(ThisNodeOut {
            names: job.this_node.names(),
            addresses: job
                .this_node
                .addresses()
                .iter()
                .map(ToString::to_string)
                .collect(),
            aliases: job.this_node.aliases(),
        }),
        ranks: Ranks::of_job(job),
        problems: job
            .table
            .resolved
            .problems
            .iter()
            .map(ToString::to_string)
            .collect(),
        notes: job.notes.iter().map(ToString::to_string).collect(),
    }
}

pub(crate) fn launch(
    common: &Common,
    hold: bool,
    ranks: Option<mpir_types::ranks::RankSet>,
    timeout: u64,
    starter: &[String],
) -> anyhow::Result<ExitCode> {
    let (program, args) = starter.split_first().context("no starter command given")?;
    let mut cmd = Command::new(program);
    cmd.args(args);
    if common.json {
        // The job's stdout goes to our stderr: stdout carries the JSON only.
        let err = std::io::stderr().as_fd().try_clone_to_owned()?;
        cmd.stdout(Stdio::from(err));
    }
    let mut options = acquire_options(common)
        .timeout(Duration::from_secs(timeout))
        .hold(hold);
    if let Some(r) = ranks {
        options = options.ranks(RankSelection::Only(r));
    }
    let mut acquired = live::launch(cmd, options)?;
    let mut child = acquired.take_child().context("no starter process")?;
    if hold {
        let stopped = acquired.hand_over()?;
        let mut out = job_out(acquired.job(), "mpir");
        out.notes.push(format!(
            "{} ranks left stopped for another tool (SIGCONT lets them run)",
            stopped.len()
        ));
        print(&out, common.json)?;
        return Ok(ExitCode::SUCCESS);
    }
    print(&job_out(acquired.job(), "mpir"), common.json)?;
    drop(acquired);
    let status = child.wait()?;
    Ok(ExitCode::from(
        status.code().unwrap_or(1).clamp(0, 255) as u8
    ))
}

pub(crate) fn attach(common: &Common, timeout: u64, pid: u32) -> anyhow::Result<ExitCode> {
    let options = acquire_options(common).timeout(Duration::from_secs(timeout));
    let any = live::attach_any(pid, options)?;
    match (&any.mpir, &any.mpi2dd) {
        (Some(a), _) => {
            let mut out = job_out(a.job(), "mpir");
            if any.interface == Interface::Both {
                out.interfaces.push("mpi2dd");
            }
            out.notes.extend(
                any.mismatches
                    .iter()
                    .map(|m| format!("MPIR vs MPI2DD: {m}")),
            );
            print(&out, common.json)?;
        }
        (None, Some(t)) => {
            let node = acquire_options(common)
                .this_node(mpir_target::live::node::this_node())
                .node_facts();
            let ranks: Vec<RankOut<'_>> = t
                .job
                .ranks()
                .map(|(w, r)| RankOut {
                    rank: r.rank as u64,
                    host: Some(&*r.process.host),
                    local: local_of(&node.classify(Some(&r.process.host))),
                    executable: r.executable.as_deref(),
                    pid: i64::from(r.process.pid),
                    control: format!("world {}", w.id).into(),
                })
                .collect();
            // The flags of the process named (else of the metadirectory), in MPIR's shape.
            let record = |p: i64| {
                t.job
                    .processes
                    .iter()
                    .find(|r| i64::from(r.process.pid) == p)
            };
            let flags = record(i64::from(pid))
                .or_else(|| {
                    t.job
                        .metadirectory
                        .as_ref()
                        .and_then(|m| record(i64::from(m.pid)))
                })
                .map(|r| FlagsOut::from(&mpir_acquire::interface::flags_of_mpi2dd(r.mpi_flags)));
            let out = JobOut {
                schema: JOB_SCHEMA,
                starter: StarterOut {
                    pid: t.job.metadirectory.as_ref().map(|m| m.pid as u32),
                    image: None,
                    launcher: None,
                    debug_state: None,
                },
                interface: "mpi2dd",
                interfaces: vec!["mpi2dd"],
                flags,
                layout: "abi",
                nodes: None,
                this_node: None,
                ranks: ranks.into(),
                problems: t.job.problems.iter().map(|p| format!("{p:?}")).collect(),
                notes: t
                    .job
                    .unreachable
                    .iter()
                    .map(|u| format!("unreachable: {u:?}"))
                    .collect(),
            };
            print(&out, common.json)?;
        }
        _ => return Err(anyhow::anyhow!("nothing acquired")),
    }
    Ok(ExitCode::SUCCESS)
}

/// The job document of a starter's process table read from a core file, with the flags the
/// starter's core defines. Its ranks' hosts say nothing about this machine (`local` null).
pub(crate) fn core_job(table: &ProcTable, flags: MpirFlags) -> JobOut<'_> {
    JobOut {
        schema: JOB_SCHEMA,
        starter: StarterOut {
            pid: None,
            image: None,
            launcher: None,
            debug_state: None,
        },
        interface: "mpir",
        interfaces: vec!["mpir"],
        flags: Some(FlagsOut::from(&flags)),
        layout: layout_name(&table.layout.source),
        nodes: None,
        this_node: None,
        ranks: table_out(table, |_| None, |_| Cow::Borrowed("core")).into(),
        problems: table
            .resolved
            .problems
            .iter()
            .map(ToString::to_string)
            .collect(),
        notes: Vec::new(),
    }
}
