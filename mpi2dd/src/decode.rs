//! Decoders (and encoders, for test targets and fixtures) of the draft's four structs, in any
//! data model: byte order and address width come from the [`DataModel`], addresses are `u64`.
//!
//! Decoding never panics and never allocates more than the bytes it is given justify: a table
//! decoder needs all `count` entries in its buffer before it allocates, and the caller bounds
//! `count` (see [`table_len`]) before reading those bytes from the target.

use mpir_types::{DataModel, DecodeError, FieldLayout, View, ViewMut};

use crate::abi::{
    DirEntryLayout, InfoLayout, MAGIC, ProcDescLayout, SpawnDescLayout, VARIANT, VERSION,
};
use crate::error::{Error, Result};
use crate::flags::{DebugState, DebuggerFlags, MpiFlags};

/// A decoded `MPI2DD_INFO` (magic, version and variant checked; padding ignored).
///
/// Addresses are as stored (0 for NULL). Sizes are kept as the raw `MPI2DD_INT32_T` values:
/// they are validated when the table is read ([`table_len`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(missing_docs)] // the draft's member names; see its text for each
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

fn i32_of(v: &View<'_>, f: FieldLayout, what: &str) -> Result<i32, DecodeError> {
    // A 4-byte field sign-extended into i64 always fits i32.
    Ok(v.field_int(f, what)? as i32)
}

fn u32_of(v: &View<'_>, f: FieldLayout, what: &str) -> Result<u32, DecodeError> {
    Ok(v.field_uint(f, what)? as u32)
}

