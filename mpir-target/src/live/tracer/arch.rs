//! The instruction-set-specific part of process control: the breakpoint instruction, where the
//! program counter is after it traps, and the emulated return of a `void f(void)`.
//!
//! x86_64 is implemented and tested. Elsewhere every function here returns
//! [`TargetError::Unsupported`]: attaching, reading, resuming and detaching still work, but
//! software breakpoints do not.

use nix::unistd::Pid;

use crate::error::{Result, TargetError};

#[cfg(target_arch = "x86_64")]
mod imp {
    use nix::sys::ptrace;
    use nix::unistd::Pid;

    use super::super::control_err;
    use crate::error::Result;

    /// `int3`.
    pub(super) const BREAKPOINT: &[u8] = &[0xcc];

    pub(super) fn pc(tid: Pid) -> Result<u64> {
        let regs = ptrace::getregs(tid).map_err(|e| control_err(tid, "PTRACE_GETREGS", e))?;
        Ok(regs.rip)
    }

    pub(super) fn set_pc(tid: Pid, pc: u64) -> Result<()> {
        let mut regs = ptrace::getregs(tid).map_err(|e| control_err(tid, "PTRACE_GETREGS", e))?;
        regs.rip = pc;
        ptrace::setregs(tid, regs).map_err(|e| control_err(tid, "PTRACE_SETREGS", e))
    }

    /// The registers of stopped thread `tid`, for the unwinder (i386 for a thread in 32-bit
    /// code, whose registers come zero-extended).
    pub(super) fn registers(tid: Pid) -> Result<crate::unwind::Registers> {
        use crate::unwind::{Arch, Registers};
        let r = ptrace::getregs(tid).map_err(|e| control_err(tid, "PTRACE_GETREGS", e))?;
        let words = [
            r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx,
            r.rdx, r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base,
        ];
        let regs = match word_size(tid, r.cs)? {
            8 => Registers::from_user_regs(Arch::X86_64, &words),
            _ => {
                // The i386 user_regs_struct order, from the 64-bit one.
                let w32 = [
                    r.rbx, r.rcx, r.rdx, r.rsi, r.rdi, r.rbp, r.rax, r.ds, r.es, r.fs, r.gs,
                    r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss,
                ];
                Registers::from_user_regs(Arch::I386, &w32)
            }
        };
        regs.ok_or_else(|| control_err(tid, "read the registers", "too few registers"))
    }

    /// The registers of stopped thread `tid` as a core file stores them: the 27 words of
    /// `user_regs_struct` (`NT_PRSTATUS`'s `pr_reg`) and, when the kernel gives them, the
    /// 512 bytes of the FXSAVE area (`NT_FPREGSET`). 64-bit threads only: a thread in 32-bit
    /// code would need an i386 core.
    pub(super) fn core_registers(tid: Pid) -> Result<crate::corefile::write::ThreadRegisters> {
        let r = ptrace::getregs(tid).map_err(|e| control_err(tid, "PTRACE_GETREGS", e))?;
        if word_size(tid, r.cs)? != 8 {
            return Err(crate::error::TargetError::Unsupported {
                operation: "writing a core".to_string(),
                reason: format!("thread {tid} runs 32-bit code; only x86-64 cores are written"),
            });
        }
        let general = [
            r.r15, r.r14, r.r13, r.r12, r.rbp, r.rbx, r.r11, r.r10, r.r9, r.r8, r.rax, r.rcx,
            r.rdx, r.rsi, r.rdi, r.orig_rax, r.rip, r.cs, r.eflags, r.rsp, r.ss, r.fs_base,
            r.gs_base, r.ds, r.es, r.fs, r.gs,
        ];
        // The FXSAVE image, field by field in its little-endian layout (the kernel's
        // `user_i387_struct`); a kernel that refuses the set leaves the core without it.
        let fp = crate::live::tracer::sys::fp_registers(tid).ok().map(|f| {
            let mut bytes = [0u8; 512];
            let mut out = Vec::with_capacity(512);
            for h in [f.cwd, f.swd, f.ftw, f.fop] {
                out.extend_from_slice(&h.to_le_bytes());
            }
            out.extend_from_slice(&f.rip.to_le_bytes());
            out.extend_from_slice(&f.rdp.to_le_bytes());
            out.extend_from_slice(&f.mxcsr.to_le_bytes());
            out.extend_from_slice(&f.mxcr_mask.to_le_bytes());
            for w in f.st_space.iter().chain(&f.xmm_space) {
                out.extend_from_slice(&w.to_le_bytes());
            }
            // The rest (the kernel's padding and software-reserved words) stays zero.
            for (d, s) in bytes.iter_mut().zip(&out) {
                *d = *s;
            }
            Box::new(bytes)
        });
        Ok(crate::corefile::write::ThreadRegisters { general, fp })
    }

    /// `int3` traps with the program counter just past it.
    pub(super) fn breakpoint_from_trap_pc(pc: u64) -> u64 {
        pc.wrapping_sub(BREAKPOINT.len() as u64)
    }

