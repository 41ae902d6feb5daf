//! The one error type of this crate: every decoder reports what it was decoding and where.

use thiserror::Error;

/// Why bytes taken from a target could not be decoded.
///
/// Addresses are target addresses (`u64` whatever the target's pointer width), computed from the
/// base address the caller gave the decoder plus the offset inside the buffer.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The buffer ended before the value did.
    #[error("truncated {what} at {address:#x}: needed {needed} bytes, {available} available")]
    Truncated {
        /// What was being decoded, e.g. `MPIR_PROCDESC[3].pid`.
        what: String,
        /// Target address of the first byte that was needed.
        address: u64,
        /// Bytes needed from `address`.
        needed: u64,
        /// Bytes the buffer holds from `address` (0 when `address` is past its end).
        available: u64,
    },
    /// An integer field has a width this decoder cannot represent (only 1, 2, 4 and 8 are).
    #[error("{what} at {address:#x} is {width} bytes wide; supported widths are 1, 2, 4 and 8")]
    UnsupportedWidth {
        /// What was being decoded.
        what: String,
        /// Target address of the field.
        address: u64,
        /// The width found.
        width: u64,
    },
    /// A C string had no NUL within the caller's bound.
    #[error("unterminated string {what} at {address:#x}: no NUL within {max_len} bytes")]
    Unterminated {
        /// What was being decoded.
        what: String,
        /// Target address of the string's first byte.
        address: u64,
        /// The bound that was searched.
        max_len: u64,
    },
    /// A count or size read from the target is negative where only counts make sense.
    #[error("{what} is negative ({value})")]
    Negative {
        /// What the value is, e.g. `MPIR_proctable_size`.
        what: String,
        /// The value read.
        value: i64,
    },
    /// A count or size read from the target is above the caller's bound.
    #[error("{what} is {value}, above the limit of {limit}")]
    TooLarge {
        /// What the value is.
        what: String,
        /// The value read.
        value: u64,
        /// The limit in force (callers can raise it).
        limit: u64,
    },
    /// A type layout (given or from debug information) lacks a member the interface needs.
    #[error("type {type_name} has no member {member}")]
    MissingMember {
        /// The type that was searched.
        type_name: String,
        /// The member that the interface defines.
        member: String,
    },
    /// A type layout is inconsistent (a member out of bounds, a pointer of the wrong width...).
    #[error("invalid layout of {type_name}: {reason}")]
    InvalidLayout {
        /// The type concerned.
        type_name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A data model was asked for with impossible type sizes.
    #[error("invalid data model: {reason}")]
    InvalidDataModel {
        /// What is wrong.
        reason: String,
    },
    /// Address arithmetic wrapped around the 64-bit address space.
    #[error("address overflow computing {what} from {base:#x} + {offset:#x}")]
    AddressOverflow {
        /// What address was being computed.
        what: String,
        /// The base address.
        base: u64,
        /// The offset added to it.
        offset: u64,
    },
}

/// Short alias used throughout the crate.
pub type Result<T, E = DecodeError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    /// The decoder's errors are causes, not wrappers: none returns a source, so none can
    /// print one twice (a variant wrapping another error must keep it that way or be
    /// `#[error(transparent)]`).
    #[test]
    fn decode_errors_have_no_source_to_print_twice() {
        let errors = [
            DecodeError::Truncated {
                what: "MPIR_PROCDESC[3].pid".into(),
                address: 0x1000,
                needed: 4,
                available: 1,
            },
            DecodeError::UnsupportedWidth {
                what: "pid".into(),
                address: 0x1000,
                width: 3,
            },
        ];
        for e in &errors {
            assert!(e.source().is_none(), "{e}");
            assert!(e.to_string().contains("0x1000"), "{e}");
        }
    }
}
