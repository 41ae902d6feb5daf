//! The PMIx tool connection: namespaces, proc tables, release, events, tool daemons.

use crate::ffi::api::{self, CallError, RawEvent};
use crate::ffi::info::{InfoArray, Put, RawProcInfo, Value};
use crate::ffi::types::{self as t, keys};
use crate::rendezvous::{rendezvous, validate_file};
use crate::turn::{self, Turn};
use crate::{Library, PmixError};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The PMIx server to connect to.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Server {
    /// A launcher by pid (`prterun`, Open MPI 5's `mpirun`): its rendezvous file is found and
    /// validated ([`rendezvous`](crate::rendezvous())), and given to PMIx.
    Pid(u32),
    /// A server URI, e.g. `prterun-vm-523@0.0;tcp4://127.0.0.1:41147`: written to a
    /// rendezvous file of ours (mode 0600, removed after connecting), which is connected to.
    Uri(String),
    /// A rendezvous file: validated ([`validate_file`](crate::validate_file)), and given to
    /// PMIx (`PMIX_TOOL_ATTACHMENT_FILE`).
    RendezvousFile(PathBuf),
}

impl std::fmt::Display for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Server::Pid(p) => write!(f, "PMIx server pid {p}"),
            Server::Uri(u) => write!(f, "PMIx server {u}"),
            Server::RendezvousFile(p) => write!(f, "PMIx server of {}", p.display()),
        }
    }
}

/// One process of a job as the server's proc table gives it (`pmix_proc_info_t`). Nothing is
/// corrected: a pid of 0 or a relative executable (both seen from PMIx servers, reported
/// upstream) is kept for the caller to judge.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcInfo {
    /// The job's namespace.
    pub nspace: String,
    /// The rank in it.
    pub rank: u32,
    /// Its host, as the server names it (empty when the server gave none).
    pub host: String,
    /// Its executable as the server gives it (PRRTE: the cwd joined with argv\[0\], not
    /// normalised, e.g. `/home/u/./a.out`; empty when none).
    pub executable: String,
    /// Its pid (0 when the server does not know it).
    pub pid: i32,
    /// Its `pmix_proc_state_t` (e.g. 6 = connected to its PMIx server, 20 = terminated).
    pub state: u8,
    /// Its exit code, once terminated.
    pub exit_code: i32,
}

impl ProcInfo {
    /// [`state`](ProcInfo::state) in words (`"connected"`, `"terminated"`, `"aborted by
    /// signal"`…; `"unknown"` for a value the PMIx Standard does not define).
    pub fn state_name(&self) -> &'static str {
        t::PROC_STATES
            .iter()
            .find(|(v, _, _)| *v == self.state)
            .map_or("unknown", |(_, _, words)| words)
    }
}

/// An event the server sent this tool, in the order received.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ToolEvent {
    /// `PMIX_EVENT_JOB_END`: the job `nspace` ended with `status` (`PMIX_JOB_TERM_STATUS`; 0 =
    /// success). PRRTE's `prterun` then waits for its tools to disconnect before it exits:
    /// drop the [`Tool`].
    JobEnd {
        /// The job.
        nspace: String,
        /// Its termination status.
        status: i32,
    },
    /// `PMIX_READY_FOR_DEBUG`: the job `nspace` is held for the debugger. PRRTE sends one for
    /// the whole job (not one per rank), only to the tool that spawned it; a tool attaching
    /// later gets none.
    ReadyForDebug {
        /// The job.
        nspace: String,
    },
    /// The connection to the server was lost (`PMIX_ERR_LOST_CONNECTION`, `PMIX_ERR_UNREACH`).
    ServerLost,
    /// Another event: its status code and source namespace.
    Other {
        /// The PMIx status code.
        status: i32,
        /// The namespace of its source (empty when none).
        source: String,
    },
    /// The queue was full: this many events were dropped (counted, not silently lost).
    Dropped {
        /// How many.
        count: u64,
    },
}

