//! Acquisition through the PMIx tool interface (Open MPI 5's `mpirun`, i.e. PRRTE's
//! `prterun`, which has no MPIR symbol), into the same [`Acquired`] as MPIR's: the job's
//! table is `PMIX_QUERY_PROC_TABLE` of its namespace ([`crate::pmix::table`]), ranks are this
//! node's only, each proven (`attach_proven`) before it is stopped, and the release
//! is PMIx's.
//!
//! - Attach (`attach`): the launcher's tool rendezvous file is validated
//!   ([`mpir_pmix::rendezvous`]), the launcher's own libpmix loaded, one tool connection made;
//!   the job is the namespace whose processes descend from the launcher (tools' namespaces,
//!   which PRRTE keeps listed, are not). Nothing is written into the launcher.
//! - Launch (`launch`): the launcher runs with `PRTE_MCA_rtos=stop-in-init` in its
//!   environment, so the ranks wait in `PMIx_Init`; once its rendezvous file appears (bounded)
//!   the tool connects and waits (bounded) until the table lists every rank with a pid; the
//!   release is `PMIX_DEBUGGER_RELEASE` to the job's namespace. Ranks a launcher stopped at
//!   their exec (`--stop-on-exec`) are continued with `SIGCONT` ([`Note::RankContinued`]).
//!   If the launch fails after the launcher started, the launcher is killed: a job held in
//!   `PMIx_Init` with nobody to release it would wait for ever.
//! - Job end: [`Acquired::wait_job_end`] (`PMIX_EVENT_JOB_END`, or the server gone).

use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpir_pmix::{Library, LoadOptions, ProcInfo, Server, Tool, ToolEvent};
use mpir_target::live::procfs;
use mpir_target::live::tracer::Tracer;

use super::Acquired;
use crate::error::{AcquireError, PmixCause};
use crate::identity::Refusal;
use crate::job::{Job, RankControl, Starter, classify_hosts};
use crate::note::Note;
use crate::options::AcquireOptions;
use crate::pmix::{JobEnd, PmixJob, PmixProc, table};

/// Between two looks at a rendezvous file or a table that is not complete yet.
const POLL: Duration = Duration::from_millis(20);

/// The environment variable that makes PRRTE hold the ranks in `PMIx_Init` for a tool.
pub const STOP_IN_INIT_ENV: (&str, &str) = ("PRTE_MCA_rtos", "stop-in-init");

/// The PMIx side of a held or launched job.
pub(crate) struct Control {
    conn: Connection,
    nspace: String,
    /// The launcher holds the ranks in `PMIx_Init` until `PMIX_DEBUGGER_RELEASE`.
    stopped_in_init: bool,
    /// Ranks the launcher stopped at their exec (`--stop-on-exec`): pid and start time.
    exec_stopped: Vec<(u32, u64)>,
    /// The job end, once seen.
    ended: Option<JobEnd>,
    /// Ranks released alone ([`Acquired::release_ranks`]): the full release then names the
    /// others explicitly (a wildcard release after a partial one did not reach every rank of a
    /// 16-rank job, measured).
    released_alone: Vec<u32>,
}

impl Control {
    /// The connection (a handle that keeps it).
    pub(crate) fn connection(&self) -> Connection {
        self.conn.clone()
    }
}

impl std::fmt::Debug for Control {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Control")
            .field("connection", &self.conn)
            .field("nspace", &self.nspace)
            .field("stopped_in_init", &self.stopped_in_init)
            .finish_non_exhaustive()
    }
}

fn pmix_error(
    pid: u32,
    context: impl Into<String>,
) -> impl FnOnce(mpir_pmix::PmixError) -> AcquireError {
    let context = context.into();
    move |e| AcquireError::Pmix {
        pid,
        context,
        source: PmixCause::new(e),
    }
}

