//! mpir_status codes, the thread-local last-error message, and the guard every entry point runs its
//! body in (no panic crosses into C).

use std::cell::RefCell;
use std::ffi::{CString, c_char};
use std::panic::{AssertUnwindSafe, catch_unwind};

// Symbol versions (MPIR_0.1, see mpir.map and the crate root): in the module that defines
// the functions, so that the directive and its symbols are in one object.
std::arch::global_asm!(
    ".symver mpir_last_error, mpir_last_error@@@MPIR_0.1",
    ".symver mpir_status_name, mpir_status_name@@@MPIR_0.1",
);

/// What a call did: `MPIR_STATUS_OK`, or why it failed. Every failure also sets the calling
/// thread's message ([`mpir_last_error`]).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(
    non_camel_case_types,
    clippy::exhaustive_enums,
    reason = "a C enum: its name and values are the ABI; new codes are added at the end"
)]
pub enum mpir_status {
    /// Success.
    MPIR_STATUS_OK = 0,
    /// A pointer argument that must not be NULL was NULL.
    MPIR_STATUS_NULL_ARGUMENT = 1,
    /// A handle (or a string to free) that this library did not return, or that was already
    /// freed, or a handle of the other kind (an options handle for a session).
    MPIR_STATUS_INVALID_HANDLE = 2,
    /// A session handle used on a thread other than the one that created it.
    MPIR_STATUS_WRONG_THREAD = 3,
    /// A string that must be UTF-8 (a rank list) is not.
    MPIR_STATUS_INVALID_UTF8 = 4,
    /// An argument out of its range or not understood (a rank list, a rank index, no pid…).
    MPIR_STATUS_INVALID_ARGUMENT = 5,
    /// Acquiring the job from its starter failed (launch or attach).
    MPIR_STATUS_ACQUIRE = 6,
    /// The operation is not possible for this session (e.g. the job of a core-file session).
    MPIR_STATUS_UNSUPPORTED = 7,
    /// Reading the ranks failed as a whole (stopping them, a core file, the analysis).
    MPIR_STATUS_READ = 8,
    /// The session was released: only its rank table (and freeing it) remain.
    MPIR_STATUS_RELEASED = 9,
    /// A file the library writes or needs could not be had (the demo job's files).
    MPIR_STATUS_IO = 10,
    /// A bug in the library: a panic was caught at the boundary. The message says where.
    MPIR_STATUS_PANIC = 11,
}

/// A failure: its code and message.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) status: mpir_status,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(status: mpir_status, message: impl Into<String>) -> Failure {
        Failure {
            status,
            message: message.into(),
        }
    }

    /// A session step's error, with its chain of causes, mapped to a code.
    pub(crate) fn session(what: &str, e: &mpir_session::SessionError) -> Failure {
        use mpir_session::SessionError as E;
        let status = match e {
            E::Acquire { .. } => mpir_status::MPIR_STATUS_ACQUIRE,
            E::Unsupported { .. } => mpir_status::MPIR_STATUS_UNSUPPORTED,
            E::Empty(_) | E::SeveralStarterCores { .. } => {
                mpir_status::MPIR_STATUS_INVALID_ARGUMENT
            }
            _ => mpir_status::MPIR_STATUS_READ,
        };
        Failure::new(status, format!("{what}: {}", mpir_session::chain(e)))
    }
}

pub(crate) type Result<T> = std::result::Result<T, Failure>;

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(message: &str) {
    // Interior NULs cannot be shown by C: they become spaces.
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    // `try_with`: a call made while the thread is being torn down keeps its code, not its text.
    let _ = LAST_ERROR.try_with(|m| *m.borrow_mut() = text);
}

/// Runs an entry point's body: its failure becomes its code and the thread's message, a panic
/// becomes `MPIR_STATUS_PANIC`; success clears the message.
pub(crate) fn guard(name: &str, body: impl FnOnce() -> Result<()>) -> mpir_status {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => {
            set_last_error("");
            mpir_status::MPIR_STATUS_OK
        }
        Ok(Err(f)) => {
            set_last_error(&format!("{name}: {}", f.message));
            f.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic".to_string());
            set_last_error(&format!("{name}: internal error (a bug): {what}"));
            mpir_status::MPIR_STATUS_PANIC
        }
    }
}

