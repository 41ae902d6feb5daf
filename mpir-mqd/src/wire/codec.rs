//! One definition per wire type: [`Codec`] gives each value its encoding and its decoding side
//! by side, for the primitives and composed for everything the messages carry, so that the
//! two directions cannot drift apart.

use mpir_types::mqd::{self, OpStatus};
use mpir_types::{ByteOrder, DataModel, LayoutSource, TypeLayout, TypeSizes};

use super::{Dec, DecResult, Enc, tag};
use crate::error::{CallbackReport, MqdError};
use crate::mpi2::ProcessLocation;
use crate::raw::{RawCommQueues, RawQueue};

/// A value's wire form: [`Codec::encode`] and [`Codec::decode`] are the one definition of it.
pub(crate) trait Codec: Sized {
    /// Fewest bytes an encoded value takes: a sequence's announced count is checked against
    /// the bytes left with it before anything is allocated.
    const MIN_SIZE: usize;
    /// Appends the value.
    fn encode(&self, e: &mut Enc);
    /// Reads a value; fails (never panics) on a short or malformed message.
    fn decode(d: &mut Dec<'_>) -> DecResult<Self>;
}

macro_rules! primitive {
    ($t:ty, $size:expr, $enc:ident, $dec:ident) => {
        impl Codec for $t {
            const MIN_SIZE: usize = $size;
            fn encode(&self, e: &mut Enc) {
                e.$enc(*self);
            }
            fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
                d.$dec()
            }
        }
    };
}

primitive!(u8, 1, u8, u8);
primitive!(u32, 4, u32, u32);
primitive!(u64, 8, u64, u64);
primitive!(i64, 8, i64, i64);
primitive!(bool, 1, bool, bool);

/// A C `int`: 8 bytes signed on the wire, range-checked when read.
impl Codec for i32 {
    const MIN_SIZE: usize = 8;
    fn encode(&self, e: &mut Enc) {
        e.i64(i64::from(*self));
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        d.i32()
    }
}

/// A count or handle: a `u64` on the wire, saturating where `usize` is narrower.
impl Codec for usize {
    const MIN_SIZE: usize = 8;
    fn encode(&self, e: &mut Enc) {
        e.u64(*self as u64);
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(usize::try_from(d.u64()?).unwrap_or(usize::MAX))
    }
}

impl Codec for String {
    const MIN_SIZE: usize = 4;
    fn encode(&self, e: &mut Enc) {
        e.str(self);
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        d.string()
    }
}

