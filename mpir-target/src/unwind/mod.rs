//! Stack unwinding over any target: registers of a stopped thread (live through
//! [`Tracer::registers`](crate::live::tracer::Tracer::registers), or from a core's
//! `NT_PRSTATUS` via [`CoreThread::registers`](crate::corefile::CoreThread)), stack memory
//! through [`Memory`](crate::Memory), and the images of the process
//! ([`ProcessImages`](crate::debuginfo::ProcessImages)) for call frame information and symbols.
//!
//! ## How a frame's caller is found, by trust
//!
//! 1. **CFI** ([`Trust::Cfi`]): the FDE covering the pc in the right image's `.eh_frame`
//!    (found through `.eh_frame_hdr`'s binary search table when present) or `.debug_frame` (of
//!    the image or of its separate debug file, found by the existing debug-file search). CFA
//!    and register rules, DWARF expressions included, are evaluated against the frame's
//!    registers and the target's memory. A return-address rule "undefined" (glibc's `_start`
//!    and `clone`) ends the stack normally ([`EndReason::Outermost`]).
//! 2. **Frame pointer** ([`Trust::FramePointer`]), when no CFI covers the pc: the saved
//!    frame pointer at `[fp]` and the return address at `[fp + word]`, accepted only when the
//!    return address lands in code of a known image and the stack pointer moves up.
//! 3. **Signal context** ([`Trust::SignalContext`]), when no CFI covers x86_64's
//!    `__restore_rt` (recognised by its symbol): every register is restored from the
//!    `ucontext` the kernel pushed at the trampoline's stack pointer.
//! 4. **Scan** ([`Trust::Scan`]): at most [`UnwindOptions::max_scan_words`] words from the
//!    stack pointer up, the first word that points into code of a known image (covered by its
//!    CFI or inside one of its function symbols).
//!
//! **Signal frames.** glibc's `__restore_rt` carries CFI whose CIE has the "S" augmentation and
//! whose rules (DWARF expressions) restore every register from the `ucontext` the kernel pushed;
//! the unwinder evaluates them, and marks the frame [`Frame::signal_frame`]. The frame below it
//! (the interrupted code) is then looked up at its pc itself, not pc − 1, since its pc is not a
//! return address. The vDSO (i386's signal trampolines and `__kernel_vsyscall`, through which
//! every i386 system call goes) is no file the images list: add it from the target's memory
//! with [`Unwinder::add_vdso`] at the auxiliary vector's `AT_SYSINFO_EHDR`
//! ([`live_vdso_address`], [`vdso_address`] for a core); without it such frames fall back to
//! the frame pointer or a scan.
//!
//! **Bounds.** At most [`UnwindOptions::max_frames`] frames; a frame whose stack pointer does
//! not increase ends the walk ([`EndReason::NoProgress`]); an unreadable stack ends it with the
//! address ([`EndReason::Unreadable`]); DWARF expressions run a bounded number of steps. Garbage
//! registers give a partial stack with the reason, never a panic.
//!
//! **Symbols.** A frame's function name comes from the ELF symbol tables (`.symtab`, else
//! `.dynsym`, of the image or its separate debug file) *of the image that maps the pc*, never
//! the nearest symbol of another module: a pc in a stripped library has no name, only its
//! module and offset.
//!
//! ## Symbols once per build-id
//!
//! What the unwinder and the symboliser know of an image — its CFI sections and the rows
//! already computed from them, its sorted function symbols, its DWARF line and inline context —
//! lives in a [`SymbolCache`], keyed by the image's GNU build-id (an image without one: its
//! canonical path, size, modification time and inode). An [`Unwinder`] made
//! [`with_cache`](Unwinder::with_cache) takes each image from the cache on first use, so the
//! unwinders of every rank of a job (and of a core of the same binaries) parse each distinct
//! library once; [`SymbolCache::stats`] counts images parsed and reused and source lookups
//! answered from earlier answers. [`Unwinder::new`] keeps a private cache. The cache holds at
//! most [`SymbolCache::max_images`] images ([`DEFAULT_MAX_IMAGES`]); past that an image is
//! parsed for the unwinder that asks and not kept.
//!
//! [`Unwinder::thread_stack`] turns a [`Stack`] into the one stack model,
//! [`mpir_types::stacks::ThreadStack`]: per physical frame, the module and the link-time
//! offset of the pc; the ELF name above; the source file and line and the **inline frames**
//! from DWARF, read with the `addr2line` crate over our own sections (the image's, else those
//! of the separate debug file the debug search found — build-id directories, `.gnu_debuglink`,
//! explicit files — with its dwz supplementary file). A physical frame whose pc lies in
//! inlined code becomes the inlined functions, innermost first and marked
//! [`inline`](mpir_types::stacks::Frame::inline), then the function containing them, each
//! outer one at the line of its call, as gdb's `bt` shows them. Return addresses are looked
//! up at pc − 1 (inside the call), the innermost frame and a frame interrupted by a signal at
//! the pc. The walk's [`EndReason`] becomes the stack's
//! [`Truncation`](mpir_types::stacks::Truncation) ([`truncation`]; the outermost frame is a
//! complete stack). [`Unwinder::thread_stacks`] does a whole [`ProcessSnapshot`]. Malformed
//! DWARF gives frames without source positions, never a panic; one address expands to at most
//! 64 frames.
//!
//! **Speed.** A step looks the image up by binary search over the segments of all images,
//! applies the CFI row remembered for that address (computed from the FDE and CIE once, kept
//! per image, so shared by threads, samples and processes), and shares module and function
//! names (`Arc<str>`) rather than copying them per frame.
//!
//! ## Why gimli and not framehop
//!
//! gimli is already this crate's DWARF reader (types, debug files), so its CFI reader costs no
//! new dependency and shares its bounds-checked parsing; it evaluates the full rule set (DWARF
//! expressions, which glibc's signal trampolines need) over a [`Memory`](crate::Memory) of any
//! backend. framehop is faster (it compiles CFI to compact unwind rules and caches them) but
//! covers the common rules only and owns its own module model; it is the candidate for the
//! sampling fast path once measurements ask for it.
//!
//! ## Live processes
//!
//! Either unwind while stopped, reading through the live target's memory, or take the fast
//! path: [`snapshot_live`] stops every thread, copies the registers and the live part of each
//! stack (stack pointer to the top of its mapping, capped) in one batched `process_vm_readv`,
//! lets the process go and reports how long it was stopped; the copy ([`StackCopy`]) is then
//! unwound offline. aarch64 is [`TargetError::Unsupported`](crate::TargetError::Unsupported).

