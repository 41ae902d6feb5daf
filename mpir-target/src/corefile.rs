//! Core files: the same [`Target`](crate::Target) interface over a process that is gone.
//!
//! Memory comes from the core's `PT_LOAD` data, or — for what the kernel or gcore did not dump,
//! typically code and read-only data of mapped files — from the files its `NT_FILE` note lists.
//! Threads come from `NT_PRSTATUS`, the auxiliary vector from `NT_AUXV`, and the images (for
//! symbols and types) from `NT_FILE`, so lookups work exactly as on a live process. The core is
//! read on demand (`pread`), never loaded whole: cores of large jobs are large.
//!
//! [`write`](mod@write) writes such cores of live x86-64 processes held stopped
//! ([`write::write_core`]: `gcore`, written by us).

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use mpir_types::{ByteOrder, DataModel, View};
use object::read::elf::{FileHeader, NoteIterator, ProgramHeader};
use object::{Endianness, elf};

use crate::debuginfo::{DebugInfoError, DebugOptions, ProcessImages};
use crate::error::{Fault, Result, TargetError};
use crate::image_target::ImageTarget;
use crate::traits::Memory;

mod layout;
pub mod write;

/// Largest note segment read (notes of a core with thousands of threads stay far below).
const MAX_NOTES: u64 = 64 << 20;
/// `AT_PHDR`, `AT_ENTRY` in the auxiliary vector.
const AT_PHDR: u64 = 3;
const AT_ENTRY: u64 = 9;

/// A `PT_LOAD` segment of the core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoreSegment {
    /// Start address in the process.
    pub vaddr: u64,
    /// Size in the process.
    pub mem_size: u64,
    /// Where its dumped bytes start in the core.
    pub offset: u64,
    /// How many bytes were dumped (0: none, e.g. file-backed code).
    pub file_size: u64,
}

/// A file mapping from the `NT_FILE` note.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoreMapping {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Offset in the file, in bytes.
    pub file_offset: u64,
    /// The file's path (as it was on the machine that dumped the core).
    pub path: PathBuf,
}

/// A thread from an `NT_PRSTATUS` note.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CoreThread {
    /// Thread id (the first thread's is the process id).
    pub tid: u32,
    /// The signal it was stopped by (`pr_cursig`).
    pub signal: u16,
    /// Its registers (`pr_reg`), for the unwinder: x86_64 and i386 cores only.
    pub registers: Option<crate::unwind::Registers>,
}

/// An opened core file.
#[derive(Debug)]
pub struct CoreFile {
    path: PathBuf,
    file: File,
    model: DataModel,
    segments: Vec<CoreSegment>,
    mappings: Vec<CoreMapping>,
    threads: Vec<CoreThread>,
    auxv: Vec<(u64, u64)>,
    files: Mutex<HashMap<PathBuf, Option<File>>>,
    /// The file's length when opened.
    len: u64,
}

/// A core file shorter than its own segments say (a dump cut short by `ulimit -c`, a full disk
/// or a partial copy): memory past `length` reads as unavailable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Truncation {
    /// The bytes the segments' dumped data needs (the end of the last one).
    pub needed: u64,
    /// The bytes the file has.
    pub length: u64,
    /// Segments whose dumped bytes are wholly or partly missing.
    pub segments_cut: usize,
}

impl std::fmt::Display for Truncation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "truncated: its segments need {} bytes, the file has {} ({} segment(s) cut; memory \
             in them reads as unavailable)",
            self.needed, self.length, self.segments_cut
        )
    }
}

fn elf_err(path: &Path, e: impl std::fmt::Display) -> DebugInfoError {
    DebugInfoError::Elf {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

fn read_at(file: &File, path: &Path, offset: u64, len: u64) -> Result<Vec<u8>, DebugInfoError> {
    let mut buf = vec![0u8; usize::try_from(len).map_err(|e| elf_err(path, e))?];
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(
            buf.get_mut(done..).unwrap_or_default(),
            offset.saturating_add(done as u64),
        ) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) => return Err(DebugInfoError::io(path, &e)),
        }
    }
    buf.truncate(done);
    Ok(buf)
}

