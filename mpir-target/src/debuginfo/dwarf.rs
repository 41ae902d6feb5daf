//! Type layouts from DWARF 2–5 (gimli): structs, unions, classes and typedefs (including a
//! typedef of an anonymous struct, like `MPIR_PROCDESC`), by name or as the pointee type of a
//! variable; member offsets in constant and expression form; sizes of base types, pointers,
//! enums and arrays; dwz supplementary files. Names are indexed in one pass; layouts are computed
//! on demand and cached. Every walk is bounded: typedef cycles and absurd nesting are errors.
//!
//! `sections` loads (decompresses, relocates) the DWARF sections; `walk` follows DIEs to sizes,
//! members and layouts; this module indexes the names and answers the queries, with a cache.

mod sections;
mod walk;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use gimli::{DwTag, Reader as _, constants as dw};
use mpir_types::TypeLayout;

use super::elf::ElfFile;
use super::error::DebugInfoError;

pub use sections::MAX_UNCOMPRESSED_SECTION;
use sections::load_dwarf;
pub(crate) use sections::load_dwarf_for_lines;

type R = gimli::EndianArcSlice<gimli::RunTimeEndian>;

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
}
