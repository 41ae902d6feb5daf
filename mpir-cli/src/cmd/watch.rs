//! `watch`: keeps an eye on a running job and writes a bundle — the HTML report, the JSON
//! documents and, when asked, a core of one representative rank per stack equivalence class —
//! when it hangs, when its Slurm time limit is near, or when asked (`SIGUSR1`).
//!
//! Each round reads the stacks of a few of this node's ranks (rotating through them; each rank
//! is stopped only for its own snapshot). When the ranks read did not move for a number of
//! rounds in a row, the whole job is read as `mpir report` reads it (the wait-for analysis over
//! several samples, then the stacks); a bundle is written only when that read finds a hang, and
//! one bundle per hang: the next one needs the job to move in between. Ranks on other nodes are
//! read by the full reads (through the agents), not by the cheap rounds.

use std::path::PathBuf;
use std::process::{Child, ExitCode};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use mpir_session::{Position, Session, StackOptions, StacksRead};
use mpir_types::ranks::RankSet;

use crate::args::{ReaderArgs, RemoteArgs};
use crate::cmd::report;
use crate::{Common, progress};

mod bundle;
use bundle::{Outcome, bundle, full, write_bundle};

/// What the watch does once it wrote a bundle.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Then {
    /// Keep watching (another bundle only after the job moved again).
    Keep,
    /// Let go of the job and end (exit status 3 after a hang).
    Detach,
    /// End the job (SIGTERM to its starter, or to its ranks without one) and end.
    Kill,
}

/// How to watch: shared by `mpir watch` and `mpir launch --watch`.
#[derive(clap::Args, Clone)]
pub(crate) struct WatchOpts {
    /// Where bundles are written, one subdirectory each (created when missing).
    #[arg(long = "out", value_name = "DIR", default_value = "mpir-watch")]
    pub(crate) out: PathBuf,
    /// Seconds between rounds.
    #[arg(long = "every", value_name = "SECONDS", default_value_t = 10.0, value_parser = positive_seconds)]
    pub(crate) every: f64,
    /// Ranks of this node whose stacks one round reads (rotating through the job).
    #[arg(long = "ranks-per-round", value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub(crate) per_round: u32,
    /// Rounds in a row in which no rank read moved before the whole job is read.
    #[arg(long = "suspect-after", value_name = "ROUNDS", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub(crate) suspect_after: u32,
    /// Also write a core of one representative rank of each stack equivalence class (the
    /// largest classes first) into the bundle.
    #[arg(long)]
    pub(crate) cores: bool,
    /// Most cores in one bundle.
    #[arg(long = "max-cores", value_name = "N", default_value_t = 8)]
    pub(crate) max_cores: u32,
    /// Largest core written, in MiB (a larger rank is named in the bundle, not dumped).
    #[arg(long = "max-core-mib", value_name = "MIB", default_value_t = 4096)]
    pub(crate) max_core_mib: u64,
    /// After a bundle: keep watching, detach, or end the job.
    #[arg(long = "then", value_enum, default_value_t = Then::Keep)]
    pub(crate) then: Then,
    /// A Slurm job: write a bundle once its remaining time is below this many seconds.
    #[arg(long = "time-margin", value_name = "SECONDS", default_value_t = 120)]
    pub(crate) time_margin: u64,
    /// Most bundles before the watch ends.
    #[arg(long = "max-bundles", value_name = "N", default_value_t = 10,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub(crate) max_bundles: u32,
    /// End the watch after this many seconds, even if the job runs on.
    #[arg(long = "for", value_name = "SECONDS")]
    pub(crate) duration: Option<u64>,
}

fn positive_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && (0.05..=86_400.0).contains(&v) => Ok(v),
        _ => Err(format!("{s:?}: give seconds between 0.05 and 86400")),
    }
}

