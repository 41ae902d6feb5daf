//! Native message-queue walkers: the queues of MPICH and Open MPI read directly from the
//! process (live, core file or mock — any [`Target`]), from the layouts its own debug
//! information (or a types sidecar) describes, without a vendor MQD DLL.
//!
//! They produce the model every engine returns ([`crate::model`]: [`CommunicatorQueues`], operations as
//! [`mpir_types::mqd::Operation`]), plus what the DLLs leave out: global ranks and groups for
//! MPICH, unexpected messages for Open MPI, lengths in bytes where the datatype is known, and
//! which communicators are the library's own ([`CommOrigin`]).
//!
//! # What each walker requires
//!
//! Every field is read by its DWARF name at the offset and width the debug information gives
//! (the type of the *variable* where the text below says "symbol of type"); nothing is at a
//! hard-coded offset. Walkers are chosen by which symbols and types exist. "Optional" items
//! only enrich the result; their absence is listed in [`Walk::missing`].
//!
//! ## MPICH, common part
//!
//! - symbol `MPIR_All_communicators`, type `MPIR_Comm_list` with `sequence_number` (int) and
//!   `head` (pointer to `MPIR_Comm`);
//! - type `MPIR_Comm` with `comm_next`, `name` (char array), `rank`, `local_size`,
//!   `context_id`, `recvcontext_id` (any integer width: read at their real width);
//!   optional: `handle` (predefined communicators), `comm_kind` (0 intra, 1 inter),
//!   `hierarchy_kind` (2 node-roots and 3 node are internal), `remote_size`,
//!   `local_group` → type `MPIR_Group` (`size`, `lrank_to_lpid`) → type `MPII_Group_pmap_t`
//!   (`lpid`) for global ranks, and the ch3 device's `dev` → type `MPIDI_CH3I_comm_t`
//!   (`vcrt`) → type `MPIDI_VCRT` (`size`, `vcr_table`) for global ranks when `local_group`
//!   is NULL (the world's virtual-connection table maps each VC to its world rank);
//! - optional: symbol `MPIR_Process` of type `MPIR_Process_t` with `comm_world` and
//!   `icomm_world` (which communicator is the world, and MPICH's internal copy of it;
//!   without it the world is the intracommunicator of context id 0);
//! - optional: symbol `MPIR_Datatype_direct` and type `MPIR_Datatype` (`size`): element size
//!   of derived datatypes (built-in handles carry their size).
//!
//! ## MPICH ≥ 4.1 debug queues (chosen when type `MPIR_Debugq` and symbol `MPIR_Recvq_head` exist)
//!
//! - symbols `MPIR_Sendq_head`, `MPIR_Recvq_head`, `MPIR_Unexpq_head` (each an
//!   `MPIR_Debugq *`);
//! - type `MPIR_Debugq` with `req`, `tag`, `rank`, `context_id`, `buf`, `count`, `next`;
//! - optional: type `MPIR_Request` with `cc` (completion counter: non-zero is pending).
//!
//! Sends match a communicator's `context_id`, receives and unexpected messages its
//! `recvcontext_id`. Lengths are element counts (the entries carry no datatype).
//!
//! ## MPICH ch3 (MPICH ≤ 4.0 with `--enable-debuginfo`)
//!
//! - symbols `MPID_Recvq_posted_head_ptr` and `MPID_Recvq_unexpected_head_ptr` (LOCAL:
//!   found in `.symtab`), each a pointer to the variable holding a list head;
//! - type `MPIR_Request` with `cc`, `next`, `dev` → type `MPIDI_Request` with `match`,
//!   `user_buf`, `user_count`, `datatype` (optional: `recv_data_sz`, `tmpbuf`) → type
//!   `MPIDI_Message_match` with `parts` → type `MPIDI_Message_match_parts_t` with `tag`,
//!   `rank`, `context_id`;
//! - optional (the send queue): symbol `MPIR_Sendq_head` and type `MPIR_Sendq` with `sreq`,
//!   `tag`, `rank`, `context_id`, `next`.
//!
//! ## Open MPI, PML ob1
//!
//! - symbols `ompi_mpi_communicators` (type `opal_pointer_array_t`: `size`, `lowest_free`,
//!   `number_free`, `addr`), `mca_pml_base_send_requests` and `mca_pml_base_recv_requests`
//!   (type `opal_free_list_t`: `fl_allocations`, `fl_frag_size`, `fl_frag_alignment`,
//!   `fl_num_per_alloc`, `fl_num_allocated`), optional `ompi_mpi_comm_world`;
//! - types `opal_list_t` (`opal_list_sentinel`), `opal_list_item_t` (`opal_list_next`),
//!   `opal_free_list_item_t`; `ompi_communicator_t` (`c_name`, `c_contextid`, `c_my_rank`,
//!   `c_local_group`, `c_flags`; optional `c_pml_comm`); `ompi_group_t` (`grp_proc_count`,
//!   `grp_proc_pointers`, `grp_flags`); `ompi_request_t` (`req_type`, `req_state`,
//!   `req_complete`, `req_status`); `ompi_status_public_t` (`MPI_SOURCE`, `MPI_TAG`,
//!   `_ucount`); `mca_pml_base_request_t` (`req_ompi`, `req_addr`, `req_count`, `req_peer`,
//!   `req_tag`, `req_comm`, `req_datatype`, `req_type`, `req_pml_complete`);
//!   `mca_pml_base_send_request_t` (`req_base`, `req_addr`, `req_bytes_packed`);
//!   `mca_pml_base_recv_request_t` (`req_base`, `req_bytes_packed`); `ompi_datatype_t`
//!   (`super`, `name`) and `opal_datatype_t` (`size`);
//! - optional (unexpected messages): types `mca_pml_ob1_comm_t` (`procs`, `num_procs`),
//!   `mca_pml_ob1_comm_proc_t` (`unexpected_frags`), `mca_pml_ob1_recv_frag_t` (`hdr`,
//!   `segments`, `num_segments`), `mca_pml_ob1_match_hdr_t` (`hdr_common`, `hdr_ctx`,
//!   `hdr_src`, `hdr_tag`), `mca_pml_ob1_common_hdr_t` (`hdr_type`),
//!   `mca_pml_ob1_rendezvous_hdr_t` (`hdr_match`, `hdr_msg_length`) and
//!   `mca_btl_base_segment_t` (`seg_len`). Stock Open MPI has no DWARF: these come from the
//!   types sidecar of `scripts/openmpi-types-sidecar.sh`.
//!
//! # Before a rank counts
//!
//! [`crate::QueueReader::read`] first proves, from the rank's own symbols and memory, that
//! the walker reads where that rank keeps its pending operations (Open MPI: symbols `mca_pml`
//! and `mca_pml_ob1`, the selected PML is ob1; MPICH: `MPII_Version_device`, the device
//! records them where the walker reads), or refuses the rank with [`crate::MqdError::Blind`].
//! [`Walker::queues`] itself does not: it reads the layout it was made for.
//!
//! # Bad input
//!
//! Every list walk is bounded ([`WalkOptions`]) and stops at an entry seen twice; a queue that
//! fails part way is a [`Queue::Failed`] holding the operations read before. The communicator
//! list is walked again (up to [`WalkOptions::max_attempts`] times) when its sequence number
//! (MPICH) or its pointer array (Open MPI) changed during the walk, or when a read failed
//! meanwhile; after that the walk fails with [`NativeError::Unstable`].
//!
//! # Example
//!
//! ```no_run
//! use mpir_mqd::native::{self, ProcessInfo, WalkOptions};
//! use mpir_target::live::LiveTarget;
//!
//! let target = LiveTarget::open(4242, Default::default())?;
//! let walker = native::detect(&target, &WalkOptions::default())?;
//! let walk = walker.queues(&target, &ProcessInfo::with_global_rank(0))?;
//! for comm in &walk.communicators {
//!     println!("{} ({:?}): {} receives", comm.communicator.name, comm.origin,
//!              comm.receives.operations().len());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod layout;
mod mpich;
mod ompi;
mod snapshot;

