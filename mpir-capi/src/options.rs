//! `mpir_options`: how a session is made (timeout, ranks, debug directories, types sidecar,
//! hold, other users' processes, what happens to a launched starter).

use std::collections::HashMap;
use std::ffi::{CStr, OsStr, c_char, c_int};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use mpir_session::SessionOptions;
use mpir_types::ranks::RankSet;

use crate::error::{Failure, Result, guard, mpir_status};
use crate::handles::{Kind, check_shape, freed, issue, lock};

// Symbol versions (MPIR_0.1, see mpir.map and the crate root): in the module that defines
// the functions, so that the directive and its symbols are in one object.
std::arch::global_asm!(
    ".symver mpir_options_new, mpir_options_new@@@MPIR_0.1",
    ".symver mpir_options_free, mpir_options_free@@@MPIR_0.1",
    ".symver mpir_options_set_timeout_ms, mpir_options_set_timeout_ms@@@MPIR_0.1",
    ".symver mpir_options_set_held_wait_ms, mpir_options_set_held_wait_ms@@@MPIR_0.1",
    ".symver mpir_options_set_ranks, mpir_options_set_ranks@@@MPIR_0.1",
    ".symver mpir_options_add_debug_dir, mpir_options_add_debug_dir@@@MPIR_0.1",
    ".symver mpir_options_set_types_sidecar, mpir_options_set_types_sidecar@@@MPIR_0.1",
    ".symver mpir_options_set_hold, mpir_options_set_hold@@@MPIR_0.1",
    ".symver mpir_options_set_allow_other_users, mpir_options_set_allow_other_users@@@MPIR_0.1",
    ".symver mpir_options_set_leave_running, mpir_options_set_leave_running@@@MPIR_0.1",
);

/// Options for making a session: an opaque handle from [`mpir_options_new`], freed with
/// [`mpir_options_free`]. A session copies them when it is made: the options may be changed
/// or freed afterwards.
///
/// Thread safety: an options handle may be used and freed from any thread (calls on one
/// handle are serialised by the library).
#[allow(non_camel_case_types, reason = "a C type name")]
pub struct mpir_options {
    _opaque: [u8; 0],
}

/// What an options handle holds.
#[derive(Debug, Clone, Default)]
pub(crate) struct Opts {
    timeout: Option<Duration>,
    held_wait: Option<Duration>,
    ranks: Option<RankSet>,
    debug_dirs: Vec<PathBuf>,
    types_sidecar: Option<PathBuf>,
    hold: bool,
    allow_other_users: bool,
    /// Launch mode: leave the starter running when the session is released.
    pub(crate) leave_running: bool,
    /// How the job's other nodes are read (`other_nodes.rs`).
    pub(crate) other_nodes: mpir_agent::OtherNodeOptions,
}

impl Opts {
    /// The session options these make.
    pub(crate) fn session_options(&self) -> SessionOptions {
        let mut o = SessionOptions::default()
            .with_hold_from_acquisition(self.hold)
            .with_allow_other_users(self.allow_other_users);
        if let Some(t) = self.timeout {
            o = o.with_timeout(t);
        }
        if let Some(w) = self.held_wait {
            o = o.with_held_wait(w);
        }
        if let Some(r) = &self.ranks {
            o = o.with_ranks(r.clone());
        }
        for d in &self.debug_dirs {
            o = o.with_debug_dir(d.clone());
        }
        if let Some(t) = &self.types_sidecar {
            o = o.with_types_sidecar(t.clone());
        }
        o
    }

    /// Whether a types sidecar was given (the JSON documents say so).
    pub(crate) fn types_given(&self) -> bool {
        self.types_sidecar.is_some()
    }
}

static OPTIONS: Mutex<Option<HashMap<usize, Opts>>> = Mutex::new(None);

/// The options of handle `opts`: the defaults for NULL.
pub(crate) fn read(opts: *const mpir_options) -> Result<Opts> {
    if opts.is_null() {
        return Ok(Opts::default());
    }
    let key = opts as usize;
    check_shape(key, Kind::Options)?;
    lock(&OPTIONS)
        .get_or_insert_with(HashMap::new)
        .get(&key)
        .cloned()
        .ok_or_else(|| freed(key, Kind::Options))
}

