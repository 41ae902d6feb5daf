//! What acquisition tells a tool besides the job: quirks met, fallbacks taken, events ignored,
//! per-rank trouble while releasing. Each kind of fact is a [`Note`] variant with its data;
//! [`Display`](std::fmt::Display) gives the sentence a user reads, and [`Note::kind`] a stable
//! name a tool can match or put in a document.

use std::fmt;

use mpir_target::TargetError;
use mpir_types::mpir::symbols;

use crate::error::AcquireError;
use crate::quirks::QuirkFact;

/// One fact about an acquisition or a release worth telling the user.
///
/// With the `serde` feature it serializes as `{"kind": …, "text": …}`: [`Note::kind`] and the
/// [`Display`](std::fmt::Display) text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Note {
    /// Launch mode: the first program had no `MPIR_Breakpoint` at its entry point (a wrapper
    /// such as `sh -c 'exec mpiexec …'`); acquisition waited for it to exec a starter.
    WaitedForExec,
    /// A fact about the identified launcher ([`crate::quirks`]).
    Quirk(QuirkFact),
    /// The starter defines no `MPIR_being_debugged`: it cannot know a tool is present.
    NoBeingDebugged,
    /// A tool daemon array (`MPIR_executable_path`, `MPIR_server_arguments`) has no size in
    /// the symbol table; the spec's size was assumed.
    UnsizedArray {
        /// The symbol.
        symbol: &'static str,
        /// The size assumed, in bytes.
        assumed: u64,
    },
    /// An optional tool daemon ([`crate::ToolDaemon::if_supported`]) was not asked for: the
    /// starter defines no `symbol`, so it does not support the extension.
    ToolDaemonUnsupported {
        /// The missing array.
        symbol: &'static str,
    },
    /// Attach FIFO extension: byte 1 is written into `path` after setting
    /// `MPIR_being_debugged`.
    AttachFifoWritten {
        /// The FIFO, as the starter names it.
        path: String,
    },
    /// `MPIR_attach_fifo` is defined but could not be read (the FIFO was not written).
    AttachFifoUnreadable {
        /// Why.
        error: TargetError,
    },
    /// A spawn event came with `MPIR_proctable_size` = 0; acquisition waited for another.
    EmptySpawn,
    /// An MPIR event with a `MPIR_debug_state` the spec does not define was ignored.
    UnknownEventState {
        /// The value.
        state: i64,
    },
    /// `MPIR_debug_state` could not be read (when the table was read).
    DebugStateUnreadable {
        /// Why.
        error: TargetError,
    },
    /// `MPIR_debug_state` holds a value the spec does not define (when the table was read).
    UndefinedDebugState {
        /// The value.
        value: i64,
    },
    /// `MPIR_partial_attach_ok` is not defined: every rank is attached, to release its
    /// `MPIR_debug_gate` (MPIR 1.1 §8 step 18), whatever the selection.
    AllRanksForGate,
    /// `MPIR_partial_attach_ok` is not defined, but the job was spawned before this tool
    /// attached: its ranks' `MPIR_debug_gate` is left alone.
    GateLeftAlone,
    /// The table lists the starter itself as a rank; it is not attached a second time.
    RankIsStarter {
        /// The rank.
        rank: u64,
        /// The starter's pid.
        pid: u32,
    },
    /// A rank held before its exec could not be run to its program (it stays held where it
    /// is).
    NotRunToProgram {
        /// The rank's pid.
        pid: u32,
        /// Why.
        error: AcquireError,
    },
    /// Hand-over: a rank could not be detached left stopped.
    HandOverFailed {
        /// The rank's pid.
        pid: u32,
        /// Why.
        error: TargetError,
    },
    /// Release: a rank whose gate was to be opened defines no `MPIR_debug_gate`.
    NoGate {
        /// The rank's pid.
        pid: u32,
    },
    /// Release: a rank's `MPIR_debug_gate` could not be written.
    GateFailed {
        /// The rank's pid.
        pid: u32,
        /// Why.
        error: AcquireError,
    },
    /// The starter has no MPIR symbols: its table was found by a validated search of its
    /// memory (the evidence), and nothing is written into it (no breakpoint, no
    /// `MPIR_being_debugged`).
    TableDiscovered {
        /// Where the table and its size were found.
        evidence: mpir_types::mpir::discover::Discovered,
    },
    /// Release: a rank could not be detached.
    DetachFailed {
        /// The rank's pid.
        pid: u32,
        /// Why.
        error: TargetError,
    },
    /// The starter's job or step id variable ([`crate::LAUNCHER_JOB_ID`],
    /// [`crate::LAUNCHER_STEP_ID`]) is defined but holds no usable id.
    LauncherIdUnusable {
        /// The variable.
        symbol: &'static str,
        /// Why (what it holds).
        reason: String,
    },
    /// Release (a launcher whose `MPIR_Breakpoint` wakes the ranks, Slurm's `srun`): a rank
    /// was still in the launcher's job-control stop after the starter was let go (the
    /// starter had ended, or its wake-up did not come in time), and was continued with
    /// `SIGCONT`, as the launcher's wake-up does.
    RankContinued {
        /// The rank's pid.
        pid: u32,
        /// Why the launcher did not.
        why: String,
    },
}

