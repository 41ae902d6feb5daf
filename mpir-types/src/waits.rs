//! The wait-state export of mpir-rs's preload library (`libmpir_waits.so`, the C layout in
//! `mpir-waits/lib/mpir_waits.h`, documented in `docs/wait-states.md`): what each thread of a
//! rank is blocked on, recorded through the MPI profiling interface, read from the rank's
//! memory like `MPIR_proctable`.
//!
//! Decoding is pure and bounded: [`Header::decode`] checks the magic, the version and the entry
//! sizes and bounds every capacity ([`MAX_SLOTS`], [`MAX_COMMS`], [`MAX_REQUESTS`]) before
//! anything is read from the addresses it names; [`Slot::decode`], [`CommEntry::decode`] and
//! [`RequestEntry::decode`] take one entry's bytes. An entry whose generation is odd was being
//! written when it was copied: it is [`Torn`], never used.

use crate::deadlock::{CollectiveAt, CommQueues, RankQueues, WaitSource};
use crate::error::{DecodeError, Result};
use crate::model::DataModel;
use crate::mqd::{OpClass, Operation, Peer};
use crate::view::View;

/// The exported symbol.
pub const SYMBOL: &str = "mpir_waits";
/// `header.magic`.
pub const MAGIC: &[u8; 8] = b"MPIRWAIT";
/// The version this decoder reads.
pub const VERSION: u32 = 1;
/// Bytes of the header this decoder reads (`sizeof(struct mpir_waits_header)`).
pub const HEADER_SIZE: u64 = 232;
/// Bytes of one slot this decoder reads.
pub const SLOT_SIZE: u64 = 136;
/// Bytes of one communicator entry this decoder reads.
pub const COMM_SIZE: u64 = 56;
/// Bytes of one request entry this decoder reads.
pub const REQUEST_SIZE: u64 = 56;
/// Requests a slot lists (`MPIR_WAITS_WAIT_REQS`).
pub const WAIT_REQS: usize = 16;
/// Most slots a header may announce (the library has 256; a larger number is refused).
pub const MAX_SLOTS: u32 = 4096;
/// Most communicator entries a header may announce.
pub const MAX_COMMS: u32 = 65_536;
/// Most request entries a header may announce.
pub const MAX_REQUESTS: u32 = 65_536;
/// Largest entry size accepted (a newer library may append fields; we read ours).
pub const MAX_ENTRY_SIZE: u32 = 4096;
/// Most bytes one table may span (capacity × entry size): what a reader allocates for it.
pub const MAX_TABLE_BYTES: u64 = 16 << 20;

/// Why an export cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WaitsError {
    /// The bytes are not an export: wrong magic.
    #[error("no wait-state export at {address:#x}: magic {found:02x?}, not \"MPIRWAIT\"")]
    Magic {
        /// Where the header was read.
        address: u64,
        /// The first bytes found.
        found: [u8; 8],
    },
    /// An export of a version this decoder does not read.
    #[error("wait-state export at {address:#x} is version {version}; this reader knows {VERSION}")]
    Version {
        /// Where the header was read.
        address: u64,
        /// Its version.
        version: u32,
    },
    /// A size or capacity out of bounds.
    #[error("wait-state export at {address:#x}: {what} is {value}, outside {min}..={max}")]
    Bound {
        /// Where the header was read.
        address: u64,
        /// Which field.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The smallest accepted.
        min: u64,
        /// The largest accepted.
        max: u64,
    },
    /// The bytes ran out or an address overflowed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// How the MPI library passes handles (`header.abi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Abi {
    /// Not known yet: nothing is recorded.
    None,
    /// `int` handles: MPICH, Intel MPI, MVAPICH, Cray MPICH.
    Mpich,
    /// Pointer handles: Open MPI.
    OpenMpi,
    /// A value this decoder does not know.
    Other(u32),
}

/// What the library is doing (`header.state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum State {
    /// Preloaded, MPI not initialized through it.
    Loaded,
    /// MPI initialized: calls are recorded.
    Recording,
    /// `MPI_Finalize` returned.
    Finalized,
    /// Nothing is recorded ([`Header::disabled`] says why).
    Disabled,
    /// A value this decoder does not know.
    Other(u32),
}

