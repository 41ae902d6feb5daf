//! Type layouts from DWARF 2–5 (gimli): structs, unions, classes and typedefs (including a
//! typedef of an anonymous struct, like `MPIR_PROCDESC`), by name or as the pointee type of a
//! variable; member offsets in constant and expression form; sizes of base types, pointers,
//! enums and arrays; dwz supplementary files. Names are indexed in one pass; layouts are computed
//! on demand and cached. Every walk is bounded: typedef cycles and absurd nesting are errors.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use gimli::{AttributeValue, DwTag, Reader as _, constants as dw};
use mpir_types::{LayoutSource, MemberKind, MemberLayout, TypeLayout};

use super::elf::ElfFile;
use super::error::DebugInfoError;

type R = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// Longest chain of typedefs, qualifiers and nested anonymous members followed.
const MAX_DEPTH: u32 = 64;
/// Most members collected for one type (hostile DWARF can claim millions).
const MAX_MEMBERS: usize = 65_536;

struct DwarfFile {
    path: PathBuf,
    dwarf: gimli::Dwarf<R>,
    /// Units in section order, with their start offsets for binary search.
    units: Vec<(usize, gimli::Unit<R>)>,
}

/// A DIE: which file (main or dwz supplementary), which unit, which offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct DieRef {
    sup: bool,
    unit: usize,
    offset: gimli::UnitOffset<usize>,
}

/// What a query asked for, for the cache.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Key {
    Named(String),
    Pointee(String),
}

/// The named types and variables of one file's DWARF (plus its dwz supplementary file).
pub struct TypeIndex {
    main: DwarfFile,
    sup: Option<DwarfFile>,
    named: HashMap<String, Vec<DieRef>>,
    variables: HashMap<String, DieRef>,
    cache: Mutex<HashMap<Key, Option<TypeLayout>>>,
}

impl std::fmt::Debug for TypeIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypeIndex")
            .field("path", &self.main.path)
            .field("types", &self.named.len())
            .field("variables", &self.variables.len())
            .finish()
    }
}

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

fn text(r: R) -> Option<String> {
    r.to_string_lossy().ok().map(std::borrow::Cow::into_owned)
}

fn dwarf_err(path: &Path, e: impl std::fmt::Display) -> DebugInfoError {
    DebugInfoError::Dwarf {
        path: path.to_path_buf(),
        reason: e.to_string(),
    }
}

impl DwarfFile {
    fn load(elf: &ElfFile, sup: Option<&ElfFile>) -> Result<Self, DebugInfoError> {
        let mut dwarf = load_dwarf(elf)?;
        if let Some(sup) = sup {
            // Strings and references of the form *_sup / GNU_*_alt resolve through this.
            dwarf.set_sup(load_dwarf(sup)?);
        }
        let mut units = Vec::new();
        let mut headers = dwarf.units();
        while let Some(header) = headers.next().map_err(|e| dwarf_err(elf.path(), e))? {
            let start = header.offset().0;
            let unit = dwarf.unit(header).map_err(|e| dwarf_err(elf.path(), e))?;
            units.push((start, unit));
        }
        Ok(DwarfFile {
            path: elf.path().to_path_buf(),
            dwarf,
            units,
        })
    }

    fn unit(&self, i: usize) -> Option<&gimli::Unit<R>> {
        self.units.get(i).map(|(_, u)| u)
    }

    /// The unit containing section offset `o`, and the offset inside it.
    fn locate(&self, o: usize) -> Option<(usize, gimli::UnitOffset<usize>)> {
        let i = self
            .units
            .partition_point(|(start, _)| *start <= o)
            .checked_sub(1)?;
        let (_, unit) = self.units.get(i)?;
        let off = gimli::DebugInfoOffset(o).to_unit_offset(&unit.header)?;
        Some((i, off))
    }
}

fn is_aggregate(tag: DwTag) -> bool {
    matches!(
        tag,
        dw::DW_TAG_structure_type | dw::DW_TAG_union_type | dw::DW_TAG_class_type
    )
}

fn is_alias(tag: DwTag) -> bool {
    matches!(
        tag,
        dw::DW_TAG_typedef
            | dw::DW_TAG_const_type
            | dw::DW_TAG_volatile_type
            | dw::DW_TAG_restrict_type
            | dw::DW_TAG_atomic_type
            | dw::DW_TAG_immutable_type
            | dw::DW_TAG_packed_type
    )
}