/// What the headers and notes of a core say.
struct Parsed {
    model: DataModel,
    segments: Vec<CoreSegment>,
    mappings: Vec<CoreMapping>,
    threads: Vec<CoreThread>,
    auxv: Vec<(u64, u64)>,
}

fn parse<Elf: FileHeader<Endian = Endianness>>(
    file: &File,
    path: &Path,
    prefix: &[u8],
) -> Result<Parsed, DebugInfoError> {
    let header = Elf::parse(prefix).map_err(|e| elf_err(path, e))?;
    let endian = header.endian().map_err(|e| elf_err(path, e))?;
    if header.e_type(endian) != elf::ET_CORE {
        return Err(elf_err(path, "not a core file (e_type is not ET_CORE)"));
    }
    let phdrs = header
        .program_headers(endian, prefix)
        .map_err(|e| elf_err(path, format!("program headers: {e}")))?;
    let order = if endian == Endianness::Little {
        ByteOrder::Little
    } else {
        ByteOrder::Big
    };
    let model = match (Elf::is_type_64_sized(), order) {
        (true, ByteOrder::Little) => DataModel::LP64,
        (true, ByteOrder::Big) => DataModel::LP64_BE,
        (false, ByteOrder::Little) => DataModel::ILP32,
        (false, ByteOrder::Big) => DataModel::ILP32_BE,
    };
    let word = model.pointer_size();
    let arch = match header.e_machine(endian) {
        elf::EM_X86_64 if word == 8 => Some(crate::unwind::Arch::X86_64),
        elf::EM_386 if word == 4 => Some(crate::unwind::Arch::I386),
        _ => None,
    };
    let mut parsed = Parsed {
        model,
        segments: Vec::new(),
        mappings: Vec::new(),
        threads: Vec::new(),
        auxv: Vec::new(),
    };
    for ph in phdrs {
        let (offset, size) = (ph.p_offset(endian).into(), ph.p_filesz(endian).into());
        if ph.p_type(endian) == elf::PT_LOAD {
            parsed.segments.push(CoreSegment {
                vaddr: ph.p_vaddr(endian).into(),
                mem_size: ph.p_memsz(endian).into(),
                offset,
                file_size: size,
            });
            continue;
        }
        if ph.p_type(endian) != elf::PT_NOTE || size == 0 {
            continue;
        }
        if size > MAX_NOTES {
            return Err(elf_err(path, format!("note segment of {size} bytes")));
        }
        let data = read_at(file, path, offset, size)?;
        let mut notes = NoteIterator::<Elf>::new(endian, ph.p_align(endian), &data)
            .map_err(|e| elf_err(path, e))?;
        while let Some(note) = notes
            .next()
            .map_err(|e| elf_err(path, format!("notes: {e}")))?
        {
            let v = View::new(model, 0, note.desc());
            let n_type = note.n_type(endian);
            if n_type == elf::NT_PRSTATUS {
                let pid = v.uint(prstatus::pid_at(word), 4, "pr_pid");
                let sig = v.uint(prstatus::CURSIG_AT, 2, "pr_cursig");
                if let (Ok(tid), Ok(signal)) = (pid, sig) {
                    let reg_at = prstatus::reg_at(word);
                    let registers = arch.and_then(|arch| {
                        let words: Vec<u64> = (0..27)
                            .map_while(|i| v.uint(reg_at + i * word, word, "pr_reg").ok())
                            .collect();
                        crate::unwind::Registers::from_user_regs(arch, &words)
                    });
                    parsed.threads.push(CoreThread {
                        tid: tid as u32,
                        signal: signal as u16,
                        registers,
                    });
                }
            } else if n_type == elf::NT_AUXV {
                let mut i = 0;
                while let (Ok(k), Ok(val)) =
                    (v.uint(i, word, "a_type"), v.uint(i + word, word, "a_val"))
                {
                    if k == 0 {
                        break;
                    }
                    parsed.auxv.push((k, val));
                    i += 2 * word;
                }
            } else if n_type == elf::NT_FILE {
                parsed.mappings = parse_nt_file(&v, word).map_err(|e| elf_err(path, e))?;
            }
        }
    }
    Ok(parsed)
}

