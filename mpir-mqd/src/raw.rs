//! What a DLL's iteration produced, before normalisation (what the out-of-process helper ships
//! to its parent), and the normalisation both hosting modes share.

use mpir_types::mqd::{self, CommunicatorLayout, LengthUnit, OpClass, PendingOperationLayout};
use mpir_types::{DataModel, Result as DecodeResult};

use crate::error::MqdError;
use crate::ffi::StructBuf;
use crate::model::{CommOrigin, CommunicatorQueues, Queue, group_from_raw, normalize};

/// The interface's structs as this host's ABI lays them out (the DLL runs here, or in the
/// helper on this machine), from `mpir_types::mqd`: the one definition of their layout.
#[derive(Debug, Clone)]
pub(crate) struct HostLayouts {
    model: DataModel,
    comm: CommunicatorLayout,
    op: PendingOperationLayout,
}

impl HostLayouts {
    pub(crate) fn new() -> Self {
        let model = DataModel::host();
        HostLayouts {
            comm: CommunicatorLayout::abi(&model),
            op: PendingOperationLayout::abi(&model),
            model,
        }
    }

    /// A buffer for one `mqs_communicator`.
    pub(crate) fn communicator_buf(&self) -> StructBuf {
        StructBuf::zeroed(self.comm.size)
    }

    /// A buffer for one `mqs_pending_operation`.
    pub(crate) fn operation_buf(&self) -> StructBuf {
        StructBuf::zeroed(self.op.size)
    }

    /// The communicator the DLL wrote into `buf`.
    pub(crate) fn communicator(&self, buf: &StructBuf) -> DecodeResult<mqd::Communicator> {
        mqd::decode_communicator(&self.model, &self.comm, 0, buf.bytes())
    }

    /// The operation the DLL wrote into `buf`.
    pub(crate) fn operation(&self, buf: &StructBuf) -> DecodeResult<mqd::PendingOperation> {
        mqd::decode_pending_operation(&self.model, &self.op, 0, buf.bytes())
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
