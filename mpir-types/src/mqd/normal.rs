//! The normalised form of a pending operation: what a tool shows, independent of the DLL's
//! conventions (lengths in bytes or elements, `-1` for "any" or "unknown").

use crate::mqd::codes::{OpClass, OpStatus};
use crate::mqd::raw::PendingOperation;

/// How a source of operations expresses lengths.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum LengthUnit {
    /// Lengths are byte counts (Open MPI's DLL).
    Bytes,
    /// Lengths are element counts (MPICH's DLL); bytes are known when the element size is.
    Elements {
        /// Size of one element in bytes, if known.
        element_size: Option<u64>,
    },
}

/// A message peer as a rank within the operation's communicator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[allow(
    clippy::exhaustive_enums,
    reason = "every value has a variant: MPI_ANY_SOURCE, a rank, or the value kept"
)]
pub enum Peer {
    /// `MPI_ANY_SOURCE` (a receive's -1).
    Any,
    /// A rank.
    Rank(u64),
    /// A value the interface does not define, preserved.
    Unknown(i64),
}

/// A message length in the units that are known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[allow(
    clippy::exhaustive_structs,
    reason = "bytes and elements: the two units an MPI message length is counted in"
)]
pub struct Length {
    /// Length in bytes, when known.
    pub bytes: Option<u64>,
    /// Length in elements, when the source counts elements.
    pub elements: Option<u64>,
}

impl Length {
    /// Interprets a raw length in `unit`; negative lengths are unknown.
    pub fn from_raw(raw: i64, unit: LengthUnit) -> Self {
        let Ok(n) = u64::try_from(raw) else {
            return Length {
                bytes: None,
                elements: None,
            };
        };
        match unit {
            LengthUnit::Bytes => Length {
                bytes: Some(n),
                elements: None,
            },
            LengthUnit::Elements { element_size } => Length {
                bytes: element_size.and_then(|s| n.checked_mul(s)),
                elements: Some(n),
            },
        }
    }
}

/// What an operation was actually matched with (valid once matched, and for sends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Actual {
    /// Rank in the communicator, when known.
    pub local_rank: Option<u64>,
    /// Rank in `MPI_COMM_WORLD`, when known.
    pub global_rank: Option<u64>,
    /// Tag.
    pub tag: i64,
    /// Length.
    pub length: Length,
}

/// A pending operation, normalised.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Operation {
    /// Which queue it is on.
    pub class: OpClass,
    /// Its state.
    pub status: OpStatus,
    /// Desired peer (source of a receive, destination of a send) in the communicator.
    pub peer_local: Peer,
    /// Desired peer in `MPI_COMM_WORLD`; `None` when unknown or a wildcard (the DLL's -1).
    pub peer_global: Option<u64>,
    /// Desired tag; `None` for `MPI_ANY_TAG`.
    pub tag: Option<i64>,
    /// Desired (buffer) length.
    pub length: Length,
    /// Whether the data sits in a system buffer.
    pub system_buffer: bool,
    /// Address of the data in the target.
    pub buffer: u64,
    /// Match information, when the interface says it is valid.
    pub actual: Option<Actual>,
    /// The DLL's extra lines of text.
    pub extra_text: Vec<String>,
}

impl Operation {
    /// A pending operation on queue `class` for peer `peer_local`, with nothing else known:
    /// status pending, any tag, no global peer, unknown length, buffer 0, not in a system
    /// buffer, no match information and no extra text. Set the rest through the fields.
    pub fn new(class: OpClass, peer_local: Peer) -> Self {
        Operation {
            class,
            status: OpStatus::Pending,
            peer_local,
            peer_global: None,
            tag: None,
            length: Length {
                bytes: None,
                elements: None,
            },
            system_buffer: false,
            buffer: 0,
            actual: None,
            extra_text: Vec::new(),
        }
    }
}

fn rank(v: i64) -> Option<u64> {
    u64::try_from(c_int(v)).ok()
}

/// A C `int` that a source copied into a 64-bit field without sign extension (Open MPI 4.1's
/// DLL does this for ranks: `MPI_ANY_SOURCE` arrives as 4294967295), read back as the `int` it
/// was. Ranks and tags are C `int`s, so a value in `[2^31, 2^32)` cannot be anything else.
pub fn c_int(v: i64) -> i64 {
    if (1 << 31..1 << 32).contains(&v) {
        i64::from(v as u32 as i32)
    } else {
        v
    }
}