impl Note {
    /// A stable name of the kind of note (`snake_case`, one per variant), for tools and
    /// documents.
    pub fn kind(&self) -> &'static str {
        match self {
            Note::WaitedForExec => "waited_for_exec",
            Note::Quirk(_) => "launcher_quirk",
            Note::NoBeingDebugged => "no_being_debugged",
            Note::UnsizedArray { .. } => "unsized_array",
            Note::ToolDaemonUnsupported { .. } => "tool_daemon_unsupported",
            Note::AttachFifoWritten { .. } => "attach_fifo_written",
            Note::AttachFifoUnreadable { .. } => "attach_fifo_unreadable",
            Note::EmptySpawn => "empty_spawn",
            Note::UnknownEventState { .. } => "unknown_event_state",
            Note::DebugStateUnreadable { .. } => "debug_state_unreadable",
            Note::UndefinedDebugState { .. } => "undefined_debug_state",
            Note::AllRanksForGate => "all_ranks_for_gate",
            Note::GateLeftAlone => "gate_left_alone",
            Note::RankIsStarter { .. } => "rank_is_starter",
            Note::NotRunToProgram { .. } => "not_run_to_program",
            Note::HandOverFailed { .. } => "hand_over_failed",
            Note::NoGate { .. } => "no_gate",
            Note::GateFailed { .. } => "gate_failed",
            Note::DetachFailed { .. } => "detach_failed",
            Note::TableDiscovered { .. } => "table_discovered",
            Note::LauncherIdUnusable { .. } => "launcher_id_unusable",
            Note::RankContinued { .. } => "rank_continued",
        }
    }

    /// The pid of the process the note is about, for notes about one rank.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Note::RankIsStarter { pid, .. }
            | Note::NotRunToProgram { pid, .. }
            | Note::HandOverFailed { pid, .. }
            | Note::NoGate { pid }
            | Note::GateFailed { pid, .. }
            | Note::DetachFailed { pid, .. }
            | Note::RankContinued { pid, .. } => Some(*pid),
            _ => None,
        }
    }
}

/// `error` and every source under it, joined with `: ` (errors print their own context only).
pub(crate) struct Chain<'a>(pub(crate) &'a (dyn std::error::Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut next = self.0.source();
        while let Some(e) = next {
            write!(f, ": {e}")?;
            next = e.source();
        }
        Ok(())
    }
}

impl fmt::Display for Note {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Note::WaitedForExec => write!(
                f,
                "the first program had no {} at its entry point; waited for it to exec a \
                 starter (a wrapper such as sh -c 'exec mpiexec …')",
                symbols::BREAKPOINT
            ),
            Note::Quirk(fact) => write!(f, "{fact}"),
            Note::NoBeingDebugged => write!(
                f,
                "the starter defines no {}; it cannot know a tool is present",
                symbols::BEING_DEBUGGED
            ),
            Note::UnsizedArray { symbol, assumed } => write!(
                f,
                "{symbol} has no size in the symbol table; assumed the spec's {assumed} bytes"
            ),
            Note::ToolDaemonUnsupported { symbol } => write!(
                f,
                "no tool daemon was asked for: the starter defines no {symbol}, so it does \
                 not support the extension"
            ),
            Note::AttachFifoWritten { path } => write!(
                f,
                "attach FIFO extension: wrote 1 into {path} after setting MPIR_being_debugged"
            ),
            Note::AttachFifoUnreadable { error } => write!(
                f,
                "{} could not be read: {}",
                symbols::ATTACH_FIFO,
                Chain(error)
            ),
            Note::EmptySpawn => {
                f.write_str("a spawn event came with MPIR_proctable_size = 0; waited for another")
            }
            Note::UnknownEventState { state } => write!(
                f,
                "ignored an MPIR event with unknown MPIR_debug_state {state}"
            ),
            Note::DebugStateUnreadable { error } => {
                write!(f, "MPIR_debug_state could not be read: {}", Chain(error))
            }
            Note::UndefinedDebugState { value } => write!(
                f,
                "MPIR_debug_state is {value}, a value the spec does not define (0 NULL, \
                 1 SPAWNED, 2 ABORTING)"
            ),
            Note::AllRanksForGate => f.write_str(
                "MPIR_partial_attach_ok is not defined: every rank is attached, to release its \
                 MPIR_debug_gate (MPIR 1.1 §8 step 18)",
            ),
            Note::GateLeftAlone => f.write_str(
                "MPIR_partial_attach_ok is not defined, but the job was spawned before this \
                 tool attached: its ranks' MPIR_debug_gate is left alone (ask for it with \
                 GateRelease::Always if they wait for a debugger)",
            ),
            Note::RankIsStarter { rank, pid } => {
                write!(f, "rank {rank} is the starter itself (pid {pid})")
            }
            Note::NotRunToProgram { pid, error } => write!(
                f,
                "pid {pid} was held before its exec and could not be run to it: {}",
                Chain(error)
            ),
            Note::HandOverFailed { pid, error } => {
                write!(f, "pid {pid}: hand over: {}", Chain(error))
            }
            Note::NoGate { pid } => write!(f, "pid {pid} defines no MPIR_debug_gate"),
            Note::GateFailed { pid, error } => write!(f, "pid {pid}: {}", Chain(error)),
            Note::DetachFailed { pid, error } => {
                write!(f, "pid {pid}: detach: {}", Chain(error))
            }
            Note::TableDiscovered { evidence } => write!(
                f,
                "the starter has no MPIR symbols: its table was discovered by a validated \
                 search of its memory ({evidence}; {}); nothing is written into it",
                mpir_types::mpir::discover::Discovered::FACTS
            ),
            Note::LauncherIdUnusable { symbol, reason } => {
                write!(f, "{symbol} holds no usable id: {reason}")
            }
            Note::RankContinued { pid, why } => write!(
                f,
                "pid {pid}: still stopped by the launcher after release ({why}); continued with \
                 SIGCONT"
            ),
        }
    }
}

