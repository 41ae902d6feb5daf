//! `mpir` — the reference tool: find every process of an MPI job and what its messages wait for.
//!
//! ```text
//! mpir launch [--json] [--hold] [--ranks LIST] [--timeout S] [--debug-dir DIR] -- STARTER ARGS…
//! mpir attach [--json] [--timeout S] [--debug-dir DIR] (PID | --slurm-job J[.S])
//! mpir core   [--json] [--exe PATH] [--debug-dir DIR] [--types FILE] CORE…
//! mpir queues (--starter PID | --slurm-job J[.S] | --pid PID…) [--dll PATH] [--types FILE] [--engine auto|dll|native]
//! mpir deadlock (--starter PID | --slurm-job J[.S] | --pid PID…) [--samples N] [--dot] [queues options]
//! mpir stacks (--starter PID | --slurm-job J[.S] | --pid PID… | --core CORE…) [--ranks LIST] [--threads] [--samples N] [--json|--dot|--folded]
//! mpir report (--starter PID | --slurm-job J[.S] | --pid PID… | --core CORE… | --from JSON…) [-o FILE] [queues options]
//! mpir watch (--starter PID | --slurm-job J[.S] | --pid PID…) [--out DIR] [--every S] [--cores] [--then keep|detach|kill]
//! mpir demo [-n N] [--html FILE]
//! mpir layouts [list | generate --object OBJ --release R --config C [--debug] --source S]
//! ```
//!
//! `launch` runs the starter (`mpiexec`, `orterun`, a wrapper that execs one…) under control,
//! prints the job once it is spawned, lets it run and exits with its status; `--hold` instead
//! hands the ranks over stopped (job-control stop) for another tool and exits at once. With
//! `--json` the job's own stdout goes to stderr, so that stdout carries the JSON only.
//! `attach` acquires the job of a running starter — or, through MPI2DD, of any rank, directory
//! or metadirectory — and leaves it running. `core` reads the same from core files: the job
//! from a starter's core, the message queues from ranks' cores.
//! `queues` stops every rank briefly, reads its message queues and lets it run again.
//!
//! Every command goes through `mpir_session` (acquire, hold while reading, read, release); this
//! crate parses arguments and renders what the session returns. Errors: one line with the
//! cause chain, exit status 1. JSON documents are described in `docs/cli-json.md`.