use std::time::Duration;

use mpir_target::Target;
use mpir_types::mqd::{self, LengthUnit, OpClass, Operation};

pub use crate::error::native::NativeError;

use self::snapshot::Snapshot;
use crate::MqdError;
use crate::error::native::NativeResult;
use crate::model::{CommOrigin, CommunicatorQueues, Queue, group_from_raw};

/// Bounds of a walk.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WalkOptions {
    /// Most communicators one process may have.
    pub max_communicators: usize,
    /// Most entries one queue list (or request free list) may have.
    pub max_operations: usize,
    /// Largest communicator whose group is read.
    pub max_group_size: usize,
    /// Walks of the communicator list before giving up on a changing one.
    pub max_attempts: u32,
    /// Most bytes of target memory cached during one walk.
    pub max_snapshot_bytes: u64,
}

impl Default for WalkOptions {
    fn default() -> Self {
        WalkOptions {
            max_communicators: 1 << 16,
            max_operations: 1 << 22,
            max_group_size: 1 << 22,
            max_attempts: 4,
            max_snapshot_bytes: 256 << 20,
        }
    }
}

impl WalkOptions {
    /// The defaults with other list bounds.
    pub fn with_bounds(mut self, communicators: usize, operations: usize) -> Self {
        self.max_communicators = communicators;
        self.max_operations = operations;
        self
    }