#[cfg(feature = "serde")]
impl serde::Serialize for Note {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Note", 2)?;
        st.serialize_field("kind", self.kind())?;
        st.serialize_field("text", &self.to_string())?;
        st.end()
    }
}

/// Serializes an error as its text with its sources ([`Chain`]).
#[cfg(feature = "serde")]
pub(crate) fn serialize_error<E: std::error::Error + 'static, S: serde::Serializer>(
    error: &E,
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_str(&Chain(error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_target::Fault;

    fn gone() -> TargetError {
        TargetError::Unwritable {
            address: 0x1000,
            len: 4,
            fault: Fault::ProcessGone,
        }
    }

    #[test]
    fn kinds_are_distinct_and_texts_name_their_data() {
        let notes = [
            Note::WaitedForExec,
            Note::Quirk(QuirkFact::HydraStripped),
            Note::NoBeingDebugged,
            Note::UnsizedArray {
                symbol: symbols::EXECUTABLE_PATH,
                assumed: 256,
            },
            Note::AttachFifoWritten {
                path: "/tmp/fifo-x".into(),
            },
            Note::AttachFifoUnreadable { error: gone() },
            Note::EmptySpawn,
            Note::UnknownEventState { state: 9 },
            Note::DebugStateUnreadable { error: gone() },
            Note::UndefinedDebugState { value: 77 },
            Note::AllRanksForGate,
            Note::GateLeftAlone,
            Note::RankIsStarter { rank: 3, pid: 42 },
            Note::NotRunToProgram {
                pid: 43,
                error: AcquireError::Usage("x".into()),
            },
            Note::HandOverFailed {
                pid: 44,
                error: gone(),
            },
            Note::NoGate { pid: 45 },
            Note::GateFailed {
                pid: 46,
                error: AcquireError::Usage("y".into()),
            },
            Note::DetachFailed {
                pid: 47,
                error: gone(),
            },
            Note::RankContinued {
                pid: 48,
                why: "srun has ended".into(),
            },
            Note::ToolDaemonUnsupported {
                symbol: symbols::SERVER_ARGUMENTS,
            },
        ];
        let kinds: std::collections::BTreeSet<_> = notes.iter().map(Note::kind).collect();
        assert_eq!(kinds.len(), notes.len(), "one kind per variant");
        let text = |n: &Note| n.to_string();
        assert!(text(&notes[3]).contains("MPIR_executable_path"));
        assert!(text(&notes[3]).contains("256 bytes"));
        assert!(text(&notes[4]).contains("/tmp/fifo-x"));
        assert!(text(&notes[7]).ends_with("MPIR_debug_state 9"));
        assert!(text(&notes[12]).contains("rank 3") && text(&notes[12]).contains("pid 42"));
        assert!(text(&notes[16]).starts_with("pid 46"));
        for n in &notes[13..19] {
            assert!(n.pid().is_some_and(|p| text(n).contains(&p.to_string())));
        }
        assert!(text(&notes[18]).contains("srun has ended"));
        assert!(text(&notes[19]).contains("MPIR_server_arguments"));
        let unusable = Note::LauncherIdUnusable {
            symbol: "totalview_jobid",
            reason: "NULL".into(),
        };
        assert!(!kinds.contains(unusable.kind()));
        assert_eq!(
            unusable.to_string(),
            "totalview_jobid holds no usable id: NULL"
        );
        // Errors inside notes are printed with their text.
        assert!(
            text(&notes[17]).contains("process gone"),
            "{}",
            text(&notes[17])
        );
    }

    #[cfg(feature = "serde")]
    #[test]
    fn notes_serialize_as_kind_and_text() {
        let n = Note::RankIsStarter { rank: 3, pid: 42 };
        assert_eq!(
            serde_json::to_value(&n).unwrap(),
            serde_json::json!({"kind": "rank_is_starter", "text": "rank 3 is the starter itself (pid 42)"})
        );
    }
}
