//! Registers of one thread, by DWARF register number, as the unwinder needs them.

use crate::error::{Result, TargetError};

/// The instruction sets the unwinder knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Arch {
    /// x86-64 (LP64).
    X86_64,
    /// i386 (32-bit x86; also a 32-bit process under a 64-bit kernel).
    I386,
}

impl Arch {
    /// Bytes in an address (and a stack slot).
    pub fn word_size(self) -> u64 {
        match self {
            Arch::X86_64 => 8,
            Arch::I386 => 4,
        }
    }

    /// DWARF number of the stack pointer.
    pub fn sp_reg(self) -> u16 {
        match self {
            Arch::X86_64 => 7,
            Arch::I386 => 4,
        }
    }

    /// DWARF number of the frame pointer.
    pub fn fp_reg(self) -> u16 {
        match self {
            Arch::X86_64 => 6,
            Arch::I386 => 5,
        }
    }

    /// DWARF number of the return-address column (the program counter).
    pub fn pc_reg(self) -> u16 {
        match self {
            Arch::X86_64 => 16,
            Arch::I386 => 8,
        }
    }

    /// The architecture of this crate's host build, or [`TargetError::Unsupported`].
    pub fn host() -> Result<Arch> {
        match std::env::consts::ARCH {
            "x86_64" => Ok(Arch::X86_64),
            "x86" => Ok(Arch::I386),
            other => Err(unsupported(other)),
        }
    }
}

/// The error for an instruction set the unwinder does not know.
pub(crate) fn unsupported(arch: &str) -> TargetError {
    TargetError::Unsupported {
        operation: "unwinding a stack".to_string(),
        reason: format!("the unwinder knows x86_64 and i386, this is {arch}"),
    }
}

/// How many DWARF registers a [`Registers`] holds: x86_64's 0..=16 (rax..r15, the return
/// address column 16); i386 uses 0..=8.
pub const MAX_REGS: usize = 17;

/// Registers of one thread (or of one frame, as recovered), by DWARF register number. A
/// register the unwinder could not recover is absent (`None`), not zero.
///
/// x86_64 numbering: 0 rax, 1 rdx, 2 rcx, 3 rbx, 4 rsi, 5 rdi, 6 rbp, 7 rsp, 8–15 r8–r15,
/// 16 rip. i386: 0 eax, 1 ecx, 2 edx, 3 ebx, 4 esp, 5 ebp, 6 esi, 7 edi, 8 eip.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Registers {
    /// The instruction set.
    pub arch: Arch,
    values: [Option<u64>; MAX_REGS],
    thread_pointer: Option<u64>,
}

impl Registers {
    /// No register known.
    pub fn empty(arch: Arch) -> Self {
        Registers {
            arch,
            values: [None; MAX_REGS],
            thread_pointer: None,
        }
    }

    /// Only the program counter, stack pointer and frame pointer.
    pub fn new(arch: Arch, pc: u64, sp: u64, fp: u64) -> Self {
        let mut r = Registers::empty(arch);
        r.set(arch.pc_reg(), pc);
        r.set(arch.sp_reg(), sp);
        r.set(arch.fp_reg(), fp);
        r
    }

    /// Register `dwarf` (None when unknown or out of range).
    pub fn get(&self, dwarf: u16) -> Option<u64> {
        self.values.get(usize::from(dwarf)).copied().flatten()
    }

    /// Sets register `dwarf` (ignored out of range); i386 values are cut to 32 bits.
    pub fn set(&mut self, dwarf: u16, value: u64) {
        let value = match self.arch {
            Arch::I386 => value & 0xffff_ffff,
            Arch::X86_64 => value,
        };
        if let Some(slot) = self.values.get_mut(usize::from(dwarf)) {
            *slot = Some(value);
        }
    }

    /// Forgets register `dwarf`.
    pub fn clear(&mut self, dwarf: u16) {
        if let Some(slot) = self.values.get_mut(usize::from(dwarf)) {
            *slot = None;
        }
    }

    /// The program counter.
    pub fn pc(&self) -> Option<u64> {
        self.get(self.arch.pc_reg())
    }

