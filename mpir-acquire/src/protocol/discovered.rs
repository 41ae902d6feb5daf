//! The protocol for a starter without MPIR symbols whose table was discovered
//! ([`mpir_types::mpir::discover`]; the live side is `crate::live::discover`): attach mode
//! only, with a filled table, and never a write into the starter.

use mpir_target::Target;
use mpir_types::mpir::discover::Discovered;
use mpir_types::mpir::symbols;

use super::{Acquisition, Mode, read_flags};
use crate::error::AcquireError;
use crate::job::Starter;
use crate::note::Note;

impl Acquisition {
    /// The starter has no MPIR symbols; its table was found by a validated memory search
    /// (`found`), and the target handed to [`Acquisition::handle`] answers `MPIR_proctable` and
    /// `MPIR_proctable_size` at the discovered addresses. The acquisition then never writes into
    /// the starter (no breakpoint, no `MPIR_being_debugged`, no tool daemon), works in attach
    /// mode only, and only while the table is filled (no spawn event can be waited for). The
    /// job reports `found` ([`crate::Job::discovered`] and [`Note::TableDiscovered`]).
    pub fn with_discovered(mut self, found: Discovered) -> Self {
        self.discovered = Some(found);
        self
    }

    /// [`Acquisition::set_up_starter`] for a discovered table: the starter's record, no writes.
    pub(super) fn set_up_discovered<T: Target + ?Sized>(
        &mut self,
        target: &T,
    ) -> Result<bool, AcquireError> {
        if self.mode == Mode::Launch {
            return Err(AcquireError::LaunchWithoutSymbols { pid: self.pid });
        }
        if self
            .options
            .tool_daemon
            .as_ref()
            .is_some_and(|d| d.optional)
        {
            self.notes.push(Note::ToolDaemonUnsupported {
                symbol: symbols::EXECUTABLE_PATH,
            });
        } else if self.options.tool_daemon.is_some() {
            return Err(AcquireError::ToolDaemon(
                "the starter has no MPIR symbols (its table was found by a memory search): \
                 nothing is written into it, so no tool daemon can be asked of it"
                    .into(),
            ));
        }
        if let Some(evidence) = self.discovered.clone() {
            self.notes.push(Note::TableDiscovered { evidence });
        }
        self.starter = Some(Starter {
            pid: self.pid,
            breakpoint: 0,
            image: None,
            flags: read_flags(target),
            launcher: None,
            set_being_debugged: false,
            keeps_being_debugged: false,
            job_id: None,
            step_id: None,
            debug_state: None,
        });
        Ok(true)
    }

    /// The discovered table is empty now (it was not when found): without `MPIR_Breakpoint`
    /// there is no spawn event to wait for.
    pub(super) fn discovered_empty(&self, size: i64) -> AcquireError {
        AcquireError::Usage(format!(
            "the starter (pid {}) has no MPIR symbols and its discovered table now says {size} \
             entries: without MPIR_Breakpoint no spawn event can be waited for",
            self.pid
        ))
    }
}
