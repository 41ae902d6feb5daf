//! What `/proc` says of a process: the facts that prove (or disprove) that a pid named by a
//! table is the process the table means — owner, start time, parent, executable.
//!
//! Reading these never stops, traces or signals the process. Everything read is treated as
//! hostile: a `comm` with spaces or parentheses, missing fields, a process that exits between
//! two reads.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::{Result, TargetError};

/// A file's identity: device and inode (the same file under any path or link).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(
    clippy::exhaustive_structs,
    reason = "device and inode identify a file, nothing more"
)]
pub struct FileId {
    /// Device.
    pub dev: u64,
    /// Inode.
    pub ino: u64,
}

impl FileId {
    /// The identity of the file at `path` (following links); `None` when it cannot be
    /// stat'ed. Does not open the file.
    pub fn of(path: &Path) -> Option<FileId> {
        std::fs::metadata(path).ok().map(|m| FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }
}

/// The facts `/proc/PID` gives about one process.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProcessFacts {
    /// The pid.
    pub pid: u32,
    /// The parent's pid (0 for a process whose parent is outside this pid namespace).
    pub ppid: u32,
    /// The real user id.
    pub uid: u32,
    /// The state letter (`R`, `S`, `T`, `t`, `Z`…).
    pub state: char,
    /// Start time, in clock ticks after boot: with the pid, it names one process for the
    /// life of the machine (a reused pid has a later start time).
    pub start_time: u64,
    /// `/proc/PID/exe`, when it can be read (another user's process, or a kernel thread, has
    /// none for us).
    pub exe: Option<PathBuf>,
    /// The identity of the executable file, when it can be read.
    pub exe_id: Option<FileId>,
    /// The process's command name (`comm`), as the kernel keeps it.
    pub comm: String,
}

impl ProcessFacts {
    /// Whether the process is a zombie (exited, not yet reaped) or dead.
    pub fn is_gone(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

fn gone(pid: u32, what: &str, reason: impl std::fmt::Display) -> TargetError {
    TargetError::Control {
        pid,
        operation: format!("read /proc/{pid}/{what}"),
        reason: reason.to_string(),
        cause: crate::ControlCause::Other,
    }
}

/// `/proc/PID/stat`: `(ppid, state, start_time, comm)`.
pub fn parse_stat(pid: u32, text: &str) -> Result<(u32, char, u64, String)> {
    // comm is in parentheses and may hold anything, ')' and spaces included: the fields
    // follow the last ')'.
    let open = text.find('(').ok_or_else(|| gone(pid, "stat", "no '('"))?;
    let close = text.rfind(')').ok_or_else(|| gone(pid, "stat", "no ')'"))?;
    let comm = text
        .get(open + 1..close)
        .ok_or_else(|| gone(pid, "stat", "no comm"))?
        .to_string();
    let rest = text
        .get(close + 1..)
        .ok_or_else(|| gone(pid, "stat", "nothing after comm"))?;
    let fields: Vec<&str> = rest.split_ascii_whitespace().collect();
    // Field 3 (state) is fields[0]; field N is fields[N - 3].
    let field = |n: usize| {
        fields
            .get(n - 3)
            .copied()
            .ok_or_else(|| gone(pid, "stat", format!("field {n} missing")))
    };
    let state = field(3)?
        .chars()
        .next()
        .ok_or_else(|| gone(pid, "stat", "empty state"))?;
    let ppid = field(4)?
        .parse()
        .map_err(|e| gone(pid, "stat", format!("ppid: {e}")))?;
    let start_time = field(22)?
        .parse()
        .map_err(|e| gone(pid, "stat", format!("start time: {e}")))?;
    Ok((ppid, state, start_time, comm))
}

/// The real uid from `/proc/PID/status`.
fn parse_uid(pid: u32, text: &str) -> Result<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_ascii_whitespace().next())
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| gone(pid, "status", "no Uid line"))
}