impl TypeIndex {
    /// Indexes the DWARF of `elf`, with `sup` as its dwz supplementary file when it has one.
    pub fn load(elf: &ElfFile, sup: Option<&ElfFile>) -> Result<Self, DebugInfoError> {
        let main = DwarfFile::load(elf, sup)?;
        let sup = sup.map(|s| DwarfFile::load(s, None)).transpose()?;
        let mut index = TypeIndex {
            main,
            sup,
            named: HashMap::new(),
            variables: HashMap::new(),
            cache: Mutex::new(HashMap::new()),
        };
        index.index_file(true)?;
        index.index_file(false)?;
        Ok(index)
    }

    /// Path of the file the DWARF came from.
    pub fn path(&self) -> &Path {
        &self.main.path
    }

    /// Number of distinct type names indexed.
    pub fn type_count(&self) -> usize {
        self.named.len()
    }

    /// The indexed type names (in no particular order).
    pub fn type_names(&self) -> impl Iterator<Item = String> + '_ {
        self.named.keys().cloned()
    }

    /// The indexed variable names (in no particular order).
    pub fn variable_names(&self) -> impl Iterator<Item = String> + '_ {
        self.variables.keys().cloned()
    }

    fn file(&self, sup: bool) -> Option<&DwarfFile> {
        if sup {
            self.sup.as_ref()
        } else {
            Some(&self.main)
        }
    }

    fn index_file(&mut self, sup: bool) -> Result<(), DebugInfoError> {
        let Some(file) = self.file(sup) else {
            return Ok(());
        };
        let mut named: Vec<(String, DieRef)> = Vec::new();
        let mut variables: Vec<(String, DieRef, bool)> = Vec::new();
        for (i, (_, unit)) in file.units.iter().enumerate() {
            let mut cursor = unit.entries();
            while let Some(e) = cursor.next_dfs().map_err(|e| dwarf_err(&file.path, e))? {
                let tag = e.tag();
                let indexed = is_aggregate(tag)
                    || matches!(
                        tag,
                        dw::DW_TAG_typedef | dw::DW_TAG_base_type | dw::DW_TAG_enumeration_type
                    );
                if !indexed && tag != dw::DW_TAG_variable {
                    continue;
                }
                let Some(name) = e
                    .attr_value(dw::DW_AT_name)
                    .and_then(|v| file.dwarf.attr_string(unit, v).ok())
                    .and_then(text)
                else {
                    continue;
                };
                let r = DieRef {
                    sup,
                    unit: i,
                    offset: e.offset(),
                };
                if indexed {
                    named.push((name, r));
                } else if e.attr_value(dw::DW_AT_type).is_some() {
                    let defined = e.attr_value(dw::DW_AT_location).is_some()
                        || e.attr_value(dw::DW_AT_specification).is_some();
                    variables.push((name, r, defined));
                }
            }
        }
        for (name, r) in named {
            self.named.entry(name).or_default().push(r);
        }
        for (name, r, defined) in variables {
            // Prefer a definition over an `extern` declaration.
            if defined || !self.variables.contains_key(&name) {
                self.variables.insert(name, r);
            }
        }
        Ok(())
    }

    fn entry(
        &self,
        r: DieRef,
    ) -> Result<
        (
            &DwarfFile,
            &gimli::Unit<R>,
            gimli::DebuggingInformationEntry<R>,
        ),
        String,
    > {
        let file = self
            .file(r.sup)
            .ok_or("reference into a missing dwz file")?;
        let unit = file.unit(r.unit).ok_or("reference to a missing unit")?;
        let e = unit.entry(r.offset).map_err(|e| e.to_string())?;
        Ok((file, unit, e))
    }

    fn name_of(&self, r: DieRef) -> Option<String> {
        let (file, unit, e) = self.entry(r).ok()?;
        let v = e.attr_value(dw::DW_AT_name)?;
        text(file.dwarf.attr_string(unit, v).ok()?)
    }

    /// The DIE a reference attribute of `from` points to.
    fn follow(&self, from: DieRef, value: AttributeValue<R>) -> Result<Option<DieRef>, String> {
        Ok(match value {
            AttributeValue::UnitRef(offset) => Some(DieRef { offset, ..from }),
            AttributeValue::DebugInfoRef(o) => {
                let file = self.file(from.sup).ok_or("missing file")?;
                let (unit, offset) = file.locate(o.0).ok_or("reference outside .debug_info")?;
                Some(DieRef {
                    sup: from.sup,
                    unit,
                    offset,
                })
            }
            AttributeValue::DebugInfoRefSup(o) => {
                let file = self
                    .sup
                    .as_ref()
                    .ok_or("reference into the dwz supplementary file, which was not found")?;
                let (unit, offset) = file.locate(o.0).ok_or("reference outside the dwz file")?;
                Some(DieRef {
                    sup: true,
                    unit,
                    offset,
                })
            }
            _ => None,
        })
    }

    fn type_of(&self, r: DieRef) -> Result<Option<DieRef>, String> {
        let (_, _, e) = self.entry(r)?;
        match e.attr_value(dw::DW_AT_type) {
            Some(v) => self.follow(r, v),
            None => Ok(None),
        }
    }

    /// Strips typedefs and qualifiers; returns the underlying DIE and the first name seen.
    fn strip(&self, mut r: DieRef) -> Result<(Option<DieRef>, Option<String>), String> {
        let mut first_name = None;
        for _ in 0..MAX_DEPTH {
            let (_, _, e) = self.entry(r)?;
            if !is_alias(e.tag()) {
                return Ok((Some(r), first_name));
            }
            if first_name.is_none() && e.tag() == dw::DW_TAG_typedef {
                first_name = self.name_of(r);
            }
            match self.type_of(r)? {
                Some(next) => r = next,
                None => return Ok((None, first_name)), // typedef of void
            }
        }
        Err(format!("typedef chain longer than {MAX_DEPTH} (a cycle?)"))
    }

    /// The kind of the type at `r`, typedefs and qualifiers seen through.
    fn kind_of(&self, r: DieRef) -> Result<MemberKind, String> {
        let (Some(t), _) = self.strip(r)? else {
            return Ok(MemberKind::Other); // void
        };
        let (_, _, e) = self.entry(t)?;
        Ok(match e.tag() {
            dw::DW_TAG_pointer_type => MemberKind::Pointer,
            dw::DW_TAG_array_type => MemberKind::Array,
            _ => MemberKind::Other,
        })
    }

    /// A complete definition for a declaration-only struct/union, looked up by name.
    fn definition(&self, r: DieRef, tag: DwTag) -> Result<DieRef, String> {
        let (_, _, e) = self.entry(r)?;
        if e.attr_value(dw::DW_AT_declaration).is_none() {
            return Ok(r);
        }
        let name = self.name_of(r).ok_or("anonymous declaration")?;
        for &cand in self.named.get(&name).into_iter().flatten() {
            let (_, _, c) = self.entry(cand)?;
            if c.tag() == tag && c.attr_value(dw::DW_AT_declaration).is_none() {
                return Ok(cand);
            }
        }
        Err(format!("only a declaration of {name} exists"))
    }

    /// `sizeof` the type at `r`, when it has one.
    fn size_of(&self, r: DieRef, depth: u32) -> Result<Option<u64>, String> {
        if depth > MAX_DEPTH {
            return Err(format!("type nesting deeper than {MAX_DEPTH}"));
        }
        let (Some(r), _) = self.strip(r)? else {
            return Ok(None);
        };
        // A declaration-only struct has no size: use its definition when there is one.
        let (_, _, e) = self.entry(r)?;
        let r = if is_aggregate(e.tag()) {
            self.definition(r, e.tag()).unwrap_or(r)
        } else {
            r
        };
        let (_, unit, e) = self.entry(r)?;
        if let Some(size) = e
            .attr_value(dw::DW_AT_byte_size)
            .and_then(|v| v.udata_value())
        {
            return Ok(Some(size));
        }
        match e.tag() {
            dw::DW_TAG_pointer_type
            | dw::DW_TAG_reference_type
            | dw::DW_TAG_rvalue_reference_type => Ok(Some(u64::from(unit.encoding().address_size))),
            dw::DW_TAG_array_type => {
                let Some(elem) = self.type_of(r)? else {
                    return Ok(None);
                };
                let Some(elem_size) = self.size_of(elem, depth + 1)? else {
                    return Ok(None);
                };
                let count = self.array_count(r)?;
                Ok(elem_size.checked_mul(count))
            }
            _ => Ok(None),
        }
    }

    /// Product of the dimensions of an array type (0 for a flexible array).
    fn array_count(&self, r: DieRef) -> Result<u64, String> {
        let (_, unit, _) = self.entry(r)?;
        let mut tree = unit
            .entries_tree(Some(r.offset))
            .map_err(|e| e.to_string())?;
        let root = tree.root().map_err(|e| e.to_string())?;
        let mut children = root.children();
        let mut count: u64 = 1;
        let mut dims = 0;
        while let Some(child) = children.next().map_err(|e| e.to_string())? {
            let e = child.entry();
            if e.tag() != dw::DW_TAG_subrange_type {
                continue;
            }
            dims += 1;
            let n = if let Some(c) = e.attr_value(dw::DW_AT_count).and_then(|v| v.udata_value()) {
                c
            } else if let Some(upper) = e.attr_value(dw::DW_AT_upper_bound) {
                let lower = e
                    .attr_value(dw::DW_AT_lower_bound)
                    .and_then(|v| v.sdata_value())
                    .unwrap_or(0);
                match upper
                    .sdata_value()
                    .or_else(|| upper.udata_value().map(|u| u as i64))
                {
                    // -1 upper bound: a flexible array member.
                    Some(u) => {
                        u64::try_from(u.saturating_sub(lower).saturating_add(1)).unwrap_or(0)
                    }
                    None => 0,
                }
            } else {
                0
            };
            count = count.checked_mul(n).ok_or("array size overflows")?;
        }
        Ok(if dims == 0 { 0 } else { count })
    }

    /// The offset of a member DIE inside its parent.
    fn member_offset(
        &self,
        unit: &gimli::Unit<R>,
        e: &gimli::DebuggingInformationEntry<R>,
    ) -> Result<u64, String> {
        if let Some(v) = e.attr_value(dw::DW_AT_data_member_location) {
            if let Some(n) = v.udata_value() {
                return Ok(n);
            }
            let expr = match v {
                AttributeValue::Exprloc(expr) => expr,
                AttributeValue::Block(b) => gimli::Expression(b),
                other => return Err(format!("unsupported member location {other:?}")),
            };
            // DWARF 2 style: DW_OP_plus_uconst N (or a constant).
            let mut ops = expr.operations(unit.encoding());
            let mut offset = 0u64;
            while let Some(op) = ops.next().map_err(|e| e.to_string())? {
                match op {
                    gimli::Operation::PlusConstant { value }
                    | gimli::Operation::UnsignedConstant { value } => {
                        offset = offset.checked_add(value).ok_or("offset overflows")?
                    }
                    other => {
                        return Err(format!("unsupported member location operation {other:?}"));
                    }
                }
            }
            return Ok(offset);
        }
        if let Some(bits) = e
            .attr_value(dw::DW_AT_data_bit_offset)
            .and_then(|v| v.udata_value())
        {
            return Ok(bits / 8);
        }
        Ok(0) // union members
    }

    /// Members of the struct/union at `r`, with anonymous struct/union members flattened.
    fn members(
        &self,
        r: DieRef,
        base: u64,
        depth: u32,
        out: &mut Vec<MemberLayout>,
    ) -> Result<(), String> {
        if depth > MAX_DEPTH {
            return Err(format!("member nesting deeper than {MAX_DEPTH}"));
        }
        let (file, unit, _) = self.entry(r)?;
        let mut tree = unit
            .entries_tree(Some(r.offset))
            .map_err(|e| e.to_string())?;
        let root = tree.root().map_err(|e| e.to_string())?;
        let mut children = root.children();
        let mut pending_anonymous = Vec::new();
        while let Some(child) = children.next().map_err(|e| e.to_string())? {
            let e = child.entry();
            if e.tag() != dw::DW_TAG_member {
                continue;
            }
            if out.len() >= MAX_MEMBERS {
                return Err(format!("more than {MAX_MEMBERS} members"));
            }
            let offset = base
                .checked_add(self.member_offset(unit, e)?)
                .ok_or("member offset overflows")?;
            let me = DieRef {
                offset: e.offset(),
                ..r
            };
            let ty = match e.attr_value(dw::DW_AT_type) {
                Some(v) => self.follow(me, v)?,
                None => None,
            };
            let name = e
                .attr_value(dw::DW_AT_name)
                .and_then(|v| file.dwarf.attr_string(unit, v).ok())
                .and_then(text);
            let bitfield = e.attr_value(dw::DW_AT_bit_size).is_some();
            let byte_size = if bitfield {
                None
            } else {
                match ty {
                    Some(t) => self.size_of(t, depth + 1)?,
                    None => None,
                }
            };
            let kind = match ty {
                Some(t) => self.kind_of(t)?,
                None => MemberKind::Unknown,
            };
            match name {
                Some(name) => out.push(MemberLayout::new(name, offset, byte_size).with_kind(kind)),
                None => {
                    if let Some(t) = ty {
                        pending_anonymous.push((t, offset));
                    }
                }
            }
        }
        // Members of anonymous structs and unions are reachable by name in C.
        for (t, offset) in pending_anonymous {
            if let (Some(t), _) = self.strip(t)? {
                let (_, _, e) = self.entry(t)?;
                if is_aggregate(e.tag()) {
                    let def = self.definition(t, e.tag())?;
                    self.members(def, offset, depth + 1, out)?;
                }
            }
        }
        Ok(())
    }

    /// The layout of the type at `r`, named `name`.
    fn layout(&self, r: DieRef, name: &str) -> Result<Option<TypeLayout>, String> {
        let (Some(t), _) = self.strip(r)? else {
            return Ok(None);
        };
        let (_, _, e) = self.entry(t)?;
        let t = if is_aggregate(e.tag()) {
            self.definition(t, e.tag())?
        } else {
            t
        };
        let Some(byte_size) = self.size_of(t, 0)? else {
            return Ok(None);
        };
        let mut layout = TypeLayout::new(
            name,
            byte_size,
            LayoutSource::DebugInfo {
                file: Some(self.main.path.display().to_string()),
            },
        );
        let (_, _, e) = self.entry(t)?;
        if is_aggregate(e.tag()) {
            self.members(t, 0, 0, &mut layout.members)?;
        }
        Ok(Some(layout))
    }

    fn type_error(&self, name: &str, reason: String) -> DebugInfoError {
        DebugInfoError::Type {
            path: self.main.path.clone(),
            name: name.to_string(),
            reason,
        }
    }

    /// The cached answer for `key`, computing and caching it on a miss (errors are not cached).
    fn cached(
        &self,
        key: Key,
        compute: impl FnOnce() -> Result<Option<TypeLayout>, DebugInfoError>,
    ) -> Result<Option<TypeLayout>, DebugInfoError> {
        let cache = || self.cache.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(hit) = cache().get(&key) {
            return Ok(hit.clone());
        }
        // Computed outside the lock: a layout may take a while to build.
        let found = compute()?;
        cache().insert(key, found.clone());
        Ok(found)
    }

    /// The layout of the type called `name` (struct, union, class, typedef, base or enum type),
    /// preferring a complete definition.
    pub fn named(&self, name: &str) -> Result<Option<TypeLayout>, DebugInfoError> {
        self.cached(Key::Named(name.to_string()), || {
            let mut last_err = None;
            for &r in self.named.get(name).into_iter().flatten() {
                match self.layout(r, name) {
                    Ok(Some(l)) => return Ok(Some(l)),
                    Ok(None) => {}
                    Err(e) => last_err = Some(e),
                }
            }
            match last_err {
                Some(e) => Err(self.type_error(name, e)),
                None => Ok(None),
            }
        })
    }

    /// The layout of the type that pointer variable `variable` points to.
    pub fn pointee_of_variable(
        &self,
        variable: &str,
    ) -> Result<Option<TypeLayout>, DebugInfoError> {
        self.cached(Key::Pointee(variable.to_string()), || {
            let Some(&var) = self.variables.get(variable) else {
                return Ok(None);
            };
            self.pointee_layout(var, variable)
                .map_err(|e| self.type_error(variable, e))
        })
    }

    fn pointee_layout(&self, var: DieRef, variable: &str) -> Result<Option<TypeLayout>, String> {
        let Some(ty) = self.type_of(var)? else {
            return Ok(None);
        };
        let (Some(ptr), _) = self.strip(ty)? else {
            return Ok(None);
        };
        let (_, _, e) = self.entry(ptr)?;
        if e.tag() != dw::DW_TAG_pointer_type {
            return Err(format!(
                "{variable} is not a pointer (DWARF tag {})",
                e.tag()
            ));
        }
        let Some(pointee) = self.type_of(ptr)? else {
            return Ok(None); // void *
        };
        let (_, typedef_name) = self.strip(pointee)?;
        let name = typedef_name
            .or_else(|| self.name_of(pointee))
            .unwrap_or_else(|| format!("*{variable}"));
        self.layout(pointee, &name)
    }
}
