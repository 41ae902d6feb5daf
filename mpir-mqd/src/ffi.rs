//! The C side of the MQD interface: bindings written from the definitions of `mpi_interface.h`
//! (MPICH) / `msgq_interface.h` (Open MPI), loading a DLL, calling into it, and the callbacks
//! it calls back.
//!
//! This module (with its child `callbacks`, the bodies of the callbacks) is the only one with
//! `unsafe`. Its invariants:
//!
//! - **Handles are tokens, never pointers.** The `mqs_image *`, `mqs_process *` and
//!   `mqs_type *` values the DLL receives are numbers from one process-wide counter, disguised
//!   as pointers ([`Handle`]). A callback looks the number up in the registry of the host that
//!   is calling the DLL on this thread ([`Active`]); a stale, foreign or garbage handle misses
//!   and the callback returns an error code. No callback ever dereferences memory of ours
//!   through a pointer the DLL handed back, so none can reach a freed object.
//! - **The callback tables are `static`.** The header says the debugger keeps them alive for as
//!   long as the DLL needs them; a `static` lives as long as the process.
//! - **A DLL is never unloaded** (the spec: "once loaded, the DLL itself is never unloaded"),
//!   so the function pointers copied out of it stay valid.
//! - **Callbacks never unwind into C.** Each body runs under `catch_unwind`; a panic (a bug in
//!   this crate or in a `Target`) becomes an error code.
//! - Pointers the DLL passes *in* (names, out-parameters, buffers) are trusted as the C
//!   contract says they must be; that trust is why [`crate::Host::load`] is `unsafe`.
#![allow(unsafe_code)]
// `c_long`/`c_ulong` are 64-bit here but 32-bit on other hosts: the widening conversions
// are needed there.
#![allow(clippy::useless_conversion)]

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_long, c_ulong, c_void};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::MqdError;
use crate::state::Shared;

// ---------------------------------------------------------------------------------------------
// Types of the interface.

/// `mqs_taddr_t`: C `unsigned long` on every platform we host on.
pub(crate) type TAddr = c_ulong;
/// `mqs_tword_t`: C `long`.
pub(crate) type TWord = c_long;

/// Opaque pointer type used for `mqs_image *`, `mqs_process *`, `mqs_type *`, `mqs_job *` and
/// the DLL's `mqs_image_info *` / `mqs_process_info *` / `mqs_job_info *`.
pub(crate) type Opaque = *mut c_void;

/// `mqs_target_type_sizes` as MPICH declares it: the five ints every DLL has. Open MPI's
/// declaration appends two more (`bool_size`, `size_t_size`) that the debugger must not write.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TargetTypeSizes {
    pub(crate) short_size: c_int,
    pub(crate) int_size: c_int,
    pub(crate) long_size: c_int,
    pub(crate) long_long_size: c_int,
    pub(crate) pointer_size: c_int,
}

/// Length of `mqs_communicator.name`.
pub(crate) const NAME_LEN: usize = 64;
/// Lines and line length of `mqs_pending_operation.extra_text`.
pub(crate) const EXTRA_LINES: usize = 5;
pub(crate) const EXTRA_LEN: usize = 64;

/// `mqs_communicator`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawCommunicator {
    pub(crate) unique_id: TAddr,
    pub(crate) local_rank: TWord,
    pub(crate) size: TWord,
    pub(crate) name: [c_char; NAME_LEN],
}

/// `mqs_pending_operation`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawPendingOperation {
    pub(crate) status: c_int,
    pub(crate) desired_local_rank: TWord,
    pub(crate) desired_global_rank: TWord,
    pub(crate) tag_wild: c_int,
    pub(crate) desired_tag: TWord,
    pub(crate) desired_length: TWord,
    pub(crate) system_buffer: c_int,
    pub(crate) buffer: TAddr,
    pub(crate) actual_local_rank: TWord,
    pub(crate) actual_global_rank: TWord,
    pub(crate) actual_tag: TWord,
    pub(crate) actual_length: TWord,
    pub(crate) extra_text: [[c_char; EXTRA_LEN]; EXTRA_LINES],
}

impl RawCommunicator {
    pub(crate) const fn zeroed() -> Self {
        RawCommunicator {
            unique_id: 0,
            local_rank: 0,
            size: 0,
            name: [0; NAME_LEN],
        }
    }
}

