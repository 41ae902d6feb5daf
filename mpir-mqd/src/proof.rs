//! The proof a queue reader gives, for each rank before its queues count, that it reads where
//! that rank keeps its pending operations — one place for both engines ([`crate::QueueReader`]
//! runs it on the rank before walking it natively or attaching the DLL).
//!
//! Without it an empty result is ambiguous: Open MPI's ob1 structures exist in every Open MPI
//! process and stay empty when another PML (UCX, cm) carries the traffic, so an ob1 reader
//! would report "nothing pending" for ranks that all wait (a false all-clear). Each check is
//! decided from what the rank itself holds (symbols and memory, no debug information needed)
//! and costs one or two small reads.
//!
//! # Open MPI: the selected PML is ob1
//!
//! `mca_pml_base_select` (ompi/mca/pml/base/pml_base_select.c, 4.1 and 5.0 alike) copies the
//! selected module into the global `mca_pml` (`mca_pml = *best_module`) and unloads the PML
//! components it did not select. ob1's module is the global `mca_pml_ob1`, whose first member is
//! a statically initialised `mca_pml_base_module_t`: `pml_add_procs`, `pml_del_procs`,
//! `pml_enable`, `pml_progress` (NULL for ob1), `pml_add_comm`, ... (ompi/mca/pml/ob1/pml_ob1.c).
//! So ob1 is selected exactly when `mca_pml`'s first words equal `mca_pml_ob1`'s, the first
//! (`pml_add_procs`) not NULL. When `mca_pml_ob1` does not exist, ob1 was unloaded (or never
//! built): not selected. Checked with gdb on Open MPI 4.1.4: under the default PML the first 22
//! words of both are equal (word 3, `pml_progress`, is 0); under `--mca pml ucx` `mca_pml`
//! holds `mca_pml_ucx_add_procs`, ... and `mca_pml_ob1` is not in the process.
//!
//! A PML that wraps the selected one (`monitoring`, `v` with a protocol) puts its own functions
//! in `mca_pml`: the rank is refused although ob1 may run below — a refusal, never a false
//! all-clear.
//!
//! # MPICH: the device keeps its operations in the queues read
//!
//! MPICH carries its device as a string, `MPII_Version_device` (src/mpi/init/initinfo.c, every
//! 4.x; `ch3:nemesis`, `ch4:ucx`, `ch4:ofi`).
//!
//! - ch3 keeps every posted receive and unexpected message in its own queues
//!   (`MPID_Recvq_posted_head_ptr`, `MPID_Recvq_unexpected_head_ptr`), which the ch3 walker
//!   reads, and records every send, posted receive and unexpected message in the debugger queues
//!   (`MPII_*Q_REMEMBER` in mpid_isend.c, mpid_irecv.c, ch3u_recvq.c).
//! - ch4 (MPICH ≥ 4.1) records sends and posted receives in the debugger queues above its netmod
//!   (`MPID_Isend`, `MPID_Irecv` in ch4_send.h, ch4_recv.h: every netmod), but unexpected
//!   messages only where ch4 itself matches them (its active-message path,
//!   mpidig_pt2pt_callbacks.c, and self messages, ch4_self.c); a netmod that matches in UCX or
//!   libfabric keeps its unexpected messages to itself. So under ch4 the debug-queue reader's
//!   sends and receives count, and its unexpected queues are reported as not known.
//! - The ch3 walker on a device that is not ch3, or any MPICH reader on a device this tool knows
//!   nothing of, is refused.
//! - A process without `MPII_Version_device`: the ch3 walker's queue symbols are defined only by
//!   ch3 (src/mpid/ch3/src/ch3u_recvq.c), so their presence is the fact; the debug-queue reader's
//!   sends and receives are recorded by both devices, and its unexpected queues are reported as
//!   not known.
//!
//! # Other MPIs
//!
//! A process with neither Open MPI's `mca_pml` nor MPICH's `MPIR_All_communicators`, read by the
//! DLL it names, is an MPI this tool has no fact about: the MPI's own reader's word is taken.

use mpir_target::{Symbol, Target};