/// Whether a connection is live (or still starting, or finishing): `PMIx_tool_init` is
/// process-wide. Holds what it is connected to.
static LIVE: Mutex<Option<String>> = Mutex::new(None);

fn live() -> std::sync::MutexGuard<'static, Option<String>> {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Once a connection is finalized (or was never made): its turn at the server let go, then
/// the process's slot freed.
fn let_go(turn: &Mutex<Option<Turn>>) {
    let turn = turn
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    if let Some(t) = turn {
        t.release();
    }
    *live() = None;
}

/// How long `Drop` waits for `PMIx_tool_finalize` before leaving it to its thread.
const FINALIZE_WAIT: Duration = Duration::from_secs(5);

/// The one PMIx tool connection of this process.
///
/// `PMIx_tool_init` is process-wide: while a `Tool` lives (or a connection is still being
/// made or finalized), another [`Tool::connect`] is [`PmixError::AlreadyConnected`]. Every call
/// is bounded by the timeout given to `connect` ([`Tool::set_timeout`] changes it); no callback
/// unwinds into C; events are queued for [`Tool::next_event`]. Dropping it finalizes
/// (`PMIx_tool_finalize`, bounded); `prterun` does not exit while a tool is connected.
pub struct Tool {
    lib: Library,
    server: String,
    me: (String, u32),
    timeout: Duration,
    /// The turn at the server, let go once finalized.
    turn: Arc<Mutex<Option<Turn>>>,
}

impl std::fmt::Debug for Tool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tool")
            .field("server", &self.server)
            .field("me", &self.me)
            .field("library", &self.lib)
            .finish()
    }
}

impl Tool {
    /// Connects to `server` as a PMIx tool with `lib`; `timeout` bounds the connection and
    /// every later call.
    ///
    /// # Errors
    /// [`PmixError::AlreadyConnected`]; for [`Server::Pid`] and [`Server::RendezvousFile`], the
    /// errors of [`rendezvous`](crate::rendezvous()) / [`validate_file`](crate::validate_file);
    /// [`PmixError::InvalidArgument`] for a URI that is not one; [`PmixError::Call`] when PMIx
    /// refuses (e.g. `PMIX_ERR_UNREACH`: nobody serves that address); [`PmixError::Timeout`]
    /// when the server does not answer in time (the connection attempt is then abandoned: it
    /// is finalized when it returns, and until then the process's slot stays taken).
    pub fn connect(lib: &Library, server: &Server, timeout: Duration) -> Result<Tool, PmixError> {
        let name = server.to_string();
        let mut info = InfoArray::default();
        let bad = PmixError::InvalidArgument;
        {
            let mut g = live();
            if let Some(current) = g.as_ref() {
                return Err(PmixError::AlreadyConnected {
                    current: current.clone(),
                });
            }
            *g = Some(name.clone());
        }
        // The turn at the server (see crate::turn), let go with the slot once finalized.
        let turn_slot: Arc<Mutex<Option<Turn>>> = Arc::new(Mutex::new(None));
        let release = {
            let slot = Arc::clone(&turn_slot);
            move || let_go(&slot)
        };
        let mut uri_file = None;
        let mut server_pid = None;
        let prepared = (|| {
            // Always through a rendezvous file (PMIX_TOOL_ATTACHMENT_FILE), the one just
            // validated: libpmix's own search by pid could settle on another file than the one
            // we checked; and OpenPMIx 5.0.11 keeps a freed copy of a PMIX_SERVER_URI
            // attribute after PMIx_tool_finalize, so that the process's next PMIx_tool_init
            // fails (PMIX_ERR_BAD_PARAM) or frees it twice. A URI is written to a file of ours.
            let file = match server {
                Server::Pid(pid) => {
                    let r = rendezvous(*pid)?;
                    server_pid = Some(r.pid);
                    r.file
                }
                Server::RendezvousFile(f) => {
                    let r = validate_file(f, None)?;
                    server_pid = Some(r.pid);
                    r.file
                }
                Server::Uri(uri) => {
                    let f = UriFile::write(uri).map_err(bad)?;
                    let path = f.path.clone();
                    uri_file = Some(f);
                    path
                }
            };
            let file = file
                .to_str()
                .ok_or_else(|| bad(format!("{} is not UTF-8", file.display())))?
                .to_string();
            info.push(keys::TOOL_ATTACHMENT_FILE, Put::Str(file))
                .map_err(bad)?;
            // One attempt: a server that is not there is an error now, not a retry loop.
            info.push(keys::CONNECT_MAX_RETRIES, Put::U32(1))
                .map_err(bad)?;
            info.push(keys::CONNECT_RETRY_DELAY, Put::U32(0))
                .map_err(bad)?;
            Ok::<(), PmixError>(())
        })();
        if let Err(e) = prepared {
            release();
            return Err(e);
        }
        // One tool at a time, GAP apart (a URI's server pid is not known: no turn).
        let started = Instant::now();
        if let Some(pid) = server_pid {
            match turn::take(pid, &name, timeout) {
                Ok(t) => {
                    *turn_slot
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(t);
                }
                Err(e) => {
                    release();
                    return Err(e);
                }
            }
        }
        // The connection gets what is left of the bound, and at least a second.
        let left = timeout
            .saturating_sub(started.elapsed())
            .max(Duration::from_secs(1));
        api::clear_events();
        let me = match api::tool_init(&lib.api, info, left, release.clone()) {
            Ok(me) => me,
            Err(CallError::Timeout) => {
                // The init thread finalizes a late success and frees the slot itself.
                return Err(PmixError::Timeout {
                    call: "PMIx_tool_init".into(),
                    server: name,
                    after: timeout,
                });
            }
            Err(CallError::Status(s)) => {
                release();
                return Err(PmixError::Call {
                    call: "PMIx_tool_init".into(),
                    server: name,
                    status: s,
                    status_string: lib.api.error_string(s),
                });
            }
        };
        let tool = Tool {
            lib: lib.clone(),
            server: name,
            me,
            timeout,
            turn: turn_slot,
        };
        // From here on, Drop finalizes and frees the slot.
        api::register_handlers(&tool.lib.api, timeout)
            .map_err(|e| tool.error("PMIx_Register_event_handler", e))?;
        Ok(tool)
    }

