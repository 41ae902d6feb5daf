//! The raw table: bounds on its size, decoding `MPIR_PROCDESC` entries from the starter's bytes,
//! encoding them (for test targets), and the string addresses a reader must fetch.

use super::procdesc::ProcDescLayout;
use crate::error::{DecodeError, Result};
use crate::layout::FieldLayout;
use crate::model::DataModel;
use crate::view::ViewMut;

/// One table entry as stored in the starter: two string addresses and the pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "MPIR_PROCDESC, member for member"
)]
pub struct RawProcDesc {
    /// Address of the NUL-terminated host name in the starter.
    pub host_name: u64,
    /// Address of the NUL-terminated executable name in the starter.
    pub executable_name: u64,
    /// The pid, sign-extended from the field's width.
    pub pid: i64,
}

/// Validates a raw `MPIR_proctable_size` against a limit and returns the entry count.
pub fn proctable_len(raw_size: i64, limit: u64) -> Result<u64> {
    let what = || "MPIR_proctable_size".to_string();
    let n = u64::try_from(raw_size).map_err(|_| DecodeError::Negative {
        what: what(),
        value: raw_size,
    })?;
    if n > limit {
        return Err(DecodeError::TooLarge {
            what: what(),
            value: n,
            limit,
        });
    }
    Ok(n)
}

/// Bytes a table of `count` entries spans, or an error naming the overflow.
pub fn proctable_bytes(layout: &ProcDescLayout, table_address: u64, count: u64) -> Result<u64> {
    count
        .checked_mul(layout.size)
        .filter(|&n| table_address.checked_add(n).is_some())
        .ok_or_else(|| DecodeError::AddressOverflow {
            what: format!("end of MPIR_proctable ({count} entries)"),
            base: table_address,
            offset: count.saturating_mul(layout.size),
        })
}

/// Decodes `count` entries from `bytes`, read from the starter at `table_address`.
///
/// `bytes` must hold the whole table (`count * layout.size` bytes); what is missing is reported
/// as [`DecodeError::Truncated`] with the first missing entry's address. Memory use is bounded
/// by `bytes.len()`, whatever `count` says.
pub fn decode_proctable(
    model: &DataModel,
    layout: &ProcDescLayout,
    table_address: u64,
    bytes: &[u8],
    count: u64,
) -> Result<Vec<RawProcDesc>> {
    layout.validate(model)?;
    let total = proctable_bytes(layout, table_address, count)?;
    if (bytes.len() as u64) < total {
        let first_missing = bytes.len() as u64 / layout.size;
        return Err(DecodeError::Truncated {
            what: format!("MPIR_proctable[{first_missing}] of {count}"),
            address: table_address.wrapping_add(first_missing * layout.size),
            needed: total - first_missing * layout.size,
            available: bytes.len() as u64 - first_missing * layout.size,
        });
    }
    if count == 0 {
        return Ok(Vec::new());
    }
    // Everything that can fail was checked above: the layout's fields lie inside `layout.size`
    // with supported widths, and `bytes` holds `count` entries. The loop is monomorphised per
    // (byte order, pointer width, pid width) and reads with no `Result` in the way: this is the
    // hot path of a million-rank table.
    // `total <= bytes.len()`, so this allocation is bounded by the input.
    let mut out = Vec::with_capacity(count as usize);
    let order = model.byte_order();
    let big = order == crate::ByteOrder::Big;
    let (ptr, pid) = (layout.host_name.size, layout.pid.size);
    let out_ref = &mut out;
    match (big, ptr, pid) {
        (false, 8, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<false, 8>,
            fixed::<false, 4>,
        ),
        (false, 8, 8) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<false, 8>,
            fixed::<false, 8>,
        ),
        (false, 4, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<false, 4>,
            fixed::<false, 4>,
        ),
        (true, 8, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<true, 8>,
            fixed::<true, 4>,
        ),
        (true, 8, 8) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<true, 8>,
            fixed::<true, 8>,
        ),
        (true, 4, 4) => decode_with(
            bytes,
            layout,
            count,
            out_ref,
            fixed::<true, 4>,
            fixed::<true, 4>,
        ),
        // Any other widths (e.g. a 2-byte pid): read with run-time widths.
        _ => {
            let any = |size: u64| {
                move |entry: &[u8], offset: u64| {
                    entry
                        .get(offset as usize..(offset + size) as usize)
                        .map_or(0, |b| order.read_uint(b))
                }
            };
            decode_with(bytes, layout, count, out_ref, any(ptr), any(pid))
        }
    }
    Ok(out)
}