impl RawPendingOperation {
    pub(crate) const fn zeroed() -> Self {
        RawPendingOperation {
            status: 0,
            desired_local_rank: 0,
            desired_global_rank: 0,
            tag_wild: 0,
            desired_tag: 0,
            desired_length: 0,
            system_buffer: 0,
            buffer: 0,
            actual_local_rank: 0,
            actual_global_rank: 0,
            actual_tag: 0,
            actual_length: 0,
            extra_text: [[0; EXTRA_LEN]; EXTRA_LINES],
        }
    }
}

/// Length of `mqs_process_location.image_name`: the host C library's `FILENAME_MAX`, which the
/// header uses (a DLL for this host was compiled with the same value).
pub(crate) const IMAGE_NAME_LEN: usize = libc::FILENAME_MAX as usize;
/// Length of `mqs_process_location.host_name`.
pub(crate) const HOST_NAME_LEN: usize = 64;

/// `mqs_process_location` (MPI-2): where a newly created process is.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawProcessLocation {
    pub(crate) pid: c_long,
    pub(crate) image_name: [c_char; IMAGE_NAME_LEN],
    pub(crate) host_name: [c_char; HOST_NAME_LEN],
}

impl RawProcessLocation {
    pub(crate) const fn zeroed() -> Self {
        RawProcessLocation {
            pid: 0,
            image_name: [0; IMAGE_NAME_LEN],
            host_name: [0; HOST_NAME_LEN],
        }
    }
}

/// The bytes of a fixed-size C char array up to its first NUL (all of it when there is none).
pub(crate) fn char_array_bytes(a: &[c_char]) -> Vec<u8> {
    a.iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c.to_ne_bytes()[0])
        .collect()
}

// Callback function types, as the header declares them.
type MallocFt = unsafe extern "C" fn(usize) -> *mut c_void;
type FreeFt = unsafe extern "C" fn(*mut c_void);
type DprintsFt = unsafe extern "C" fn(*const c_char);
type ErrorStringFt = unsafe extern "C" fn(c_int) -> *mut c_char;
type PutInfoFt = unsafe extern "C" fn(Opaque, Opaque);
type GetInfoFt = unsafe extern "C" fn(Opaque) -> Opaque;
type GetTypeSizesFt = unsafe extern "C" fn(Opaque, *mut TargetTypeSizes);
type FindFunctionFt = unsafe extern "C" fn(Opaque, *mut c_char, c_int, *mut TAddr) -> c_int;
type FindSymbolFt = unsafe extern "C" fn(Opaque, *mut c_char, *mut TAddr) -> c_int;
type FindTypeFt = unsafe extern "C" fn(Opaque, *mut c_char, c_int) -> Opaque;
type FieldOffsetFt = unsafe extern "C" fn(Opaque, *mut c_char) -> c_int;
type SizeofFt = unsafe extern "C" fn(Opaque) -> c_int;
type GetGlobalRankFt = unsafe extern "C" fn(Opaque) -> c_int;
type GetImageFt = unsafe extern "C" fn(Opaque) -> Opaque;
type FetchDataFt = unsafe extern "C" fn(Opaque, TAddr, c_int, *mut c_void) -> c_int;
type TargetToHostFt = unsafe extern "C" fn(Opaque, *const c_void, *mut c_void, c_int);
type GetProcessFt = unsafe extern "C" fn(Opaque, c_int) -> Opaque;

/// `mqs_basic_callbacks`, MPI-1 fields then the two MPI-2 ones (an MPI-1 DLL reads only the
/// prefix, so the same table serves both).
#[repr(C)]
pub(crate) struct BasicCallbacks {
    malloc: Option<MallocFt>,
    free: Option<FreeFt>,
    dprints: Option<DprintsFt>,
    errorstring: Option<ErrorStringFt>,
    put_image_info: Option<PutInfoFt>,
    get_image_info: Option<GetInfoFt>,
    put_process_info: Option<PutInfoFt>,
    get_process_info: Option<GetInfoFt>,
    put_job_info: Option<PutInfoFt>,
    get_job_info: Option<GetInfoFt>,
}

/// `mqs_image_callbacks`.
#[repr(C)]
pub(crate) struct ImageCallbacks {
    get_type_sizes: Option<GetTypeSizesFt>,
    find_function: Option<FindFunctionFt>,
    find_symbol: Option<FindSymbolFt>,
    find_type: Option<FindTypeFt>,
    field_offset: Option<FieldOffsetFt>,
    sizeof: Option<SizeofFt>,
}