pub(crate) fn update(
    opts: *mut mpir_options,
    change: impl FnOnce(&mut Opts) -> Result<()>,
) -> Result<()> {
    if opts.is_null() {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_NULL_ARGUMENT,
            "opts is NULL",
        ));
    }
    let key = opts as usize;
    check_shape(key, Kind::Options)?;
    let mut table = lock(&OPTIONS);
    let o = table
        .get_or_insert_with(HashMap::new)
        .get_mut(&key)
        .ok_or_else(|| freed(key, Kind::Options))?;
    change(o)
}

/// The bytes of C string `s` (a path may be any bytes), or an error naming `what` for NULL.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn bytes<'a>(s: *const c_char, what: &str) -> Result<&'a [u8]> {
    if s.is_null() {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_NULL_ARGUMENT,
            format!("{what} is NULL"),
        ));
    }
    // SAFETY: the caller's contract: a NUL-terminated string.
    Ok(unsafe { CStr::from_ptr(s) }.to_bytes())
}

/// The path in C string `s` (bytes: it need not be UTF-8), or `None` for NULL.
///
/// # Safety
/// `s` is NULL or points to a NUL-terminated string.
pub(crate) unsafe fn optional_path(s: *const c_char, what: &str) -> Result<Option<PathBuf>> {
    if s.is_null() {
        return Ok(None);
    }
    // SAFETY: not NULL; the caller's contract.
    let b = unsafe { bytes(s, what) }?;
    Ok(Some(PathBuf::from(OsStr::from_bytes(b))))
}

/// A new options handle with the defaults (the session's own: a 60 s acquisition timeout, every
/// rank, no debug directory or types sidecar, no hold, only this user's processes, a launched
/// starter stopped on release), in `*out`.
///
/// Ownership: the caller owns the handle and frees it with [`mpir_options_free`].
///
/// # Safety
/// `out` is NULL (an error) or points to writable storage for one pointer.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_new(out: *mut *mut mpir_options) -> mpir_status {
    guard("mpir_options_new", || {
        if out.is_null() {
            return Err(Failure::new(
                mpir_status::MPIR_STATUS_NULL_ARGUMENT,
                "out is NULL",
            ));
        }
        let key = issue(Kind::Options);
        lock(&OPTIONS)
            .get_or_insert_with(HashMap::new)
            .insert(key, Opts::default());
        // SAFETY: `out` is not NULL and, by the contract, writable.
        unsafe { out.write(key as *mut mpir_options) };
        Ok(())
    })
}

/// Frees an options handle. NULL is accepted and does nothing. A handle already freed, or not
/// an options handle, is `MPIR_STATUS_INVALID_HANDLE` (nothing is freed).
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_free(opts: *mut mpir_options) -> mpir_status {
    guard("mpir_options_free", || {
        if opts.is_null() {
            return Ok(());
        }
        let key = opts as usize;
        check_shape(key, Kind::Options)?;
        lock(&OPTIONS)
            .get_or_insert_with(HashMap::new)
            .remove(&key)
            .map(drop)
            .ok_or_else(|| freed(key, Kind::Options))
    })
}

/// How long acquisition may wait for the starter (launch and attach), in milliseconds; 0
/// restores the default.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_timeout_ms(opts: *mut mpir_options, ms: u64) -> mpir_status {
    guard("mpir_options_set_timeout_ms", || {
        update(opts, |o| {
            o.timeout = (ms > 0).then(|| Duration::from_millis(ms));
            Ok(())
        })
    })
}

/// How long a rank or the starter another tracer holds (another tool, a debugger) is waited
/// for before it is reported as held by it, in milliseconds (default 15 s). `u64::MAX`
/// restores the default; 0 reports it at once.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_held_wait_ms(opts: *mut mpir_options, ms: u64) -> mpir_status {
    guard("mpir_options_set_held_wait_ms", || {
        update(opts, |o| {
            o.held_wait = (ms != u64::MAX).then(|| Duration::from_millis(ms));
            Ok(())
        })
    })
}