/// Reads an `N`-byte unsigned integer at `offset` of `entry` (0 if out of range, which the
/// caller's validation rules out).
#[inline(always)]
fn fixed<const BIG: bool, const N: usize>(entry: &[u8], offset: u64) -> u64 {
    let Some(src) = entry.get(offset as usize..offset as usize + N) else {
        return 0;
    };
    let mut b = [0u8; 8];
    let dst = if BIG {
        b.get_mut(8 - N..)
    } else {
        b.get_mut(..N)
    };
    if let Some(dst) = dst {
        dst.copy_from_slice(src);
    }
    if BIG {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    }
}

/// The table loop, given readers for pointer-sized and pid-sized fields (`entry`, offset).
/// Monomorphised for each pair of readers, so the common widths compile to plain loads.
#[inline(never)]
fn decode_with(
    bytes: &[u8],
    layout: &ProcDescLayout,
    count: u64,
    out: &mut Vec<RawProcDesc>,
    pointer: impl Fn(&[u8], u64) -> u64,
    pid: impl Fn(&[u8], u64) -> u64,
) {
    let (h, e, p, pid_size) = (
        layout.host_name.offset,
        layout.executable_name.offset,
        layout.pid.offset,
        layout.pid.size,
    );
    for entry in bytes
        .chunks_exact(layout.size as usize)
        .take(count as usize)
    {
        out.push(RawProcDesc {
            host_name: pointer(entry, h),
            executable_name: pointer(entry, e),
            pid: crate::view::sign_extend(pid(entry, p), pid_size),
        });
    }
}

/// Encodes `entries` as a table in `layout` (for test targets and the demo starter). Bytes that
/// no field covers (padding) are left as they are in `out`.
pub fn encode_proctable(
    model: &DataModel,
    layout: &ProcDescLayout,
    table_address: u64,
    entries: &[RawProcDesc],
    out: &mut [u8],
) -> Result<()> {
    layout.validate(model)?;
    let mut w = ViewMut::new(*model, table_address, out);
    for (i, e) in entries.iter().enumerate() {
        let base = i as u64 * layout.size;
        let f = |f: FieldLayout| FieldLayout::new(base + f.offset, f.size);
        w.put_field_uint(f(layout.host_name), e.host_name, "host_name")?;
        w.put_field_uint(
            f(layout.executable_name),
            e.executable_name,
            "executable_name",
        )?;
        w.put_field_int(f(layout.pid), e.pid, "pid")?;
    }
    Ok(())
}

/// The distinct, non-NULL string addresses of a table, sorted: what a reader must fetch.
/// Starters that share strings (as the spec asks) yield two addresses for the whole table.
pub fn string_addresses(entries: &[RawProcDesc]) -> Vec<u64> {
    // A small direct-mapped filter drops repeats before the sort: a table whose entries share
    // a few strings (the common case) sorts a handful of addresses instead of two per entry.
    let mut seen = [0u64; 64];
    let mut v: Vec<u64> = Vec::new();
    for a in entries
        .iter()
        .flat_map(|e| [e.host_name, e.executable_name])
    {
        let slot = (a.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize;
        match seen.get_mut(slot) {
            Some(s) if *s == a => continue,
            Some(s) => *s = a,
            None => {}
        }
        if a != 0 {
            v.push(a);
        }
    }
    v.sort_unstable();
    v.dedup();
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_reports_the_first_missing_entry() {
        let m = DataModel::LP64;
        let l = ProcDescLayout::abi(&m);
        let e = decode_proctable(&m, &l, 0x1000, &[0u8; 50], 3).unwrap_err();
        assert_eq!(
            e,
            DecodeError::Truncated {
                what: "MPIR_proctable[2] of 3".into(),
                address: 0x1000 + 48,
                needed: 24,
                available: 2
            }
        );
        assert!(decode_proctable(&m, &l, u64::MAX - 8, &[], 1).is_err());
        assert!(decode_proctable(&m, &l, 0, &[], u64::MAX).is_err());
    }

    #[test]
    fn proctable_len_bounds() {
        assert_eq!(proctable_len(4, 10), Ok(4));
        assert!(matches!(
            proctable_len(-1, 10),
            Err(DecodeError::Negative { value: -1, .. })
        ));
        assert!(matches!(
            proctable_len(11, 10),
            Err(DecodeError::TooLarge { value: 11, .. })
        ));
    }
}
