//! Memory of a live process: `process_vm_readv` (many ranges per system call), with
//! `/proc/PID/mem` as the fallback for reads and the way to write.
//!
//! No ptrace is involved: reading needs the same rights as attaching (root, or same user with
//! a permissive `ptrace_scope`), but does not stop the process. A tool that needs a consistent
//! snapshot stops the process first ([`Tracer`](super::tracer::Tracer)).
//!
//! Like a debugger, this sees memory the process itself cannot: where `process_vm_readv`
//! refuses a page (`PROT_NONE`), the `/proc/PID/mem` fallback reads it with the kernel's forced
//! access. Strings that run into such pages are therefore read with their real bytes.

use std::fs::File;
use std::io::IoSliceMut;
use std::os::unix::fs::FileExt;
use std::sync::{Mutex, MutexGuard};

use mpir_types::DataModel;
use nix::errno::Errno;
use nix::sys::uio::{RemoteIoVec, process_vm_readv};
use nix::unistd::Pid;

use crate::error::{Fault, Result, TargetError};
use crate::strings::StringBatch;
use crate::traits::Memory;

/// Most iovecs the kernel takes in one `process_vm_readv` (`IOV_MAX` on Linux).
const IOV_MAX: usize = 1024;
/// How many bytes are read at once for each string before its NUL is searched for.
const STRING_WINDOW: u64 = 256;
/// Windows closer than this are read as one range (reading the gap is cheaper than a new iovec).
const COALESCE_GAP: u64 = 64;
/// Largest coalesced range.
const MAX_RANGE: u64 = 1 << 20;

/// The memory of process `pid`.
#[derive(Debug)]
pub struct LiveMemory {
    pid: u32,
    model: DataModel,
    mem: Mutex<Option<File>>,
}

fn fault(e: Errno) -> Fault {
    match e {
        Errno::ESRCH => Fault::ProcessGone,
        Errno::EFAULT | Errno::EIO => Fault::Unmapped,
        Errno::EPERM | Errno::EACCES => {
            Fault::Os("permission denied (reading another process needs ptrace rights)".into())
        }
        e => Fault::Os(e.desc().into()),
    }
}

impl LiveMemory {
    /// The memory of `pid`, decoded with `model`.
    pub fn new(pid: u32, model: DataModel) -> Self {
        LiveMemory {
            pid,
            model,
            mem: Mutex::new(None),
        }
    }

    /// The process.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    fn mem_file(&self, reopen: bool) -> std::io::Result<MutexGuard<'_, Option<File>>> {
        let mut guard = self.mem.lock().unwrap_or_else(|e| e.into_inner());
        if reopen || guard.is_none() {
            // Reopened after an exec: the old descriptor reads EOF.
            *guard = Some(
                std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(format!("/proc/{}/mem", self.pid))
                    .or_else(|_| File::open(format!("/proc/{}/mem", self.pid)))?,
            );
        }
        Ok(guard)
    }

    /// `pread` on `/proc/PID/mem`: the fallback when `process_vm_readv` cannot read a range.
    fn pread(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        let len = buf.len() as u64;
        let unreadable = |fault| TargetError::Unreadable {
            address,
            len,
            fault,
        };
        for reopen in [false, true] {
            let guard = self
                .mem_file(reopen)
                .map_err(|e| unreadable(fault(Errno::from_raw(e.raw_os_error().unwrap_or(0)))))?;
            let Some(file) = guard.as_ref() else { break };
            match file.read_at(buf, address) {
                Ok(0) if !reopen => continue,
                Ok(0) => break,
                Ok(n) => return Ok(n),
                Err(e) => {
                    return Err(unreadable(fault(Errno::from_raw(
                        e.raw_os_error().unwrap_or(0),
                    ))));
                }
            }
        }
        Err(unreadable(Fault::Unmapped))
    }

    /// Scatter/gather read: fills each `(address, buffer)` request as far as the target allows,
    /// with as few system calls as possible (up to 1024 ranges each). Returns, per request, the
    /// bytes read (fewer than asked: the range ran into unreadable memory) or why not even the
    /// first byte could be read.
    pub fn read_many(&self, requests: &mut [(u64, &mut [u8])]) -> Vec<Result<usize>> {
        let mut results: Vec<Result<usize>> = Vec::with_capacity(requests.len());
        let mut i = 0;
        while i < requests.len() {
            let end = (i + IOV_MAX).min(requests.len());
            let batch = requests.get_mut(i..end).unwrap_or_default();
            let remote: Vec<RemoteIoVec> = batch
                .iter()
                .map(|(a, b)| RemoteIoVec {
                    base: *a as usize,
                    len: b.len(),
                })
                .collect();
            let mut local: Vec<IoSliceMut<'_>> =
                batch.iter_mut().map(|(_, b)| IoSliceMut::new(b)).collect();
            let got = match process_vm_readv(Pid::from_raw(self.pid as i32), &mut local, &remote) {
                Ok(n) => n,
                Err(Errno::ESRCH) => {
                    results.extend(batch.iter().map(|(a, b)| {
                        Err(TargetError::Unreadable {
                            address: *a,
                            len: b.len() as u64,
                            fault: Fault::ProcessGone,
                        })
                    }));
                    i = end;
                    continue;
                }
                Err(_) => 0,
            };
            drop(local);
            // The kernel fills iovecs in order and stops at the first one it cannot complete.
            let mut left = got;
            let mut stopped = None;
            for (k, (_, buf)) in batch.iter().enumerate() {
                if left >= buf.len() {
                    left -= buf.len();
                    results.push(Ok(buf.len()));
                } else {
                    stopped = Some((k, left));
                    break;
                }
            }
            let Some((k, partial)) = stopped else {
                i = end;
                continue;
            };
            // The request where it stopped: keep what came, then let /proc/PID/mem try the rest
            // (it can read some mappings process_vm_readv cannot).
            if let Some((address, buf)) = batch.get_mut(k) {
                let rest = buf.get_mut(partial..).unwrap_or_default();
                let more = if rest.is_empty() {
                    Ok(0)
                } else {
                    self.pread(address.wrapping_add(partial as u64), rest)
                };
                results.push(match (partial, more) {
                    (p, Ok(n)) if p + n > 0 => Ok(p + n),
                    (0, Err(e)) => Err(e),
                    (p, _) => Ok(p),
                });
            }
            i += k + 1;
        }
        results
    }
}

