//! Physical frames of the unwinder into the one stack model ([`mpir_types::stacks`]): module and
//! link-time offset, the ELF name of the image that maps the pc, source file and line and the
//! functions inlined there from DWARF (addr2line), innermost first.

use std::sync::Arc;

use mpir_types::stacks::{Frame as StackFrame, SourceLocation, ThreadStack, Truncation};

use super::snapshot::ProcessSnapshot;
use super::walk::Module;
use super::{EndReason, Stack, SymbolCache, Unwinder};
use crate::debuginfo::ProcessImages;

/// The module name of a pc in no known image.
const UNKNOWN_MODULE: &str = "??";

/// The truncation a walk's end is, `None` for a complete stack.
pub fn truncation(end: &EndReason) -> Option<Truncation> {
    match end {
        EndReason::Outermost => None,
        EndReason::MaxFrames => Some(Truncation::FrameLimit),
        EndReason::NoProgress { .. } => Some(Truncation::Cycle),
        EndReason::Unreadable { .. } => Some(Truncation::UnreadableStack),
        EndReason::NoCaller { .. } => Some(Truncation::NoUnwindInfo),
        EndReason::MissingRegisters => Some(Truncation::Other(end.to_string())),
    }
}

impl Unwinder<'_> {
    /// The stack of thread `tid` in the stack model: each physical frame of `stack` becomes
    /// the functions inlined at its pc (innermost first, `inline` set, as gdb's `bt` shows
    /// them) followed by the function containing it. Names come from the ELF symbols of the
    /// image that maps the pc (for the physical frame) and from its DWARF (for inlined
    /// functions, and where no symbol covers the pc); source positions from its DWARF, found
    /// by the debug-file search. A return address is looked up at pc − 1 (inside the call),
    /// the innermost frame and a frame interrupted by a signal at the pc. Without symbols a
    /// frame is its module and link-time offset. The walk's end becomes
    /// [`ThreadStack::truncated`].
    pub fn thread_stack(&self, tid: u32, stack: &Stack) -> ThreadStack {
        let mut frames = Vec::with_capacity(stack.frames.len());
        let mut exact = true;
        for frame in &stack.frames {
            self.symbolize(frame, exact, &mut frames);
            // The next frame's pc is a return address unless this one is a signal trampoline.
            exact = frame.signal_frame;
        }
        let mut out = ThreadStack::new(tid, frames);
        out.truncated = truncation(&stack.end);
        out
    }

    /// Every thread of a [`ProcessSnapshot`], unwound offline and symbolised, in its order. A
    /// thread whose registers could not be read has no frames and that reason as its
    /// truncation.
    pub fn thread_stacks(&self, snapshot: &ProcessSnapshot) -> Vec<ThreadStack> {
        self.unwind_snapshot(snapshot)
            .into_iter()
            .map(|(tid, stack)| match stack {
                Ok(stack) => self.thread_stack(tid, &stack),
                Err(e) => ThreadStack::new(tid, Vec::new())
                    .with_truncation(Truncation::Other(format!("registers unreadable: {e}"))),
            })
            .collect()
    }

    fn symbolize(&self, frame: &super::Frame, exact: bool, out: &mut Vec<StackFrame>) {
        let probe = if exact {
            frame.pc
        } else {
            frame.pc.wrapping_sub(1)
        };
        let Some((module, bias, info)) = self.module_for(probe) else {
            out.push(StackFrame::new(UNKNOWN_MODULE, frame.pc, frame.trust));
            return;
        };
        let link = probe.wrapping_sub(bias);
        let offset = frame.pc.wrapping_sub(bias);
        let name: Arc<str> = match module {
            Module::File(_, name, _) => Arc::clone(name),
            Module::Memory(m) => Arc::clone(&m.name),
        };
        let elf_name = info
            .functions
            .lookup(link)
            .map(|(n, _)| n)
            .or_else(|| {
                // A signal trampoline's "return address" is its first byte.
                info.functions
                    .lookup(offset)
                    .filter(|(_, o)| *o == 0)
                    .map(|(n, _)| n)
            })
            .or_else(|| {
                // Code no symbol names, reached only through a jump stub (Intel's compilers).
                let body = info.cfi.fde_start(link)?;
                info.functions.stub_body(body, link).map(|(n, _)| n)
            });
        let sources = match module {
            Module::File(image, _, cached) => {
                cached.source_frames(link, image, self.images, &self.cache)
            }
            Module::Memory(_) => Arc::from([]),
        };
        let physical = || StackFrame::new(Arc::clone(&name), offset, frame.trust);
        let Some((outer, inlined)) = sources.split_last() else {
            let mut f = physical();
            f.symbol = elf_name;
            out.push(f);
            return;
        };
        for s in inlined {
            let mut f = physical().inlined();
            f.symbol = s.function.clone();
            f.location = s
                .location
                .as_ref()
                .map(|(file, line)| SourceLocation::new(Arc::clone(file), *line));
            out.push(f);
        }
        let mut f = physical();
        f.symbol = elf_name.or_else(|| outer.function.clone());
        f.location = outer
            .location
            .as_ref()
            .map(|(file, line)| SourceLocation::new(Arc::clone(file), *line));
        out.push(f);
    }
}