mod cache;
mod cfi;
mod frames_store;
mod functions;
mod regs;
mod snapshot;
mod symbolize;
mod symbols;
mod walk;

#[cfg(feature = "fuzzing")]
pub(crate) use cache::probe_elf;
pub use cache::{DEFAULT_MAX_IMAGES, SymbolCache, SymbolCacheStats};
pub use regs::{Arch, MAX_REGS, Registers};
pub use symbolize::truncation;

/// The error for reading registers on an instruction set the unwinder does not know.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(crate) fn unsupported_here() -> crate::TargetError {
    regs::unsupported(std::env::consts::ARCH)
}
pub use snapshot::{
    ProcessSnapshot, SnapshotOptions, StackCopy, ThreadSnapshot, snapshot_live,
    snapshot_live_while, snapshot_live_with_mappings,
};
pub use walk::{AT_SYSINFO_EHDR, Unwinder, live_vdso_address, vdso_address};

/// How far a frame can be trusted: the one trust model of the stack model
/// ([`mpir_types::stacks::Trust`]), re-exported here.
pub use mpir_types::stacks::Trust;

/// Why a walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum EndReason {
    /// The outermost frame: the CFI says there is no caller, or the return address is 0.
    Outermost,
    /// [`UnwindOptions::max_frames`] frames were produced.
    MaxFrames,
    /// The caller's stack pointer did not increase (a cycle, or corrupt registers).
    NoProgress {
        /// The stack pointer of the last frame.
        sp: u64,
        /// The stack pointer the caller would have had.
        next_sp: u64,
    },
    /// The stack (or a saved register) could not be read.
    Unreadable {
        /// What failed, with the address.
        reason: String,
    },
    /// No method found a caller: no CFI, no usable frame pointer, nothing found by the scan.
    NoCaller {
        /// What was tried.
        reason: String,
    },
    /// The registers lack the pc or the stack pointer.
    MissingRegisters,
}

