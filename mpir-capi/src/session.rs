//! `mpir_session`: a job (from a starter attached to or launched, from pids or core files),
//! its rank table, its documents, its release.
//!
//! A `Session` is not `Send`: each lives in the table of the thread that made it (a
//! thread-local), and a global table says which thread that is, so a call from any other
//! thread is refused (`MPIR_STATUS_WRONG_THREAD`) before anything is touched. When that thread
//! ends, its sessions are released.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CString, OsStr, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ::mpir_session::{Session, SessionOptions, StackOptions};

use crate::error::{Failure, Result, guard, mpir_status};
use crate::handles::{Kind, SESSION_THREADS, check_shape, freed, give_string, issue, lock};
use crate::options::{self, mpir_options};

// Symbol versions (MPIR_0.1, see mpir.map and the crate root): in the module that defines
// the functions, so that the directive and its symbols are in one object.
std::arch::global_asm!(
    ".symver mpir_session_attach, mpir_session_attach@@@MPIR_0.1",
    ".symver mpir_session_launch, mpir_session_launch@@@MPIR_0.1",
    ".symver mpir_session_pids, mpir_session_pids@@@MPIR_0.1",
    ".symver mpir_session_cores, mpir_session_cores@@@MPIR_0.1",
    ".symver mpir_session_starter_pid, mpir_session_starter_pid@@@MPIR_0.1",
    ".symver mpir_session_rank_count, mpir_session_rank_count@@@MPIR_0.1",
    ".symver mpir_session_rank, mpir_session_rank@@@MPIR_0.1",
    ".symver mpir_session_job_json, mpir_session_job_json@@@MPIR_0.1",
    ".symver mpir_session_queues_json, mpir_session_queues_json@@@MPIR_0.1",
    ".symver mpir_session_stacks_json, mpir_session_stacks_json@@@MPIR_0.1",
    ".symver mpir_session_deadlock_json, mpir_session_deadlock_json@@@MPIR_0.1",
    ".symver mpir_session_release, mpir_session_release@@@MPIR_0.1",
    ".symver mpir_session_free, mpir_session_free@@@MPIR_0.1",
);

/// A session: an opaque handle made by [`mpir_session_attach`], [`mpir_session_launch`],
/// [`mpir_session_pids`] or [`mpir_session_cores`], freed with [`mpir_session_free`].
///
/// Thread safety: a session belongs to the thread that made it. Every call on it from another
/// thread fails with `MPIR_STATUS_WRONG_THREAD` and changes nothing. When the thread ends, its
/// sessions are released (the handles then fail with `MPIR_STATUS_INVALID_HANDLE`).
#[allow(non_camel_case_types, reason = "a C type name")]
pub struct mpir_session {
    _opaque: [u8; 0],
}

/// One rank of the job, as the starter's process table gives it (see
/// [`mpir_session_rank`]).
///
/// Ownership: the strings belong to the session and stay valid until the session is freed, or
/// its thread ends (release keeps them). Do not free them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
#[allow(non_camel_case_types, reason = "a C type name")]
pub struct mpir_rank {
    /// Rank in `MPI_COMM_WORLD`.
    pub rank: u64,
    /// Its pid as the starter reported it; 0 when the table gives no valid pid.
    pub pid: u32,
    /// Whether it runs on this node: 1 yes, 0 no, -1 unknown (no usable host name). Nothing is
    /// ever done to a rank that is not local.
    pub local: c_int,
    /// Host name as reported; NULL when it could not be read.
    pub host: *const c_char,
    /// Executable as reported; NULL when it could not be read.
    pub executable: *const c_char,
    /// How the rank was handled, in the JSON documents' words: `"attached"`,
    /// `"not_attached"`, `"remote"`, `"refused: <reason>"` or `"failed: <reason>"`. Never NULL.
    pub control: *const c_char,
}

/// A rank's row, kept for the session's life.
struct Row {
    rank: u64,
    pid: u32,
    local: c_int,
    host: Option<CString>,
    executable: Option<CString>,
    control: CString,
}