    /// The width of a return address for a thread running in code segment `cs`: the
    /// kernel's user selectors are 0x33 for 64-bit code and 0x23 for 32-bit (compat) code. Any
    /// other selector is not guessed at.
    pub(super) fn word_size(tid: Pid, cs: u64) -> Result<u64> {
        match cs {
            0x33 => Ok(8),
            0x23 => Ok(4),
            other => Err(control_err(
                tid,
                "decide the thread's mode",
                format!("unknown code segment selector {other:#x} (64-bit is 0x33, 32-bit 0x23)"),
            )),
        }
    }

    /// At the entry of a function the return address is at the stack pointer: `ret` is
    /// "pc = *sp; sp += word", the word 8 bytes in 64-bit code and 4 in 32-bit code (an i386
    /// process under this 64-bit tool; its registers come zero-extended).
    pub(super) fn emulate_return(
        tid: Pid,
        read: impl FnOnce(u64, usize) -> Result<Vec<u8>>,
    ) -> Result<()> {
        let mut regs = ptrace::getregs(tid).map_err(|e| control_err(tid, "PTRACE_GETREGS", e))?;
        let word = word_size(tid, regs.cs)?;
        let bytes = read(regs.rsp, word as usize)?;
        let mut le = [0u8; 8];
        for (d, b) in le.iter_mut().zip(&bytes) {
            *d = *b;
        }
        regs.rip = u64::from_le_bytes(le);
        regs.rsp = regs.rsp.wrapping_add(word);
        if word == 4 {
            regs.rsp &= 0xffff_ffff;
        }
        ptrace::setregs(tid, regs).map_err(|e| control_err(tid, "PTRACE_SETREGS", e))
    }
}

#[cfg(not(target_arch = "x86_64"))]
mod imp {
    use nix::unistd::Pid;

    use super::unsupported;
    use crate::error::Result;

    pub(super) const BREAKPOINT: &[u8] = &[];

    pub(super) fn pc(_: Pid) -> Result<u64> {
        Err(unsupported("reading the program counter"))
    }

    pub(super) fn set_pc(_: Pid, _: u64) -> Result<()> {
        Err(unsupported("setting the program counter"))
    }

    pub(super) fn breakpoint_from_trap_pc(pc: u64) -> u64 {
        pc
    }

    pub(super) fn registers(_: Pid) -> Result<crate::unwind::Registers> {
        Err(crate::unwind::unsupported_here())
    }

    pub(super) fn emulate_return(
        _: Pid,
        _: impl FnOnce(u64, usize) -> Result<Vec<u8>>,
    ) -> Result<()> {
        Err(unsupported("emulating a function return"))
    }

    pub(super) fn core_registers(_: Pid) -> Result<crate::corefile::write::ThreadRegisters> {
        Err(crate::error::TargetError::Unsupported {
            operation: "writing a core".to_string(),
            reason: format!(
                "only x86-64 cores are written, this is {}",
                std::env::consts::ARCH
            ),
        })
    }
}

/// The error for what this instruction set does not support.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
pub(super) fn unsupported(operation: &str) -> TargetError {
    TargetError::Unsupported {
        operation: operation.to_string(),
        reason: format!(
            "software breakpoints are implemented for x86_64 only, this is {}",
            std::env::consts::ARCH
        ),
    }
}

/// The breakpoint instruction, or an error where breakpoints are not supported.
pub(super) fn breakpoint_instruction() -> Result<&'static [u8]> {
    if imp::BREAKPOINT.is_empty() {
        return Err(unsupported("a software breakpoint"));
    }
    Ok(imp::BREAKPOINT)
}

/// The program counter of stopped thread `tid`.
pub(super) fn pc(tid: Pid) -> Result<u64> {
    imp::pc(tid)
}

/// The registers of stopped thread `tid`, for the unwinder.
pub(super) fn registers(tid: Pid) -> Result<crate::unwind::Registers> {
    imp::registers(tid)
}

/// The registers of stopped thread `tid` as a core file stores them.
pub(super) fn core_registers(tid: Pid) -> Result<crate::corefile::write::ThreadRegisters> {
    imp::core_registers(tid)
}

/// Sets the program counter of stopped thread `tid`.
pub(super) fn set_pc(tid: Pid, pc: u64) -> Result<()> {
    imp::set_pc(tid, pc)
}

/// The address of the breakpoint instruction that trapped, given the pc after the trap.
pub(super) fn breakpoint_from_trap_pc(pc: u64) -> u64 {
    imp::breakpoint_from_trap_pc(pc)
}

/// Makes stopped thread `tid`, at the first instruction of a `void f(void)`, return to its
/// caller. `read` reads `len` bytes of the target at an address.
pub(super) fn emulate_return(
    tid: Pid,
    read: impl FnOnce(u64, usize) -> Result<Vec<u8>>,
) -> Result<()> {
    imp::emulate_return(tid, read)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unsupported_error_names_the_instruction_set() {
        let e = unsupported("a software breakpoint").to_string();
        assert!(e.contains("a software breakpoint"), "{e}");
        assert!(e.contains(std::env::consts::ARCH), "{e}");
        assert!(e.contains("x86_64"), "{e}");
        // Here, breakpoints are supported: the instruction is int3.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(breakpoint_instruction().unwrap(), [0xcc]);
        #[cfg(not(target_arch = "x86_64"))]
        assert!(breakpoint_instruction().is_err());
    }
}