/// The message of the calling thread's last call into the library: why it failed, or `""`
/// after a success. Never NULL.
///
/// Ownership: the string belongs to the library; it stays valid until this thread's next call
/// into the library (other than `mpir_last_error` and `mpir_status_name`). Copy it to keep it.
///
/// Thread safety: each thread has its own message.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_last_error() -> *const c_char {
    // No allocation, no panic: a pointer to the thread's current text (a static "" while the
    // thread is being torn down).
    LAST_ERROR
        .try_with(|m| m.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// The name of status code `status` (`"MPIR_STATUS_OK"`…), or `"MPIR_STATUS_UNKNOWN"` for a
/// value that is no code. Never NULL.
///
/// Ownership: a static string; never free it. Thread safety: any thread.
#[unsafe(no_mangle)]
pub extern "C" fn mpir_status_name(status: i32) -> *const c_char {
    let name: &'static std::ffi::CStr = match status {
        0 => c"MPIR_STATUS_OK",
        1 => c"MPIR_STATUS_NULL_ARGUMENT",
        2 => c"MPIR_STATUS_INVALID_HANDLE",
        3 => c"MPIR_STATUS_WRONG_THREAD",
        4 => c"MPIR_STATUS_INVALID_UTF8",
        5 => c"MPIR_STATUS_INVALID_ARGUMENT",
        6 => c"MPIR_STATUS_ACQUIRE",
        7 => c"MPIR_STATUS_UNSUPPORTED",
        8 => c"MPIR_STATUS_READ",
        9 => c"MPIR_STATUS_RELEASED",
        10 => c"MPIR_STATUS_IO",
        11 => c"MPIR_STATUS_PANIC",
        _ => c"MPIR_STATUS_UNKNOWN",
    };
    name.as_ptr()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn last() -> String {
        // SAFETY: mpir_last_error returns a valid NUL-terminated string, read before any
        // other call on this thread.
        unsafe { std::ffi::CStr::from_ptr(mpir_last_error()) }
            .to_string_lossy()
            .into_owned()
    }

    #[test]
    fn a_panic_is_a_code_and_a_message_and_success_clears_it() {
        let s = guard("mpir_x", || panic!("boom {}", 7));
        assert_eq!(s, mpir_status::MPIR_STATUS_PANIC);
        assert_eq!(last(), "mpir_x: internal error (a bug): boom 7");
        let s = guard("mpir_x", || {
            Err(Failure::new(mpir_status::MPIR_STATUS_IO, "no\0file"))
        });
        assert_eq!(s, mpir_status::MPIR_STATUS_IO);
        assert_eq!(last(), "mpir_x: no file");
        assert_eq!(guard("mpir_x", || Ok(())), mpir_status::MPIR_STATUS_OK);
        assert_eq!(last(), "");
    }

    #[test]
    fn every_code_has_its_name() {
        for (code, name) in [
            (mpir_status::MPIR_STATUS_OK, "MPIR_STATUS_OK"),
            (
                mpir_status::MPIR_STATUS_WRONG_THREAD,
                "MPIR_STATUS_WRONG_THREAD",
            ),
            (mpir_status::MPIR_STATUS_PANIC, "MPIR_STATUS_PANIC"),
        ] {
            // SAFETY: a static NUL-terminated string.
            let got = unsafe { std::ffi::CStr::from_ptr(mpir_status_name(code as i32)) };
            assert_eq!(got.to_str().unwrap(), name);
        }
        // SAFETY: as above.
        let unknown = unsafe { std::ffi::CStr::from_ptr(mpir_status_name(99)) };
        assert_eq!(unknown.to_str().unwrap(), "MPIR_STATUS_UNKNOWN");
    }
}
