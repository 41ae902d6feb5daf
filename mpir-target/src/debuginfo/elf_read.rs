//! Which parts of an ELF file are read, and when: [`read_headers`] when the file is opened (the
//! ELF header, program and section headers, section names, notes and the debug-link sections:
//! a few kilobytes in a handful of `pread`s), [`read_symbols`] when its symbols are first wanted
//! (the symbol tables and their string tables). A rank maps ~85 files, and a stacks read wants
//! the symbols of the few its threads are in, while a warm symbol store answers name lookups
//! without them: reading every symbol table at open was a quarter of a one-shot `mpir stacks`.
//!
//! The bytes read are a [`Sparse`] view of the file: reading outside them is an error, which
//! the parser reports as a malformed file rather than reading garbage. Offsets and sizes come
//! from the file and are hostile: every range is clamped to the file's length, so a read never
//! asks for more than the file holds.

use object::ReadRef;
use object::elf::{FileHeader32, FileHeader64};
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};

/// The first read of a file: the ELF header and, in practice, its program headers and notes.
const FIRST_READ: u64 = 4096;

/// Where bytes come from: a file (`pread`) or bytes in memory (fuzzing, tests).
pub(super) trait Source {
    /// Bytes `[start, end)`, all of them.
    fn read_range(&self, start: u64, end: u64) -> std::io::Result<Vec<u8>>;
}

impl Source for std::fs::File {
    fn read_range(&self, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        let mut buf = vec![0u8; usize::try_from(end - start).map_err(std::io::Error::other)?];
        self.read_exact_at(&mut buf, start)?;
        Ok(buf)
    }
}

impl Source for [u8] {
    fn read_range(&self, start: u64, end: u64) -> std::io::Result<Vec<u8>> {
        let range = usize::try_from(start).ok().zip(usize::try_from(end).ok());
        range
            .and_then(|(start, end)| self.get(start..end))
            .map(<[u8]>::to_vec)
            .ok_or_else(|| std::io::ErrorKind::UnexpectedEof.into())
    }
}

/// Some ranges of a file, read into memory; the rest is absent.
#[derive(Debug, Clone)]
pub(super) struct Sparse {
    len: u64,
    /// Disjoint, sorted by start: (start, bytes).
    chunks: Vec<(u64, Vec<u8>)>,
}

impl Sparse {
    /// Nothing read yet of a file of `len` bytes.
    pub(super) fn empty(len: u64) -> Self {
        Sparse {
            len,
            chunks: Vec::new(),
        }
    }

    /// Reads the `(offset, size)` ranges not held yet from `src` (clamped to the file's
    /// length; ranges that touch are read as one).
    pub(super) fn fill(
        &mut self,
        src: &(impl Source + ?Sized),
        ranges: impl IntoIterator<Item = (u64, u64)>,
    ) -> std::io::Result<()> {
        let held = self
            .chunks
            .iter()
            .map(|(s, b)| (*s, b.len() as u64))
            .collect::<Vec<_>>();
        let wanted: Vec<(u64, u64)> = ranges.into_iter().collect();
        if wanted
            .iter()
            .all(|&(s, n)| n == 0 || s >= self.len || self.covers(s, n.min(self.len - s)))
        {
            return Ok(());
        }
        let merged = merge(held.into_iter().chain(wanted).collect(), self.len);
        let mut chunks = Vec::with_capacity(merged.len());
        for (start, end) in merged {
            // The bytes held already (each chunk lies inside one merged range) are kept; only
            // the gaps between them are read.
            let mut bytes = Vec::new();
            let mut at = start;
            for (s, b) in self.chunks.iter().filter(|(s, _)| (start..end).contains(s)) {
                if *s > at {
                    bytes.extend(src.read_range(at, *s)?);
                }
                bytes.extend_from_slice(b);
                at = s + b.len() as u64;
            }
            if at < end {
                bytes.extend(src.read_range(at, end)?);
            }
            chunks.push((start, bytes));
        }
        self.chunks = chunks;
        Ok(())
    }

    /// Whether `[start, start + size)` is held in one chunk.
    fn covers(&self, start: u64, size: u64) -> bool {
        self.chunk(start)
            .is_some_and(|(bytes, at)| (bytes.len() - at) as u64 >= size)
    }

