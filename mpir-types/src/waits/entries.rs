//! The export's tables: per-thread slots, communicators, requests; decoded entry by entry,
//! torn entries told apart by their generation.

use super::{Arg, Call, Header, WAIT_REQS, WaitsError, i32_at, u32_at};
use crate::model::DataModel;
use crate::view::View;

/// An entry caught while its writer changed it (odd generation, or changed while copied).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Torn {
    /// Which table.
    pub table: Table,
    /// The entry's index.
    pub index: u32,
}

/// A table of the export.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(clippy::exhaustive_enums, reason = "the export's three tables")]
pub enum Table {
    /// The per-thread slots.
    Slot,
    /// The communicators.
    Comm,
    /// The requests.
    Request,
}

/// One thread's call in progress.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Slot {
    /// The slot's index.
    pub index: u32,
    /// The thread's kernel tid.
    pub tid: u32,
    /// Recorded calls the thread has entered (moves while it runs).
    pub calls: u64,
    /// The call it is in ([`Call::NONE`]: none recorded).
    pub call: Call,
    /// The call's communicator id (0: none).
    pub comm: u64,
    /// Source of a receive or probe, destination of a send.
    pub peer: Arg,
    /// Its tag.
    pub tag: Arg,
    /// `MPI_Sendrecv`'s destination.
    pub send_peer: Arg,
    /// `MPI_Sendrecv`'s send tag.
    pub send_tag: Arg,
    /// The root of a rooted collective.
    pub root: Arg,
    /// Collectives: this call's number on its communicator.
    pub coll_seq: u32,
    /// Completion calls: requests given.
    pub nreqs: u32,
    /// Waitany/Waitsome: one request completing ends the wait.
    pub any: bool,
    /// The requests listed (request-table indexes; `None`: a null or unrecorded request), at
    /// most [`WAIT_REQS`].
    pub requests: Vec<Option<u32>>,
    /// Elements of the buffer (point-to-point).
    pub count: u64,
}

impl Slot {
    /// Decodes slot `index` from `bytes` (its [`SLOT_SIZE`](super::SLOT_SIZE) bytes at `address`); `Ok(None)` for
    /// a free slot (tid 0).
    ///
    /// # Errors
    /// [`Torn`] when the generation is odd; too few bytes.
    pub fn decode(
        model: DataModel,
        address: u64,
        index: u32,
        bytes: &[u8],
    ) -> Result<std::result::Result<Option<Slot>, Torn>, WaitsError> {
        let v = View::new(model, address, bytes);
        let generation = v.uint(0, 8, "slot.generation")?;
        if generation % 2 == 1 {
            return Ok(Err(Torn {
                table: Table::Slot,
                index,
            }));
        }
        let tid = u32_at(&v, 24, "slot.tid")?;
        if tid == 0 {
            return Ok(Ok(None));
        }
        let nreqs = u32_at(&v, 56, "slot.nreqs")?;
        let listed = usize::try_from(nreqs).unwrap_or(usize::MAX).min(WAIT_REQS);
        let mut requests = Vec::with_capacity(listed);
        for i in 0..listed as u64 {
            let r = u32_at(&v, 64 + 4 * i, "slot.reqs")?;
            requests.push(r.checked_sub(1));
        }
        Ok(Ok(Some(Slot {
            index,
            tid,
            calls: v.uint(8, 8, "slot.calls")?,
            call: Call(u32_at(&v, 28, "slot.call")?),
            comm: v.uint(16, 8, "slot.comm")?,
            peer: Arg::of(i32_at(&v, 32, "slot.peer")?),
            tag: Arg::tag(i32_at(&v, 36, "slot.tag")?),
            send_peer: Arg::of(i32_at(&v, 40, "slot.send_peer")?),
            send_tag: Arg::tag(i32_at(&v, 44, "slot.send_tag")?),
            root: Arg::of(i32_at(&v, 48, "slot.root")?),
            coll_seq: u32_at(&v, 52, "slot.coll_seq")?,
            nreqs,
            any: u32_at(&v, 60, "slot.flags")? & 1 == 1,
            requests,
            count: v.uint(128, 8, "slot.count")?,
        })))
    }
}

/// A communicator the process belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct CommEntry {
    /// Its id: the same on every member (1: `MPI_COMM_WORLD`, 2: `MPI_COMM_SELF`).
    pub id: u64,
    /// The parent's id (0 for the predefined ones).
    pub parent: u64,
    /// The MPI handle in this process.
    pub handle: u64,
    /// Members.
    pub size: u64,
    /// This process's rank in it.
    pub rank: u64,
    /// Collectives entered on it.
    pub coll_seq: u32,
    /// The call that made it ([`Call::NONE`] for the predefined ones).
    pub kind: Call,
}

impl CommEntry {
    /// Decodes a communicator entry; `Ok(None)` for a free one (id 0) or one whose size or
    /// rank is out of range (counted by the caller as unusable).
    ///
    /// # Errors
    /// [`Torn`] when the generation is odd; too few bytes.
    pub fn decode(
        model: DataModel,
        address: u64,
        index: u32,
        bytes: &[u8],
    ) -> Result<std::result::Result<Option<CommEntry>, Torn>, WaitsError> {
        let v = View::new(model, address, bytes);
        if v.uint(0, 8, "comm.generation")? % 2 == 1 {
            return Ok(Err(Torn {
                table: Table::Comm,
                index,
            }));
        }
        let id = v.uint(8, 8, "comm.id")?;
        let size = i32_at(&v, 32, "comm.size")?;
        let rank = i32_at(&v, 36, "comm.rank")?;
        let (Ok(size), Ok(rank)) = (u64::try_from(size), u64::try_from(rank)) else {
            return Ok(Ok(None));
        };
        if id == 0 || size == 0 || rank >= size {
            return Ok(Ok(None));
        }
        Ok(Ok(Some(CommEntry {
            id,
            parent: v.uint(16, 8, "comm.parent")?,
            handle: v.uint(24, 8, "comm.handle")?,
            size,
            rank,
            coll_seq: u32_at(&v, 40, "comm.coll_seq")?,
            kind: Call(u32_at(&v, 44, "comm.kind")?),
        })))
    }
}

