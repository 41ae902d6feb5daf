//! libpmix itself: the library opened at run time, its entry points, and every call into it.
//!
//! Blocking PMIx calls can hang on a dead server, so every call that talks to the server is a
//! non-blocking variant (`*_nb`, or a call with a completion callback) whose callback fulfils a
//! [`Pending`] that the caller waits on for a bounded time; `PMIx_tool_init` and
//! `PMIx_tool_finalize`, which have no such variant, run on a thread of their own. The inputs of
//! a call live in its `Pending` until the callback has run, or forever when it never does (a
//! bounded leak per abandoned call, never a dangling pointer). Every callback is `extern "C"`,
//! catches panics, copies what it was given and returns: nothing unwinds into C, and events go
//! to a process-wide queue (PMIx's event handlers carry no user pointer).

use super::info::{InfoArray, Value, c_string, fixed_str, opt_str, read_infos};
use super::types::*;
use std::collections::VecDeque;
use std::ffi::{CString, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

type GetVersionFn = unsafe extern "C" fn() -> *const c_char;
type ErrorStringFn = unsafe extern "C" fn(Status) -> *const c_char;
type ToolInitFn = unsafe extern "C" fn(*mut PmixProc, *mut PmixInfo, usize) -> Status;
type ToolFinalizeFn = unsafe extern "C" fn() -> Status;
type QueryNbFn = unsafe extern "C" fn(*mut PmixQuery, usize, InfoCbFn, *mut c_void) -> Status;
type RegisterFn = unsafe extern "C" fn(
    *mut Status,
    usize,
    *mut PmixInfo,
    usize,
    NotificationFn,
    Option<HdlrRegCbFn>,
    *mut c_void,
) -> Status;
type NotifyFn = unsafe extern "C" fn(
    Status,
    *const PmixProc,
    u8,
    *const PmixInfo,
    usize,
    Option<OpCbFn>,
    *mut c_void,
) -> Status;
type SpawnNbFn = unsafe extern "C" fn(
    *const PmixInfo,
    usize,
    *const PmixApp,
    usize,
    SpawnCbFn,
    *mut c_void,
) -> Status;

/// Why a library could not be opened or used.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// dlopen's message.
    Dlopen(String),
    /// A PMIx entry point the library does not export.
    Symbol(&'static str),
}

/// A library opened but not yet accepted: only its version has been read.
pub(crate) struct Opened {
    lib: libloading::Library,
    pub(crate) version: String,
}

/// Opens `path` (a file, or a soname the dynamic linker looks up) and reads `PMIx_Get_version`.
pub(crate) fn open(path: &Path) -> Result<Opened, OpenError> {
    use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: loading a shared library runs its initialisers: this is the libpmix the caller
    // chose (the launcher's, theirs, or the system's); RTLD_LOCAL keeps its symbols out of the
    // global scope so another libpmix loaded later binds to its own.
    let lib: libloading::Library = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }
        .map_err(|e| OpenError::Dlopen(e.to_string()))?
        .into();
    // SAFETY: `PMIx_Get_version` has this signature in every PMIx (pmix.h).
    let get: GetVersionFn = unsafe { symbol(&lib, "PMIx_Get_version") }?;
    // SAFETY: takes no argument and returns a static NUL-terminated string (or null).
    let version = unsafe { opt_str(get()) }.unwrap_or_default();
    Ok(Opened { lib, version })
}

/// # Safety
/// `T` is the C signature of `name`.
unsafe fn symbol<T: Copy>(lib: &libloading::Library, name: &'static str) -> Result<T, OpenError> {
    // SAFETY: the type is the symbol's (the caller's contract); the value is copied out and
    // only used while `lib` is loaded (Api keeps it, and is never dropped once used).
    unsafe { lib.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|_| OpenError::Symbol(name))
}

/// The entry points of an accepted libpmix.
pub(crate) struct Api {
    _lib: libloading::Library,
    error_string: ErrorStringFn,
    tool_init: ToolInitFn,
    tool_finalize: ToolFinalizeFn,
    query_info_nb: QueryNbFn,
    register_event_handler: RegisterFn,
    notify_event: NotifyFn,
    spawn_nb: SpawnNbFn,
}