    /// Changes the bound of every later call.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// This tool's own namespace and rank, as the server assigned them.
    pub fn me(&self) -> (&str, u32) {
        (&self.me.0, self.me.1)
    }

    /// The library this tool speaks through.
    pub fn library(&self) -> &Library {
        &self.lib
    }

    fn error(&self, call: impl Into<String>, e: CallError) -> PmixError {
        match e {
            CallError::Timeout => PmixError::Timeout {
                call: call.into(),
                server: self.server.clone(),
                after: self.timeout,
            },
            CallError::Status(s) => PmixError::Call {
                call: call.into(),
                server: self.server.clone(),
                status: s,
                status_string: self.lib.api.error_string(s),
            },
        }
    }

    fn unexpected(&self, call: &str, what: String) -> PmixError {
        PmixError::Unexpected {
            call: call.into(),
            server: self.server.clone(),
            what,
        }
    }

    /// The namespaces the server knows (`PMIX_QUERY_NAMESPACES`): the jobs, and the namespaces
    /// of tools that connected (PRRTE keeps those of finished tools listed).
    ///
    /// # Errors
    /// [`PmixError::Call`], [`PmixError::Timeout`], [`PmixError::Unexpected`].
    pub fn namespaces(&self) -> Result<Vec<String>, PmixError> {
        let call = "PMIx_Query_info(pmix.qry.ns)";
        let res = api::query(
            &self.lib.api,
            keys::QUERY_NAMESPACES,
            InfoArray::default(),
            self.timeout,
        )
        .map_err(|e| self.error(call, e))?;
        match res.into_iter().find(|(k, _)| k == keys::QUERY_NAMESPACES) {
            Some((_, Value::Str(s))) => Ok(s
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect()),
            other => Err(self.unexpected(call, format!("{other:?} instead of a string"))),
        }
    }

