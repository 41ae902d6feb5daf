//! Decoders (and encoders, for test targets and fixtures) of the draft's four structs, in any
//! data model: byte order and address width come from the [`DataModel`], addresses are `u64`.
//! Both directions go through the fixed layouts of [`crate::abi`]: the model picks the
//! struct's byte order and width, zerocopy reads or writes its bytes.
//!
//! Decoding never panics and never allocates more than the bytes it is given justify: a table
//! decoder needs all `count` entries in its buffer before it allocates, and the caller bounds
//! `count` (see [`table_len`]) before reading those bytes from the target.

use std::mem::{offset_of, size_of};

use mpir_types::{ByteOrder, DataModel, DecodeError};
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::abi::{
    self, BigEndian, I32, LittleEndian, MAGIC, U32, U64, VARIANT, VERSION, Width, Word,
};
use crate::error::{Error, Result};
use crate::flags::{DebugState, DebuggerFlags, MpiFlags};

/// Calls `$f::<E, A>(args)` with the byte order and address type of `$model`.
macro_rules! by_model {
    ($model:expr, $f:ident ( $($arg:expr),* $(,)? )) => {
        match ($model.byte_order(), Width::of($model)) {
            (ByteOrder::Little, Width::W32) => $f::<LittleEndian, U32<LittleEndian>>($($arg),*),
            (ByteOrder::Little, Width::W64) => $f::<LittleEndian, U64<LittleEndian>>($($arg),*),
            (ByteOrder::Big, Width::W32) => $f::<BigEndian, U32<BigEndian>>($($arg),*),
            (ByteOrder::Big, Width::W64) => $f::<BigEndian, U64<BigEndian>>($($arg),*),
        }
    };
}

/// A decoded `MPI2DD_INFO` (magic, version and variant checked; padding ignored).
///
/// Addresses are as stored (0 for NULL). Sizes are kept as the raw `MPI2DD_INT32_T` values:
/// they are validated when the table is read ([`table_len`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(missing_docs)] // the draft's member names; see its text for each
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_INFO, member for member"
)]
pub struct Info {
    pub debug_state: DebugState,
    pub debugger_flags: DebuggerFlags,
    pub mpi_flags: MpiFlags,
    pub dll_name_32: u64,
    pub dll_name_64: u64,
    pub meta_host_name: u64,
    pub meta_executable_name: u64,
    pub abort_string: u64,
    pub proctable: u64,
    pub directory_table: u64,
    pub metadirectory_table: u64,
    pub proctable_size: i32,
    pub directory_size: i32,
    pub metadirectory_size: i32,
    pub meta_pid: i32,
}

impl Info {
    /// An `MPI2DD_INFO` as a provider initialises it: every address NULL, every size and flag 0.
    pub const EMPTY: Info = Info {
        debug_state: DebugState::Unknown(0),
        debugger_flags: DebuggerFlags::EMPTY,
        mpi_flags: MpiFlags::EMPTY,
        dll_name_32: 0,
        dll_name_64: 0,
        meta_host_name: 0,
        meta_executable_name: 0,
        abort_string: 0,
        proctable: 0,
        directory_table: 0,
        metadirectory_table: 0,
        proctable_size: 0,
        directory_size: 0,
        metadirectory_size: 0,
        meta_pid: 0,
    };

    /// The table pointers and sizes: what must not change while a reader follows them.
    pub fn tables(&self) -> [(u64, i32); 3] {
        [
            (self.proctable, self.proctable_size),
            (self.directory_table, self.directory_size),
            (self.metadirectory_table, self.metadirectory_size),
        ]
    }
}

/// `what` needs `needed` bytes at `address`; `available` are there.
fn truncated(what: &str, address: u64, needed: u64, available: usize) -> DecodeError {
    DecodeError::Truncated {
        what: what.to_string(),
        address,
        needed,
        available: available as u64,
    }
}

/// `value` as an address of width `A`, if it fits.
fn addr<A: Word>(value: u64, what: &str) -> Result<A, DecodeError> {
    A::from_u64(value).ok_or_else(|| DecodeError::TooLarge {
        what: what.to_string(),
        value,
        limit: u32::MAX.into(),
    })
}

