//! The wait-state export of a rank that has mpir-rs's preload library (`mpir_waits`,
//! [`mpir_types::waits`]): found by its symbol, read with the rank's memory (held, or a core),
//! decoded with the format's bounds.

use mpir_target::{Target, TargetError};
use mpir_types::waits::{self, Header, State, WaitStates, WaitsError};
use thiserror::Error;

/// Why a rank's wait-state export could not be used.
#[derive(Debug, Clone, Error)]
#[non_exhaustive]
pub enum WaitsReadError {
    /// Reading its memory failed.
    #[error("reading the wait-state export ({what})")]
    Read {
        /// What was being read.
        what: &'static str,
        /// Why.
        #[source]
        source: TargetError,
    },
    /// The bytes are not a usable export.
    #[error("the wait-state export")]
    Format(#[source] WaitsError),
    /// An agent on another node could not use the rank's export (its words).
    #[error("on {host}: {why}")]
    Agent {
        /// The rank's node.
        host: String,
        /// Why, as the agent said.
        why: String,
    },
    /// The library is there but records nothing.
    #[error("the wait-state library records nothing: {why}")]
    NotRecording {
        /// Why, in words (its state, or why it disabled itself).
        why: String,
    },
}

/// Reads the export of `target`: `Ok(None)` when the process has no `mpir_waits` symbol (the
/// library is not preloaded there).
///
/// # Errors
/// [`WaitsReadError`]: unreadable memory, a hostile or torn header, a library that records
/// nothing (disabled, or MPI not initialized through it).
pub fn read(target: &dyn Target) -> Result<Option<WaitStates>, WaitsReadError> {
    let sym = target
        .symbol(waits::SYMBOL)
        .map_err(|source| WaitsReadError::Read {
            what: "its symbol",
            source,
        })?;
    let Some(sym) = sym else {
        return Ok(None);
    };
    let model = target.data_model();
    let mut head = vec![0u8; waits::HEADER_SIZE as usize];
    target
        .read_exact(sym.address, &mut head)
        .map_err(|source| WaitsReadError::Read {
            what: "its header",
            source,
        })?;
    let header = Header::decode(model, sym.address, &head).map_err(WaitsReadError::Format)?;
    match header.state {
        State::Recording | State::Finalized => {}
        State::Disabled => {
            let why = header
                .disabled
                .map_or_else(|| "disabled".to_string(), |d| d.to_string());
            let lib = if header.library.is_empty() {
                String::new()
            } else {
                format!(" (MPI library: {})", header.library.trim())
            };
            return Err(WaitsReadError::NotRecording {
                why: format!("{why}{lib}"),
            });
        }
        State::Loaded => {
            return Err(WaitsReadError::NotRecording {
                why: "MPI was not initialized through it (the program has not called MPI_Init yet, or calls a statically linked MPI the library cannot wrap)".to_string(),
            });
        }
        State::Other(v) => {
            return Err(WaitsReadError::NotRecording {
                why: format!("unknown state {v}"),
            });
        }
        _ => {
            return Err(WaitsReadError::NotRecording {
                why: "unknown state".to_string(),
            });
        }
    }
    let table = |base: u64, size: u32, n: u32, what: &'static str| {
        let (at, len) = Header::span(base, size, n).map_err(WaitsReadError::Format)?;
        let mut buf = vec![0u8; usize::try_from(len).unwrap_or(usize::MAX)];
        target
            .read_exact(at, &mut buf)
            .map_err(|source| WaitsReadError::Read { what, source })?;
        Ok::<_, WaitsReadError>(buf)
    };
    let slots = table(
        header.slots,
        header.slot_size,
        header.slots_used,
        "its thread slots",
    )?;
    let comms = table(
        header.comms,
        header.comm_size,
        header.comm_capacity,
        "its communicators",
    )?;
    let requests = table(
        header.requests,
        header.request_size,
        header.request_capacity,
        "its requests",
    )?;
    waits::decode_tables(model, header, &slots, &comms, &requests)
        .map(Some)
        .map_err(WaitsReadError::Format)
}
