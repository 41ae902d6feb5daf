//! The walk: one frame after another, CFI first, then the frame pointer, then a scan.

use std::borrow::Cow;
use std::sync::{Arc, OnceLock};

use super::cache::{CachedImage, ImageInfo, SymbolCache};
use super::cfi::{Context, ImageCfi, Step};
use super::functions::Functions;
use super::regs::Registers;
use super::snapshot::ProcessSnapshot;
use super::symbols::FunctionIndex;
use super::{EndReason, Frame, Stack, Trust, UnwindOptions};
use crate::debuginfo::{ElfFile, Image, ProcessImages};
use crate::traits::Memory;

/// An image read from the target's memory rather than a file: the vDSO.
#[derive(Debug)]
pub(super) struct MemoryImage {
    pub(super) name: Arc<str>,
    bias: u64,
    elf: ElfFile,
    info: ImageInfo,
}

/// Where a pc is: a file image of [`ProcessImages`], or an image read from memory.
#[derive(Clone, Copy)]
pub(super) enum Module<'u> {
    /// A file image, its path, and what the cache knows of it.
    File(&'u Arc<Image>, &'u Arc<str>, &'u CachedImage),
    /// The vDSO.
    Memory(&'u MemoryImage),
}

/// Bytes of the vDSO read at most (it is one or two pages).
const MAX_VDSO: usize = 64 << 10;

/// The auxiliary vector's `AT_SYSINFO_EHDR`: where the kernel mapped the vDSO.
pub const AT_SYSINFO_EHDR: u64 = 33;

/// `AT_SYSINFO_EHDR` in an auxiliary vector of (type, value) pairs, as
/// [`CoreFile::auxv`](crate::corefile::CoreFile::auxv) gives it.
pub fn vdso_address(auxv: &[(u64, u64)]) -> Option<u64> {
    auxv.iter()
        .find(|(k, _)| *k == AT_SYSINFO_EHDR)
        .map(|(_, v)| *v)
        .filter(|v| *v != 0)
}

/// `AT_SYSINFO_EHDR` of live process `pid`, from `/proc/PID/auxv` in `word`-byte (4 or 8)
/// native-endian words.
pub fn live_vdso_address(pid: u32, word: usize) -> Option<u64> {
    if word != 4 && word != 8 {
        return None;
    }
    let bytes = std::fs::read(format!("/proc/{pid}/auxv")).ok()?;
    let get = |b: &[u8]| -> Option<u64> {
        Some(match word {
            4 => u64::from(u32::from_ne_bytes(b.try_into().ok()?)),
            _ => u64::from_ne_bytes(b.try_into().ok()?),
        })
    };
    let pairs: Vec<(u64, u64)> = bytes
        .chunks_exact(2 * word)
        .map_while(|kv| Some((get(kv.get(..word)?)?, get(kv.get(word..)?)?)))
        .take_while(|(k, _)| *k != 0)
        .collect();
    vdso_address(&pairs)
}

/// Unwinds the threads of one process against its images, and symbolises their stacks.
/// Reusable for every thread of the process (and every sample): the CFI and symbol tables of
/// an image are read on first use, once per build-id in its [`SymbolCache`] (shared with the
/// unwinders of other processes when made [`with_cache`](Unwinder::with_cache)).
#[derive(Debug)]
pub struct Unwinder<'a> {
    pub(super) images: &'a ProcessImages,
    options: UnwindOptions,
    pub(super) cache: SymbolCache,
    info: Vec<OnceLock<(Arc<CachedImage>, Arc<str>)>>,
    /// (start, end, image index) of every loadable segment of every image, by start address.
    ranges: Vec<(u64, u64, usize)>,
    vdso: Option<MemoryImage>,
}

/// A caller found by one method: its registers, how it was found, and whether its pc is exact
/// (interrupted by a signal) rather than a return address.
type Caller = (Registers, Trust, bool);

impl<'a> Unwinder<'a> {
    /// An unwinder over `images` with default limits.
    pub fn new(images: &'a ProcessImages) -> Self {
        Unwinder::with_options(images, UnwindOptions::default())
    }

    /// An unwinder over `images` with `options` and a cache of its own.
    pub fn with_options(images: &'a ProcessImages, options: UnwindOptions) -> Self {
        Unwinder::with_cache(images, options, &SymbolCache::new())
    }