/// Copies `value`'s bytes to the start of `out` (`what` names it when `out` is too short).
fn put<T: IntoBytes + Immutable>(
    value: &T,
    out: &mut [u8],
    address: u64,
    what: &str,
) -> Result<(), DecodeError> {
    let bytes = value.as_bytes();
    let available = out.len();
    out.get_mut(..bytes.len())
        .ok_or_else(|| truncated(what, address, bytes.len() as u64, available))?
        .copy_from_slice(bytes);
    Ok(())
}

/// Decodes `MPI2DD_INFO` from `bytes`, read at `address`, checking magic, then version, then
/// variant. `bytes` must hold [`abi::info_size`] bytes.
pub fn decode_info(model: &DataModel, address: u64, bytes: &[u8]) -> Result<Info> {
    // Magic, version and variant come first (same offsets in every model), checked in that
    // order on whatever bytes there are.
    type Head = abi::Info32<LittleEndian>;
    let magic = bytes
        .get(..MAGIC.len())
        .ok_or_else(|| truncated("MPI2DD_INFO.magic", address, 5, bytes.len()))?;
    if magic != MAGIC {
        let mut found = [0u8; 5];
        found.copy_from_slice(magic);
        return Err(Error::BadMagic { address, found });
    }
    let byte = |at: usize, what: &str| {
        bytes
            .get(at)
            .copied()
            .ok_or_else(|| truncated(what, address + at as u64, 1, 0))
    };
    let version = byte(offset_of!(Head, version), "MPI2DD_INFO.version")?;
    if version != VERSION {
        return Err(Error::UnsupportedVersion {
            address,
            found: version,
        });
    }
    let variant = byte(offset_of!(Head, variant), "MPI2DD_INFO.variant")?;
    if variant != VARIANT {
        return Err(Error::UnsupportedVariant {
            address,
            found: variant,
        });
    }
    Ok(by_model!(model, info_from(address, bytes))?)
}

fn info_from<E: abi::ByteOrder, A: Word>(address: u64, bytes: &[u8]) -> Result<Info, DecodeError> {
    let (raw, _) = abi::Info::<E, A>::read_from_prefix(bytes).map_err(|_| {
        truncated(
            "MPI2DD_INFO",
            address,
            size_of::<abi::Info<E, A>>() as u64,
            bytes.len(),
        )
    })?;
    Ok(Info {
        debug_state: DebugState::from_raw(raw.debug_state),
        debugger_flags: DebuggerFlags::from_bits_retain(raw.debugger_flags.get()),
        mpi_flags: MpiFlags::from_bits_retain(raw.mpi_flags.get()),
        dll_name_32: raw.dll_name_32.to_u64(),
        dll_name_64: raw.dll_name_64.to_u64(),
        meta_host_name: raw.meta_host_name.to_u64(),
        meta_executable_name: raw.meta_executable_name.to_u64(),
        abort_string: raw.abort_string.to_u64(),
        proctable: raw.proctable.to_u64(),
        directory_table: raw.directory_table.to_u64(),
        metadirectory_table: raw.metadirectory_table.to_u64(),
        proctable_size: raw.proctable_size.get(),
        directory_size: raw.directory_size.get(),
        metadirectory_size: raw.metadirectory_size.get(),
        meta_pid: raw.meta_pid.get(),
    })
}

/// Encodes `info` (with the magic, version 1 and variant 1) into `out`, destined for
/// `address`. The padding is zeroed.
pub fn encode_info(
    model: &DataModel,
    address: u64,
    info: &Info,
    out: &mut [u8],
) -> Result<(), DecodeError> {
    by_model!(model, info_to(address, info, out))
}