/// The process's PMIx tool connection to one launcher (`PMIx_tool_init` is process-wide):
/// every job acquired from that launcher, and every [`Connection`] handle, shares it, and it is
/// finalized when the last of them is dropped — a launcher (PRRTE 3.0.14's `prterun`) whose
/// job ended does not exit while a tool is connected to it, and tools take turns
/// ([`mpir_pmix::TURN_GAP`]).
struct Kept {
    tool: Tool,
    launcher: u32,
}

/// A handle on the process's PMIx tool connection to a launcher: while one lives, every
/// acquisition from that launcher reuses the connection instead of making a new one (a session
/// keeps one for its life, so that each hold does not reconnect).
#[derive(Clone)]
pub struct Connection(Arc<Kept>);

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("launcher", &self.0.launcher)
            .field("tool", &self.0.tool)
            .finish()
    }
}

impl Connection {
    /// The launcher's pid.
    pub fn launcher(&self) -> u32 {
        self.0.launcher
    }
}

/// The connection in use, if any (weak: the users keep it alive).
static SHARED: std::sync::Mutex<Option<(std::sync::Weak<Kept>, u64)>> = std::sync::Mutex::new(None);

fn lock<T>(m: &'static std::sync::Mutex<T>) -> std::sync::MutexGuard<'static, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The connection to launcher `pid`: the one in use, or a new one.
fn connection(pid: u32, timeout: Duration) -> Result<Connection, AcquireError> {
    let mut shared = lock(&SHARED);
    let start_time = procfs::start_time(pid).ok();
    if let Some((weak, started)) = shared.as_ref()
        && let Some(kept) = weak.upgrade()
    {
        if kept.launcher == pid && Some(*started) == start_time {
            return Ok(Connection(kept));
        }
        return Err(AcquireError::Usage(format!(
            "this process is connected to the PMIx server of launcher {} (a job acquired from \
             it is still in use); drop that job before acquiring launcher {pid}'s",
            kept.launcher
        )));
    }
    let lib = Library::load(&LoadOptions::default().with_launcher_pid(pid))
        .map_err(pmix_error(pid, "load libpmix"))?;
    let tool = Tool::connect(&lib, &Server::Pid(pid), timeout)
        .map_err(pmix_error(pid, "connect to the launcher as a PMIx tool"))?;
    let kept = Arc::new(Kept {
        tool,
        launcher: pid,
    });
    *shared = Some((Arc::downgrade(&kept), start_time.unwrap_or(0)));
    Ok(Connection(kept))
}

/// The process's connection to launcher `pid`, while a job acquired from it (or a handle)
/// keeps it: for a caller that acquires the same job again (a session's holds) without a new
/// connection.
pub fn connection_to(pid: u32) -> Option<Connection> {
    let shared = lock(&SHARED);
    let kept = shared.as_ref()?.0.upgrade()?;
    (kept.launcher == pid).then_some(Connection(kept))
}

/// Whether `pid` is a PMIx server a tool may connect to: a valid tool rendezvous file names
/// it (the detection of [`crate::InterfaceChoice::Auto`], for a process with no MPIR symbol).
pub fn is_pmix_server(pid: u32) -> bool {
    mpir_pmix::rendezvous(pid).is_ok()
}

/// Whether `program` (a command's program, found through `PATH` when it is a bare name, its
/// symbolic links followed) is a PRRTE launcher: PRRTE's `prterun`/`prte` itself, or a program
/// of an installation whose directory holds `prterun` and no `orterun` (Open MPI 5's `mpirun`
/// and `mpiexec` are shims beside `prterun`; an Open MPI 4 `mpirun` is `orterun`, an MPIR
/// starter, even where PRRTE is installed too). Launch mode's [`crate::InterfaceChoice::Auto`]
/// then goes through PMIx; `--interface` decides otherwise.
pub fn is_prrte_launcher(program: &std::ffi::OsStr) -> bool {
    let path = std::path::Path::new(program);
    let found = if path.components().count() > 1 {
        Some(path.to_path_buf())
    } else {
        std::env::var_os("PATH").and_then(|dirs| {
            std::env::split_paths(&dirs)
                .map(|d| d.join(path))
                .find(|p| p.is_file())
        })
    };
    let Some(real) = found.and_then(|p| std::fs::canonicalize(p).ok()) else {
        return false;
    };
    let Some(dir) = real.parent() else {
        return false;
    };
    let same = |name: &str| std::fs::canonicalize(dir.join(name)).is_ok_and(|p| p == real);
    if same("prterun") || same("prte") {
        return true;
    }
    dir.join("prterun").is_file() && !dir.join("orterun").exists()
}

/// `PMIX_PROC_STATE_CONNECTED`: the process has connected to its PMIx server.
const STATE_CONNECTED: u8 = 6;

/// Whether `pid` is in a job-control stop (state `T` in `/proc/PID/stat`).
fn job_stopped(pid: i32) -> bool {
    let Ok(pid) = u32::try_from(pid) else {
        return false;
    };
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|text| procfs::parse_stat(pid, &text).ok())
        .is_some_and(|(_, state, _, _)| state == 'T')
}

