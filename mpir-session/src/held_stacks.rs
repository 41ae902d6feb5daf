//! The stacks of held ranks, read at the instant their queues are: a live rank's threads are
//! already stopped by the hold, so their registers come from the hold's tracer and their
//! stacks straight from memory (no second stop); a core's from its `NT_PRSTATUS` notes. The
//! deadlock analysis joins them to the queues (which MPI call each rank waits in).
//!
//! Also the unwinder set-up every stack read of the session shares (`stacks.rs` too): one per
//! process, its vDSO added, the session's symbol cache behind it.

use mpir_target::corefile::CoreTarget;
use mpir_target::live::LiveTarget;
use mpir_target::unwind::{SymbolCache, UnwindOptions, Unwinder, live_vdso_address, vdso_address};
use mpir_types::stacks::{PythonRead, PythonView, ThreadStack, Truncation};

use crate::hold::{Frozen, Held};
use crate::python;

/// The unwinder of live process `pid`, with its vDSO (read from the process's auxiliary
/// vector) when it can be read.
pub(crate) fn live_unwinder<'a>(
    target: &'a LiveTarget,
    pid: u32,
    options: UnwindOptions,
    symbols: &SymbolCache,
) -> Unwinder<'a> {
    let mut unwinder = Unwinder::with_cache(target.images(), options, symbols);
    let word = usize::from(target.images().data_model().sizes().pointer);
    if let Some(a) = live_vdso_address(pid, word) {
        let _ = unwinder.add_vdso(target.memory(), a);
    }
    unwinder
}

/// The unwinder of a core file, with the vDSO its `NT_AUXV` names when the core holds it.
pub(crate) fn core_unwinder<'a>(
    target: &'a CoreTarget,
    options: UnwindOptions,
    symbols: &SymbolCache,
) -> Unwinder<'a> {
    let mut unwinder = Unwinder::with_cache(target.images(), options, symbols);
    if let Some(a) = vdso_address(target.core().auxv()) {
        let _ = unwinder.add_vdso(target, a);
    }
    unwinder
}

/// Every thread's stack in a core (a thread the core has no registers for says so), with its
/// Python frames as `python` shows them (`None`: not read), and what was read of the
/// interpreter.
pub(crate) fn core_stacks(
    target: &CoreTarget,
    unwinder: &Unwinder<'_>,
    python: Option<PythonView>,
) -> (Vec<ThreadStack>, Option<PythonRead>) {
    let threads: Vec<ThreadStack> = target
        .core()
        .threads()
        .iter()
        .map(|t| match &t.registers {
            Some(r) => unwinder.thread_stack(t.tid, &unwinder.unwind(target, r)),
            None => ThreadStack::new(t.tid, Vec::new()).with_truncation(Truncation::Other(
                "no registers in the core for this thread".into(),
            )),
        })
        .collect();
    let Some(view) = python else {
        return (threads, None);
    };
    let found = python::find(target);
    let ids = python::thread_ids(
        target
            .core()
            .threads()
            .iter()
            .map(|t| (t.tid, t.registers.as_ref())),
    );
    let read = python::read(found, target, &ids);
    python::merge(threads, found, read, view)
}

impl Held<'_> {
    /// The stacks of every thread of held rank `index`, innermost frame first; `None` when
    /// the rank is not held (remote, refused, exited…) or no tracer holds it. A thread whose
    /// registers cannot be read has no frames and says why.
    pub(crate) fn stacks_of(
        &self,
        index: usize,
        symbols: &SymbolCache,
        options: UnwindOptions,
    ) -> Option<Vec<ThreadStack>> {
        let rank = self.ranks().get(index)?;
        rank.target().ok()?;
        match rank.frozen.as_ref()? {
            Frozen::Live(target) => {
                let tracer = self.control.as_ref()?.tracer()?;
                let pid = rank.pid;
                let tids = threads(pid);
                if tids.is_empty() {
                    return None;
                }
                let registers = tracer.registers_many(pid, &tids).ok()?;
                let unwinder = live_unwinder(target, pid, options, symbols);
                let ids = python::thread_ids(
                    tids.iter()
                        .zip(&registers)
                        .map(|(&tid, r)| (tid, r.as_ref().ok())),
                );
                let threads = tids
                    .iter()
                    .zip(registers)
                    .map(|(&tid, regs)| match regs {
                        Ok(r) => unwinder.thread_stack(tid, &unwinder.unwind(target.memory(), &r)),
                        Err(e) => ThreadStack::new(tid, Vec::new()).with_truncation(
                            Truncation::Other(format!("registers unreadable: {e}")),
                        ),
                    })
                    .collect();
                // The rank is held: its interpreter's frames stand still as its stacks do.
                let found = python::find(target);
                let read = python::read(found, target.memory(), &ids);
                Some(python::merge(threads, found, read, PythonView::Interleaved).0)
            }
            Frozen::Coop(c) => {
                // Not stopped: each thread copies its own registers and stack when asked.
                let snap = c.memory.with_client(|client| client.threads()).ok()?;
                let unwinder = live_unwinder(&c.target, rank.pid, options, symbols);
                let threads = unwinder.thread_stacks(&snap);
                let ids = python::thread_ids(
                    snap.threads
                        .iter()
                        .map(|t| (t.tid, t.registers.as_ref().ok())),
                );
                let found = python::find(&c.target);
                let read = python::read(found, c.target.memory(), &ids);
                Some(python::merge(threads, found, read, PythonView::Interleaved).0)
            }
            Frozen::Core(target) => Some(
                core_stacks(
                    target,
                    &core_unwinder(target, options, symbols),
                    Some(PythonView::Interleaved),
                )
                .0,
            ),
        }
    }
}

/// The threads of process `pid` (all stopped while it is held), main thread first.
fn threads(pid: u32) -> Vec<u32> {
    let mut tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_by_key(|&t| (t != pid, t));
    tids
}
