//! Handles the C side cannot dangle: a handle is a number dressed as a pointer, never
//! dereferenced. Each is looked up in a table: a handle never issued, already freed, of the
//! other kind, or (for sessions) used on another thread is caught by the lookup. Numbers are
//! never reused, so a freed handle stays invalid for good.
//!
//! Strings handed to C are tracked too, so that freeing one twice (or freeing a pointer this
//! library never returned) is an error, not a double free.

use std::collections::{HashMap, HashSet};
use std::ffi::{CString, c_char};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::ThreadId;

use crate::error::{Failure, Result, mpir_status};

/// The kinds of handle, in the low bits of their value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Options = 1,
    Session = 2,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Options => "mpir_options",
            Kind::Session => "mpir_session",
        }
    }
}

const KIND_BITS: u32 = 4;
/// Handle numbers: one sequence for both kinds, from 1, never reused.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// A new handle value of `kind`.
pub(crate) fn issue(kind: Kind) -> usize {
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    // 2^60 handles cannot be issued in a process's life; the value always fits.
    usize::try_from((n << KIND_BITS) | kind as u64).unwrap_or(usize::MAX)
}

/// Checks that `value` has the shape of a handle of `kind` issued by this process: the reason
/// otherwise.
pub(crate) fn check_shape(value: usize, kind: Kind) -> Result<()> {
    let v = value as u64;
    let n = v >> KIND_BITS;
    let issued = n >= 1 && n < NEXT.load(Ordering::Relaxed);
    let tag = v & ((1 << KIND_BITS) - 1);
    if !issued || (tag != Kind::Options as u64 && tag != Kind::Session as u64) {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_INVALID_HANDLE,
            format!(
                "{value:#x} is not a {} handle returned by this library",
                kind.name()
            ),
        ));
    }
    if tag != kind as u64 {
        let other = if kind == Kind::Options {
            Kind::Session
        } else {
            Kind::Options
        };
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_INVALID_HANDLE,
            format!(
                "{value:#x} is an {} handle, not an {} one",
                other.name(),
                kind.name()
            ),
        ));
    }
    Ok(())
}

/// The error for a well-formed handle that is no longer in its table.
pub(crate) fn freed(value: usize, kind: Kind) -> Failure {
    Failure::new(
        mpir_status::MPIR_STATUS_INVALID_HANDLE,
        format!(
            "{} {value:#x} was already freed (use after free or double free)",
            kind.name()
        ),
    )
}

/// Live session handles and the thread each belongs to (its `Session` lives in that thread's
/// table, see `session.rs`).
pub(crate) static SESSION_THREADS: Mutex<Option<HashMap<usize, ThreadId>>> = Mutex::new(None);

/// Strings handed to C and not yet freed, by address.
static STRINGS: Mutex<Option<HashSet<usize>>> = Mutex::new(None);

/// Locks a table, even one a panicking thread left poisoned (the tables stay consistent: each
/// update is a single insert or remove).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Hands `bytes` to C as a NUL-terminated string to be freed with `mpir_string_free`.
pub(crate) fn give_string(bytes: Vec<u8>) -> Result<*mut c_char> {
    let s = CString::new(bytes).map_err(|_| {
        Failure::new(
            mpir_status::MPIR_STATUS_INVALID_ARGUMENT,
            "the string holds a NUL byte and cannot be given to C",
        )
    })?;
    let p = s.into_raw();
    lock(&STRINGS)
        .get_or_insert_with(HashSet::new)
        .insert(p as usize);
    Ok(p)
}

/// Takes back a string given by [`give_string`]: an error for any other pointer, or one
/// already freed (while its address has not been handed out again).
pub(crate) fn take_string(p: *mut c_char) -> Result<()> {
    let known = lock(&STRINGS)
        .get_or_insert_with(HashSet::new)
        .remove(&(p as usize));
    if !known {
        return Err(Failure::new(
            mpir_status::MPIR_STATUS_INVALID_HANDLE,
            format!(
                "{p:p} is not a string returned by this library, or was already freed (double free)"
            ),
        ));
    }
    // SAFETY: `p` came from `CString::into_raw` in `give_string` and was in the table of
    // strings not yet freed; it is removed from it, so it is retaken exactly once.
    drop(unsafe { CString::from_raw(p) });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_checked_by_kind_and_number() {
        let o = issue(Kind::Options);
        let s = issue(Kind::Session);
        assert!(check_shape(o, Kind::Options).is_ok());
        assert!(check_shape(s, Kind::Session).is_ok());
        let e = check_shape(o, Kind::Session).unwrap_err();
        assert!(
            e.message
                .contains("is an mpir_options handle, not an mpir_session one")
        );
        // Never issued: a number past the sequence, a pointer-looking value, zero's kin.
        for v in [s + 0x1000, 0x7fff_dead_bee0, 3] {
            let e = check_shape(v, Kind::Session).unwrap_err();
            assert_eq!(e.status, mpir_status::MPIR_STATUS_INVALID_HANDLE);
            assert!(
                e.message.contains("not a mpir_session handle returned"),
                "{e:?}"
            );
        }
    }

    #[test]
    fn a_string_is_freed_once() {
        let p = give_string(b"abc".to_vec()).unwrap();
        assert!(take_string(p).is_ok());
        let e = take_string(p).unwrap_err();
        assert!(e.message.contains("already freed"), "{e:?}");
        let e = take_string(std::ptr::dangling_mut()).unwrap_err();
        assert_eq!(e.status, mpir_status::MPIR_STATUS_INVALID_HANDLE);
        assert!(give_string(b"a\0b".to_vec()).is_err());
    }
}