/// Why the library records nothing (`header.disabled`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Disabled {
    /// No `PMPI_*` function was found.
    NoMpi,
    /// An MPI whose handle ABI the library does not know ([`Header::library`] names it).
    UnknownMpi,
    /// The MPI-5 standard ABI (`libmpi_abi`), not supported yet.
    StandardAbi,
    /// A `PMPI_*` function a wrapper needs is missing.
    MissingPmpi,
    /// A value this decoder does not know.
    Other(u32),
}

impl std::fmt::Display for Disabled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Disabled::NoMpi => f.write_str("no MPI library (no PMPI_* function) was found"),
            Disabled::UnknownMpi => f.write_str("the MPI library's handle ABI is not one it knows"),
            Disabled::StandardAbi => f.write_str("the MPI-5 standard ABI is not supported yet"),
            Disabled::MissingPmpi => f.write_str("a PMPI_* function it wraps is missing"),
            Disabled::Other(v) => write!(f, "reason {v}"),
        }
    }
}

/// The export's header.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Header {
    /// Where it was read.
    pub address: u64,
    /// Entry sizes in the process (at least ours).
    pub slot_size: u32,
    /// See [`Header::slot_size`].
    pub comm_size: u32,
    /// See [`Header::slot_size`].
    pub request_size: u32,
    /// Entries of each table (bounded by [`MAX_SLOTS`] etc.).
    pub slot_capacity: u32,
    /// See [`Header::slot_capacity`].
    pub comm_capacity: u32,
    /// See [`Header::slot_capacity`].
    pub request_capacity: u32,
    /// The handle ABI.
    pub abi: Abi,
    /// The library's state.
    pub state: State,
    /// Why it records nothing (with [`State::Disabled`]).
    pub disabled: Option<Disabled>,
    /// This process's rank in `MPI_COMM_WORLD`, once `MPI_Init` returned.
    pub world_rank: Option<u64>,
    /// `MPI_COMM_WORLD`'s size, once known.
    pub world_size: Option<u64>,
    /// Slots handed out (≤ capacity).
    pub slots_used: u32,
    /// Threads, communicators and requests that found no free entry (not recorded).
    pub overflow: [u32; 3],
    /// Addresses of the slot, communicator and request tables.
    pub slots: u64,
    /// See [`Header::slots`].
    pub comms: u64,
    /// See [`Header::slots`].
    pub requests: u64,
    /// `MPI_Get_library_version`, as far as kept (lossy UTF-8, cut at the first NUL).
    pub library: String,
}

fn u32_at(v: &View<'_>, off: u64, what: &str) -> Result<u32> {
    // A 4-byte read always fits in u32.
    Ok(u32::try_from(v.uint(off, 4, what)?).unwrap_or(u32::MAX))
}

fn i32_at(v: &View<'_>, off: u64, what: &str) -> Result<i32> {
    Ok(i32::try_from(v.int(off, 4, what)?).unwrap_or(i32::MIN))
}