    /// An unwinder over `images` with `options`, taking what it knows of each image from
    /// `cache` (and adding to it): the unwinders of many processes that share one cache parse
    /// each distinct image once.
    pub fn with_cache(
        images: &'a ProcessImages,
        options: UnwindOptions,
        cache: &SymbolCache,
    ) -> Self {
        let mut ranges: Vec<(u64, u64, usize)> = images
            .images()
            .iter()
            .enumerate()
            .flat_map(|(i, img)| {
                let bias = img.bias();
                img.elf().segments().iter().filter_map(move |s| {
                    let start = s.vaddr.wrapping_add(bias);
                    let end = start.checked_add(s.mem_size)?;
                    (s.mem_size > 0).then_some((start, end, i))
                })
            })
            .collect();
        // By start; at one start, the earlier image first (it wins, as in a linear search).
        ranges.sort_unstable_by_key(|r| (r.0, r.2));
        Unwinder {
            images,
            options,
            cache: cache.clone(),
            info: images.images().iter().map(|_| OnceLock::new()).collect(),
            ranges,
            vdso: None,
        }
    }

    /// The cache this unwinder takes images from.
    pub fn cache(&self) -> &SymbolCache {
        &self.cache
    }

    /// Adds the vDSO, read from `memory` at `address` (the auxiliary vector's
    /// [`AT_SYSINFO_EHDR`]): the kernel's signal trampolines and i386's `__kernel_vsyscall`,
    /// through which every i386 system call goes, live there and have CFI. A vDSO that cannot
    /// be read or parsed is left out (its frames fall back to the frame pointer or a scan);
    /// the reason is returned.
    pub fn add_vdso(&mut self, memory: &dyn Memory, address: u64) -> Result<(), String> {
        let mut bytes = vec![0u8; MAX_VDSO];
        let mut got = 0;
        while let Some(rest) = bytes.get_mut(got..).filter(|r| !r.is_empty()) {
            match memory.read_partial(address.wrapping_add(got as u64), rest) {
                Ok(n) if n > 0 => got += n,
                _ => break,
            }
        }
        bytes.truncate(got);
        let data: Arc<[u8]> = Arc::from(bytes);
        let elf = ElfFile::parse(std::path::Path::new("[vdso]"), Arc::clone(&data))
            .map_err(|e| e.to_string())?;
        let bias = elf
            .bias_for_mapping(address, 0)
            .ok_or_else(|| "the vDSO has no loadable segment at offset 0".to_string())?;
        let info = ImageInfo {
            cfi: ImageCfi::load(Some(&data[..]), None),
            functions: Functions::made(FunctionIndex::build(
                [&elf],
                None::<super::symbols::Code<'_, &[u8]>>,
            )),
        };
        self.vdso = Some(MemoryImage {
            name: Arc::from("[vdso]"),
            bias,
            elf,
            info,
        });
        Ok(())
    }

    /// The module mapping run-time address `pc`, its load bias and what is known of it.
    pub(super) fn module_for(&self, pc: u64) -> Option<(Module<'_>, u64, &ImageInfo)> {
        let covers = |elf: &ElfFile, bias: u64| {
            let link = pc.wrapping_sub(bias);
            elf.segments()
                .iter()
                .any(|s| link >= s.vaddr && link - s.vaddr < s.mem_size)
        };
        if let Some(v) = &self.vdso
            && covers(&v.elf, v.bias)
        {
            return Some((Module::Memory(v), v.bias, &v.info));
        }
        let (i, image) = self.image_for(pc)?;
        let (cached, name) = self.info(i, image)?;
        Some((
            Module::File(image, name, cached),
            image.bias(),
            &cached.info,
        ))
    }

    /// The image mapping run-time address `pc`, with its index: a binary search of the
    /// segments by start address (segments of different images do not overlap in a real
    /// process; where they do, the nearest few starts below `pc` are tried, earliest image
    /// first).
    fn image_for(&self, pc: u64) -> Option<(usize, &'a Arc<Image>)> {
        let below = self.ranges.partition_point(|r| r.0 <= pc);
        let images = self.images.images();
        self.ranges
            .get(below.saturating_sub(4)..below)?
            .iter()
            .filter(|r| pc < r.1)
            .map(|r| r.2)
            .min()
            .and_then(|i| Some((i, images.get(i)?)))
    }

    fn info(&self, index: usize, image: &Image) -> Option<&(Arc<CachedImage>, Arc<str>)> {
        let slot = self.info.get(index)?;
        Some(slot.get_or_init(|| {
            (
                self.cache.image(image),
                Arc::from(image.path().display().to_string()),
            )
        }))
    }

    /// Whether `ra` (a return address) points into code of a known image: covered by its CFI
    /// or inside one of its functions.
    fn is_code(&self, ra: u64) -> bool {
        let at = ra.wrapping_sub(1);
        let Some((_, bias, info)) = self.module_for(at) else {
            return false;
        };
        let link = at.wrapping_sub(bias);
        info.functions.lookup(link).is_some() || info.cfi.covers(link)
    }

