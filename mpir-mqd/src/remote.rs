//! Out-of-process hosting: the DLL runs in a helper process (`mpir-mqd-host`) and asks us,
//! over a pipe, for everything it needs from the targets. A DLL that crashes, hangs or loops
//! costs the helper, never the host: the failure becomes a typed error, the helper is killed
//! and reaped.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::rc::Rc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, sync_channel};
use std::time::{Duration, Instant};

use mpir_target::{SymbolKind, Target, TypeQuery};
use mpir_types::mqd::LengthUnit;

use crate::error::{MqdError, Result};
use crate::ffi::OPTIONAL;
use crate::host::{HostOptions, ProcessId, ProcessSpec, QueueHost};
use crate::model::CommunicatorQueues;
use crate::mpi2::ProcessLocation;
use crate::raw::infer_unit;
use crate::wire::{
    FromHelper, MAX_READ, Outcome, PROTOCOL_VERSION, ReadError, ToHelper, read_message,
    write_message,
};

/// The helper executable's file name.
pub const HELPER_NAME: &str = "mpir-mqd-host";
/// Environment variable naming the helper executable (overrides the search next to the
/// current executable).
pub const HELPER_ENV: &str = "MPIR_MQD_HOST";

/// How an [`OutOfProcessHost`] starts and watches its helper.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct HelperOptions {
    /// The helper executable; `None` looks it up (see [`find_helper`]).
    pub program: Option<PathBuf>,
    /// Arguments given to the helper. Empty for `mpir-mqd-host`; a tool that serves as its own
    /// helper (calling [`crate::helper_main`] when it sees these arguments) names itself in
    /// `program` and its marker here, so that it ships as one executable.
    pub args: Vec<std::ffi::OsString>,
    /// Longest the helper may stay silent (no callback question, no answer) before it is
    /// declared hung and killed.
    pub silence_timeout: Duration,
    /// Longest one request (load, attach, a whole queue walk) may take in total.
    pub call_timeout: Duration,
    /// Whether the helper caches target memory by page within one request (one walk sees one
    /// snapshot; far fewer round trips). Off, every `fetch_data` is a round trip.
    pub read_cache: bool,
}

impl Default for HelperOptions {
    fn default() -> Self {
        HelperOptions {
            program: None,
            args: Vec::new(),
            silence_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(300),
            read_cache: true,
        }
    }
}

impl HelperOptions {
    /// The defaults with the helper at `program`.
    pub fn with_program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = Some(program.into());
        self
    }

    /// The defaults with the helper at `program`, started with `args`: for a tool that is its
    /// own helper (see [`HelperOptions::args`]).
    pub fn with_program_args(
        mut self,
        program: impl Into<PathBuf>,
        args: impl IntoIterator<Item = impl Into<std::ffi::OsString>>,
    ) -> Self {
        self.program = Some(program.into());
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    /// The defaults with other timeouts.
    pub fn with_timeouts(mut self, silence: Duration, call: Duration) -> Self {
        self.silence_timeout = silence;
        self.call_timeout = call;
        self
    }

    /// The defaults with the read cache on or off.
    pub fn with_read_cache(mut self, on: bool) -> Self {
        self.read_cache = on;
        self
    }
}

/// Hosts the DLL at `path` in a helper process ([`OutOfProcessHost::spawn`]) as a
/// [`QueueHost`]: safe, since whatever the DLL does stays in the helper.
pub fn open_out_of_process(
    path: impl AsRef<Path>,
    options: HostOptions,
    helper: HelperOptions,
) -> Result<Box<dyn QueueHost>> {
    Ok(Box::new(OutOfProcessHost::spawn(path, options, helper)?))
}

/// Where the helper executable is: `explicit` if given; else `$MPIR_MQD_HOST`; else
/// `mpir-mqd-host` next to the current executable, or in its parent directory (where cargo
/// puts binaries when the current executable is a test or benchmark in `target/*/deps`).
pub fn find_helper(explicit: Option<&Path>) -> Result<PathBuf> {
    if let Some(p) = explicit {
        return if p.is_file() {
            Ok(p.to_path_buf())
        } else {
            Err(MqdError::HelperStart {
                helper: p.display().to_string(),
                reason: "no such file".into(),
            })
        };
    }
    if let Some(p) = std::env::var_os(HELPER_ENV) {
        let p = PathBuf::from(p);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(MqdError::HelperStart {
                helper: p.display().to_string(),
                reason: format!("named by ${HELPER_ENV} but no such file"),
            })
        };
    }
    let exe = std::env::current_exe().map_err(|e| MqdError::HelperStart {
        helper: HELPER_NAME.into(),
        reason: format!("cannot locate the current executable: {e}"),
    })?;
    let mut tried = Vec::new();
    for dir in exe.ancestors().skip(1).take(2) {
        let candidate = dir.join(HELPER_NAME);
        if candidate.is_file() {
            return Ok(candidate);
        }
        tried.push(candidate.display().to_string());
    }
    Err(MqdError::HelperStart {
        helper: HELPER_NAME.into(),
        reason: format!(
            "not found (tried {}); set ${HELPER_ENV} or HelperOptions::program",
            tried.join(", ")
        ),
    })
}

