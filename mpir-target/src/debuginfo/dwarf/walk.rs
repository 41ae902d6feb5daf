//! Walking DIEs to a layout: references followed (within a unit, across units, into the dwz
//! file), typedefs and qualifiers stripped, declarations completed, sizes of every kind of
//! type, member offsets, anonymous members flattened. Every walk is bounded.

use gimli::{AttributeValue, DwTag, constants as dw};
use mpir_types::{LayoutSource, MemberKind, MemberLayout, TypeLayout};

use super::{DieRef, DwarfFile, R, TypeIndex, is_aggregate, is_alias, text};

/// Longest chain of typedefs, qualifiers and nested anonymous members followed.
const MAX_DEPTH: u32 = 64;
/// Most members collected for one type (hostile DWARF can claim millions).
const MAX_MEMBERS: usize = 65_536;

impl TypeIndex {
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
    pub(super) fn layout(&self, r: DieRef, name: &str) -> Result<Option<TypeLayout>, String> {
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

    pub(super) fn pointee_layout(
        &self,
        var: DieRef,
        variable: &str,
    ) -> Result<Option<TypeLayout>, String> {
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
