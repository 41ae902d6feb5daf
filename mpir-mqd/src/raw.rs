//! What a DLL's iteration produced, before normalisation (what the out-of-process helper ships
//! to its parent), and the normalisation both hosting modes share.

// `c_long`/`c_ulong` are 64-bit here but 32-bit on other hosts: the widening conversions
// are needed there.
#![allow(clippy::useless_conversion)]

use mpir_types::mqd::{self, LengthUnit, OpClass, OpStatus};

use crate::error::MqdError;
use crate::ffi::{EXTRA_LINES, RawPendingOperation, char_array_bytes};
use crate::model::{CommOrigin, CommunicatorQueues, Queue, group_from_raw, normalize};

/// The DLL's `mqs_pending_operation` in the host-independent raw model.
pub(crate) fn raw_operation(raw: &RawPendingOperation) -> mqd::PendingOperation {
    let extra_text = raw
        .extra_text
        .iter()
        .take(EXTRA_LINES)
        .map(|l| char_array_bytes(l))
        .take_while(|l| !l.is_empty())
        .map(|l| String::from_utf8_lossy(&l).into_owned())
        .collect();
    mqd::PendingOperation {
        status: OpStatus::from_raw(raw.status.into()),
        desired_local_rank: i64::from(raw.desired_local_rank),
        desired_global_rank: i64::from(raw.desired_global_rank),
        tag_wild: raw.tag_wild != 0,
        desired_tag: i64::from(raw.desired_tag),
        desired_length: i64::from(raw.desired_length),
        system_buffer: raw.system_buffer != 0,
        buffer: u64::from(raw.buffer),
        actual_local_rank: i64::from(raw.actual_local_rank),
        actual_global_rank: i64::from(raw.actual_global_rank),
        actual_tag: i64::from(raw.actual_tag),
        actual_length: i64::from(raw.actual_length),
        extra_text,
    }
}

/// One queue as the DLL gave it, before normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawQueue {
    /// `mqs_no_information`.
    NoInformation,
    /// The operations, and the error that stopped the iteration early, if any.
    Operations(Vec<mqd::PendingOperation>, Option<MqdError>),
}

/// One communicator as the DLL gave it, before normalisation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawCommQueues {
    pub(crate) communicator: mqd::Communicator,
    pub(crate) group: Option<Vec<i64>>,
    /// Sends, receives, unexpected.
    pub(crate) queues: [RawQueue; 3],
}

impl RawCommQueues {
    /// Normalises (lengths in `unit`, global ranks from the group).
    pub(crate) fn finish(self, unit: LengthUnit) -> CommunicatorQueues {
        let group = self.group.as_deref().map(group_from_raw);
        let [sends, receives, unexpected] = {
            let mut i = 0;
            self.queues.map(|q| {
                let class = OpClass::ALL[i];
                i += 1;
                match q {
                    RawQueue::NoInformation => Queue::NoInformation,
                    RawQueue::Operations(ops, error) => {
                        let ops = ops
                            .iter()
                            .map(|o| normalize(o, class, unit, group.as_deref()))
                            .collect();
                        match error {
                            None => Queue::Operations(ops),
                            Some(error) => Queue::Failed {
                                partial: ops,
                                error,
                            },
                        }
                    }
                }
            })
        };
        let mut communicator = self.communicator;
        // Open MPI's DLL copies MPI_COMM_NULL's rank -2 unsigned.
        communicator.local_rank = mqd::c_int(communicator.local_rank);
        CommunicatorQueues {
            origin: CommOrigin::from_dll_name(&communicator.name),
            context_id: None,
            communicator,
            group,
            sends,
            receives,
            unexpected,
        }
    }
}

/// Units of a DLL's lengths: `given`, or inferred from its version string (Open MPI's DLL
/// counts bytes, MPICH's counts elements).
pub(crate) fn infer_unit(given: Option<LengthUnit>, version: &str) -> LengthUnit {
    given.unwrap_or(if version.contains("Open MPI") {
        LengthUnit::Bytes
    } else {
        LengthUnit::Elements { element_size: None }
    })
}