/// Renders how a child ended.
fn exit_text(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        let name = nix::sys::signal::Signal::try_from(sig)
            .map(|s| s.as_str().to_string())
            .unwrap_or_else(|_| "unknown".into());
        format!("killed by signal {sig} ({name})")
    } else if let Some(code) = status.code() {
        format!("exited with status {code}")
    } else {
        status.to_string()
    }
}

/// An MQD DLL hosted in a helper process. Same use as [`crate::Host`] (both implement
/// [`QueueHost`]), but safe: the DLL cannot touch this process's memory, and a crash, a hang or
/// an endless loop in it becomes [`MqdError::HelperDied`] or [`MqdError::HelperTimeout`] (the
/// helper is killed and reaped; later calls return [`MqdError::HelperGone`]).
///
/// Targets stay here: the helper asks for every read and lookup, answered on the calling
/// thread during each call, so a host is bound to its thread like [`crate::Host`].
pub struct OutOfProcessHost {
    path: String,
    helper: PathBuf,
    child: Option<Child>,
    stdin: Option<ChildStdin>,
    replies: Receiver<std::result::Result<Vec<u8>, String>>,
    options: HelperOptions,
    version: String,
    compatibility: i32,
    taddr_width: Option<i32>,
    optional: Vec<&'static str>,
    unit: LengthUnit,
    targets: HashMap<u64, Rc<dyn Target>>,
    attached: HashMap<ProcessId, u64>,
    next_target: u64,
    messages: Vec<(ProcessId, Option<String>, Option<String>)>,
    dll_messages: Vec<String>,
    /// What the helper (the DLL in it) printed on stderr.
    printed: std::sync::Arc<std::sync::Mutex<crate::output::OutputLog>>,
    printed_reader: Option<std::thread::JoinHandle<()>>,
}

impl std::fmt::Debug for OutOfProcessHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutOfProcessHost")
            .field("path", &self.path)
            .field("helper", &self.helper)
            .field("pid", &self.child.as_ref().map(Child::id))
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