    /// The stacks of every thread of a [`ProcessSnapshot`] (unwound offline, from its copied
    /// stacks), in its order: a thread whose registers could not be read keeps that reason.
    pub fn unwind_snapshot(
        &self,
        snapshot: &ProcessSnapshot,
    ) -> Vec<(u32, std::result::Result<Stack, String>)> {
        snapshot
            .threads
            .iter()
            .map(|t| {
                let stack = t
                    .registers
                    .as_ref()
                    .map(|r| self.unwind(&snapshot.stacks, r))
                    .map_err(Clone::clone);
                (t.tid, stack)
            })
            .collect()
    }

    /// The stack of the thread whose registers are `regs`, reading its stack from `memory`.
    pub fn unwind(&self, memory: &dyn Memory, regs: &Registers) -> Stack {
        // Most stacks are shallow; a deep one grows from here.
        let mut frames = Vec::with_capacity(self.options.max_frames.min(64));
        let mut regs = *regs;
        let mut trust = Trust::Context;
        let mut exact_pc = true;
        let mut ctx = Context::new();
        let end = loop {
            if frames.len() >= self.options.max_frames {
                break EndReason::MaxFrames;
            }
            let (Some(pc), Some(sp)) = (regs.pc(), regs.sp()) else {
                break EndReason::MissingRegisters;
            };
            let lookup = if exact_pc { pc } else { pc.wrapping_sub(1) };
            let mut frame = Frame {
                pc,
                sp,
                cfa: None,
                trust,
                module: None,
                module_offset: None,
                function: None,
                function_offset: None,
                signal_frame: false,
            };
            let mut caller: Option<Caller> = None;
            let mut failure: Cow<'static, str> = Cow::Borrowed("the pc is in no known image");
            let mut unreadable = false;
            if let Some((module, bias, info)) = self.module_for(lookup) {
                let link = lookup.wrapping_sub(bias);
                frame.module = Some(match module {
                    Module::File(_, name, _) => Arc::clone(name),
                    Module::Memory(m) => Arc::clone(&m.name),
                });
                frame.module_offset = Some(pc.wrapping_sub(bias));
                if let Some((name, offset)) = info.functions.lookup(link) {
                    frame.function = Some(name);
                    frame.function_offset = Some(offset + (pc - lookup));
                } else if let Some((name, 0)) = info.functions.lookup(pc.wrapping_sub(bias)) {
                    // A "return address" at the very start of a function: a signal trampoline,
                    // which a handler returns into at its first byte (the byte before, in its
                    // FDE but not its symbol, has no name).
                    frame.function = Some(name);
                    frame.function_offset = Some(0);
                }
                let step = if self.options.cfi {
                    info.cfi.step(&mut ctx, memory, &regs, link)
                } else {
                    Step::NoInfo
                };
                match step {
                    Step::Caller {
                        regs: c,
                        cfa,
                        signal_frame,
                    } => {
                        frame.cfa = Some(cfa);
                        frame.signal_frame = signal_frame;
                        if c.pc().is_none() {
                            frames.push(frame);
                            break EndReason::Outermost;
                        }
                        caller = Some((c, Trust::Cfi, signal_frame));
                    }
                    Step::Failed(e) => failure = Cow::Owned(e),
                    Step::Unreadable(e) => {
                        failure = Cow::Owned(e);
                        unreadable = true;
                    }
                    Step::NoInfo => failure = Cow::Borrowed("no CFI covers the pc"),
                }
            }
            let is_restorer = regs.arch == super::Arch::X86_64
                && frame.function.as_deref() == Some("__restore_rt");
            if caller.is_none() && is_restorer {
                frame.signal_frame = true;
                caller = signal_context(memory, &regs);
            }
            frames.push(frame);
            let caller = caller
                .or_else(|| self.frame_pointer(memory, &regs))
                .or_else(|| self.scan(memory, &regs));
            let Some((next, next_trust, next_exact)) = caller else {
                let mut word = [0u8; 1];
                break match memory.read_exact(sp, &mut word) {
                    Err(e) => EndReason::Unreadable {
                        reason: format!("{failure}; the stack pointer {sp:#x}: {e}"),
                    },
                    Ok(()) if unreadable => EndReason::Unreadable {
                        reason: format!(
                            "{failure}; no frame pointer chain; nothing found by the scan"
                        ),
                    },
                    Ok(()) => EndReason::NoCaller {
                        reason: format!(
                            "{failure}; no frame pointer chain; nothing found by the scan"
                        ),
                    },
                };
            };
            match (next.pc(), next.sp()) {
                (Some(0), _) => break EndReason::Outermost,
                (_, Some(next_sp)) if next_sp <= sp => {
                    break EndReason::NoProgress { sp, next_sp };
                }
                (_, None) | (None, _) => break EndReason::MissingRegisters,
                _ => {}
            }
            regs = next;
            trust = next_trust;
            exact_pc = next_exact;
        };
        Stack { frames, end }
    }