/// A `u32` count, then the items (the count checked against the bytes left).
impl<T: Codec> Codec for Vec<T> {
    const MIN_SIZE: usize = 4;
    fn encode(&self, e: &mut Enc) {
        // Every sequence we send is far below 4 G items (bounded by MAX_MESSAGE on receipt).
        e.u32(self.len() as u32);
        for v in self {
            v.encode(e);
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        let n = d.count(T::MIN_SIZE)?;
        (0..n).map(|_| T::decode(d)).collect()
    }
}

/// A 0/1 byte, then the value when 1.
impl<T: Codec> Codec for Option<T> {
    const MIN_SIZE: usize = 1;
    fn encode(&self, e: &mut Enc) {
        match self {
            None => {
                e.u8(0);
            }
            Some(v) => {
                e.u8(1);
                v.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(if d.bool()? { Some(T::decode(d)?) } else { None })
    }
}

impl<A: Codec, B: Codec> Codec for (A, B) {
    const MIN_SIZE: usize = A::MIN_SIZE + B::MIN_SIZE;
    fn encode(&self, e: &mut Enc) {
        self.0.encode(e);
        self.1.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok((A::decode(d)?, B::decode(d)?))
    }
}

/// An answer the parent could not give: 0 and the value, or 1 and why.
impl<T: Codec> Codec for Result<T, String> {
    const MIN_SIZE: usize = 1;
    fn encode(&self, e: &mut Enc) {
        match self {
            Ok(v) => {
                e.u8(0);
                v.encode(e);
            }
            Err(t) => {
                e.u8(1).str(t);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        match d.u8()? {
            0 => Ok(Ok(T::decode(d)?)),
            1 => Ok(Err(d.string()?)),
            b => Err(format!("bad result tag {b}")),
        }
    }
}

/// Bytes read from a target: a `u32` length and the bytes, taken as one slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Bytes(pub(crate) Vec<u8>);

impl Codec for Bytes {
    const MIN_SIZE: usize = 4;
    fn encode(&self, e: &mut Enc) {
        e.bytes(&self.0);
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(Bytes(d.bytes()?.to_vec()))
    }
}

/// A world rank as the DLL interface knows it: 8 bytes signed, -1 when unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rank(pub(crate) Option<u64>);

impl Codec for Rank {
    const MIN_SIZE: usize = 8;
    fn encode(&self, e: &mut Enc) {
        e.i64(self.0.and_then(|r| i64::try_from(r).ok()).unwrap_or(-1));
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(Rank(u64::try_from(d.i64()?).ok()))
    }
}

impl Codec for DataModel {
    const MIN_SIZE: usize = 6;
    fn encode(&self, e: &mut Enc) {
        let z = self.sizes();
        e.u8(match self.byte_order() {
            ByteOrder::Little => 0,
            ByteOrder::Big => 1,
        });
        for s in [z.short, z.int, z.long, z.long_long, z.pointer] {
            e.u8(s);
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        let order = match d.u8()? {
            0 => ByteOrder::Little,
            1 => ByteOrder::Big,
            b => return Err(format!("bad byte order {b}")),
        };
        let sizes = TypeSizes {
            short: d.u8()?,
            int: d.u8()?,
            long: d.u8()?,
            long_long: d.u8()?,
            pointer: d.u8()?,
        };
        DataModel::new(order, sizes).map_err(|e| format!("bad data model: {e}"))
    }
}

/// Name, size, then each member: name, offset, optional size.
impl Codec for TypeLayout {
    const MIN_SIZE: usize = 4 + 8 + 4;
    fn encode(&self, e: &mut Enc) {
        e.str(&self.name).u64(self.byte_size);
        e.u32(self.members.len() as u32);
        for m in &self.members {
            e.str(&m.name).u64(m.offset);
            m.byte_size.encode(e);
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        let mut t = TypeLayout::new(d.string()?, d.u64()?, LayoutSource::Given);
        // A member: a name (4 + bytes), an offset (8), an optional size (1 + 8).
        let n = d.count(4 + 8 + 1)?;
        for _ in 0..n {
            let name = d.string()?;
            let offset = d.u64()?;
            let size = Option::<u64>::decode(d)?;
            t = t.with_member(name, offset, size.unwrap_or(0));
            if size.is_none()
                && let Some(m) = t.members.last_mut()
            {
                m.byte_size = None;
            }
        }
        Ok(t)
    }
}

impl Codec for mqd::PendingOperation {
    const MIN_SIZE: usize = 10 * 8 + 2 + 4;
    fn encode(&self, e: &mut Enc) {
        e.i64(self.status.to_raw())
            .i64(self.desired_local_rank)
            .i64(self.desired_global_rank)
            .bool(self.tag_wild)
            .i64(self.desired_tag)
            .i64(self.desired_length)
            .bool(self.system_buffer)
            .u64(self.buffer)
            .i64(self.actual_local_rank)
            .i64(self.actual_global_rank)
            .i64(self.actual_tag)
            .i64(self.actual_length);
        self.extra_text.encode(e);
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(mqd::PendingOperation {
            status: OpStatus::from_raw(d.i64()?),
            desired_local_rank: d.i64()?,
            desired_global_rank: d.i64()?,
            tag_wild: d.bool()?,
            desired_tag: d.i64()?,
            desired_length: d.i64()?,
            system_buffer: d.bool()?,
            buffer: d.u64()?,
            actual_local_rank: d.i64()?,
            actual_global_rank: d.i64()?,
            actual_tag: d.i64()?,
            actual_length: d.i64()?,
            extra_text: Codec::decode(d)?,
        })
    }
}

impl Codec for mqd::Communicator {
    const MIN_SIZE: usize = 8 + 8 + 8 + 4;
    fn encode(&self, e: &mut Enc) {
        e.u64(self.unique_id)
            .i64(self.local_rank)
            .i64(self.size)
            .str(&self.name);
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(mqd::Communicator {
            unique_id: d.u64()?,
            local_rank: d.i64()?,
            size: d.i64()?,
            name: d.string()?,
        })
    }
}

/// 0: no information; 1: the operations, then the error that stopped them, if any.
impl Codec for RawQueue {
    const MIN_SIZE: usize = 1;
    fn encode(&self, e: &mut Enc) {
        match self {
            RawQueue::NoInformation => {
                e.u8(0);
            }
            RawQueue::Operations(ops, err) => {
                e.u8(1);
                ops.encode(e);
                err.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(match d.u8()? {
            0 => RawQueue::NoInformation,
            1 => RawQueue::Operations(Codec::decode(d)?, Codec::decode(d)?),
            t => return Err(format!("unknown queue tag {t}")),
        })
    }
}

impl Codec for RawCommQueues {
    const MIN_SIZE: usize = mqd::Communicator::MIN_SIZE + 1 + 3 * RawQueue::MIN_SIZE;
    fn encode(&self, e: &mut Enc) {
        self.communicator.encode(e);
        self.group.encode(e);
        for q in &self.queues {
            q.encode(e);
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(RawCommQueues {
            communicator: Codec::decode(d)?,
            group: Codec::decode(d)?,
            queues: [
                RawQueue::decode(d)?,
                RawQueue::decode(d)?,
                RawQueue::decode(d)?,
            ],
        })
    }
}

impl Codec for ProcessLocation {
    const MIN_SIZE: usize = 8 + 4 + 4;
    fn encode(&self, e: &mut Enc) {
        e.i64(self.pid).str(&self.image_name).str(&self.host_name);
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        Ok(ProcessLocation::new(d.i64()?, d.string()?, d.string()?))
    }
}

/// A tag from [`tag::error`], then the variant's fields. An error with no tag of its own
/// travels as its text and reads back as a [`MqdError::Protocol`] of the decoder's DLL.
impl Codec for MqdError {
    const MIN_SIZE: usize = 1;
    fn encode(&self, e: &mut Enc) {
        use tag::error as t;
        match self {
            MqdError::Load { path, reason } => {
                e.u8(t::LOAD).str(path).str(reason);
            }
            MqdError::MissingExports { path, names } => {
                e.u8(t::MISSING_EXPORTS).str(path);
                names.encode(e);
            }
            MqdError::Incompatible {
                path,
                found,
                supported,
            } => {
                e.u8(t::INCOMPATIBLE).str(path);
                found.encode(e);
                supported.encode(e);
            }
            MqdError::TaddrWidth { path, found, host } => {
                e.u8(t::TADDR_WIDTH).str(path);
                found.encode(e);
                host.encode(e);
            }
            MqdError::Dll {
                path,
                call,
                image,
                code,
                message,
                callbacks,
            } => {
                e.u8(t::DLL).str(path).str(call);
                image.encode(e);
                code.encode(e);
                e.str(message);
                callbacks.faults.encode(e);
                callbacks.missing_types.encode(e);
            }
            MqdError::Unbounded { path, what, limit } => {
                e.u8(t::UNBOUNDED).str(path).str(what);
                limit.encode(e);
            }
            MqdError::UnknownProcess { handle } => {
                e.u8(t::UNKNOWN_PROCESS);
                handle.encode(e);
            }
            MqdError::Unsupported {
                path,
                function,
                reason,
            } => {
                e.u8(t::UNSUPPORTED).str(path).str(function).str(reason);
            }
            MqdError::IdentityInUse { path, identity } => {
                e.u8(t::IDENTITY_IN_USE).str(path);
                Rank(*identity).encode(e);
            }
            // Its own tag, so that it reads back as itself: under the text tag it came back
            // wrapped in another "broke the protocol: helper error:" at each round trip (found
            // by the `wire` fuzz target; protocol version 3).
            MqdError::Protocol { path, reason } => {
                e.u8(t::PROTOCOL).str(path).str(reason);
            }
            other => {
                e.u8(t::TEXT).str(&other.to_string());
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        use tag::error as t;
        Ok(match d.u8()? {
            t::TEXT => MqdError::Protocol {
                path: d.path().to_string(),
                reason: format!("helper error: {}", d.string()?),
            },
            t::LOAD => MqdError::Load {
                path: d.string()?,
                reason: d.string()?,
            },
            t::MISSING_EXPORTS => MqdError::MissingExports {
                path: d.string()?,
                names: Codec::decode(d)?,
            },
            t::INCOMPATIBLE => MqdError::Incompatible {
                path: d.string()?,
                found: d.i32()?,
                supported: d.i32()?,
            },
            t::TADDR_WIDTH => MqdError::TaddrWidth {
                path: d.string()?,
                found: d.i32()?,
                host: usize::decode(d)?,
            },
            t::DLL => {
                let path = d.string()?;
                let call = d.string()?;
                MqdError::Dll {
                    path,
                    // The field is `&'static str`: one of the exports the DLL host knows (the
                    // one list of them, in ffi.rs), or a generic name for anything else.
                    call: crate::ffi::REQUIRED
                        .iter()
                        .chain(crate::ffi::OPTIONAL.iter())
                        .find(|c| **c == call)
                        .copied()
                        .unwrap_or("an MQD DLL function"),
                    image: Codec::decode(d)?,
                    code: d.i32()?,
                    message: d.string()?,
                    callbacks: Box::new(CallbackReport::new(Codec::decode(d)?, Codec::decode(d)?)),
                }
            }
            t::UNBOUNDED => MqdError::Unbounded {
                path: d.string()?,
                what: d.string()?,
                limit: usize::decode(d)?,
            },
            t::UNKNOWN_PROCESS => MqdError::UnknownProcess {
                handle: usize::decode(d)?,
            },
            t::UNSUPPORTED => MqdError::Unsupported {
                path: d.string()?,
                function: d.string()?,
                reason: d.string()?,
            },
            t::IDENTITY_IN_USE => MqdError::IdentityInUse {
                path: d.string()?,
                identity: Rank::decode(d)?.0,
            },
            t::PROTOCOL => MqdError::Protocol {
                path: d.string()?,
                reason: d.string()?,
            },
            other => return Err(format!("unknown error tag {other}")),
        })
    }
}
