//! `mqs_communicator` and `mqs_pending_operation` as C structs, in any data model.
//!
//! The one definition of their layout: mpir-mqd's hosts (in process, and the helper process of
//! the out-of-process host) hand the DLL a buffer of [`CommunicatorLayout::abi`] /
//! [`PendingOperationLayout::abi`] size for the host's data model and decode what it wrote with
//! [`decode_communicator`] / [`decode_pending_operation`]; a cross-architecture host would do
//! the same with the DLL's data model. `mqs_taddr_t` is C `unsigned long` and `mqs_tword_t` is C `long`, so the ABI
//! layouts follow the model's `long`.

use crate::error::Result;
use crate::layout::{CStructBuilder, FieldLayout, LayoutSource, TypeLayout};
use crate::model::DataModel;
use crate::mqd::codes::{COMM_NAME_LEN, EXTRA_TEXT_LEN, EXTRA_TEXT_LINES, OpStatus};
use crate::view::{View, ViewMut};

/// A communicator as a DLL reports it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "MQD's mqs_communicator, member for member"
)]
pub struct Communicator {
    /// `unique_id`: an address-sized tag unique per communicator.
    pub unique_id: u64,
    /// `local_rank`: this process's rank in it.
    pub local_rank: i64,
    /// `size`: `MPI_Comm_size`.
    pub size: i64,
    /// `name` (up to 63 bytes; decoded as UTF-8, invalid sequences replaced).
    pub name: String,
}

/// A pending operation as a DLL reports it, fields as in the header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "MQD's mqs_pending_operation, member for member"
)]
pub struct PendingOperation {
    /// `status`.
    pub status: OpStatus,
    /// `desired_local_rank`: -1 for any source.
    pub desired_local_rank: i64,
    /// `desired_global_rank`: -1 for any or unknown.
    pub desired_global_rank: i64,
    /// `tag_wild`: the receive accepts any tag.
    pub tag_wild: bool,
    /// `desired_tag` (meaningful when not `tag_wild`).
    pub desired_tag: i64,
    /// `desired_length`: bytes or elements, depending on the DLL.
    pub desired_length: i64,
    /// `system_buffer`: the data is in a system buffer rather than the user's.
    pub system_buffer: bool,
    /// `buffer`: where the data is.
    pub buffer: u64,
    /// `actual_local_rank` (valid when matched, or for sends).
    pub actual_local_rank: i64,
    /// `actual_global_rank`.
    pub actual_global_rank: i64,
    /// `actual_tag`.
    pub actual_tag: i64,
    /// `actual_length`.
    pub actual_length: i64,
    /// `extra_text` lines up to the first empty one (at most 5).
    pub extra_text: Vec<String>,
}

/// Layout of `mqs_communicator`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "the size of MQD's mqs_communicator and the offset of each member"
)]
pub struct CommunicatorLayout {
    /// `sizeof(mqs_communicator)`.
    pub size: u64,
    /// `unique_id`.
    pub unique_id: FieldLayout,
    /// `local_rank`.
    pub local_rank: FieldLayout,
    /// `size` (the member).
    pub comm_size: FieldLayout,
    /// `name`.
    pub name: FieldLayout,
    /// Where this layout came from.
    pub source: LayoutSource,
}

/// Layout of `mqs_pending_operation`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "the size of MQD's mqs_pending_operation and the offset of each member"
)]
pub struct PendingOperationLayout {
    /// `sizeof(mqs_pending_operation)`.
    pub size: u64,
    /// `status`.
    pub status: FieldLayout,
    /// `desired_local_rank`.
    pub desired_local_rank: FieldLayout,
    /// `desired_global_rank`.
    pub desired_global_rank: FieldLayout,
    /// `tag_wild`.
    pub tag_wild: FieldLayout,
    /// `desired_tag`.
    pub desired_tag: FieldLayout,
    /// `desired_length`.
    pub desired_length: FieldLayout,
    /// `system_buffer`.
    pub system_buffer: FieldLayout,
    /// `buffer`.
    pub buffer: FieldLayout,
    /// `actual_local_rank`.
    pub actual_local_rank: FieldLayout,
    /// `actual_global_rank`.
    pub actual_global_rank: FieldLayout,
    /// `actual_tag`.
    pub actual_tag: FieldLayout,
    /// `actual_length`.
    pub actual_length: FieldLayout,
    /// `extra_text` (the whole `char[5][64]`).
    pub extra_text: FieldLayout,
    /// Where this layout came from.
    pub source: LayoutSource,
}

const INT_SIZES: &[u64] = &[1, 2, 4, 8];

impl CommunicatorLayout {
    /// The header's declaration laid out by the C ABI of `model`.
    pub fn abi(model: &DataModel) -> Self {
        let mut s = CStructBuilder::new();
        let unique_id = s.scalar(model.long_size());
        let local_rank = s.scalar(model.long_size());
        let comm_size = s.scalar(model.long_size());
        let name = s.array(1, COMM_NAME_LEN);
        CommunicatorLayout {
            size: s.size(),
            unique_id,
            local_rank,
            comm_size,
            name,
            source: LayoutSource::Abi,
        }
    }