#[derive(clap::Args)]
pub(crate) struct WatchArgs {
    #[command(flatten)]
    pub(crate) common: Common,
    /// The starter's pid (mpiexec, orterun, srun…).
    #[arg(long, required_unless_present_any = ["pids", "slurm_job"], conflicts_with_all = ["pids", "slurm_job"])]
    pub(crate) starter: Option<u32>,
    /// A Slurm job (or step, `J.S`) whose srun runs on this node. Its time limit is watched
    /// (also when --starter names an srun: the job it names).
    #[arg(long = "slurm-job", value_name = "J[.S]", conflicts_with = "pids")]
    pub(crate) slurm_job: Option<mpir_acquire::slurm::StepId>,
    /// Rank processes to watch directly (repeat, or separate with commas).
    #[arg(long = "pid", id = "pids", value_name = "PID", value_delimiter = ',')]
    pub(crate) pids: Vec<u32>,
    /// Longest wait for the acquisition and for each process to stop, in seconds.
    #[arg(long, default_value_t = 60)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) reader: ReaderArgs,
    /// Snapshots of a full read (the wait-for analysis compares them).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub(crate) samples: u32,
    /// Time between a full read's snapshots, in milliseconds.
    #[arg(long = "interval", value_name = "MS", default_value_t = 150)]
    pub(crate) interval_ms: u64,
    #[command(flatten)]
    pub(crate) watch: WatchOpts,
    #[command(flatten)]
    pub(crate) remote: RemoteArgs,
}

/// Why a bundle was written.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Trigger {
    /// A full read found a hang (its verdict).
    Hang(String),
    /// The Slurm job's remaining time fell below the margin.
    TimeLimit(u64),
    /// SIGUSR1.
    Request,
}

impl Trigger {
    fn slug(&self) -> &'static str {
        match self {
            Trigger::Hang(_) => "hang",
            Trigger::TimeLimit(_) => "time-limit",
            Trigger::Request => "request",
        }
    }
    fn describe(&self) -> String {
        match self {
            Trigger::Hang(v) => format!("a hang was confirmed (verdict {v})"),
            Trigger::TimeLimit(s) => format!("the Slurm job has {s} s left"),
            Trigger::Request => "asked for (SIGUSR1)".into(),
        }
    }
}

/// The job being watched, and how to tell that it ended.
pub(crate) struct Watched<'a> {
    pub(crate) session: &'a mut Session,
    /// The starter we launched (`mpir launch --watch`): its exit ends the watch.
    pub(crate) child: Option<&'a mut Child>,
    pub(crate) slurm_job: Option<u64>,
    pub(crate) samples: u32,
    pub(crate) interval: Duration,
    pub(crate) types_given: bool,
}

/// One round's cost, for the summary.
#[derive(Default)]
struct Costs {
    rounds: u64,
    full_reads: u64,
    cpu: Duration,
    max_round_cpu: Duration,
}

pub(crate) fn run(args: &WatchArgs) -> anyhow::Result<ExitCode> {
    let requests = request_channel();
    let options = args
        .reader
        .options(&args.common)?
        .with_timeout(Duration::from_secs(args.timeout));
    let mut session = if let Some(pid) = args.starter {
        let spin = progress::spinner(&format!("acquiring the job of starter {pid}"));
        let s = Session::attach(pid, options)?;
        spin.finish_and_clear();
        s
    } else if let Some(step) = args.slurm_job {
        let spin = progress::spinner(&format!("acquiring Slurm job {step}"));
        let s = Session::attach_slurm(step, options)?;
        spin.finish_and_clear();
        s
    } else {
        Session::pids(args.pids.iter().copied(), options)?
    };
    args.remote.reach(&mut session)?;
    let slurm_job = args
        .slurm_job
        .map(|s| s.job)
        .or_else(|| slurm_job_of(&session));
    watch(
        Watched {
            session: &mut session,
            child: None,
            slurm_job,
            samples: args.samples,
            interval: Duration::from_millis(args.interval_ms),
            types_given: args.reader.types_given(),
        },
        &args.watch,
        requests,
    )
}

/// The Slurm job of a session whose starter is `srun`, as the starter itself says
/// (`totalview_jobid`, read with its table): its time limit is watched.
pub(crate) fn slurm_job_of(session: &Session) -> Option<u64> {
    let starter = &session.job()?.starter;
    (starter.launcher == Some(mpir_acquire::quirks::Launcher::Slurm))
        .then_some(starter.job_id)
        .flatten()
}

/// SIGUSR1 as a request for a bundle; `None` (with a warning) when it cannot be had.
pub(crate) fn request_channel() -> Option<mpsc::Receiver<()>> {
    match mpir_target::live::tracer::on_request_signal(nix::sys::signal::Signal::SIGUSR1) {
        Ok(rx) => Some(rx),
        Err(e) => {
            eprintln!("mpir: warning: SIGUSR1 will not ask for a bundle: {e}");
            None
        }
    }
}

