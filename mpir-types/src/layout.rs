//! Struct layouts: as debug information describes them ([`TypeLayout`]), or computed from the C
//! ABI of a [`DataModel`](crate::DataModel) when no debug information exists.
//!
//! Interfaces such as MPIR tell the tool to learn a struct's size and member offsets from the
//! target's debug information. Stock MPI builds often have none, so each interface struct in this
//! crate also knows its ABI layout; the decoders accept either and record which was used in a
//! [`LayoutSource`].

use crate::error::{DecodeError, Result};

/// Where a member lives inside its struct: byte offset and byte size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "a byte offset and a byte size: all a member's place is"
)]
pub struct FieldLayout {
    /// Byte offset from the start of the struct.
    pub offset: u64,
    /// Byte size of the member.
    pub size: u64,
}

impl FieldLayout {
    /// A field of `size` bytes at `offset`.
    pub const fn new(offset: u64, size: u64) -> Self {
        FieldLayout { offset, size }
    }

    /// One past the last byte, if that does not overflow.
    pub fn end(&self) -> Option<u64> {
        self.offset.checked_add(self.size)
    }
}

/// Where a layout came from, so that a tool can tell its user.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum LayoutSource {
    /// Computed from the C ABI of the target's data model (no debug information used).
    #[default]
    Abi,
    /// Read from debug information (e.g. DWARF), in the named file when known.
    DebugInfo {
        /// The file the type was found in.
        file: Option<String>,
    },
    /// Given directly by the caller (tests, user overrides).
    Given,
    /// Layouts shipped with the tool for a release of an MPI library, chosen for and proven on
    /// the process (`mpir_mqd::layouts`).
    Shipped {
        /// The set: library, release, configuration and data model.
        set: String,
    },
}

impl std::fmt::Display for LayoutSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LayoutSource::Abi => f.write_str("C ABI of the data model"),
            LayoutSource::DebugInfo { file: Some(file) } => write!(f, "debug info in {file}"),
            LayoutSource::DebugInfo { file: None } => f.write_str("debug info"),
            LayoutSource::Given => f.write_str("given by the caller"),
            LayoutSource::Shipped { set } => write!(f, "shipped layouts of {set}"),
        }
    }
}

/// One member of a [`TypeLayout`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct MemberLayout {
    /// Member name.
    pub name: String,
    /// Byte offset from the start of the struct.
    pub offset: u64,
    /// Byte size of the member's type, when the description says (DWARF usually does).
    pub byte_size: Option<u64>,
    /// What kind of type the member has (typedefs and qualifiers seen through), when the
    /// description says: a `char *` and a `char[8]` have the same size, not the same meaning.
    pub kind: MemberKind,
}

/// The kind of a [`MemberLayout`]'s type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum MemberKind {
    /// The description does not say.
    #[default]
    Unknown,
    /// A pointer.
    Pointer,
    /// An array.
    Array,
    /// Anything else: an integer, a float, an enum, a struct or union.
    Other,
}

impl MemberLayout {
    /// A member at `offset`, of `byte_size` bytes when the description says, of an unknown
    /// [`kind`](MemberLayout::kind).
    pub fn new(name: impl Into<String>, offset: u64, byte_size: Option<u64>) -> Self {
        MemberLayout {
            name: name.into(),
            offset,
            byte_size,
            kind: MemberKind::Unknown,
        }
    }

    /// The same member, of kind `kind` (builder style).
    pub fn with_kind(mut self, kind: MemberKind) -> Self {
        self.kind = kind;
        self
    }
}

/// The layout of a struct as a debugger sees it: total size and named members.
///
/// This is what a symbol/type backend returns (DWARF, a types sidecar, a mock), and what the
/// interface decoders accept to adapt to a target whose structs differ from the ABI default.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct TypeLayout {
    /// Type name as looked up (may be a typedef name).
    pub name: String,
    /// `sizeof` the type.
    pub byte_size: u64,
    /// Members in declaration order.
    pub members: Vec<MemberLayout>,
    /// Where the description came from.
    pub source: LayoutSource,
}

impl TypeLayout {
    /// An empty layout of `byte_size` bytes; add members with [`TypeLayout::with_member`].
    pub fn new(name: impl Into<String>, byte_size: u64, source: LayoutSource) -> Self {
        TypeLayout {
            name: name.into(),
            byte_size,
            members: Vec::new(),
            source,
        }
    }

    /// Adds a member (builder style).
    pub fn with_member(mut self, name: impl Into<String>, offset: u64, byte_size: u64) -> Self {
        self.members
            .push(MemberLayout::new(name, offset, Some(byte_size)));
        self
    }

