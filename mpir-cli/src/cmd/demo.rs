//! `demo`: the bundled demo job, end to end, with no MPI installed. A fake MPIR starter and its
//! ranks (the crate `mpir-demo`: built from `mpir-demo/demo/` by its build script and embedded) are launched under control; the job,
//! every rank's message queues and the wait-for analysis are printed; the job is stopped and
//! nothing is left running.

use anyhow::Context as _;
use std::io::{BufRead, BufReader};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use mpir_session::{Engine, ReaderOptions, Session};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::Serialize;

use crate::cmd::queues;
use crate::render::deadlock::{CoverageOut, DeadlockDoc};
use crate::render::job::job_out;
use crate::render::queues::{self as queues_out, QueuesDoc, printed_notes};
use crate::{Common, progress, session_options};

const BANNER: &str = "This is mpir-rs's bundled DEMO job, not a real MPI job: a fake MPIR starter \
and ranks built into mpir from mpir-rs's sources (mpir-demo/demo), no MPI library involved. Its ranks keep \
message queues in MPICH 4.1's debug-queue layout, described by their own DWARF, with a \
deadlock among ranks 0-2.";

/// `schema` of the demo document (docs/cli-json.md): version 4 embeds `mpir.deadlock/4`.
pub(crate) const DEMO_SCHEMA: &str = "mpir.demo/4";

#[derive(clap::Args)]
pub(crate) struct DemoArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// Ranks in the demo job (3 or more make the deadlock; 4 or more add a wildcard receive,
    /// a pending send and an unexpected message).
    #[arg(short = 'n', default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub(crate) ranks: u32,
    /// Also write a self-contained HTML report of the demo job (verdict, merged stacks,
    /// wait-for graph, pending operations) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(crate) html: Option<std::path::PathBuf>,
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
    let starter = mpir_demo::starter()?;
    let n = args.ranks;
    let mut cmd = Command::new(&starter);
    // The ranks say "ready" on stdout once their queues are built; a minute at most.
    cmd.args(["-n", &n.to_string(), "--lifetime", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let spin = progress::spinner("launching the demo job");
    let options = session_options(&args.common)
        .with_timeout(Duration::from_secs(30))
        .with_reader_options(ReaderOptions::default().with_engine(Engine::Native));
    let mut session = Session::launch(cmd, options)?;
    spin.finish_and_clear();
    let mut child = session.take_child().context("the demo starter is gone")?;
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
        // Queues: one snapshot, ranks held while read.
        let read = queues::read(&mut session)?;
        queues::nothing_readable(&read)?;
        // Deadlock: three samples, confirmed.
        let sampled = crate::cmd::report::sample(&mut session, 3, Duration::from_millis(100))?;
        // The merged stacks for the report, two samples so that the page marks who did not move.
        let stacks = match &args.html {
            Some(_) => Some(session.stacks(&crate::cmd::report::stack_options(
                2,
                Duration::from_millis(100),
                false,
                None,
            ))?),
            None => None,
        };
        Ok((read, sampled, stacks))
    })();
    // Stop the demo job whatever happened, and check that nothing is left.
    let job = session.job().context("a launch has a job")?;
    let pids: Vec<u32> = job
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
    let (read, sampled, stacks) = result?;
    let queues_doc = queues_out::queues_doc(&read, false);
    let coverage = CoverageOut::of(&sampled.coverage, false);
    let notes = printed_notes(sampled.engine.as_ref(), &sampled.printed);
    let deadlock_doc = crate::render::deadlock::doc(&sampled, &coverage, &notes, 3, false);
    let report = sampled
        .report
        .as_ref()
        .context("no demo rank could be read")?;

    let job_doc = job_out(job, "mpir");
    if let Some(path) = &args.html {
        let mut documents = vec![
            serde_json::to_value(&job_doc)?,
            serde_json::to_value(&queues_doc)?,
            serde_json::to_value(&deadlock_doc)?,
        ];
        if let Some(s) = &stacks {
            documents.push(mpir_json::stacks(s, "starter", Duration::from_millis(100)));
        }
        crate::cmd::report::write(
            path,
            documents,
            &["the bundled demo job (not a real MPI job)".to_string()],
        )?;
    }
    if json {
        let doc = DemoDoc {
            schema: DEMO_SCHEMA,
            demo: "the bundled demo job (not a real MPI job)",
            job: job_doc,
            queues: queues_doc,
            deadlock: deadlock_doc,
            left_running: left_running.clone(),
        };
        outln!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        outln!("== The job (MPIR process acquisition, launch mode)");
        crate::render::job::print(&job_doc, false)?;
        outln!("\n== Message queues (read with the native walker from the ranks' DWARF)");
        queues_out::print_doc(&queues_doc, false)?;
        outln!("\n== Wait-for analysis ({})", deadlock_doc.engine);
        out!("{report}");
        if let Some(c) = coverage.caveat() {
            outln!("{c}");
        }
        for u in &deadlock_doc.unread {
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
