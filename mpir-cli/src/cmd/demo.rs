//! `demo`: the bundled demo job, end to end, with no MPI installed. A fake MPIR starter and its
//! ranks (built from `mpir-cli/demo/` by the build script, embedded in the tool: see `demo_files`) are launched under control; the job,
//! every rank's message queues and the wait-for analysis are printed; the job is stopped and
//! nothing is left running.

use anyhow::Context as _;
use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use mpir_acquire::live;
use mpir_acquire::{AcquireOptions, RankControl};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Serialize;

use crate::cmd::deadlock;
use crate::cmd::job;
use crate::cmd::queues::{self, Engine, EngineChoice, RankProc};
use crate::render::deadlock::{DEADLOCK_SCHEMA, DeadlockDoc, ReportOut};
use crate::render::queues::{self as queues_out, QueuesDoc};
use crate::{Common, debug_options, demo_files, progress};

const BANNER: &str = "This is mpir-rs's bundled DEMO job, not a real MPI job: a fake MPIR starter \
and ranks built into mpir from mpir-rs's sources (mpir-cli/demo), no MPI library involved. Its ranks keep \
message queues in MPICH 4.1's debug-queue layout, described by their own DWARF, with a \
deadlock among ranks 0-2.";

/// `schema` of the demo document (docs/cli-json.md): version 2 embeds `mpir.deadlock/2`.
pub(crate) const DEMO_SCHEMA: &str = "mpir.demo/2";

#[derive(clap::Args)]
pub(crate) struct DemoArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Ranks in the demo job (3 or more make the deadlock; 4 or more add a wildcard receive,
    /// a pending send and an unexpected message).
    #[arg(short = 'n', default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) ranks: u32,
}

#[derive(Serialize)]
struct DemoDoc<'a> {
    schema: &'static str,
    demo: &'static str,
    job: crate::render::job::JobOut<'a>,
    queues: QueuesDoc,
    deadlock: DeadlockDoc<'a>,
    left_running: Vec<u32>,
}

pub(crate) fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let json = args.common.json;
    if !json {
        outln!("{BANNER}\n");
    }
    let starter = demo_files::starter()?;
    let n = args.ranks;
    let mut cmd = Command::new(&starter);
    // The ranks say "ready" on stdout once their queues are built; a minute at most.
    cmd.args(["-n", &n.to_string(), "--lifetime", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let spin = progress::spinner("launching the demo job");
    let mut acquired = live::launch(
        cmd,
        AcquireOptions::default()
            .timeout(Duration::from_secs(30))
            .debug(debug_options(&args.common)),
    )?;
    spin.finish_and_clear();
    let mut child = acquired.take_child().context("the demo starter is gone")?;
    let result = (|| {
        // Released by the acquisition (gate opened): wait for every rank's queues.
        let out = child.stdout.take().context("no output from the demo job")?;
        let mut lines = BufReader::new(out).lines();
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut ready = 0;
        while ready < n {
            if Instant::now() > deadline {
                return Err(anyhow::anyhow!("the demo ranks did not get ready in 30 s"));
            }
            match lines.next() {
                Some(Ok(l)) if l.ends_with(" ready") => ready += 1,
                Some(Ok(_)) => {}
                _ => {
                    return Err(anyhow::anyhow!(
                        "the demo job ended before its ranks were ready"
                    ));
                }
            }
        }
        let job = acquired.job();
        let ranks: Vec<RankProc> = job
            .ranks()
            .map(|r| RankProc {
                rank: Some(r.rank),
                pid: u32::try_from(r.pid).unwrap_or(0),
                image: r.executable.unwrap_or("?").into(),
                unreadable: (r.pid <= 0).then(|| "no pid".to_string()),
            })
            .collect();
        let attached = job
            .ranks()
            .filter(|r| matches!(job.control(r.rank), RankControl::Attached { .. }))
            .count();
        tracing::info!(attached, "demo job acquired");
        let debug = debug_options(&args.common);
        let choice = EngineChoice {
            engine: Engine::Native,
            dll: None,
            in_process: false,
            types_given: false,
        };
        // Queues: one snapshot, ranks held while read.
        let pids: Vec<u32> = ranks.iter().map(|r| r.pid).collect();
        let how = queues::HoldOptions {
            base: AcquireOptions::default().debug(debug.clone()),
            selection: None,
            start_times: None,
        };
        let (held, _) = queues::hold_ranks(None, &pids, &how, Duration::from_secs(10))?;
        let read = queues::read_queues(&choice, &ranks, &queues::live_opener(&debug));
        let problems = held.release();
        let mut queues_doc = read?;
        queues_doc.notes.extend(problems);
        // Deadlock: three samples, confirmed.
        let (held, _) = queues::hold_ranks(None, &pids, &how, Duration::from_secs(10))?;
        let sampled =
            deadlock::sample(held, ranks, &choice, &debug, 3, Duration::from_millis(100))?;
        Ok((queues_doc, sampled))
    })();
    // Stop the demo job whatever happened, and check that nothing is left.
    let pids: Vec<u32> = acquired
        .job()
        .ranks()
        .filter_map(|r| u32::try_from(r.pid).ok())
        .collect();
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let _ = child.wait();
    let alive = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rsplit(')')
                    .next()
                    .map(|t| !t.trim_start().starts_with('Z'))
            })
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|&p| alive(p)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left_running: Vec<u32> = pids.into_iter().filter(|&p| alive(p)).collect();
    let (queues_doc, sampled) = result?;

    let job_doc = job::job_out(acquired.job(), "mpir");
    if json {
        let doc = DemoDoc {
            schema: DEMO_SCHEMA,
            demo: "the bundled demo job (not a real MPI job)",
            job: job_doc,
            queues: queues_doc,
            deadlock: DeadlockDoc {
                schema: DEADLOCK_SCHEMA,
                engine: sampled.engine,
                unread: sampled.unread,
                coverage: &sampled.coverage,
                reader_notes: &sampled.notes,
                report: ReportOut::from(&sampled.report),
                error: None,
            },
            left_running: left_running.clone(),
        };
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!("== The job (MPIR process acquisition, launch mode)");
        crate::render::job::print(&job_doc, false)?;
        outln!("\n== Message queues (read with the native walker from the ranks' DWARF)");
        queues_out::print_doc(&queues_doc, false)?;
        outln!("\n== Wait-for analysis ({})", sampled.engine);
        out!("{}", sampled.report);
        if let Some(c) = sampled.coverage.caveat() {
            outln!("{c}");
        }
        for u in &sampled.unread {
            outln!("not read: {u}");
        }
        if left_running.is_empty() {
            outln!("\nThe demo job was stopped; nothing is left running.");
        }
    }
    if !left_running.is_empty() {
        return Err(anyhow::anyhow!(
            "demo ranks still running after the demo: {left_running:?}"
        ));
    }
    Ok(ExitCode::SUCCESS)
}
