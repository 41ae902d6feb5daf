//! Fuzz harnesses of this crate, shared by `fuzz/` and the bounded no-panic test.

use std::path::Path;

use crate::debuginfo::{ElfFile, TypeIndex};

/// Parses arbitrary bytes as an ELF file, indexes its DWARF and looks types up: by the names it
/// has, through its variables, and the MPIR ones. Must never panic or hang.
pub fn elf_types(data: &[u8]) {
    let Ok(elf) = ElfFile::parse(Path::new("fuzz-input"), data.into()) else {
        return;
    };
    let _ = elf.symbols("MPIR_proctable");
    let _ = elf.bias_for_mapping(0x5555_0000_0000, 0);
    let Ok(index) = TypeIndex::load(&elf, None) else {
        return;
    };
    for name in index.type_names().take(64) {
        let _ = index.named(&name);
    }
    for var in index.variable_names().take(64) {
        let _ = index.pointee_of_variable(&var);
    }
    let _ = index.named("MPIR_PROCDESC");
    let _ = index.pointee_of_variable("MPIR_proctable");
}

/// Parses arbitrary bytes as an ELF file and symbolises addresses across its loadable segments
/// as the stack symboliser does (function index, addr2line lines and inline frames, bounded).
/// Returns the number of source positions found. Must never panic or hang.
pub fn elf_symbolize(data: &[u8]) -> usize {
    let Ok(elf) = ElfFile::parse(Path::new("fuzz-input"), data.into()) else {
        return 0;
    };
    crate::unwind::probe_elf(&elf, 512)
}

/// Parses arbitrary bytes as [`ElfFile::open`] parses a file: the header-driven choice of
/// ranges, the sparse reader, then symbols. Must never panic, hang, or allocate more than the
/// input's size.
pub fn elf_sparse(data: &[u8]) {
    let Ok(elf) = ElfFile::parse_sparse(Path::new("fuzz-input"), data) else {
        return;
    };
    let _ = elf.symbols("MPIR_Breakpoint");
    let _ = elf.build_id();
    let _ = elf.debuglink();
    let _ = elf.has_dwarf();
}

thread_local! {
    /// The in-memory file the [`core`] harness writes each input to (created once per thread).
    static CORE_FILE: Option<std::fs::File> = nix::sys::memfd::memfd_create(
        "mpir-fuzz-core",
        nix::sys::memfd::MFdFlags::MFD_CLOEXEC,
    )
    .ok()
    .map(std::fs::File::from);
}

/// Parses arbitrary bytes as a core file, the way [`CoreFile::open`](crate::corefile::CoreFile)
/// reads one from disk (through an in-memory file), then reads what it lists: threads, auxv,
/// the executable, truncation, and memory at both ends of the first segments and mappings.
/// Must never panic, hang, or allocate more than the input's size. Mapped files the input
/// names are read as the core's `NT_FILE` asks (regular files only, never `/dev`, `/proc` or
/// `/sys`).
pub fn core(data: &[u8]) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::FileExt;

    use crate::Memory;
    use crate::corefile::CoreFile;

    CORE_FILE.with(|file| {
        let Some(file) = file else {
            return;
        };
        if file.set_len(0).is_err() || file.write_all_at(data, 0).is_err() {
            return;
        }
        let path = format!("/proc/self/fd/{}", file.as_raw_fd());
        let Ok(core) = CoreFile::open(Path::new(&path)) else {
            return;
        };
        let _ = (core.pid(), core.threads(), core.auxv(), core.executable());
        let _ = core.truncation();
        let mut buf = [0u8; 64];
        let ends = |start: u64, len: u64| [start, start.wrapping_add(len).wrapping_sub(1)];
        for s in core.segments().iter().take(8) {
            for a in ends(s.vaddr, s.mem_size) {
                let _ = core.read_partial(a, &mut buf);
            }
        }
        for m in core.mappings().iter().take(8) {
            for a in ends(m.start, m.end.wrapping_sub(m.start)) {
                let _ = core.read_partial(a, &mut buf);
            }
        }
    });
}

/// The CFI-driven unwinder on arbitrary input: `data` is a header (a 16-bit pc offset into the
/// image and a 16-bit stack length in words), that many stack words, then the bytes of an ELF
/// image (seeded with real executables, so its `.eh_frame`, `.eh_frame_hdr` and DWARF
/// expressions get mutated). The image is mapped at a fixed address and added as the
/// process's in-memory image (the vDSO's path: parsed from target memory), the stack just
/// above the stack pointer; every thread register starts as a stack word. The walk is then
/// checked: bounded frames, a stack pointer that only increases, the reason recorded. Returns
/// the number of frames. Must never panic, hang or allocate beyond the input's bounds.
pub fn unwind(data: &[u8]) -> usize {
    use crate::unwind::{Arch, Registers, StackCopy, UnwindOptions, Unwinder};
    const IMAGE: u64 = 0x5555_0000_0000;
    const STACK: u64 = 0x7ffd_0000_0000;
    let (Some(head), Some(rest)) = (data.get(..4), data.get(4..)) else {
        return 0;
    };
    let pc_offset = u64::from(u16::from_le_bytes([head[0], head[1]]));
    let words = usize::from(u16::from_le_bytes([head[2], head[3]]) % 4096);
    let split = (words * 8).min(rest.len());
    let (stack, image) = rest.split_at(split);
    let memory = StackCopy::new(
        mpir_types::DataModel::LP64,
        vec![(STACK, stack.to_vec()), (IMAGE, image.to_vec())],
    );
    let Ok(images) = crate::debuginfo::ProcessImages::from_files(&[], Default::default()) else {
        return 0;
    };
    let options = UnwindOptions::default().with_max_frames(256);
    let mut unwinder = Unwinder::with_options(&images, options);
    if unwinder.add_vdso(&memory, IMAGE).is_err() {
        return 0;
    }
    let word = |i: usize| {
        stack
            .get(i * 8..i * 8 + 8)
            .and_then(|b| b.try_into().ok())
            .map_or(0, u64::from_le_bytes)
    };
    let mut regs = Registers::new(Arch::X86_64, IMAGE + pc_offset, STACK, word(0));
    for (dwarf, i) in (0u16..16).zip(1usize..) {
        if dwarf != Arch::X86_64.sp_reg() && dwarf != Arch::X86_64.pc_reg() {
            regs.set(dwarf, word(i));
        }
    }
    let walked = unwinder.unwind(&memory, &regs);
    assert!(walked.frames.len() <= options.max_frames);
    for pair in walked.frames.windows(2) {
        assert!(pair[1].sp > pair[0].sp, "the stack pointer went down");
    }
    let symbolised = unwinder.thread_stack(1, &walked);
    assert!(symbolised.frames.len() >= walked.frames.len());
    walked.frames.len()
}