/// The job's namespace and table: the first namespace (in the server's order) other than this
/// tool's whose table is not empty and none of whose processes on this node (`node`: a pid
/// of another node's process means nothing here, and may name an unrelated local process) is
/// a process that does not descend from the launcher (a tool's). With `complete`, waits until
/// every rank has a pid (a launch), bounded by `deadline`.
fn find_job(
    tool: &Tool,
    launcher: u32,
    node: &mpir_types::node::ThisNode,
    complete: bool,
    timeout: Duration,
) -> Result<(String, Vec<ProcInfo>), AcquireError> {
    let deadline = Instant::now() + timeout;
    let me = tool.me().0.to_string();
    let mut last = String::from("no namespace with processes");
    loop {
        let namespaces = tool
            .namespaces()
            .map_err(pmix_error(launcher, "list the PMIx server's namespaces"))?;
        for ns in namespaces.iter().filter(|ns| **ns != me) {
            let Ok(procs) = tool.proc_table(ns) else {
                continue;
            };
            let ours = procs.iter().all(|p| {
                let pid = u32::try_from(p.pid).unwrap_or(0);
                pid == 0
                    || !node.classify(Some(&p.host)).is_local()
                    || !std::path::Path::new(&format!("/proc/{pid}")).exists()
                    || procfs::parent_of(pid)
                        .is_some_and(|pp| super::prove::parent_line_reaches(pp, launcher))
            });
            if procs.is_empty() || !ours {
                continue;
            }
            // Launch: every rank has a pid and has connected to the server (it waits in
            // PMIx_Init for the release: a release sent before a rank got there is lost), or
            // was stopped at its exec by the launcher (--stop-on-exec).
            let waiting = procs
                .iter()
                .filter(|p| p.pid <= 0 || (p.state < STATE_CONNECTED && !job_stopped(p.pid)))
                .count();
            if complete && waiting > 0 {
                last = format!(
                    "{ns}: {waiting} of {} ranks not yet waiting in PMIx_Init",
                    procs.len()
                );
                break;
            }
            return Ok((ns.clone(), procs));
        }
        if Instant::now() >= deadline {
            return Err(AcquireError::Timeout {
                pid: launcher,
                waiting_for: format!("the job's PMIx process table ({last})"),
                after: timeout,
            });
        }
        std::thread::sleep(POLL);
    }
}

