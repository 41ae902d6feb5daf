//! Writing an x86-64 ELF core file of a live process that a [`Tracer`] holds stopped: what
//! `gcore` does, written by us ([`write_core`]).
//!
//! The core is what the kernel and gdb write, and what [`CoreFile`](super::CoreFile) and gdb
//! read: an `ET_CORE` file whose `PT_NOTE` holds `NT_PRPSINFO`, one `NT_PRSTATUS` per thread
//! (the main thread first; registers from ptrace, `fs_base` and `gs_base` included) each
//! followed by its `NT_FPREGSET`, `NT_AUXV` (`/proc/PID/auxv`) and `NT_FILE` (the mapped
//! files, from `/proc/PID/smaps`), then one `PT_LOAD` per mapping.
//!
//! Which mappings carry their bytes follows the kernel's default `coredump_filter`
//! (`/proc/PID/smaps` says what the kernel's dumper looks at): anonymous and writable mappings
//! (heap, stacks, `.data`/`.bss`, shared memory), the vDSO, and mappings of files the process
//! has written to (a relocated GOT, `.dynamic`'s `DT_DEBUG`, which debuggers follow to the
//! loaded libraries) do; of the rest of a mapped file, only the first page of an ELF image (its
//! headers and build-id, which debuggers match files by). The other code and read-only data of
//! mapped files keep their segment with `p_filesz` 0: readers take those bytes from the files
//! `NT_FILE` names, unless [`CoreOptions::with_file_backed`] asks for them. Mappings that
//! cannot or must not be read — unreadable ones, `[vvar]`, `[vsyscall]`, devices, those marked
//! `VM_DONTDUMP` or `VM_IO` — keep their segment with `p_filesz` 0. A mapping whose bytes stop
//! being readable part-way (a file mapped past its end) is cut there: its `p_filesz` is what
//! was read, and [`CoreWritten::cut_segments`] counts it.
//!
//! The write is bounded and leaves nothing half-done: the size is planned from the mappings
//! before anything is written and refused past [`CoreOptions::max_bytes`]; memory is copied
//! 1 MiB at a time (the core is never held in memory); the file is written under a temporary
//! name in the destination directory (mode 0600: a core holds the process's secrets), synced,
//! and renamed into place only when whole. On any error the temporary file is removed.

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpir_types::DataModel;
use object::elf;
use object::endian::{LittleEndian as LE, U16, U32, U64};
use thiserror::Error;

use super::layout::{FPREGS, GREGS};
use crate::TargetError;
use crate::live::LiveMemory;
use crate::live::tracer::Tracer;
use crate::traits::Memory;

mod maps;
mod notes;

use maps::parse_smaps;
use notes::{notes, process_info, read_proc, threads};

/// Page size of x86-64 Linux: `NT_FILE` offsets are in pages, dumped segments start on one.
const PAGE: u64 = 4096;
/// Bytes of memory copied per read.
const CHUNK: usize = 1 << 20;
/// Largest `/proc/PID/smaps` read (about 1.1 KiB per mapping: 65 530 mappings, the default
/// `vm.max_map_count`, take about 75 MiB).
const MAX_SMAPS: u64 = 128 << 20;
/// Largest note segment written: what [`CoreFile`](super::CoreFile) reads back.
const MAX_NOTES: u64 = 64 << 20;
/// Program headers an ELF file without section headers can count (`PN_XNUM` is 0xffff).
const MAX_PHNUM: usize = 0xfffe;
/// Bytes of the ELF header and of one program header (ELF64).
const EHDR: u64 = 64;
const PHDR: u64 = 56;

/// The registers of one thread as a core stores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ThreadRegisters {
    /// `user_regs_struct`, the words in the kernel's order (r15 … gs).
    pub(crate) general: [u64; GREGS],
    /// The FXSAVE area, when the kernel gave it.
    pub(crate) fp: Option<Box<[u8; FPREGS]>>,
}

/// Limits and contents of a written core ([`write_core`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoreOptions {
    /// Largest core written, in bytes (default 4 GiB): the size is planned from the mappings
    /// before anything is written, and a larger core is refused
    /// ([`CoreWriteError::TooLarge`]). 4 GiB holds a typical MPI rank's heap, stacks and
    /// shared-memory segments (code is not copied, see [`CoreOptions::file_backed`]) and stays
    /// well below what a shared file system should take per rank without being asked.
    pub max_bytes: u64,
    /// Whether the code and read-only data of mapped files are copied too (default `false`,
    /// as the kernel's default `coredump_filter`: readers take them from the files, so the core
    /// is then only usable where those files are the same).
    pub file_backed: bool,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions {
            max_bytes: 4 << 30,
            file_backed: false,
        }
    }
}

