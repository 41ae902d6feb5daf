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
/// Size of the scratch buffer that ranges are read into, many at a time, before their strings
/// are copied out (reused: a large job's string area is not faulted in anew per call).
const SCRATCH: u64 = 4 << 20;

/// Reads a process's memory on its behalf, when the kernel refuses this tool direct reads:
/// the process answers for itself (the cooperative channel, [`crate::live::coop`]).
pub trait RemoteMemory: std::fmt::Debug + Send + Sync {
    /// Reads up to `buf.len()` bytes at `address`: how many were read (fewer: the range ran
    /// into unreadable memory), or why not even the first byte.
    fn read_remote(&self, address: u64, buf: &mut [u8]) -> Result<usize>;
}

/// The memory of process `pid`.
#[derive(Debug)]
pub struct LiveMemory {
    pid: u32,
    model: DataModel,
    mem: Mutex<Option<File>>,
    /// Set: every read goes through the process itself instead.
    remote: Option<std::sync::Arc<dyn RemoteMemory>>,
}

/// The fault an `errno` from reading `pid` means; a refusal is diagnosed from `/proc`.
fn fault(pid: u32, e: Errno) -> Fault {
    match e {
        Errno::ESRCH => Fault::ProcessGone,
        Errno::EFAULT | Errno::EIO => Fault::Unmapped,
        Errno::EPERM | Errno::EACCES => Fault::Denied(super::access::diagnose(pid, e, false)),
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
            remote: None,
        }
    }

    /// The memory of `pid` as the process itself reads it for this tool (`remote`), for a
    /// process whose memory the kernel refuses this tool. Writes are refused.
    pub fn through(pid: u32, model: DataModel, remote: std::sync::Arc<dyn RemoteMemory>) -> Self {
        LiveMemory {
            remote: Some(remote),
            ..LiveMemory::new(pid, model)
        }
    }

    /// Whether reads go through the process itself ([`LiveMemory::through`]).
    pub fn is_remote(&self) -> bool {
        self.remote.is_some()
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
            let guard = self.mem_file(reopen).map_err(|e| {
                unreadable(fault(
                    self.pid,
                    Errno::from_raw(e.raw_os_error().unwrap_or(0)),
                ))
            })?;
            let Some(file) = guard.as_ref() else { break };
            match file.read_at(buf, address) {
                Ok(0) if !reopen => continue,
                Ok(0) => break,
                Ok(n) => return Ok(n),
                Err(e) => {
                    return Err(unreadable(fault(
                        self.pid,
                        Errno::from_raw(e.raw_os_error().unwrap_or(0)),
                    )));
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
        if let Some(remote) = &self.remote {
            return requests
                .iter_mut()
                .map(|(a, b)| remote.read_remote(*a, b))
                .collect();
        }
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
        if self.remote.is_some() {
            // The cooperative channel reads only: nothing is ever written into the process.
            return Err(unwritable(Fault::Unsupported));
        }
        let os =
            |e: std::io::Error| fault(self.pid, Errno::from_raw(e.raw_os_error().unwrap_or(0)));
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
    /// coalesced into ranges, ranges fetched many per system call into one reused scratch
    /// buffer, from which each string is copied into the batch's arena. Strings longer than
    /// their window, or cut by unreadable memory, are finished one by one.
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> StringBatch {
        let window = STRING_WINDOW.min(max_len.saturating_add(1));
        let in_order = addresses.windows(2).all(|w| w[0] < w[1]);
        let unique: std::borrow::Cow<'_, [u64]> = if in_order {
            addresses.into()
        } else {
            let mut v = addresses.to_vec();
            v.sort_unstable();
            v.dedup();
            v.into()
        };
        // Coalesce windows into ranges [start, end).
        let mut ranges: Vec<(u64, u64)> = Vec::new();
        for &a in unique.iter() {
            let w_end = a.saturating_add(window);
            match ranges.last_mut() {
                Some((s, e)) if a <= e.saturating_add(COALESCE_GAP) && w_end - *s <= MAX_RANGE => {
                    *e = (*e).max(w_end);
                }
                _ => ranges.push((a, w_end)),
            }
        }
        let bound = usize::try_from(max_len)
            .unwrap_or(usize::MAX)
            .saturating_add(1);
        let mut batch = StringBatch::with_capacity(unique.len(), unique.len().saturating_mul(16));
        let mut scratch: Vec<u8> = Vec::new();
        let mut next = 0; // index in `unique` of the next string to place
        let mut r = 0;
        while r < ranges.len() {
            // A group of ranges that fits the scratch buffer (at least one range).
            let mut end = r;
            let mut total = 0u64;
            while let Some((s, e)) = ranges.get(end) {
                if end > r && (total + (e - s) > SCRATCH || end - r >= IOV_MAX) {
                    break;
                }
                total += e - s;
                end += 1;
            }
            let group = ranges.get(r..end).unwrap_or_default();
            scratch.clear();
            scratch.resize(total as usize, 0);
            let counts = {
                let mut rest = scratch.as_mut_slice();
                let mut requests: Vec<(u64, &mut [u8])> = Vec::with_capacity(group.len());
                for &(s, e) in group {
                    let (head, tail) = rest.split_at_mut(((e - s) as usize).min(rest.len()));
                    requests.push((s, head));
                    rest = tail;
                }
                self.read_many(&mut requests)
            };
            let mut offset = 0usize;
            for (i, &(s, e)) in group.iter().enumerate() {
                let readable = match counts.get(i) {
                    Some(Ok(n)) => *n,
                    _ => 0,
                };
                let here = scratch.get(offset..offset + readable).unwrap_or_default();
                while let Some(&a) = unique.get(next).filter(|&&a| a < e) {
                    let bytes = here.get((a - s) as usize..).unwrap_or_default();
                    match bytes.iter().take(bound).position(|&b| b == 0) {
                        Some(n) => batch.push_owned(bytes.get(..n).unwrap_or_default(), a),
                        None => batch
                            .push_result(crate::ext::read_c_string_by_chunks(self, a, max_len), a),
                    }
                    next += 1;
                }
                offset += (e - s) as usize;
            }
            r = end;
        }
        if in_order {
            return batch;
        }
        let picks: Vec<usize> = addresses
            .iter()
            .map(|a| unique.binary_search(a).unwrap_or(usize::MAX))
            .collect();
        batch.select(picks, |k| addresses.get(k).copied().unwrap_or(0))
    }
}
