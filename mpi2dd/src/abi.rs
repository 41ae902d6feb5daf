//! The draft's four structs as fixed layouts, and the names and constants the draft defines.
//!
//! Each struct is a `#[repr(C)]` Rust struct of endian-typed fields, generic over the byte
//! order `E` and the address type `A` ([`U32<E>`] on 32-bit targets, [`U64<E>`] on 64-bit
//! ones; [`Word`]): [`Info`], [`ProcDesc`], [`SpawnDesc`], [`DirEntry`], with aliases per width
//! ([`Info32`], [`Info64`], …). The struct *is* the layout: offsets are the fields', sizes the
//! structs' (checked below by `const` assertions, and against the reference provider's DWARF
//! by the gdb test `tests/provider_abi.rs`). Decoders and encoders ([`crate::decode`]), the
//! mock provider and the fuzz seeds all go through them, in both byte orders.
//!
//! Why zerocopy and not object's `U32<E>` + `Pod`: object's `Pod` is an `unsafe` trait that
//! each struct must implement by hand (`unsafe impl`), and this crate forbids `unsafe`.
//! zerocopy's derives (`FromBytes`, `IntoBytes`, `Unaligned`, …) prove at compile time that a
//! struct has no padding and that every bit pattern is valid, with no `unsafe` in our code.
//! Every field is unaligned (byte arrays and zerocopy's byte-order integers), so `repr(C)`
//! inserts no padding: the structs are packed, as the draft asks.
//!
//! The draft's scalar types: `MPI2DD_ADDR_T` is a target address (the model's pointer width),
//! `MPI2DD_INT32_T`/`MPI2DD_UINT32_T` are 4 bytes whatever the model's `int`, `MPI2DD_BYTE_T`
//! is 1 byte. No layout here comes from debug information: the draft says the tables are read
//! "without first having to find its type in the debug information".
//!
//! - `MPI2DD_INFO` is an ordinary C struct. Its members happen to be in an order where the C
//!   ABI inserts no padding in any supported model (5+1+1+1 bytes, two 4-byte integers, then
//!   addresses), so the natural and the packed layouts are the same.
//! - `MPI2DD_PROCDESC` is packed ("packed with no intervening padding bytes allowed"). On every
//!   supported model its natural layout is the same anyway.
//! - `MPI2DD_SPAWNDESC` and `MPI2DD_DIRECTORYENTRY`: the draft states packing in its proctable
//!   section only. We read all the table entries of variant 1 packed, the only reading that
//!   lets a tool decode them without DWARF. It matters for one struct and one width only:
//!   `MPI2DD_DIRECTORYENTRY` on 64-bit targets is 20 bytes packed and 24 with the C ABI's tail
//!   padding. The reference provider's header declares it packed (`provider/mpi2dd.h`), and the
//!   gdb oracle test checks that its DWARF says 20.

use std::fmt;
use std::mem::size_of;

use mpir_types::DataModel;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

pub use zerocopy::byteorder::{BigEndian, ByteOrder, I32, LittleEndian, U32, U64};

/// The symbol of the `struct MPI2DD_INFO` every rank, directory, metadirectory and starter
/// defines.
pub const INFO_SYMBOL: &str = "MPI2DD_info";
/// The function MPI calls at points of interest; the debugger sets a breakpoint on it.
pub const BREAKPOINT_SYMBOL: &str = "MPI2DD_breakpoint";
/// `magic[0..5]`: `'M' 'P' 'I' '2' 0x7f`.
pub const MAGIC: [u8; 5] = *b"MPI2\x7f";
/// The only `version` the draft defines.
pub const VERSION: u8 = 1;
/// The only `variant` the draft defines.
pub const VARIANT: u8 = 1;
/// Number of `MPI2DD_INT32_T` in `MPI2DD_INFO.padding`.
pub const PADDING_WORDS: usize = 8;

mod sealed {
    pub trait Sealed {}
    impl<E: super::ByteOrder> Sealed for super::U32<E> {}
    impl<E: super::ByteOrder> Sealed for super::U64<E> {}
}

/// An `MPI2DD_ADDR_T` of one width and byte order: [`U32<E>`] or [`U64<E>`].
pub trait Word:
    FromBytes + IntoBytes + KnownLayout + Immutable + Unaligned + Copy + fmt::Debug + sealed::Sealed
{
    /// The address, widened.
    fn to_u64(self) -> u64;
    /// `value` as an address of this width, if it fits.
    fn from_u64(value: u64) -> Option<Self>;
}

impl<E: ByteOrder> Word for U32<E> {
    fn to_u64(self) -> u64 {
        self.get().into()
    }
    fn from_u64(value: u64) -> Option<Self> {
        u32::try_from(value).ok().map(U32::new)
    }
}

