//! The descriptors of an x86-64 Linux core's notes as fixed layouts: `struct elf_prstatus`
//! (`NT_PRSTATUS`) and `struct elf_prpsinfo` (`NT_PRPSINFO`) of the kernel's
//! `include/linux/elfcore.h` for x86-64 (LP64, little-endian). The structs *are* the layouts
//! (sizes checked below, field offsets against the reader's by a test in `corefile.rs`); the
//! ELF header, program headers and note headers are `object`'s, as the reader's.
//!
//! zerocopy's derives prove that the structs have no padding and that every byte pattern is
//! valid, with no `unsafe` here: each field is unaligned (byte arrays and byte-order integers),
//! so `repr(C)` puts nothing between them; the C ABI's padding is spelled out as `_pad` bytes.

use zerocopy::byteorder::{I16, I32, I64, LittleEndian, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

type Le = LittleEndian;

/// Words in x86-64's `user_regs_struct` (`elf_gregset_t`): r15 … gs.
pub(crate) const GREGS: usize = 27;
/// Bytes of x86-64's `user_i387_struct` (the FXSAVE area, `NT_FPREGSET`).
pub(crate) const FPREGS: usize = 512;

/// `struct elf_prstatus` on x86-64: 336 bytes.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct Prstatus64 {
    /// `pr_info.si_signo`.
    pub(crate) si_signo: I32<Le>,
    /// `pr_info.si_code`.
    pub(crate) si_code: I32<Le>,
    /// `pr_info.si_errno`.
    pub(crate) si_errno: I32<Le>,
    /// The current signal.
    pub(crate) pr_cursig: I16<Le>,
    pub(crate) _pad0: [u8; 2],
    /// Pending signals.
    pub(crate) pr_sigpend: U64<Le>,
    /// Blocked signals.
    pub(crate) pr_sighold: U64<Le>,
    /// The thread id.
    pub(crate) pr_pid: I32<Le>,
    pub(crate) pr_ppid: I32<Le>,
    pub(crate) pr_pgrp: I32<Le>,
    pub(crate) pr_sid: I32<Le>,
    /// `pr_utime`, `pr_stime`, `pr_cutime`, `pr_cstime`: four `struct timeval`s.
    pub(crate) times: [I64<Le>; 8],
    /// `user_regs_struct`.
    pub(crate) pr_reg: [U64<Le>; GREGS],
    /// Whether an `NT_FPREGSET` follows.
    pub(crate) pr_fpvalid: I32<Le>,
    pub(crate) _pad1: [u8; 4],
}

/// `struct elf_prpsinfo` on x86-64: 136 bytes.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct Prpsinfo64 {
    /// Numeric process state (index in "RSDTZW").
    pub(crate) pr_state: u8,
    /// The state's letter.
    pub(crate) pr_sname: u8,
    pub(crate) pr_zomb: u8,
    pub(crate) pr_nice: i8,
    pub(crate) _pad0: [u8; 4],
    pub(crate) pr_flag: U64<Le>,
    pub(crate) pr_uid: U32<Le>,
    pub(crate) pr_gid: U32<Le>,
    pub(crate) pr_pid: I32<Le>,
    pub(crate) pr_ppid: I32<Le>,
    pub(crate) pr_pgrp: I32<Le>,
    pub(crate) pr_sid: I32<Le>,
    /// The command name, NUL-padded.
    pub(crate) pr_fname: [u8; 16],
    /// The start of the argument list, NUL-terminated.
    pub(crate) pr_psargs: [u8; 80],
}

const _: () = assert!(size_of::<Prstatus64>() == 336);
const _: () = assert!(size_of::<Prpsinfo64>() == 136);
