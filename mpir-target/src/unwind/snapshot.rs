//! The live fast path: stop a process, copy each thread's registers and the live part of its
//! stack (from the stack pointer to the top of its mapping) in one batched read, let the process
//! go, and unwind offline from the copy. The process is stopped only for the copy; the time is
//! measured and reported.

use std::time::{Duration, Instant};

use mpir_types::DataModel;

use super::regs::Registers;
use crate::error::{Fault, Result, TargetError};
use crate::live::LiveMemory;
use crate::live::tracer::Tracer;
use crate::traits::Memory;

/// Bytes below the stack pointer copied as well: x86_64's red zone, which leaf functions use
/// without moving the stack pointer.
const RED_ZONE: u64 = 128;

/// Limits of a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct SnapshotOptions {
    /// Stack bytes copied per thread at most (default 1 MiB): a deeper stack is cut, and its
    /// walk ends with [`EndReason::Unreadable`](super::EndReason::Unreadable) there.
    pub max_stack_bytes: u64,
    /// Stack bytes copied for the whole process at most (default 64 MiB): a process of
    /// thousands of threads must not make the copy unbounded; threads past it get a shorter
    /// copy, or none (their walk ends as unreadable).
    pub max_total_bytes: u64,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions {
            max_stack_bytes: 1 << 20,
            max_total_bytes: 64 << 20,
        }
    }
}

impl SnapshotOptions {
    /// With another limit for the whole process.
    pub fn with_max_total_bytes(mut self, max_total_bytes: u64) -> Self {
        self.max_total_bytes = max_total_bytes;
        self
    }

    /// With another per-thread stack limit.
    pub fn with_max_stack_bytes(mut self, max_stack_bytes: u64) -> Self {
        self.max_stack_bytes = max_stack_bytes;
        self
    }
}

/// Stack bytes copied from a process: a [`Memory`] that serves the copied ranges only (reading
/// anything else is [`TargetError::Unreadable`]), for unwinding after the process has gone on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackCopy {
    model: DataModel,
    /// (start address, bytes), one per thread.
    ranges: Vec<(u64, Vec<u8>)>,
}

impl StackCopy {
    /// Copied ranges of a target with data model `model`.
    pub fn new(model: DataModel, ranges: Vec<(u64, Vec<u8>)>) -> Self {
        StackCopy { model, ranges }
    }

    /// Total bytes held.
    pub fn len(&self) -> u64 {
        self.ranges.iter().map(|(_, b)| b.len() as u64).sum()
    }

    /// Whether nothing was copied.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Memory for StackCopy {
    fn data_model(&self) -> DataModel {
        self.model
    }

    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        for (start, bytes) in &self.ranges {
            let Some(off) = address.checked_sub(*start) else {
                continue;
            };
            if let Some(src) = usize::try_from(off).ok().and_then(|o| bytes.get(o..))
                && !src.is_empty()
            {
                let n = src.len().min(buf.len());
                buf.get_mut(..n)
                    .unwrap_or_default()
                    .copy_from_slice(src.get(..n).unwrap_or_default());
                return Ok(n);
            }
        }
        Err(TargetError::Unreadable {
            address,
            len: buf.len() as u64,
            fault: Fault::Unmapped,
        })
    }

    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        Err(TargetError::Unwritable {
            address,
            len: data.len() as u64,
            fault: Fault::Unsupported,
        })
    }
}

/// One thread as copied.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadSnapshot {
    /// Thread id.
    pub tid: u32,
    /// Its registers, or why they could not be read.
    pub registers: std::result::Result<Registers, String>,
}

/// A process as copied: its threads' registers and stacks, and how long it was stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessSnapshot {
    /// Process id.
    pub pid: u32,
    /// Its threads, in the tracer's order.
    pub threads: Vec<ThreadSnapshot>,
    /// The copied stacks of every thread.
    pub stacks: StackCopy,
    /// From the request to stop the process until it was let go.
    pub stopped_for: Duration,
}

/// Readable, writable mappings of `pid` (where stacks live), from `/proc/PID/maps`.
fn writable_mappings(pid: u32) -> Vec<(u64, u64)> {
    let text = std::fs::read(format!("/proc/{pid}/maps")).unwrap_or_default();
    crate::debuginfo::writable_ranges(&text)
}

/// Attaches `tracer` to `pid` (every thread stopped), copies each thread's registers and the
/// live part of its stack in one batched read, and detaches: the process runs on while the
/// copy is unwound (with [`Unwinder::unwind`](super::Unwinder::unwind) on
/// [`ProcessSnapshot::stacks`]). The process must not already be traced.
pub fn snapshot_live(
    tracer: &Tracer,
    pid: u32,
    model: DataModel,
    options: &SnapshotOptions,
) -> Result<ProcessSnapshot> {
    // Before stopping anything: where the stacks may be.
    let mappings = writable_mappings(pid);
    snapshot(tracer, pid, model, options, &mappings, true, |_, _| ()).map(|(s, ())| s)
}

/// [`snapshot_live`] with the process's readable, writable mappings `(start, end)` already
/// known (e.g. [`ProcessImages::writable_mappings`](crate::debuginfo::ProcessImages::writable_mappings),
/// read with the images), so `/proc/PID/maps` is not read again for every snapshot. They only
/// bound how much of each stack is copied: a thread whose stack pointer is in none of them (a
/// thread started since, a main stack grown below its old start) makes the snapshot read the
/// map afresh, once, while the process is stopped.
pub fn snapshot_live_with_mappings(
    tracer: &Tracer,
    pid: u32,
    model: DataModel,
    options: &SnapshotOptions,
    mappings: &[(u64, u64)],
) -> Result<ProcessSnapshot> {
    snapshot(tracer, pid, model, options, mappings, false, |_, _| ()).map(|(s, ())| s)
}

