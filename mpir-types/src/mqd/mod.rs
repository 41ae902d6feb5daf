//! The message-queue dumping (MQD) interface's data: enum values, the `mqs_communicator` and
//! `mqs_pending_operation` structs in any data model, and their normalised form (*MPI Message Queue
//! Dumping*, J. Cownie, version 1.06, and `mpi_interface.h`; see the repository's [spec list]).
//!
//! [spec list]: https://github.com/mpir-rs/mpir-rs/blob/main/docs/spec/README.md

mod codes;
mod normal;
mod raw;

pub use codes::{
    COMM_NAME_LEN, EXTRA_TEXT_LEN, EXTRA_TEXT_LINES, INTERFACE_COMPATIBILITY,
    INTERFACE_COMPATIBILITY_MPI2, OpClass, OpStatus, result,
};
pub use normal::{Actual, Length, LengthUnit, Operation, Peer, c_int, normalize};
pub use raw::{
    Communicator, CommunicatorLayout, PendingOperation, PendingOperationLayout,
    decode_communicator, decode_pending_operation, encode_communicator, encode_pending_operation,
};
