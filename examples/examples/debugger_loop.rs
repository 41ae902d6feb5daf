//! A custom debugger that drives MPIR acquisition from its own ptrace loop.
//!
//! ```text
//! cargo run -p mpir-examples --example debugger_loop -- mpiexec -n 4 ./app
//! ```
//!
//! `mpir_acquire::protocol::Acquisition` is the MPIR protocol with no I/O: it says what to do
//! ([`Action`]) and is told what happened ([`Event`]). Here the debugger does the I/O itself
//! with its own process control (`mpir_target`'s `Tracer`, but any ptrace layer would do):
//! it launches the starter stopped, plants the breakpoints the protocol asks for, lets the
//! starter run and reports its stops, and attaches the ranks — only those it has checked
//! itself to be the job's processes — then opens their `MPIR_debug_gate`, lets everything go
//! and waits for the job. It prints `job: N ranks`, a line per rank, and `job ended: STATUS`.
//!
//! A real debugger would keep the ranks stopped to show them; `mpir_acquire::live` is the
//! ready-made driver of the same protocol, with the full proof of identity.

use std::process::Command;
use std::time::{Duration, Instant};

use mpir_acquire::protocol::{Acquisition, Action, Event, Mode, undo_writes};
use mpir_acquire::{AcquireOptions, AttachOutcome, RankControl, Refusal};
use mpir_target::live::LiveTarget;
use mpir_target::live::procfs::{self, ProcessFacts};
use mpir_target::live::tracer::{StopEvent, Tracer};
use mpir_target::{Memory, SymbolLookup};

type Error = Box<dyn std::error::Error>;

const TIMEOUT: Duration = Duration::from_secs(30);

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (program, rest) = args
        .split_first()
        .ok_or("usage: debugger_loop STARTER ARGS…")?;
    // Our own debugger lets go of its processes if it is interrupted.
    mpir_target::live::tracer::detach_on_signals()?;

    let tracer = Tracer::new()?;
    let mut command = Command::new(program);
    command.args(rest);
    let mut child = tracer.launch(command)?; // stopped after its exec
    let pid = child.id();
    let mut target = LiveTarget::open(pid, Default::default())?;
    let mut acq = Acquisition::new(
        pid,
        Mode::Launch,
        AcquireOptions::default()
            .with_timeout(TIMEOUT)
            .with_this_node(mpir_target::live::node::this_node()),
    );
    acq.handle(
        &target,
        Event::Exec {
            entry: procfs::entry_point(pid)?,
        },
    );
    let job = loop {
        let Some(action) = acq.poll_action() else {
            return Err("the protocol stalled".into());
        };
        match action {
            Action::InsertBreakpoint { address } => tracer.insert_breakpoint(pid, address)?,
            Action::RemoveBreakpoint { address } => tracer.remove_breakpoint(pid, address)?,
            Action::ReturnFromCall { tid } => tracer.return_from_call(pid, tid)?,
            Action::Continue => {
                tracer.resume(pid)?;
                let event = next_event(&tracer, pid, &mut target)?;
                if !matches!(event, Event::Ended { .. } | Event::Timeout) {
                    tracer.stop_all(pid)?;
                }
                acq.handle(&target, event);
            }
            Action::AttachRanks(ranks) => {
                let executables: Vec<Option<String>> = ranks
                    .iter()
                    .map(|&(rank, _)| {
                        let table = acq.table()?;
                        let entry = table.resolved.rank(usize::try_from(rank).ok()?)?;
                        entry.executable.map(str::to_string)
                    })
                    .collect();
                let outcome = attach_checked(&tracer, pid, &ranks, &executables)?;
                acq.handle(&target, Event::RanksAttached(outcome));
            }
            Action::WriteAttachFifo { path } => {
                return Err(format!("this debugger does not do attach FIFOs ({path})").into());
            }
            Action::Finished => break acq.take_job().ok_or("finished without a job")?,
            Action::Failed(e) => {
                let _ = tracer.detach_all();
                return Err(e.into());
            }
            other => return Err(format!("unknown action {other:?}").into()),
        }
    };

    println!("job: {} ranks", job.len());
    for r in job.ranks() {
        let control = match job.control(r.rank) {
            RankControl::Attached { .. } => "attached".to_string(),
            RankControl::Refused { reason } => format!("refused: {reason}"),
            RankControl::Remote => "remote".to_string(),
            other => format!("{other:?}"),
        };
        println!("rank {} pid {} {control}", r.rank, r.pid);
    }
    // The job waits for us at MPIR_debug_gate (no MPIR_partial_attach_ok): open it in every
    // rank we hold, then let everything go.
    for (rank, rank_pid, _) in job.attached() {
        let rank_target = LiveTarget::open(rank_pid, Default::default())?;
        if let Some(gate) = rank_target.symbol("MPIR_debug_gate")? {
            let model = rank_target.data_model();
            let mut one = vec![0u8; model.int_size() as usize];
            mpir_types::ViewMut::new(model, gate.address, &mut one).put_c_int(
                0,
                1,
                "MPIR_debug_gate",
            )?;
            tracer.write_memory(rank_pid, gate.address, &one)?;
            println!("rank {rank}: gate opened");
        }
    }
    tracer.detach_many(&job.attached_pids())?;
    undo_writes(&target, &job.starter)?; // MPIR_being_debugged back to 0
    tracer.detach(pid)?; // breakpoints out, running
    drop(tracer);
    let status = child.wait()?;
    println!("job ended: {status}");
    Ok(())
}

