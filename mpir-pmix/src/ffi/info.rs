//! Owned `pmix_info_t` arrays to hand to libpmix, and owned copies of the ones it hands back.
//!
//! What we pass to libpmix lives in an [`InfoArray`], which owns every string, proc and data
//! array its entries point to; a non-blocking call keeps it alive until its callback has run
//! (or forever, when the callback never comes). What libpmix passes to us is copied out at once
//! into [`Value`]s, bounded in size, and never referenced after the callback returns.

use super::types::*;
use std::ffi::{CStr, CString, c_char, c_void};

/// At most this many entries are read from an info array or a data array that libpmix hands
/// us: a hostile or corrupt reply cannot make us allocate without bound.
pub(crate) const MAX_ENTRIES: usize = 1 << 20;

/// A value to put in an info entry.
#[derive(Debug, Clone)]
pub(crate) enum Put {
    Str(String),
    Bool(bool),
    U16(u16),
    U32(u32),
    /// One `pmix_proc_t` (`PMIX_PROC`).
    Proc(String, u32),
    /// A `pmix_data_array_t` of `pmix_proc_t` (`PMIX_DATA_ARRAY` of `PMIX_PROC`).
    Procs(Vec<(String, u32)>),
}

/// A string for C: an error text when it holds a NUL byte.
pub(crate) fn c_string(what: &str, s: &str) -> Result<CString, String> {
    CString::new(s).map_err(|_| format!("{what} {s:?} holds a NUL byte"))
}

/// A `pmix_proc_t` for `nspace`/`rank`: an error when the namespace is too long or holds NUL.
pub(crate) fn make_proc(nspace: &str, rank: u32) -> Result<PmixProc, String> {
    if nspace.len() > MAX_NSLEN || nspace.as_bytes().contains(&0) {
        return Err(format!(
            "namespace {nspace:?} is not a PMIx namespace (at most {MAX_NSLEN} bytes, no NUL)"
        ));
    }
    let mut p = PmixProc {
        nspace: [0; MAX_NSLEN + 1],
        rank,
    };
    for (d, s) in p.nspace.iter_mut().zip(nspace.bytes()) {
        *d = s as c_char;
    }
    Ok(p)
}

/// An owned `pmix_info_t[]` and everything its entries point to.
#[derive(Default)]
pub(crate) struct InfoArray {
    infos: Vec<PmixInfo>,
    strings: Vec<CString>,
    // Boxed: C holds their addresses while the vectors grow.
    #[allow(clippy::vec_box)]
    procs: Vec<Box<PmixProc>>,
    proc_arrays: Vec<Vec<PmixProc>>,
    #[allow(clippy::vec_box)]
    arrays: Vec<Box<PmixDataArray>>,
}

// SAFETY: the raw pointers inside point only into heap blocks this value owns (boxes, vectors
// and CStrings that are never resized after their address was taken), so moving the value to
// another thread moves the ownership of everything they point to with it.
unsafe impl Send for InfoArray {}

impl InfoArray {
    /// Appends `key` = `value`.
    pub(crate) fn push(&mut self, key: &str, value: Put) -> Result<(), String> {
        let mut info = PmixInfo {
            key: [0; MAX_KEYLEN + 1],
            flags: 0,
            value: PmixValue {
                type_: 0,
                data: ValueData { raw: [0; 3] },
            },
        };
        if key.len() > MAX_KEYLEN {
            return Err(format!("PMIx key {key:?} is too long"));
        }
        for (d, s) in info.key.iter_mut().zip(key.bytes()) {
            *d = s as c_char;
        }
        let (type_, data) = match value {
            Put::Str(s) => {
                let c = c_string(key, &s)?;
                // The CString's heap block does not move when the CString is moved into the vector.
                let ptr = c.as_ptr().cast_mut();
                self.strings.push(c);
                (PMIX_STRING, ValueData { string: ptr })
            }
            Put::Bool(b) => (PMIX_BOOL, ValueData { flag: b }),
            Put::U16(v) => (PMIX_UINT16, ValueData { uint16: v }),
            Put::U32(v) => (PMIX_UINT32, ValueData { uint32: v }),
            Put::Proc(ns, rank) => {
                let mut b = Box::new(make_proc(&ns, rank)?);
                let ptr: *mut PmixProc = &mut *b;
                self.procs.push(b);
                (PMIX_PROC, ValueData { proc_: ptr })
            }
            Put::Procs(list) => {
                let mut v = list
                    .iter()
                    .map(|(ns, r)| make_proc(ns, *r))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut da = Box::new(PmixDataArray {
                    type_: PMIX_PROC,
                    size: v.len(),
                    array: v.as_mut_ptr().cast::<c_void>(),
                });
                let ptr: *mut PmixDataArray = &mut *da;
                self.proc_arrays.push(v);
                self.arrays.push(da);
                (PMIX_DATA_ARRAY, ValueData { darray: ptr })
            }
        };
        info.value = PmixValue { type_, data };
        self.infos.push(info);
        Ok(())
    }

    /// The number of entries.
    pub(crate) fn len(&self) -> usize {
        self.infos.len()
    }