    /// The chunk holding `offset`, and `offset`'s index in it.
    fn chunk(&self, offset: u64) -> Option<(&[u8], usize)> {
        let i = self
            .chunks
            .partition_point(|(s, _)| *s <= offset)
            .checked_sub(1)?;
        let (start, bytes) = self.chunks.get(i)?;
        let at = usize::try_from(offset - start).ok()?;
        (at < bytes.len()).then_some((bytes.as_slice(), at))
    }
}

/// Sorted, merged `[start, end)` ranges of (offset, size) pairs, clamped to `len`.
fn merge(mut ranges: Vec<(u64, u64)>, len: u64) -> Vec<(u64, u64)> {
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::new();
    for (start, size) in ranges {
        let end = start.saturating_add(size).min(len);
        if start >= end {
            continue;
        }
        match merged.last_mut() {
            Some((_, e)) if start <= *e => *e = (*e).max(end),
            _ => merged.push((start, end)),
        }
    }
    merged
}

impl<'a> ReadRef<'a> for &'a Sparse {
    fn len(self) -> Result<u64, ()> {
        Ok(self.len)
    }

    fn read_bytes_at(self, offset: u64, size: u64) -> Result<&'a [u8], ()> {
        if size == 0 {
            return Ok(&[]);
        }
        let (bytes, at) = self.chunk(offset).ok_or(())?;
        let end = at
            .checked_add(usize::try_from(size).map_err(|_| ())?)
            .ok_or(())?;
        bytes.get(at..end).ok_or(())
    }

    fn read_bytes_at_until(
        self,
        range: std::ops::Range<u64>,
        delimiter: u8,
    ) -> Result<&'a [u8], ()> {
        let (bytes, at) = self.chunk(range.start).ok_or(())?;
        let limit = usize::try_from(range.end.saturating_sub(range.start)).unwrap_or(usize::MAX);
        let rest = bytes.get(at..).ok_or(())?;
        let rest = rest.get(..limit.min(rest.len())).ok_or(())?;
        let n = rest.iter().position(|&b| b == delimiter).ok_or(())?;
        rest.get(..n).ok_or(())
    }
}

/// Why the headers could not be read: the file's own fault (`Format`) or the system's.
#[derive(Debug)]
pub(super) enum ReadError {
    Io(std::io::Error),
    Format(object::Error),
}

impl From<std::io::Error> for ReadError {
    fn from(e: std::io::Error) -> Self {
        ReadError::Io(e)
    }
}

impl From<object::Error> for ReadError {
    fn from(e: object::Error) -> Self {
        ReadError::Format(e)
    }
}

/// The names of the sections read with the headers (besides notes): what leads to separate
/// debug information.
pub(super) const LINK_SECTIONS: [&[u8]; 2] = [b".gnu_debuglink", b".gnu_debugaltlink"];

/// The headers of the ELF file of `len` bytes in `src`: ELF header, program headers, section
/// headers, section names, notes (sections and segments) and [`LINK_SECTIONS`]. A file too
/// short or not ELF yields what was read (the parser then says what is wrong).
pub(super) fn read_headers(src: &(impl Source + ?Sized), len: u64) -> Result<Sparse, ReadError> {
    let mut s = Sparse::empty(len);
    s.fill(src, [(0, FIRST_READ)])?;
    // EI_CLASS: 1 for 32-bit, 2 for 64-bit; anything else is left to the parser.
    match (&s)
        .read_bytes_at(4, 1)
        .ok()
        .and_then(|b| b.first().copied())
    {
        Some(2) => headers_of::<FileHeader64<object::Endianness>>(src, &mut s)?,
        Some(1) => headers_of::<FileHeader32<object::Endianness>>(src, &mut s)?,
        _ => {}
    }
    Ok(s)
}