impl CoreOptions {
    /// With another size limit.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// With (or without) the bytes of file-backed read-only mappings.
    pub fn with_file_backed(mut self, file_backed: bool) -> Self {
        self.file_backed = file_backed;
        self
    }
}

/// What [`write_core`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoreWritten {
    /// The core's path (as given).
    pub path: PathBuf,
    /// The process.
    pub pid: u32,
    /// The core's size in bytes.
    pub bytes: u64,
    /// Threads written (`NT_PRSTATUS` notes), the main thread first.
    pub threads: usize,
    /// `PT_LOAD` segments (one per mapping).
    pub segments: usize,
    /// Segments whose bytes are in the core.
    pub dumped_segments: usize,
    /// Segments whose bytes stopped being readable part-way, cut there.
    pub cut_segments: usize,
    /// How long the write took (the process is stopped throughout).
    pub duration: Duration,
}

/// Why [`write_core`] wrote no core. No file is left behind in any case.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum CoreWriteError {
    /// The core would be larger than [`CoreOptions::max_bytes`]: nothing was written.
    #[error("a core of pid {pid} takes {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The process.
        pid: u32,
        /// The core's planned size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The process has more mappings (or threads' notes) than an ELF core without section
    /// headers describes.
    #[error("pid {pid} has {count} {what}, more than a core holds ({limit})")]
    TooMany {
        /// The process.
        pid: u32,
        /// What: "mappings", "bytes of notes".
        what: &'static str,
        /// How many.
        count: u64,
        /// The most a core holds.
        limit: u64,
    },
    /// The directory the core goes into does not exist (or is not a directory).
    #[error("no directory {} to write the core into", dir.display())]
    NoDirectory {
        /// The directory.
        dir: PathBuf,
    },
    /// The file system (or the user's quota) is full.
    #[error("no space left for the core {} after {written} bytes", path.display())]
    NoSpace {
        /// The core being written.
        path: PathBuf,
        /// Bytes written before the file system refused more.
        written: u64,
    },
    /// Creating, writing or syncing the core failed.
    #[error("writing the core {}", path.display())]
    Write {
        /// The core being written.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// Renaming the finished core into place failed (its directory went away…).
    #[error("renaming {} to {}", from.display(), to.display())]
    Rename {
        /// The temporary file (removed).
        from: PathBuf,
        /// The core's path.
        to: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A file of `/proc/PID` could not be read (the process is gone?).
    #[error("reading /proc/{pid}/{what}")]
    Proc {
        /// The process.
        pid: u32,
        /// The file.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The process has no thread to write (it is gone).
    #[error("pid {pid} has no threads")]
    NoThreads {
        /// The process.
        pid: u32,
    },
    /// A thread's registers could not be read: the process is not held stopped by this
    /// tracer, or it runs 32-bit code (only x86-64 cores are written).
    #[error("registers of thread {tid} of pid {pid}")]
    Registers {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
        /// Why.
        #[source]
        source: TargetError,
    },
}

/// A temporary file that is removed unless it was renamed into place.
struct Temporary {
    path: PathBuf,
    kept: bool,
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An I/O error of the write, typed: a full file system is [`CoreWriteError::NoSpace`].
fn write_error(path: &Path, written: u64, source: std::io::Error) -> CoreWriteError {
    match source.raw_os_error() {
        Some(libc::ENOSPC | libc::EDQUOT) => CoreWriteError::NoSpace {
            path: path.to_path_buf(),
            written,
        },
        _ => CoreWriteError::Write {
            path: path.to_path_buf(),
            source,
        },
    }
}

/// Writes an x86-64 ELF core file of process `pid`, which `tracer` holds stopped (every
/// thread, e.g. after [`Tracer::attach`]), to `path` (replacing a file there): see the
/// [module documentation](self) for what it holds. The process is neither resumed nor
/// released: the caller lets it go, on success and on error alike.
///
/// # Errors
/// [`CoreWriteError`]: the core would be larger than `options` allow, the destination
/// directory is missing or full, a thread's registers cannot be read (the process is not
/// held by `tracer`, or it is a 32-bit process), `/proc/PID` cannot be read. No file is left
/// at `path` or beside it.
pub fn write_core(
    tracer: &Tracer,
    pid: u32,
    path: &Path,
    options: &CoreOptions,
) -> Result<CoreWritten, CoreWriteError> {
    let started = Instant::now();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let Some(name) = path.file_name() else {
        return Err(CoreWriteError::Write {
            path: path.to_path_buf(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "no file name"),
        });
    };
    if !dir.is_dir() {
        return Err(CoreWriteError::NoDirectory { dir });
    }

    // Everything the headers say, read while the process stands still.
    let tids = threads(pid)?;
    if tids.is_empty() {
        return Err(CoreWriteError::NoThreads { pid });
    }
    let registers =
        tracer
            .core_registers_many(pid, &tids)
            .map_err(|source| CoreWriteError::Registers {
                pid,
                tid: pid,
                source,
            })?;
    let mut threads = Vec::with_capacity(tids.len());
    for (&tid, r) in tids.iter().zip(registers) {
        let regs = r.map_err(|source| CoreWriteError::Registers { pid, tid, source })?;
        threads.push((tid, regs));
    }
    let smaps = read_proc(pid, "smaps", MAX_SMAPS)?;
    if smaps.len() as u64 >= MAX_SMAPS {
        return Err(CoreWriteError::TooMany {
            pid,
            what: "bytes of /proc/PID/smaps",
            count: smaps.len() as u64,
            limit: MAX_SMAPS,
        });
    }
    let maps = parse_smaps(&String::from_utf8_lossy(&smaps));
    drop(smaps);
    let memory = LiveMemory::new(pid, DataModel::LP64);
    let sizes: Vec<u64> = maps.iter().map(|m| m.dump_size(options, &memory)).collect();
    if maps.len() > MAX_PHNUM - 1 {
        return Err(CoreWriteError::TooMany {
            pid,
            what: "mappings",
            count: maps.len() as u64,
            limit: (MAX_PHNUM - 1) as u64,
        });
    }
    let auxv = read_proc(pid, "auxv", 64 << 10)?;
    let info = process_info(pid)?;
    let notes = notes(pid, &info, &threads, &auxv, &maps);
    if notes.len() as u64 > MAX_NOTES {
        return Err(CoreWriteError::TooMany {
            pid,
            what: "bytes of notes",
            count: notes.len() as u64,
            limit: MAX_NOTES,
        });
    }

    // The plan: headers, notes, then each dumped mapping on a page boundary.
    let phnum = maps.len() + 1;
    let notes_at = EHDR + PHDR * phnum as u64;
    let data_at = (notes_at + notes.len() as u64).next_multiple_of(PAGE);
    let planned = sizes.iter().fold(data_at, |at, s| at.saturating_add(*s));
    if planned > options.max_bytes {
        return Err(CoreWriteError::TooLarge {
            pid,
            size: planned,
            limit: options.max_bytes,
        });
    }

    // The temporary file, beside the core so that the rename cannot cross file systems.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut temp_name = std::ffi::OsString::from(".");
    temp_name.push(name);
    temp_name.push(format!(".{}-{n}.tmp", std::process::id()));
    let temp = Temporary {
        path: dir.join(temp_name),
        kept: false,
    };
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp.path)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => CoreWriteError::NoDirectory { dir: dir.clone() },
            _ => write_error(path, 0, e),
        })?;
    let mut out = BufWriter::with_capacity(CHUNK, file);
    let mut buf = vec![0u8; CHUNK];
    let mut written = 0u64;
    let mut at = data_at;
    let mut phdrs = Vec::with_capacity(phnum);
    let (mut dumped, mut cut) = (0, 0);
    for (m, &want) in maps.iter().zip(&sizes) {
        let mut size = 0u64;
        if want > 0 {
            out.seek(SeekFrom::Start(at))
                .map_err(|e| write_error(path, written, e))?;
            // Copied chunk by chunk until its end, or until it stops being readable.
            while size < want {
                let len = (want - size).min(CHUNK as u64) as usize;
                let chunk = buf.get_mut(..len).unwrap_or_default();
                let got = memory.read_partial(m.start + size, chunk).unwrap_or(0);
                out.write_all(chunk.get(..got).unwrap_or_default())
                    .map_err(|e| write_error(path, written, e))?;
                size += got as u64;
                written += got as u64;
                if got < len {
                    cut += 1;
                    break;
                }
            }
            dumped += usize::from(size > 0);
        }
        phdrs.push(elf::ProgramHeader64::<LE> {
            p_type: U32::new(LE, elf::PT_LOAD),
            p_flags: U32::new(LE, m.flags()),
            p_offset: U64::new(LE, at),
            p_vaddr: U64::new(LE, m.start),
            p_paddr: U64::new(LE, 0),
            p_filesz: U64::new(LE, size),
            p_memsz: U64::new(LE, m.end - m.start),
            p_align: U64::new(LE, PAGE),
        });
        at = (at + size).next_multiple_of(PAGE);
    }
    let end = phdrs
        .iter()
        .map(|p| p.p_offset.get(LE) + p.p_filesz.get(LE))
        .fold(data_at, u64::max);

    // The headers, now that every segment's size is known.
    let header = elf::FileHeader64::<LE> {
        e_ident: elf::Ident {
            magic: elf::ELFMAG,
            class: elf::ELFCLASS64,
            data: elf::ELFDATA2LSB,
            version: elf::EV_CURRENT,
            os_abi: elf::ELFOSABI_NONE,
            abi_version: 0,
            padding: [0; 7],
        },
        e_type: U16::new(LE, elf::ET_CORE),
        e_machine: U16::new(LE, elf::EM_X86_64),
        e_version: U32::new(LE, u32::from(elf::EV_CURRENT.0)),
        e_entry: U64::new(LE, 0),
        e_phoff: U64::new(LE, EHDR),
        e_shoff: U64::new(LE, 0),
        e_flags: U32::new(LE, elf::FileFlags(0)),
        e_ehsize: U16::new(LE, EHDR as u16),
        e_phentsize: U16::new(LE, PHDR as u16),
        e_phnum: U16::new(LE, phnum as u16),
        e_shentsize: U16::new(LE, 0),
        e_shnum: U16::new(LE, 0),
        e_shstrndx: U16::new(LE, elf::SymbolSection(0)),
    };
    let note_header = elf::ProgramHeader64::<LE> {
        p_type: U32::new(LE, elf::PT_NOTE),
        p_flags: U32::new(LE, elf::ProgramFlags(0)),
        p_offset: U64::new(LE, notes_at),
        p_vaddr: U64::new(LE, 0),
        p_paddr: U64::new(LE, 0),
        p_filesz: U64::new(LE, notes.len() as u64),
        p_memsz: U64::new(LE, 0),
        p_align: U64::new(LE, 4),
    };
    let finish = |out: &mut BufWriter<File>| -> std::io::Result<()> {
        out.seek(SeekFrom::Start(0))?;
        out.write_all(object::bytes_of(&header))?;
        out.write_all(object::bytes_of(&note_header))?;
        for p in &phdrs {
            out.write_all(object::bytes_of(p))?;
        }
        out.write_all(&notes)?;
        out.flush()?;
        // A last segment cut short or empty leaves the file shorter than its page-aligned
        // offsets: its length is where the data ends.
        out.get_ref().set_len(end)?;
        out.get_ref().sync_all()
    };
    finish(&mut out).map_err(|e| write_error(path, written, e))?;
    drop(out);
    let mut temp = temp;
    std::fs::rename(&temp.path, path).map_err(|source| CoreWriteError::Rename {
        from: temp.path.clone(),
        to: path.to_path_buf(),
        source,
    })?;
    temp.kept = true;
    Ok(CoreWritten {
        path: path.to_path_buf(),
        pid,
        bytes: end,
        threads: threads.len(),
        segments: maps.len(),
        dumped_segments: dumped,
        cut_segments: cut,
        duration: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_io_error_of_a_full_disk_is_typed() {
        let e = write_error(
            Path::new("/x/core"),
            7,
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert!(
            matches!(e, CoreWriteError::NoSpace { written: 7, .. }),
            "{e}"
        );
        let e = write_error(
            Path::new("/x/core"),
            0,
            std::io::Error::from_raw_os_error(libc::EIO),
        );
        assert!(matches!(e, CoreWriteError::Write { .. }), "{e}");
        assert_eq!(e.to_string(), "writing the core /x/core");
    }
}