/// Watches `w` until the job ends, `opts` says to stop, or an error that leaves nothing to
/// watch; the exit status: 3 when a hang bundle was written, 0 otherwise.
pub(crate) fn watch(
    mut w: Watched<'_>,
    opts: &WatchOpts,
    requests: Option<mpsc::Receiver<()>>,
) -> anyhow::Result<ExitCode> {
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("cannot create the bundle directory {}", opts.out.display()))?;
    let every = Duration::from_secs_f64(opts.every);
    let started = Instant::now();
    let starter = w.session.starter_pid().map(|p| (p, start_time(p)));
    // Each process as first seen (pid → start time): `--then kill` signals only these.
    let mut seen: std::collections::HashMap<u32, u64> = starter
        .and_then(|(p, t)| Some((p, t?)))
        .into_iter()
        .collect();
    eprintln!(
        "mpir: watching{} every {:.1} s; bundles go to {} (SIGUSR1 asks for one now)",
        starter.map_or(String::new(), |(p, _)| format!(" the job of starter {p}")),
        opts.every,
        opts.out.display()
    );
    let mut last: std::collections::HashMap<u64, Position> = std::collections::HashMap::new();
    let mut suspect = 0u32;
    let mut reported_hang = false;
    let mut time_limit_done = false;
    let mut bundles = 0u32;
    let mut hang_bundles = 0u32;
    let mut next = 0usize;
    let mut costs = Costs::default();
    let mut first = true;
    let end = |why: &str, costs: &Costs, hang_bundles: u32| -> anyhow::Result<ExitCode> {
        eprintln!("mpir: {why}");
        eprintln!(
            "mpir: {} rounds ({} full reads), this tool's CPU {:.1} ms per round on average, \
             {:.1} ms at most; its peak memory {} kB",
            costs.rounds,
            costs.full_reads,
            costs.cpu.as_secs_f64() * 1e3 / costs.rounds.max(1) as f64,
            costs.max_round_cpu.as_secs_f64() * 1e3,
            peak_rss_kb().unwrap_or(0)
        );
        Ok(if hang_bundles > 0 {
            ExitCode::from(crate::cmd::HANG)
        } else {
            ExitCode::SUCCESS
        })
    };
    loop {
        if !first {
            // Sleep until the next round, or until asked for a bundle.
            let asked = match &requests {
                Some(rx) => match rx.recv_timeout(every) {
                    Ok(()) => true,
                    Err(mpsc::RecvTimeoutError::Timeout) => false,
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        std::thread::sleep(every);
                        false
                    }
                },
                None => {
                    std::thread::sleep(every);
                    false
                }
            };
            if asked {
                if let Some(reason) = job_ended(&mut w, starter) {
                    return end(&reason, &costs, hang_bundles);
                }
                let cpu = cpu_time();
                let outcome = bundle(&mut w, opts, Trigger::Request, &mut costs)?;
                note_cpu(&mut costs, cpu);
                bundles += 1;
                if let Some(code) = after_bundle(&mut w, opts, outcome, bundles, &seen)? {
                    return Ok(code);
                }
                continue;
            }
        }
        first = false;
        if opts
            .duration
            .is_some_and(|d| started.elapsed() >= Duration::from_secs(d))
        {
            return end(
                "the watch's time is up; the job runs on",
                &costs,
                hang_bundles,
            );
        }
        if let Some(reason) = job_ended(&mut w, starter) {
            return end(&reason, &costs, hang_bundles);
        }
        let cpu = cpu_time();
        costs.rounds += 1;
        // The Slurm time limit.
        let left = w
            .slurm_job
            .filter(|_| !time_limit_done)
            .and_then(slurm_time_left);
        if let Some(left) = left.filter(|&l| l <= opts.time_margin) {
            time_limit_done = true;
            let outcome = bundle(&mut w, opts, Trigger::TimeLimit(left), &mut costs)?;
            note_cpu(&mut costs, cpu);
            bundles += 1;
            if outcome.hang {
                hang_bundles += 1;
                reported_hang = true;
            }
            if let Some(code) = after_bundle(&mut w, opts, outcome, bundles, &seen)? {
                return Ok(code);
            }
            continue;
        }
        // The cheap round: a few ranks' stacks.
        let known = readable(w.session);
        for &(_, pid) in &known {
            if let (std::collections::hash_map::Entry::Vacant(e), Some(t)) =
                (seen.entry(pid), start_time(pid))
            {
                e.insert(t);
            }
        }
        let ranks: Vec<u64> = known.into_iter().map(|(r, _)| r).collect();
        let chosen: Vec<u64> = if ranks.is_empty() {
            Vec::new()
        } else {
            let k = (opts.per_round as usize).min(ranks.len());
            (0..k).map(|i| ranks[(next + i) % ranks.len()]).collect()
        };
        next = next.wrapping_add(chosen.len());
        let options = report::stack_options(1, w.interval, false, None);
        let read = if chosen.is_empty() {
            // The first round (no rank proven yet) reads them all.
            w.session.stacks(&options)
        } else {
            let only = RankSet::from_ranks(chosen.iter().copied());
            w.session.stacks_of(&options, &only)
        };
        let read = match read {
            Ok(r) => r,
            Err(e) => {
                if let Some(reason) = job_ended(&mut w, starter) {
                    return end(&reason, &costs, hang_bundles);
                }
                return Err(e.into());
            }
        };
        let sample = read.last();
        if sample.ranks.is_empty() && !sample.unreached.is_empty() {
            // Ranks that ended go before their starter, which notices and exits a moment
            // later: that moment is waited for (bounded), so a job that ended says so.
            if let Some(reason) = job_ended_within(&mut w, starter, STARTER_GRACE) {
                return end(&reason, &costs, hang_bundles);
            }
            if ranks.is_empty() || chosen.len() == ranks.len() {
                return end(
                    "no rank of the job can be read any more (they ended or cannot be reached)",
                    &costs,
                    hang_bundles,
                );
            }
        }
        let (compared, moved) = compare(&mut last, &read, &options);
        if moved {
            suspect = 0;
            if reported_hang {
                eprintln!("mpir: the job moved again");
            }
            reported_hang = false;
        } else if compared > 0 {
            suspect += 1;
        }
        tracing::info!(
            round = costs.rounds,
            compared,
            moved,
            suspect,
            "watch round"
        );
        if suspect >= opts.suspect_after && !reported_hang {
            let outcome = full(&mut w)?;
            costs.full_reads += 1;
            if outcome.hang {
                let verdict = outcome.verdict.clone();
                let outcome = write_bundle(&mut w, opts, Trigger::Hang(verdict), outcome)?;
                note_cpu(&mut costs, cpu);
                bundles += 1;
                hang_bundles += 1;
                reported_hang = true;
                if let Some(code) = after_bundle(&mut w, opts, outcome, bundles, &seen)? {
                    return Ok(code);
                }
                continue;
            }
            tracing::info!(verdict = %outcome.verdict, "the ranks did not move, but the job is not hung");
            // Looked stuck but is not: the rounds start counting again.
            suspect = 0;
        }
        note_cpu(&mut costs, cpu);
        if bundles >= opts.max_bundles {
            return end(
                "the most bundles were written (--max-bundles)",
                &costs,
                hang_bundles,
            );
        }
    }
}

