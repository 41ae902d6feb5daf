//! What a core says of a process besides its memory: the `PT_NOTE` contents, read from
//! `/proc/PID` and the threads' registers.

use std::fs::File;

use object::elf;
use object::endian::{LittleEndian as LE, U32};
use zerocopy::IntoBytes;

use super::maps::MapLine;
use super::{CoreWriteError, PAGE, ThreadRegisters};
use crate::corefile::layout::{Prpsinfo64, Prstatus64};

/// What the notes need to know of the process.
#[derive(Debug, Clone, Default)]
pub(super) struct ProcessInfo {
    ppid: i32,
    pgrp: i32,
    sid: i32,
    state: u8,
    nice: i8,
    flags: u64,
    uid: u32,
    gid: u32,
    comm: Vec<u8>,
    args: Vec<u8>,
}

/// Reads `/proc/PID/WHAT`, at most `limit` bytes.
pub(super) fn read_proc(
    pid: u32,
    what: &'static str,
    limit: u64,
) -> Result<Vec<u8>, CoreWriteError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    File::open(format!("/proc/{pid}/{what}"))
        .and_then(|f| f.take(limit).read_to_end(&mut bytes))
        .map_err(|source| CoreWriteError::Proc { pid, what, source })?;
    Ok(bytes)
}

pub(super) fn process_info(pid: u32) -> Result<ProcessInfo, CoreWriteError> {
    let stat = String::from_utf8_lossy(&read_proc(pid, "stat", 4096)?).into_owned();
    let status = String::from_utf8_lossy(&read_proc(pid, "status", 64 << 10)?).into_owned();
    let mut info = ProcessInfo {
        args: read_proc(pid, "cmdline", 80)?,
        ..ProcessInfo::default()
    };
    // comm is in parentheses and may hold anything: the fields follow the last ')'.
    if let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) {
        info.comm = stat.get(open + 1..close).unwrap_or("").as_bytes().to_vec();
        let fields: Vec<&str> = stat
            .get(close + 1..)
            .unwrap_or("")
            .split_whitespace()
            .collect();
        // Field N of proc(5) is fields[N - 3].
        let field = |n: usize| fields.get(n - 3).copied().unwrap_or("0");
        info.state = field(3).bytes().next().unwrap_or(b'?');
        info.ppid = field(4).parse().unwrap_or(0);
        info.pgrp = field(5).parse().unwrap_or(0);
        info.sid = field(6).parse().unwrap_or(0);
        info.flags = field(9).parse().unwrap_or(0);
        info.nice = field(19).parse().unwrap_or(0);
    }
    let id = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (info.uid, info.gid) = (id("Uid:"), id("Gid:"));
    Ok(info)
}

/// A thread's pending and blocked signal sets (`SigPnd`, `SigBlk`), 0 when unreadable.
fn signal_sets(pid: u32, tid: u32) -> (u64, u64) {
    let status =
        std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).unwrap_or_default();
    let mask = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    (mask("SigPnd:"), mask("SigBlk:"))
}

/// The threads of `pid`, main thread first.
pub(super) fn threads(pid: u32) -> Result<Vec<u32>, CoreWriteError> {
    let dir =
        std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|source| CoreWriteError::Proc {
            pid,
            what: "task",
            source,
        })?;
    let mut tids: Vec<u32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    tids.sort_by_key(|&t| (t != pid, t));
    Ok(tids)
}

/// Appends one note: header, name "CORE", descriptor, each padded to 4 bytes.
pub(super) fn push_note(notes: &mut Vec<u8>, n_type: elf::NoteType, desc: &[u8]) {
    const NAME: &[u8] = b"CORE\0";
    let header = elf::NoteHeader64::<LE> {
        n_namesz: U32::new(LE, NAME.len() as u32),
        n_descsz: U32::new(LE, desc.len() as u32),
        n_type: U32::new(LE, n_type),
    };
    notes.extend_from_slice(object::bytes_of(&header));
    for part in [NAME, desc] {
        notes.extend_from_slice(part);
        notes.resize(notes.len().next_multiple_of(4), 0);
    }
}