impl std::fmt::Display for EndReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EndReason::Outermost => f.write_str("outermost frame"),
            EndReason::MaxFrames => f.write_str("frame limit reached"),
            EndReason::NoProgress { sp, next_sp } => write!(
                f,
                "the stack pointer did not increase ({sp:#x} then {next_sp:#x})"
            ),
            EndReason::Unreadable { reason } => write!(f, "unreadable stack: {reason}"),
            EndReason::NoCaller { reason } => write!(f, "no caller found: {reason}"),
            EndReason::MissingRegisters => f.write_str("no pc or stack pointer"),
        }
    }
}

/// One frame of a stack.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Frame {
    /// The program counter: for every frame but the innermost (and but one interrupted by a
    /// signal) a return address, one past the call.
    pub pc: u64,
    /// The stack pointer in this frame.
    pub sp: u64,
    /// The canonical frame address, when CFI gave it.
    pub cfa: Option<u64>,
    /// How this frame was found.
    pub trust: Trust,
    /// The image (executable or library) mapping the pc, when known (shared, not copied per
    /// frame).
    pub module: Option<std::sync::Arc<str>>,
    /// The pc as a link-time address of `module` (the pc minus the load bias).
    pub module_offset: Option<u64>,
    /// The function containing the pc, from `module`'s symbol tables.
    pub function: Option<std::sync::Arc<str>>,
    /// The pc's offset in `function`.
    pub function_offset: Option<u64>,
    /// The frame is a signal trampoline (its CFI has the "S" augmentation).
    pub signal_frame: bool,
}

/// The frames of one thread, innermost first, and why the walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Stack {
    /// Innermost first.
    pub frames: Vec<Frame>,
    /// Why there are no more.
    pub end: EndReason,
}

impl Stack {
    /// The function names, innermost first (`None` where unknown).
    pub fn function_names(&self) -> Vec<Option<&str>> {
        self.frames.iter().map(|f| f.function.as_deref()).collect()
    }
}

/// Limits of one walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct UnwindOptions {
    /// Frames at most (default 4096).
    pub max_frames: usize,
    /// Words a scan may look at for one frame (default 256).
    pub max_scan_words: usize,
    /// Whether the scan fallback may be used (default yes).
    pub scan: bool,
    /// Whether CFI is used (default yes; off, only the fallbacks run: for comparing methods).
    pub cfi: bool,
}

impl Default for UnwindOptions {
    fn default() -> Self {
        UnwindOptions {
            max_frames: 4096,
            max_scan_words: 256,
            scan: true,
            cfi: true,
        }
    }
}

impl UnwindOptions {
    /// With another frame limit.
    pub fn with_max_frames(mut self, max_frames: usize) -> Self {
        self.max_frames = max_frames;
        self
    }

    /// With CFI used or not.
    pub fn with_cfi(mut self, cfi: bool) -> Self {
        self.cfi = cfi;
        self
    }

    /// With another scan limit (0 disables the scan).
    pub fn with_max_scan_words(mut self, max_scan_words: usize) -> Self {
        self.max_scan_words = max_scan_words;
        self.scan = max_scan_words > 0;
        self
    }
}