fn note_cpu(costs: &mut Costs, before: Option<Duration>) {
    if let (Some(a), Some(b)) = (before, cpu_time()) {
        let d = b.saturating_sub(a);
        costs.cpu += d;
        costs.max_round_cpu = costs.max_round_cpu.max(d);
    }
}

/// After a bundle: `None` to keep watching, else the exit status.
fn after_bundle(
    w: &mut Watched<'_>,
    opts: &WatchOpts,
    outcome: Outcome,
    bundles: u32,
    seen: &std::collections::HashMap<u32, u64>,
) -> anyhow::Result<Option<ExitCode>> {
    let code = if outcome.hang {
        ExitCode::from(crate::cmd::HANG)
    } else {
        ExitCode::SUCCESS
    };
    match opts.then {
        Then::Keep if bundles < opts.max_bundles => Ok(None),
        Then::Keep | Then::Detach => {
            eprintln!("mpir: letting go of the job, which runs on");
            Ok(Some(code))
        }
        Then::Kill => {
            end_job(w, seen);
            Ok(Some(code))
        }
    }
}

/// Ends the job: SIGTERM to its starter (which ends its ranks), or to each rank without one;
/// each only while its pid still names the process first seen (`seen`: pid → start time).
fn end_job(w: &mut Watched<'_>, seen: &std::collections::HashMap<u32, u64>) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let pids: Vec<u32> = match w.session.starter_pid() {
        Some(p) => vec![p],
        None => readable(w.session).into_iter().map(|(_, p)| p).collect(),
    };
    // Let go of every process first: a signal to a held process would wait for the release.
    mpir_session::release_everything();
    for p in pids {
        if seen.get(&p).is_some_and(|&t| start_time(p) == Some(t)) {
            let _ = kill(Pid::from_raw(p as i32), Signal::SIGTERM);
        } else {
            eprintln!("mpir: pid {p} is not the job's process any more: left alone");
        }
    }
    eprintln!("mpir: the job was told to end (SIGTERM)");
    if let Some(c) = w.child.as_deref_mut() {
        let _ = c.wait();
    }
}