/// `mqs_process_callbacks`, MPI-1 fields then the two MPI-2 ones.
#[repr(C)]
pub(crate) struct ProcessCallbacks {
    get_global_rank: Option<GetGlobalRankFt>,
    get_image: Option<GetImageFt>,
    fetch_data: Option<FetchDataFt>,
    target_to_host: Option<TargetToHostFt>,
    get_process_job: Option<GetImageFt>,
    get_process_identity: Option<GetGlobalRankFt>,
}

/// `mqs_job_callbacks` (MPI-2).
#[repr(C)]
pub(crate) struct JobCallbacks {
    get_process: Option<GetProcessFt>,
}

static BASIC_CALLBACKS: BasicCallbacks = BasicCallbacks {
    malloc: Some(cb_malloc),
    free: Some(cb_free),
    dprints: Some(cb_dprints),
    errorstring: Some(cb_errorstring),
    put_image_info: Some(cb_put_image_info),
    get_image_info: Some(cb_get_image_info),
    put_process_info: Some(cb_put_process_info),
    get_process_info: Some(cb_get_process_info),
    put_job_info: Some(cb_put_job_info),
    get_job_info: Some(cb_get_job_info),
};

static IMAGE_CALLBACKS: ImageCallbacks = ImageCallbacks {
    get_type_sizes: Some(cb_get_type_sizes),
    find_function: Some(cb_find_function),
    find_symbol: Some(cb_find_symbol),
    find_type: Some(cb_find_type),
    field_offset: Some(cb_field_offset),
    sizeof: Some(cb_sizeof),
};

static PROCESS_CALLBACKS: ProcessCallbacks = ProcessCallbacks {
    get_global_rank: Some(cb_get_global_rank),
    get_image: Some(cb_get_image),
    fetch_data: Some(cb_fetch_data),
    target_to_host: Some(cb_target_to_host),
    get_process_job: Some(cb_get_process_job),
    get_process_identity: Some(cb_get_process_identity),
};

static JOB_CALLBACKS: JobCallbacks = JobCallbacks {
    get_process: Some(cb_get_process),
};

// ---------------------------------------------------------------------------------------------
// Handles.

/// A token the DLL sees as `mqs_image *`, `mqs_process *`, `mqs_type *` or `mqs_job *`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Handle(pub(crate) usize);

static NEXT_HANDLE: AtomicUsize = AtomicUsize::new(0x1000);

impl Handle {
    /// A handle never handed out before in this process (16-aligned, never null).
    pub(crate) fn fresh() -> Self {
        Handle(NEXT_HANDLE.fetch_add(16, Ordering::Relaxed))
    }

    fn as_ptr(self) -> Opaque {
        std::ptr::without_provenance_mut(self.0)
    }

    fn from_ptr(p: Opaque) -> Self {
        Handle(p.addr())
    }
}

// ---------------------------------------------------------------------------------------------
// The host active on this thread.

thread_local! {
    static ACTIVE: RefCell<Option<Rc<Shared>>> = const { RefCell::new(None) };
}

/// Makes `shared` the host that callbacks on this thread see, until dropped (then the previous
/// one, if any, is restored).
pub(crate) struct Active {
    previous: Option<Rc<Shared>>,
}

impl Active {
    pub(crate) fn enter(shared: &Rc<Shared>) -> Self {
        let previous = ACTIVE.with(|a| a.replace(Some(Rc::clone(shared))));
        Active { previous }
    }
}

impl Drop for Active {
    fn drop(&mut self) {
        let previous = self.previous.take();
        ACTIVE.with(|a| *a.borrow_mut() = previous);
    }
}

fn active() -> Option<Rc<Shared>> {
    ACTIVE
        .try_with(|a| a.try_borrow().ok().and_then(|a| a.clone()))
        .ok()
        .flatten()
}

// ---------------------------------------------------------------------------------------------
// The callbacks themselves, and the codes they return (`ffi/callbacks.rs`).

mod callbacks;
use callbacks::*;
pub(crate) use callbacks::{callback_code_text, dll_string};

// ---------------------------------------------------------------------------------------------
// Loading (the public, unsafe entry point lives here with the rest of the unsafe code).