fn info_to<E: abi::ByteOrder, A: Word>(
    address: u64,
    info: &Info,
    out: &mut [u8],
) -> Result<(), DecodeError> {
    let mut raw = abi::Info::<E, A>::new_zeroed();
    raw.magic = MAGIC;
    raw.version = VERSION;
    raw.variant = VARIANT;
    raw.debug_state = info.debug_state.to_raw();
    raw.debugger_flags = U32::new(info.debugger_flags.bits());
    raw.mpi_flags = U32::new(info.mpi_flags.bits());
    raw.dll_name_32 = addr(info.dll_name_32, "dll_name_32")?;
    raw.dll_name_64 = addr(info.dll_name_64, "dll_name_64")?;
    raw.meta_host_name = addr(info.meta_host_name, "meta_host_name")?;
    raw.meta_executable_name = addr(info.meta_executable_name, "meta_executable_name")?;
    raw.abort_string = addr(info.abort_string, "abort_string")?;
    raw.proctable = addr(info.proctable, "proctable")?;
    raw.directory_table = addr(info.directory_table, "directory_table")?;
    raw.metadirectory_table = addr(info.metadirectory_table, "metadirectory_table")?;
    raw.proctable_size = I32::new(info.proctable_size);
    raw.directory_size = I32::new(info.directory_size);
    raw.metadirectory_size = I32::new(info.metadirectory_size);
    raw.meta_pid = I32::new(info.meta_pid);
    put(&raw, out, address, "MPI2DD_INFO")
}

/// One `MPI2DD_PROCDESC` as stored: string and descriptor addresses, pid and rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(missing_docs)] // the draft's member names
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_PROCDESC, member for member"
)]
pub struct RawProcDesc {
    pub host_name: u64,
    pub executable_name: u64,
    /// Address of an `MPI2DD_SPAWNDESC`, or 0 for a rank of a world created by a starter.
    pub spawn_desc: u64,
    /// Address of the string naming the rank's `MPI_COMM_WORLD`.
    pub comm_world_id: u64,
    pub pid: i32,
    pub rank: i32,
}

/// One `MPI2DD_SPAWNDESC` as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(missing_docs)] // the draft's member names
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_SPAWNDESC, member for member"
)]
pub struct RawSpawnDesc {
    pub parent_comm_world_id: u64,
    pub parent_rank: i32,
    pub sequence: i32,
}

/// One `MPI2DD_DIRECTORYENTRY` as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(missing_docs)] // the draft's member names
#[allow(
    clippy::exhaustive_structs,
    reason = "the draft's MPI2DD_DIRECTORYENTRY, member for member"
)]
pub struct RawDirEntry {
    pub host_name: u64,
    pub executable_name: u64,
    pub pid: i32,
}

/// Validates a table size read from the target (`what` names it): not negative, at most
/// `limit` entries.
pub fn table_len(raw: i32, limit: u64, what: &str) -> Result<u64, DecodeError> {
    let n = u64::try_from(raw).map_err(|_| DecodeError::Negative {
        what: what.to_string(),
        value: raw.into(),
    })?;
    if n > limit {
        return Err(DecodeError::TooLarge {
            what: what.to_string(),
            value: n,
            limit,
        });
    }
    Ok(n)
}

/// Bytes spanned by `count` entries of `stride` bytes at `address`, checked for overflow of
/// the 64-bit space and of the model's address width.
pub fn table_bytes(
    model: &DataModel,
    address: u64,
    stride: u64,
    count: u64,
    what: &str,
) -> Result<u64, DecodeError> {
    count
        .checked_mul(stride)
        .filter(|&n| {
            address
                .checked_add(n)
                .is_some_and(|end| end.saturating_sub(1) <= model.max_address())
        })
        .ok_or_else(|| DecodeError::AddressOverflow {
            what: format!("end of {what} ({count} entries of {stride} bytes)"),
            base: address,
            offset: count.saturating_mul(stride),
        })
}

/// Decodes `count` entries of layout `T` with `one`, after checking that `bytes` holds them
/// all.
fn decode_table<T: FromBytes + KnownLayout + Immutable, R>(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
    count: u64,
    what: &str,
    one: impl Fn(&T) -> R,
) -> Result<Vec<R>, DecodeError> {
    let stride = size_of::<T>() as u64;
    let total = table_bytes(model, address, stride, count, what)?;
    if (bytes.len() as u64) < total {
        let first_missing = bytes.len() as u64 / stride;
        return Err(DecodeError::Truncated {
            what: format!("{what}[{first_missing}] of {count}"),
            address: address.wrapping_add(first_missing * stride),
            needed: total - first_missing * stride,
            available: bytes.len() as u64 - first_missing * stride,
        });
    }
    // `count * stride <= bytes.len()`: the allocation is bounded by the input.
    let (entries, _) = <[T]>::ref_from_prefix_with_elems(bytes, count as usize)
        .map_err(|_| truncated(what, address, total, bytes.len()))?;
    Ok(entries.iter().map(one).collect())
}

