//! `MPI2DD_breakpoint` events and the debugger's writes to `debugger_flags`: the sans-IO half
//! of event handling, for whatever drives the processes (the acquisition state machine of
//! `mpir-acquire`, a test with a [`Tracer`](mpir_target::live::tracer::Tracer)).
//!
//! A driver that has acquired a job through [`traverse`](crate::traverse::traverse):
//!
//! 1. plants a breakpoint at [`breakpoint_address`] in every process it holds, and sets
//!    [`DebuggerFlags::REQUEST_DIRECTORY_EVENTS`] in directories and metadirectories (and
//!    [`DebuggerFlags::BEING_DEBUGGED`] in the starter) with [`update_debugger_flags`];
//! 2. when a process stops there, reads the [`Event`] with [`read_event`] and asks
//!    [`Event::reaction`] what to do;
//! 3. on [`Reaction::Refresh`], traverses again while the process is still stopped and
//!    attaches to the new processes [`Job::delta`](crate::job::Job::delta) lists, then makes
//!    the process return from `MPI2DD_breakpoint` and continue;
//! 4. on detach, leaves the flags it set (the draft asks the debugger to write them) and
//!    restores every byte it planted.

use mpir_target::{Memory, SymbolLookup};
use mpir_types::ViewMut;

use crate::abi::BREAKPOINT_SYMBOL;
use crate::error::{Error, Result};
use crate::flags::{DebugState, DebuggerFlags};
use crate::read::{read_abort_string, read_info_at};

/// The address of `MPI2DD_breakpoint`, or [`Error::NotProvided`].
pub fn breakpoint_address<S: SymbolLookup + ?Sized>(target: &S) -> Result<u64> {
    Ok(target
        .symbol(BREAKPOINT_SYMBOL)?
        .ok_or(Error::NotProvided)?
        .address)
}

/// Why a process called `MPI2DD_breakpoint`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Event {
    /// `debug_state` at the call.
    pub state: DebugState,
    /// For [`DebugState::Abort`]: `abort_string`, when set and readable.
    pub abort_message: Option<String>,
}

/// What a tool should do about an [`Event`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reaction {
    /// The job's processes may have changed: traverse again, attach to what is new, continue.
    Refresh,
    /// The job is aborting: show the message, then continue (the job will end).
    Abort {
        /// `abort_string`, if any.
        message: Option<String>,
    },
    /// A `debug_state` the draft does not define: report it and continue.
    Unknown(u8),
}

impl Event {
    /// An event of `state`, with the abort message when there is one.
    pub fn new(state: DebugState, abort_message: Option<String>) -> Self {
        Event {
            state,
            abort_message,
        }
    }

    /// What to do about this event.
    pub fn reaction(&self) -> Reaction {
        match self.state {
            DebugState::Abort => Reaction::Abort {
                message: self.abort_message.clone(),
            },
            DebugState::Unknown(v) => Reaction::Unknown(v),
            _ => Reaction::Refresh,
        }
    }
}

/// Reads the event of a process stopped in `MPI2DD_breakpoint` (its `MPI2DD_info` at
/// `info_address`). An unreadable abort string leaves `abort_message` empty.
pub fn read_event<M: Memory + ?Sized>(
    memory: &M,
    info_address: u64,
    max_string: u64,
) -> Result<Event> {
    let info = read_info_at(memory, info_address)?;
    let abort_message = if info.debug_state == DebugState::Abort {
        read_abort_string(memory, &info, max_string).ok().flatten()
    } else {
        None
    };
    Ok(Event {
        state: info.debug_state,
        abort_message,
    })
}

