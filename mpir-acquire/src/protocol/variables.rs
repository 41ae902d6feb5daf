//! The starter's MPIR variables beyond the table: the tool daemon extension's writes
//! (`MPIR_executable_path`, `MPIR_server_arguments`), the attach FIFO, `MPIR_debug_state`, and
//! the launcher's job and step ids.

use mpir_target::{MemoryExt, Target};
use mpir_types::mpir::{DebugState, symbols};

use super::{Acquisition, Action};
use crate::daemon;
use crate::error::AcquireError;
use crate::job::{LAUNCHER_JOB_ID, LAUNCHER_STEP_ID, parse_launcher_id};
use crate::note::Note;

impl Acquisition {
    /// Whether an optional tool daemon is left out because the starter lacks one of the
    /// extension's arrays (noted); a lookup that fails is an error either way.
    fn tool_daemon_unsupported<T: Target + ?Sized>(
        &mut self,
        target: &T,
    ) -> Result<bool, AcquireError> {
        if !self
            .options
            .tool_daemon
            .as_ref()
            .is_some_and(|d| d.optional)
        {
            return Ok(false);
        }
        for name in [symbols::EXECUTABLE_PATH, symbols::SERVER_ARGUMENTS] {
            let found = target
                .symbol(name)
                .map_err(AcquireError::target(format!("look up {name}")))?;
            if found.is_none() {
                self.notes
                    .push(Note::ToolDaemonUnsupported { symbol: name });
                return Ok(true);
            }
        }
        Ok(false)
    }

    pub(super) fn write_tool_daemon<T: Target + ?Sized>(
        &mut self,
        target: &T,
        executable: &str,
        arguments: &[String],
    ) -> Result<(), AcquireError> {
        if self.tool_daemon_unsupported(target)? {
            return Ok(());
        }
        let array = |name: &'static str, spec_size: u64, notes: &mut Vec<Note>| {
            let sym = target
                .symbol(name)
                .map_err(AcquireError::target(format!("look up {name}")))?
                .ok_or_else(|| {
                    AcquireError::ToolDaemon(format!(
                        "the starter defines no {name}: it does not support the extension"
                    ))
                })?;
            let size = if sym.size == 0 {
                notes.push(Note::UnsizedArray {
                    symbol: name,
                    assumed: spec_size,
                });
                spec_size
            } else {
                sym.size
            };
            Ok::<_, AcquireError>((sym.address, size))
        };
        let (path_at, path_size) = array(
            symbols::EXECUTABLE_PATH,
            daemon::SPEC_EXECUTABLE_PATH_SIZE,
            &mut self.notes,
        )?;
        let (args_at, args_size) = array(
            symbols::SERVER_ARGUMENTS,
            daemon::SPEC_SERVER_ARGUMENTS_SIZE,
            &mut self.notes,
        )?;
        // Encode both before writing either: nothing is written if one cannot be.
        let path = daemon::executable_path(executable, path_size)?;
        let mut args = daemon::server_arguments(arguments, args_size)?;
        // The rest of the array zeroed (up to 64 KiB): Open MPI 4 splits the whole array at
        // its NULs (build_debugger_args), so a list shorter than one written before would
        // end with that one's tail as extra arguments.
        let whole = usize::try_from(args_size.min(64 << 10)).unwrap_or(0);
        if args.len() < whole {
            args.resize(whole, 0);
        }
        target
            .write(path_at, &path)
            .map_err(AcquireError::target("write MPIR_executable_path"))?;
        target
            .write(args_at, &args)
            .map_err(AcquireError::target("write MPIR_server_arguments"))?;
        Ok(())
    }

    /// Attach mode, table still empty (or tool daemons asked for a running job): the attach
    /// FIFO extension, when the starter offers it. Whether the FIFO will be written.
    pub(super) fn attach_fifo<T: Target + ?Sized>(&mut self, target: &T) -> bool {
        let Ok(Some(sym)) = target.symbol(symbols::ATTACH_FIFO) else {
            return false;
        };
        let cap = if sym.size == 0 { 512 } else { sym.size };
        match target.read_c_string(sym.address, cap.saturating_sub(1)) {
            Ok(bytes) if !bytes.is_empty() => {
                let path = String::from_utf8_lossy(&bytes).into_owned();
                self.notes
                    .push(Note::AttachFifoWritten { path: path.clone() });
                self.actions.push_back(Action::WriteAttachFifo { path });
                true
            }
            Ok(_) => false,
            Err(error) => {
                self.notes.push(Note::AttachFifoUnreadable { error });
                false
            }
        }
    }

    /// Reads `MPIR_debug_state` into the starter's record (raw), noting a value the spec does
    /// not define.
    pub(super) fn read_debug_state<T: Target + ?Sized>(&mut self, target: &T) -> Option<i64> {
        let sym = target.symbol(symbols::DEBUG_STATE).ok().flatten()?;
        let raw = match target.read_c_int(sym.address, symbols::DEBUG_STATE) {
            Ok(v) => v,
            Err(error) => {
                self.notes.push(Note::DebugStateUnreadable { error });
                return None;
            }
        };
        if let DebugState::Unknown(v) = DebugState::from_raw(raw) {
            self.notes.push(Note::UndefinedDebugState { value: v });
        }
        if let Some(s) = self.starter.as_mut() {
            s.debug_state = Some(raw);
        }
        Some(raw)
    }

    /// The launcher's job and step ids (`totalview_jobid`, `totalview_stepid`: C strings
    /// holding decimal numbers, as Slurm's `srun` defines them), when the starter defines
    /// them; a defined but unusable one is a note.
    pub(super) fn read_launcher_ids<T: Target + ?Sized>(&mut self, target: &T) {
        let mut read = |symbol: &'static str| -> Option<u64> {
            let sym = target.symbol(symbol).ok().flatten()?;
            let value = target
                .read_pointer(sym.address, symbol)
                .map_err(|e| e.to_string())
                .and_then(|p| match p {
                    0 => Err("NULL".to_string()),
                    p => target.read_c_string(p, 32).map_err(|e| e.to_string()),
                })
                .and_then(|bytes| parse_launcher_id(&bytes));
            match value {
                Ok(v) => Some(v),
                Err(reason) => {
                    self.notes.push(Note::LauncherIdUnusable { symbol, reason });
                    None
                }
            }
        };
        let job = read(LAUNCHER_JOB_ID);
        let step = read(LAUNCHER_STEP_ID);
        if let Some(s) = self.starter.as_mut() {
            s.job_id = job;
            s.step_id = step;
        }
    }
}