/// [`snapshot_live_with_mappings`] that also runs `while_stopped` on the process's memory and
/// threads (their registers read) after the copy, before the process is let go: for reading
/// what moves while the process runs and lives outside its stacks (an interpreter's frames).
/// Its time counts in [`ProcessSnapshot::stopped_for`]; it is not run when the copy failed.
pub fn snapshot_live_while<T>(
    tracer: &Tracer,
    pid: u32,
    model: DataModel,
    options: &SnapshotOptions,
    mappings: &[(u64, u64)],
    while_stopped: impl FnOnce(&LiveMemory, &[ThreadSnapshot]) -> T,
) -> Result<(ProcessSnapshot, T)> {
    snapshot(tracer, pid, model, options, mappings, false, while_stopped)
}

/// The snapshot itself, `while_stopped` run on the copy before the process is let go;
/// `fresh` says `mappings` were just read (no second read for a stack pointer outside them).
fn snapshot<T>(
    tracer: &Tracer,
    pid: u32,
    model: DataModel,
    options: &SnapshotOptions,
    mappings: &[(u64, u64)],
    fresh: bool,
    while_stopped: impl FnOnce(&LiveMemory, &[ThreadSnapshot]) -> T,
) -> Result<(ProcessSnapshot, T)> {
    let memory = LiveMemory::new(pid, model);
    let start = Instant::now();
    let tids = tracer.attach(pid)?;
    let known = Mappings {
        known: mappings,
        fresh: fresh.then(Vec::new),
    };
    let copied =
        copy_stopped(tracer, &memory, pid, &tids, known, options).map(|(threads, stacks)| {
            let read = while_stopped(&memory, &threads);
            (threads, stacks, read)
        });
    let detached = tracer.detach(pid);
    let stopped_for = start.elapsed();
    let (threads, stacks, read) = copied?;
    detached?;
    let snap = ProcessSnapshot {
        pid,
        threads,
        stacks: StackCopy::new(model, stacks),
        stopped_for,
    };
    Ok((snap, read))
}

type Copied = (Vec<ThreadSnapshot>, Vec<(u64, Vec<u8>)>);

/// The writable mappings a snapshot bounds stacks with: those known, and the map read afresh
/// (at most once) when a stack pointer is outside them.
struct Mappings<'a> {
    known: &'a [(u64, u64)],
    fresh: Option<Vec<(u64, u64)>>,
}

impl Mappings<'_> {
    /// The end of the mapping holding `sp`, if any.
    fn end_of(&mut self, pid: u32, sp: u64) -> Option<u64> {
        let find = |m: &[(u64, u64)]| m.iter().find(|(a, b)| *a <= sp && sp < *b).map(|m| m.1);
        find(self.known).or_else(|| find(self.fresh.get_or_insert_with(|| writable_mappings(pid))))
    }
}

fn copy_stopped(
    tracer: &Tracer,
    memory: &LiveMemory,
    pid: u32,
    tids: &[u32],
    mut mappings: Mappings<'_>,
    options: &SnapshotOptions,
) -> Result<Copied> {
    let mut threads = Vec::with_capacity(tids.len());
    let mut buffers: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut total = 0u64;
    for (tid, regs) in tids.iter().zip(tracer.registers_many(pid, tids)?) {
        if let Ok(r) = &regs
            && let Some(sp) = r.sp()
        {
            let from = sp.saturating_sub(RED_ZONE);
            let end = mappings.end_of(pid, sp).unwrap_or(sp);
            let left = options.max_total_bytes.saturating_sub(total);
            let len = end
                .saturating_sub(from)
                .min(options.max_stack_bytes)
                .min(left);
            total += len;
            if len > 0 {
                buffers.push((from, vec![0u8; len as usize]));
            }
        }
        threads.push(ThreadSnapshot {
            tid: *tid,
            registers: regs.map_err(|e| e.to_string()),
        });
    }
    let mut requests: Vec<(u64, &mut [u8])> = buffers
        .iter_mut()
        .map(|(a, b)| (*a, b.as_mut_slice()))
        .collect();
    let results = memory.read_many(&mut requests);
    let stacks = buffers
        .into_iter()
        .zip(results)
        .filter_map(|((a, mut b), r)| {
            let n = r.ok()?;
            b.truncate(n);
            Some((a, b))
        })
        .collect();
    Ok((threads, stacks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_copy_serves_its_ranges_only() {
        let copy = StackCopy::new(
            DataModel::LP64,
            vec![(0x1000, vec![1, 2, 3, 4]), (0x2000, vec![9; 16])],
        );
        assert_eq!(copy.len(), 20);
        let mut buf = [0u8; 8];
        // A read running off the end of a range is short.
        assert_eq!(copy.read_partial(0x1002, &mut buf).unwrap(), 2);
        assert_eq!(&buf[..2], &[3, 4]);
        assert_eq!(copy.read_partial(0x2008, &mut buf).unwrap(), 8);
        assert_eq!(buf, [9; 8]);
        // Just past a range, before one, between two: unreadable.
        for address in [0x1004, 0xfff, 0x1800, u64::MAX] {
            assert!(
                matches!(
                    copy.read_partial(address, &mut buf),
                    Err(TargetError::Unreadable {
                        fault: Fault::Unmapped,
                        ..
                    })
                ),
                "{address:#x}"
            );
        }
        assert!(copy.read_exact(0x1002, &mut buf).is_err());
        assert_eq!(copy.read_partial(0x1000, &mut []).unwrap(), 0);
        assert!(copy.write(0x1000, &[0]).is_err());
    }
}
