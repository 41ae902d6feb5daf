//! The target's data model: byte order and the sizes of C's basic types.
//!
//! A debugger-side library reads another process whose word size and byte order need not match
//! its own. Everything that decodes target bytes takes a [`DataModel`], discovered at run time when
//! the target is opened (hence a run-time [`ByteOrder`] rather than a type parameter), and every
//! address is a `u64` so that a 64-bit host reads a 32-bit target without truncation.

use crate::error::{DecodeError, Result};

/// Byte order of target data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "lowercase"))]
#[allow(clippy::exhaustive_enums, reason = "the two byte orders")]
pub enum ByteOrder {
    /// Least significant byte first (x86, most AArch64 and RISC-V systems).
    Little,
    /// Most significant byte first (s390x, classic POWER and SPARC).
    Big,
}

impl ByteOrder {
    /// The byte order of the machine running this code.
    pub const fn host() -> Self {
        if cfg!(target_endian = "big") {
            ByteOrder::Big
        } else {
            ByteOrder::Little
        }
    }

    /// Decodes an unsigned integer from `bytes` (1 to 8 of them, checked by the caller).
    #[inline]
    pub(crate) fn read_uint(self, bytes: &[u8]) -> u64 {
        use byteorder::ByteOrder as _;
        // Fixed-width arms compile to single loads; the generic fallback is a memcpy call.
        match (self, bytes) {
            (ByteOrder::Little, &[a, b, c, d]) => u64::from(u32::from_le_bytes([a, b, c, d])),
            (ByteOrder::Big, &[a, b, c, d]) => u64::from(u32::from_be_bytes([a, b, c, d])),
            (ByteOrder::Little, &[a, b, c, d, e, f, g, h]) => {
                u64::from_le_bytes([a, b, c, d, e, f, g, h])
            }
            (ByteOrder::Big, &[a, b, c, d, e, f, g, h]) => {
                u64::from_be_bytes([a, b, c, d, e, f, g, h])
            }
            (ByteOrder::Little, _) => byteorder::LittleEndian::read_uint(bytes, bytes.len()),
            (ByteOrder::Big, _) => byteorder::BigEndian::read_uint(bytes, bytes.len()),
        }
    }

    /// Encodes the low `out.len()` bytes (1 to 8, checked by the caller) of `value` into `out`.
    #[inline]
    pub(crate) fn write_uint(self, out: &mut [u8], value: u64) {
        use byteorder::ByteOrder as _;
        let n = out.len();
        // byteorder asserts that the value fits; callers pass truncated values on purpose.
        let v = if n >= 8 {
            value
        } else {
            value & ((1u64 << (8 * n)) - 1)
        };
        match self {
            ByteOrder::Little => byteorder::LittleEndian::write_uint(out, v, n),
            ByteOrder::Big => byteorder::BigEndian::write_uint(out, v, n),
        }
    }
}

/// Sizes in bytes of C's basic types on the target: MQD's `mqs_target_type_sizes` (the five
/// members every DLL agrees on).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "MQD's mqs_target_type_sizes, member for member"
)]
pub struct TypeSizes {
    /// `sizeof(short)`.
    pub short: u8,
    /// `sizeof(int)`.
    pub int: u8,
    /// `sizeof(long)`.
    pub long: u8,
    /// `sizeof(long long)`.
    pub long_long: u8,
    /// `sizeof(void *)`.
    pub pointer: u8,
}

/// A target's data model: byte order plus C type sizes.
///
/// Built from a preset ([`DataModel::LP64`], [`DataModel::ILP32_BE`], ...) or checked by
/// [`DataModel::new`]. All fields are valid by construction: sizes are 1, 2, 4 or 8 and the pointer
/// is 4 or 8 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct DataModel {
    byte_order: ByteOrder,
    sizes: TypeSizes,
}

const fn sizes(short: u8, int: u8, long: u8, long_long: u8, pointer: u8) -> TypeSizes {
    TypeSizes {
        short,
        int,
        long,
        long_long,
        pointer,
    }
}

impl DataModel {
    /// 64-bit Unix, little-endian (x86_64, AArch64 Linux): long and pointer are 8 bytes.
    pub const LP64: DataModel = DataModel::preset(ByteOrder::Little, sizes(2, 4, 8, 8, 8));
    /// 32-bit, little-endian (i386, armhf Linux): int, long and pointer are 4 bytes.
    pub const ILP32: DataModel = DataModel::preset(ByteOrder::Little, sizes(2, 4, 4, 8, 4));
    /// 64-bit Windows, little-endian: long is 4 bytes, pointer 8.
    pub const LLP64: DataModel = DataModel::preset(ByteOrder::Little, sizes(2, 4, 4, 8, 8));
    /// 64-bit Unix, big-endian (s390x, ppc64, sparc64).
    pub const LP64_BE: DataModel = DataModel::preset(ByteOrder::Big, sizes(2, 4, 8, 8, 8));
    /// 32-bit, big-endian (ppc, classic MIPS, sparc).
    pub const ILP32_BE: DataModel = DataModel::preset(ByteOrder::Big, sizes(2, 4, 4, 8, 4));

