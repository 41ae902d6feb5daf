//! Letting go of an acquired job: gates opened, ranks and starter detached, our writes undone
//! — and the same made certain in advance ("armed") for the ways a tool can go away without
//! releasing (a signal, a panic, an exit): the tracer makes the writes registered with
//! [`Tracer::write_on_detach`] however it lets go.

use std::collections::HashSet;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::{StopEvent, Tracer};
use mpir_target::{Memory, SymbolLookup};
use mpir_types::mpir::symbols;

use super::{entry_point, open_target};
use crate::error::AcquireError;
use crate::identity::Proven;
use crate::job::Job;
use crate::note::Note;
use crate::options::GateRelease;
use crate::protocol::undo_writes;

/// Whether releasing `job` writes the ranks' `MPIR_debug_gate`.
pub(super) fn writes_gate(gate: GateRelease, job: &Job) -> bool {
    match gate {
        GateRelease::Auto => !job.starter.flags.partial_attach_ok.present,
        GateRelease::Always => true,
        GateRelease::Never => false,
    }
}

/// `MPIR_debug_gate` = 1, encoded for `rank`, and its address; `None` when the rank does not
/// define it.
fn gate_write(rank: &LiveTarget) -> Result<Option<(u64, Vec<u8>)>, AcquireError> {
    let Some(sym) = rank
        .symbol(symbols::DEBUG_GATE)
        .map_err(AcquireError::target("look up MPIR_debug_gate"))?
    else {
        return Ok(None);
    };
    let size = rank.data_model().int_size() as usize;
    let mut one = vec![0u8; size];
    mpir_types::ViewMut::new(rank.data_model(), sym.address, &mut one)
        .put_c_int(0, 1, symbols::DEBUG_GATE)
        .map_err(|e| AcquireError::target("encode MPIR_debug_gate")(e.into()))?;
    Ok(Some((sym.address, one)))
}

/// Runs every attached rank that still runs its parent's program (listed in the table between
/// its fork and its exec) to its own program's entry point, where it is left stopped: a held
/// rank is then in its program (its symbols and its gate are there). Returns a note per rank
/// that could not be (it stays held where it is).
pub(super) fn settle_ranks(tracer: &Tracer, job: &Job, timeout: std::time::Duration) -> Vec<Note> {
    // Proven before its exec, and (checked now that it is stopped: it may have exec'd
    // between the proof and the attach) still in its parent's image.
    job.attached()
        .into_iter()
        .filter(|&(_, pid, proven)| proven == Proven::BeforeExec && still_parents_image(pid))
        .filter_map(|(_, pid, _)| {
            run_to_entry(tracer, pid, timeout)
                .err()
                .map(|error| Note::NotRunToProgram { pid, error })
        })
        .collect()
}

/// Registers `MPIR_debug_gate` = 1 as a write on detach in every attached rank that defines
/// it, so that the gate opens however the tracer lets go of the rank (run
/// [`settle_ranks`] first: a rank not yet exec'd has no gate mapped). Returns the ranks armed;
/// the others are left to [`release`].
pub(super) fn arm_gates(tracer: &Tracer, job: &Job, debug: &DebugOptions) -> HashSet<u32> {
    let arm = |pid: u32| -> Result<bool, AcquireError> {
        match gate_write(&open_target(pid, debug)?)? {
            Some((address, one)) => {
                tracer
                    .write_on_detach(pid, address, &one)
                    .map_err(AcquireError::target("arm MPIR_debug_gate"))?;
                Ok(true)
            }
            None => Ok(false),
        }
    };
    job.attached_pids()
        .into_iter()
        .filter(|&pid| arm(pid).unwrap_or(false))
        .collect()
}

