//! The callbacks the DLL calls (the header's basic, image, process and job tables) and the
//! codes they return. Every body runs under `guarded`: no host active on this thread is an
//! error code, a panic is caught and becomes one, and every handle is looked up in the active
//! host's registry, never dereferenced.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use mpir_target::TypeQuery;

use super::{Handle, Opaque, TAddr, TargetTypeSizes, active};
use crate::state::Shared;

// ---------------------------------------------------------------------------------------------
// Codes our callbacks return (the DLL renders them through `mqs_errorstring_fp`).

pub(super) const CB_NO_HOST: c_int = 100;
pub(super) const CB_BAD_HANDLE: c_int = 101;
pub(super) const CB_NOT_FOUND: c_int = 102;
pub(super) const CB_READ_FAILED: c_int = 103;
pub(super) const CB_BAD_ARGUMENT: c_int = 104;
pub(super) const CB_LOOKUP_FAILED: c_int = 105;
pub(super) const CB_PANIC: c_int = 106;

/// `MQS_INVALID_PROCESS` (MPICH's header): the identity of no process.
pub(super) const MQS_INVALID_PROCESS: c_int = -1;

/// What our callback code `code` means.
pub(crate) fn callback_code_text(code: c_int) -> &'static CStr {
    match code {
        0 => c"ok",
        1 => c"no information",
        2 => c"end of list",
        CB_NO_HOST => c"mpir-mqd: no MQD host is active on this thread",
        CB_BAD_HANDLE => c"mpir-mqd: unknown image, process, type or job handle",
        CB_NOT_FOUND => c"mpir-mqd: symbol not found in the target",
        CB_READ_FAILED => c"mpir-mqd: target memory could not be read",
        CB_BAD_ARGUMENT => c"mpir-mqd: invalid argument (null pointer or bad length)",
        CB_LOOKUP_FAILED => c"mpir-mqd: symbol lookup failed in the target",
        CB_PANIC => c"mpir-mqd: internal error in a callback",
        _ => c"mpir-mqd: unknown debugger error code",
    }
}

/// Largest single `fetch_data` we serve (a DLL asking for more is passing garbage).
const MAX_FETCH: c_int = 64 << 20;
/// Largest `target_to_host` conversion we serve.
const MAX_CONVERT: c_int = 4096;
/// Longest name (symbol, type, field) we read from the DLL.
const MAX_NAME: usize = 4096;
/// Longest message we read from the DLL.
const MAX_MESSAGE: usize = 16 * 1024;

/// Reads a NUL-terminated string the DLL passed, at most `max` bytes.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string, or to at least `max` readable bytes.
pub(super) unsafe fn read_c_str(p: *const c_char, max: usize) -> Option<Vec<u8>> {
    if p.is_null() {
        return None;
    }
    // SAFETY: the caller guarantees a readable string (terminated within `max`, or `max`
    // readable bytes); strnlen reads no further than either.
    let len = unsafe { libc::strnlen(p, max) };
    // SAFETY: `len` bytes from `p` were just scanned, so they are readable.
    let bytes = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) };
    Some(bytes.to_vec())
}