impl<E: ByteOrder> Word for U64<E> {
    fn to_u64(self) -> u64 {
        self.get()
    }
    fn from_u64(value: u64) -> Option<Self> {
        Some(U64::new(value))
    }
}

/// `struct MPI2DD_INFO`: 128 bytes on 64-bit models, 96 on 32-bit ones.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_INFO, member for member"
)]
pub struct Info<E: ByteOrder, A: Word> {
    pub magic: [u8; 5],
    pub version: u8,
    pub variant: u8,
    pub debug_state: u8,
    pub debugger_flags: U32<E>,
    pub mpi_flags: U32<E>,
    pub dll_name_32: A,
    pub dll_name_64: A,
    pub meta_host_name: A,
    pub meta_executable_name: A,
    pub abort_string: A,
    pub proctable: A,
    pub directory_table: A,
    pub metadirectory_table: A,
    pub proctable_size: I32<E>,
    pub directory_size: I32<E>,
    pub metadirectory_size: I32<E>,
    pub meta_pid: I32<E>,
    pub padding: [I32<E>; PADDING_WORDS],
}

/// The packed `struct MPI2DD_PROCDESC`, the proctable's entry: 40 bytes on 64-bit models, 24
/// on 32-bit ones.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_PROCDESC, member for member"
)]
pub struct ProcDesc<E: ByteOrder, A: Word> {
    pub host_name: A,
    pub executable_name: A,
    pub spawn_desc: A,
    pub comm_world_id: A,
    pub pid: I32<E>,
    pub rank: I32<E>,
}

/// The packed `struct MPI2DD_SPAWNDESC`: 16 bytes on 64-bit models, 12 on 32-bit ones.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_SPAWNDESC, member for member"
)]
pub struct SpawnDesc<E: ByteOrder, A: Word> {
    pub parent_comm_world_id: A,
    pub parent_rank: I32<E>,
    pub sequence: I32<E>,
}

/// The packed `struct MPI2DD_DIRECTORYENTRY`, the entry of directory and metadirectory tables:
/// 20 bytes on 64-bit models (packed, see the [module documentation](self)), 12 on 32-bit ones.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_DIRECTORYENTRY, member for member"
)]
pub struct DirEntry<E: ByteOrder, A: Word> {
    pub host_name: A,
    pub executable_name: A,
    pub pid: I32<E>,
}

/// [`Info`] of a 32-bit target.
pub type Info32<E> = Info<E, U32<E>>;
/// [`Info`] of a 64-bit target.
pub type Info64<E> = Info<E, U64<E>>;
/// [`ProcDesc`] of a 32-bit target.
pub type ProcDesc32<E> = ProcDesc<E, U32<E>>;
/// [`ProcDesc`] of a 64-bit target.
pub type ProcDesc64<E> = ProcDesc<E, U64<E>>;
/// [`SpawnDesc`] of a 32-bit target.
pub type SpawnDesc32<E> = SpawnDesc<E, U32<E>>;
/// [`SpawnDesc`] of a 64-bit target.
pub type SpawnDesc64<E> = SpawnDesc<E, U64<E>>;
/// [`DirEntry`] of a 32-bit target.
pub type DirEntry32<E> = DirEntry<E, U32<E>>;
/// [`DirEntry`] of a 64-bit target.
pub type DirEntry64<E> = DirEntry<E, U64<E>>;

type Le = LittleEndian;
type Be = BigEndian;
// Sizes counted by hand from the draft: 8 bytes of bytes, two u32, 8 addresses, 4 i32 and 32
// bytes of padding; four addresses and two i32; one address and two i32; two addresses and
// one i32. Byte order changes no size.
const _: () = assert!(size_of::<Info64<Le>>() == 8 + 8 + 8 * 8 + 16 + 32);
const _: () = assert!(size_of::<Info32<Le>>() == 8 + 8 + 8 * 4 + 16 + 32);
const _: () = assert!(size_of::<Info64<Be>>() == 128 && size_of::<Info32<Be>>() == 96);
const _: () = assert!(size_of::<ProcDesc64<Le>>() == 40 && size_of::<ProcDesc64<Be>>() == 40);
const _: () = assert!(size_of::<ProcDesc32<Le>>() == 24 && size_of::<ProcDesc32<Be>>() == 24);
const _: () = assert!(size_of::<SpawnDesc64<Le>>() == 16 && size_of::<SpawnDesc64<Be>>() == 16);
const _: () = assert!(size_of::<SpawnDesc32<Le>>() == 12 && size_of::<SpawnDesc32<Be>>() == 12);
const _: () = assert!(size_of::<DirEntry64<Le>>() == 20 && size_of::<DirEntry64<Be>>() == 20);
const _: () = assert!(size_of::<DirEntry32<Le>>() == 12 && size_of::<DirEntry32<Be>>() == 12);
// meta_pid right after the four sizes' first three, before the padding (draft order).
const _: () = assert!(std::mem::offset_of!(Info64<Le>, meta_pid) == 92);