    /// The proc table of job `nspace` (`PMIX_QUERY_PROC_TABLE`), in rank order, as the server
    /// gave it (see [`ProcInfo`]).
    ///
    /// # Errors
    /// [`PmixError::Call`] (e.g. `PMIX_ERR_NOT_FOUND` for an unknown namespace),
    /// [`PmixError::Timeout`], [`PmixError::Unexpected`], [`PmixError::InvalidArgument`].
    pub fn proc_table(&self, nspace: &str) -> Result<Vec<ProcInfo>, PmixError> {
        let call = format!("PMIx_Query_info(pmix.qry.ptable, {nspace})");
        let mut q = InfoArray::default();
        q.push(keys::NSPACE, Put::Str(nspace.into()))
            .map_err(PmixError::InvalidArgument)?;
        let res = api::query(&self.lib.api, keys::QUERY_PROC_TABLE, q, self.timeout)
            .map_err(|e| self.error(&call, e))?;
        let table = match res.into_iter().find(|(k, _)| k == keys::QUERY_PROC_TABLE) {
            Some((_, Value::ProcInfos(v))) => v,
            other => {
                return Err(
                    self.unexpected(&call, format!("{other:?} instead of pmix_proc_info_t[]"))
                );
            }
        };
        let mut out: Vec<ProcInfo> = table.into_iter().map(proc_info).collect();
        out.sort_by_key(|p| p.rank);
        Ok(out)
    }

    /// Releases the ranks of job `nspace` held for the debugger (`--stop-in-init`,
    /// `PRTE_MCA_rtos=stop-in-init`): `PMIX_DEBUGGER_RELEASE` with `PMIX_RANGE_CUSTOM`, its
    /// `PMIX_EVENT_CUSTOM_RANGE` the whole job (`None`) or the ranks given.
    ///
    /// With a subset, PRRTE delivers the event to those ranks only: they return from
    /// `PMIx_Init`, and (in an MPI job) then wait in `MPI_Init`'s collective until the others are
    /// released too (tested with PRRTE 3.0.14). Ranks stopped by `--stop-on-exec` are not released by any event: they need
    /// `SIGCONT`.
    ///
    /// # Errors
    /// [`PmixError::Call`], [`PmixError::Timeout`], [`PmixError::InvalidArgument`] (an empty
    /// subset, a bad namespace).
    pub fn release(&self, nspace: &str, ranks: Option<&[u32]>) -> Result<(), PmixError> {
        let bad = PmixError::InvalidArgument;
        let mut info = InfoArray::default();
        let range = match ranks {
            None => Put::Procs(vec![(nspace.to_string(), t::RANK_WILDCARD)]),
            Some([]) => return Err(bad(format!("release of no rank of {nspace}"))),
            Some(r) => Put::Procs(r.iter().map(|&r| (nspace.to_string(), r)).collect()),
        };
        info.push(keys::EVENT_CUSTOM_RANGE, range).map_err(bad)?;
        info.push(keys::EVENT_NON_DEFAULT, Put::Bool(true))
            .map_err(bad)?;
        let call = format!("PMIx_Notify_event(PMIX_DEBUGGER_RELEASE, {nspace})");
        api::notify(
            &self.lib.api,
            t::PMIX_DEBUGGER_RELEASE,
            t::PMIX_RANGE_CUSTOM,
            info,
            self.timeout,
        )
        .map_err(|e| self.error(call, e))
    }

    /// The next event from the server, waiting up to `timeout`; `None` when none came.
    pub fn next_event(&self, timeout: Duration) -> Option<ToolEvent> {
        next_queued(timeout)
    }