impl OutOfProcessHost {
    /// Starts the helper and has it load the DLL at `path` (versions and exports checked
    /// there, as [`crate::Host::load`] does).
    pub fn spawn(
        path: impl AsRef<Path>,
        options: HostOptions,
        helper: HelperOptions,
    ) -> Result<OutOfProcessHost> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        // Canonical, so that the helper (whose working directory is ours anyway) and messages
        // agree on the file.
        let canonical = std::fs::canonicalize(path).map_err(|e| MqdError::Load {
            path: shown.clone(),
            reason: e.to_string(),
        })?;
        let program = find_helper(helper.program.as_deref())?;
        let mut child = Command::new(&program)
            .args(&helper.args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            // What the DLL prints is collected (deduplicated, bounded), not sprayed on ours.
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| MqdError::HelperStart {
                helper: program.display().to_string(),
                reason: e.to_string(),
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let printed = std::sync::Arc::new(std::sync::Mutex::new(crate::output::OutputLog::new()));
        let printed_reader = child.stderr.take().and_then(|mut err| {
            let log = std::sync::Arc::clone(&printed);
            std::thread::Builder::new()
                .name("mpir-mqd-helper-stderr".into())
                .spawn(move || {
                    use std::io::Read;
                    let mut buf = [0u8; 4096];
                    loop {
                        match err.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => {
                                if let (Ok(mut l), Some(bytes)) = (log.lock(), buf.get(..n)) {
                                    l.push_bytes(bytes);
                                }
                            }
                        }
                    }
                    if let Ok(mut l) = log.lock() {
                        l.finish();
                    }
                })
                .ok()
        });
        let (tx, rx) = sync_channel(4);
        if let Some(mut out) = stdout {
            std::thread::Builder::new()
                .name("mpir-mqd-helper-reader".into())
                .spawn(move || {
                    loop {
                        match read_message(&mut out) {
                            Ok(m) => {
                                if tx.send(Ok(m)).is_err() {
                                    return;
                                }
                            }
                            Err(ReadError::Closed) | Err(ReadError::Io(_)) => return,
                            Err(ReadError::Framing(e)) => {
                                let _ = tx.send(Err(e));
                                return;
                            }
                        }
                    }
                })
                .map_err(|e| MqdError::HelperStart {
                    helper: program.display().to_string(),
                    reason: format!("cannot start the reader thread: {e}"),
                })?;
        }
        let mut host = OutOfProcessHost {
            path: shown,
            helper: program,
            child: Some(child),
            stdin,
            replies: rx,
            options: helper,
            version: String::new(),
            compatibility: 0,
            taddr_width: None,
            optional: Vec::new(),
            unit: LengthUnit::Bytes,
            targets: HashMap::new(),
            attached: HashMap::new(),
            next_target: 1,
            messages: Vec::new(),
            dll_messages: Vec::new(),
            printed,
            printed_reader,
        };
        host.greeting()?;
        let load = ToHelper::Load {
            path: canonical.display().to_string(),
            max_communicators: options.max_communicators as u64,
            max_operations: options.max_operations as u64,
            max_group_size: options.max_group_size as u64,
            max_new_processes: options.max_new_processes as u64,
            read_cache: host.options.read_cache,
        };
        match host.request("load", &load)? {
            Outcome::Loaded {
                version,
                compatibility,
                taddr_width,
                optional,
            } => {
                host.unit = infer_unit(options.length_unit, &version);
                host.version = version;
                host.compatibility = compatibility;
                host.taddr_width = taddr_width;
                host.optional = OPTIONAL
                    .iter()
                    .copied()
                    .filter(|n| optional.iter().any(|o| o == n))
                    .collect();
                Ok(host)
            }
            other => Err(host.protocol_failure("load", format!("unexpected answer {other:?}"))),
        }
    }

    /// The helper's process id, while it runs.
    pub fn helper_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The helper executable in use.
    pub fn helper_program(&self) -> &Path {
        &self.helper
    }

    fn greeting(&mut self) -> Result<()> {
        let timeout = self.options.silence_timeout;
        match self.replies.recv_timeout(timeout) {
            Ok(Ok(bytes)) => match FromHelper::decode(&bytes, &self.path) {
                Ok(FromHelper::Hello { version, .. }) if version == PROTOCOL_VERSION => Ok(()),
                Ok(FromHelper::Hello { version, .. }) => {
                    self.kill();
                    Err(MqdError::HelperStart {
                        helper: self.helper.display().to_string(),
                        reason: format!(
                            "speaks protocol version {version}, this host {PROTOCOL_VERSION}"
                        ),
                    })
                }
                Ok(other) => {
                    Err(self.protocol_failure("greeting", format!("unexpected {other:?}")))
                }
                Err(e) => Err(self.protocol_failure("greeting", e)),
            },
            Ok(Err(e)) => Err(self.protocol_failure("greeting", e)),
            Err(RecvTimeoutError::Timeout) => {
                self.kill();
                Err(MqdError::HelperStart {
                    helper: self.helper.display().to_string(),
                    reason: format!("no greeting within {} ms", timeout.as_millis()),
                })
            }
            Err(RecvTimeoutError::Disconnected) => {
                let status = self.reap();
                Err(MqdError::HelperStart {
                    helper: self.helper.display().to_string(),
                    reason: format!("ended before greeting: {status}"),
                })
            }
        }
    }

    /// Kills and reaps the helper (our own child, by its handle).
    fn kill(&mut self) {
        self.stdin = None;
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Waits for a helper that is ending on its own (its pipe closed), then kills it if it
    /// lingers. Returns how it ended.
    fn reap(&mut self) -> String {
        self.stdin = None;
        let Some(mut child) = self.child.take() else {
            return "already reaped".into();
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return exit_text(status),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                _ => {
                    let _ = child.kill();
                    return child
                        .wait()
                        .map(exit_text)
                        .unwrap_or_else(|e| format!("lost: {e}"));
                }
            }
        }
    }

    fn protocol_failure(&mut self, _call: &str, reason: String) -> MqdError {
        self.kill();
        MqdError::Protocol {
            path: self.path.clone(),
            reason,
        }
    }

    fn died(&mut self, call: &str) -> MqdError {
        let status = self.reap();
        MqdError::HelperDied {
            path: self.path.clone(),
            call: call.to_string(),
            status,
        }
    }