/// What a session handle owns.
struct Slot {
    /// `None` once released.
    session: Option<Session>,
    /// Launch mode: the starter.
    child: Option<Child>,
    leave_running: bool,
    types_given: bool,
    /// The `source` of the stacks document.
    source: &'static str,
    /// The rank table (starter sessions), as acquired.
    rows: Option<Vec<Row>>,
}

impl Slot {
    fn new(mut session: Session, opts: &options::Opts, source: &'static str) -> Slot {
        let child = session.take_child();
        let rows = session.job().map(|job| {
            job.ranks()
                .map(|r| Row {
                    rank: r.rank,
                    pid: u32::try_from(r.pid).unwrap_or(0),
                    local: mpir_json::job::local_of(&job.locality(r.rank)).map_or(-1, c_int::from),
                    host: r.host.map(c_string),
                    executable: r.executable.map(c_string),
                    control: c_string(&mpir_json::job::control_text(job, r.rank)),
                })
                .collect()
        });
        Slot {
            session: Some(session),
            child,
            leave_running: opts.leave_running,
            types_given: opts.types_given(),
            source,
            rows,
        }
    }

    fn live(&mut self) -> Result<&mut Session> {
        self.session.as_mut().ok_or_else(|| {
            Failure::new(
                mpir_status::MPIR_STATUS_RELEASED,
                "the session was released: only its rank table remains",
            )
        })
    }

    /// Lets everything go: the ranks (dropping the session), then the starter (stopped and
    /// reaped, unless it is to be left running).
    fn release(&mut self) {
        drop(self.session.take());
        if let Some(mut child) = self.child.take()
            && !self.leave_running
        {
            stop_starter(&mut child);
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.release();
    }
}

fn c_string(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// Ends a launched job the way a user's Ctrl-C would: `SIGTERM` to the starter, up to 10 s,
/// then `SIGKILL`; reaped either way.
fn stop_starter(child: &mut Child) {
    if matches!(child.try_wait(), Ok(Some(_))) {
        return;
    }
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) on our own unreaped child: the pid cannot name another process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// This thread's sessions. Dropped when the thread ends: each is released, and its handle
/// leaves the global table.
struct Table(HashMap<usize, Slot>);

impl Drop for Table {
    fn drop(&mut self) {
        let mut threads = lock(&SESSION_THREADS);
        if let Some(t) = threads.as_mut() {
            for key in self.0.keys() {
                t.remove(key);
            }
        }
        drop(threads);
        self.0.clear();
    }
}

thread_local! {
    static SESSIONS: RefCell<Table> = RefCell::new(Table(HashMap::new()));
}

fn thread_gone() -> Failure {
    Failure::new(
        mpir_status::MPIR_STATUS_WRONG_THREAD,
        "this thread is ending: its sessions are being released",
    )
}

/// Registers `slot` under a new handle, owned by this thread.
fn register(slot: Slot) -> Result<usize> {
    let key = issue(Kind::Session);
    let mut slot = Some(slot);
    SESSIONS
        .try_with(|t| {
            if let Some(s) = slot.take() {
                t.borrow_mut().0.insert(key, s);
            }
        })
        .map_err(|_| thread_gone())?;
    lock(&SESSION_THREADS)
        .get_or_insert_with(HashMap::new)
        .insert(key, std::thread::current().id());
    Ok(key)
}

/// Checks that `s` is a live session of this thread: its key.
fn owned(s: *const mpir_session) -> Result<usize> {
    if s.is_null() {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_NULL_ARGUMENT,
            "session is NULL",
        ));
    }
    let key = s as usize;
    check_shape(key, Kind::Session)?;
    let owner = lock(&SESSION_THREADS)
        .get_or_insert_with(HashMap::new)
        .get(&key)
        .copied();
    let me = std::thread::current().id();
    match owner {
        None => Err(freed(key, Kind::Session)),
        Some(t) if t != me => Err(Failure::new(
            mpir_status::MPIR_STATUS_WRONG_THREAD,
            format!(
                "mpir_session {key:#x} belongs to thread {t:?}, not to this thread ({me:?}): a session is used only on the thread that made it"
            ),
        )),
        Some(_) => Ok(key),
    }
}