fn headers_of<Elf: FileHeader<Endian = object::Endianness>>(
    src: &(impl Source + ?Sized),
    s: &mut Sparse,
) -> Result<(), ReadError> {
    let (endian, phoff, shoff, phentsize, shentsize, phnum, shnum) = {
        let header = Elf::parse(&*s)?;
        let endian = header.endian()?;
        (
            endian,
            header.e_phoff(endian).into(),
            header.e_shoff(endian).into(),
            u64::from(header.e_phentsize(endian)),
            u64::from(header.e_shentsize(endian)),
            u64::from(header.e_phnum(endian)).max(1),
            u64::from(header.e_shnum(endian)).max(1),
        )
    };
    // The headers as the ELF header counts them (a file with more than 0xffff sections or
    // segments has the real counts in section 0: read below). Reading the section names
    // along (before the section headers in practice) was measured slower: 4 KiB more of
    // each of ~200 files.
    s.fill(
        src,
        [
            (phoff, phentsize.saturating_mul(phnum)),
            (shoff, shentsize.saturating_mul(shnum)),
        ],
    )?;
    let (phnum, shnum) = {
        let header = Elf::parse(&*s)?;
        (header.phnum(endian, &*s)?, header.shnum(endian, &*s)?)
    };
    s.fill(
        src,
        [
            (phoff, phentsize.saturating_mul(phnum as u64)),
            (shoff, shentsize.saturating_mul(shnum as u64)),
        ],
    )?;
    // Section names and notes of segments.
    let ranges = {
        let header = Elf::parse(&*s)?;
        let mut v = Vec::new();
        for ph in header.program_headers(endian, &*s)? {
            if ph.p_type(endian) == object::elf::PT_NOTE {
                v.push((ph.p_offset(endian).into(), ph.p_filesz(endian).into()));
            }
        }
        let shdrs = header.section_headers(endian, &*s)?;
        let shstrndx = header.shstrndx(endian, &*s)? as usize;
        if let Some(sh) = shdrs.get(shstrndx) {
            v.push(file_range(sh, endian));
        }
        v
    };
    s.fill(src, ranges)?;
    // Note sections and the debug links, found by name.
    let ranges = {
        let header = Elf::parse(&*s)?;
        let sections = header.sections(endian, &*s)?;
        sections
            .iter()
            .filter(|sh| {
                sh.sh_type(endian) == object::elf::SHT_NOTE
                    || sections
                        .section_name(endian, sh)
                        .is_ok_and(|n| LINK_SECTIONS.contains(&n))
            })
            .map(|sh| file_range(sh, endian))
            .collect::<Vec<_>>()
    };
    s.fill(src, ranges)?;
    Ok(())
}

/// A section's bytes in the file, `(offset, size)`; none for `SHT_NOBITS`.
fn file_range<S: SectionHeader>(sh: &S, endian: S::Endian) -> (u64, u64) {
    if sh.sh_type(endian) == object::elf::SHT_NOBITS {
        return (0, 0);
    }
    (sh.sh_offset(endian).into(), sh.sh_size(endian).into())
}

/// Adds to `headers` (from [`read_headers`]) the symbol tables (`.symtab`, `.dynsym`, their
/// extended section indices) and the string tables they link to, read from `src`.
pub(super) fn read_symbols(
    src: &(impl Source + ?Sized),
    headers: &mut Sparse,
) -> Result<(), ReadError> {
    match (&*headers)
        .read_bytes_at(4, 1)
        .ok()
        .and_then(|b| b.first().copied())
    {
        Some(2) => symbols_of::<FileHeader64<object::Endianness>>(src, headers),
        Some(1) => symbols_of::<FileHeader32<object::Endianness>>(src, headers),
        _ => Ok(()),
    }
}

fn symbols_of<Elf: FileHeader<Endian = object::Endianness>>(
    src: &(impl Source + ?Sized),
    s: &mut Sparse,
) -> Result<(), ReadError> {
    let ranges = {
        let header = Elf::parse(&*s)?;
        let endian = header.endian()?;
        let shdrs = header.section_headers(endian, &*s)?;
        let mut v = Vec::new();
        for sh in shdrs {
            match sh.sh_type(endian) {
                object::elf::SHT_SYMTAB | object::elf::SHT_DYNSYM => {
                    v.push(file_range(sh, endian));
                    if let Some(strings) = shdrs.get(sh.sh_link(endian) as usize) {
                        v.push(file_range(strings, endian));
                    }
                }
                object::elf::SHT_SYMTAB_SHNDX => v.push(file_range(sh, endian)),
                _ => {}
            }
        }
        v
    };
    s.fill(src, ranges)?;
    Ok(())
}