/// `println!` that survives a closed pipe (`mpir … | head`): see [`emit`].
macro_rules! outln {
    () => { $crate::emit(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::emit(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `print!` that survives a closed pipe.
macro_rules! out {
    ($($arg:tt)*) => { $crate::emit(format_args!($($arg)*)) };
}

mod args;
mod cmd;

/// The bundled demo job, for programs that want to run it (the library examples' tests do): its
/// starter, ready to run, and why it is not. The crate [`mpir_demo`] holds it.
pub mod demo_job {
    pub use mpir_demo::{DemoFilesError, starter};
}
mod errors;
mod progress;
mod render;

use std::process::ExitCode;

pub(crate) use args::{Common, session_options};
use clap::{ArgAction, Parser, Subcommand};
use cmd::{agent, core as cores, deadlock, demo, job, layouts, queues, report, stacks, watch};
use mpir_session::chain;

/// The argument with which `mpir` runs as its own out-of-process MQD DLL helper.
pub const HELPER_ARG: &str = "__mqd-host";

#[derive(Parser)]
#[command(
    name = "mpir",
    version,
    about = "Find every process of an MPI job (MPIR, MPI2DD) and its pending messages."
)]
struct Cli {
    /// More log output on stderr (-v: steps, -vv: details, -vvv: everything).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,
    /// Fetch debug files missing locally from the debuginfod servers named by DEBUGINFOD_URLS
    /// (the default when it is set; cached in $DEBUGINFOD_CACHE_PATH or
    /// $XDG_CACHE_HOME/debuginfod_client; DEBUGINFOD_TIMEOUT, DEBUGINFOD_MAXSIZE bound it).
    #[arg(long, global = true, overrides_with = "no_debuginfod")]
    debuginfod: bool,
    /// Never ask debuginfod servers, even when DEBUGINFOD_URLS is set.
    #[arg(long, global = true, overrides_with = "debuginfod")]
    no_debuginfod: bool,
    /// Keep symbol answers (the symbols asked of each library; the function, file and line at
    /// each address of a stack) in DIR between runs, by library build-id and size, so that
    /// the next read of the same libraries skips their DWARF and large symbol tables (e.g.
    /// a directory of this user's alone; `off`: none). Default: $MPIR_SYMBOL_CACHE, else
    /// $XDG_CACHE_HOME/mpir/symbols or ~/.cache/mpir/symbols (when that home is this user's).
    #[arg(long, global = true, value_name = "DIR|off")]
    symbol_cache: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run a starter under control and print its job.
    Launch {
        #[command(flatten)]
        common: Common,
        /// Hand the ranks over stopped, for another tool, and exit at once.
        #[arg(long)]
        hold: bool,
        /// Ranks to attach: a list and ranges, e.g. `0-3,7,12-`; all by default.
        #[arg(long, value_name = "LIST")]
        ranks: Option<mpir_types::ranks::RankSet>,
        /// Longest wait for any event, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// Also have each other node's agent prove that node's ranks once the job runs
        /// (Open MPI 4's orterun starts them with the job, as its tool daemons; other engines
        /// as `queues` starts them): the notes say how many were proven and why any was not.
        #[arg(long, conflicts_with = "hold")]
        verify: bool,
        /// Have every rank record what it waits for (mpir-rs's preload library, `mpir
        /// preload`), through the starter's environment: `deadlock` then reads who waits for
        /// whom on any MPI.
        #[arg(long)]
        record_waits: bool,
        /// Watch the job once it runs, as `mpir watch` does, until it ends (the watch's
        /// options below); incompatible with --hold.
        #[arg(long, conflicts_with_all = ["hold", "verify"])]
        watch: bool,
        #[command(flatten)]
        watch_opts: watch::WatchOpts,
        #[command(flatten)]
        remote: args::RemoteArgs,
        /// The starter command.
        #[arg(trailing_var_arg = true, required = true)]
        starter: Vec<String>,
    },
    /// Acquire the job of a running starter (or MPI2DD process) and leave it running.
    Attach {
        #[command(flatten)]
        common: Common,
        /// Longest wait for any event, in seconds.
        #[arg(long, default_value_t = 60)]
        timeout: u64,
        /// A Slurm job (or job step, `J.S`) whose srun runs on this node, instead of a pid: that
        /// srun is the starter.
        #[arg(long = "slurm-job", value_name = "J[.S]", conflicts_with = "pid")]
        slurm_job: Option<mpir_acquire::slurm::StepId>,
        /// The starter's pid.
        #[arg(required_unless_present = "slurm_job")]
        pid: Option<u32>,
        /// Also have each other node's agent prove that node's ranks (started as `queues`
        /// starts them; nothing is stopped): the notes say how many were proven and why any
        /// was not.
        #[arg(long)]
        verify: bool,
        #[command(flatten)]
        remote: args::RemoteArgs,
    },
    /// The same reports from core files: a starter's core gives the job, ranks' cores their
    /// message queues.
    Core(cores::CoreArgs),
    /// Message queues (pending sends, receives, unexpected messages) of every rank.
    Queues(queues::QueuesArgs),
    /// Who waits for whom across the ranks; exit status 3 when a cycle is found, 0 when not.
    Deadlock(deadlock::DeadlockArgs),
    /// Every rank's stacks merged into one call-prefix tree (like STAT): text, JSON, DOT or
    /// folded stacks; exit status 4 when some ranks could not be read.
    Stacks(stacks::StacksArgs),
    /// One self-contained HTML report of the job (verdict, merged stacks, wait-for graph,
    /// pending operations, the job), to open in any browser, offline; exit status as
    /// `deadlock`'s.
    Report(report::ReportArgs),
    /// Watch a running job and write a bundle (HTML report, JSON documents, optionally a
    /// core per stack class) when it hangs, when its Slurm time limit nears, or on SIGUSR1;
    /// exit status 3 after a hang's bundle, 0 when the job ended without one.
    Watch(watch::WatchArgs),
    /// Run the bundled demo job (no MPI needed): job, queues and deadlock report.
    Demo(demo::DemoArgs),
    /// The Open MPI struct layouts shipped in this binary, which `queues` and `deadlock` use
    /// for a stock Open MPI without debug information once one is proven on the process: list
    /// them, or generate one from a types object.
    Layouts(layouts::LayoutsArgs),
    /// Print the path of the wait-state library to put in a job's `LD_PRELOAD` (one library
    /// for every MPI: it tells MPICH's family and Open MPI apart by itself), e.g. `mpiexec
    /// -genv LD_PRELOAD "$(mpir preload)" ...`, `mpirun -x LD_PRELOAD="$(mpir preload)" ...`.
    Preload,
    /// Serve this node's ranks of a job to a front end (over stdin/stdout, or over TLS with
    /// --connect): started by `mpir` itself on a job's other nodes (through srun, hydra,
    /// orterun, PRRTE or --agent-launch), not by hand.
    Agent(agent::AgentArgs),
    /// Print the completion script for a shell (e.g. `mpir completions bash >
    /// ~/.local/share/bash-completion/completions/mpir`).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page, in roff (`mpir man > mpir.1; man ./mpir.1`), or a subcommand's
    /// (`mpir man queues > mpir-queues.1`).
    Man {
        /// The subcommand whose page to print.
        subcommand: Option<String>,
    },
}

/// The completion script for `shell`, generated from the argument definitions (so it always
/// matches this binary).
fn completions(shell: clap_complete::Shell) -> ExitCode {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "mpir", &mut script);
    write_out(|w| std::io::Write::write_all(w, &script));
    ExitCode::SUCCESS
}

/// A manual page, generated from the argument definitions: `mpir(1)` (which lists the
/// subcommands as `mpir-<name>(1)`), or that of one subcommand.
fn man(subcommand: Option<&str>) -> ExitCode {
    use clap::CommandFactory;
    let cmd = Cli::command();
    let page_of = match subcommand {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            Some(sub) => sub
                .clone()
                .display_name(format!("mpir-{name}"))
                .bin_name(format!("mpir {name}"))
                .version(env!("CARGO_PKG_VERSION")),
            None => {
                eprintln!("mpir: error: no subcommand {name:?}");
                return ExitCode::FAILURE;
            }
        },
    };
    let mut page = Vec::new();
    if let Err(e) = clap_mangen::Man::new(page_of).render(&mut page) {
        eprintln!("mpir: error: cannot render the manual page: {e}");
        return ExitCode::FAILURE;
    }
    write_out(|w| std::io::Write::write_all(w, &page));
    ExitCode::SUCCESS
}

