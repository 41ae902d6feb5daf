//! The layout of `MPIR_PROCDESC`: from the C ABI, or from a type description, validated.

use crate::error::{DecodeError, Result};
use crate::layout::{CStructBuilder, FieldLayout, LayoutSource, TypeLayout};
use crate::model::DataModel;

/// Size and member layout of `MPIR_PROCDESC` (MPIR 1.1 §9.2):
///
/// ```c
/// typedef struct { char *host_name; char *executable_name; int pid; } MPIR_PROCDESC;
/// ```
///
/// The spec tells the tool to take size and offsets from the debug information, and lets `pid`
/// be wider than `int` (`pid_t`); [`ProcDescLayout::from_type`] accepts any such description,
/// [`ProcDescLayout::abi`] computes the default when there is none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "sizeof(MPIR_PROCDESC) and the offset of each of its three members"
)]
pub struct ProcDescLayout {
    /// `sizeof(MPIR_PROCDESC)`: the stride of the table.
    pub size: u64,
    /// `host_name` (a pointer).
    pub host_name: FieldLayout,
    /// `executable_name` (a pointer).
    pub executable_name: FieldLayout,
    /// `pid` (a signed integer of 2, 4 or 8 bytes).
    pub pid: FieldLayout,
    /// Where this layout came from.
    pub source: LayoutSource,
}

const TYPE_NAME: &str = "MPIR_PROCDESC";

impl ProcDescLayout {
    /// The layout the C ABI of `model` gives the spec's declaration (x86_64: 24 bytes with `pid`
    /// at 16; ILP32: 12 bytes with `pid` at 8).
    pub fn abi(model: &DataModel) -> Self {
        let mut s = CStructBuilder::new();
        let host_name = s.scalar(model.pointer_size());
        let executable_name = s.scalar(model.pointer_size());
        let pid = s.scalar(model.int_size());
        ProcDescLayout {
            size: s.size(),
            host_name,
            executable_name,
            pid,
            source: LayoutSource::Abi,
        }
    }

    /// The layout a type description gives (DWARF, a sidecar, a test), checked against `model`:
    /// the three members must exist and lie inside the struct, the names must be pointers of the
    /// model's width and `pid` 2, 4 or 8 bytes. The source is the description's.
    pub fn from_type(ty: &TypeLayout, model: &DataModel) -> Result<Self> {
        let ptr = model.pointer_size();
        let layout = ProcDescLayout {
            size: ty.byte_size,
            host_name: ty.field("host_name", ptr, &[ptr])?,
            executable_name: ty.field("executable_name", ptr, &[ptr])?,
            pid: ty.field("pid", model.int_size(), &[2, 4, 8])?,
            source: ty.source.clone(),
        };
        layout.validate(model)?;
        Ok(layout)
    }

    /// Checks a layout built by hand: fields inside the struct, the widths the decoder supports.
    pub fn validate(&self, model: &DataModel) -> Result<()> {
        let invalid = |reason: String| {
            Err(DecodeError::InvalidLayout {
                type_name: TYPE_NAME.into(),
                reason,
            })
        };
        for (name, f, sizes) in [
            ("host_name", self.host_name, &[model.pointer_size()][..]),
            (
                "executable_name",
                self.executable_name,
                &[model.pointer_size()][..],
            ),
            ("pid", self.pid, &[2, 4, 8][..]),
        ] {
            if !sizes.contains(&f.size) {
                return invalid(format!("{name} is {} bytes, expected {sizes:?}", f.size));
            }
            if f.end().is_none_or(|end| end > self.size) {
                return invalid(format!(
                    "{name} at offset {} ({} bytes) lies outside the {}-byte struct",
                    f.offset, f.size, self.size
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_layouts_match_the_spec_examples() {
        let l = ProcDescLayout::abi(&DataModel::LP64);
        assert_eq!((l.size, l.pid.offset, l.pid.size), (24, 16, 4));
        let l = ProcDescLayout::abi(&DataModel::ILP32_BE);
        assert_eq!((l.size, l.executable_name.offset, l.pid.offset), (12, 4, 8));
        assert_eq!(l.source, LayoutSource::Abi);
    }

    #[test]
    fn from_type_accepts_wider_pid_and_rejects_bad_pointers() {
        let ty = TypeLayout::new("MPIR_PROCDESC", 32, LayoutSource::Given)
            .with_member("pid", 0, 8)
            .with_member("host_name", 16, 8)
            .with_member("executable_name", 24, 8);
        let l = ProcDescLayout::from_type(&ty, &DataModel::LP64).unwrap();
        assert_eq!(l.pid, FieldLayout::new(0, 8));
        assert_eq!(l.source, LayoutSource::Given);
        // A 32-bit target cannot have 8-byte pointers.
        assert!(ProcDescLayout::from_type(&ty, &DataModel::ILP32).is_err());
    }
}