/// The job in the model every caller reads (see the [module](self)).
fn build_job(
    launcher: u32,
    nspace: &str,
    procs: &[ProcInfo],
    tool: &Tool,
    options: &AcquireOptions,
) -> Result<Job, AcquireError> {
    let rows: Vec<PmixProc> = procs
        .iter()
        .map(|p| PmixProc::new(p.rank, &p.host, &p.executable, p.pid, p.state))
        .collect();
    let table = table(&rows, &options.read)?;
    let node = options.node_facts();
    let host_locality = classify_hosts(&table, &node);
    let lib = tool.library();
    let mut evidence = PmixJob::new(nspace, lib.path(), lib.version());
    if let Ok(r) = mpir_pmix::rendezvous(launcher) {
        evidence.server_uri = Some(r.uri);
        evidence.rendezvous = Some(r.file);
    }
    let mut states = vec![0u8; table.resolved.len()];
    for p in procs {
        if let Some(s) = states.get_mut(p.rank as usize) {
            *s = p.state;
        }
    }
    evidence.states = states;
    Ok(Job {
        starter: Starter {
            pid: launcher,
            breakpoint: 0,
            image: std::fs::read_link(format!("/proc/{launcher}/exe"))
                .ok()
                .map(|p| p.display().to_string()),
            flags: Default::default(),
            launcher: None,
            set_being_debugged: false,
            keeps_being_debugged: false,
            debug_state: None,
            job_id: None,
            step_id: None,
        },
        table,
        control: BTreeMap::new(),
        containers: BTreeMap::new(),
        notes: Vec::new(),
        this_node: node,
        discovered: None,
        pmix: Some(evidence),
        host_locality,
    })
}

/// Holds the selected, proven local ranks of `job` (when `options.hold`): the tracer holding
/// them, `None` when nothing is to be held.
fn hold_ranks(job: &mut Job, options: &AcquireOptions) -> Result<Option<Tracer>, AcquireError> {
    if !options.hold {
        return Ok(None);
    }
    let mut wanted = Vec::new();
    let mut invalid = Vec::new();
    for r in job.ranks() {
        if !options.ranks.contains(r.rank) || !job.locality(r.rank).is_local() {
            continue;
        }
        match u32::try_from(r.pid) {
            Ok(p) if p > 0 => wanted.push((r.rank, p)),
            _ => invalid.push((r.rank, r.pid)),
        }
    }
    for (rank, pid) in invalid {
        job.control.insert(
            rank,
            RankControl::Refused {
                reason: Refusal::InvalidPid { pid },
            },
        );
    }
    let tracer = Tracer::with_options(options.tracer_options())
        .map_err(AcquireError::target("start the tracer"))?;
    let outcomes = super::attach_proven(
        &tracer,
        job.starter.pid,
        options.allow_other_users,
        Some(&job.table.resolved),
        &wanted,
    )?;
    for o in outcomes {
        job.control.insert(o.rank, o.control);
    }
    Ok(Some(tracer))
}

/// The acquired job, from a connected tool.
fn acquired(
    launcher: u32,
    conn: Connection,
    procs: &[ProcInfo],
    nspace: String,
    stopped_in_init: bool,
    options: &AcquireOptions,
) -> Result<Acquired, AcquireError> {
    let mut job = build_job(launcher, &nspace, procs, &conn.0.tool, options)?;
    if let Some(p) = job.pmix.as_mut() {
        p.stopped_in_init = stopped_in_init;
    }
    let exec_stopped = if stopped_in_init {
        exec_stopped(&job, options)
    } else {
        Vec::new()
    };
    let tracer = hold_ranks(&mut job, options)?;
    let held = tracer.is_some() || stopped_in_init;
    let mut a = Acquired {
        job,
        debug: options.debug.clone(),
        gate: crate::GateRelease::Never,
        timeout: options.timeout,
        tracer,
        starter: None,
        child: None,
        held,
        armed: HashSet::new(),
        wake: Vec::new(),
        parked: None,
        pmix: Some(Box::new(Control {
            conn,
            nspace,
            stopped_in_init,
            exec_stopped,
            ended: None,
            released_alone: Vec::new(),
        })),
    };
    if !options.hold && held {
        let notes = a.release()?;
        a.job.notes.extend(notes);
    }
    Ok(a)
}