/// Runs `f` on the session `s` of this thread.
fn with_slot<R>(s: *const mpir_session, f: impl FnOnce(&mut Slot) -> Result<R>) -> Result<R> {
    let key = owned(s)?;
    SESSIONS
        .try_with(|t| {
            let mut t = t.borrow_mut();
            let slot = t.0.get_mut(&key).ok_or_else(|| freed(key, Kind::Session))?;
            f(slot)
        })
        .map_err(|_| thread_gone())?
}

/// Writes `value` to the out-parameter `out`.
///
/// # Safety
/// `out` is not NULL (checked before the work by [`need`]) and writable.
unsafe fn put<T>(out: *mut T, value: T) {
    // SAFETY: the caller's contract.
    unsafe { out.write(value) };
}

/// NULL out-parameters are refused before any work is done.
fn need<T>(out: *mut T, name: &str) -> Result<()> {
    if out.is_null() {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_NULL_ARGUMENT,
            format!("{name} is NULL"),
        ));
    }
    Ok(())
}

fn create(
    out: *mut *mut mpir_session,
    opts: *const mpir_options,
    source: &'static str,
    make: impl FnOnce(SessionOptions) -> std::result::Result<Session, Failure>,
) -> Result<()> {
    need(out, "out")?;
    let o = options::read(opts)?;
    let mut session = make(o.session_options())?;
    // The job's other nodes, as `mpir` reads them (before the slot: a failure frees all).
    mpir_agent::reach_from_library(&mut session, &o.other_nodes).map_err(|e| {
        Failure::new(
            mpir_status::MPIR_STATUS_ACQUIRE,
            format!(
                "reaching the job's other nodes: {}",
                ::mpir_session::chain(&e)
            ),
        )
    })?;
    let key = register(Slot::new(session, &o, source))?;
    // SAFETY: `out` checked not NULL; writable by the contract.
    unsafe { put(out, key as *mut mpir_session) };
    Ok(())
}

/// Attach mode: reads the job of the running starter `pid` (`mpiexec`, `orterun`…; or any
/// process of a job exporting MPI2DD) and lets it run. `opts` may be NULL (the defaults).
///
/// Ownership: on success `*out` is a new session the caller frees with
/// [`mpir_session_free`]; on failure `*out` is left as it was.
///
/// # Safety
/// `out` is NULL (an error) or writable; `opts` is NULL or a handle value (checked).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_attach(
    pid: u32,
    opts: *const mpir_options,
    out: *mut *mut mpir_session,
) -> mpir_status {
    guard("mpir_session_attach", || {
        create(out, opts, "starter", |o| {
            Session::attach(pid, o).map_err(|e| Failure::session("attach", &e))
        })
    })
}

/// Launch mode: runs `argv[0]` with arguments `argv[1..argc]` (the starter, e.g. `mpiexec -n 4
/// ./app`, searched in `PATH` like `execvp`) under control, and acquires its job. Its standard
/// input is `/dev/null`; its output and errors are this process's. The arguments are bytes:
/// they need not be UTF-8.
///
/// The session keeps the starter: releasing or freeing the session ends the job (`SIGTERM` to
/// the starter, `SIGKILL` after 10 s) and reaps it, unless
/// [`mpir_options_set_leave_running`](crate::mpir_options_set_leave_running) asked to
/// leave it running.
///
/// Ownership: as [`mpir_session_attach`]; the library copies `argv`.
///
/// # Safety
/// `argv` is NULL (an error) or points to `argc` pointers, each NULL (an error) or a
/// NUL-terminated string; `out` as in [`mpir_session_attach`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_launch(
    argv: *const *const c_char,
    argc: usize,
    opts: *const mpir_options,
    out: *mut *mut mpir_session,
) -> mpir_status {
    guard("mpir_session_launch", || {
        need(out, "out")?;
        // SAFETY: the caller's contract.
        let args = unsafe { string_array(argv, argc, "argv") }?;
        let Some((program, rest)) = args.split_first() else {
            return Err(Failure::new(
                mpir_status::MPIR_STATUS_INVALID_ARGUMENT,
                "argc is 0: no starter to launch",
            ));
        };
        let mut cmd = Command::new(OsStr::from_bytes(program));
        cmd.args(rest.iter().map(|a| OsStr::from_bytes(a)))
            .stdin(Stdio::null());
        create(out, opts, "starter", |o| {
            Session::launch(cmd, o).map_err(|e| Failure::session("launch", &e))
        })
    })
}