/// Reads a small `/proc` file (bounded).
fn read_small(pid: u32, what: &str) -> Result<String> {
    use std::io::Read;
    let f = std::fs::File::open(format!("/proc/{pid}/{what}")).map_err(|e| gone(pid, what, e))?;
    let mut s = String::new();
    f.take(64 * 1024)
        .read_to_string(&mut s)
        .map_err(|e| gone(pid, what, e))?;
    Ok(s)
}

/// Just the start time of `pid` (one read of `/proc/PID/stat`): for re-checking, right before
/// acting, that a pid still names the process that was proven.
pub fn start_time(pid: u32) -> Result<u64> {
    let text = read_small(pid, "stat")?;
    Ok(parse_stat(pid, &text)?.2)
}

/// The parent of `pid`, or `None` when it cannot be read.
pub fn parent_of(pid: u32) -> Option<u32> {
    let text = read_small(pid, "stat").ok()?;
    parse_stat(pid, &text).ok().map(|(ppid, ..)| ppid)
}

impl ProcessFacts {
    /// Reads the facts of `pid`. A pid that names no process (or a thread that is not a
    /// process's main thread) is an error.
    pub fn read(pid: u32) -> Result<Self> {
        if pid == 0 {
            return Err(gone(0, "stat", "pid 0 names no process"));
        }
        let stat = read_small(pid, "stat")?;
        let (ppid, state, start_time, comm) = parse_stat(pid, &stat)?;
        let status = read_small(pid, "status")?;
        let uid = parse_uid(pid, &status)?;
        // A thread id also has a /proc entry; a table names processes.
        let tgid = status
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse::<u32>().ok());
        if tgid.is_some_and(|t| t != pid) {
            return Err(gone(
                pid,
                "status",
                format!("{pid} is a thread of process {}", tgid.unwrap_or(0)),
            ));
        }
        let exe_link = PathBuf::from(format!("/proc/{pid}/exe"));
        let exe = std::fs::read_link(&exe_link).ok();
        let exe_id = FileId::of(&exe_link);
        Ok(ProcessFacts {
            pid,
            ppid,
            uid,
            state,
            start_time,
            exe,
            exe_id,
            comm,
        })
    }
}

/// The word size of `pid`'s program (4 or 8 bytes), from the ELF class of its executable
/// (`/proc/PID/exe`): an i386 process under a 64-bit tool has 4-byte auxiliary vector entries.
pub fn word_size(pid: u32) -> Result<usize> {
    use std::io::Read;
    let mut ident = [0u8; 5];
    std::fs::File::open(format!("/proc/{pid}/exe"))
        .and_then(|mut f| f.read_exact(&mut ident))
        .map_err(|e| gone(pid, "exe", e))?;
    match ident {
        [0x7f, b'E', b'L', b'F', 1] => Ok(4),
        [0x7f, b'E', b'L', b'F', 2] => Ok(8),
        [0x7f, b'E', b'L', b'F', c] => Err(gone(pid, "exe", format!("unknown ELF class {c}"))),
        _ => Err(gone(pid, "exe", "not an ELF file")),
    }
}

/// `AT_ENTRY` from `/proc/PID/auxv`: the entry point of the program `pid` runs, read with the
/// program's own word size.
pub fn entry_point(pid: u32) -> Result<u64> {
    let word = word_size(pid)?;
    let auxv = {
        use std::io::Read;
        let f =
            std::fs::File::open(format!("/proc/{pid}/auxv")).map_err(|e| gone(pid, "auxv", e))?;
        let mut v = Vec::new();
        f.take(64 * 1024)
            .read_to_end(&mut v)
            .map_err(|e| gone(pid, "auxv", e))?;
        v
    };
    parse_auxv_entry(&auxv, word)
        .ok_or_else(|| {
            gone(
                pid,
                "auxv",
                format!("no AT_ENTRY among its {}-byte entries", 2 * word),
            )
        })
        .and_then(|v| {
            if v == 0 {
                Err(gone(pid, "auxv", "AT_ENTRY is 0"))
            } else {
                Ok(v)
            }
        })
}