/// Registers `MPIR_being_debugged` = 0 as a write on detach in the starter: set back however
/// the tracer lets go of it.
pub(super) fn arm_being_debugged(
    tracer: &Tracer,
    starter: &LiveTarget,
    pid: u32,
) -> Result<(), AcquireError> {
    let sym = mpir_target::SymbolLookupExt::require_symbol(starter, symbols::BEING_DEBUGGED)
        .map_err(AcquireError::target("look up MPIR_being_debugged"))?;
    let size = starter.data_model().int_size() as usize;
    let mut zero = vec![0u8; size];
    mpir_types::ViewMut::new(starter.data_model(), sym.address, &mut zero)
        .put_c_int(0, 0, symbols::BEING_DEBUGGED)
        .map_err(|e| AcquireError::target("encode MPIR_being_debugged")(e.into()))?;
    tracer
        .write_on_detach(pid, sym.address, &zero)
        .map_err(AcquireError::target("arm the reset of MPIR_being_debugged"))
}

/// What [`release`] needs besides the tracer.
pub(super) struct Release<'a> {
    pub(super) starter: &'a LiveTarget,
    pub(super) job: &'a Job,
    pub(super) debug: &'a DebugOptions,
    pub(super) gate: GateRelease,
    pub(super) timeout: std::time::Duration,
    /// Ranks whose gate opens on detach already ([`arm_gates`]).
    pub(super) armed: &'a HashSet<u32>,
}

/// Gate, detach the ranks, undo our writes, detach the starter.
pub(super) fn release(tracer: &Tracer, r: &Release<'_>) -> Result<Vec<Note>, AcquireError> {
    let mut problems = Vec::new();
    let ranks = r.job.attached_pids();
    if writes_gate(r.gate, r.job) {
        for (_, pid, proven) in r.job.attached() {
            if r.armed.contains(&pid) {
                continue;
            }
            match open_gate(tracer, pid, proven, r.debug, r.timeout) {
                Ok(true) => {}
                Ok(false) => problems.push(Note::NoGate { pid }),
                Err(error) => problems.push(Note::GateFailed { pid, error }),
            }
        }
    }
    if let Ok(results) = tracer.detach_many(&ranks) {
        for (pid, res) in ranks.iter().zip(results) {
            if let Err(error) = res {
                problems.push(Note::DetachFailed { pid: *pid, error });
            }
        }
    }
    let undo = undo_writes(r.starter, &r.job.starter);
    let detached = tracer
        .detach(r.job.starter.pid)
        .map_err(AcquireError::target("detach the starter"));
    undo.and(detached)?;
    Ok(problems)
}

/// Whether `pid` (proven to have been caught before its exec) still runs its parent's image
/// (it may have been run to its program since).
fn still_parents_image(pid: u32) -> bool {
    use mpir_target::live::procfs::{FileId, parent_of};
    let own = FileId::of(std::path::Path::new(&format!("/proc/{pid}/exe")));
    let parent =
        parent_of(pid).and_then(|pp| FileId::of(std::path::Path::new(&format!("/proc/{pp}/exe"))));
    own.is_some() && own == parent
}

/// Waits (bounded) for a stop of `pid` that `want` accepts; events of other processes are not
/// expected here (everything else is stopped) and are passed over.
pub(super) fn wait_for_rank(
    tracer: &Tracer,
    pid: u32,
    timeout: std::time::Duration,
    what: &str,
    want: impl Fn(&StopEvent) -> bool,
) -> Result<(), AcquireError> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match tracer
            .wait(left)
            .map_err(AcquireError::target(format!("wait for rank {pid}")))?
        {
            Some(ev) if ev.pid() == pid && want(&ev) => return Ok(()),
            Some(ev) if ev.pid() == pid && ev.is_end() => {
                return Err(AcquireError::Usage(format!(
                    "rank {pid} ended while waiting for {what}: {ev:?}"
                )));
            }
            Some(_) => {}
            None => {
                return Err(AcquireError::Timeout {
                    pid,
                    waiting_for: what.into(),
                    after: timeout,
                });
            }
        }
    }
}