impl Api {
    /// Resolves the entry points this crate uses.
    pub(crate) fn resolve(opened: Opened) -> Result<Api, OpenError> {
        let l = &opened.lib;
        // SAFETY: for each `symbol` call, the type is that of pmix.h / pmix_tool.h, declared
        // in this module and types.rs and checked by the layout test.
        unsafe {
            Ok(Api {
                error_string: symbol(l, "PMIx_Error_string")?,
                tool_init: symbol(l, "PMIx_tool_init")?,
                tool_finalize: symbol(l, "PMIx_tool_finalize")?,
                query_info_nb: symbol(l, "PMIx_Query_info_nb")?,
                register_event_handler: symbol(l, "PMIx_Register_event_handler")?,
                notify_event: symbol(l, "PMIx_Notify_event")?,
                spawn_nb: symbol(l, "PMIx_Spawn_nb")?,
                _lib: opened.lib,
            })
        }
    }

    /// `PMIx_Error_string(status)`.
    pub(crate) fn error_string(&self, status: Status) -> String {
        // SAFETY: any status is accepted; the result is a static string or null.
        unsafe { opt_str((self.error_string)(status)) }
            .unwrap_or_else(|| format!("status {status}"))
    }
}

/// A libpmix that ran `PMIx_tool_init` stays loaded for the life of the process: its threads
/// and atexit handlers may outlive the connection.
static KEEP: Mutex<Vec<Arc<Api>>> = Mutex::new(Vec::new());

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The result of one non-blocking call, fulfilled by its callback.
struct Pending<T> {
    state: Mutex<Option<T>>,
    cv: Condvar,
    /// The call's inputs, alive until the callback ran (or forever).
    _keep: Mutex<Option<Box<dyn Send>>>,
}

impl<T> Pending<T> {
    fn new(keep: Option<Box<dyn Send>>) -> Arc<Self> {
        Arc::new(Pending {
            state: Mutex::new(None),
            cv: Condvar::new(),
            _keep: Mutex::new(keep),
        })
    }
    fn fulfil(&self, v: T) {
        *lock(&self.state) = Some(v);
        self.cv.notify_all();
    }
    /// The result, or `None` after `timeout`.
    fn wait(&self, timeout: Duration) -> Option<T> {
        let g = lock(&self.state);
        let (mut g, _) = self
            .cv
            .wait_timeout_while(g, timeout, |s| s.is_none())
            .unwrap_or_else(PoisonError::into_inner);
        g.take()
    }
}

/// Hands one reference of `p` to C as `cbdata`.
fn to_cbdata<T>(p: &Arc<Pending<T>>) -> *mut c_void {
    Arc::into_raw(Arc::clone(p)).cast_mut().cast()
}

/// Takes back the reference [`to_cbdata`] handed out and fulfils it.
///
/// # Safety
/// `cbdata` came from `to_cbdata::<T>` and is consumed once.
unsafe fn fulfil_cbdata<T>(cbdata: *mut c_void, v: T) {
    if cbdata.is_null() {
        return;
    }
    // SAFETY: the caller's contract: one reference made by Arc::into_raw of this type.
    let p = unsafe { Arc::from_raw(cbdata.cast_const().cast::<Pending<T>>()) };
    p.fulfil(v);
}

/// How a bounded call ended without a result.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The call was refused, or its callback reported this status.
    Status(Status),
    /// No callback within the bound.
    Timeout,
}

/// Starts a non-blocking call and waits (bounded) for its callback: `start` gets the cbdata.
fn bounded<T>(
    keep: Option<Box<dyn Send>>,
    timeout: Duration,
    start: impl FnOnce(*mut c_void) -> Status,
) -> Result<T, CallError> {
    let p = Pending::<T>::new(keep);
    let rc = start(to_cbdata(&p));
    if rc != PMIX_SUCCESS {
        // The callback will not run: its reference (and the inputs) is leaked on purpose rather
        // than freed, in case a library calls back anyway.
        return Err(CallError::Status(rc));
    }
    p.wait(timeout).ok_or(CallError::Timeout)
}

// ---------------------------------------------------------------- tool init and finalize