    /// The layout a type description gives; members must exist and lie inside the struct.
    pub fn from_type(ty: &TypeLayout, model: &DataModel) -> Result<Self> {
        let long = model.long_size();
        Ok(CommunicatorLayout {
            size: ty.byte_size,
            unique_id: ty.field("unique_id", long, INT_SIZES)?,
            local_rank: ty.field("local_rank", long, INT_SIZES)?,
            comm_size: ty.field("size", long, INT_SIZES)?,
            name: ty.field("name", COMM_NAME_LEN, &[])?,
            source: ty.source.clone(),
        })
    }
}

impl PendingOperationLayout {
    /// The header's declaration laid out by the C ABI of `model`.
    pub fn abi(model: &DataModel) -> Self {
        let (int, long) = (model.int_size(), model.long_size());
        let mut s = CStructBuilder::new();
        let status = s.scalar(int);
        let desired_local_rank = s.scalar(long);
        let desired_global_rank = s.scalar(long);
        let tag_wild = s.scalar(int);
        let desired_tag = s.scalar(long);
        let desired_length = s.scalar(long);
        let system_buffer = s.scalar(int);
        let buffer = s.scalar(long);
        let actual_local_rank = s.scalar(long);
        let actual_global_rank = s.scalar(long);
        let actual_tag = s.scalar(long);
        let actual_length = s.scalar(long);
        let extra_text = s.array(1, EXTRA_TEXT_LINES * EXTRA_TEXT_LEN);
        PendingOperationLayout {
            size: s.size(),
            status,
            desired_local_rank,
            desired_global_rank,
            tag_wild,
            desired_tag,
            desired_length,
            system_buffer,
            buffer,
            actual_local_rank,
            actual_global_rank,
            actual_tag,
            actual_length,
            extra_text,
            source: LayoutSource::Abi,
        }
    }