/// Processes named by pid (no starter, no rank table): their queues, stacks and deadlock
/// analysis. `pids` holds `count` pids; a pid given twice is read once.
///
/// Ownership: as [`mpir_session_attach`]; the library copies `pids`.
///
/// # Safety
/// `pids` is NULL (an error) or points to `count` pids; `out` as in [`mpir_session_attach`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_pids(
    pids: *const u32,
    count: usize,
    opts: *const mpir_options,
    out: *mut *mut mpir_session,
) -> mpir_status {
    guard("mpir_session_pids", || {
        need(out, "out")?;
        if pids.is_null() {
            return Err(Failure::new(
                mpir_status::MPIR_STATUS_NULL_ARGUMENT,
                "pids is NULL",
            ));
        }
        // SAFETY: not NULL; `count` pids by the contract.
        let list = unsafe { std::slice::from_raw_parts(pids, count) }.to_vec();
        create(out, opts, "pids", |o| {
            Session::pids(list, o).map_err(|e| Failure::session("pids", &e))
        })
    })
}

/// Core files: a starter's core gives the job, ranks' cores are read as the ranks. `paths`
/// holds `count` paths (bytes: they need not be UTF-8).
///
/// Ownership: as [`mpir_session_attach`]; the library copies `paths`.
///
/// # Safety
/// `paths` as `argv` in [`mpir_session_launch`]; `out` as in [`mpir_session_attach`].
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_cores(
    paths: *const *const c_char,
    count: usize,
    opts: *const mpir_options,
    out: *mut *mut mpir_session,
) -> mpir_status {
    guard("mpir_session_cores", || {
        need(out, "out")?;
        // SAFETY: the caller's contract.
        let list = unsafe { string_array(paths, count, "paths") }?;
        let list: Vec<&OsStr> = list.iter().map(|p| OsStr::from_bytes(p)).collect();
        create(out, opts, "cores", |o| {
            Session::cores(list, o).map_err(|e| Failure::session("cores", &e))
        })
    })
}

/// Copies `count` C strings from `array`, naming the first NULL one.
///
/// # Safety
/// As `argv` in [`mpir_session_launch`].
unsafe fn string_array(
    array: *const *const c_char,
    count: usize,
    what: &str,
) -> Result<Vec<Vec<u8>>> {
    if array.is_null() {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_NULL_ARGUMENT,
            format!("{what} is NULL"),
        ));
    }
    // SAFETY: not NULL; `count` pointers by the contract.
    let items = unsafe { std::slice::from_raw_parts(array, count) };
    items
        .iter()
        .enumerate()
        // SAFETY: each is NULL (refused by `bytes`) or a NUL-terminated string.
        .map(|(i, &s)| unsafe { options::bytes(s, &format!("{what}[{i}]")) }.map(<[u8]>::to_vec))
        .collect()
}

/// The starter's pid, for a session from a starter (attached or launched), in `*out`.
///
/// # Safety
/// `out` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_starter_pid(
    session: *const mpir_session,
    out: *mut u32,
) -> mpir_status {
    guard("mpir_session_starter_pid", || {
        need(out, "out")?;
        let pid = with_slot(session, |slot| {
            let Some(s) = &slot.session else {
                return Ok(slot.child.as_ref().map(Child::id));
            };
            Ok(s.starter_pid())
        })?;
        let pid = pid.ok_or_else(|| {
            Failure::new(
                mpir_status::MPIR_STATUS_UNSUPPORTED,
                "the session has no starter (pids or core files), or was released",
            )
        })?;
        // SAFETY: checked not NULL.
        unsafe { put(out, pid) };
        Ok(())
    })
}

