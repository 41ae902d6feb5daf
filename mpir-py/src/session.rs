//! `mpir._mpir._Session`: one session of the library, owned by the thread that made it.
//!
//! PyO3's `unsendable` makes any use from another thread raise instead of touching the
//! session (its tracer thread, its `Rc` targets); the Python layer checks the thread first
//! with a clearer message. `close` (and dropping the object, when Python collects it)
//! releases every rank; for a launch the starter is then stopped (`SIGTERM`, then `SIGKILL`
//! after five seconds) and reaped, unless it was asked to be left running.

use std::os::fd::IntoRawFd;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use mpir_session::StackOptions;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::args::{self, Extra};
use crate::errors::{err, session_error};

/// One rank of the job: (rank, pid, host, executable, local, control).
pub(crate) type RankRow = (
    u64,
    i64,
    Option<String>,
    Option<String>,
    Option<bool>,
    String,
);

/// The ranks of `job` as rows, in the documents' words (`local`, `control`): for sessions and
/// for the mock starters of `mpir.testing` alike.
pub(crate) fn rank_rows(job: &mpir_acquire::Job) -> Vec<RankRow> {
    job.ranks()
        .map(|r| {
            (
                r.rank,
                r.pid,
                r.host.map(str::to_owned),
                r.executable.map(str::to_owned),
                mpir_json::job::local_of(&job.locality(r.rank)),
                mpir_json::job::control_text(job, r.rank).into_owned(),
            )
        })
        .collect()
}

/// A session and what the bindings keep beside it.
struct Open {
    /// `Some` until the session is let go (then the starter is stopped).
    session: Option<mpir_session::Session>,
    /// Launch: the starter.
    child: Option<Child>,
    extra: Extra,
    /// `"starter"`, `"pids"` or `"cores"` (the stacks document's `source`).
    source: &'static str,
}

impl Drop for Open {
    fn drop(&mut self) {
        // Every rank let go first (breakpoints out, threads running), then the starter.
        drop(self.session.take());
        if let Some(mut child) = self.child.take()
            && !self.extra.leave_running
        {
            stop_and_reap(&mut child);
        }
    }
}