    /// Starts tool daemons beside job `target_nspace` (`PMIx_Spawn` with
    /// `PMIX_DEBUGGER_DAEMONS`, `PMIX_DEBUG_TARGET` = the whole job, `PMIX_DEBUG_DAEMONS_PER_NODE`
    /// = `per_node`): `argv[0]` is the command; they run in this process's working directory;
    /// their stdout and stderr are forwarded to this process's (`PMIX_FWD_STDOUT`,
    /// `PMIX_FWD_STDERR`). The daemons' namespace. A daemon that calls `PMIx_Init` finds its
    /// target with `PMIx_Get(<its nspace>:WILDCARD, PMIX_DEBUG_TARGET)`.
    ///
    /// # Errors
    /// [`PmixError::Call`], [`PmixError::Timeout`], [`PmixError::InvalidArgument`] (empty argv,
    /// NUL bytes, `per_node` 0).
    pub fn spawn_daemons(
        &self,
        target_nspace: &str,
        argv: &[String],
        per_node: u16,
    ) -> Result<String, PmixError> {
        let bad = PmixError::InvalidArgument;
        if argv.is_empty() || per_node == 0 {
            return Err(bad(
                "tool daemons need a command and at least one per node".into()
            ));
        }
        let cwd = std::env::current_dir()
            .ok()
            .and_then(|d| d.to_str().map(String::from))
            .unwrap_or_else(|| "/".into());
        let mut info = InfoArray::default();
        info.push(keys::DEBUGGER_DAEMONS, Put::Bool(true))
            .map_err(bad)?;
        info.push(
            keys::DEBUG_TARGET,
            Put::Proc(target_nspace.into(), t::RANK_WILDCARD),
        )
        .map_err(bad)?;
        info.push(keys::DEBUG_DAEMONS_PER_NODE, Put::U16(per_node))
            .map_err(bad)?;
        info.push(keys::FWD_STDOUT, Put::Bool(true)).map_err(bad)?;
        info.push(keys::FWD_STDERR, Put::Bool(true)).map_err(bad)?;
        let call = format!(
            "PMIx_Spawn(debugger daemons {:?} for {target_nspace})",
            argv[0]
        );
        api::spawn(&self.lib.api, info, argv, &cwd, 0, self.timeout)
            .map_err(|e| self.error(call, e))
    }
}

impl Drop for Tool {
    fn drop(&mut self) {
        // The slot is freed when finalize returns, not before: no new init overlaps it.
        let slot = Arc::clone(&self.turn);
        api::tool_finalize(&self.lib.api, FINALIZE_WAIT, move || let_go(&slot));
    }
}

/// A rendezvous file written for a URI, in a directory of its own (mode 0700), removed when
/// dropped.
struct UriFile {
    dir: PathBuf,
    path: PathBuf,
}

impl UriFile {
    fn write(uri: &str) -> Result<UriFile, String> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        if uri.contains(['\n', '\0']) || !uri.contains(';') {
            return Err(format!(
                "{uri:?} is not a PMIx server URI (<nspace>.<rank>;<address>)"
            ));
        }
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("mpir-pmix-{}-{n}", std::process::id()));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let path = dir.join("uri");
        let f = UriFile { dir, path };
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&f.path)
            .and_then(|mut w| std::io::Write::write_all(&mut w, format!("{uri}\n").as_bytes()))
            .map_err(|e| format!("cannot write {}: {e}", f.path.display()))?;
        Ok(f)
    }
}

impl Drop for UriFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The next event of the process's queue (see [`Tool::next_event`]).
fn next_queued(timeout: Duration) -> Option<ToolEvent> {
    match api::next_event(timeout) {
        (_, dropped) if dropped > 0 => Some(ToolEvent::Dropped { count: dropped }),
        (Some(e), _) => Some(to_event(e)),
        (None, _) => None,
    }
}

fn proc_info(p: RawProcInfo) -> ProcInfo {
    ProcInfo {
        nspace: p.nspace,
        rank: p.rank,
        host: p.host.unwrap_or_default(),
        executable: p.executable.unwrap_or_default(),
        pid: p.pid,
        state: p.state,
        exit_code: p.exit_code,
    }
}