fn rows(slot: &Slot) -> Result<&[Row]> {
    slot.rows.as_deref().ok_or_else(|| {
        Failure::new(
            mpir_status::MPIR_STATUS_UNSUPPORTED,
            "the rank table is known only for a session from a starter (not pids or core files)",
        )
    })
}

/// The number of ranks in the job's table, in `*out` (a session from a starter; still
/// answered after release).
///
/// # Safety
/// `out` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_rank_count(
    session: *const mpir_session,
    out: *mut usize,
) -> mpir_status {
    guard("mpir_session_rank_count", || {
        need(out, "out")?;
        let n = with_slot(session, |slot| Ok(rows(slot)?.len()))?;
        // SAFETY: checked not NULL.
        unsafe { put(out, n) };
        Ok(())
    })
}

/// Row `index` (0 to count-1) of the job's table, in `*out` (still answered after release).
///
/// Ownership: the strings in `*out` belong to the session, valid until it is freed.
///
/// # Safety
/// `out` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_rank(
    session: *const mpir_session,
    index: usize,
    out: *mut mpir_rank,
) -> mpir_status {
    guard("mpir_session_rank", || {
        need(out, "out")?;
        let row = with_slot(session, |slot| {
            let rows = rows(slot)?;
            let r = rows.get(index).ok_or_else(|| {
                Failure::new(
                    mpir_status::MPIR_STATUS_INVALID_ARGUMENT,
                    format!("index {index} is past the table's {} ranks", rows.len()),
                )
            })?;
            Ok(mpir_rank {
                rank: r.rank,
                pid: r.pid,
                local: r.local,
                host: r.host.as_ref().map_or(std::ptr::null(), |h| h.as_ptr()),
                executable: r
                    .executable
                    .as_ref()
                    .map_or(std::ptr::null(), |e| e.as_ptr()),
                control: r.control.as_ptr(),
            })
        })?;
        // SAFETY: checked not NULL.
        unsafe { put(out, row) };
        Ok(())
    })
}

/// Hands a document to C.
fn give_json(out: *mut *mut c_char, doc: &serde_json::Value) -> Result<()> {
    let p = give_string(doc.to_string().into_bytes())?;
    // SAFETY: `out` checked not NULL by the caller of this function.
    unsafe { put(out, p) };
    Ok(())
}

fn sampling(samples: u32, interval_ms: u32) -> Result<Duration> {
    if samples == 0 || samples > 10_000 {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_INVALID_ARGUMENT,
            format!("samples is {samples}: 1 to 10000"),
        ));
    }
    Ok(Duration::from_millis(u64::from(interval_ms)))
}

/// The job (`mpir.job/1`, docs/cli-json.md) as JSON, in `*out`: for a session from a starter
/// (as acquired), from a process exporting MPI2DD, or from cores that include a starter's.
///
/// Ownership: the caller frees `*out` with [`mpir_string_free`](crate::mpir_string_free).
///
/// # Safety
/// `out` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_job_json(
    session: *const mpir_session,
    out: *mut *mut c_char,
) -> mpir_status {
    guard("mpir_session_job_json", || {
        need(out, "out")?;
        let doc = with_slot(session, |slot| {
            mpir_json::job(slot.live()?).ok_or_else(|| {
                Failure::new(
                    mpir_status::MPIR_STATUS_UNSUPPORTED,
                    "the session has no job: processes named by pid, or ranks' cores without the starter's",
                )
            })
        })?;
        give_json(out, &doc)
    })
}