/// Normalises `op`, found on the `class` queue of a source whose lengths are in `unit`. Ranks
/// and tags that a source failed to sign-extend are repaired ([`c_int`]).
pub fn normalize(op: &PendingOperation, class: OpClass, unit: LengthUnit) -> Operation {
    let peer_local = match c_int(op.desired_local_rank) {
        -1 if class != OpClass::Send => Peer::Any,
        v => rank(v).map_or(Peer::Unknown(v), Peer::Rank),
    };
    let matched = matches!(op.status, OpStatus::Matched | OpStatus::Complete);
    let actual = (matched || class == OpClass::Send).then(|| Actual {
        local_rank: rank(op.actual_local_rank),
        global_rank: rank(op.actual_global_rank),
        tag: c_int(op.actual_tag),
        length: Length::from_raw(op.actual_length, unit),
    });
    Operation {
        class,
        status: op.status,
        peer_local,
        peer_global: rank(op.desired_global_rank),
        tag: (!op.tag_wild).then_some(c_int(op.desired_tag)),
        length: Length::from_raw(op.desired_length, unit),
        system_buffer: op.system_buffer,
        buffer: op.buffer,
        actual,
        extra_text: op.extra_text.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op() -> PendingOperation {
        PendingOperation {
            status: OpStatus::Pending,
            desired_local_rank: -1,
            desired_global_rank: -1,
            tag_wild: true,
            desired_tag: 99,
            desired_length: 10,
            system_buffer: false,
            buffer: 0x1000,
            actual_local_rank: 3,
            actual_global_rank: 5,
            actual_tag: 7,
            actual_length: 10,
            extra_text: vec!["MPI_Irecv".into()],
        }
    }

    #[test]
    fn wildcard_receive() {
        let n = normalize(&op(), OpClass::Receive, LengthUnit::Bytes);
        assert_eq!(n.peer_local, Peer::Any);
        assert_eq!(n.peer_global, None);
        assert_eq!(n.tag, None);
        assert_eq!(n.length.bytes, Some(10));
        assert_eq!(n.actual, None, "a pending receive has no match yet");
    }

    #[test]
    fn send_with_elements() {
        let mut o = op();
        o.desired_local_rank = 2;
        o.desired_global_rank = 4;
        o.tag_wild = false;
        let unit = LengthUnit::Elements {
            element_size: Some(8),
        };
        let n = normalize(&o, OpClass::Send, unit);
        assert_eq!(n.peer_local, Peer::Rank(2));
        assert_eq!(n.peer_global, Some(4));
        assert_eq!(n.tag, Some(99));
        assert_eq!(
            n.length,
            Length {
                bytes: Some(80),
                elements: Some(10)
            }
        );
        let a = n.actual.expect("sends carry actual fields");
        assert_eq!((a.local_rank, a.global_rank, a.tag), (Some(3), Some(5), 7));
        // A send's -1 is not a wildcard.
        o.desired_local_rank = -1;
        assert_eq!(
            normalize(&o, OpClass::Send, unit).peer_local,
            Peer::Unknown(-1)
        );
        // Unknown element size: no bytes; overflow: no bytes.
        let l = Length::from_raw(
            i64::MAX,
            LengthUnit::Elements {
                element_size: Some(16),
            },
        );
        assert_eq!((l.bytes, l.elements), (None, Some(i64::MAX as u64)));
        assert_eq!(Length::from_raw(-5, LengthUnit::Bytes).bytes, None);
    }

    #[test]
    fn ints_that_were_not_sign_extended_are_repaired() {
        let mut o = op();
        o.desired_local_rank = 0xffff_ffff; // Open MPI's DLL: MPI_ANY_SOURCE as unsigned
        o.desired_global_rank = 0xffff_ffff;
        assert_eq!(
            normalize(&o, OpClass::Receive, LengthUnit::Bytes).peer_local,
            Peer::Any
        );
        assert_eq!(
            normalize(&o, OpClass::Receive, LengthUnit::Bytes).peer_global,
            None
        );
        o.desired_local_rank = 0xffff_fffe; // -2: not a rank, kept as the int it was
        assert_eq!(
            normalize(&o, OpClass::Receive, LengthUnit::Bytes).peer_local,
            Peer::Unknown(-2)
        );
        // Real ranks and 64-bit values outside the int range are left alone.
        o.desired_local_rank = 0x7fff_ffff;
        assert_eq!(
            normalize(&o, OpClass::Receive, LengthUnit::Bytes).peer_local,
            Peer::Rank(0x7fff_ffff)
        );
        assert_eq!(c_int(1 << 32), 1 << 32);
        assert_eq!(c_int(-1), -1);
    }
}
