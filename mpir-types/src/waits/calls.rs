//! The export's call codes and argument values (`enum mpir_waits_call`, the peer and tag
//! constants of `mpir_waits.h`).

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
    pub(super) fn of(x: i32) -> Arg {
        match x {
            -1 => Arg::Any,
            -2 => Arg::None,
            -3 => Arg::ProcNull,
            -4 => Arg::Root,
            x => u32::try_from(x).map_or(Arg::Invalid(x), Arg::Value),
        }
    }

    pub(super) fn tag(x: i32) -> Arg {
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