impl crate::Host {
    /// Loads the DLL at `path` into this process: checks `mqs_version_compatibility` and
    /// `mqs_dll_taddr_width` first, then the required exports, then hands it the callbacks.
    ///
    /// # Safety
    /// The DLL's code runs inside this process with full access to it. `path` must name an
    /// MQD DLL built for this host's ABI that keeps the interface's contract (valid
    /// NUL-terminated strings, out-parameters and buffers of the sizes it passes). A DLL that
    /// crashes takes the process with it.
    pub unsafe fn load(
        path: impl AsRef<Path>,
        options: crate::HostOptions,
    ) -> Result<crate::Host, MqdError> {
        crate::Host::open_with(path.as_ref(), options, |p| {
            // SAFETY: this function's contract, passed on to the caller.
            unsafe { Dll::load(p) }
        })
    }
}

/// Loads the DLL at `path` into this process ([`crate::Host::load`]) as a
/// [`crate::QueueHost`]; [`crate::open_out_of_process`] is the safe alternative.
///
/// # Safety
/// The contract of [`crate::Host::load`].
pub unsafe fn open_in_process(
    path: impl AsRef<Path>,
    options: crate::HostOptions,
) -> Result<Box<dyn crate::QueueHost>, MqdError> {
    // SAFETY: this function's contract, passed on to the caller.
    Ok(Box::new(unsafe { crate::Host::load(path, options) }?))
}

// ---------------------------------------------------------------------------------------------
// The out-of-process helper's process set-up.

/// Loads the DLL into this process for a [`crate::QueueReader`] whose options were made
/// with [`crate::ReaderOptions::with_dll_in_process`].
pub(crate) fn open_in_process_vouched(
    path: &Path,
    options: crate::HostOptions,
) -> Result<Box<dyn crate::QueueHost>, MqdError> {
    // SAFETY: the only caller is `QueueReader::open` for options made by the `unsafe fn`
    // `ReaderOptions::with_dll_in_process`, whose contract is `Host::load`'s for this DLL.
    unsafe { open_in_process(path, options) }
}

/// Loads the DLL inside the helper process (`mpir-mqd-host`).
pub(crate) fn load_in_helper(
    path: &Path,
    options: crate::HostOptions,
) -> Result<crate::Host, MqdError> {
    // SAFETY: this process exists to host the DLL: whatever the DLL does (crash, hang, corrupt
    // memory) stays inside it, and the parent turns it into an error. The ABI contract is the
    // same as for `Host::load`, vouched for by whoever chose the DLL.
    unsafe { crate::Host::load(path, options) }
}