/// Lets rank `pid` (attached, stopped, not yet exec'd) exec its program and run to its entry
/// point, where its libraries (and so `MPIR_debug_gate`) are mapped; it is left stopped there.
fn run_to_entry(
    tracer: &Tracer,
    pid: u32,
    timeout: std::time::Duration,
) -> Result<(), AcquireError> {
    tracer
        .resume(pid)
        .map_err(AcquireError::target("let a rank exec"))?;
    wait_for_rank(tracer, pid, timeout, "its exec", |ev| {
        matches!(ev, StopEvent::Exec { .. })
    })?;
    let entry = entry_point(pid)?;
    run_to_breakpoint(tracer, pid, entry, timeout, "a rank", || Ok(()))
}

/// Runs attached, stopped process `pid` (`what`: "a rank", "a task", in errors) to link address
/// `entry` of its program: a breakpoint planted there, `before_resume` called, the process
/// resumed and waited for (bounded by `timeout`), the breakpoint removed; it is left stopped
/// there.
pub(super) fn run_to_breakpoint(
    tracer: &Tracer,
    pid: u32,
    entry: u64,
    timeout: std::time::Duration,
    what: &str,
    before_resume: impl FnOnce() -> Result<(), AcquireError>,
) -> Result<(), AcquireError> {
    tracer
        .insert_breakpoint(pid, entry)
        .map_err(AcquireError::target(format!(
            "plant a breakpoint at {what}'s entry point"
        )))?;
    before_resume()?;
    tracer.resume(pid).map_err(AcquireError::target(format!(
        "run {what} to its entry point"
    )))?;
    wait_for_rank(
        tracer,
        pid,
        timeout,
        "its entry point",
        |ev| matches!(ev, StopEvent::Breakpoint { address, .. } if *address == entry),
    )?;
    tracer
        .remove_breakpoint(pid, entry)
        .map_err(AcquireError::target(format!(
            "remove {what}'s entry breakpoint"
        )))
}

/// Opens the gate of rank `pid` (attached): a rank proven to be caught between fork and exec
/// (and not since run to its program: see [`settle_ranks`]) is first run to its program's
/// entry point. Says whether the rank defines `MPIR_debug_gate`.
pub(super) fn open_gate(
    tracer: &Tracer,
    pid: u32,
    proven: Proven,
    debug: &DebugOptions,
    timeout: std::time::Duration,
) -> Result<bool, AcquireError> {
    if release_gate(tracer, pid, debug)? {
        return Ok(true);
    }
    // Still its parent's image: run it to its own program (bounded by `timeout`).
    if proven != Proven::BeforeExec || !still_parents_image(pid) {
        return Ok(false);
    }
    run_to_entry(tracer, pid, timeout)?;
    release_gate(tracer, pid, debug)
}

/// Writes `MPIR_debug_gate` = 1 in rank `pid` (attached), if the rank defines it; says whether
/// it did.
fn release_gate(tracer: &Tracer, pid: u32, debug: &DebugOptions) -> Result<bool, AcquireError> {
    let rank = open_target(pid, debug)?;
    match gate_write(&rank)? {
        Some((address, one)) => {
            tracer
                .write_memory(pid, address, &one)
                .map_err(AcquireError::target("set MPIR_debug_gate"))?;
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Continues `pid`, a rank in a job-control stop, with `SIGCONT` — only while it is the
/// process proven (`start_time`); the note says why (`why`) and whether the signal went.
/// `None` when the process is no longer that one.
pub(crate) fn continue_stopped(pid: u32, start_time: u64, why: &str) -> Option<Note> {
    let same = mpir_target::live::procfs::start_time(pid).is_ok_and(|t| t == start_time);
    if !same {
        return None;
    }
    let sent = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(pid).ok()?),
        nix::sys::signal::Signal::SIGCONT,
    );
    Some(Note::RankContinued {
        pid,
        why: match sent {
            Ok(()) => why.to_string(),
            Err(e) => format!("{why}; SIGCONT failed: {e}"),
        },
    })
}