    /// The array for C (null when empty). Valid while `self` lives and is not pushed to.
    pub(crate) fn as_mut_ptr(&mut self) -> *mut PmixInfo {
        if self.infos.is_empty() {
            std::ptr::null_mut()
        } else {
            self.infos.as_mut_ptr()
        }
    }
}

/// One process of a proc table, as the server gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawProcInfo {
    pub(crate) nspace: String,
    pub(crate) rank: u32,
    pub(crate) host: Option<String>,
    pub(crate) executable: Option<String>,
    pub(crate) pid: i32,
    pub(crate) exit_code: i32,
    pub(crate) state: u8,
}

/// An owned copy of a value libpmix handed us.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    Bool(bool),
    Str(String),
    Int(i64),
    Status(i32),
    Proc(String, u32),
    ProcInfos(Vec<RawProcInfo>),
    Procs(Vec<(String, u32)>),
    /// A type this crate does not read (its `pmix_data_type_t`).
    Other(u16),
}

/// The NUL-terminated prefix of a fixed-size C char array, lossily as UTF-8.
pub(crate) fn fixed_str(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A C string libpmix owns, copied; `None` for null.
///
/// # Safety
/// `p` is null or points to a NUL-terminated string valid for the duration of the call.
pub(crate) unsafe fn opt_str(p: *const c_char) -> Option<String> {
    if p.is_null() {
        None
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's contract.
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }
}

/// Copies `n` entries of a `pmix_info_t[]` libpmix handed us (at most [`MAX_ENTRIES`]).
///
/// # Safety
/// `info` is null or points to `n` initialised `pmix_info_t` whose pointer members are valid
/// for their types, for the duration of the call.
pub(crate) unsafe fn read_infos(info: *const PmixInfo, n: usize) -> Vec<(String, Value)> {
    if info.is_null() {
        return Vec::new();
    }
    (0..n.min(MAX_ENTRIES))
        .map(|i| {
            // SAFETY: i < n, within the array by the caller's contract.
            let e = unsafe { &*info.add(i) };
            // SAFETY: e.value is a valid pmix_value_t by the caller's contract.
            (fixed_str(&e.key), unsafe { read_value(&e.value) })
        })
        .collect()
}

/// Copies one `pmix_value_t`.
///
/// # Safety
/// As for [`read_infos`]: the member `type_` names is the live one, and its pointers are valid.
pub(crate) unsafe fn read_value(v: &PmixValue) -> Value {
    // SAFETY: for all union reads below, `type_` names the live member (the caller's
    // contract), and each arm reads exactly that member.
    unsafe {
        match v.type_ {
            PMIX_BOOL => Value::Bool(v.data.flag),
            PMIX_STRING => Value::Str(opt_str(v.data.string).unwrap_or_default()),
            PMIX_PID => Value::Int(i64::from(v.data.pid)),
            PMIX_INT => Value::Int(i64::from(v.data.integer)),
            PMIX_INT32 => Value::Int(i64::from(v.data.int32)),
            PMIX_UINT16 => Value::Int(i64::from(v.data.uint16)),
            PMIX_UINT32 => Value::Int(i64::from(v.data.uint32)),
            PMIX_STATUS => Value::Status(v.data.status),
            PMIX_PROC if !v.data.proc_.is_null() => {
                let p = &*v.data.proc_;
                Value::Proc(fixed_str(&p.nspace), p.rank)
            }
            PMIX_DATA_ARRAY if !v.data.darray.is_null() => read_darray(&*v.data.darray),
            other => Value::Other(other),
        }
    }
}

/// Copies a `pmix_data_array_t` of `pmix_proc_info_t` or `pmix_proc_t`.
///
/// # Safety
/// `da.array` points to `da.size` elements of the type `da.type_` names.
unsafe fn read_darray(da: &PmixDataArray) -> Value {
    let n = da.size.min(MAX_ENTRIES);
    if da.array.is_null() {
        return Value::Other(PMIX_DATA_ARRAY);
    }
    match da.type_ {
        PMIX_PROC_INFO => {
            let base = da.array.cast::<PmixProcInfo>();
            Value::ProcInfos(
                (0..n)
                    .map(|i| {
                        // SAFETY: i < size, elements of type pmix_proc_info_t (the contract).
                        let p = unsafe { &*base.add(i) };
                        RawProcInfo {
                            nspace: fixed_str(&p.proc_.nspace),
                            rank: p.proc_.rank,
                            // SAFETY: libpmix's strings, null or NUL-terminated.
                            host: unsafe { opt_str(p.hostname) },
                            // SAFETY: as above.
                            executable: unsafe { opt_str(p.executable_name) },
                            pid: p.pid,
                            exit_code: p.exit_code,
                            state: p.state,
                        }
                    })
                    .collect(),
            )
        }
        PMIX_PROC => {
            let base = da.array.cast::<PmixProc>();
            Value::Procs(
                (0..n)
                    .map(|i| {
                        // SAFETY: i < size, elements of type pmix_proc_t (the contract).
                        let p = unsafe { &*base.add(i) };
                        (fixed_str(&p.nspace), p.rank)
                    })
                    .collect(),
            )
        }
        _ => Value::Other(PMIX_DATA_ARRAY),
    }
}