/// A nonblocking or persistent request.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct RequestEntry {
    /// Its index in the request table.
    pub index: u32,
    /// The MPI request handle.
    pub handle: u64,
    /// Its communicator id.
    pub comm: u64,
    /// The call that made it.
    pub kind: Call,
    /// Started and not completed (a persistent request between `MPI_Start` and its
    /// completion, or any nonblocking one).
    pub active: bool,
    /// Its peer.
    pub peer: Arg,
    /// Its tag.
    pub tag: Arg,
    /// Nonblocking collectives: its number on the communicator.
    pub coll_seq: u32,
    /// Elements of the buffer.
    pub count: u64,
}

/// The handle value the library writes for a deleted request entry.
const TOMBSTONE: u64 = u64::MAX;

impl RequestEntry {
    /// Decodes request entry `index`; `Ok(None)` for a free or deleted one.
    ///
    /// # Errors
    /// [`Torn`] when the generation is odd; too few bytes.
    pub fn decode(
        model: DataModel,
        address: u64,
        index: u32,
        bytes: &[u8],
    ) -> Result<std::result::Result<Option<RequestEntry>, Torn>, WaitsError> {
        let v = View::new(model, address, bytes);
        if v.uint(0, 8, "request.generation")? % 2 == 1 {
            return Ok(Err(Torn {
                table: Table::Request,
                index,
            }));
        }
        let handle = v.uint(8, 8, "request.handle")?;
        if handle == 0 || handle == TOMBSTONE {
            return Ok(Ok(None));
        }
        Ok(Ok(Some(RequestEntry {
            index,
            handle,
            comm: v.uint(16, 8, "request.comm")?,
            kind: Call(u32_at(&v, 24, "request.kind")?),
            active: u32_at(&v, 28, "request.active")? != 0,
            peer: Arg::of(i32_at(&v, 32, "request.peer")?),
            tag: Arg::tag(i32_at(&v, 36, "request.tag")?),
            coll_seq: u32_at(&v, 40, "request.coll_seq")?,
            count: v.uint(48, 8, "request.count")?,
        })))
    }
}

/// A whole export, decoded: what [`decode_tables`] makes of the header and its tables.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct WaitStates {
    /// The header.
    pub header: Header,
    /// Threads with a slot.
    pub threads: Vec<Slot>,
    /// Communicators.
    pub comms: Vec<CommEntry>,
    /// Requests (free and deleted entries left out).
    pub requests: Vec<RequestEntry>,
    /// Entries caught mid-write.
    pub torn: Vec<Torn>,
}

/// The entries of one table: `(index, address, bytes)` of each of the first `n`.
fn entries<'a>(
    model: DataModel,
    bytes: &'a [u8],
    base: u64,
    size: u32,
    n: u32,
    what: &'static str,
) -> impl Iterator<Item = Result<(u32, u64, &'a [u8]), WaitsError>> + 'a {
    let v = View::new(model, base, bytes);
    (0..n).map(move |i| {
        let off = u64::from(i) * u64::from(size);
        let entry = v.slice(off, u64::from(size), what)?;
        Ok((i, base.wrapping_add(off), entry))
    })
}

/// Decodes the tables of `header` from the bytes read at their addresses: `slots` holds
/// `slots_used` slots (at `header.slot_size` each), `comms` and `requests` their whole
/// capacities. Fewer bytes than that is an error.
///
/// # Errors
/// [`WaitsError::Decode`] when a table's bytes are short.
pub fn decode_tables(
    model: DataModel,
    header: Header,
    slots: &[u8],
    comms: &[u8],
    requests: &[u8],
) -> Result<WaitStates, WaitsError> {
    let mut torn = Vec::new();
    let mut threads = Vec::new();
    let (slot_size, used) = (header.slot_size, header.slots_used);
    for e in entries(
        model,
        slots,
        header.slots,
        slot_size,
        used,
        "mpir_waits slots",
    ) {
        let (i, at, b) = e?;
        match Slot::decode(model, at, i, b)? {
            Ok(Some(s)) => threads.push(s),
            Ok(None) => {}
            Err(t) => torn.push(t),
        }
    }
    let mut out_comms = Vec::new();
    let (comm_size, n) = (header.comm_size, header.comm_capacity);
    for e in entries(model, comms, header.comms, comm_size, n, "mpir_waits comms") {
        let (i, at, b) = e?;
        match CommEntry::decode(model, at, i, b)? {
            Ok(Some(c)) => out_comms.push(c),
            Ok(None) => {}
            Err(t) => torn.push(t),
        }
    }
    let mut out_requests = Vec::new();
    let (request_size, n) = (header.request_size, header.request_capacity);
    for e in entries(
        model,
        requests,
        header.requests,
        request_size,
        n,
        "mpir_waits requests",
    ) {
        let (i, at, b) = e?;
        match RequestEntry::decode(model, at, i, b)? {
            Ok(Some(r)) => out_requests.push(r),
            Ok(None) => {}
            Err(t) => torn.push(t),
        }
    }
    Ok(WaitStates {
        header,
        threads,
        comms: out_comms,
        requests: out_requests,
        torn,
    })
}