/// The outcome of `PMIx_tool_init` on its own thread.
enum InitState {
    Waiting,
    Abandoned,
    Done(Result<(String, u32), Status>),
}

/// `PMIx_tool_init(info)` on a thread of its own, waited for up to `timeout`: our tool's
/// namespace and rank. When the wait gives up, the thread finalizes a late success itself and
/// then calls `release`; otherwise `release` is the caller's to call after finalizing.
pub(crate) fn tool_init(
    api: &Arc<Api>,
    mut info: InfoArray,
    timeout: Duration,
    release: impl FnOnce() + Send + 'static,
) -> Result<(String, u32), CallError> {
    lock(&KEEP).push(Arc::clone(api));
    let shared = Arc::new((Mutex::new(InitState::Waiting), Condvar::new()));
    let (s2, api2) = (Arc::clone(&shared), Arc::clone(api));
    let spawned = std::thread::Builder::new()
        .name("pmix-tool-init".into())
        .spawn(move || {
            let mut me = PmixProc {
                nspace: [0; MAX_NSLEN + 1],
                rank: 0,
            };
            // SAFETY: `me` is a writable pmix_proc_t; `info` owns the array and what it points to.
            let rc = unsafe { (api2.tool_init)(&mut me, info.as_mut_ptr(), info.len()) };
            let result = if rc == PMIX_SUCCESS {
                Ok((fixed_str(&me.nspace), me.rank))
            } else {
                Err(rc)
            };
            let mut g = lock(&s2.0);
            if matches!(*g, InitState::Abandoned) {
                drop(g);
                if rc == PMIX_SUCCESS {
                    // SAFETY: finalizes the connection this thread made; nobody else uses it.
                    let _ = unsafe { (api2.tool_finalize)() };
                }
                release();
            } else {
                *g = InitState::Done(result);
                s2.1.notify_all();
            }
        });
    if spawned.is_err() {
        return Err(CallError::Status(PMIX_ERR_UNREACH));
    }
    let g = lock(&shared.0);
    let (mut g, _) = shared
        .1
        .wait_timeout_while(g, timeout, |s| matches!(s, InitState::Waiting))
        .unwrap_or_else(PoisonError::into_inner);
    match std::mem::replace(&mut *g, InitState::Abandoned) {
        InitState::Done(r) => r.map_err(CallError::Status),
        _ => Err(CallError::Timeout),
    }
}

/// `PMIx_tool_finalize` on a thread of its own; `release` runs when it returns. Waits up to
/// `timeout`: whether it returned by then.
pub(crate) fn tool_finalize(
    api: &Arc<Api>,
    timeout: Duration,
    release: impl FnOnce() + Send + 'static,
) -> bool {
    let api2 = Arc::clone(api);
    let done = Pending::<()>::new(None);
    let d2 = Arc::clone(&done);
    let spawned = std::thread::Builder::new()
        .name("pmix-tool-finalize".into())
        .spawn(move || {
            // SAFETY: the connection made by tool_init is finalized once, by its owner's Drop.
            let _ = unsafe { (api2.tool_finalize)() };
            release();
            d2.fulfil(());
        });
    spawned.is_ok() && done.wait(timeout).is_some()
}

// ---------------------------------------------------------------- events

/// One event as libpmix delivered it, copied.
#[derive(Debug, Clone)]
pub(crate) struct RawEvent {
    pub(crate) status: Status,
    pub(crate) source: Option<(String, u32)>,
    pub(crate) info: Vec<(String, Value)>,
}

/// Events waiting for the tool; beyond `MAX_QUEUED`, only counted.
struct Queue {
    events: VecDeque<RawEvent>,
    dropped: u64,
}
pub(crate) const MAX_QUEUED: usize = 65_536;
static EVENTS: Mutex<Queue> = Mutex::new(Queue {
    events: VecDeque::new(),
    dropped: 0,
});
static EVENTS_CV: Condvar = Condvar::new();

/// Empties the queue (a new connection starts with no old events).
pub(crate) fn clear_events() {
    let mut q = lock(&EVENTS);
    q.events.clear();
    q.dropped = 0;
}