/// Decodes `MPI2DD_INFO` from `bytes`, read at `address`, checking magic, then version, then
/// variant. `bytes` must hold [`InfoLayout::size`] bytes.
pub fn decode_info(model: &DataModel, address: u64, bytes: &[u8]) -> Result<Info> {
    let l = InfoLayout::new(model);
    let v = View::new(*model, address, bytes);
    let magic = v.slice(l.magic.offset, l.magic.size, "MPI2DD_INFO.magic")?;
    if magic != MAGIC {
        let mut found = [0u8; 5];
        found.copy_from_slice(magic);
        return Err(Error::BadMagic { address, found });
    }
    let byte = |f: FieldLayout, what| v.field_uint(f, what).map(|b| b as u8);
    let version = byte(l.version, "MPI2DD_INFO.version")?;
    if version != VERSION {
        return Err(Error::UnsupportedVersion {
            address,
            found: version,
        });
    }
    let variant = byte(l.variant, "MPI2DD_INFO.variant")?;
    if variant != VARIANT {
        return Err(Error::UnsupportedVariant {
            address,
            found: variant,
        });
    }
    // Everything after the check must be inside the buffer too (the padding is not read).
    v.slice(0, l.padding.offset, "MPI2DD_INFO")?;
    let ptr = |f: FieldLayout, what| v.field_uint(f, what);
    Ok(Info {
        debug_state: DebugState::from_raw(byte(l.debug_state, "MPI2DD_INFO.debug_state")?),
        debugger_flags: DebuggerFlags::from_bits_retain(u32_of(
            &v,
            l.debugger_flags,
            "MPI2DD_INFO.debugger_flags",
        )?),
        mpi_flags: MpiFlags::from_bits_retain(u32_of(&v, l.mpi_flags, "MPI2DD_INFO.mpi_flags")?),
        dll_name_32: ptr(l.dll_name_32, "MPI2DD_INFO.dll_name_32")?,
        dll_name_64: ptr(l.dll_name_64, "MPI2DD_INFO.dll_name_64")?,
        meta_host_name: ptr(l.meta_host_name, "MPI2DD_INFO.meta_host_name")?,
        meta_executable_name: ptr(l.meta_executable_name, "MPI2DD_INFO.meta_executable_name")?,
        abort_string: ptr(l.abort_string, "MPI2DD_INFO.abort_string")?,
        proctable: ptr(l.proctable, "MPI2DD_INFO.proctable")?,
        directory_table: ptr(l.directory_table, "MPI2DD_INFO.directory_table")?,
        metadirectory_table: ptr(l.metadirectory_table, "MPI2DD_INFO.metadirectory_table")?,
        proctable_size: i32_of(&v, l.proctable_size, "MPI2DD_INFO.proctable_size")?,
        directory_size: i32_of(&v, l.directory_size, "MPI2DD_INFO.directory_size")?,
        metadirectory_size: i32_of(&v, l.metadirectory_size, "MPI2DD_INFO.metadirectory_size")?,
        meta_pid: i32_of(&v, l.meta_pid, "MPI2DD_INFO.meta_pid")?,
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
    let l = InfoLayout::new(model);
    let mut w = ViewMut::new(*model, address, out);
    w.put_bytes(l.magic.offset, &MAGIC, "magic")?;
    w.put_field_uint(l.version, VERSION.into(), "version")?;
    w.put_field_uint(l.variant, VARIANT.into(), "variant")?;
    w.put_field_uint(
        l.debug_state,
        info.debug_state.to_raw().into(),
        "debug_state",
    )?;
    w.put_field_uint(
        l.debugger_flags,
        info.debugger_flags.bits().into(),
        "debugger_flags",
    )?;
    w.put_field_uint(l.mpi_flags, info.mpi_flags.bits().into(), "mpi_flags")?;
    for (f, a, what) in [
        (l.dll_name_32, info.dll_name_32, "dll_name_32"),
        (l.dll_name_64, info.dll_name_64, "dll_name_64"),
        (l.meta_host_name, info.meta_host_name, "meta_host_name"),
        (
            l.meta_executable_name,
            info.meta_executable_name,
            "meta_executable_name",
        ),
        (l.abort_string, info.abort_string, "abort_string"),
        (l.proctable, info.proctable, "proctable"),
        (l.directory_table, info.directory_table, "directory_table"),
        (
            l.metadirectory_table,
            info.metadirectory_table,
            "metadirectory_table",
        ),
    ] {
        w.put_field_uint(f, a, what)?;
    }
    for (f, n, what) in [
        (l.proctable_size, info.proctable_size, "proctable_size"),
        (l.directory_size, info.directory_size, "directory_size"),
        (
            l.metadirectory_size,
            info.metadirectory_size,
            "metadirectory_size",
        ),
        (l.meta_pid, info.meta_pid, "meta_pid"),
    ] {
        w.put_field_int(f, n.into(), what)?;
    }
    w.put_bytes(
        l.padding.offset,
        &[0; (crate::abi::INT32 * crate::abi::PADDING_WORDS) as usize],
        "padding",
    )
}

/// One `MPI2DD_PROCDESC` as stored: string and descriptor addresses, pid and rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(missing_docs)] // the draft's member names
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
pub struct RawSpawnDesc {
    pub parent_comm_world_id: u64,
    pub parent_rank: i32,
    pub sequence: i32,
}

/// One `MPI2DD_DIRECTORYENTRY` as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(missing_docs)] // the draft's member names
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

/// Decodes `count` fixed-size entries with `one`, after checking that `bytes` holds them all.
fn decode_table<T>(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
    count: u64,
    stride: u64,
    what: &str,
    one: impl Fn(&View<'_>) -> Result<T, DecodeError>,
) -> Result<Vec<T>, DecodeError> {
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
    let mut out = Vec::with_capacity(count as usize);
    let v = View::new(*model, address, bytes);
    for i in 0..count {
        out.push(one(&v.sub(i * stride, stride, what)?)?);
    }
    Ok(out)
}

/// Decodes a proctable of `count` packed `MPI2DD_PROCDESC` read at `address`.
pub fn decode_procdescs(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
    count: u64,
) -> Result<Vec<RawProcDesc>, DecodeError> {
    let l = ProcDescLayout::new(model);
    decode_table(
        model,
        address,
        bytes,
        count,
        l.size,
        "MPI2DD_PROCDESC",
        |e| {
            Ok(RawProcDesc {
                host_name: e.field_uint(l.host_name, "MPI2DD_PROCDESC.host_name")?,
                executable_name: e
                    .field_uint(l.executable_name, "MPI2DD_PROCDESC.executable_name")?,
                spawn_desc: e.field_uint(l.spawn_desc, "MPI2DD_PROCDESC.spawn_desc")?,
                comm_world_id: e.field_uint(l.comm_world_id, "MPI2DD_PROCDESC.comm_world_id")?,
                pid: i32_of(e, l.pid, "MPI2DD_PROCDESC.pid")?,
                rank: i32_of(e, l.rank, "MPI2DD_PROCDESC.rank")?,
            })
        },
    )
}

/// Decodes one `MPI2DD_SPAWNDESC` read at `address`.
pub fn decode_spawndesc(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
) -> Result<RawSpawnDesc, DecodeError> {
    let l = SpawnDescLayout::new(model);
    let v = View::new(*model, address, bytes).sub(0, l.size, "MPI2DD_SPAWNDESC")?;
    Ok(RawSpawnDesc {
        parent_comm_world_id: v.field_uint(
            l.parent_comm_world_id,
            "MPI2DD_SPAWNDESC.parent_comm_world_id",
        )?,
        parent_rank: i32_of(&v, l.parent_rank, "MPI2DD_SPAWNDESC.parent_rank")?,
        sequence: i32_of(&v, l.sequence, "MPI2DD_SPAWNDESC.sequence")?,
    })
}

/// Decodes a directory or metadirectory table of `count` packed `MPI2DD_DIRECTORYENTRY`.
pub fn decode_direntries(
    model: &DataModel,
    address: u64,
    bytes: &[u8],
    count: u64,
) -> Result<Vec<RawDirEntry>, DecodeError> {
    let l = DirEntryLayout::new(model);
    decode_table(
        model,
        address,
        bytes,
        count,
        l.size,
        "MPI2DD_DIRECTORYENTRY",
        |e| {
            Ok(RawDirEntry {
                host_name: e.field_uint(l.host_name, "MPI2DD_DIRECTORYENTRY.host_name")?,
                executable_name: e
                    .field_uint(l.executable_name, "MPI2DD_DIRECTORYENTRY.executable_name")?,
                pid: i32_of(e, l.pid, "MPI2DD_DIRECTORYENTRY.pid")?,
            })
        },
    )
}

/// Encodes a proctable into `out` (at least `entries.len()` entries long).
pub fn encode_procdescs(
    model: &DataModel,
    address: u64,
    entries: &[RawProcDesc],
    out: &mut [u8],
) -> Result<(), DecodeError> {
    let l = ProcDescLayout::new(model);
    let mut w = ViewMut::new(*model, address, out);
    for (i, e) in entries.iter().enumerate() {
        let at = |f: FieldLayout| FieldLayout::new(i as u64 * l.size + f.offset, f.size);
        w.put_field_uint(at(l.host_name), e.host_name, "host_name")?;
        w.put_field_uint(at(l.executable_name), e.executable_name, "executable_name")?;
        w.put_field_uint(at(l.spawn_desc), e.spawn_desc, "spawn_desc")?;
        w.put_field_uint(at(l.comm_world_id), e.comm_world_id, "comm_world_id")?;
        w.put_field_int(at(l.pid), e.pid.into(), "pid")?;
        w.put_field_int(at(l.rank), e.rank.into(), "rank")?;
    }
    Ok(())
}

/// Encodes one spawn descriptor into `out`.
pub fn encode_spawndesc(
    model: &DataModel,
    address: u64,
    desc: &RawSpawnDesc,
    out: &mut [u8],
) -> Result<(), DecodeError> {
    let l = SpawnDescLayout::new(model);
    let mut w = ViewMut::new(*model, address, out);
    w.put_field_uint(
        l.parent_comm_world_id,
        desc.parent_comm_world_id,
        "parent_comm_world_id",
    )?;
    w.put_field_int(l.parent_rank, desc.parent_rank.into(), "parent_rank")?;
    w.put_field_int(l.sequence, desc.sequence.into(), "sequence")
}

/// Encodes a directory or metadirectory table into `out`.
pub fn encode_direntries(
    model: &DataModel,
    address: u64,
    entries: &[RawDirEntry],
    out: &mut [u8],
) -> Result<(), DecodeError> {
    let l = DirEntryLayout::new(model);
    let mut w = ViewMut::new(*model, address, out);
    for (i, e) in entries.iter().enumerate() {
        let at = |f: FieldLayout| FieldLayout::new(i as u64 * l.size + f.offset, f.size);
        w.put_field_uint(at(l.host_name), e.host_name, "host_name")?;
        w.put_field_uint(at(l.executable_name), e.executable_name, "executable_name")?;
        w.put_field_int(at(l.pid), e.pid.into(), "pid")?;
    }
    Ok(())
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