    fn send(&mut self, msg: &ToHelper) -> bool {
        match self.stdin.as_mut() {
            Some(w) => write_message(w, &msg.encode())
                .and_then(|()| w.flush())
                .is_ok(),
            None => false,
        }
    }

    /// Sends one request and serves the helper's callback questions until its answer.
    fn request(&mut self, call: &str, msg: &ToHelper) -> Result<Outcome> {
        if self.child.is_none() {
            return Err(MqdError::HelperGone {
                path: self.path.clone(),
            });
        }
        if !self.send(msg) {
            return Err(self.died(call));
        }
        let start = Instant::now();
        loop {
            let left = self.options.call_timeout.saturating_sub(start.elapsed());
            let wait = left.min(self.options.silence_timeout);
            let bytes = match self.replies.recv_timeout(wait) {
                Ok(Ok(bytes)) => bytes,
                Ok(Err(e)) => return Err(self.protocol_failure(call, e)),
                Err(RecvTimeoutError::Disconnected) => return Err(self.died(call)),
                Err(RecvTimeoutError::Timeout) => {
                    self.kill();
                    return Err(MqdError::HelperTimeout {
                        path: self.path.clone(),
                        call: call.to_string(),
                        after_ms: wait.as_millis() as u64,
                    });
                }
            };
            let reply = match FromHelper::decode(&bytes, &self.path) {
                Ok(r) => r,
                Err(e) => return Err(self.protocol_failure(call, e)),
            };
            let answer = match reply {
                FromHelper::Done { outcome, messages } => {
                    self.dll_messages = messages;
                    return outcome;
                }
                FromHelper::Hello { .. } => {
                    return Err(self.protocol_failure(call, "a second greeting".into()));
                }
                FromHelper::Read {
                    target,
                    address,
                    len,
                } => ToHelper::ReadReply(self.serve_read(target, address, len)),
                FromHelper::Symbol { target, name } => {
                    ToHelper::SymbolReply(self.with_target(target, |t| {
                        t.symbol(&name)
                            .map(|s| {
                                s.map(|s| {
                                    let kind = match s.kind {
                                        SymbolKind::Function => 0,
                                        SymbolKind::Object => 1,
                                        _ => 2,
                                    };
                                    (s.address, kind)
                                })
                            })
                            .map_err(|e| e.to_string())
                    }))
                }
                FromHelper::Type { target, name } => {
                    ToHelper::TypeReply(self.with_target(target, |t| {
                        t.type_layout(TypeQuery::Named(&name))
                            .map_err(|e| e.to_string())
                    }))
                }
            };
            if !self.send(&answer) {
                return Err(self.died(call));
            }
        }
    }

    fn with_target<T>(
        &self,
        id: u64,
        f: impl FnOnce(&dyn Target) -> std::result::Result<T, String>,
    ) -> std::result::Result<T, String> {
        match self.targets.get(&id) {
            Some(t) => f(&**t),
            None => Err(format!("no target {id}")),
        }
    }

    fn serve_read(
        &self,
        target: u64,
        address: u64,
        len: u32,
    ) -> std::result::Result<Vec<u8>, String> {
        if len > MAX_READ {
            return Err(format!("read of {len} bytes refused (limit {MAX_READ})"));
        }
        self.with_target(target, |t| {
            let mut buf = vec![0u8; len as usize];
            let mut got = 0;
            // As much as is readable from `address` on (a page may end in unmapped memory).
            while got < buf.len() {
                match t.read_partial(address.wrapping_add(got as u64), &mut buf[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if got == 0 => return Err(e.to_string()),
                    Err(_) => break,
                }
            }
            buf.truncate(got);
            Ok(buf)
        })
    }
}

impl QueueHost for OutOfProcessHost {
    fn path(&self) -> &str {
        &self.path
    }

    fn finish_printed(&mut self) -> crate::output::OutputLog {
        OutOfProcessHost::finish_printed(self)
    }

    fn version(&self) -> &str {
        &self.version
    }

    fn compatibility(&self) -> i32 {
        self.compatibility
    }

    fn taddr_width(&self) -> Option<i32> {
        self.taddr_width
    }

    fn optional_exports(&self) -> &[&'static str] {
        &self.optional
    }

    fn length_unit(&self) -> LengthUnit {
        self.unit
    }

    fn dll_messages(&self) -> Vec<String> {
        self.dll_messages.clone()
    }

    fn queue_messages(&self, process: ProcessId) -> (Option<&str>, Option<&str>) {
        self.messages
            .iter()
            .find(|(p, _, _)| *p == process)
            .map_or((None, None), |(_, i, p)| (i.as_deref(), p.as_deref()))
    }