/// The `PT_NOTE` contents.
pub(super) fn notes(
    pid: u32,
    info: &ProcessInfo,
    threads: &[(u32, ThreadRegisters)],
    auxv: &[u8],
    maps: &[MapLine],
) -> Vec<u8> {
    let mut notes = Vec::new();
    // NT_PRPSINFO.
    let mut ps = Prpsinfo64 {
        pr_state: b"RSDTZW".iter().position(|&c| c == info.state).unwrap_or(0) as u8,
        pr_sname: info.state,
        pr_zomb: u8::from(info.state == b'Z'),
        pr_nice: info.nice,
        _pad0: [0; 4],
        pr_flag: info.flags.into(),
        pr_uid: info.uid.into(),
        pr_gid: info.gid.into(),
        pr_pid: (pid as i32).into(),
        pr_ppid: info.ppid.into(),
        pr_pgrp: info.pgrp.into(),
        pr_sid: info.sid.into(),
        pr_fname: [0; 16],
        pr_psargs: [0; 80],
    };
    for (d, s) in ps.pr_fname.iter_mut().take(15).zip(&info.comm) {
        *d = *s;
    }
    // The arguments, separated by spaces, NUL-terminated within 80 bytes.
    for (d, s) in ps.pr_psargs.iter_mut().take(79).zip(&info.args) {
        *d = if *s == 0 { b' ' } else { *s };
    }
    push_note(&mut notes, elf::NT_PRPSINFO, ps.as_bytes());
    // NT_PRSTATUS (+ NT_FPREGSET) per thread, the main thread first.
    for (tid, regs) in threads {
        let (sigpend, sighold) = signal_sets(pid, *tid);
        let status = Prstatus64 {
            si_signo: 0.into(),
            si_code: 0.into(),
            si_errno: 0.into(),
            pr_cursig: 0.into(),
            _pad0: [0; 2],
            pr_sigpend: sigpend.into(),
            pr_sighold: sighold.into(),
            pr_pid: (*tid as i32).into(),
            pr_ppid: info.ppid.into(),
            pr_pgrp: info.pgrp.into(),
            pr_sid: info.sid.into(),
            times: [0.into(); 8],
            pr_reg: regs.general.map(Into::into),
            pr_fpvalid: i32::from(regs.fp.is_some()).into(),
            _pad1: [0; 4],
        };
        push_note(&mut notes, elf::NT_PRSTATUS, status.as_bytes());
        if let Some(fp) = &regs.fp {
            push_note(&mut notes, elf::NT_PRFPREG, fp.as_slice());
        }
    }
    push_note(&mut notes, elf::NT_AUXV, auxv);
    // NT_FILE: count, page size, (start, end, offset in pages) per file mapping, the paths.
    let files: Vec<&MapLine> = maps.iter().filter(|m| m.is_file()).collect();
    let mut desc = Vec::new();
    for word in [files.len() as u64, PAGE] {
        desc.extend_from_slice(&word.to_le_bytes());
    }
    for m in &files {
        for word in [m.start, m.end, m.offset / PAGE] {
            desc.extend_from_slice(&word.to_le_bytes());
        }
    }
    for m in &files {
        desc.extend_from_slice(m.name.as_bytes());
        desc.push(0);
    }
    push_note(&mut notes, elf::NT_FILE, &desc);
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_padded_to_four_bytes_and_read_back_by_objects_iterator() {
        let mut notes = Vec::new();
        push_note(&mut notes, elf::NT_AUXV, &[1, 2, 3]);
        push_note(&mut notes, elf::NT_FILE, &[]);
        // 12 header + 8 ("CORE\0" padded) + 4 (3 bytes padded); then 12 + 8.
        assert_eq!(notes.len(), 24 + 20);
        let mut it =
            object::read::elf::NoteIterator::<elf::FileHeader64<LE>>::new(LE, 4, &notes).unwrap();
        let first = it.next().unwrap().unwrap();
        assert_eq!(
            (first.name(), first.desc()),
            (&b"CORE"[..], &[1u8, 2, 3][..])
        );
        assert_eq!(it.next().unwrap().unwrap().n_type(LE), elf::NT_FILE);
        assert!(it.next().unwrap().is_none());
    }
}