impl Header {
    /// Decodes the header from `bytes` (at least [`HEADER_SIZE`] of them), read at `address`
    /// in a process of data model `model`.
    ///
    /// # Errors
    /// [`WaitsError`]: wrong magic or version, an entry size below ours or above
    /// [`MAX_ENTRY_SIZE`], a capacity above its bound, slots used above capacity, too few
    /// bytes.
    pub fn decode(model: DataModel, address: u64, bytes: &[u8]) -> Result<Header, WaitsError> {
        let v = View::new(model, address, bytes);
        let magic = v.slice(0, 8, "mpir_waits.magic")?;
        if magic != MAGIC {
            let mut found = [0u8; 8];
            found.copy_from_slice(magic);
            return Err(WaitsError::Magic { address, found });
        }
        let version = u32_at(&v, 8, "mpir_waits.version")?;
        if version != VERSION {
            return Err(WaitsError::Version { address, version });
        }
        let bound = |what: &'static str, value: u64, min: u64, max: u64| {
            if (min..=max).contains(&value) {
                Ok(())
            } else {
                Err(WaitsError::Bound {
                    address,
                    what,
                    value,
                    min,
                    max,
                })
            }
        };
        let header_size = u32_at(&v, 12, "mpir_waits.header_size")?;
        bound(
            "header_size",
            header_size.into(),
            HEADER_SIZE,
            MAX_ENTRY_SIZE.into(),
        )?;
        let slot_size = u32_at(&v, 16, "mpir_waits.slot_size")?;
        bound(
            "slot_size",
            slot_size.into(),
            SLOT_SIZE,
            MAX_ENTRY_SIZE.into(),
        )?;
        let comm_size = u32_at(&v, 20, "mpir_waits.comm_size")?;
        bound(
            "comm_size",
            comm_size.into(),
            COMM_SIZE,
            MAX_ENTRY_SIZE.into(),
        )?;
        let request_size = u32_at(&v, 24, "mpir_waits.request_size")?;
        bound(
            "request_size",
            request_size.into(),
            REQUEST_SIZE,
            MAX_ENTRY_SIZE.into(),
        )?;
        let slot_capacity = u32_at(&v, 28, "mpir_waits.slot_capacity")?;
        bound("slot_capacity", slot_capacity.into(), 0, MAX_SLOTS.into())?;
        let comm_capacity = u32_at(&v, 32, "mpir_waits.comm_capacity")?;
        bound("comm_capacity", comm_capacity.into(), 0, MAX_COMMS.into())?;
        let request_capacity = u32_at(&v, 36, "mpir_waits.request_capacity")?;
        bound(
            "request_capacity",
            request_capacity.into(),
            0,
            MAX_REQUESTS.into(),
        )?;
        let abi = match u32_at(&v, 40, "mpir_waits.abi")? {
            0 => Abi::None,
            1 => Abi::Mpich,
            2 => Abi::OpenMpi,
            x => Abi::Other(x),
        };
        let state = match u32_at(&v, 44, "mpir_waits.state")? {
            0 => State::Loaded,
            1 => State::Recording,
            2 => State::Finalized,
            3 => State::Disabled,
            x => State::Other(x),
        };
        let disabled = match u32_at(&v, 48, "mpir_waits.disabled")? {
            0 => None,
            1 => Some(Disabled::NoMpi),
            2 => Some(Disabled::UnknownMpi),
            3 => Some(Disabled::StandardAbi),
            4 => Some(Disabled::MissingPmpi),
            x => Some(Disabled::Other(x)),
        };
        let nonneg = |x: i32| u64::try_from(x).ok();
        let world_rank = nonneg(i32_at(&v, 52, "mpir_waits.world_rank")?);
        let world_size = nonneg(i32_at(&v, 56, "mpir_waits.world_size")?).filter(|&s| s > 0);
        for (what, size, n) in [
            ("slot table bytes", slot_size, slot_capacity),
            ("communicator table bytes", comm_size, comm_capacity),
            ("request table bytes", request_size, request_capacity),
        ] {
            bound(what, u64::from(size) * u64::from(n), 0, MAX_TABLE_BYTES)?;
        }
        let slots_used = u32_at(&v, 60, "mpir_waits.slots_used")?;
        bound("slots_used", slots_used.into(), 0, slot_capacity.into())?;
        let overflow = [
            u32_at(&v, 64, "mpir_waits.slots_overflow")?,
            u32_at(&v, 68, "mpir_waits.comms_overflow")?,
            u32_at(&v, 72, "mpir_waits.requests_overflow")?,
        ];
        let lib = v.slice(104, 128, "mpir_waits.library")?;
        let end = lib.iter().position(|&b| b == 0).unwrap_or(lib.len());
        let library = String::from_utf8_lossy(lib.get(..end).unwrap_or_default()).into_owned();
        Ok(Header {
            address,
            slot_size,
            comm_size,
            request_size,
            slot_capacity,
            comm_capacity,
            request_capacity,
            abi,
            state,
            disabled,
            world_rank,
            world_size,
            slots_used,
            overflow,
            slots: v.uint(80, 8, "mpir_waits.slots")?,
            comms: v.uint(88, 8, "mpir_waits.comms")?,
            requests: v.uint(96, 8, "mpir_waits.requests")?,
            library,
        })
    }

    /// The byte span of the first `n` entries of a table at `base` with entries of `size`
    /// bytes: `(address, length)`, checked for overflow.
    pub fn span(base: u64, size: u32, n: u32) -> Result<(u64, u64), WaitsError> {
        let len = u64::from(size) * u64::from(n);
        base.checked_add(len)
            .ok_or(WaitsError::Decode(DecodeError::AddressOverflow {
                what: "a wait-state table".to_string(),
                base,
                offset: len,
            }))?;
        Ok((base, len))
    }
}

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