    fn attach(&mut self, spec: ProcessSpec) -> Result<ProcessId> {
        let id = self.next_target;
        self.next_target += 1;
        let model = spec.target.data_model();
        self.targets.insert(id, spec.target);
        let msg = ToHelper::Attach {
            target: id,
            image_name: spec.image_name,
            global_rank: spec.global_rank,
            model,
        };
        let outcome = self.request("attach", &msg);
        match outcome {
            Ok(Outcome::Attached {
                process,
                image,
                image_message,
                process_message,
            }) => {
                let pid = ProcessId::from_raw(process, image);
                self.attached.insert(pid, id);
                self.messages.push((pid, image_message, process_message));
                Ok(pid)
            }
            Ok(other) => {
                self.targets.remove(&id);
                Err(self.protocol_failure("attach", format!("unexpected answer {other:?}")))
            }
            Err(e) => {
                self.targets.remove(&id);
                Err(e)
            }
        }
    }

    fn detach(&mut self, process: ProcessId) -> Result<()> {
        let (p, i) = process.to_raw();
        match self.request(
            "detach",
            &ToHelper::Detach {
                process: p,
                image: i,
            },
        )? {
            Outcome::Detached => {
                if let Some(t) = self.attached.remove(&process) {
                    self.targets.remove(&t);
                }
                self.messages.retain(|(q, _, _)| *q != process);
                Ok(())
            }
            other => Err(self.protocol_failure("detach", format!("unexpected answer {other:?}"))),
        }
    }

    fn queues(&mut self, process: ProcessId) -> Result<Vec<CommunicatorQueues>> {
        let (p, i) = process.to_raw();
        match self.request(
            "queues",
            &ToHelper::Queues {
                process: p,
                image: i,
            },
        )? {
            Outcome::Queues(raw) => {
                let unit = self.unit;
                Ok(raw.into_iter().map(|r| r.finish(unit)).collect())
            }
            other => Err(self.protocol_failure("queues", format!("unexpected answer {other:?}"))),
        }
    }

    fn new_processes(&mut self, process: ProcessId) -> Result<Vec<ProcessLocation>> {
        let (p, i) = process.to_raw();
        let msg = ToHelper::NewProcesses {
            process: p,
            image: i,
        };
        match self.request("new processes", &msg)? {
            Outcome::NewProcesses(locations) => Ok(locations),
            other => {
                Err(self.protocol_failure("new processes", format!("unexpected answer {other:?}")))
            }
        }
    }

    fn spawn_breakpoint_name(&mut self, process: ProcessId) -> Result<String> {
        let (p, i) = process.to_raw();
        let msg = ToHelper::SpawnBreakpoint {
            process: p,
            image: i,
        };
        match self.request("spawn breakpoint name", &msg)? {
            Outcome::SpawnBreakpoint(name) => Ok(name),
            other => Err(self.protocol_failure(
                "spawn breakpoint name",
                format!("unexpected answer {other:?}"),
            )),
        }
    }
}

impl OutOfProcessHost {
    /// Ends the helper (orderly, bounded) and returns every line it printed on stderr — what
    /// the DLL printed on its own, deduplicated and counted. The host can do nothing more
    /// afterwards (calls return [`MqdError::HelperGone`]).
    pub fn finish_printed(&mut self) -> crate::output::OutputLog {
        self.end();
        // The stream ends with the helper; never wait long for it (a process the DLL left
        // behind could hold it open).
        if let Some(t) = self.printed_reader.take() {
            let deadline = Instant::now() + Duration::from_secs(1);
            while !t.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        self.printed.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Asks for an orderly end (the DLL destroys what it kept), but never waits long for it.
    fn end(&mut self) {
        if self.child.is_none() {
            return;
        }
        // Ask for an orderly end (the DLL destroys what it kept), but never wait long for it.
        if self.send(&ToHelper::Shutdown) {
            self.stdin = None;
            let deadline = Instant::now() + Duration::from_secs(1);
            while Instant::now() < deadline {
                match self.child.as_mut().map(Child::try_wait) {
                    Some(Ok(Some(_))) => {
                        self.child = None;
                        return;
                    }
                    Some(Ok(None)) => std::thread::sleep(Duration::from_millis(2)),
                    _ => break,
                }
            }
        }
        self.kill();
    }
}

impl Drop for OutOfProcessHost {
    fn drop(&mut self) {
        self.end();
    }
}