use crate::error::{BlindReason, MqdError, Result};
use crate::model::{Queue, RankQueues, ReadNote};
use crate::native::WalkerKind;

/// A refusal's reason, boxed (it may carry a target error).
type Why<T> = std::result::Result<T, Box<BlindReason>>;

/// `mca_pml_base_module_t` words compared (on LP64: 64 bytes, 8 function pointers).
const PML_WORDS: u64 = 8;
/// Words that must exist to compare: `pml_add_procs`, `pml_del_procs`, `pml_enable`.
const PML_MIN_WORDS: u64 = 3;
/// Longest device string read (MPICH's are a few bytes: `ch4:ucx`).
const DEVICE_MAX: u64 = 64;

/// Where a reader reads a rank's pending operations: what the rank must be shown to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ReadPath {
    /// Open MPI's PML ob1 (the ob1 walker; Open MPI's DLL, which reads ob1's requests).
    OpenMpiOb1,
    /// MPICH ch3's own receive queues (the ch3 walker).
    MpichCh3,
    /// MPICH's debugger queues (the debug-queue walker, MPICH's DLL).
    MpichDebugq,
    /// An MPI this tool has no fact about, read by its own DLL.
    OwnDll,
}

/// What a proven reader sees of the rank: everything, or all but the unexpected messages.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub(crate) struct Sight {
    /// Why the unexpected queues cannot be trusted, when they cannot.
    unexpected_unseen: Option<String>,
}

impl ReadPath {
    /// The path a native walker of `kind` reads.
    pub(crate) fn of_walker(kind: WalkerKind) -> ReadPath {
        match kind {
            WalkerKind::OpenMpiOb1 => ReadPath::OpenMpiOb1,
            WalkerKind::MpichCh3 => ReadPath::MpichCh3,
            WalkerKind::MpichDebugq => ReadPath::MpichDebugq,
        }
    }

    /// The path the MPI's DLL reads in processes like `probe`, from the MPI's symbols there.
    pub(crate) fn of_dll(probe: &dyn Target) -> Result<ReadPath> {
        let has = |name: &str| -> Result<bool> {
            probe
                .symbol(name)
                .map(|s| s.is_some())
                .map_err(|error| MqdError::Blind {
                    reader: "MPI's message-queue DLL".into(),
                    why: Box::new(BlindReason::Lookup {
                        symbol: name.into(),
                        what: "MPI",
                        error,
                    }),
                })
        };
        Ok(if has("mca_pml")? {
            ReadPath::OpenMpiOb1
        } else if has("MPIR_Recvq_head")? {
            ReadPath::MpichDebugq
        } else if has("MPIR_All_communicators")? {
            ReadPath::MpichCh3
        } else {
            ReadPath::OwnDll
        })
    }

    /// Shows that `target` (one rank) keeps its pending operations where this path leads;
    /// [`MqdError::Blind`] naming `reader` otherwise.
    pub(crate) fn prove(self, target: &dyn Target, reader: &str) -> Result<Sight> {
        let blind = |why: Box<BlindReason>| MqdError::Blind {
            reader: reader.into(),
            why,
        };
        let all = Sight {
            unexpected_unseen: None,
        };
        match self {
            ReadPath::OpenMpiOb1 => prove_ob1(target).map(|()| all).map_err(blind),
            ReadPath::MpichCh3 => match device(target).map_err(blind)? {
                None => Ok(all),
                Some(d) if d.starts_with("ch3") => Ok(all),
                Some(device) => Err(blind(Box::new(BlindReason::Device {
                    device,
                    why: "the ch3 walker reads ch3's receive queues, which this device does \
                          not keep",
                }))),
            },
            ReadPath::MpichDebugq => match device(target).map_err(blind)? {
                Some(d) if d.starts_with("ch3") => Ok(all),
                Some(d) if d.starts_with("ch4") => Ok(Sight {
                    unexpected_unseen: Some(format!(
                        "unexpected messages: the {d} device records in MPIR_Unexpq_head only \
                         those it matches itself (active messages, self); its netmod keeps \
                         the others"
                    )),
                }),
                Some(device) => Err(blind(Box::new(BlindReason::Device {
                    device,
                    why: "a device this tool knows nothing of: whether its operations reach \
                          MPICH's debugger queues cannot be told",
                }))),
                None => Ok(Sight {
                    unexpected_unseen: Some(
                        "unexpected messages: the process does not say its MPICH device \
                         (no MPII_Version_device), and only ch3 records all of them"
                            .into(),
                    ),
                }),
            },
            ReadPath::OwnDll => Ok(all),
        }
    }
}