impl Memory for LiveMemory {
    fn data_model(&self) -> DataModel {
        self.model
    }

    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let len = buf.len() as u64;
        match self.read_many(&mut [(address, buf)]).pop() {
            Some(Ok(0)) | None => Err(TargetError::Unreadable {
                address,
                len,
                fault: Fault::Unmapped,
            }),
            Some(r) => r,
        }
    }

    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        let unwritable = |fault| TargetError::Unwritable {
            address,
            len: data.len() as u64,
            fault,
        };
        let os = |e: std::io::Error| fault(Errno::from_raw(e.raw_os_error().unwrap_or(0)));
        let mut last = Fault::Unmapped;
        // A descriptor opened before the target exec'd no longer reaches its memory: on
        // failure, reopen once and retry.
        for reopen in [false, true] {
            let guard = self.mem_file(reopen).map_err(|e| unwritable(os(e)))?;
            let file = guard.as_ref().ok_or_else(|| unwritable(Fault::Unmapped))?;
            match file.write_at(data, address) {
                Ok(n) if n == data.len() => return Ok(()),
                Ok(_) => last = Fault::Unmapped,
                Err(e) => last = os(e),
            }
            if matches!(last, Fault::ProcessGone) {
                break;
            }
        }
        Err(unwritable(last))
    }

    /// Batched: distinct addresses only, each read as a window, windows that are close
    /// coalesced into ranges, all ranges fetched with [`LiveMemory::read_many`]. Strings longer
    /// than their window, or cut by unreadable memory, are finished one by one.
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> StringBatch {
        let window = STRING_WINDOW.min(max_len.saturating_add(1));
        let mut unique: Vec<u64> = addresses.to_vec();
        unique.sort_unstable();
        unique.dedup();
        // Coalesce windows into ranges [start, end).
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &a in &unique {
            let w_end = a.saturating_add(window);
            match ranges.last_mut() {
                Some((s, e)) if a <= e.saturating_add(COALESCE_GAP) && w_end - *s <= MAX_RANGE => {
                    *e = (*e).max(w_end);
                }
                _ => ranges.push((a, w_end)),
            }
        }
        let mut buffers: Vec<Vec<u8>> = ranges
            .iter()
            .map(|(s, e)| vec![0u8; (e - s) as usize])
            .collect();
        let counts = {
            let mut requests: Vec<(u64, &mut [u8])> = ranges
                .iter()
                .zip(buffers.iter_mut())
                .map(|((s, _), b)| (*s, b.as_mut_slice()))
                .collect();
            self.read_many(&mut requests)
        };
        // Each distinct address's string, from its range (both are in address order): a span
        // into the range's buffer, or, when the window did not hold it all, a precise read.
        enum Found {
            Span(usize, usize, usize),
            Owned(Result<Vec<u8>>),
        }
        let bound = usize::try_from(max_len)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let mut r = 0;
        let found: Vec<Found> = unique
            .iter()
            .map(|&a| {
                while ranges.get(r).is_some_and(|(_, e)| a >= *e) {
                    r += 1;
                }
                let readable = match counts.get(r) {
                    Some(Ok(n)) => *n,
                    _ => 0,
                };
                let off = ranges.get(r).map_or(0, |(s, _)| (a - s) as usize);
                let bytes = buffers
                    .get(r)
                    .and_then(|b| b.get(off..readable))
                    .unwrap_or_default();
                match bytes.iter().take(bound).position(|&b| b == 0) {
                    Some(n) => Found::Span(r, off, n),
                    None => Found::Owned(crate::ext::read_c_string_by_chunks(self, a, max_len)),
                }
            })
            .collect();
        let mut batch = StringBatch::new();
        let ids: Vec<usize> = buffers.into_iter().map(|b| batch.add_buffer(b)).collect();
        let push = |batch: &mut StringBatch, f: &Found, a: u64| match f {
            Found::Span(r, start, len) => {
                batch.push_in(ids.get(*r).copied().unwrap_or(usize::MAX), *start, *len, a)
            }
            Found::Owned(result) => batch.push_result(result.clone(), a),
        };
        if addresses.len() == unique.len() && addresses.windows(2).all(|w| w[0] < w[1]) {
            for (f, &a) in found.iter().zip(&unique) {
                push(&mut batch, f, a);
            }
        } else {
            for &a in addresses {
                match unique.binary_search(&a).ok().and_then(|i| found.get(i)) {
                    Some(f) => push(&mut batch, f, a),
                    None => {
                        batch.push_result(crate::ext::read_c_string_by_chunks(self, a, max_len), a)
                    }
                }
            }
        }
        batch
    }
}