    /// The defaults with another number of attempts.
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }
}

/// What the tool knows about the process beyond its memory (from the acquired job).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct ProcessInfo {
    /// Its rank in `MPI_COMM_WORLD` (used when the MPI's own data cannot say, e.g. for
    /// `MPI_COMM_SELF` without a group).
    pub global_rank: Option<u64>,
}

impl ProcessInfo {
    /// A process of world rank `rank`.
    pub fn with_global_rank(rank: u64) -> Self {
        ProcessInfo {
            global_rank: Some(rank),
        }
    }
}

/// Which layout a [`Walker`] reads.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WalkerKind {
    /// MPICH's ch3 device queues (`MPID_Recvq_*_head_ptr`, `MPIR_Sendq`).
    MpichCh3,
    /// MPICH ≥ 4.1's debug queues (`MPIR_Debugq`).
    MpichDebugq,
    /// Open MPI's PML ob1.
    OpenMpiOb1,
}

/// A walker for one MPI's layout, made by [`detect`] from a process's debug information; it
/// walks any process of the same build ([`Walker::queues`]).
#[derive(Debug, Clone)]
pub struct Walker {
    inner: Inner,
    /// Optional symbols/types/fields absent at detection.
    missing: Vec<String>,
    /// The bounds [`Walker::queues`] walks with (given to [`detect`]).
    options: WalkOptions,
}

#[derive(Debug, Clone)]
enum Inner {
    Mpich(Box<mpich::MpichLayout>),
    Ompi(Box<ompi::OmpiLayout>),
}

/// The result of one walk.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Walk {
    /// Every communicator with its queues, sorted by receive context id (as the DLLs do).
    pub communicators: Vec<CommunicatorQueues>,
    /// Optional symbols, types or fields that were absent, and parts of the result they left
    /// out (`type mca_pml_ob1_comm_t (unexpected messages)`, ...).
    pub missing: Vec<String>,
    /// Why the communicator list was cut short (a cycle, an unreadable or corrupt entry);
    /// the communicators before it are in [`Walk::communicators`].
    pub communicators_error: Option<NativeError>,
    /// Walks of the communicator list it took (more than 1: the list changed meanwhile).
    pub attempts: u32,
    /// List entries visited (communicators, queue entries, free-list items).
    pub hops: u64,
    /// Reads issued to the target (block fills and direct reads).
    pub target_reads: u64,
    /// Wall-clock time of the walk.
    pub elapsed: Duration,
}