/// The public form of an event libpmix delivered.
pub(crate) fn to_event(e: RawEvent) -> ToolEvent {
    let find = |key: &str| e.info.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let source = e.source.as_ref().map(|s| s.0.clone()).unwrap_or_default();
    let nspace = || match (find(keys::EVENT_AFFECTED_PROC), find(keys::NSPACE)) {
        (Some(Value::Proc(ns, _)), _) => ns.clone(),
        (_, Some(Value::Str(ns))) => ns.clone(),
        _ => source.clone(),
    };
    match e.status {
        t::PMIX_EVENT_JOB_END => ToolEvent::JobEnd {
            nspace: nspace(),
            status: match find(keys::JOB_TERM_STATUS).or_else(|| find(keys::EXIT_CODE)) {
                Some(Value::Status(s)) => *s,
                Some(Value::Int(i)) => i32::try_from(*i).unwrap_or(i32::MIN),
                _ => 0,
            },
        },
        t::PMIX_READY_FOR_DEBUG => ToolEvent::ReadyForDebug { nspace: nspace() },
        t::PMIX_ERR_LOST_CONNECTION
        | t::PMIX_ERR_LOST_CONNECTION_TO_SERVER
        | t::PMIX_ERR_UNREACH => ToolEvent::ServerLost,
        status => ToolEvent::Other { status, source },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(status: i32, source: &str, info: Vec<(&str, Value)>) -> RawEvent {
        RawEvent {
            status,
            source: Some((source.into(), 0)),
            info: info.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
        }
    }

    #[test]
    fn proc_tables_are_kept_as_the_server_gave_them() {
        let p = proc_info(RawProcInfo {
            nspace: "j@1".into(),
            rank: 3,
            host: None,
            executable: Some("./a.out".into()),
            pid: 0,
            exit_code: -1,
            state: 0,
        });
        assert_eq!(
            (p.pid, p.executable.as_str(), p.host.as_str()),
            (0, "./a.out", "")
        );
        assert_eq!((p.rank, p.exit_code, p.state), (3, -1, 0));
        assert_eq!(p.state_name(), "undefined");
        let q = ProcInfo {
            state: 54,
            ..p.clone()
        };
        assert_eq!(q.state_name(), "aborted by signal");
        let q = ProcInfo { state: 200, ..p };
        assert_eq!(q.state_name(), "unknown");
    }

    #[test]
    fn an_overflowing_queue_counts_what_it_drops_and_keeps_the_rest_in_order() {
        api::clear_events();
        for i in 0..api::MAX_QUEUED + 3 {
            api::push_event(raw(-1, &format!("n@{i}"), vec![]));
        }
        let z = Duration::ZERO;
        assert_eq!(next_queued(z), Some(ToolEvent::Dropped { count: 3 }));
        for i in 0..api::MAX_QUEUED {
            let want = ToolEvent::Other {
                status: -1,
                source: format!("n@{i}"),
            };
            assert_eq!(next_queued(z), Some(want));
        }
        let t0 = std::time::Instant::now();
        assert_eq!(next_queued(Duration::from_millis(50)), None);
        assert!(t0.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn events_name_their_job() {
        let e = to_event(raw(
            -145,
            "prterun-vm-1@0",
            vec![
                ("pmix.job.term.status", Value::Status(-9)),
                (
                    "pmix.evproc",
                    Value::Proc("prterun-vm-1@1".into(), t::RANK_WILDCARD),
                ),
            ],
        ));
        assert_eq!(
            e,
            ToolEvent::JobEnd {
                nspace: "prterun-vm-1@1".into(),
                status: -9
            }
        );
        let e = to_event(raw(
            -58,
            "prte-vm-2@0",
            vec![("pmix.nspace", Value::Str("prte-vm-2@3".into()))],
        ));
        assert_eq!(
            e,
            ToolEvent::ReadyForDebug {
                nspace: "prte-vm-2@3".into()
            }
        );
        assert_eq!(to_event(raw(-61, "", vec![])), ToolEvent::ServerLost);
        assert_eq!(
            to_event(raw(-1, "x@0", vec![])),
            ToolEvent::Other {
                status: -1,
                source: "x@0".into()
            }
        );
    }
}
