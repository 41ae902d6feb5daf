//! Loading one file's DWARF sections for gimli and addr2line: decompression bounded before it
//! allocates, and the relocations of a relocatable object applied.

use std::sync::Arc;

use super::R;
use crate::debuginfo::elf::ElfFile;
use crate::debuginfo::error::DebugInfoError;

/// The DWARF sections of `elf` (decompressed within [`MAX_UNCOMPRESSED_SECTION`], relocated
/// when `elf` is a relocatable object), for gimli and addr2line.
pub(crate) fn load_dwarf(elf: &ElfFile) -> Result<gimli::Dwarf<R>, DebugInfoError> {
    load_dwarf_sections(elf, |_| true)
}

/// [`load_dwarf`] without the sections that functions, inline frames and lines never read
/// (location lists, macros, name indexes): for addr2line. Location lists are often the
/// largest section after `.debug_info`, and a compressed one costs its decompression.
pub(crate) fn load_dwarf_for_lines(elf: &ElfFile) -> Result<gimli::Dwarf<R>, DebugInfoError> {
    use gimli::SectionId as S;
    load_dwarf_sections(elf, |id| {
        !matches!(
            id,
            S::DebugLoc
                | S::DebugLocLists
                | S::DebugMacinfo
                | S::DebugMacro
                | S::DebugPubNames
                | S::DebugPubTypes
        )
    })
}

/// The sections `wanted` keeps, loaded as [`load_dwarf`] loads them; the others empty.
fn load_dwarf_sections(
    elf: &ElfFile,
    wanted: impl Fn(gimli::SectionId) -> bool,
) -> Result<gimli::Dwarf<R>, DebugInfoError> {
    use object::{Object, ObjectSection};
    let path = elf.path();
    let data = elf.data()?;
    let obj = object::File::parse(&**data).map_err(|e| DebugInfoError::Elf {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let relocatable = obj.kind() == object::ObjectKind::Relocatable;
    gimli::Dwarf::load(|id: gimli::SectionId| -> Result<R, DebugInfoError> {
        let section = if wanted(id) {
            obj.section_by_name(id.name())
        } else {
            None
        };
        let data: Arc<[u8]> = match section {
            Some(s) => {
                let dwarf_error = |e: object::Error| DebugInfoError::Dwarf {
                    path: path.to_path_buf(),
                    reason: format!("{}: {e}", id.name()),
                };
                let compressed = s.compressed_data().map_err(dwarf_error)?;
                check_compressed(path, id.name(), &compressed)?;
                let d = compressed.decompress().map_err(dwarf_error)?;
                if relocatable {
                    Arc::from(relocate(&obj, &s, d.into_owned(), endian))
                } else {
                    Arc::from(&*d)
                }
            }
            None => Arc::from(&[][..]),
        };
        Ok(gimli::EndianArcSlice::new(data, endian))
    })
}

/// The most bytes one compressed debug section may expand to. Real ones are far smaller (the
/// largest `.debug_info` of an MPI library or launcher is tens of MiB); the section header's
/// claim is what the decompressor allocates up front, so it must be bounded before that.
pub const MAX_UNCOMPRESSED_SECTION: u64 = 1 << 30;

/// zlib's largest possible expansion (deflate's maximum ratio is 1032:1); a little slack for
/// the stream's header.
const ZLIB_MAX_RATIO: u64 = 1032;

/// Refuses a compressed section whose claimed size no real section has, before the
/// decompressor allocates it.
fn check_compressed(
    path: &std::path::Path,
    section: &'static str,
    c: &object::CompressedData<'_>,
) -> Result<(), DebugInfoError> {
    use object::CompressionFormat;
    let compressed = c.data.len() as u64;
    let claimed = c.uncompressed_size;
    let format = format!("{:?}", c.format).to_lowercase();
    let reason = match c.format {
        CompressionFormat::None => return Ok(()),
        _ if claimed > MAX_UNCOMPRESSED_SECTION => format!(
            "more than the {MAX_UNCOMPRESSED_SECTION}-byte limit per section \
             ({format}, {compressed} bytes compressed)"
        ),
        CompressionFormat::Zlib
            if claimed > compressed.saturating_add(64).saturating_mul(ZLIB_MAX_RATIO) =>
        {
            format!("{compressed} bytes of zlib expand to at most {ZLIB_MAX_RATIO} times that")
        }
        _ => return Ok(()),
    };
    Err(DebugInfoError::CompressedSection {
        path: path.to_path_buf(),
        section,
        claimed,
        reason,
    })
}

/// Applies a relocatable object's absolute relocations to one of its debug sections (in a `gcc
/// -c` object, e.g. a types sidecar, string and cross-section offsets are 0 plus a relocation).
/// Relocations of other kinds or out of bounds are left alone.
fn relocate(
    obj: &object::File<'_>,
    section: &object::Section<'_, '_>,
    mut data: Vec<u8>,
    endian: gimli::RunTimeEndian,
) -> Vec<u8> {
    use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};
    for (offset, reloc) in section.relocations() {
        if reloc.kind() != object::RelocationKind::Absolute {
            continue;
        }
        let target = match reloc.target() {
            RelocationTarget::Symbol(i) => match obj.symbol_by_index(i) {
                Ok(sym) => sym.address(),
                Err(_) => continue,
            },
            RelocationTarget::Absolute => 0,
            _ => continue,
        };
        let width = usize::from(reloc.size() / 8);
        let Some(slot) = usize::try_from(offset)
            .ok()
            .and_then(|o| data.get_mut(o..o.checked_add(width)?))
        else {
            continue;
        };
        // REL-style relocations (i386) keep the addend in the section bytes.
        let implicit = if reloc.has_implicit_addend() {
            match (width, endian) {
                (4, gimli::RunTimeEndian::Little) => slot
                    .try_into()
                    .map_or(0, |b| u64::from(u32::from_le_bytes(b))),
                (4, gimli::RunTimeEndian::Big) => slot
                    .try_into()
                    .map_or(0, |b| u64::from(u32::from_be_bytes(b))),
                (8, gimli::RunTimeEndian::Little) => slot.try_into().map_or(0, u64::from_le_bytes),
                (8, gimli::RunTimeEndian::Big) => slot.try_into().map_or(0, u64::from_be_bytes),
                _ => 0,
            }
        } else {
            0
        };
        let value = target
            .wrapping_add_signed(reloc.addend())
            .wrapping_add(implicit);
        match (width, endian) {
            (4, gimli::RunTimeEndian::Little) => {
                slot.copy_from_slice(&(value as u32).to_le_bytes())
            }
            (4, gimli::RunTimeEndian::Big) => slot.copy_from_slice(&(value as u32).to_be_bytes()),
            (8, gimli::RunTimeEndian::Little) => slot.copy_from_slice(&value.to_le_bytes()),
            (8, gimli::RunTimeEndian::Big) => slot.copy_from_slice(&value.to_be_bytes()),
            _ => {}
        }
    }
    data
}