/// Finds the walker whose symbols and types the process has; it walks with `options`'
/// bounds ([`Walker::queues`]).
pub fn detect(target: &dyn Target, options: &WalkOptions) -> Result<Walker, NativeError> {
    let mut tried = Vec::new();
    let mut missing_types = Vec::new();
    let mut missing_symbols = Vec::new();
    let walker = |inner, missing| Walker {
        inner,
        missing,
        options: options.clone(),
    };
    match mpich::detect(target)? {
        Ok((layout, missing)) => return Ok(walker(Inner::Mpich(Box::new(layout)), missing)),
        Err(lacks) => {
            tried.push(("MPICH".to_string(), lacks.items));
            missing_types.extend(lacks.types);
            missing_symbols.push(("MPICH".to_string(), lacks.symbols));
        }
    }
    match ompi::detect(target)? {
        Ok((layout, missing)) => return Ok(walker(Inner::Ompi(Box::new(layout)), missing)),
        Err(lacks) => {
            tried.push(("Open MPI ob1".to_string(), lacks.items));
            missing_types.extend(lacks.types);
            missing_symbols.push(("Open MPI ob1".to_string(), lacks.symbols));
        }
    }
    Err(NativeError::NotRecognised {
        tried,
        missing_types,
        missing_symbols,
    })
}

impl Walker {
    /// The layout it reads.
    pub fn kind(&self) -> WalkerKind {
        match &self.inner {
            Inner::Mpich(l) => l.kind(),
            Inner::Ompi(_) => WalkerKind::OpenMpiOb1,
        }
    }

    /// Optional symbols, types or fields the process lacked at detection.
    pub fn missing(&self) -> &[String] {
        &self.missing
    }

    /// Walks the communicators and queues of `target` (a process of the build this walker
    /// was detected on), with the bounds given to [`detect`].
    pub fn queues(&self, target: &dyn Target, process: &ProcessInfo) -> Result<Walk, NativeError> {
        self.queues_with(target, process, &self.options)
    }

    /// The bounds [`Walker::queues`] walks with.
    pub fn options(&self) -> &WalkOptions {
        &self.options
    }

    /// [`Walker::queues`] with other bounds.
    pub fn queues_with(
        &self,
        target: &dyn Target,
        process: &ProcessInfo,
        options: &WalkOptions,
    ) -> Result<Walk, NativeError> {
        let started = std::time::Instant::now();
        let snap = snapshot::Snapshot::new(target, options.max_snapshot_bytes);
        let mut walk = match &self.inner {
            Inner::Mpich(l) => mpich::walk(l, &snap, process, options)?,
            Inner::Ompi(l) => ompi::walk(l, &snap, process, options)?,
        };
        let mut missing = self.missing.clone();
        missing.append(&mut walk.missing);
        missing.dedup();
        walk.missing = missing;
        walk.target_reads = snap.target_reads();
        walk.elapsed = started.elapsed();
        Ok(walk)
    }
}

/// What a walker's detection finds: its layout and the optional items missing, or the
/// required items missing.
/// (A failed detection: every item lacking, and the names of the types among them.)
pub(crate) type Detected<L> = Result<(L, Vec<String>), layout::Lacks>;

/// One operation read natively, before normalisation.
#[derive(Clone)]
pub(crate) struct RawOp {
    pub(crate) op: mqd::PendingOperation,
    pub(crate) unit: LengthUnit,
}

/// A queue as read: operations, and the error that cut it short.
pub(crate) struct RawQueue {
    pub(crate) ops: Vec<RawOp>,
    pub(crate) error: Option<NativeError>,
    pub(crate) no_information: bool,
}

impl RawQueue {
    pub(crate) fn none() -> Self {
        RawQueue {
            ops: Vec::new(),
            error: None,
            no_information: true,
        }
    }

    fn finish(self, class: OpClass, group: Option<&[Option<u64>]>) -> Queue {
        if self.no_information {
            return Queue::NoInformation;
        }
        let ops: Vec<Operation> = self
            .ops
            .iter()
            .map(|r| crate::model::normalize(&r.op, class, r.unit, group))
            .collect();
        match self.error {
            None => Queue::Operations(ops),
            Some(e) => Queue::Failed {
                partial: ops,
                error: MqdError::Native(e),
            },
        }
    }
}