impl SymbolCache {
    /// [`Unwinder::thread_stack`] for a stack of a process whose images are `images`, with
    /// this cache. The vDSO is none of `images`: its frames are `??` here unless symbolised
    /// by the unwinder that walked them (after [`Unwinder::add_vdso`]).
    pub fn thread_stack(&self, images: &ProcessImages, tid: u32, stack: &Stack) -> ThreadStack {
        Unwinder::with_cache(images, super::UnwindOptions::default(), self).thread_stack(tid, stack)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_thread_without_registers_keeps_its_reason() {
        use super::super::snapshot::{StackCopy, ThreadSnapshot};
        use super::super::{Arch, Registers};
        use crate::debuginfo::DebugOptions;
        let images = ProcessImages::from_files(&[], DebugOptions::default()).unwrap();
        let unwinder = Unwinder::new(&images);
        let snapshot = ProcessSnapshot {
            pid: 10,
            threads: vec![
                ThreadSnapshot {
                    tid: 10,
                    registers: Ok(Registers::new(Arch::X86_64, 0x1234, 0x8000, 0)),
                },
                ThreadSnapshot {
                    tid: 11,
                    registers: Err("the thread exited".to_string()),
                },
            ],
            stacks: StackCopy::new(mpir_types::DataModel::LP64, Vec::new()),
            stopped_for: std::time::Duration::ZERO,
        };
        let stacks = unwinder.thread_stacks(&snapshot);
        assert_eq!(stacks.len(), 2);
        // A pc in no image: one frame, module unknown, the pc as its offset, cut short.
        assert_eq!(stacks[0].tid, 10);
        assert_eq!(stacks[0].frames.len(), 1);
        assert_eq!(&*stacks[0].frames[0].module, UNKNOWN_MODULE);
        assert_eq!(stacks[0].frames[0].offset, 0x1234);
        assert_eq!(stacks[0].frames[0].symbol, None);
        assert_eq!(stacks[0].truncated, Some(Truncation::UnreadableStack));
        assert_eq!(stacks[1].tid, 11);
        assert!(stacks[1].frames.is_empty());
        assert!(matches!(
            &stacks[1].truncated,
            Some(Truncation::Other(r)) if r.contains("the thread exited")
        ));
    }

    #[test]
    fn only_the_outermost_frame_is_a_complete_stack() {
        assert_eq!(truncation(&EndReason::Outermost), None);
        assert_eq!(
            truncation(&EndReason::MaxFrames),
            Some(Truncation::FrameLimit)
        );
        assert_eq!(
            truncation(&EndReason::NoProgress { sp: 2, next_sp: 1 }),
            Some(Truncation::Cycle)
        );
        assert_eq!(
            truncation(&EndReason::Unreadable { reason: "x".into() }),
            Some(Truncation::UnreadableStack)
        );
        assert_eq!(
            truncation(&EndReason::NoCaller { reason: "x".into() }),
            Some(Truncation::NoUnwindInfo)
        );
        assert!(matches!(
            truncation(&EndReason::MissingRegisters),
            Some(Truncation::Other(_))
        ));
    }
}