/// Where `struct elf_prstatus`'s fields are, for a word of `word` bytes (the layout the
/// writer's `layout::Prstatus64` spells out for x86-64, checked against it below).
mod prstatus {
    /// siginfo (3 ints), then `short pr_cursig`.
    pub(super) const CURSIG_AT: u64 = 12;

    /// After the cursig (padded to a word) and two words of signal sets.
    pub(super) fn pid_at(word: u64) -> u64 {
        16 + 2 * word
    }

    /// After pr_pid, pr_ppid, pr_pgrp, pr_sid and four timevals (two words each).
    pub(super) fn reg_at(word: u64) -> u64 {
        pid_at(word) + 16 + 8 * word
    }
}

/// `NT_FILE`: count, page size, count × (start, end, offset in pages), then count paths.
fn parse_nt_file(v: &View<'_>, word: u64) -> Result<Vec<CoreMapping>, mpir_types::DecodeError> {
    let count = v.uint(0, word, "NT_FILE count")?;
    let page = v.uint(word, word, "NT_FILE page size")?;
    // Each entry needs three words: a count the note cannot hold is refused before allocating.
    let max = v.len() as u64 / (3 * word);
    if count > max {
        return Err(mpir_types::DecodeError::TooLarge {
            what: "NT_FILE count".into(),
            value: count,
            limit: max,
        });
    }
    let mut names_at = 2 * word + count * 3 * word;
    let mut out = Vec::with_capacity(count as usize);
    for i in 0..count {
        let at = 2 * word + i * 3 * word;
        let start = v.uint(at, word, "NT_FILE start")?;
        let end = v.uint(at + word, word, "NT_FILE end")?;
        let pages = v.uint(at + 2 * word, word, "NT_FILE offset")?;
        let name = v.cstr(names_at, 4096, "NT_FILE path")?;
        names_at += name.len() as u64 + 1;
        out.push(CoreMapping {
            start,
            end,
            file_offset: pages.saturating_mul(page),
            path: PathBuf::from(String::from_utf8_lossy(name).into_owned()),
        });
    }
    Ok(out)
}

/// Where the program header table ends, from an ELF header.
fn program_headers_end<Elf: FileHeader<Endian = Endianness>>(head: &[u8]) -> Option<u64> {
    let h = Elf::parse(head).ok()?;
    let e = h.endian().ok()?;
    let count = u64::from(h.e_phnum(e));
    let size = u64::from(h.e_phentsize(e));
    Into::<u64>::into(h.e_phoff(e)).checked_add(count.checked_mul(size)?)
}

impl CoreFile {
    /// Opens and parses `path` (headers and notes only).
    pub fn open(path: &Path) -> Result<Self> {
        let file = crate::files::open_regular(path).map_err(|e| DebugInfoError::io(path, &e))?;
        let len = file
            .metadata()
            .map_err(|e| DebugInfoError::io(path, &e))?
            .len();
        // The ELF header says where the program headers end; cores put them first.
        let head = read_at(&file, path, 0, 64)?;
        let is64 = head.get(4) == Some(&2);
        let phdrs_end = if is64 {
            program_headers_end::<object::elf::FileHeader64<Endianness>>(&head)
        } else {
            program_headers_end::<object::elf::FileHeader32<Endianness>>(&head)
        };
        let prefix = read_at(
            &file,
            path,
            0,
            phdrs_end.unwrap_or(64).clamp(64, MAX_NOTES).min(len),
        )?;
        let parsed = if is64 {
            parse::<object::elf::FileHeader64<Endianness>>(&file, path, &prefix)?
        } else {
            parse::<object::elf::FileHeader32<Endianness>>(&file, path, &prefix)?
        };
        let (mut segments, mut mappings) = (parsed.segments, parsed.mappings);
        segments.sort_by_key(|s| s.vaddr);
        mappings.sort_by_key(|m| m.start);
        Ok(CoreFile {
            path: path.to_path_buf(),
            file,
            model: parsed.model,
            segments,
            mappings,
            threads: parsed.threads,
            auxv: parsed.auxv,
            files: Mutex::new(HashMap::new()),
            len,
        })
    }