    /// Every preset, with its name, for tests and command-line parsing.
    pub const PRESETS: [(&'static str, DataModel); 5] = [
        ("lp64", DataModel::LP64),
        ("ilp32", DataModel::ILP32),
        ("llp64", DataModel::LLP64),
        ("lp64-be", DataModel::LP64_BE),
        ("ilp32-be", DataModel::ILP32_BE),
    ];

    const fn preset(byte_order: ByteOrder, sizes: TypeSizes) -> Self {
        DataModel { byte_order, sizes }
    }

    /// A data model with the given byte order and type sizes, checked: each size must be 1, 2, 4 or
    /// 8 bytes and the pointer 4 or 8 (this library does not decode 16-bit or 128-bit targets).
    pub fn new(byte_order: ByteOrder, sizes: TypeSizes) -> Result<Self> {
        let all = [
            ("short", sizes.short),
            ("int", sizes.int),
            ("long", sizes.long),
            ("long long", sizes.long_long),
            ("pointer", sizes.pointer),
        ];
        for (name, size) in all {
            if !matches!(size, 1 | 2 | 4 | 8) {
                return Err(DecodeError::InvalidDataModel {
                    reason: format!("sizeof({name}) = {size}; must be 1, 2, 4 or 8"),
                });
            }
        }
        if !matches!(sizes.pointer, 4 | 8) {
            return Err(DecodeError::InvalidDataModel {
                reason: format!("pointer size {} is not 4 or 8", sizes.pointer),
            });
        }
        Ok(DataModel { byte_order, sizes })
    }

    /// The data model of the machine running this code (for tests against local processes).
    pub fn host() -> Self {
        // Every Rust target has short=2, int=4, long long=8; long follows the pointer except on
        // Windows.
        let pointer = std::mem::size_of::<usize>() as u8;
        let long = if cfg!(windows) { 4 } else { pointer };
        DataModel::preset(ByteOrder::host(), sizes(2, 4, long, 8, pointer))
    }

    /// The preset called `name` (as listed in [`DataModel::PRESETS`]), case-insensitive.
    pub fn from_name(name: &str) -> Option<Self> {
        DataModel::PRESETS
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, m)| m)
    }

    /// Byte order.
    pub const fn byte_order(&self) -> ByteOrder {
        self.byte_order
    }

    /// All type sizes.
    pub const fn sizes(&self) -> TypeSizes {
        self.sizes
    }

    /// `sizeof(void *)`: 4 or 8.
    pub const fn pointer_size(&self) -> u64 {
        self.sizes.pointer as u64
    }

    /// `sizeof(int)`.
    pub const fn int_size(&self) -> u64 {
        self.sizes.int as u64
    }

    /// `sizeof(long)`.
    pub const fn long_size(&self) -> u64 {
        self.sizes.long as u64
    }

    /// `sizeof(short)`.
    pub const fn short_size(&self) -> u64 {
        self.sizes.short as u64
    }

    /// `sizeof(long long)`.
    pub const fn long_long_size(&self) -> u64 {
        self.sizes.long_long as u64
    }

    /// The largest address a pointer of this model can hold.
    pub const fn max_address(&self) -> u64 {
        if self.sizes.pointer >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * self.sizes.pointer as u32)) - 1
        }
    }
}

#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for DataModel {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        struct Raw {
            byte_order: ByteOrder,
            sizes: TypeSizes,
        }
        let raw = Raw::deserialize(d)?;
        DataModel::new(raw.byte_order, raw.sizes).map_err(serde::de::Error::custom)
    }
}

impl std::fmt::Display for DataModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some((name, _)) = DataModel::PRESETS.iter().find(|(_, m)| m == self) {
            return f.write_str(name);
        }
        let s = self.sizes;
        write!(
            f,
            "{:?}-endian short={} int={} long={} long long={} pointer={}",
            self.byte_order, s.short, s.int, s.long, s.long_long, s.pointer
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid_and_named() {
        for (name, m) in DataModel::PRESETS {
            assert_eq!(DataModel::new(m.byte_order(), m.sizes()), Ok(m));
            assert_eq!(DataModel::from_name(name), Some(m));
            assert_eq!(m.to_string(), name);
        }
        assert_eq!(DataModel::LLP64.long_size(), 4);
        assert_eq!(DataModel::LLP64.pointer_size(), 8);
        assert_eq!(DataModel::ILP32_BE.max_address(), 0xffff_ffff);
    }

    #[test]
    fn rejects_impossible_sizes() {
        let mut s = DataModel::LP64.sizes();
        s.pointer = 2;
        assert!(matches!(
            DataModel::new(ByteOrder::Little, s),
            Err(DecodeError::InvalidDataModel { .. })
        ));
        s.pointer = 8;
        s.int = 3;
        let e = DataModel::new(ByteOrder::Little, s).unwrap_err();
        assert!(e.to_string().contains("sizeof(int) = 3"), "{e}");
    }

    #[test]
    fn host_model_matches_rust() {
        let h = DataModel::host();
        assert_eq!(h.pointer_size() as usize, std::mem::size_of::<*const u8>());
        assert_eq!(
            h.long_size() as usize,
            std::mem::size_of::<std::ffi::c_long>()
        );
        assert_eq!(
            h.int_size() as usize,
            std::mem::size_of::<std::ffi::c_int>()
        );
    }

    #[test]
    fn write_uint_truncates_and_roundtrips() {
        for order in [ByteOrder::Little, ByteOrder::Big] {
            let mut b = [0u8; 2];
            order.write_uint(&mut b, 0x1_2345);
            assert_eq!(order.read_uint(&b), 0x2345);
        }
    }
}