/// The next queued event, waiting up to `timeout`; or, when the queue overflowed since the
/// last call, no event and how many were dropped (the kept events come on the next calls).
pub(crate) fn next_event(timeout: Duration) -> (Option<RawEvent>, u64) {
    let deadline = Instant::now() + timeout;
    let mut q = lock(&EVENTS);
    loop {
        let dropped = std::mem::take(&mut q.dropped);
        if dropped > 0 {
            // Said first, before the events that were kept.
            return (None, dropped);
        }
        if let Some(e) = q.events.pop_front() {
            return (Some(e), 0);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return (None, 0);
        }
        q = EVENTS_CV
            .wait_timeout(q, left)
            .unwrap_or_else(PoisonError::into_inner)
            .0;
    }
}

/// Queues one event (also used by tests of the conversion).
pub(crate) fn push_event(e: RawEvent) {
    let mut q = lock(&EVENTS);
    if q.events.len() >= MAX_QUEUED {
        q.dropped += 1;
    } else {
        q.events.push_back(e);
    }
    drop(q);
    EVENTS_CV.notify_all();
}

/// The codes this crate asks for by name: PRRTE sends `PMIX_EVENT_JOB_END` with
/// `PMIX_EVENT_NON_DEFAULT`, which default handlers never see.
const CODES: [Status; 5] = [
    PMIX_EVENT_JOB_END,
    PMIX_READY_FOR_DEBUG,
    PMIX_ERR_LOST_CONNECTION,
    PMIX_ERR_LOST_CONNECTION_TO_SERVER,
    PMIX_ERR_UNREACH,
];

/// Copies one event into the queue; never unwinds.
///
/// # Safety
/// As libpmix calls an event handler: `source` null or valid, `info` `ninfo` valid entries.
unsafe fn queue_event(status: Status, source: *const PmixProc, info: *mut PmixInfo, ninfo: usize) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let source = if source.is_null() {
            None
        } else {
            // SAFETY: a non-null source is a valid pmix_proc_t for this call.
            let s = unsafe { &*source };
            Some((fixed_str(&s.nspace), s.rank))
        };
        // SAFETY: libpmix passes `ninfo` valid entries, alive during this call.
        let info = unsafe { read_infos(info, ninfo) };
        push_event(RawEvent {
            status,
            source,
            info,
        });
    }));
}

/// Queues an event and answers libpmix's continuation (if any) with `outcome`.
///
/// # Safety
/// The arguments are a libpmix event handler's, as libpmix gave them.
#[allow(clippy::too_many_arguments)]
unsafe fn handle_event(
    status: Status,
    source: *const PmixProc,
    info: *mut PmixInfo,
    ninfo: usize,
    cbfunc: EventNotificationCbFn,
    cbdata: *mut c_void,
    outcome: Status,
) {
    // SAFETY: our arguments, as libpmix gave them.
    unsafe { queue_event(status, source, info, ninfo) };
    if let Some(f) = cbfunc {
        // SAFETY: the continuation libpmix gave us, called once with its own cbdata.
        unsafe {
            f(
                outcome,
                std::ptr::null_mut(),
                0,
                None,
                std::ptr::null_mut(),
                cbdata,
            )
        };
    }
}

/// The handler of [`CODES`]: queues the event and ends the chain (so that the default handler
/// does not queue it twice).
unsafe extern "C" fn on_named_event(
    _id: usize,
    status: Status,
    source: *const PmixProc,
    info: *mut PmixInfo,
    ninfo: usize,
    _results: *mut PmixInfo,
    _nresults: usize,
    cbfunc: EventNotificationCbFn,
    cbdata: *mut c_void,
) {
    // SAFETY: our own arguments, as libpmix gave them.
    unsafe {
        handle_event(
            status,
            source,
            info,
            ninfo,
            cbfunc,
            cbdata,
            PMIX_EVENT_ACTION_COMPLETE,
        )
    };
}

/// The default handler (every other event): queues it and lets the chain go on.
unsafe extern "C" fn on_other_event(
    _id: usize,
    status: Status,
    source: *const PmixProc,
    info: *mut PmixInfo,
    ninfo: usize,
    _results: *mut PmixInfo,
    _nresults: usize,
    cbfunc: EventNotificationCbFn,
    cbdata: *mut c_void,
) {
    // SAFETY: our own arguments, as libpmix gave them.
    unsafe { handle_event(status, source, info, ninfo, cbfunc, cbdata, PMIX_SUCCESS) };
}