/// Encodes `entries` with `one` into consecutive entries of layout `T` at the start of `out`.
fn encode_table<T: IntoBytes + Immutable, R>(
    address: u64,
    entries: &[R],
    out: &mut [u8],
    what: &str,
    one: impl Fn(&R) -> Result<T, DecodeError>,
) -> Result<(), DecodeError> {
    let stride = size_of::<T>();
    for (i, e) in entries.iter().enumerate() {
        let at = i * stride;
        let slot = out.get_mut(at..).unwrap_or_default();
        put(&one(e)?, slot, address.wrapping_add(at as u64), what)?;
    }
    Ok(())
}

/// Decodes a proctable of `count` packed `MPI2DD_PROCDESC` read at `address`.
pub fn decode_procdescs(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
    count: u64,
) -> Result<Vec<RawProcDesc>, DecodeError> {
    fn go<E: abi::ByteOrder, A: Word>(
        model: &DataModel,
        address: u64,
        bytes: &[u8],
        count: u64,
    ) -> Result<Vec<RawProcDesc>, DecodeError> {
        decode_table(
            model,
            address,
            bytes,
            count,
            "MPI2DD_PROCDESC",
            |e: &abi::ProcDesc<E, A>| RawProcDesc {
                host_name: e.host_name.to_u64(),
                executable_name: e.executable_name.to_u64(),
                spawn_desc: e.spawn_desc.to_u64(),
                comm_world_id: e.comm_world_id.to_u64(),
                pid: e.pid.get(),
                rank: e.rank.get(),
            },
        )
    }
    by_model!(model, go(model, address, bytes, count))
}

/// Decodes one `MPI2DD_SPAWNDESC` read at `address`.
pub fn decode_spawndesc(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
) -> Result<RawSpawnDesc, DecodeError> {
    fn go<E: abi::ByteOrder, A: Word>(
        address: u64,
        bytes: &[u8],
    ) -> Result<RawSpawnDesc, DecodeError> {
        let (d, _) = abi::SpawnDesc::<E, A>::read_from_prefix(bytes).map_err(|_| {
            truncated(
                "MPI2DD_SPAWNDESC",
                address,
                size_of::<abi::SpawnDesc<E, A>>() as u64,
                bytes.len(),
            )
        })?;
        Ok(RawSpawnDesc {
            parent_comm_world_id: d.parent_comm_world_id.to_u64(),
            parent_rank: d.parent_rank.get(),
            sequence: d.sequence.get(),
        })
    }
    by_model!(model, go(address, bytes))
}

/// Decodes a directory or metadirectory table of `count` packed `MPI2DD_DIRECTORYENTRY`.
pub fn decode_direntries(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
    count: u64,
) -> Result<Vec<RawDirEntry>, DecodeError> {
    fn go<E: abi::ByteOrder, A: Word>(
        model: &DataModel,
        address: u64,
        bytes: &[u8],
        count: u64,
    ) -> Result<Vec<RawDirEntry>, DecodeError> {
        decode_table(
            model,
            address,
            bytes,
            count,
            "MPI2DD_DIRECTORYENTRY",
            |e: &abi::DirEntry<E, A>| RawDirEntry {
                host_name: e.host_name.to_u64(),
                executable_name: e.executable_name.to_u64(),
                pid: e.pid.get(),
            },
        )
    }
    by_model!(model, go(model, address, bytes, count))
}

/// Encodes a proctable into `out` (at least `entries.len()` entries long).
pub fn encode_procdescs(
    model: &DataModel,
    address: u64,
    entries: &[RawProcDesc],
    out: &mut [u8],
) -> Result<(), DecodeError> {
    fn go<E: abi::ByteOrder, A: Word>(
        address: u64,
        entries: &[RawProcDesc],
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        encode_table(address, entries, out, "MPI2DD_PROCDESC", |e| {
            Ok(abi::ProcDesc::<E, A> {
                host_name: addr(e.host_name, "host_name")?,
                executable_name: addr(e.executable_name, "executable_name")?,
                spawn_desc: addr(e.spawn_desc, "spawn_desc")?,
                comm_world_id: addr(e.comm_world_id, "comm_world_id")?,
                pid: I32::new(e.pid),
                rank: I32::new(e.rank),
            })
        })
    }
    by_model!(model, go(address, entries, out))
}