/// Writes to stdout. When the reader has gone away (a closed pipe) anything still held is
/// released and the tool ends quietly with the status a shell gives SIGPIPE (141).
pub(crate) fn emit(args: std::fmt::Arguments<'_>) {
    use std::io::Write;
    if let Err(e) = std::io::stdout().lock().write_fmt(args) {
        output_failed(&e);
    }
}

/// The output cannot be written: lets go of everything held and ends (141, SIGPIPE's status,
/// quietly, when the reader has gone away; else 1 with the error).
fn output_failed(e: &std::io::Error) -> ! {
    mpir_session::release_everything();
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(141);
    }
    eprintln!("mpir: error: cannot write the output: {e}");
    std::process::exit(1);
}

/// Writes a whole document to stdout through one large buffer (a million-rank table is one
/// stream, not a million line-buffered writes nor one huge string), with [`emit`]'s handling
/// of a closed pipe.
pub(crate) fn write_out(
    f: impl FnOnce(&mut std::io::BufWriter<std::io::StdoutLock<'static>>) -> std::io::Result<()>,
) {
    use std::io::Write;
    let mut w = std::io::BufWriter::with_capacity(1 << 18, std::io::stdout().lock());
    if let Err(e) = f(&mut w).and_then(|()| w.flush()) {
        output_failed(&e);
    }
}

/// `--debuginfod` (`Some(true)`), `--no-debuginfod` (`Some(false)`), or neither (the
/// environment decides), set once from the command line.
static DEBUGINFOD: std::sync::OnceLock<Option<bool>> = std::sync::OnceLock::new();

/// `--symbol-cache`: the directory, `None` for `off`; unset: the environment decides.
static SYMBOL_CACHE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();

/// Runs `mpir` with the process's arguments; the exit status to end with. Run as
/// `mpir __mqd-host …` (see [`HELPER_ARG`]) it is the out-of-process host of an MPI's
/// message-queue DLL instead.
pub fn main() -> ExitCode {
    if std::env::args_os().nth(1).is_some_and(|a| a == HELPER_ARG) {
        // Started by ourselves as the out-of-process DLL host (see `queues`).
        return mpir_mqd::helper_main();
    }
    let cli = Cli::parse();
    progress::init_logging(cli.verbose);
    let _ = DEBUGINFOD.set(match (cli.debuginfod, cli.no_debuginfod) {
        (true, _) => Some(true),
        (_, true) => Some(false),
        _ => None,
    });
    if let Some(dir) = &cli.symbol_cache {
        let _ = SYMBOL_CACHE.set((dir.as_os_str() != "off").then(|| dir.clone()));
    }
    if cli.debuginfod && std::env::var("DEBUGINFOD_URLS").map_or(true, |u| u.trim().is_empty()) {
        eprintln!("mpir: --debuginfod: DEBUGINFOD_URLS names no server; nothing will be fetched");
    }
    // Told to stop (Ctrl-C, SIGTERM, a lost terminal), on a panic or an `exit`: every process
    // we hold is released first — breakpoints out, threads running — then the signal takes its
    // course.
    if let Err(e) = mpir_session::install_cleanup() {
        eprintln!("mpir: warning: {}", chain(&e));
    }
    let result = match &cli.command {
        Cmd::Launch {
            common,
            hold,
            ranks,
            timeout,
            verify,
            record_waits,
            watch,
            watch_opts,
            remote,
            starter,
        } => job::launch(
            common,
            &job::LaunchArgs {
                hold: *hold,
                ranks: ranks.clone(),
                timeout: *timeout,
                verify: verify.then_some(remote),
                record_waits: *record_waits,
                watch: watch.then_some(watch_opts),
            },
            starter,
        ),
        Cmd::Attach {
            common,
            timeout,
            slurm_job,
            pid,
            verify,
            remote,
        } => job::attach(common, *timeout, *pid, *slurm_job, verify.then_some(remote)),
        Cmd::Core(args) => cores::run(args),
        Cmd::Queues(args) => queues::run(args),
        Cmd::Deadlock(args) => deadlock::run(args),
        Cmd::Stacks(args) => stacks::run(args),
        Cmd::Report(args) => report::run(args),
        Cmd::Watch(args) => watch::run(args),
        Cmd::Demo(args) => demo::run(args),
        Cmd::Layouts(args) => layouts::run(args),
        Cmd::Preload => mpir_waits::library()
            .map(|p| {
                outln!("{}", p.display());
                ExitCode::SUCCESS
            })
            .map_err(anyhow::Error::from),
        Cmd::Agent(args) => agent::run(args),
        Cmd::Completions { shell } => return completions(*shell),
        Cmd::Man { subcommand } => return man(subcommand.as_deref()),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{}", errors::report(&e));
            ExitCode::FAILURE
        }
    }
}