unsafe extern "C" fn on_registered(status: Status, refid: usize, cbdata: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: cbdata is the Pending<(Status, usize)> of `register_handlers`.
        unsafe { fulfil_cbdata::<(Status, usize)>(cbdata, (status, refid)) };
    }));
}

/// Registers the event handlers: one for [`CODES`], and a default one for the rest.
pub(crate) fn register_handlers(api: &Api, timeout: Duration) -> Result<(), CallError> {
    for named in [true, false] {
        // Leaked (20 bytes per connection): libpmix may keep the array with the handler.
        let (ptr, n, handler): (*mut Status, usize, NotificationFn) = if named {
            (
                Box::leak(Box::new(CODES)).as_mut_ptr(),
                CODES.len(),
                on_named_event,
            )
        } else {
            (std::ptr::null_mut(), 0, on_other_event)
        };
        let (status, _ref) = bounded::<(Status, usize)>(None, timeout, |cbdata| {
            // SAFETY: the codes live for ever (no codes: the default handler); no info; the
            // callbacks are extern "C" and never unwind; cbdata is consumed once by
            // on_registered.
            unsafe {
                (api.register_event_handler)(
                    ptr,
                    n,
                    std::ptr::null_mut(),
                    0,
                    handler,
                    Some(on_registered),
                    cbdata,
                )
            }
        })?;
        if status != PMIX_SUCCESS {
            return Err(CallError::Status(status));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- query, notify, spawn

/// A `pmix_query_t` with one key and its qualifiers, owned.
struct OwnedQuery {
    _key: CString,
    _keys: Vec<*mut c_char>,
    _qualifiers: InfoArray,
    query: PmixQuery,
}
// SAFETY: every pointer in it points into heap blocks it owns.
unsafe impl Send for OwnedQuery {}

unsafe extern "C" fn on_query(
    status: Status,
    info: *mut PmixInfo,
    ninfo: usize,
    cbdata: *mut c_void,
    release_fn: ReleaseCbFn,
    release_cbdata: *mut c_void,
) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let result = if status == PMIX_SUCCESS || status == PMIX_OPERATION_SUCCEEDED {
            // SAFETY: libpmix passes `ninfo` valid entries, alive until release_fn.
            Ok(unsafe { read_infos(info, ninfo) })
        } else {
            Err(status)
        };
        // SAFETY: cbdata is the Pending of `query`.
        unsafe { fulfil_cbdata::<Result<Vec<(String, Value)>, Status>>(cbdata, result) };
    }));
    if let Some(f) = release_fn {
        // SAFETY: the results were copied; libpmix may free them now.
        unsafe { f(release_cbdata) };
    }
}

/// `PMIx_Query_info_nb` of one `key` with `qualifiers`: the results, copied.
pub(crate) fn query(
    api: &Api,
    key: &str,
    qualifiers: InfoArray,
    timeout: Duration,
) -> Result<Vec<(String, Value)>, CallError> {
    let key = c_string("PMIx key", key).map_err(|_| CallError::Status(PMIX_ERR_UNREACH))?;
    let mut q = Box::new(OwnedQuery {
        _keys: vec![key.as_ptr().cast_mut(), std::ptr::null_mut()],
        _key: key,
        _qualifiers: qualifiers,
        query: PmixQuery {
            keys: std::ptr::null_mut(),
            qualifiers: std::ptr::null_mut(),
            nqual: 0,
        },
    });
    q.query.keys = q._keys.as_mut_ptr();
    q.query.nqual = q._qualifiers.len();
    q.query.qualifiers = q._qualifiers.as_mut_ptr();
    let qptr: *mut PmixQuery = &mut q.query;
    let r = bounded::<Result<Vec<(String, Value)>, Status>>(Some(q), timeout, |cbdata| {
        // SAFETY: qptr points into the box now owned by the Pending, alive until the callback
        // ran; on_query never unwinds and consumes cbdata once.
        unsafe { (api.query_info_nb)(qptr, 1, on_query, cbdata) }
    })?;
    r.map_err(CallError::Status)
}