/// The proven local ranks in a job-control stop that no tracer holds: stopped by the launcher
/// at their exec (`--stop-on-exec`), to be continued with `SIGCONT` on release.
fn exec_stopped(job: &Job, options: &AcquireOptions) -> Vec<(u32, u64)> {
    let Ok(mut prover) = super::prove::Prover::new(job.starter.pid, options.allow_other_users)
    else {
        return Vec::new();
    };
    job.ranks()
        .filter(|r| job.locality(r.rank).is_local())
        .filter_map(|r| {
            let proven = prover.prove(r.rank, r.pid, r.executable).ok()?;
            // The proof read the state: only a job-control stop ('T', not a tracer's 't') is
            // worth the look at who traces it.
            if proven.facts.state != 'T' {
                return None;
            }
            let pid = u32::try_from(r.pid).ok()?;
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
            let untraced = status
                .lines()
                .find_map(|l| l.strip_prefix("TracerPid:"))
                .is_some_and(|v| v.trim() == "0");
            untraced.then_some((pid, proven.facts.start_time))
        })
        .collect()
}

/// Attach mode through PMIx: the running job of launcher `pid` (see the [module](self)).
pub(crate) fn attach(pid: u32, options: AcquireOptions) -> Result<Acquired, AcquireError> {
    let mut options = options;
    if options.this_node.is_none() {
        options.this_node = Some(mpir_target::live::node::this_node());
    }
    mpir_pmix::rendezvous(pid).map_err(pmix_error(pid, "find the launcher's PMIx server"))?;
    let conn = connection(pid, options.timeout)?;
    let node = options.node_facts();
    let (nspace, procs) = find_job(&conn.0.tool, pid, &node, false, options.timeout)?;
    acquired(pid, conn, &procs, nspace, false, &options)
}

/// Launch mode through PMIx: runs `command` (Open MPI 5's `mpirun`, or `prterun`) with the
/// ranks held in `PMIx_Init`, and acquires its job (see the [module](self)).
pub(crate) fn launch(command: Command, options: AcquireOptions) -> Result<Acquired, AcquireError> {
    let mut command = command;
    command.env(STOP_IN_INIT_ENV.0, STOP_IN_INIT_ENV.1);
    let mut child = command
        .spawn()
        .map_err(|e| AcquireError::Usage(format!("cannot start the launcher: {e}")))?;
    let pid = child.id();
    match launched(pid, &mut child, options) {
        Ok(mut a) => {
            a.child = Some(child);
            Ok(a)
        }
        Err(e) => {
            // Nobody would release a job held in PMIx_Init: it ends with the launch.
            terminate(&mut child);
            Err(e)
        }
    }
}