    fn read_word(&self, memory: &dyn Memory, address: u64, word: u64) -> Option<u64> {
        read_word(memory, address, word)
    }

    /// The caller by the frame-pointer chain: saved fp at `[fp]`, return address above it.
    fn frame_pointer(&self, memory: &dyn Memory, regs: &Registers) -> Option<Caller> {
        let arch = regs.arch;
        let word = arch.word_size();
        let (fp, sp) = (regs.fp()?, regs.sp()?);
        if fp < sp || fp % word != 0 {
            return None;
        }
        let saved_fp = self.read_word(memory, fp, word)?;
        let ra = self.read_word(memory, fp.checked_add(word)?, word)?;
        if !self.is_code(ra) {
            return None;
        }
        let mut caller = *regs;
        caller.set(arch.pc_reg(), ra);
        caller.set(arch.sp_reg(), fp.checked_add(2 * word)?);
        caller.set(arch.fp_reg(), saved_fp);
        Some((caller, Trust::FramePointer, false))
    }

    /// The caller by scanning the stack for a return address into code, bounded.
    fn scan(&self, memory: &dyn Memory, regs: &Registers) -> Option<Caller> {
        if !self.options.scan || self.options.max_scan_words == 0 {
            return None;
        }
        let arch = regs.arch;
        let word = arch.word_size();
        let sp = regs.sp()?;
        let mut buf = vec![0u8; self.options.max_scan_words.saturating_mul(word as usize)];
        let got = memory.read_partial(sp, &mut buf).ok()?;
        let little = memory.data_model().byte_order() == mpir_types::ByteOrder::Little;
        for (i, chunk) in buf.get(..got)?.chunks_exact(word as usize).enumerate() {
            let mut w = [0u8; 8];
            let value = if little {
                w.get_mut(..chunk.len())?.copy_from_slice(chunk);
                u64::from_le_bytes(w)
            } else {
                w.get_mut(8 - chunk.len()..)?.copy_from_slice(chunk);
                u64::from_be_bytes(w)
            };
            if value > 0x1000 && self.is_code(value) {
                let mut caller = *regs;
                caller.set(arch.pc_reg(), value);
                caller.set(arch.sp_reg(), sp + (i as u64 + 1) * word);
                return Some((caller, Trust::Scan, false));
            }
        }
        None
    }
}

fn read_word(memory: &dyn Memory, address: u64, word: u64) -> Option<u64> {
    let mut buf = [0u8; 8];
    memory
        .read_exact(address, buf.get_mut(..word as usize)?)
        .ok()?;
    Some(match memory.data_model().byte_order() {
        mpir_types::ByteOrder::Little => u64::from_le_bytes(buf),
        mpir_types::ByteOrder::Big => u64::from_be_bytes(buf) >> (64 - 8 * word),
    })
}

/// The interrupted registers, from the `ucontext` at the stack pointer of x86_64's
/// `__restore_rt` (the handler's `ret` popped the frame's return address, leaving the stack
/// pointer at `uc`): `uc_flags`, `uc_link` and the 24-byte `uc_stack` precede
/// `uc_mcontext.gregs`, whose order is r8–r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip.
fn signal_context(memory: &dyn Memory, regs: &Registers) -> Option<Caller> {
    const GREGS: u64 = 40;
    // (index in gregs, DWARF number)
    const MAP: [(u64, u16); 17] = [
        (0, 8),
        (1, 9),
        (2, 10),
        (3, 11),
        (4, 12),
        (5, 13),
        (6, 14),
        (7, 15),
        (8, 5),
        (9, 4),
        (10, 6),
        (11, 3),
        (12, 1),
        (13, 0),
        (14, 2),
        (15, 7),
        (16, 16),
    ];
    let sp = regs.sp()?;
    let mut caller = Registers::empty(regs.arch);
    for (i, dwarf) in MAP {
        let at = sp.checked_add(GREGS + 8 * i)?;
        caller.set(dwarf, read_word(memory, at, 8)?);
    }
    Some((caller, Trust::SignalContext, true))
}