/// A communicator as read, before normalisation.
pub(crate) struct RawComm {
    pub(crate) communicator: mqd::Communicator,
    pub(crate) origin: CommOrigin,
    pub(crate) group: Option<Vec<i64>>,
    /// Sort key (receive context id).
    pub(crate) key: u64,
    /// Sends, receives, unexpected.
    pub(crate) queues: [RawQueue; 3],
}

impl RawComm {
    pub(crate) fn finish(self) -> CommunicatorQueues {
        let group = self.group.as_deref().map(group_from_raw);
        let [s, r, u] = self.queues;
        CommunicatorQueues {
            communicator: self.communicator,
            origin: self.origin,
            context_id: Some(self.key),
            sends: s.finish(OpClass::Send, group.as_deref()),
            receives: r.finish(OpClass::Receive, group.as_deref()),
            unexpected: u.finish(OpClass::Unexpected, group.as_deref()),
            group,
        }
    }
}

/// Sorts by key (then address) and normalises.
pub(crate) fn finish_all(mut comms: Vec<RawComm>) -> Vec<CommunicatorQueues> {
    comms.sort_by_key(|c| (c.key, c.communicator.unique_id));
    comms.into_iter().map(RawComm::finish).collect()
}

/// What the re-walk loop needs of a walker's context: the optional things it found missing
/// (cleared before a new attempt) and the pointers it followed.
pub(crate) trait WalkTally {
    /// The optional symbols, types or fields found missing so far.
    fn missing_mut(&mut self) -> &mut Vec<String>;
    /// Pointers followed so far.
    fn hops(&self) -> u64;
}

/// The re-walk loop of both walkers: one `attempt` over the communicator list, kept when
/// `stamp` (MPICH's list sequence number, Open MPI's array header), read past the snapshot
/// before and after, did not change; otherwise the snapshot is dropped and the list walked
/// again, `max_attempts` times at most (at least once).
pub(crate) fn walk_until_stable<C: WalkTally, K: PartialEq>(
    s: &Snapshot<'_>,
    cx: &mut C,
    max_attempts: u32,
    mut stamp: impl FnMut() -> NativeResult<K>,
    mut attempt: impl FnMut(&mut C) -> NativeResult<(Vec<RawComm>, Option<NativeError>)>,
) -> NativeResult<Walk> {
    let attempts = max_attempts.max(1);
    for n in 1..=attempts {
        if n > 1 {
            s.clear();
            cx.missing_mut().clear();
        }
        let before = stamp()?;
        let outcome = attempt(cx);
        if before == stamp()? {
            let (comms, incomplete) = outcome?;
            return Ok(Walk {
                communicators: finish_all(comms),
                missing: std::mem::take(cx.missing_mut()),
                communicators_error: incomplete,
                attempts: n,
                hops: cx.hops(),
                target_reads: 0,
                elapsed: Duration::default(),
            });
        }
    }
    Err(NativeError::Unstable { attempts })
}

/// `len` bytes at `address`, read from the target past the snapshot (for a
/// [`walk_until_stable`] stamp); `what` names them in the error.
pub(crate) fn read_fresh(
    s: &Snapshot<'_>,
    address: u64,
    len: u64,
    what: &str,
) -> NativeResult<Vec<u8>> {
    let mut b = vec![0u8; usize::try_from(len).unwrap_or(0)];
    s.target()
        .read_exact(address, &mut b)
        .map_err(|source| NativeError::Read {
            what: what.into(),
            address,
            source,
        })?;
    Ok(b)
}

/// A pending operation with every field "unknown" (-1), to be filled.
pub(crate) fn blank_op() -> mqd::PendingOperation {
    mqd::PendingOperation {
        status: mqd::OpStatus::Pending,
        desired_local_rank: -1,
        desired_global_rank: -1,
        tag_wild: false,
        desired_tag: -1,
        desired_length: -1,
        system_buffer: false,
        buffer: 0,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: -1,
        actual_length: -1,
        extra_text: Vec::new(),
    }
}