/// `SIGTERM` (which ends a job through its starter), `SIGKILL` after five seconds, reaped.
fn stop_and_reap(child: &mut Child) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = kill(Pid::from_raw(pid), Signal::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A session on an MPI job (or processes, or core files). Made by the static methods
/// `attach`, `launch`, `pids`, `cores`; used through `mpir.Session`.
#[pyclass(unsendable, module = "mpir._mpir", name = "_Session")]
pub(crate) struct Session {
    open: Option<Open>,
}

/// Registers the library's `atexit` handler (once): a session still holding ranks when the
/// interpreter exits (never closed, or collected on another thread and so never dropped)
/// lets them go then. No signal handler is installed: Python owns those.
fn release_at_exit() -> PyResult<()> {
    mpir_target::live::tracer::detach_at_exit()
        .map_err(|e| err("Error", format!("registering the exit cleanup: {e}")))
}

impl Session {
    /// A new session, its job's other nodes reached as `extra` says (as `mpir` reaches them).
    fn reaching(
        mut session: mpir_session::Session,
        extra: Extra,
        source: &'static str,
    ) -> PyResult<Self> {
        mpir_agent::reach_from_library(&mut session, &extra.other_nodes).map_err(|e| {
            crate::errors::err(
                "AcquireError",
                format!(
                    "reaching the job's other nodes: {}",
                    mpir_session::chain(&e)
                ),
            )
        })?;
        Ok(Session::new(session, extra, source))
    }

    fn new(session: mpir_session::Session, extra: Extra, source: &'static str) -> Self {
        let mut session = session;
        let child = session.take_child();
        Session {
            open: Some(Open {
                session: Some(session),
                child,
                extra,
                source,
            }),
        }
    }

    fn open(&mut self) -> PyResult<&mut Open> {
        self.open.as_mut().ok_or_else(closed)
    }

    fn session(&mut self) -> PyResult<(&mut mpir_session::Session, &Extra, &'static str)> {
        let open = self.open()?;
        match open.session.as_mut() {
            Some(s) => Ok((s, &open.extra, open.source)),
            None => Err(closed()),
        }
    }
}

/// A JSON document as text (parsed by the Python layer).
fn text(value: &serde_json::Value) -> String {
    value.to_string()
}

#[pymethods]
impl Session {
    /// Reads the job of the running starter `pid` (or an MPI2DD process) without touching
    /// its ranks.
    #[staticmethod]
    #[pyo3(signature = (pid, options: "dict[str, object] | None" = None))]
    fn attach(pid: u32, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        release_at_exit()?;
        let (options, extra) = args::options(options, false)?;
        let session = mpir_session::Session::attach(pid, options).map_err(|e| session_error(&e))?;
        Session::reaching(session, extra, "starter")
    }

    /// Runs `argv` (a starter, or a wrapper that execs one) under control and acquires the
    /// job it spawns. `stdin` is `"devnull"` or `"inherit"`; `stdout` and `stderr` also
    /// `"pipe"` (then `take_stdout`/`take_stderr` give the descriptor).
    #[staticmethod]
    #[pyo3(signature = (argv: "list[bytes]", options: "dict[str, object] | None" = None, stdin="devnull", stdout="inherit", stderr="inherit"))]
    fn launch(
        argv: &Bound<'_, PyList>,
        options: Option<&Bound<'_, PyDict>>,
        stdin: &str,
        stdout: &str,
        stderr: &str,
    ) -> PyResult<Self> {
        release_at_exit()?;
        let mut words = Vec::with_capacity(argv.len());
        for word in argv.iter() {
            words.push(args::os_bytes(&word)?);
        }
        let Some((program, rest)) = words.split_first() else {
            return Err(PyValueError::new_err("launch: argv is empty"));
        };
        let mut command = Command::new(program);
        command
            .args(rest)
            .stdin(args::stdio("stdin", stdin, false)?)
            .stdout(args::stdio("stdout", stdout, true)?)
            .stderr(args::stdio("stderr", stderr, true)?);
        let (options, extra) = args::options(options, true)?;
        // The library's error names the pid (0: never started), not the program: say which.
        let session = mpir_session::Session::launch(command, options).map_err(|e| {
            let e = session_error(&e);
            Python::attach(|py| {
                let text = format!("{} ({})", e.value(py), Path::new(program).display());
                PyErr::from_type(e.get_type(py), text)
            })
        })?;
        Session::reaching(session, extra, "starter")
    }

    /// Processes named by pid (no starter, no table).
    #[staticmethod]
    #[pyo3(signature = (pids, options: "dict[str, object] | None" = None))]
    fn pids(pids: Vec<u32>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        release_at_exit()?;
        let (options, extra) = args::options(options, false)?;
        let session = mpir_session::Session::pids(pids, options).map_err(|e| session_error(&e))?;
        Session::reaching(session, extra, "pids")
    }

    /// Core files (a starter's core gives the job; ranks' cores are read as the ranks).
    #[staticmethod]
    #[pyo3(signature = (paths: "list[bytes]", options: "dict[str, object] | None" = None))]
    fn cores(paths: &Bound<'_, PyList>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        release_at_exit()?;
        let mut files = Vec::with_capacity(paths.len());
        for p in paths.iter() {
            files.push(args::path(&p)?);
        }
        let (options, extra) = args::options(options, false)?;
        let session =
            mpir_session::Session::cores(files, options).map_err(|e| session_error(&e))?;
        Session::reaching(session, extra, "cores")
    }

    /// Whether the session is closed.
    #[getter]
    fn closed(&self) -> bool {
        self.open.is_none()
    }

    /// The starter's pid, for a session from a starter.
    #[getter]
    fn starter_pid(&mut self) -> PyResult<Option<u32>> {
        Ok(self.session()?.0.starter_pid())
    }

    /// `"starter"`, `"pids"` or `"cores"`.
    #[getter]
    fn source(&mut self) -> PyResult<&'static str> {
        Ok(self.session()?.2)
    }

    /// Launch with `stdout="pipe"`: the read end's file descriptor, once (the caller owns
    /// it).
    fn take_stdout(&mut self) -> PyResult<Option<i32>> {
        let open = self.open()?;
        Ok(open
            .child
            .as_mut()
            .and_then(|c| c.stdout.take())
            .map(IntoRawFd::into_raw_fd))
    }

    /// Launch with `stderr="pipe"`: the read end's file descriptor, once (the caller owns
    /// it).
    fn take_stderr(&mut self) -> PyResult<Option<i32>> {
        let open = self.open()?;
        Ok(open
            .child
            .as_mut()
            .and_then(|c| c.stderr.take())
            .map(IntoRawFd::into_raw_fd))
    }

    /// The job's ranks as tuples (rank, pid, host, executable, local, control); empty for
    /// sessions of pids or cores, which have no starter's table.
    fn ranks(&mut self) -> PyResult<Vec<RankRow>> {
        let (session, _, _) = self.session()?;
        let Some(job) = session.job() else {
            return Ok(Vec::new());
        };
        Ok(rank_rows(job))
    }

    /// The job document (`mpir.job/1`) as JSON text; `None` for pids or cores.
    fn job(&mut self) -> PyResult<Option<String>> {
        let (session, _, _) = self.session()?;
        Ok(mpir_json::job(session).as_ref().map(text))
    }

    /// Reads every selected rank's message queues (held while read): `mpir.queues/1`.
    fn queues(&mut self) -> PyResult<String> {
        let (session, extra, _) = self.session()?;
        let read = session.queues().map_err(|e| session_error(&e))?;
        Ok(text(&mpir_json::queues(&read, extra.types_given)))
    }

    /// Samples the queues `samples` times, `interval` seconds apart, and analyses the
    /// wait-for graph: `mpir.deadlock/4`.
    fn deadlock(&mut self, samples: u32, interval: f64) -> PyResult<String> {
        let interval = args::seconds("interval", interval)?;
        let samples = checked_samples(samples)?;
        let (session, extra, _) = self.session()?;
        let read = session
            .deadlock(samples, interval)
            .map_err(|e| session_error(&e))?;
        Ok(text(&mpir_json::deadlock(
            &read,
            samples,
            extra.types_given,
        )))
    }

    /// Every rank's stacks, merged: `mpir.stacks/2` (the last of `samples`, `interval`
    /// seconds apart).
    fn stacks(&mut self, samples: u32, interval: f64) -> PyResult<String> {
        let interval = args::seconds("interval", interval)?;
        let samples = checked_samples(samples)?;
        let (session, _, source) = self.session()?;
        let options = StackOptions::default()
            .with_samples(samples)
            .with_interval(interval);
        let read = session.stacks(&options).map_err(|e| session_error(&e))?;
        Ok(text(&mpir_json::stacks(&read, source, interval)))
    }

    /// Releases every rank (and, for a launch, stops and reaps the starter unless
    /// `leave_running`). Closing twice does nothing.
    fn close(&mut self) {
        drop(self.open.take());
    }
}

/// The error of every method of a closed session.
fn closed() -> PyErr {
    err(
        "SessionClosed",
        "the session is closed: its ranks were released",
    )
}

/// 1 to 1000 samples.
fn checked_samples(samples: u32) -> PyResult<u32> {
    if (1..=1000).contains(&samples) {
        Ok(samples)
    } else {
        Err(PyValueError::new_err(format!(
            "samples must be between 1 and 1000, not {samples}"
        )))
    }
}