    /// Whether the file is shorter than its segments' dumped data: `None` for a whole core.
    pub fn truncation(&self) -> Option<Truncation> {
        let end = |s: &CoreSegment| s.offset.saturating_add(s.file_size);
        let needed = self.segments.iter().map(end).max()?;
        let segments_cut = self.segments.iter().filter(|s| end(s) > self.len).count();
        (needed > self.len).then_some(Truncation {
            needed,
            length: self.len,
            segments_cut,
        })
    }

    /// The core's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `PT_LOAD` segments.
    pub fn segments(&self) -> &[CoreSegment] {
        &self.segments
    }

    /// File mappings (`NT_FILE`).
    pub fn mappings(&self) -> &[CoreMapping] {
        &self.mappings
    }

    /// Threads (`NT_PRSTATUS`), the first one is the process.
    pub fn threads(&self) -> &[CoreThread] {
        &self.threads
    }

    /// The process id, from the first thread.
    pub fn pid(&self) -> Option<u32> {
        self.threads.first().map(|t| t.tid)
    }

    /// The auxiliary vector (`NT_AUXV`).
    pub fn auxv(&self) -> &[(u64, u64)] {
        &self.auxv
    }

    /// The main executable: the mapping containing `AT_ENTRY` (or `AT_PHDR`).
    pub fn executable(&self) -> Option<&Path> {
        let at = |key| self.auxv.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        let addr = at(AT_ENTRY).or_else(|| at(AT_PHDR))?;
        self.mappings
            .iter()
            .find(|m| addr >= m.start && addr < m.end)
            .map(|m| m.path.as_path())
    }

    /// Takes the main executable from `exe` instead of the path the core names (it was moved,
    /// or the core comes from another machine): every mapping of that file is read from
    /// `exe`. Returns the path replaced, or `None` when the core does not say which mapping is
    /// the executable (then nothing changes).
    pub fn replace_executable(&mut self, exe: &Path) -> Option<PathBuf> {
        let old = self.executable()?.to_path_buf();
        for m in &mut self.mappings {
            if m.path == old {
                m.path = exe.to_path_buf();
            }
        }
        Some(old)
    }

    /// The images of the dumped process, for symbols and types.
    pub fn images(&self, options: DebugOptions) -> Result<ProcessImages> {
        let mappings: Vec<(PathBuf, u64, u64)> = self
            .mappings
            .iter()
            .map(|m| (m.path.clone(), m.start, m.file_offset))
            .collect();
        ProcessImages::from_mappings(&mappings, self.executable(), options)
    }

    /// Bytes of a mapped file at `offset`, for memory the core did not dump.
    fn read_mapped(&self, path: &Path, offset: u64, buf: &mut [u8]) -> usize {
        if crate::files::is_kernel_interface(path) {
            return 0; // a device or /proc, /sys file named by the core: not read
        }
        let mut files = self.files.lock().unwrap_or_else(|e| e.into_inner());
        let file = files
            .entry(path.to_path_buf())
            .or_insert_with(|| crate::files::open_regular(path).ok());
        file.as_ref()
            .and_then(|f| f.read_at(buf, offset).ok())
            .unwrap_or(0)
    }