    /// The member called `name`.
    pub fn member(&self, name: &str) -> Option<&MemberLayout> {
        self.members.iter().find(|m| m.name == name)
    }

    /// The member called `name` as a checked [`FieldLayout`]: it must exist and lie inside the
    /// struct. `default_size` is used when the description gives no member size; `allowed_sizes`,
    /// when not empty, lists the sizes the interface can accept for it.
    pub fn field(
        &self,
        name: &str,
        default_size: u64,
        allowed_sizes: &[u64],
    ) -> Result<FieldLayout> {
        let m = self
            .member(name)
            .ok_or_else(|| DecodeError::MissingMember {
                type_name: self.name.clone(),
                member: name.to_string(),
            })?;
        let field = FieldLayout::new(m.offset, m.byte_size.unwrap_or(default_size));
        let invalid = |reason: String| DecodeError::InvalidLayout {
            type_name: self.name.clone(),
            reason,
        };
        if !allowed_sizes.is_empty() && !allowed_sizes.contains(&field.size) {
            return Err(invalid(format!(
                "member {name} is {} bytes; expected one of {allowed_sizes:?}",
                field.size
            )));
        }
        match field.end() {
            Some(end) if end <= self.byte_size => Ok(field),
            _ => Err(invalid(format!(
                "member {name} at offset {} ({} bytes) lies outside the {}-byte struct",
                field.offset, field.size, self.byte_size
            ))),
        }
    }
}

/// Lays out a C struct member by member, as the ABI does: each member at the next offset that
/// is a multiple of its alignment, the total rounded up to the largest alignment.
///
/// Alignment is the scalar's size (arrays: their element's), which holds for the types the
/// debugger interfaces use (`char`, `int`, `long`, pointers) on every supported ABI.
#[derive(Debug, Clone, Default)]
pub struct CStructBuilder {
    size: u64,
    align: u64,
}

impl CStructBuilder {
    /// An empty struct.
    pub fn new() -> Self {
        CStructBuilder { size: 0, align: 1 }
    }

    /// Appends a scalar of `size` bytes (aligned to its size).
    pub fn scalar(&mut self, size: u64) -> FieldLayout {
        self.array(size, 1)
    }

    /// Appends an array of `count` elements of `element_size` bytes (aligned to the element).
    pub fn array(&mut self, element_size: u64, count: u64) -> FieldLayout {
        let align = element_size.max(1);
        let offset = self.size.next_multiple_of(align);
        self.align = self.align.max(align);
        let size = element_size * count;
        self.size = offset + size;
        FieldLayout::new(offset, size)
    }

    /// `sizeof` the struct so far, including tail padding.
    pub fn size(&self) -> u64 {
        self.size.next_multiple_of(self.align)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_struct_pads_like_the_abi() {
        // struct { char *a; char *b; int c; } on LP64: 0, 8, 16, size 24.
        let mut s = CStructBuilder::new();
        assert_eq!(s.scalar(8), FieldLayout::new(0, 8));
        assert_eq!(s.scalar(8), FieldLayout::new(8, 8));
        assert_eq!(s.scalar(4), FieldLayout::new(16, 4));
        assert_eq!(s.size(), 24);
        // struct { int a; long b; char c[5]; } on LP64: 0, 8, 16, size 24.
        let mut s = CStructBuilder::new();
        s.scalar(4);
        assert_eq!(s.scalar(8).offset, 8);
        assert_eq!(s.array(1, 5), FieldLayout::new(16, 5));
        assert_eq!(s.size(), 24);
    }

    #[test]
    fn field_checks_bounds_and_sizes() {
        let t = TypeLayout::new("T", 16, LayoutSource::Given)
            .with_member("a", 0, 8)
            .with_member("b", 12, 8);
        assert_eq!(t.field("a", 8, &[4, 8]).unwrap(), FieldLayout::new(0, 8));
        assert!(matches!(
            t.field("a", 8, &[4]),
            Err(DecodeError::InvalidLayout { .. })
        ));
        let e = t.field("b", 8, &[]).unwrap_err();
        assert!(e.to_string().contains("outside"), "{e}");
        assert!(matches!(
            t.field("c", 8, &[]),
            Err(DecodeError::MissingMember { .. })
        ));
        let huge =
            TypeLayout::new("H", u64::MAX, LayoutSource::Given).with_member("x", u64::MAX - 1, 8);
        assert!(huge.field("x", 8, &[]).is_err());
    }
}