/// The address width of a data model: which alias of each struct applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(
    clippy::exhaustive_enums,
    reason = "the two address widths the draft's structs come in"
)]
pub enum Width {
    /// 4-byte addresses ([`Info32`], …).
    W32,
    /// 8-byte addresses ([`Info64`], …).
    W64,
}

impl Width {
    /// The width of `model`'s pointers ([`DataModel`] allows 4 and 8 only).
    pub fn of(model: &DataModel) -> Width {
        if model.pointer_size() == 4 {
            Width::W32
        } else {
            Width::W64
        }
    }
}

/// `sizeof` of one of the draft's structs in a data model (width-generic over its aliases).
macro_rules! size_in {
    ($model:expr, $ty:ident) => {
        match Width::of($model) {
            Width::W32 => size_of::<$ty<Le, U32<Le>>>() as u64,
            Width::W64 => size_of::<$ty<Le, U64<Le>>>() as u64,
        }
    };
}

/// `sizeof(struct MPI2DD_INFO)` in `model`.
pub fn info_size(model: &DataModel) -> u64 {
    size_in!(model, Info)
}

/// `sizeof(struct MPI2DD_PROCDESC)` in `model`: the proctable's stride.
pub fn procdesc_size(model: &DataModel) -> u64 {
    size_in!(model, ProcDesc)
}

/// `sizeof(struct MPI2DD_SPAWNDESC)` in `model`.
pub fn spawndesc_size(model: &DataModel) -> u64 {
    size_in!(model, SpawnDesc)
}

/// `sizeof(struct MPI2DD_DIRECTORYENTRY)` in `model`: the directory tables' stride.
pub fn direntry_size(model: &DataModel) -> u64 {
    size_in!(model, DirEntry)
}

/// The offset of member `$field` of one of the draft's structs (`Info`, `ProcDesc`,
/// `SpawnDesc`, `DirEntry`) in data model `$model`, as `u64`: `offset_of!` on the struct of the
/// model's width.
///
/// ```
/// use mpi2dd::abi_offset;
/// use mpir_types::DataModel;
/// assert_eq!(abi_offset!(DataModel::LP64, Info.meta_pid), 92);
/// assert_eq!(abi_offset!(DataModel::ILP32, ProcDesc.pid), 16);
/// ```
#[macro_export]
macro_rules! abi_offset {
    ($model:expr, $ty:ident . $field:ident) => {
        match $crate::abi::Width::of(&$model) {
            $crate::abi::Width::W32 => ::core::mem::offset_of!(
                $crate::abi::$ty<$crate::abi::LittleEndian, $crate::abi::U32<$crate::abi::LittleEndian>>,
                $field
            ) as u64,
            $crate::abi::Width::W64 => ::core::mem::offset_of!(
                $crate::abi::$ty<$crate::abi::LittleEndian, $crate::abi::U64<$crate::abi::LittleEndian>>,
                $field
            ) as u64,
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn sizes_follow_the_pointer_width() {
        assert_eq!(info_size(&DataModel::LP64), 128);
        assert_eq!(info_size(&DataModel::ILP32_BE), 96);
        assert_eq!(info_size(&DataModel::LLP64), 128);
        assert_eq!(procdesc_size(&DataModel::LP64_BE), 4 * 8 + 8);
        assert_eq!(procdesc_size(&DataModel::ILP32), 4 * 4 + 8);
        assert_eq!(spawndesc_size(&DataModel::LP64), 16);
        assert_eq!(direntry_size(&DataModel::LP64), 20);
        assert_eq!(direntry_size(&DataModel::ILP32), 12);
        assert_eq!(crate::abi_offset!(DataModel::ILP32, Info.meta_pid), 60);
        assert_eq!(crate::abi_offset!(DataModel::LP64, DirEntry.pid), 16);
    }

    #[test]
    fn fields_are_stored_in_the_byte_order_of_the_type() {
        let mut be = ProcDesc32::<BigEndian>::new_zeroed();
        be.host_name = U32::new(0x0102_0304);
        be.rank = I32::new(-2);
        let b = be.as_bytes();
        assert_eq!(&b[..4], &[1, 2, 3, 4]);
        assert_eq!(&b[20..24], &[0xff, 0xff, 0xff, 0xfe]);
        let mut le = ProcDesc64::<LittleEndian>::new_zeroed();
        le.comm_world_id = U64::new(0x0102_0304_0506_0708);
        assert_eq!(&le.as_bytes()[24..32], &[8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(<U32<BigEndian> as Word>::from_u64(1 << 32), None);
        assert_eq!(
            <U64<BigEndian> as Word>::from_u64(1 << 32).map(Word::to_u64),
            Some(1 << 32)
        );
    }
}