/// Sets the bits of `set` and clears those of `clear` in `debugger_flags` of the
/// `MPI2DD_info` at `info_address`, and returns the previous flags.
///
/// The structure is validated (magic, version, variant) before anything is written, and only
/// the four bytes of `debugger_flags` are written; bits the debugger does not name (including
/// undefined ones) are kept. Nothing is written when the flags already have the wanted value.
pub fn update_debugger_flags<M: Memory + ?Sized>(
    memory: &M,
    info_address: u64,
    set: DebuggerFlags,
    clear: DebuggerFlags,
) -> Result<DebuggerFlags> {
    let info = read_info_at(memory, info_address)?;
    let old = info.debugger_flags;
    let new = old.difference(clear).union(set);
    if new == old {
        return Ok(old);
    }
    let model = memory.data_model();
    let offset = crate::abi_offset!(model, Info.debugger_flags);
    let address = info_address.checked_add(offset).ok_or_else(|| {
        mpir_types::DecodeError::AddressOverflow {
            what: "MPI2DD_INFO.debugger_flags".into(),
            base: info_address,
            offset,
        }
    })?;
    let mut buf = [0u8; 4];
    ViewMut::new(model, address, &mut buf).put_uint(
        0,
        4,
        new.bits().into(),
        "MPI2DD_INFO.debugger_flags",
    )?;
    memory.write(address, &buf)?;
    Ok(old)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mock::MockProcess;
    use mpir_target::MockTarget;
    use mpir_types::DataModel;

    #[test]
    fn flag_updates_write_only_the_flag_word_in_the_targets_order() {
        for model in [DataModel::LP64, DataModel::ILP32_BE] {
            let mut p = MockProcess::directory("m", 1);
            p.debugger_flags = DebuggerFlags::from_bits_retain(0x100); // not ours: kept
            let mut b = MockTarget::builder(model);
            let placed = p.place(&mut b);
            let t = b.build();
            let old = update_debugger_flags(
                &t,
                placed.info,
                DebuggerFlags::REQUEST_DIRECTORY_EVENTS | DebuggerFlags::GATE,
                DebuggerFlags::EMPTY,
            )
            .unwrap();
            assert_eq!(old.bits(), 0x100);
            let w = t.writes();
            assert_eq!(w.len(), 1);
            assert_eq!(w[0].address, placed.info + 8);
            let expected: [u8; 4] = if model == DataModel::LP64 {
                0x105u32.to_le_bytes()
            } else {
                0x105u32.to_be_bytes()
            };
            assert_eq!(w[0].bytes, expected);
            // Clearing GATE again; setting what is set writes nothing.
            update_debugger_flags(&t, placed.info, DebuggerFlags::EMPTY, DebuggerFlags::GATE)
                .unwrap();
            update_debugger_flags(
                &t,
                placed.info,
                DebuggerFlags::REQUEST_DIRECTORY_EVENTS,
                DebuggerFlags::EMPTY,
            )
            .unwrap();
            assert_eq!(t.writes().len(), 2);
            assert_eq!(
                crate::read::read_info_at(&t, placed.info)
                    .unwrap()
                    .debugger_flags
                    .bits(),
                0x104
            );
        }
    }

    #[test]
    fn nothing_is_written_into_a_structure_with_a_bad_magic() {
        let mut b = MockTarget::builder(DataModel::LP64);
        let placed = MockProcess::rank("m", 1).place(&mut b);
        b.write_with(placed.info, 1, |w| w.put_bytes(0, b"X", "magic"));
        let t = b.build();
        let e = update_debugger_flags(&t, placed.info, DebuggerFlags::GATE, DebuggerFlags::EMPTY)
            .unwrap_err();
        assert!(matches!(e, Error::BadMagic { .. }), "{e:?}");
        assert!(t.writes().is_empty());
    }

    #[test]
    fn abort_events_carry_their_message() {
        let mut p = MockProcess::rank("m", 1);
        p.debug_state = DebugState::Abort;
        p.abort = Some("out of memory on rank 7".into());
        let mut b = MockTarget::builder(DataModel::ILP32);
        let placed = p.place(&mut b);
        let t = b.build();
        let ev = read_event(&t, placed.info, 4096).unwrap();
        assert_eq!(
            ev.reaction(),
            Reaction::Abort {
                message: Some("out of memory on rank 7".into())
            }
        );
        assert_eq!(breakpoint_address(&t).unwrap(), placed.breakpoint);
        let spawn = Event {
            state: DebugState::Spawn,
            abort_message: None,
        };
        assert_eq!(spawn.reaction(), Reaction::Refresh);
        let odd = Event {
            state: DebugState::Unknown(42),
            abort_message: None,
        };
        assert_eq!(odd.reaction(), Reaction::Unknown(42));
    }
}
