//! The walk: one frame after another, CFI first, then the frame pointer, then a scan.

use std::sync::{Arc, OnceLock};

use super::cfi::{ImageCfi, Step};
use super::regs::Registers;
use super::symbols::FunctionIndex;
use super::{EndReason, Frame, FrameTrust, Stack, UnwindOptions};
use crate::debuginfo::{Image, ProcessImages};
use crate::traits::Memory;

/// What the unwinder keeps of one image: its CFI and its functions, read on first use.
#[derive(Debug)]
struct ImageInfo {
    cfi: ImageCfi,
    functions: FunctionIndex,
}

/// Unwinds the threads of one process against its images. Reusable for every thread of the
/// process (and every sample): the CFI and symbol tables of an image are read once, on first
/// use.
#[derive(Debug)]
pub struct Unwinder<'a> {
    images: &'a ProcessImages,
    options: UnwindOptions,
    info: Vec<OnceLock<ImageInfo>>,
}

/// A caller found by one method: its registers, how it was found, and whether its pc is exact
/// (interrupted by a signal) rather than a return address.
type Caller = (Registers, FrameTrust, bool);

impl<'a> Unwinder<'a> {
    /// An unwinder over `images` with default limits.
    pub fn new(images: &'a ProcessImages) -> Self {
        Unwinder::with_options(images, UnwindOptions::default())
    }

    /// An unwinder over `images` with `options`.
    pub fn with_options(images: &'a ProcessImages, options: UnwindOptions) -> Self {
        Unwinder {
            images,
            options,
            info: images.images().iter().map(|_| OnceLock::new()).collect(),
        }
    }

    /// The image mapping run-time address `pc`, with its index.
    fn image_for(&self, pc: u64) -> Option<(usize, &'a Arc<Image>)> {
        self.images.images().iter().enumerate().find(|(_, img)| {
            let link = pc.wrapping_sub(img.bias());
            img.elf()
                .segments()
                .iter()
                .any(|s| link >= s.vaddr && link - s.vaddr < s.mem_size)
        })
    }

    fn info(&self, index: usize, image: &Image) -> Option<&ImageInfo> {
        let slot = self.info.get(index)?;
        Some(slot.get_or_init(|| {
            let data = image.elf().data().ok();
            let debug = image.debug_elf().and_then(|d| d.data().ok());
            let cfi = ImageCfi::load(data.map(|d| &d[..]), debug.map(|d| &d[..]));
            let files = std::iter::once(&**image.elf()).chain(image.debug_elf().map(|d| &**d));
            ImageInfo {
                cfi,
                functions: FunctionIndex::build(files),
            }
        }))
    }

    /// Whether `ra` (a return address) points into code of a known image: covered by its CFI
    /// or inside one of its functions.
    fn is_code(&self, ra: u64) -> bool {
        let at = ra.wrapping_sub(1);
        let Some((i, image)) = self.image_for(at) else {
            return false;
        };
        let Some(info) = self.info(i, image) else {
            return false;
        };
        let link = at.wrapping_sub(image.bias());
        info.functions.lookup(link).is_some() || info.cfi.covers(link)
    }

    /// The stack of the thread whose registers are `regs`, reading its stack from `memory`.
    pub fn unwind(&self, memory: &dyn Memory, regs: &Registers) -> Stack {
        let mut frames = Vec::new();
        let mut regs = *regs;
        let mut trust = FrameTrust::Context;
        let mut exact_pc = true;
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
            let mut failure = String::from("the pc is in no known image");
            if let Some((i, image)) = self.image_for(lookup) {
                let link = lookup.wrapping_sub(image.bias());
                frame.module = Some(image.path().display().to_string());
                frame.module_offset = Some(pc.wrapping_sub(image.bias()));
                if let Some(info) = self.info(i, image) {
                    if let Some((name, offset)) = info.functions.lookup(link) {
                        frame.function = Some(name.to_string());
                        frame.function_offset = Some(offset + (pc - lookup));
                    }
                    match info.cfi.step(memory, &regs, link) {
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
                            caller = Some((c, FrameTrust::Cfi, signal_frame));
                        }
                        Step::Failed(e) => failure = e,
                        Step::NoInfo => failure = "no CFI covers the pc".to_string(),
                    }
                }
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
        let mut buf = [0u8; 8];
        memory
            .read_exact(address, buf.get_mut(..word as usize)?)
            .ok()?;
        Some(match memory.data_model().byte_order() {
            mpir_types::ByteOrder::Little => u64::from_le_bytes(buf),
            mpir_types::ByteOrder::Big => u64::from_be_bytes(buf) >> (64 - 8 * word),
        })
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
        Some((caller, FrameTrust::FramePointer, false))
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
                return Some((caller, FrameTrust::Scan, false));
            }
        }
        None
    }
}