/// Only these ranks are held and read: a list such as `"0-3,7"` or `"12-"` (UTF-8); NULL
/// selects every rank again.
///
/// # Safety
/// `ranks` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_set_ranks(
    opts: *mut mpir_options,
    ranks: *const c_char,
) -> mpir_status {
    guard("mpir_options_set_ranks", || {
        let parsed = if ranks.is_null() {
            None
        } else {
            // SAFETY: not NULL; the caller's contract.
            let b = unsafe { bytes(ranks, "ranks") }?;
            let text = std::str::from_utf8(b).map_err(|e| {
                Failure::new(
                    mpir_status::MPIR_STATUS_INVALID_UTF8,
                    format!("ranks {:?} is not UTF-8: {e}", String::from_utf8_lossy(b)),
                )
            })?;
            Some(text.parse::<RankSet>().map_err(|e| {
                Failure::new(
                    mpir_status::MPIR_STATUS_INVALID_ARGUMENT,
                    format!(
                        "ranks {text:?}: {}",
                        mpir_session::chain(&e as &dyn std::error::Error)
                    ),
                )
            })?)
        };
        update(opts, |o| {
            o.ranks = parsed;
            Ok(())
        })
    })
}

/// Adds a directory to look for separate debug information in (like gdb's
/// `debug-file-directory`). The path is bytes: it need not be UTF-8.
///
/// # Safety
/// `dir` is NULL (an error) or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_add_debug_dir(
    opts: *mut mpir_options,
    dir: *const c_char,
) -> mpir_status {
    guard("mpir_options_add_debug_dir", || {
        // SAFETY: the caller's contract.
        let dir = PathBuf::from(OsStr::from_bytes(unsafe { bytes(dir, "dir") }?));
        update(opts, |o| {
            o.debug_dirs.push(dir);
            Ok(())
        })
    })
}

/// The types sidecar: an object file whose DWARF describes the MPI library's types, for an MPI
/// built without debug information (e.g. stock Open MPI). NULL removes it. The path is bytes:
/// it need not be UTF-8.
///
/// # Safety
/// `path` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_options_set_types_sidecar(
    opts: *mut mpir_options,
    path: *const c_char,
) -> mpir_status {
    guard("mpir_options_set_types_sidecar", || {
        // SAFETY: the caller's contract.
        let path = unsafe { optional_path(path, "path") }?;
        update(opts, |o| {
            o.types_sidecar = path;
            Ok(())
        })
    })
}

/// Nonzero: keep the selected ranks stopped from acquisition on (launch and attach), for the
/// first read. Zero (the default): the ranks run, and are stopped only while read.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_hold(opts: *mut mpir_options, hold: c_int) -> mpir_status {
    guard("mpir_options_set_hold", || {
        update(opts, |o| {
            o.hold = hold != 0;
            Ok(())
        })
    })
}

/// Nonzero: ranks owned by other users may be stopped (needs the privilege to trace them).
/// Zero (the default): such ranks are refused, never touched.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_allow_other_users(
    opts: *mut mpir_options,
    allow: c_int,
) -> mpir_status {
    guard("mpir_options_set_allow_other_users", || {
        update(opts, |o| {
            o.allow_other_users = allow != 0;
            Ok(())
        })
    })
}

/// Launch mode: nonzero leaves the starter (and so the job) running when the session is
/// released or freed; the caller then owns it and reaps it (`waitpid` on
/// [`mpir_session_starter_pid`](crate::mpir_session_starter_pid)). Zero (the default):
/// release ends the job: the starter gets `SIGTERM` (then `SIGKILL` after 10 s) and is reaped.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_options_set_leave_running(
    opts: *mut mpir_options,
    leave: c_int,
) -> mpir_status {
    guard("mpir_options_set_leave_running", || {
        update(opts, |o| {
            o.leave_running = leave != 0;
            Ok(())
        })
    })
}