/// Encodes one spawn descriptor into `out`.
pub fn encode_spawndesc(
    model: &DataModel,
    address: u64,
    desc: &RawSpawnDesc,
    out: &mut [u8],
) -> Result<(), DecodeError> {
    fn go<E: abi::ByteOrder, A: Word>(
        address: u64,
        desc: &RawSpawnDesc,
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        let raw = abi::SpawnDesc::<E, A> {
            parent_comm_world_id: addr(desc.parent_comm_world_id, "parent_comm_world_id")?,
            parent_rank: I32::new(desc.parent_rank),
            sequence: I32::new(desc.sequence),
        };
        put(&raw, out, address, "MPI2DD_SPAWNDESC")
    }
    by_model!(model, go(address, desc, out))
}

/// Encodes a directory or metadirectory table into `out`.
pub fn encode_direntries(
    model: &DataModel,
    address: u64,
    entries: &[RawDirEntry],
    out: &mut [u8],
) -> Result<(), DecodeError> {
    fn go<E: abi::ByteOrder, A: Word>(
        address: u64,
        entries: &[RawDirEntry],
        out: &mut [u8],
    ) -> Result<(), DecodeError> {
        encode_table(address, entries, out, "MPI2DD_DIRECTORYENTRY", |e| {
            Ok(abi::DirEntry::<E, A> {
                host_name: addr(e.host_name, "host_name")?,
                executable_name: addr(e.executable_name, "executable_name")?,
                pid: I32::new(e.pid),
            })
        })
    }
    by_model!(model, go(address, entries, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes written by hand from the draft's member list (not by `encode_info`), LP64 LE.
    #[test]
    fn decodes_a_hand_written_lp64_info() {
        let mut b = vec![0u8; 128];
        b[..5].copy_from_slice(b"MPI2\x7f");
        b[5] = 1; // version
        b[6] = 1; // variant
        b[7] = 2; // debug_state SPAWN
        b[8..12].copy_from_slice(&0x0000_0005u32.to_le_bytes()); // GATE | REQUEST_DIR_EVENTS
        b[12..16].copy_from_slice(&0x0000_0003u32.to_le_bytes()); // METADIR | DIR
        b[32..40].copy_from_slice(&0x7fff_0000_1000u64.to_le_bytes()); // meta_host_name
        b[56..64].copy_from_slice(&0x5000u64.to_le_bytes()); // proctable
        b[80..84].copy_from_slice(&7i32.to_le_bytes()); // proctable_size
        b[92..96].copy_from_slice(&4242i32.to_le_bytes()); // meta_pid
        b[100..128].fill(0xee); // padding: ignored
        let i = decode_info(&DataModel::LP64, 0x9000, &b).unwrap();
        assert_eq!(i.debug_state, DebugState::Spawn);
        assert_eq!(
            i.debugger_flags,
            DebuggerFlags::GATE | DebuggerFlags::REQUEST_DIRECTORY_EVENTS
        );
        assert_eq!(i.mpi_flags, MpiFlags::I_AM_METADIR | MpiFlags::I_AM_DIR);
        assert_eq!(i.meta_host_name, 0x7fff_0000_1000);
        assert_eq!(i.proctable, 0x5000);
        assert_eq!(i.proctable_size, 7);
        assert_eq!(i.meta_pid, 4242);
        assert_eq!(i.directory_table, 0);
    }

    /// A big-endian 32-bit proctable entry written by hand from the draft's member list.
    #[test]
    fn decodes_and_encodes_a_hand_written_ilp32_be_procdesc() {
        let mut b = vec![0u8; 24];
        b[0..4].copy_from_slice(&0x1000u32.to_be_bytes()); // host_name
        b[4..8].copy_from_slice(&0x2000u32.to_be_bytes()); // executable_name
        b[12..16].copy_from_slice(&0x3000u32.to_be_bytes()); // comm_world_id
        b[16..20].copy_from_slice(&4242i32.to_be_bytes()); // pid
        b[20..24].copy_from_slice(&(-1i32).to_be_bytes()); // rank
        let m = DataModel::ILP32_BE;
        let e = decode_procdescs(&m, 0x500, &b, 1).unwrap();
        let want = RawProcDesc {
            host_name: 0x1000,
            executable_name: 0x2000,
            spawn_desc: 0,
            comm_world_id: 0x3000,
            pid: 4242,
            rank: -1,
        };
        assert_eq!(e, [want]);
        let mut out = vec![0xaau8; 24];
        encode_procdescs(&m, 0x500, &[want], &mut out).unwrap();
        assert_eq!(out, b);
        // An address that does not fit 32 bits is refused, not truncated.
        let wide = RawProcDesc {
            host_name: 1 << 32,
            ..want
        };
        assert!(matches!(
            encode_procdescs(&m, 0x500, &[wide], &mut out),
            Err(DecodeError::TooLarge { .. })
        ));
        // Too short an output buffer is an error, not a panic.
        assert!(encode_procdescs(&m, 0x500, &[want, want], &mut out).is_err());
    }

    #[test]
    fn refuses_wrong_magic_version_variant_in_that_order() {
        let mut b = vec![0u8; 96];
        encode_info(&DataModel::ILP32_BE, 0x100, &Info::EMPTY, &mut b).unwrap();
        let m = DataModel::ILP32_BE;
        assert!(decode_info(&m, 0x100, &b).is_ok());
        let mut bad = b.clone();
        bad[4] = 0x7e;
        bad[5] = 9;
        let e = decode_info(&m, 0x100, &bad).unwrap_err();
        assert!(
            matches!(e, Error::BadMagic { address: 0x100, found } if found == *b"MPI2\x7e"),
            "{e:?}"
        );
        assert!(e.to_string().contains("4d 50 49 32 7f"), "{e}");
        let mut bad = b.clone();
        bad[5] = 2;
        bad[6] = 0;
        assert_eq!(
            decode_info(&m, 0x100, &bad),
            Err(Error::UnsupportedVersion {
                address: 0x100,
                found: 2
            })
        );
        let mut bad = b.clone();
        bad[6] = 0;
        assert_eq!(
            decode_info(&m, 0x100, &bad),
            Err(Error::UnsupportedVariant {
                address: 0x100,
                found: 0
            })
        );
        // Truncated before meta_pid: an error naming an address inside the struct.
        let e = decode_info(&m, 0x100, &b[..60]).unwrap_err();
        assert!(
            matches!(e, Error::Decode(DecodeError::Truncated { .. })),
            "{e:?}"
        );
        // Short of even the magic.
        assert!(decode_info(&m, 0x100, &b[..3]).is_err());
    }

    #[test]
    fn table_sizes_are_bounded_and_overflow_checked() {
        assert_eq!(table_len(5, 10, "t"), Ok(5));
        assert!(matches!(
            table_len(-1, 10, "t"),
            Err(DecodeError::Negative { value: -1, .. })
        ));
        assert!(matches!(
            table_len(i32::MAX, 10, "t"),
            Err(DecodeError::TooLarge { .. })
        ));
        // A 32-bit table that would run past 4 GiB.
        assert!(table_bytes(&DataModel::ILP32, 0xffff_ff00, 24, 100, "t").is_err());
        assert!(table_bytes(&DataModel::LP64, u64::MAX - 10, 40, 1, "t").is_err());
        assert_eq!(table_bytes(&DataModel::LP64, 0x1000, 40, 3, "t"), Ok(120));
    }

    #[test]
    fn a_table_larger_than_its_bytes_is_refused_before_allocating() {
        let e = decode_procdescs(&DataModel::LP64, 0x1000, &[0; 100], 1 << 40).unwrap_err();
        // 100 bytes hold two 40-byte entries: the third is the first missing one.
        assert!(
            matches!(
                e,
                DecodeError::Truncated {
                    address: 0x1050,
                    ..
                }
            ),
            "{e:?}"
        );
    }
}