/// A string the DLL returned (version, error string, queue message), lossily decoded.
pub(crate) fn dll_string(p: *const c_char) -> Option<String> {
    // SAFETY: the interface returns NUL-terminated strings (or null); the scan is bounded.
    unsafe { read_c_str(p, MAX_MESSAGE) }.map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// Runs a callback body: no host → `CB_NO_HOST`, a panic → `CB_PANIC`.
fn guarded<R>(fallback: R, panic_value: R, f: impl FnOnce(&Shared) -> R) -> R {
    let Some(shared) = active() else {
        return fallback;
    };
    match catch_unwind(AssertUnwindSafe(|| f(&shared))) {
        Ok(r) => r,
        Err(_) => {
            shared.fault("a callback panicked".into());
            panic_value
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Basic callbacks.

pub(super) extern "C" fn cb_malloc(size: usize) -> *mut c_void {
    // SAFETY: plain C allocation; the DLL frees it with `cb_free`.
    unsafe { libc::malloc(size) }
}

pub(super) extern "C" fn cb_free(p: *mut c_void) {
    // SAFETY: `p` came from `cb_malloc` (libc::malloc) or is null, per the interface.
    unsafe { libc::free(p) }
}

pub(super) extern "C" fn cb_dprints(msg: *const c_char) {
    // SAFETY: the DLL passes a NUL-terminated string (or null); the scan is bounded.
    let text = unsafe { read_c_str(msg, MAX_MESSAGE) };
    guarded((), (), |s| {
        if let Some(t) = text {
            s.dprint(String::from_utf8_lossy(&t).into_owned());
        }
    });
}

pub(super) extern "C" fn cb_errorstring(code: c_int) -> *mut c_char {
    // The DLL only reads the string; the header's `char *` predates `const`.
    callback_code_text(code).as_ptr().cast_mut()
}

pub(super) extern "C" fn cb_put_image_info(image: Opaque, info: Opaque) {
    guarded((), (), |s| {
        if !s.set_image_info(Handle::from_ptr(image), info) {
            s.fault(format!("put_image_info: unknown image {:#x}", image.addr()));
        }
    });
}

pub(super) extern "C" fn cb_get_image_info(image: Opaque) -> Opaque {
    guarded(std::ptr::null_mut(), std::ptr::null_mut(), |s| {
        match s.image_info(Handle::from_ptr(image)) {
            Some(info) => info,
            None => {
                s.fault(format!("get_image_info: unknown image {:#x}", image.addr()));
                std::ptr::null_mut()
            }
        }
    })
}

pub(super) extern "C" fn cb_put_process_info(process: Opaque, info: Opaque) {
    guarded((), (), |s| {
        if !s.set_process_info(Handle::from_ptr(process), info) {
            s.fault(format!(
                "put_process_info: unknown process {:#x}",
                process.addr()
            ));
        }
    });
}

pub(super) extern "C" fn cb_get_process_info(process: Opaque) -> Opaque {
    guarded(std::ptr::null_mut(), std::ptr::null_mut(), |s| {
        match s.process_info(Handle::from_ptr(process)) {
            Some(info) => info,
            None => {
                s.fault(format!(
                    "get_process_info: unknown process {:#x}",
                    process.addr()
                ));
                std::ptr::null_mut()
            }
        }
    })
}

pub(super) extern "C" fn cb_put_job_info(job: Opaque, info: Opaque) {
    guarded((), (), |s| {
        if !s.set_job_info(Handle::from_ptr(job), info) {
            s.fault(format!("put_job_info: unknown job {:#x}", job.addr()));
        }
    });
}

pub(super) extern "C" fn cb_get_job_info(job: Opaque) -> Opaque {
    guarded(std::ptr::null_mut(), std::ptr::null_mut(), |s| {
        match s.job_info(Handle::from_ptr(job)) {
            Some(info) => info,
            None => {
                s.fault(format!("get_job_info: unknown job {:#x}", job.addr()));
                std::ptr::null_mut()
            }
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Image callbacks.

pub(super) extern "C" fn cb_get_type_sizes(process: Opaque, out: *mut TargetTypeSizes) {
    guarded((), (), |s| {
        // The header passes a process; accept an image too (both name one target).
        let Some(target) = s.target_of(Handle::from_ptr(process)) else {
            s.fault(format!(
                "get_type_sizes: unknown handle {:#x}",
                process.addr()
            ));
            return;
        };
        if out.is_null() {
            s.fault("get_type_sizes: null output".into());
            return;
        }
        let z = target.data_model().sizes();
        let sizes = TargetTypeSizes {
            short_size: z.short.into(),
            int_size: z.int.into(),
            long_size: z.long.into(),
            long_long_size: z.long_long.into(),
            pointer_size: z.pointer.into(),
        };
        // SAFETY: `out` points to the DLL's `mqs_target_type_sizes`, which has at least these
        // five ints (Open MPI's has seven: we write only the first five, as MPICH's has only
        // five). `write_unaligned` makes no alignment assumption.
        unsafe { out.write_unaligned(sizes) };
    });
}

fn lookup_symbol(
    s: &Shared,
    handle: Opaque,
    name: *mut c_char,
    out: *mut TAddr,
    function: bool,
) -> c_int {
    let what = if function {
        "find_function"
    } else {
        "find_symbol"
    };
    let Some(target) = s.target_of(Handle::from_ptr(handle)) else {
        s.fault(format!("{what}: unknown image {:#x}", handle.addr()));
        return CB_BAD_HANDLE;
    };
    // SAFETY: the DLL passes a NUL-terminated name; the scan is bounded.
    let Some(name) = (unsafe { read_c_str(name, MAX_NAME) }) else {
        s.fault(format!("{what}: null name"));
        return CB_BAD_ARGUMENT;
    };
    let name = String::from_utf8_lossy(&name).into_owned();
    match crate::state::find_symbol(&*target, &name, function) {
        Ok(Some(address)) => {
            if address > u64::from(TAddr::MAX) {
                s.fault(format!("{what}({name}): address {address:#x} too wide"));
                return CB_LOOKUP_FAILED;
            }
            let address = address as TAddr;
            if !out.is_null() {
                // SAFETY: a non-null `out` points to the DLL's `mqs_taddr_t`; a null one is
                // the presence probe real DLLs use, and is not written.
                unsafe { out.write_unaligned(address) };
            }
            0
        }
        Ok(None) => CB_NOT_FOUND,
        Err(e) => {
            s.fault(format!("{what}({name}): {e}"));
            CB_LOOKUP_FAILED
        }
    }
}

pub(super) extern "C" fn cb_find_function(
    image: Opaque,
    name: *mut c_char,
    _lang: c_int,
    out: *mut TAddr,
) -> c_int {
    guarded(CB_NO_HOST, CB_PANIC, |s| {
        lookup_symbol(s, image, name, out, true)
    })
}

pub(super) extern "C" fn cb_find_symbol(
    image: Opaque,
    name: *mut c_char,
    out: *mut TAddr,
) -> c_int {
    guarded(CB_NO_HOST, CB_PANIC, |s| {
        lookup_symbol(s, image, name, out, false)
    })
}

pub(super) extern "C" fn cb_find_type(image: Opaque, name: *mut c_char, _lang: c_int) -> Opaque {
    guarded(std::ptr::null_mut(), std::ptr::null_mut(), |s| {
        // SAFETY: the DLL passes a NUL-terminated name; the scan is bounded.
        let Some(name) = (unsafe { read_c_str(name, MAX_NAME) }) else {
            s.fault("find_type: null name".into());
            return std::ptr::null_mut();
        };
        let name = String::from_utf8_lossy(&name).into_owned();
        match s.find_type(Handle::from_ptr(image), &name, |t, n| {
            t.type_layout(TypeQuery::Named(n))
        }) {
            Some(h) => h.as_ptr(),
            None => std::ptr::null_mut(),
        }
    })
}

pub(super) extern "C" fn cb_field_offset(ty: Opaque, field: *mut c_char) -> c_int {
    guarded(-1, -1, |s| {
        // SAFETY: the DLL passes a NUL-terminated name; the scan is bounded.
        let Some(field) = (unsafe { read_c_str(field, MAX_NAME) }) else {
            s.fault("field_offset: null field name".into());
            return -1;
        };
        let field = String::from_utf8_lossy(&field);
        s.field_offset(Handle::from_ptr(ty), &field)
            .and_then(|o| c_int::try_from(o).ok())
            .unwrap_or(-1)
    })
}

pub(super) extern "C" fn cb_sizeof(ty: Opaque) -> c_int {
    guarded(0, 0, |s| {
        s.type_size(Handle::from_ptr(ty))
            .and_then(|n| c_int::try_from(n).ok())
            .unwrap_or_else(|| {
                s.fault(format!("sizeof: unknown type {:#x}", ty.addr()));
                0
            })
    })
}

// ---------------------------------------------------------------------------------------------
// Process callbacks.

pub(super) extern "C" fn cb_get_global_rank(process: Opaque) -> c_int {
    guarded(-1, -1, |s| {
        s.global_rank(Handle::from_ptr(process)).unwrap_or_else(|| {
            s.fault(format!(
                "get_global_rank: unknown process {:#x}",
                process.addr()
            ));
            -1
        })
    })
}

pub(super) extern "C" fn cb_get_image(process: Opaque) -> Opaque {
    guarded(std::ptr::null_mut(), std::ptr::null_mut(), |s| {
        match s.image_of(Handle::from_ptr(process)) {
            Some(h) => h.as_ptr(),
            None => {
                s.fault(format!("get_image: unknown process {:#x}", process.addr()));
                std::ptr::null_mut()
            }
        }
    })
}

pub(super) extern "C" fn cb_fetch_data(
    process: Opaque,
    address: TAddr,
    len: c_int,
    buf: *mut c_void,
) -> c_int {
    guarded(CB_NO_HOST, CB_PANIC, |s| {
        let Some(target) = s.target_of(Handle::from_ptr(process)) else {
            s.fault(format!("fetch_data: unknown process {:#x}", process.addr()));
            return CB_BAD_HANDLE;
        };
        if len == 0 {
            return 0;
        }
        if buf.is_null() || !(1..=MAX_FETCH).contains(&len) {
            s.fault(format!(
                "fetch_data({address:#x}, {len}): bad length or null buffer"
            ));
            return CB_BAD_ARGUMENT;
        }
        let mut tmp = vec![0u8; len as usize];
        match target.read_exact(u64::from(address), &mut tmp) {
            Ok(()) => {
                // SAFETY: the DLL's buffer holds `len` bytes (the interface's contract); `tmp`
                // has exactly `len` bytes and does not overlap it.
                unsafe {
                    std::ptr::copy_nonoverlapping(tmp.as_ptr(), buf.cast::<u8>(), tmp.len());
                }
                0
            }
            Err(e) => {
                s.fault(format!("fetch_data({address:#x}, {len}): {e}"));
                CB_READ_FAILED
            }
        }
    })
}

pub(super) extern "C" fn cb_target_to_host(
    process: Opaque,
    src: *const c_void,
    dst: *mut c_void,
    len: c_int,
) {
    guarded((), (), |s| {
        let Some(target) = s.target_of(Handle::from_ptr(process)) else {
            s.fault(format!(
                "target_to_host: unknown process {:#x}",
                process.addr()
            ));
            return;
        };
        if len <= 0 {
            return;
        }
        if src.is_null() || dst.is_null() || len > MAX_CONVERT {
            s.fault(format!("target_to_host: bad length {len} or null buffer"));
            return;
        }
        // SAFETY: `src` holds `len` bytes (the interface's contract); we copy them out before
        // writing `dst`, so the two may even overlap.
        let mut bytes =
            unsafe { std::slice::from_raw_parts(src.cast::<u8>(), len as usize) }.to_vec();
        crate::state::to_host_order(target.data_model().byte_order(), &mut bytes);
        // SAFETY: `dst` holds `len` bytes (the interface's contract); `bytes` is our own buffer.
        unsafe { std::ptr::copy(bytes.as_ptr(), dst.cast::<u8>(), bytes.len()) };
    });
}

pub(super) extern "C" fn cb_get_process_job(process: Opaque) -> Opaque {
    guarded(std::ptr::null_mut(), std::ptr::null_mut(), |s| {
        match s.job_of(Handle::from_ptr(process)) {
            Some(h) => h.as_ptr(),
            None => {
                s.fault(format!(
                    "get_process_job: unknown process {:#x}, or no job",
                    process.addr()
                ));
                std::ptr::null_mut()
            }
        }
    })
}

/// The header types the argument `mqs_job *` but documents it as "given a process": what a
/// DLL passes is the process, and a process is what we look up.
pub(super) extern "C" fn cb_get_process_identity(process: Opaque) -> c_int {
    guarded(MQS_INVALID_PROCESS, MQS_INVALID_PROCESS, |s| {
        s.global_rank(Handle::from_ptr(process)).unwrap_or_else(|| {
            s.fault(format!(
                "get_process_identity: unknown process {:#x}",
                process.addr()
            ));
            MQS_INVALID_PROCESS
        })
    })
}

// ---------------------------------------------------------------------------------------------
// Job callbacks.

/// The process of `job` with identity `index`, or NULL when there is none (not a fault: the
/// DLL may ask about processes the debugger has not acquired).
pub(super) extern "C" fn cb_get_process(job: Opaque, index: c_int) -> Opaque {
    guarded(std::ptr::null_mut(), std::ptr::null_mut(), |s| {
        let job = Handle::from_ptr(job);
        if s.job() != Some(job) {
            s.fault(format!("get_process({index}): unknown job {:#x}", job.0));
            return std::ptr::null_mut();
        }
        s.process_with_identity(job, index)
            .map_or(std::ptr::null_mut(), Handle::as_ptr)
    })
}
