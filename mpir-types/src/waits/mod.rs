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

mod analysis;
mod calls;
mod entries;

pub use analysis::{SELF, WORLD};
pub use calls::{Arg, Call, CallKind};
pub use entries::{CommEntry, RequestEntry, Slot, Table, Torn, WaitStates, decode_tables};

use crate::error::{DecodeError, Result};
use crate::model::DataModel;
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