    /// The layout a type description gives; members must exist and lie inside the struct, and
    /// `extra_text` must hold the 5 lines of 64 bytes.
    pub fn from_type(ty: &TypeLayout, model: &DataModel) -> Result<Self> {
        let (int, long) = (model.int_size(), model.long_size());
        let f = |name: &str, default: u64| ty.field(name, default, INT_SIZES);
        Ok(PendingOperationLayout {
            size: ty.byte_size,
            status: f("status", int)?,
            desired_local_rank: f("desired_local_rank", long)?,
            desired_global_rank: f("desired_global_rank", long)?,
            tag_wild: f("tag_wild", int)?,
            desired_tag: f("desired_tag", long)?,
            desired_length: f("desired_length", long)?,
            system_buffer: f("system_buffer", int)?,
            buffer: f("buffer", long)?,
            actual_local_rank: f("actual_local_rank", long)?,
            actual_global_rank: f("actual_global_rank", long)?,
            actual_tag: f("actual_tag", long)?,
            actual_length: f("actual_length", long)?,
            extra_text: ty.field(
                "extra_text",
                EXTRA_TEXT_LINES * EXTRA_TEXT_LEN,
                &[EXTRA_TEXT_LINES * EXTRA_TEXT_LEN],
            )?,
            source: ty.source.clone(),
        })
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Decodes an `mqs_communicator` from `bytes` (read at `address`).
pub fn decode_communicator(
    model: &DataModel,
    layout: &CommunicatorLayout,
    address: u64,
    bytes: &[u8],
) -> Result<Communicator> {
    let v = View::new(*model, address, bytes).sub(0, layout.size, "mqs_communicator")?;
    Ok(Communicator {
        unique_id: v.field_uint(layout.unique_id, "mqs_communicator.unique_id")?,
        local_rank: v.field_int(layout.local_rank, "mqs_communicator.local_rank")?,
        size: v.field_int(layout.comm_size, "mqs_communicator.size")?,
        name: text(v.char_array(
            layout.name.offset,
            layout.name.size,
            "mqs_communicator.name",
        )?),
    })
}

/// Encodes `comm` into `out` (`layout.size` bytes at least). The name must leave room for its
/// NUL.
pub fn encode_communicator(
    model: &DataModel,
    layout: &CommunicatorLayout,
    comm: &Communicator,
    out: &mut [u8],
) -> Result<()> {
    let mut w = ViewMut::new(*model, 0, out);
    w.put_field_uint(layout.unique_id, comm.unique_id, "unique_id")?;
    w.put_field_int(layout.local_rank, comm.local_rank, "local_rank")?;
    w.put_field_int(layout.comm_size, comm.size, "size")?;
    w.put_char_array(
        layout.name.offset,
        layout.name.size,
        comm.name.as_bytes(),
        false,
        "mqs_communicator.name",
    )
}

/// Decodes an `mqs_pending_operation` from `bytes` (read at `address`).
pub fn decode_pending_operation(
    model: &DataModel,
    layout: &PendingOperationLayout,
    address: u64,
    bytes: &[u8],
) -> Result<PendingOperation> {
    let v = View::new(*model, address, bytes).sub(0, layout.size, "mqs_pending_operation")?;
    let int = |f: FieldLayout, what: &str| v.field_int(f, what);
    let mut extra_text = Vec::new();
    let lines = layout.extra_text.size / EXTRA_TEXT_LEN;
    for i in 0..lines.min(EXTRA_TEXT_LINES) {
        let line = v.char_array(
            layout.extra_text.offset + i * EXTRA_TEXT_LEN,
            EXTRA_TEXT_LEN,
            "mqs_pending_operation.extra_text",
        )?;
        if line.is_empty() {
            break;
        }
        extra_text.push(text(line));
    }
    Ok(PendingOperation {
        status: OpStatus::from_raw(int(layout.status, "status")?),
        desired_local_rank: int(layout.desired_local_rank, "desired_local_rank")?,
        desired_global_rank: int(layout.desired_global_rank, "desired_global_rank")?,
        tag_wild: int(layout.tag_wild, "tag_wild")? != 0,
        desired_tag: int(layout.desired_tag, "desired_tag")?,
        desired_length: int(layout.desired_length, "desired_length")?,
        system_buffer: int(layout.system_buffer, "system_buffer")? != 0,
        buffer: v.field_uint(layout.buffer, "buffer")?,
        actual_local_rank: int(layout.actual_local_rank, "actual_local_rank")?,
        actual_global_rank: int(layout.actual_global_rank, "actual_global_rank")?,
        actual_tag: int(layout.actual_tag, "actual_tag")?,
        actual_length: int(layout.actual_length, "actual_length")?,
        extra_text,
    })
}

/// Encodes `op` into `out` (`layout.size` bytes at least). At most 5 extra lines of up to 63
/// bytes each, none empty (an empty line would end the list).
pub fn encode_pending_operation(
    model: &DataModel,
    layout: &PendingOperationLayout,
    op: &PendingOperation,
    out: &mut [u8],
) -> Result<()> {
    let mut w = ViewMut::new(*model, 0, out);
    w.put_field_int(layout.status, op.status.to_raw(), "status")?;
    w.put_field_int(
        layout.desired_local_rank,
        op.desired_local_rank,
        "desired_local_rank",
    )?;
    w.put_field_int(
        layout.desired_global_rank,
        op.desired_global_rank,
        "desired_global_rank",
    )?;
    w.put_field_int(layout.tag_wild, op.tag_wild.into(), "tag_wild")?;
    w.put_field_int(layout.desired_tag, op.desired_tag, "desired_tag")?;
    w.put_field_int(layout.desired_length, op.desired_length, "desired_length")?;
    w.put_field_int(
        layout.system_buffer,
        op.system_buffer.into(),
        "system_buffer",
    )?;
    w.put_field_uint(layout.buffer, op.buffer, "buffer")?;
    w.put_field_int(
        layout.actual_local_rank,
        op.actual_local_rank,
        "actual_local_rank",
    )?;
    w.put_field_int(
        layout.actual_global_rank,
        op.actual_global_rank,
        "actual_global_rank",
    )?;
    w.put_field_int(layout.actual_tag, op.actual_tag, "actual_tag")?;
    w.put_field_int(layout.actual_length, op.actual_length, "actual_length")?;
    let lines = layout.extra_text.size / EXTRA_TEXT_LEN;
    if op.extra_text.len() as u64 > lines || op.extra_text.iter().any(|l| l.is_empty()) {
        return Err(crate::DecodeError::InvalidLayout {
            type_name: "mqs_pending_operation.extra_text".into(),
            reason: format!(
                "{} lines (max {lines}, none empty) cannot be encoded",
                op.extra_text.len()
            ),
        });
    }
    for i in 0..lines {
        let line = op
            .extra_text
            .get(i as usize)
            .map_or(&b""[..], |s| s.as_bytes());
        w.put_char_array(
            layout.extra_text.offset + i * EXTRA_TEXT_LEN,
            EXTRA_TEXT_LEN,
            line,
            false,
            "mqs_pending_operation.extra_text",
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_sizes_match_the_header_on_lp64_and_ilp32() {
        // LP64: 3 longs + char[64] = 88; ILP32: 3*4 + 64 = 76.
        assert_eq!(CommunicatorLayout::abi(&DataModel::LP64).size, 88);
        assert_eq!(CommunicatorLayout::abi(&DataModel::ILP32).size, 76);
        // LP64: int(0) long(8) long(16) int(24) long(32) long(40) int(48) long(56) 4 longs
        // (64..96) char[320] (96..416) = 416.
        let l = PendingOperationLayout::abi(&DataModel::LP64);
        assert_eq!(
            (l.buffer.offset, l.extra_text.offset, l.size),
            (56, 96, 416)
        );
        // ILP32: 12 four-byte members + 320 = 368.
        assert_eq!(PendingOperationLayout::abi(&DataModel::ILP32).size, 368);
    }
}
