//! Writing into tracees (`/proc/PID/mem` or `PTRACE_POKEDATA`) and software breakpoints.

use nix::errno::Errno;
use nix::sys::ptrace;
use nix::unistd::Pid;

use super::super::{WriteMode, arch, sys};
use super::Control;
use crate::error::{Fault, Result, TargetError};
use crate::traits::Memory;

impl Control {
    /// Writes through `/proc/PID/mem`, falling back to `PTRACE_POKEDATA` (which some kernels
    /// require for read-only text: `proc_mem.force_override`).
    pub(in crate::live::tracer) fn write_bytes(
        &mut self,
        pid: i32,
        address: u64,
        data: &[u8],
    ) -> Result<()> {
        let mode = self.options.write_mode;
        let mut proc_error = None;
        if mode != WriteMode::Ptrace {
            match self.traced(pid)?.memory.write(address, data) {
                Ok(()) => return Ok(()),
                Err(e) if mode == WriteMode::ProcMem => return Err(e),
                Err(e) => proc_error = Some(e),
            }
        }
        match self.poke(pid, address, data) {
            Ok(()) => Ok(()),
            Err(e) => Err(proc_error.unwrap_or(e)),
        }
    }

    pub(in crate::live::tracer) fn write_memory(
        &mut self,
        pid: i32,
        address: u64,
        data: &[u8],
    ) -> Result<()> {
        self.traced(pid)?;
        self.write_bytes(pid, address, data)
    }

    /// Registers `data` to be written at `address` just before `pid` is detached (replacing
    /// what was registered there); an empty `data` forgets the address.
    pub(in crate::live::tracer) fn write_on_detach(
        &mut self,
        pid: i32,
        address: u64,
        data: &[u8],
    ) -> Result<()> {
        let parting = &mut self.traced(pid)?.parting;
        if data.is_empty() {
            parting.remove(&address);
        } else {
            parting.insert(address, data.to_vec());
        }
        Ok(())
    }

    /// Forgets every write registered for `pid`'s detach.
    pub(in crate::live::tracer) fn forget_writes_on_detach(&mut self, pid: i32) -> Result<()> {
        self.traced(pid)?.parting.clear();
        Ok(())
    }

    /// `PTRACE_PEEKDATA`/`POKEDATA`, word by word, through a stopped thread (the leader is
    /// stopped for the moment if none is).
    pub(in crate::live::tracer) fn poke(
        &mut self,
        pid: i32,
        address: u64,
        data: &[u8],
    ) -> Result<()> {
        let stopped = self
            .traced(pid)?
            .threads
            .iter()
            .find(|(_, s)| s.stopped)
            .map(|(&t, _)| t);
        let (t, borrowed) = match stopped {
            Some(t) => (t, false),
            None => {
                let _ = ptrace::interrupt(Pid::from_raw(pid));
                self.collect_stops(vec![(pid, pid)])?;
                (pid, true)
            }
        };
        let result = poke_words(Pid::from_raw(t), address, data);
        if borrowed && let Some(s) = self.thread(pid, t) {
            let _ = sys::cont(Pid::from_raw(t), std::mem::take(&mut s.pending));
            s.stopped = false;
        }
        result
    }

    pub(in crate::live::tracer) fn insert_breakpoint(
        &mut self,
        pid: i32,
        address: u64,
    ) -> Result<()> {
        let insn = arch::breakpoint_instruction()?;
        let traced = self.traced(pid)?;
        if traced.breakpoints.contains_key(&address) {
            return Ok(());
        }
        let mut original = vec![0u8; insn.len()];
        traced.memory.read_exact(address, &mut original)?;
        self.write_bytes(pid, address, insn)?;
        self.traced(pid)?.breakpoints.insert(address, original);
        Ok(())
    }

    pub(in crate::live::tracer) fn remove_breakpoint(
        &mut self,
        pid: i32,
        address: u64,
    ) -> Result<()> {
        let Some(original) = self.traced(pid)?.breakpoints.remove(&address) else {
            return Ok(());
        };
        if let Err(e) = self.write_bytes(pid, address, &original) {
            // Still planted: remember it, so that a later detach tries again.
            self.traced(pid)?.breakpoints.insert(address, original);
            return Err(e);
        }
        Ok(())
    }
}

/// Writes `data` at `address` of stopped thread `tid`, one aligned word at a time.
fn poke_words(tid: Pid, address: u64, data: &[u8]) -> Result<()> {
    const WORD: u64 = std::mem::size_of::<libc::c_long>() as u64;
    let unwritable = |e: Errno| TargetError::Unwritable {
        address,
        len: data.len() as u64,
        fault: match e {
            Errno::ESRCH => Fault::ProcessGone,
            Errno::EIO | Errno::EFAULT => Fault::Unmapped,
            e => Fault::Os(format!("PTRACE_POKEDATA: {}", e.desc())),
        },
    };
    let end = address
        .checked_add(data.len() as u64)
        .ok_or(TargetError::Unwritable {
            address,
            len: data.len() as u64,
            fault: Fault::Unmapped,
        })?;
    let mut word_at = address - address % WORD;
    while word_at < end {
        let at = word_at as usize as ptrace::AddressType;
        let mut word = ptrace::read(tid, at).map_err(unwritable)?.to_ne_bytes();
        for (i, byte) in word.iter_mut().enumerate() {
            let a = word_at + i as u64;
            if (address..end).contains(&a)
                && let Some(&b) = data.get((a - address) as usize)
            {
                *byte = b;
            }
        }
        ptrace::write(tid, at, libc::c_long::from_ne_bytes(word)).map_err(unwritable)?;
        word_at += WORD;
    }
    Ok(())
}
