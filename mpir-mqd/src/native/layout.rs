//! Looking up the MPI's types and fields by name, recording what is missing.

use std::collections::HashMap;

use mpir_target::{Symbol, Target, TypeQuery};
use mpir_types::{FieldLayout, TypeLayout};

use crate::error::native::{NativeError, NativeResult};

/// Type and symbol lookups of one detection, with a list of what was not found.
pub(crate) struct Lookup<'t> {
    target: &'t dyn Target,
    /// A symbol of the image whose debug information describes the types (searched first).
    anchor: Option<String>,
    types: HashMap<String, Option<TypeLayout>>,
    /// `type T`, `T.member`, `symbol S` that are missing.
    pub(crate) missing: Vec<String>,
    /// The names of the types among [`Lookup::missing`].
    missing_types: Vec<String>,
    /// The names of the symbols among [`Lookup::missing`].
    missing_symbols: Vec<String>,
}

/// What a failed detection lacks.
#[derive(Debug, Clone, Default)]
pub(crate) struct Lacks {
    /// Every item: `type T`, `T.member`, `symbol S`.
    pub(crate) items: Vec<String>,
    /// The names of the types among them.
    pub(crate) types: Vec<String>,
    /// The names of the symbols among them.
    pub(crate) symbols: Vec<String>,
}

impl<'t> Lookup<'t> {
    pub(crate) fn new(target: &'t dyn Target, anchor: Option<&str>) -> Self {
        Lookup {
            target,
            anchor: anchor.map(str::to_string),
            types: HashMap::new(),
            missing: Vec::new(),
            missing_types: Vec::new(),
            missing_symbols: Vec::new(),
        }
    }

    /// What a failed detection lacks.
    pub(crate) fn lacks(self) -> Lacks {
        Lacks {
            items: self.missing,
            types: self.missing_types,
            symbols: self.missing_symbols,
        }
    }

    /// The target's pointer size.
    pub(crate) fn pointer_size(&self) -> u64 {
        self.target.data_model().pointer_size()
    }

    /// The symbol `name`, or `None` (recorded as missing when `required`).
    pub(crate) fn symbol(&mut self, name: &str, required: bool) -> NativeResult<Option<Symbol>> {
        let s = self
            .target
            .symbol(name)
            .map_err(|source| NativeError::Lookup {
                name: name.to_string(),
                source,
            })?;
        if s.is_none() && required {
            self.missing.push(format!("symbol {name}"));
            self.missing_symbols.push(name.to_string());
        }
        Ok(s)
    }

    /// The type `name` (struct, union or typedef), without recording its absence.
    pub(crate) fn try_type(&mut self, name: &str) -> NativeResult<Option<TypeLayout>> {
        if let Some(t) = self.types.get(name) {
            return Ok(t.clone());
        }
        let query = match &self.anchor {
            Some(symbol) => TypeQuery::NamedNear { name, symbol },
            None => TypeQuery::Named(name),
        };
        let mut t = self
            .target
            .type_layout(query)
            .map_err(|source| NativeError::Lookup {
                name: format!("type {name}"),
                source,
            })?;
        if t.is_none() && self.anchor.is_some() {
            t = self
                .target
                .type_layout(TypeQuery::Named(name))
                .map_err(|source| NativeError::Lookup {
                    name: format!("type {name}"),
                    source,
                })?;
        }
        self.types.insert(name.to_string(), t.clone());
        Ok(t)
    }

    /// The type `name`; its absence is recorded.
    pub(crate) fn ty(&mut self, name: &str) -> NativeResult<Option<TypeLayout>> {
        let t = self.try_type(name)?;
        if t.is_none() {
            self.missing.push(format!("type {name}"));
            self.missing_types.push(name.to_string());
        }
        Ok(t)
    }

    /// Member `member` of `ty` (size from the debug information; `sizes`, when not empty,
    /// lists the widths the walker can decode); its absence is recorded.
    pub(crate) fn field(
        &mut self,
        ty: &TypeLayout,
        member: &str,
        sizes: &[u64],
    ) -> Option<FieldLayout> {
        match try_field(ty, member, sizes) {
            Ok(f) => Some(f),
            Err(reason) => {
                self.missing.push(reason);
                None
            }
        }
    }
}

/// Member `member` of `ty`, or what is wrong with it (`T.member` or a description).
pub(crate) fn try_field(
    ty: &TypeLayout,
    member: &str,
    sizes: &[u64],
) -> Result<FieldLayout, String> {
    let Some(m) = ty.member(member) else {
        return Err(format!("{}.{member}", ty.name));
    };
    let Some(size) = m.byte_size else {
        return Err(format!(
            "{}.{member} (no size in the debug information)",
            ty.name
        ));
    };
    if !sizes.is_empty() && !sizes.contains(&size) {
        return Err(format!(
            "{}.{member} of {size} bytes (this walker decodes {sizes:?})",
            ty.name
        ));
    }
    ty.field(member, size, &[])
        .map_err(|e| format!("{}.{member} ({e})", ty.name))
}

/// `inner` placed at `outer`'s offset (a member of a member).
pub(crate) fn nested(outer: FieldLayout, inner: FieldLayout) -> FieldLayout {
    FieldLayout::new(outer.offset.saturating_add(inner.offset), inner.size)
}

/// Smallest span `[0, end)` covering `fields`.
pub(crate) fn span(fields: &[Option<FieldLayout>]) -> u64 {
    fields
        .iter()
        .flatten()
        .map(|f| f.offset.saturating_add(f.size))
        .max()
        .unwrap_or(0)
}

/// Widths an integer field may have.
pub(crate) const INT_WIDTHS: &[u64] = &[1, 2, 4, 8];