/// A peer or tag argument as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Arg {
    /// A rank in the communicator, or a tag.
    Value(u32),
    /// `MPI_ANY_SOURCE` / `MPI_ANY_TAG`.
    Any,
    /// `MPI_PROC_NULL`.
    ProcNull,
    /// `MPI_ROOT` (intercommunicators).
    Root,
    /// The call has no such argument.
    None,
    /// A value the format does not define.
    Invalid(i32),
}

impl Arg {
    fn of(x: i32) -> Arg {
        match x {
            -1 => Arg::Any,
            -2 => Arg::None,
            -3 => Arg::ProcNull,
            -4 => Arg::Root,
            x => u32::try_from(x).map_or(Arg::Invalid(x), Arg::Value),
        }
    }

    fn tag(x: i32) -> Arg {
        match x {
            -1 => Arg::Any,
            -2 => Arg::None,
            x => u32::try_from(x).map_or(Arg::Invalid(x), Arg::Value),
        }
    }
}

/// What kind of call a [`Call`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum CallKind {
    /// A blocking send (`MPI_Send`, `MPI_Ssend`, …).
    Send,
    /// A blocking receive or probe.
    Receive,
    /// `MPI_Sendrecv` (a send and a receive).
    SendRecv,
    /// Starts a nonblocking or persistent operation (a request kind).
    Start,
    /// Waits for requests (`MPI_Wait*`).
    Wait,
    /// Tests requests (`MPI_Test*`): progress, not a wait.
    Test,
    /// A blocking collective (communicator calls included).
    Collective,
    /// A nonblocking collective start (a request kind).
    NonblockingCollective,
    /// `MPI_Init`.
    Init,
    /// `MPI_Finalize`.
    Finalize,
    /// A code this decoder does not know.
    Unknown,
}

/// A recorded MPI call, by its code in the export (`enum mpir_waits_call`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "the export's call code: any u32 is a value of the format"
)]
pub struct Call(pub u32);

impl Call {
    /// Not inside a recorded call.
    pub const NONE: Call = Call(0);