    /// Reads what one segment or mapping holds at `at`; 0 when nothing does. Segments and
    /// mappings are sorted by address (at open), so both lookups are binary searches: a read
    /// per string of a million-entry table must not scan thousands of mappings each time.
    fn read_piece(&self, at: u64, buf: &mut [u8]) -> usize {
        let seg = self
            .segments
            .partition_point(|s| s.vaddr <= at)
            .checked_sub(1)
            .and_then(|i| self.segments.get(i))
            .filter(|s| at - s.vaddr < s.mem_size);
        if let Some(seg) = seg {
            let off = at - seg.vaddr;
            if off < seg.file_size {
                // Offsets come from the core: a hostile one must not overflow.
                let Some(pos) = seg.offset.checked_add(off) else {
                    return 0;
                };
                let n = (seg.file_size - off).min(buf.len() as u64) as usize;
                let dst = buf.get_mut(..n).unwrap_or_default();
                return self.file.read_at(dst, pos).unwrap_or(0);
            }
        }
        // Not dumped: code and read-only data come from the mapped file.
        let mapping = self
            .mappings
            .partition_point(|m| m.start <= at)
            .checked_sub(1)
            .and_then(|i| self.mappings.get(i))
            .filter(|m| at < m.end);
        if let Some(m) = mapping
            && let Some(pos) = m.file_offset.checked_add(at - m.start)
        {
            let n = (m.end - at).min(buf.len() as u64) as usize;
            let dst = buf.get_mut(..n).unwrap_or_default();
            return self.read_mapped(&m.path, pos, dst);
        }
        0
    }
}

impl Memory for CoreFile {
    fn data_model(&self) -> DataModel {
        self.model
    }

    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            let n = self.read_piece(
                address.wrapping_add(done as u64),
                buf.get_mut(done..).unwrap_or_default(),
            );
            if n == 0 {
                break;
            }
            done += n;
        }
        if done == 0 && !buf.is_empty() {
            return Err(TargetError::Unreadable {
                address,
                len: buf.len() as u64,
                fault: Fault::Unmapped,
            });
        }
        Ok(done)
    }

    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        Err(TargetError::Unwritable {
            address,
            len: data.len() as u64,
            fault: Fault::Unsupported,
        })
    }
}

/// A core file as a complete [`Target`](crate::Target): its memory and its images.
pub type CoreTarget = ImageTarget<CoreFile>;

impl ImageTarget<CoreFile> {
    /// Opens a core file; the files it maps are looked up at the paths it names.
    pub fn open(path: &Path, options: DebugOptions) -> Result<Self> {
        let core = CoreFile::open(path)?;
        let images = core.images(options)?;
        Ok(ImageTarget::new(core, images))
    }

    /// Opens a core file whose main executable is now at `exe` (see
    /// [`CoreFile::replace_executable`]); the other files it maps are looked up at the paths
    /// it names.
    pub fn open_with_executable(path: &Path, exe: &Path, options: DebugOptions) -> Result<Self> {
        let mut core = CoreFile::open(path)?;
        core.replace_executable(exe);
        let images = core.images(options)?;
        Ok(ImageTarget::new(core, images))
    }

    /// The core.
    pub fn core(&self) -> &CoreFile {
        self.memory()
    }
}

#[cfg(test)]
mod tests {
    use super::layout::Prstatus64;
    use super::prstatus;

    #[test]
    fn the_reader_finds_prstatus_fields_where_the_writer_puts_them() {
        assert_eq!(
            std::mem::offset_of!(Prstatus64, pr_cursig) as u64,
            prstatus::CURSIG_AT
        );
        assert_eq!(
            std::mem::offset_of!(Prstatus64, pr_pid) as u64,
            prstatus::pid_at(8)
        );
        assert_eq!(
            std::mem::offset_of!(Prstatus64, pr_reg) as u64,
            prstatus::reg_at(8)
        );
    }
}