    /// The stack pointer.
    pub fn sp(&self) -> Option<u64> {
        self.get(self.arch.sp_reg())
    }

    /// The frame pointer.
    pub fn fp(&self) -> Option<u64> {
        self.get(self.arch.fp_reg())
    }

    /// The thread pointer: x86_64's `fs_base`, which glibc points at the thread's control
    /// block (its `pthread_t`). Known from a full register set only.
    pub fn thread_pointer(&self) -> Option<u64> {
        self.thread_pointer
    }

    /// With thread pointer `value`.
    pub fn with_thread_pointer(mut self, value: u64) -> Self {
        self.thread_pointer = Some(value);
        self
    }

    /// From the words of a Linux `user_regs_struct` (x86_64: 27 words in the order r15, r14,
    /// r13, r12, rbp, rbx, r11, r10, r9, r8, rax, rcx, rdx, rsi, rdi, orig_rax, rip, cs,
    /// eflags, rsp, …; i386: ebx, ecx, edx, esi, edi, ebp, eax, ds, es, fs, gs, orig_eax, eip,
    /// cs, eflags, esp, ss), as in `NT_PRSTATUS` and `PTRACE_GETREGS`. `None` when too short.
    pub fn from_user_regs(arch: Arch, words: &[u64]) -> Option<Self> {
        // (index in user_regs_struct, DWARF number)
        const X86_64: [(usize, u16); 17] = [
            (10, 0),
            (12, 1),
            (11, 2),
            (5, 3),
            (13, 4),
            (14, 5),
            (4, 6),
            (19, 7),
            (9, 8),
            (8, 9),
            (7, 10),
            (6, 11),
            (3, 12),
            (2, 13),
            (1, 14),
            (0, 15),
            (16, 16),
        ];
        const I386: [(usize, u16); 9] = [
            (6, 0),
            (1, 1),
            (2, 2),
            (0, 3),
            (15, 4),
            (5, 5),
            (3, 6),
            (4, 7),
            (12, 8),
        ];
        let map: &[(usize, u16)] = match arch {
            Arch::X86_64 => &X86_64,
            Arch::I386 => &I386,
        };
        let mut r = Registers::empty(arch);
        for &(i, d) in map {
            r.set(d, *words.get(i)?);
        }
        if arch == Arch::X86_64 {
            // fs_base follows ss.
            r.thread_pointer = words.get(21).copied();
        }
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_regs_land_in_their_dwarf_numbers() {
        // x86_64 user_regs_struct: r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi
        // orig_rax rip cs eflags rsp ss ...; the value of each word is 100 + its index.
        let words: Vec<u64> = (0..27).map(|i| 100 + i).collect();
        let r = Registers::from_user_regs(Arch::X86_64, &words).unwrap();
        assert_eq!(r.pc(), Some(116)); // rip
        assert_eq!(r.sp(), Some(119)); // rsp
        assert_eq!(r.fp(), Some(104)); // rbp
        assert_eq!(r.get(0), Some(110)); // rax
        assert_eq!(r.get(3), Some(105)); // rbx
        assert_eq!(r.get(12), Some(103)); // r12
        assert_eq!(r.get(15), Some(100)); // r15
        assert_eq!(r.thread_pointer(), Some(121)); // fs_base
        // i386: ebx ecx edx esi edi ebp eax ds es fs gs orig_eax eip cs eflags esp ss.
        let r = Registers::from_user_regs(Arch::I386, &words[..17]).unwrap();
        assert_eq!(r.pc(), Some(112));
        assert_eq!(r.sp(), Some(115));
        assert_eq!(r.fp(), Some(105));
        assert_eq!(r.get(3), Some(100)); // ebx
        // Too few words: nothing guessed.
        assert_eq!(Registers::from_user_regs(Arch::X86_64, &words[..19]), None);
    }

    #[test]
    fn i386_values_are_32_bits_and_out_of_range_registers_are_ignored() {
        let mut r = Registers::empty(Arch::I386);
        r.set(8, 0x1_2345_6789);
        assert_eq!(r.pc(), Some(0x2345_6789));
        r.set(200, 1);
        assert_eq!(r.get(200), None);
        r.clear(8);
        assert_eq!(r.pc(), None);
    }
}