    /// Its C name (`MPI_Recv`), or `None` for an unknown code.
    pub fn name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => return None,
            1 => "MPI_Send",
            2 => "MPI_Ssend",
            3 => "MPI_Bsend",
            4 => "MPI_Rsend",
            5 => "MPI_Recv",
            6 => "MPI_Sendrecv",
            7 => "MPI_Probe",
            8 => "MPI_Mprobe",
            9 => "MPI_Sendrecv_replace",
            20 => "MPI_Isend",
            21 => "MPI_Issend",
            22 => "MPI_Ibsend",
            23 => "MPI_Irsend",
            24 => "MPI_Irecv",
            25 => "MPI_Send_init",
            26 => "MPI_Ssend_init",
            27 => "MPI_Bsend_init",
            28 => "MPI_Rsend_init",
            29 => "MPI_Recv_init",
            30 => "MPI_Iprobe",
            31 => "MPI_Improbe",
            32 => "MPI_Mrecv",
            33 => "MPI_Imrecv",
            34 => "a nonblocking collective",
            40 => "MPI_Wait",
            41 => "MPI_Waitall",
            42 => "MPI_Waitany",
            43 => "MPI_Waitsome",
            44 => "MPI_Test",
            45 => "MPI_Testall",
            46 => "MPI_Testany",
            47 => "MPI_Testsome",
            48 => "MPI_Start",
            49 => "MPI_Startall",
            60 => "MPI_Barrier",
            61 => "MPI_Bcast",
            62 => "MPI_Reduce",
            63 => "MPI_Allreduce",
            64 => "MPI_Gather",
            65 => "MPI_Gatherv",
            66 => "MPI_Scatter",
            67 => "MPI_Scatterv",
            68 => "MPI_Allgather",
            69 => "MPI_Allgatherv",
            70 => "MPI_Alltoall",
            71 => "MPI_Alltoallv",
            72 => "MPI_Alltoallw",
            73 => "MPI_Reduce_scatter",
            74 => "MPI_Reduce_scatter_block",
            75 => "MPI_Scan",
            76 => "MPI_Exscan",
            80 => "MPI_Ibarrier",
            81 => "MPI_Ibcast",
            82 => "MPI_Ireduce",
            83 => "MPI_Iallreduce",
            84 => "MPI_Igather",
            86 => "MPI_Iscatter",
            88 => "MPI_Iallgather",
            90 => "MPI_Ialltoall",
            100 => "MPI_Comm_dup",
            101 => "MPI_Comm_split",
            102 => "MPI_Comm_create",
            103 => "MPI_Comm_free",
            104 => "MPI_Comm_split_type",
            105 => "MPI_Comm_create_group",
            110 => "MPI_Init",
            111 => "MPI_Finalize",
            _ => return None,
        })
    }

    /// What kind of call it is.
    pub fn kind(self) -> CallKind {
        match self.0 {
            1..=4 => CallKind::Send,
            5 | 7 | 8 => CallKind::Receive,
            6 | 9 => CallKind::SendRecv,
            20..=33 | 48 | 49 => CallKind::Start,
            34 | 80..=90 => CallKind::NonblockingCollective,
            40..=43 => CallKind::Wait,
            44..=47 => CallKind::Test,
            60..=76 | 100..=105 => CallKind::Collective,
            110 => CallKind::Init,
            111 => CallKind::Finalize,
            _ => CallKind::Unknown,
        }
    }

    /// Whether a request of this kind is a receive (`MPI_Irecv`, `MPI_Recv_init`,
    /// `MPI_Imrecv`).
    pub fn is_receive_request(self) -> bool {
        matches!(self.0, 24 | 29 | 33)
    }

    /// Whether a request of this kind is a send that can wait for its receiver (every send
    /// but the buffered ones, which complete locally).
    pub fn is_blocking_send_request(self) -> bool {
        matches!(self.0, 20 | 21 | 23 | 25 | 26 | 28)
    }
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
    /// Decodes slot `index` from `bytes` (its [`SLOT_SIZE`] bytes at `address`); `Ok(None)` for
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

/// `MPI_COMM_WORLD`'s id in the export.
pub const WORLD: u64 = 1;
/// `MPI_COMM_SELF`'s id in the export (the same on every process, and a different
/// communicator on each).
pub const SELF: u64 = 2;