/// `AT_ENTRY` (type 9) in an auxiliary vector of `word`-byte (4 or 8) native-endian words.
pub fn parse_auxv_entry(auxv: &[u8], word: usize) -> Option<u64> {
    const AT_ENTRY: u64 = 9;
    const AT_NULL: u64 = 0;
    let get = |b: &[u8]| -> u64 {
        match word {
            4 => u64::from(u32::from_ne_bytes(b.try_into().unwrap_or([0; 4]))),
            _ => u64::from_ne_bytes(b.try_into().unwrap_or([0; 8])),
        }
    };
    if word != 4 && word != 8 {
        return None;
    }
    for kv in auxv.chunks_exact(2 * word) {
        let key = get(kv.get(..word)?);
        let value = get(kv.get(word..)?);
        if key == AT_ENTRY {
            return Some(value);
        }
        if key == AT_NULL {
            return None;
        }
    }
    None
}

/// The working directory of `pid`, when it can be read.
pub fn cwd_of(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/cwd")).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_a_hostile_comm() {
        let line = "42 (a) b (c)) S 7 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 12345 1000 10";
        let (ppid, state, start, comm) = parse_stat(42, line).unwrap();
        assert_eq!(
            (ppid, state, start, comm.as_str()),
            (7, 'S', 12345, "a) b (c)")
        );
        assert!(parse_stat(42, "42 (x) S 1").is_err());
        assert!(parse_stat(42, "no parens").is_err());
        assert!(
            parse_stat(
                42,
                "42 (x) S notanumber 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 5"
            )
            .is_err()
        );
    }

    #[test]
    fn auxv_entries_of_both_widths() {
        let mut v64 = Vec::new();
        for (k, v) in [(6u64, 4096u64), (9, 0x401000), (0, 0)] {
            v64.extend_from_slice(&k.to_ne_bytes());
            v64.extend_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(parse_auxv_entry(&v64, 8), Some(0x401000));
        let mut v32 = Vec::new();
        for (k, v) in [(6u32, 4096u32), (9, 0x8049000), (0, 0)] {
            v32.extend_from_slice(&k.to_ne_bytes());
            v32.extend_from_slice(&v.to_ne_bytes());
        }
        assert_eq!(parse_auxv_entry(&v32, 4), Some(0x8049000));
        // Read with the wrong width, the 32-bit vector has no AT_ENTRY where it is looked for.
        assert_ne!(parse_auxv_entry(&v32, 8), Some(0x8049000));
        // Hostile: truncated, no AT_ENTRY before AT_NULL, a width that is no width.
        assert_eq!(parse_auxv_entry(&v64[..20], 8), None);
        assert_eq!(parse_auxv_entry(&[0u8; 32], 8), None);
        assert_eq!(parse_auxv_entry(&v64, 3), None);
    }

    #[test]
    #[cfg_attr(miri, ignore = "reads /proc, which Miri's isolation forbids")]
    fn facts_of_this_process() {
        let me = std::process::id();
        let f = ProcessFacts::read(me).unwrap();
        assert_eq!(f.pid, me);
        assert_eq!(f.ppid, std::os::unix::process::parent_id());
        // The owner of /proc/self is our uid (for an ordinary process).
        assert_eq!(
            f.uid,
            std::fs::metadata("/proc/self")
                .map(|m| std::os::unix::fs::MetadataExt::uid(&m))
                .unwrap()
        );
        assert_eq!(f.exe.as_deref(), std::env::current_exe().ok().as_deref());
        assert_eq!(start_time(me).unwrap(), f.start_time);
        assert_eq!(word_size(me).unwrap(), std::mem::size_of::<usize>());
        assert!(entry_point(me).unwrap() > 0);
        assert!(!f.is_gone());
        assert!(ProcessFacts::read(0).is_err());
        assert!(ProcessFacts::read(u32::MAX).is_err());
    }
}