/// Every selected rank's message queues, one snapshot, each rank held only while read
/// (`mpir.queues/1`), in `*out`.
///
/// Ownership: the caller frees `*out` with [`mpir_string_free`](crate::mpir_string_free).
///
/// # Safety
/// `out` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_queues_json(
    session: *const mpir_session,
    out: *mut *mut c_char,
) -> mpir_status {
    guard("mpir_session_queues_json", || {
        need(out, "out")?;
        let doc = with_slot(session, |slot| {
            let types = slot.types_given;
            let read = slot
                .live()?
                .queues()
                .map_err(|e| Failure::session("queues", &e))?;
            Ok(mpir_json::queues(&read, types))
        })?;
        give_json(out, &doc)
    })
}

/// Every selected rank's stacks: `samples` samples `interval_ms` apart (`mpir.stacks/2`), in
/// `*out`.
///
/// Ownership: the caller frees `*out` with [`mpir_string_free`](crate::mpir_string_free).
///
/// # Safety
/// `out` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_stacks_json(
    session: *const mpir_session,
    samples: u32,
    interval_ms: u32,
    out: *mut *mut c_char,
) -> mpir_status {
    guard("mpir_session_stacks_json", || {
        need(out, "out")?;
        let interval = sampling(samples, interval_ms)?;
        let doc = with_slot(session, |slot| {
            let source = slot.source;
            let options = StackOptions::default()
                .with_samples(samples)
                .with_interval(interval);
            let read = slot
                .live()?
                .stacks(&options)
                .map_err(|e| Failure::session("stacks", &e))?;
            Ok(mpir_json::stacks(&read, source, interval))
        })?;
        give_json(out, &doc)
    })
}

/// The wait-for analysis over `samples` snapshots of the queues `interval_ms` apart: cycles
/// that stay the same in every sample are a deadlock (`mpir.deadlock/4`), in `*out`.
///
/// Ownership: the caller frees `*out` with [`mpir_string_free`](crate::mpir_string_free).
///
/// # Safety
/// `out` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_session_deadlock_json(
    session: *const mpir_session,
    samples: u32,
    interval_ms: u32,
    out: *mut *mut c_char,
) -> mpir_status {
    guard("mpir_session_deadlock_json", || {
        need(out, "out")?;
        let interval = sampling(samples, interval_ms)?;
        let doc = with_slot(session, |slot| {
            let types = slot.types_given;
            let read = slot
                .live()?
                .deadlock(samples, interval)
                .map_err(|e| Failure::session("deadlock", &e))?;
            Ok(mpir_json::deadlock(&read, samples, types))
        })?;
        give_json(out, &doc)
    })
}

/// Lets the job go: every rank the session holds is released, and a launched starter is ended
/// and reaped (unless left running, see
/// [`mpir_options_set_leave_running`](crate::mpir_options_set_leave_running)). The
/// handle stays valid for the rank table and must still be freed; reading calls then fail
/// with `MPIR_STATUS_RELEASED`. Releasing again does nothing.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_session_release(session: *mut mpir_session) -> mpir_status {
    guard("mpir_session_release", || {
        with_slot(session, |slot| {
            slot.release();
            Ok(())
        })
    })
}

/// Releases the session (as [`mpir_session_release`]) and frees its handle and everything it
/// owns (the rank table's strings too). NULL is accepted and does nothing. A handle already
/// freed is `MPIR_STATUS_INVALID_HANDLE`; from another thread, `MPIR_STATUS_WRONG_THREAD`
/// (nothing is freed: the session is released when its own thread ends).
#[unsafe(no_mangle)]
pub extern "C" fn mpir_session_free(session: *mut mpir_session) -> mpir_status {
    guard("mpir_session_free", || {
        if session.is_null() {
            return Ok(());
        }
        let key = owned(session)?;
        let slot = SESSIONS
            .try_with(|t| t.borrow_mut().0.remove(&key))
            .map_err(|_| thread_gone())?;
        lock(&SESSION_THREADS)
            .get_or_insert_with(HashMap::new)
            .remove(&key);
        // Released here, outside the table's borrow.
        drop(slot.ok_or_else(|| freed(key, Kind::Session))?);
        Ok(())
    })
}