impl WaitStates {
    /// This rank as the wait-for analysis takes it ([`WaitSource::WaitStates`]): every
    /// communicator of the export (the id as context id, which every member shares); on it, a
    /// pending receive or send for each thread's blocking point-to-point call, and one for
    /// every active request (what a rank waits on must be completed, as for queues). The
    /// identity the analysis compares across samples (`buffer`) is the thread's count of
    /// entered calls for a thread's call, and the handle with the count of the thread waiting
    /// on it for a request: a thread that returned and called again is a new operation. What
    /// cannot be placed (a communicator the export does not list) is said in `notes`.
    ///
    /// [`WaitSource::WaitStates`]: crate::deadlock::WaitSource::WaitStates
    pub fn rank_queues(&self, rank: u64, pid: Option<i64>) -> (RankQueues, Vec<String>) {
        let mut notes = Vec::new();
        let mut comms: Vec<CommQueues> = self
            .comms
            .iter()
            .map(|c| {
                let name = match c.id {
                    WORLD => "MPI_COMM_WORLD",
                    SELF => "MPI_COMM_SELF",
                    _ => "",
                };
                let mut q = CommQueues::new(c.id, name, c.size, c.rank);
                // MPI_COMM_SELF is a different communicator in every process.
                q.context_id = Some(if c.id == SELF {
                    SELF | ((rank.wrapping_add(1)) << 32)
                } else {
                    c.id
                });
                q
            })
            .collect();
        let mut place = |comm: u64, mut op: Operation, notes: &mut Vec<String>| {
            // On MPI_COMM_WORLD a peer's rank is its job rank: said, so that a peer known by
            // its stacks alone (no communicators) is still the rank waited for.
            if comm == WORLD
                && let Peer::Rank(p) = op.peer_local
            {
                op.peer_global = Some(p);
            }
            match comms.iter_mut().find(|q| q.unique_id == comm) {
                Some(q) => q.operations.push(op),
                None => notes.push(format!(
                    "rank {rank}: a wait on communicator {comm:#x}, which its export does not list, was left out"
                )),
            }
        };
        let peer = |a: Arg| match a {
            Arg::Value(p) => Some(Peer::Rank(u64::from(p))),
            Arg::Any => Some(Peer::Any),
            _ => None,
        };
        let tag = |a: Arg| match a {
            Arg::Value(t) => Some(i64::from(t)),
            _ => None,
        };
        let op = |class: OpClass, p: Peer, t: Arg, identity: u64| {
            let mut o = Operation::new(class, p);
            o.tag = tag(t);
            o.buffer = identity;
            o
        };
        // The collective a thread is in (the first such thread's: MPI forbids two threads of
        // a process in collectives on one communicator at once).
        let mut collective: Option<CollectiveAt> = None;
        // Requests a thread waits on, with that thread's call count.
        let mut waited: std::collections::HashMap<u32, u64> = std::collections::HashMap::new();
        for t in &self.threads {
            match t.call.kind() {
                CallKind::Receive => {
                    if let Some(p) = peer(t.peer) {
                        place(t.comm, op(OpClass::Receive, p, t.tag, t.calls), &mut notes);
                    }
                }
                CallKind::Send => {
                    // A buffered send completes locally: it waits for nobody.
                    if t.call.0 != 3
                        && let Some(p) = peer(t.peer)
                    {
                        place(t.comm, op(OpClass::Send, p, t.tag, t.calls), &mut notes);
                    }
                }
                CallKind::SendRecv => {
                    if let Some(p) = peer(t.send_peer) {
                        place(
                            t.comm,
                            op(OpClass::Send, p, t.send_tag, t.calls),
                            &mut notes,
                        );
                    }
                    if let Some(p) = peer(t.peer) {
                        place(t.comm, op(OpClass::Receive, p, t.tag, t.calls), &mut notes);
                    }
                }
                CallKind::Wait => {
                    for r in t.requests.iter().flatten() {
                        waited.insert(*r, t.calls);
                    }
                }
                CallKind::Collective if collective.is_none() => {
                    if let Some(name) = t.call.name() {
                        let comm = if t.comm == SELF {
                            SELF | ((rank.wrapping_add(1)) << 32)
                        } else {
                            t.comm
                        };
                        let root = match t.root {
                            Arg::Value(r) => Some(u64::from(r)),
                            _ => None,
                        };
                        collective = Some(CollectiveAt::new(comm, t.coll_seq, name, root));
                    }
                }
                _ => {}
            }
        }
        for r in self.requests.iter().filter(|r| r.active) {
            let class = if r.kind.is_receive_request() {
                OpClass::Receive
            } else if r.kind.is_blocking_send_request() {
                OpClass::Send
            } else {
                continue;
            };
            let Some(p) = peer(r.peer) else { continue };
            let identity = r.handle ^ waited.get(&r.index).copied().unwrap_or(0).rotate_left(40);
            place(r.comm, op(class, p, r.tag, identity), &mut notes);
        }
        let mut q = RankQueues::new(rank, pid, comms);
        q.source = WaitSource::WaitStates;
        q.collective = collective;
        (q, notes)
    }
}