/// How long a starter may outlive every rank of its job before the watch stops waiting for
/// it and says no rank can be read (`mpirun` takes a few hundred milliseconds to clean up).
const STARTER_GRACE: Duration = Duration::from_secs(5);

/// [`job_ended`], asked again every 50 ms for up to `grace`.
fn job_ended_within(
    w: &mut Watched<'_>,
    starter: Option<(u32, Option<u64>)>,
    grace: Duration,
) -> Option<String> {
    let deadline = Instant::now() + grace;
    loop {
        if let Some(reason) = job_ended(w, starter) {
            return Some(reason);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Why the job is over, or `None` while it runs: the starter we launched exited, or the
/// starter we attached to is gone (or its pid now names another process).
fn job_ended(w: &mut Watched<'_>, starter: Option<(u32, Option<u64>)>) -> Option<String> {
    if let Some(c) = w.child.as_deref_mut() {
        if let Ok(Some(status)) = c.try_wait() {
            return Some(format!("the job ended ({status})"));
        }
        return None;
    }
    let (pid, started) = starter?;
    match start_time(pid) {
        None => Some(format!("the job ended (its starter, pid {pid}, is gone)")),
        Some(now) if Some(now) != started => {
            Some(format!("the job ended (pid {pid} is another process now)"))
        }
        Some(_) => None,
    }
}

/// The start time of `pid` (clock ticks since boot), `None` when it is gone or a zombie.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, state, start, _) = mpir_target::live::procfs::parse_stat(pid, &stat).ok()?;
    (!matches!(state, 'Z' | 'X')).then_some(start)
}

/// This node's ranks the session can read (rank, pid); processes named by pid have no rank
/// of their own and are numbered by position, as the session's reads number them.
fn readable(session: &Session) -> Vec<(u64, u32)> {
    session
        .known_ranks()
        .into_iter()
        .enumerate()
        .filter(|(_, (_, _, why))| why.is_none())
        .map(|(i, (r, p, _))| (r.unwrap_or(i as u64), p))
        .collect()
}

/// Compares each rank of `read` with where it was when last seen, as the library compares
/// samples ([`Position`]): (ranks compared, whether any moved).
fn compare(
    last: &mut std::collections::HashMap<u64, Position>,
    read: &StacksRead,
    options: &StackOptions,
) -> (usize, bool) {
    let mut compared = 0;
    let mut moved = false;
    for (rank, now) in Position::of(read, options) {
        if let Some(before) = last.get(&rank) {
            compared += 1;
            moved |= !now.same_as(before);
        }
        last.insert(rank, now);
    }
    (compared, moved)
}

/// The Slurm job's remaining time in seconds (`squeue -h -j J -o %L`), `None` when unlimited
/// or unknown.
fn slurm_time_left(job: u64) -> Option<u64> {
    let out = std::process::Command::new("squeue")
        .args(["-h", "-j", &job.to_string(), "-o", "%L"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    parse_slurm_time(String::from_utf8_lossy(&out.stdout).trim())
}

/// Slurm's time format: `[D-]HH:MM:SS`, `MM:SS`, or `UNLIMITED`/`NOT_SET` (`None`).
fn parse_slurm_time(s: &str) -> Option<u64> {
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    let secs = match parts.as_slice() {
        [h, m, s] => h * 3600 + m * 60 + s,
        [m, s] => m * 60 + s,
        [s] => *s,
        _ => return None,
    };
    Some(days * 86_400 + secs)
}

/// This process's CPU time (user + system), from /proc/self/stat.
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // USER_HZ is 100 on every Linux ABI.
    Some(Duration::from_millis(ticks * 10))
}

/// This process's peak resident memory (VmHWM), in kB.
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::parse_slurm_time;

    #[test]
    fn slurm_times_parse() {
        assert_eq!(parse_slurm_time("1-02:03:04"), Some(93_784));
        assert_eq!(parse_slurm_time("02:03:04"), Some(7384));
        assert_eq!(parse_slurm_time("3:04"), Some(184));
        assert_eq!(parse_slurm_time("59"), Some(59));
        assert_eq!(parse_slurm_time("UNLIMITED"), None);
        assert_eq!(parse_slurm_time("NOT_SET"), None);
        assert_eq!(parse_slurm_time(""), None);
        assert_eq!(parse_slurm_time("1:2:3:4"), None);
    }
}