/// Waits for the starter's next stop and turns it into the protocol's [`Event`].
fn next_event(tracer: &Tracer, pid: u32, target: &mut LiveTarget) -> Result<Event, Error> {
    let deadline = Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Some(stop) = tracer.wait(left)? else {
            return Ok(Event::Timeout);
        };
        if stop.pid() != pid {
            continue; // nothing else is traced before the ranks are attached
        }
        return Ok(match stop {
            StopEvent::Breakpoint { tid, address, .. } => {
                target.refresh()?; // libraries loaded since: look again
                Event::Breakpoint { tid, address }
            }
            StopEvent::Exec { .. } => {
                *target = LiveTarget::open(pid, Default::default())?;
                Event::Exec {
                    entry: procfs::entry_point(pid)?,
                }
            }
            StopEvent::Exited { status, .. } => Event::Ended {
                how: format!("exited with status {status}"),
            },
            StopEvent::Killed { signal, .. } => Event::Ended {
                how: format!("was killed by signal {signal}"),
            },
            _ => Event::Ended {
                how: "disappeared".into(),
            },
        });
    }
}

/// This debugger's own check that a pid is the job's rank before it touches it: a descendant
/// of the starter, of the starter's user, started after it, running the reported program
/// (waited for, briefly, when it is still between its fork and its exec). Then attached, and
/// its start time checked again (a pid reused in between is let go).
fn attach_checked(
    tracer: &Tracer,
    starter: u32,
    ranks: &[(u64, u32)],
    executables: &[Option<String>],
) -> Result<Vec<AttachOutcome>, Error> {
    let starter_facts = ProcessFacts::read(starter)?;
    let mut out = Vec::new();
    let mut checked = Vec::new();
    for (&(rank, pid), exe) in ranks.iter().zip(executables) {
        match check(&starter_facts, pid, exe.as_deref()) {
            Ok(start) => checked.push((rank, pid, start)),
            Err(reason) => out.push(AttachOutcome::refused(rank, reason)),
        }
    }
    let pids: Vec<u32> = checked.iter().map(|&(_, pid, _)| pid).collect();
    for ((rank, pid, start), result) in checked.into_iter().zip(tracer.attach_many(&pids)?) {
        let control = match result {
            Ok(_) if procfs::start_time(pid).ok() != Some(start) => {
                let _ = tracer.detach(pid);
                RankControl::Refused {
                    reason: Refusal::Reused { pid },
                }
            }
            Ok(threads) => RankControl::Attached {
                threads,
                proven: mpir_acquire::Proven::InProgram,
            },
            Err(error) => RankControl::Failed { error },
        };
        out.push(AttachOutcome::new(rank, control));
    }
    Ok(out)
}

/// The start time of `pid` once it is shown to be the starter's rank running `exe`.
fn check(starter: &ProcessFacts, pid: u32, exe: Option<&str>) -> Result<u64, Refusal> {
    let no = |reason: String| Refusal::NoProcess { reason };
    let wanted = exe
        .and_then(|e| std::path::Path::new(e).file_name())
        .ok_or_else(|| no(format!("pid {pid}: no executable reported")))?
        .to_owned();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let facts = ProcessFacts::read(pid).map_err(|e| no(e.to_string()))?;
        if facts.uid != starter.uid {
            return Err(Refusal::OtherUser {
                pid,
                uid: facts.uid,
                starter_uid: starter.uid,
            });
        }
        if facts.start_time < starter.start_time {
            return Err(Refusal::StartedBefore {
                pid,
                start_time: facts.start_time,
                starter_start_time: starter.start_time,
            });
        }
        if !descends_from(pid, starter.pid) {
            return Err(no(format!("pid {pid} is not a descendant of the starter")));
        }
        let runs = facts.exe.as_ref().and_then(|p| p.file_name());
        if runs == Some(wanted.as_os_str()) {
            return Ok(facts.start_time);
        }
        if Instant::now() > deadline {
            return Err(Refusal::OtherProgram {
                pid,
                runs: facts.exe.map_or("?".into(), |p| p.display().to_string()),
                reported: wanted.to_string_lossy().into_owned(),
            });
        }
        // Forked, not exec'd yet: it runs on (we have not touched it); look again.
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn descends_from(mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..64 {
        match procfs::parent_of(pid) {
            Some(p) if p == ancestor => return true,
            Some(p) if p > 1 => pid = p,
            _ => return false,
        }
    }
    false
}