/// Moves the protocol off file descriptor 1: returns a close-on-exec duplicate of stdout (the
/// pipe to the parent) and points fd 1 at stderr, so that a DLL that prints to stdout cannot
/// corrupt the protocol.
pub(crate) fn protocol_stdout() -> std::io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: fcntl(F_DUPFD_CLOEXEC) on fd 1 only creates a new descriptor; no memory involved.
    let fd = unsafe { libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: dup2 replaces fd 1 with a copy of fd 2; no Rust object owns fd 1 directly (the
    // standard library's stdout handle refers to the number, which now means stderr).
    if unsafe { libc::dup2(2, 1) } < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created by fcntl and is owned by nothing else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Asks the kernel to kill this process when its parent dies (a helper stuck in a DLL must
/// not outlive the host). Best effort.
pub(crate) fn die_with_parent() {
    // SAFETY: PR_SET_PDEATHSIG takes a signal number and touches no memory of ours.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong);
    }
}

// ---------------------------------------------------------------------------------------------
// The DLL's exports.

/// Every function of a loaded DLL, copied out of it (it is never unloaded).
pub(crate) struct Dll {
    setup_basic_callbacks: unsafe extern "C" fn(*const BasicCallbacks),
    version_string: unsafe extern "C" fn() -> *mut c_char,
    dll_error_string: unsafe extern "C" fn(c_int) -> *mut c_char,
    setup_image: unsafe extern "C" fn(Opaque, *const ImageCallbacks) -> c_int,
    image_has_queues: unsafe extern "C" fn(Opaque, *mut *mut c_char) -> c_int,
    destroy_image_info: unsafe extern "C" fn(Opaque),
    setup_process: unsafe extern "C" fn(Opaque, *const ProcessCallbacks) -> c_int,
    destroy_process_info: unsafe extern "C" fn(Opaque),
    process_has_queues: unsafe extern "C" fn(Opaque, *mut *mut c_char) -> c_int,
    update_communicator_list: unsafe extern "C" fn(Opaque) -> c_int,
    setup_communicator_iterator: unsafe extern "C" fn(Opaque) -> c_int,
    get_communicator: unsafe extern "C" fn(Opaque, *mut RawCommunicator) -> c_int,
    get_comm_group: Option<unsafe extern "C" fn(Opaque, *mut c_int) -> c_int>,
    next_communicator: unsafe extern "C" fn(Opaque) -> c_int,
    setup_operation_iterator: unsafe extern "C" fn(Opaque, c_int) -> c_int,
    next_operation: unsafe extern "C" fn(Opaque, *mut RawPendingOperation) -> c_int,
    // The MPI-2 functions: bound only for a DLL of interface version 3, whose callback tables
    // have the MPI-2 fields.
    setup_job: Option<unsafe extern "C" fn(Opaque, *const JobCallbacks) -> c_int>,
    destroy_job_info: Option<unsafe extern "C" fn(Opaque) -> c_int>,
    set_process_identity: Option<unsafe extern "C" fn(Opaque, c_int) -> c_int>,
    spawn_breakpoint_name: Option<unsafe extern "C" fn(Opaque, *mut c_char, c_int) -> c_int>,
    setup_new_process_iterator: Option<unsafe extern "C" fn(Opaque) -> c_int>,
    next_new_process: Option<unsafe extern "C" fn(Opaque, *mut RawProcessLocation) -> c_int>,
    /// `mqs_version_compatibility()`.
    pub(crate) compatibility: i32,
    /// `mqs_dll_taddr_width()`, when exported.
    pub(crate) taddr_width: Option<i32>,
    /// Which optional exports exist.
    pub(crate) optional: Vec<&'static str>,
}

/// The exports every MPI-1 DLL must have, besides the two version checks.
pub(crate) const REQUIRED: [&str; 16] = [
    "mqs_setup_basic_callbacks",
    "mqs_version_string",
    "mqs_dll_error_string",
    "mqs_setup_image",
    "mqs_image_has_queues",
    "mqs_destroy_image_info",
    "mqs_setup_process",
    "mqs_destroy_process_info",
    "mqs_process_has_queues",
    "mqs_update_communicator_list",
    "mqs_setup_communicator_iterator",
    "mqs_get_communicator",
    "mqs_next_communicator",
    "mqs_setup_operation_iterator",
    "mqs_next_operation",
    "mqs_version_compatibility",
];

/// Optional exports we know of (the MPI-2 ones are used only by a DLL of interface version 3).
pub(crate) const OPTIONAL: [&str; 8] = [
    "mqs_dll_taddr_width",
    "mqs_get_comm_group",
    "mqs_setup_job",
    "mqs_destroy_job_info",
    "mqs_setup_new_process_iterator",
    "mqs_next_new_process",
    "mqs_set_process_identity",
    "mqs_spawn_breakpoint_name",
];

/// The spec's prose names `next_new_process` without the prefix both headers give it: a DLL
/// written from the prose may export that spelling.
const NEXT_NEW_PROCESS_ALIAS: &str = "next_new_process";

/// Whether `lib` exports `name` (or its alias).
///
/// # Safety
/// None beyond `export`'s: only presence is tested, the placeholder type is never called.
unsafe fn exported(lib: &libloading::os::unix::Library, name: &str) -> bool {
    // SAFETY: presence test only.
    let has = |n: &str| unsafe { export::<unsafe extern "C" fn()>(lib, n) }.is_some();
    has(name) || (name == "mqs_next_new_process" && has(NEXT_NEW_PROCESS_ALIAS))
}

/// Copies export `name` of `lib` as a `T` (a function pointer type), if present.
///
/// # Safety
/// `T` must be the C prototype the interface gives `name`.
unsafe fn export<T: Copy>(lib: &libloading::os::unix::Library, name: &str) -> Option<T> {
    let mut z = name.as_bytes().to_vec();
    z.push(0);
    // SAFETY: the caller guarantees `T` is the export's prototype; the pointer is copied out
    // and stays valid because the library is never unloaded.
    unsafe { lib.get::<T>(&z).ok().map(|s| *s) }
}

impl Dll {
    /// Loads the DLL at `path`, checks its versions first and then its exports, and hands it
    /// our basic callbacks.
    ///
    /// # Safety
    /// `path` must name an MQD DLL built for this host's ABI: its initialisers run now, and its
    /// functions are later called with the header's prototypes.
    pub(crate) unsafe fn load(path: &Path) -> Result<Dll, MqdError> {
        use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};
        let shown = path.display().to_string();
        // SAFETY: loading runs the DLL's initialisers: the caller vouches for the file.
        let lib = unsafe { Library::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map_err(|e| {
            MqdError::Load {
                path: shown.clone(),
                reason: e.to_string(),
            }
        })?;
        // SAFETY: the prototypes below are the header's.
        let compat_fn =
            unsafe { export::<unsafe extern "C" fn() -> c_int>(&lib, "mqs_version_compatibility") };
        // SAFETY: as above.
        let width_fn =
            unsafe { export::<unsafe extern "C" fn() -> c_int>(&lib, "mqs_dll_taddr_width") };
        let Some(compat_fn) = compat_fn else {
            return Err(MqdError::MissingExports {
                path: shown,
                names: vec!["mqs_version_compatibility".into()],
            });
        };
        // SAFETY: a no-argument function of the DLL returning an int.
        let compatibility = unsafe { compat_fn() };
        use mpir_types::mqd::{INTERFACE_COMPATIBILITY, INTERFACE_COMPATIBILITY_MPI2};
        if !(INTERFACE_COMPATIBILITY..=INTERFACE_COMPATIBILITY_MPI2).contains(&compatibility) {
            return Err(MqdError::Incompatible {
                path: shown,
                found: compatibility,
                supported: INTERFACE_COMPATIBILITY_MPI2,
            });
        }
        let mpi2 = compatibility == INTERFACE_COMPATIBILITY_MPI2;
        // SAFETY: as above. A DLL without it predates it and uses `unsigned long` (header).
        let taddr_width = width_fn.map(|f| unsafe { f() });
        let host_width = std::mem::size_of::<TAddr>();
        if let Some(w) = taddr_width
            && usize::try_from(w).ok() != Some(host_width)
        {
            return Err(MqdError::TaddrWidth {
                path: shown,
                found: w,
                host: host_width,
            });
        }
        let missing: Vec<String> = REQUIRED
            .iter()
            .filter(|n| {
                // SAFETY: only presence is tested; the type is a placeholder never called.
                unsafe { export::<unsafe extern "C" fn()>(&lib, n) }.is_none()
            })
            .map(|n| (*n).to_string())
            .collect();
        if !missing.is_empty() {
            return Err(MqdError::MissingExports {
                path: shown,
                names: missing,
            });
        }
        let optional: Vec<&'static str> = OPTIONAL
            .iter()
            .copied()
            // SAFETY: presence test only, as above.
            .filter(|n| unsafe { exported(&lib, n) })
            .collect();
        macro_rules! mpi2 {
            ($name:literal) => {
                if mpi2 {
                    // SAFETY: the field's type is the header's (FOR_MPI2) prototype for this
                    // export, which a version-3 DLL was built against.
                    unsafe { export(&lib, $name) }
                } else {
                    None
                }
            };
        }
        macro_rules! req {
            ($name:literal) => {
                // SAFETY: presence was checked above; the field's type is the header's
                // prototype for this export.
                match unsafe { export(&lib, $name) } {
                    Some(f) => f,
                    None => {
                        return Err(MqdError::MissingExports {
                            path: shown,
                            names: vec![$name.into()],
                        });
                    }
                }
            };
        }
        let dll = Dll {
            setup_basic_callbacks: req!("mqs_setup_basic_callbacks"),
            version_string: req!("mqs_version_string"),
            dll_error_string: req!("mqs_dll_error_string"),
            setup_image: req!("mqs_setup_image"),
            image_has_queues: req!("mqs_image_has_queues"),
            destroy_image_info: req!("mqs_destroy_image_info"),
            setup_process: req!("mqs_setup_process"),
            destroy_process_info: req!("mqs_destroy_process_info"),
            process_has_queues: req!("mqs_process_has_queues"),
            update_communicator_list: req!("mqs_update_communicator_list"),
            setup_communicator_iterator: req!("mqs_setup_communicator_iterator"),
            get_communicator: req!("mqs_get_communicator"),
            // SAFETY: the header's prototype of mqs_get_comm_group.
            get_comm_group: unsafe { export(&lib, "mqs_get_comm_group") },
            next_communicator: req!("mqs_next_communicator"),
            setup_operation_iterator: req!("mqs_setup_operation_iterator"),
            next_operation: req!("mqs_next_operation"),
            setup_job: mpi2!("mqs_setup_job"),
            destroy_job_info: mpi2!("mqs_destroy_job_info"),
            set_process_identity: mpi2!("mqs_set_process_identity"),
            spawn_breakpoint_name: mpi2!("mqs_spawn_breakpoint_name"),
            setup_new_process_iterator: mpi2!("mqs_setup_new_process_iterator"),
            next_new_process: match mpi2!("mqs_next_new_process") {
                Some(f) => Some(f),
                None if mpi2 => {
                    // SAFETY: as above; the alias has the same prototype.
                    unsafe { export(&lib, NEXT_NEW_PROCESS_ALIAS) }
                }
                None => None,
            },
            compatibility,
            taddr_width,
            optional,
        };
        // Never unloaded: the function pointers above, and anything the DLL keeps of ours,
        // stay valid for the life of the process.
        std::mem::forget(lib);
        // SAFETY: the DLL keeps the pointer; the table is a static.
        unsafe { (dll.setup_basic_callbacks)(&BASIC_CALLBACKS) };
        Ok(dll)
    }

    /// Whether `mqs_get_comm_group` is exported.
    pub(crate) fn has_comm_group(&self) -> bool {
        self.get_comm_group.is_some()
    }

    /// `mqs_version_string()`.
    pub(crate) fn version_string(&self) -> String {
        // SAFETY: a no-argument export returning a string (or null).
        let p = unsafe { (self.version_string)() };
        dll_string(p).unwrap_or_default()
    }

    /// `mqs_dll_error_string(code)`.
    pub(crate) fn error_string(&self, code: c_int) -> String {
        // SAFETY: the export takes any int and returns a string (or null).
        let p = unsafe { (self.dll_error_string)(code) };
        dll_string(p).unwrap_or_else(|| format!("error code {code}"))
    }

    // The calls below pass only handles (tokens), our static callback tables, and pointers to
    // our own live locals: the DLL's prototypes are the header's (checked at load).

    pub(crate) fn setup_image(&self, image: Handle) -> c_int {
        // SAFETY: see the comment above the calls.
        unsafe { (self.setup_image)(image.as_ptr(), &IMAGE_CALLBACKS) }
    }

    /// `mqs_image_has_queues`: the code and the message (still a printf format).
    pub(crate) fn image_has_queues(&self, image: Handle) -> (c_int, Option<String>) {
        let mut msg: *mut c_char = std::ptr::null_mut();
        // SAFETY: see the comment above the calls; `msg` is our local.
        let rc = unsafe { (self.image_has_queues)(image.as_ptr(), &mut msg) };
        (rc, dll_string(msg))
    }

    pub(crate) fn destroy_image_info(&self, info: Opaque) {
        // SAFETY: `info` is what the DLL stored with put_image_info, handed back once.
        unsafe { (self.destroy_image_info)(info) }
    }

    pub(crate) fn setup_process(&self, process: Handle) -> c_int {
        // SAFETY: see the comment above the calls.
        unsafe { (self.setup_process)(process.as_ptr(), &PROCESS_CALLBACKS) }
    }

    pub(crate) fn process_has_queues(&self, process: Handle) -> (c_int, Option<String>) {
        let mut msg: *mut c_char = std::ptr::null_mut();
        // SAFETY: see the comment above the calls; `msg` is our local.
        let rc = unsafe { (self.process_has_queues)(process.as_ptr(), &mut msg) };
        (rc, dll_string(msg))
    }

    pub(crate) fn destroy_process_info(&self, info: Opaque) {
        // SAFETY: `info` is what the DLL stored with put_process_info, handed back once.
        unsafe { (self.destroy_process_info)(info) }
    }

    pub(crate) fn update_communicator_list(&self, process: Handle) -> c_int {
        // SAFETY: see the comment above the calls.
        unsafe { (self.update_communicator_list)(process.as_ptr()) }
    }

    pub(crate) fn setup_communicator_iterator(&self, process: Handle) -> c_int {
        // SAFETY: see the comment above the calls.
        unsafe { (self.setup_communicator_iterator)(process.as_ptr()) }
    }

    pub(crate) fn get_communicator(&self, process: Handle, out: &mut RawCommunicator) -> c_int {
        // SAFETY: see the comment above the calls; `out` is a full `mqs_communicator`.
        unsafe { (self.get_communicator)(process.as_ptr(), out) }
    }

    /// `mqs_get_comm_group` into `out` (one int per member), if exported.
    pub(crate) fn get_comm_group(&self, process: Handle, out: &mut [c_int]) -> Option<c_int> {
        let f = self.get_comm_group?;
        // SAFETY: see the comment above the calls; `out` has one int per member of the
        // current communicator, whose size the DLL just reported.
        Some(unsafe { f(process.as_ptr(), out.as_mut_ptr()) })
    }

    pub(crate) fn next_communicator(&self, process: Handle) -> c_int {
        // SAFETY: see the comment above the calls.
        unsafe { (self.next_communicator)(process.as_ptr()) }
    }

    pub(crate) fn setup_operation_iterator(&self, process: Handle, class: c_int) -> c_int {
        // SAFETY: see the comment above the calls.
        unsafe { (self.setup_operation_iterator)(process.as_ptr(), class) }
    }

    pub(crate) fn next_operation(&self, process: Handle, out: &mut RawPendingOperation) -> c_int {
        // SAFETY: see the comment above the calls; `out` is a full `mqs_pending_operation`.
        unsafe { (self.next_operation)(process.as_ptr(), out) }
    }

    // The MPI-2 calls: `None` when the DLL does not provide the function.

    /// Whether the DLL keeps a job object (version 3 and `mqs_setup_job` exported).
    pub(crate) fn has_jobs(&self) -> bool {
        self.setup_job.is_some()
    }

    /// Whether both new-process calls are available.
    pub(crate) fn has_new_processes(&self) -> bool {
        self.setup_new_process_iterator.is_some() && self.next_new_process.is_some()
    }

    /// Whether `mqs_setup_new_process_iterator` is available.
    pub(crate) fn has_setup_new_process_iterator(&self) -> bool {
        self.setup_new_process_iterator.is_some()
    }

    /// `mqs_setup_job(job, &JOB_CALLBACKS)`.
    pub(crate) fn setup_job(&self, job: Handle) -> Option<c_int> {
        let f = self.setup_job?;
        // SAFETY: see the comment above the calls; the job table is a static.
        Some(unsafe { f(job.as_ptr(), &JOB_CALLBACKS) })
    }

    /// `mqs_destroy_job_info(info)`.
    pub(crate) fn destroy_job_info(&self, info: Opaque) -> Option<c_int> {
        let f = self.destroy_job_info?;
        // SAFETY: `info` is what the DLL stored with put_job_info, handed back once.
        Some(unsafe { f(info) })
    }

    /// `mqs_set_process_identity(process, identity)`.
    pub(crate) fn set_process_identity(&self, process: Handle, identity: c_int) -> Option<c_int> {
        let f = self.set_process_identity?;
        // SAFETY: see the comment above the calls.
        Some(unsafe { f(process.as_ptr(), identity) })
    }

    /// `mqs_spawn_breakpoint_name(process, out, out.len())`.
    pub(crate) fn spawn_breakpoint_name(
        &self,
        process: Handle,
        out: &mut [c_char],
    ) -> Option<c_int> {
        let f = self.spawn_breakpoint_name?;
        let len = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        // SAFETY: see the comment above the calls; `out` has `len` writable chars (the length
        // is the slice's, clamped to what an int can say).
        Some(unsafe { f(process.as_ptr(), out.as_mut_ptr(), len) })
    }

    /// `mqs_setup_new_process_iterator(process)`.
    pub(crate) fn setup_new_process_iterator(&self, process: Handle) -> Option<c_int> {
        let f = self.setup_new_process_iterator?;
        // SAFETY: see the comment above the calls.
        Some(unsafe { f(process.as_ptr()) })
    }

    /// `mqs_next_new_process(process, out)`.
    pub(crate) fn next_new_process(
        &self,
        process: Handle,
        out: &mut RawProcessLocation,
    ) -> Option<c_int> {
        let f = self.next_new_process?;
        // SAFETY: see the comment above the calls; `out` is a full `mqs_process_location`.
        Some(unsafe { f(process.as_ptr(), out) })
    }
}

#[cfg(test)]
mod tests;