impl Sight {
    /// `queues` as far as the reader sees: unexpected queues it cannot trust become
    /// [`Queue::NoInformation`], with a note saying why.
    pub(crate) fn apply(self, queues: &mut RankQueues) {
        if let Some(what) = self.unexpected_unseen {
            for c in &mut queues.communicators {
                c.unexpected = Queue::NoInformation;
            }
            queues.notes.push(ReadNote::NotRead { what });
        }
    }
}

fn lookup(target: &dyn Target, symbol: &str, what: &'static str) -> Why<Option<Symbol>> {
    target.symbol(symbol).map_err(|error| {
        Box::new(BlindReason::Lookup {
            symbol: symbol.into(),
            what,
            error,
        })
    })
}

/// The first words of `mca_pml_base_module_t` at `sym` (fewer when its symbol is smaller).
fn module_words(target: &dyn Target, sym: &Symbol, pointer: u64) -> Why<Vec<u8>> {
    let words = match sym.size {
        0 => PML_WORDS,
        size => (size / pointer).min(PML_WORDS),
    };
    if words < PML_MIN_WORDS {
        return Err(Box::new(BlindReason::TooSmall {
            symbol: sym.name.clone(),
            size: sym.size,
        }));
    }
    let mut buf = vec![0u8; usize::try_from(words * pointer).unwrap_or(0)];
    target.read_exact(sym.address, &mut buf).map_err(|error| {
        Box::new(BlindReason::Unreadable {
            symbol: sym.name.clone(),
            what: "PML",
            address: sym.address,
            error,
        })
    })?;
    Ok(buf)
}

/// Open MPI: whether the module in `mca_pml` is ob1's `mca_pml_ob1` (see the module docs).
fn prove_ob1(target: &dyn Target) -> Why<()> {
    let pointer = target.data_model().pointer_size();
    let pml = lookup(target, "mca_pml", "PML")?.ok_or_else(|| {
        Box::new(BlindReason::NoSymbol {
            symbol: "mca_pml".into(),
            what: "PML",
        })
    })?;
    let selected = module_words(target, &pml, pointer)?;
    let first = usize::try_from(pointer).unwrap_or(usize::MAX);
    if selected.iter().take(first).all(|&b| b == 0) {
        return Err(Box::new(BlindReason::NoPmlSelected));
    }
    let ob1 =
        lookup(target, "mca_pml_ob1", "PML")?.ok_or_else(|| Box::new(BlindReason::Ob1NotLoaded))?;
    let ob1 = module_words(target, &ob1, pointer)?;
    let n = selected.len().min(ob1.len());
    if selected.get(..n) == ob1.get(..n) {
        Ok(())
    } else {
        Err(Box::new(BlindReason::NotOb1))
    }
}

/// MPICH's device string (`MPII_Version_device`), `None` when the process has none.
fn device(target: &dyn Target) -> Why<Option<String>> {
    let Some(sym) = lookup(target, "MPII_Version_device", "device")? else {
        return Ok(None);
    };
    let len = match sym.size {
        0 => DEVICE_MAX,
        size => size.min(DEVICE_MAX),
    };
    let mut buf = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let n = target
        .read_partial(sym.address, &mut buf)
        .map_err(|error| {
            Box::new(BlindReason::Unreadable {
                symbol: sym.name.clone(),
                what: "device",
                address: sym.address,
                error,
            })
        })?;
    let text = buf.get(..n).unwrap_or_default();
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    Ok(Some(
        String::from_utf8_lossy(text.get(..end).unwrap_or_default()).into_owned(),
    ))
}