/// Ends a launcher we started: `SIGTERM` (it ends its ranks and removes its session
/// directory), up to 10 s, then `SIGKILL`; reaped either way.
fn terminate(child: &mut std::process::Child) {
    if !matches!(child.try_wait(), Ok(None)) {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(POLL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn launched(
    pid: u32,
    child: &mut std::process::Child,
    options: AcquireOptions,
) -> Result<Acquired, AcquireError> {
    let mut options = options;
    if options.this_node.is_none() {
        options.this_node = Some(mpir_target::live::node::this_node());
    }
    let deadline = Instant::now() + options.timeout;
    let ended = |child: &mut std::process::Child, waiting_for: &str| match child.try_wait() {
        Ok(Some(status)) => Some(AcquireError::StarterEnded {
            pid,
            how: format!("exited ({status})"),
            waiting_for: waiting_for.into(),
        }),
        _ => None,
    };
    // The launcher's rendezvous file, once it is written.
    loop {
        if let Some(e) = ended(child, "its PMIx tool rendezvous file") {
            return Err(e);
        }
        match mpir_pmix::rendezvous(pid) {
            Ok(_) => break,
            Err(e) if Instant::now() >= deadline => {
                return Err(pmix_error(
                    pid,
                    "wait for the launcher's PMIx rendezvous file",
                )(e));
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
    let left = deadline.saturating_duration_since(Instant::now()).max(POLL);
    let conn = connection(pid, left)?;
    let node = options.node_facts();
    let found = find_job(&conn.0.tool, pid, &node, true, left);
    let (nspace, procs) = match found {
        Err(AcquireError::Timeout { waiting_for, .. }) => {
            return Err(ended(child, &waiting_for).unwrap_or(AcquireError::Timeout {
                pid,
                waiting_for,
                after: options.timeout,
            }));
        }
        other => other?,
    };
    acquired(pid, conn, &procs, nspace, true, &options)
}

/// [`Acquired::release`] of a job acquired through PMIx: the held ranks detached, then
/// `PMIX_DEBUGGER_RELEASE` to the job's namespace when the launcher holds it in `PMIx_Init`,
/// then `SIGCONT` to the ranks it stopped at their exec (each only while its start time is the
/// one proven). The tool connection stays, for [`Acquired::wait_job_end`].
pub(crate) fn release(a: &mut Acquired) -> Result<Vec<Note>, AcquireError> {
    let mut notes = Vec::new();
    if let Some(tracer) = a.tracer.take() {
        let pids = a.job.attached_pids();
        match tracer.detach_many(&pids) {
            Ok(results) => {
                for (r, &pid) in results.into_iter().zip(&pids) {
                    if let Err(error) = r {
                        notes.push(Note::DetachFailed { pid, error });
                    }
                }
            }
            Err(error) => notes.push(Note::DetachFailed { pid: 0, error }),
        }
    }
    let Some(control) = a.pmix.as_mut() else {
        return Ok(notes);
    };
    let released = if control.stopped_in_init {
        control.stopped_in_init = false;
        let rest: Vec<u32> = (0..a.job.len() as u32)
            .filter(|r| !control.released_alone.contains(r))
            .collect();
        let ranks = (!control.released_alone.is_empty()).then_some(rest.as_slice());
        match ranks {
            Some([]) => Ok(()),
            ranks => control
                .conn
                .0
                .tool
                .release(&control.nspace, ranks)
                .map_err(pmix_error(
                    a.job.starter.pid,
                    "release the job (PMIX_DEBUGGER_RELEASE)",
                )),
        }
    } else {
        Ok(())
    };
    for (pid, start) in std::mem::take(&mut control.exec_stopped) {
        notes.extend(super::release::continue_stopped(
            pid,
            start,
            "the launcher stopped it at its exec (--stop-on-exec), which no PMIx event \
             continues",
        ));
    }
    if let Some(p) = a.job.pmix.as_mut() {
        p.stopped_in_init = false;
    }
    released.map(|()| notes)
}

/// [`Acquired::hand_over`] of a job acquired through PMIx: the held ranks detached but left
/// stopped, and the job left held in `PMIx_Init` (when it is) for the other tool to release.
pub(crate) fn hand_over(a: &mut Acquired) -> Vec<u32> {
    let mut stopped = Vec::new();
    if let Some(tracer) = a.tracer.take() {
        for pid in a.job.attached_pids() {
            match tracer.detach_leaving_stopped(pid) {
                Ok(()) => stopped.push(pid),
                Err(error) => a.job.notes.push(Note::HandOverFailed { pid, error }),
            }
        }
    }
    if let Some(c) = a.pmix.as_mut() {
        c.stopped_in_init = false;
        c.exec_stopped.clear();
    }
    stopped
}

/// [`Acquired::release_ranks`] for a job held in `PMIx_Init`.
pub(crate) fn release_ranks(a: &mut Acquired, ranks: &[u32]) -> Result<(), AcquireError> {
    let pid = a.job.starter.pid;
    match a.pmix.as_mut() {
        Some(c) if c.stopped_in_init => {
            c.conn
                .0
                .tool
                .release(&c.nspace, Some(ranks))
                .map_err(pmix_error(pid, "release ranks (PMIX_DEBUGGER_RELEASE)"))?;
            c.released_alone.extend_from_slice(ranks);
            Ok(())
        }
        _ => Err(AcquireError::Usage(
            "release_ranks: no job held in PMIx_Init by its launcher (only a PMIx launch \
             holds one)"
                .into(),
        )),
    }
}

/// [`Acquired::spawn_tool_daemons`].
pub(crate) fn spawn_tool_daemons(
    a: &Acquired,
    argv: &[String],
    per_node: u16,
) -> Result<String, AcquireError> {
    let pid = a.job.starter.pid;
    let Some(c) = a.pmix.as_ref() else {
        return Err(AcquireError::Usage(
            "spawn_tool_daemons: the job was not acquired through PMIx (MPIR's tool daemons \
             are AcquireOptions::with_tool_daemon)"
                .into(),
        ));
    };
    c.conn
        .0
        .tool
        .spawn_daemons(&c.nspace, argv, per_node)
        .map_err(pmix_error(pid, "start tool daemons (PMIx_Spawn)"))
}

/// The first `pmix_proc_state_t` of a terminated process (`PMIX_PROC_STATE_TERMINATED`;
/// every later state is an end too: killed, aborted, failed…).
const STATE_TERMINATED: u8 = 20;

/// How often [`wait_job_end`] reads the table while no event comes.
const END_POLL: Duration = Duration::from_millis(200);

/// [`Acquired::wait_job_end`]: `PMIX_EVENT_JOB_END` for the job, or its table showing every
/// process terminated (PRRTE 3.0.14 sends the event only to the tool that spawned the job —
/// measured: none came to a tool that attached, or launched the launcher itself), or the job
/// gone from the server.
pub(crate) fn wait_job_end(
    a: &mut Acquired,
    timeout: Duration,
) -> Result<Option<JobEnd>, AcquireError> {
    let Some(c) = a.pmix.as_mut() else {
        return Err(AcquireError::Usage(
            "wait_job_end: the job was not acquired through PMIx".into(),
        ));
    };
    if let Some(e) = &c.ended {
        return Ok(Some(e.clone()));
    }
    let deadline = Instant::now() + timeout;
    let end = |status| JobEnd {
        nspace: c.nspace.clone(),
        status,
    };
    let found = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match c.conn.0.tool.next_event(left.min(END_POLL)) {
            Some(ToolEvent::JobEnd { nspace, status }) if nspace == c.nspace => {
                break Some(end(Some(status)));
            }
            Some(ToolEvent::ServerLost) => break Some(end(None)),
            _ => {}
        }
        match c.conn.0.tool.proc_table(&c.nspace) {
            Ok(procs) if !procs.is_empty() && procs.iter().all(|p| p.state >= STATE_TERMINATED) => {
                let status = procs.iter().map(|p| p.exit_code).find(|&x| x != 0);
                break Some(end(Some(status.unwrap_or(0))));
            }
            Ok(_) => {}
            // The job is gone from the server (or the server is).
            Err(_) => break Some(end(None)),
        }
        if left.is_zero() {
            break None;
        }
    };
    if let Some(e) = &found {
        c.ended = Some(e.clone());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prrte_installation_is_recognised_by_its_files() {
        let root = std::env::temp_dir().join(format!("mpir-prrte-{}", std::process::id()));
        let bin = root.join("bin");
        std::fs::create_dir_all(&bin).unwrap();
        for f in ["prterun", "mpirun"] {
            std::fs::write(bin.join(f), "").unwrap();
        }
        assert!(is_prrte_launcher(bin.join("mpirun").as_os_str()));
        assert!(is_prrte_launcher(bin.join("prterun").as_os_str()));
        // Open MPI 4 beside a PRRTE: its mpirun is orterun, an MPIR starter.
        std::fs::write(bin.join("orterun"), "").unwrap();
        assert!(!is_prrte_launcher(bin.join("mpirun").as_os_str()));
        assert!(is_prrte_launcher(bin.join("prterun").as_os_str()));
        assert!(!is_prrte_launcher(root.join("bin/missing").as_os_str()));
        assert!(!is_prrte_launcher(std::ffi::OsStr::new(
            "no-such-program-here"
        )));
        let _ = std::fs::remove_dir_all(&root);
    }
}
