//! The C API of mpir-rs: `libmpir.so` / `libmpir.a` and `mpir.h`, for C and C++ tools.
//!
//! It covers the session API ([`mpir_session`](https://docs.rs/mpir-session)): make a session
//! (attach to a starter, launch one, name pids or core files) → the job's rank table (typed,
//! [`mpir_session_rank`]) and documents (JSON: job, queues, stacks, deadlock) → release → free.
//!
//! Every function returns an [`mpir_status`] (or, for the few that cannot fail, a value), and a
//! failure leaves a message for the calling thread ([`mpir_last_error`]). No bad input is
//! undefined behaviour: handles are numbers looked up in tables, so a NULL, never-issued,
//! freed (use after free, double free) or other-kind handle is an error code; a session used
//! on a thread other than its own is `MPIR_STATUS_WRONG_THREAD`; strings returned are tracked,
//! so freeing one twice is an error; paths and arguments are bytes (no UTF-8 needed), and a
//! rank list that must be UTF-8 but is not is `MPIR_STATUS_INVALID_UTF8`. No panic crosses the
//! boundary (each is `MPIR_STATUS_PANIC`), and the library never calls back into C.
//!
//! What C must still get right, as with any C API: pointers to memory it owns (out-parameters,
//! strings, arrays with their lengths) must be valid.
//!
//! The symbols are versioned (`MPIR_0.1`, `mpir.map`); the header `include/mpir.h` is made by
//! cbindgen from this crate and checked by the tests.

use std::ffi::c_char;
use std::os::unix::ffi::OsStrExt;

mod error;
mod handles;
mod options;
mod other_nodes;
mod session;

pub use error::{mpir_last_error, mpir_status, mpir_status_name};
pub use options::{
    mpir_options, mpir_options_add_debug_dir, mpir_options_free, mpir_options_new,
    mpir_options_set_allow_other_users, mpir_options_set_held_wait_ms, mpir_options_set_hold,
    mpir_options_set_leave_running, mpir_options_set_ranks, mpir_options_set_timeout_ms,
    mpir_options_set_types_sidecar,
};
pub use other_nodes::{
    mpir_options_set_agent_fanout, mpir_options_set_agent_launch, mpir_options_set_agent_listen,
    mpir_options_set_agent_program, mpir_options_set_agent_timeout_ms,
    mpir_options_set_agent_token_dir, mpir_options_set_other_nodes,
};
pub use session::{
    mpir_rank, mpir_session, mpir_session_attach, mpir_session_cores, mpir_session_deadlock_json,
    mpir_session_free, mpir_session_job_json, mpir_session_launch, mpir_session_pids,
    mpir_session_queues_json, mpir_session_rank, mpir_session_rank_count, mpir_session_release,
    mpir_session_stacks_json, mpir_session_starter_pid,
};

use error::{Failure, guard};

// Every exported function gets version MPIR_0.1 (its node is in mpir.map, which build.rs gives
// the linker for libmpir.so). rustc lists the no_mangle symbols in its own, unversioned version
// script, which would win: `.symver NAME, NAME@@@MPIR_0.1` renames each symbol to its default
// version in the object itself. The directive must sit in the module that defines the symbol
// (one object file per module); each module lists its own. The symbol test (tests/symbols.rs)
// fails for any `mpir_` symbol left out.
std::arch::global_asm!(
    ".symver mpir_version, mpir_version@@@MPIR_0.1",
    ".symver mpir_string_free, mpir_string_free@@@MPIR_0.1",
    ".symver mpir_demo_starter, mpir_demo_starter@@@MPIR_0.1",
);

/// The library's version, e.g. `"0.1.0"`. Never NULL.
///
/// Ownership: a static string; never free it. Thread safety: any thread.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_version() -> *const c_char {
    const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), "\0");
    VERSION.as_ptr().cast()
}

/// Frees a string this library returned (a JSON document, a path). NULL is accepted and does
/// nothing. A pointer the library did not return, or already freed, is
/// `MPIR_STATUS_INVALID_HANDLE` and nothing is freed. (A double free is caught as long as the
/// address has not been returned again for a newer string.)
///
/// Thread safety: any thread.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_string_free(s: *mut c_char) -> mpir_status {
    guard("mpir_string_free", || {
        if s.is_null() {
            return Ok(());
        }
        handles::take_string(s)
    })
}

/// The path of the bundled demo job's starter (written out once, privately, and verified), in
/// `*path`. The demo job needs no MPI: launch it as `{path, "-n", "4"}` with
/// [`mpir_session_launch`]; its ranks deadlock (0 → 1 → 2 → 0, rank 3 blocked) and stay
/// blocked until the job is ended (by releasing the session).
///
/// Ownership: the caller frees `*path` with [`mpir_string_free`]. Thread safety: any thread.
///
/// # Safety
/// `path` is NULL (an error) or writable.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mpir_demo_starter(path: *mut *mut c_char) -> mpir_status {
    guard("mpir_demo_starter", || {
        if path.is_null() {
            return Err(Failure::new(
                mpir_status::MPIR_STATUS_NULL_ARGUMENT,
                "path is NULL",
            ));
        }
        let starter = mpir_demo::starter()
            .map_err(|e| ::mpir_session::chain(&e))
            .map_err(|e| Failure::new(mpir_status::MPIR_STATUS_IO, format!("the demo job: {e}")))?;
        let p = handles::give_string(starter.as_os_str().as_bytes().to_vec())?;
        // SAFETY: `path` is not NULL and, by the contract, writable.
        unsafe { path.write(p) };
        Ok(())
    })
}