unsafe extern "C" fn on_op(status: Status, cbdata: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: cbdata is the Pending<Status> of `notify`.
        unsafe { fulfil_cbdata::<Status>(cbdata, status) };
    }));
}

/// `PMIx_Notify_event(status, NULL source, range, info)`, bounded.
pub(crate) fn notify(
    api: &Api,
    status: Status,
    range: u8,
    mut info: InfoArray,
    timeout: Duration,
) -> Result<(), CallError> {
    let (ptr, n) = (info.as_mut_ptr(), info.len());
    let p = Pending::<Status>::new(Some(Box::new(info)));
    // SAFETY: the info array is owned by the Pending until on_op ran; on_op never unwinds.
    let rc = unsafe {
        (api.notify_event)(
            status,
            std::ptr::null(),
            range,
            ptr,
            n,
            Some(on_op),
            to_cbdata(&p),
        )
    };
    match rc {
        PMIX_SUCCESS => match p.wait(timeout) {
            Some(PMIX_SUCCESS) | Some(PMIX_OPERATION_SUCCEEDED) => Ok(()),
            Some(s) => Err(CallError::Status(s)),
            None => Err(CallError::Timeout),
        },
        PMIX_OPERATION_SUCCEEDED => Ok(()),
        s => Err(CallError::Status(s)),
    }
}

/// A `pmix_app_t` and its strings, owned.
struct OwnedApp {
    _strings: Vec<CString>,
    _argv: Vec<*mut c_char>,
    _job_info: InfoArray,
    app: PmixApp,
}
// SAFETY: every pointer in it points into heap blocks it owns.
unsafe impl Send for OwnedApp {}

unsafe extern "C" fn on_spawn(status: Status, nspace: *const c_char, cbdata: *mut c_void) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: nspace is null or a NUL-terminated string alive during the call.
        let ns = unsafe { opt_str(nspace) }.unwrap_or_default();
        // SAFETY: cbdata is the Pending of `spawn`.
        unsafe { fulfil_cbdata::<(Status, String)>(cbdata, (status, ns)) };
    }));
}

/// `PMIx_Spawn_nb` of one app (`argv[0]` is the command; `maxprocs` 0 = the job info decides),
/// bounded: the new namespace.
pub(crate) fn spawn(
    api: &Api,
    job_info: InfoArray,
    argv: &[String],
    cwd: &str,
    maxprocs: i32,
    timeout: Duration,
) -> Result<String, CallError> {
    let bad = |_| CallError::Status(PMIX_ERR_UNREACH);
    let mut strings = argv
        .iter()
        .map(|a| c_string("argument", a))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    strings.push(c_string("directory", cwd).map_err(bad)?);
    let mut argvp: Vec<*mut c_char> = strings[..argv.len()]
        .iter()
        .map(|s| s.as_ptr().cast_mut())
        .collect();
    argvp.push(std::ptr::null_mut());
    let mut a = Box::new(OwnedApp {
        app: PmixApp {
            cmd: argvp[0],
            argv: std::ptr::null_mut(),
            env: std::ptr::null_mut(),
            cwd: strings[argv.len()].as_ptr().cast_mut(),
            maxprocs,
            info: std::ptr::null_mut(),
            ninfo: 0,
        },
        _strings: strings,
        _argv: argvp,
        _job_info: job_info,
    });
    a.app.argv = a._argv.as_mut_ptr();
    let (jptr, jn) = (a._job_info.as_mut_ptr(), a._job_info.len());
    let aptr: *const PmixApp = &a.app;
    let (status, ns) = bounded::<(Status, String)>(Some(a), timeout, |cbdata| {
        // SAFETY: the app and job info are owned by the Pending until on_spawn ran;
        // on_spawn never unwinds and consumes cbdata once.
        unsafe { (api.spawn_nb)(jptr, jn, aptr, 1, on_spawn, cbdata) }
    })?;
    if status == PMIX_SUCCESS {
        Ok(ns)
    } else {
        Err(CallError::Status(status))
    }
}
