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
    /// The library is there but the program calls an MPI linked into its own executable,
    /// whose calls a preloaded library cannot wrap.
    #[error(
        "the program is linked statically against its MPI ({symbol} is in its executable {}): \
         a preloaded library cannot see its calls",
        executable.display()
    )]
    StaticMpi {
        /// The executable.
        executable: std::path::PathBuf,
        /// The MPI symbol found in it.
        symbol: &'static str,
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
/// `executable` (the process's program, when known) tells a program linked statically against
/// its MPI, whose calls the library cannot wrap, from one that has not initialized MPI yet.
///
/// # Errors
/// [`WaitsReadError`]: unreadable memory, a hostile or torn header, a library that records
/// nothing (disabled, MPI not initialized through it, or an MPI linked into the executable).
pub fn read(
    target: &dyn Target,
    executable: Option<&std::path::Path>,
) -> Result<Option<WaitStates>, WaitsReadError> {
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
            // An executable that defines the MPI itself calls its own MPI_Init.
            if let Some(exe) = executable
                && let Ok(Some(init)) = target.symbol("PMPI_Init")
                && init.image.as_deref().is_some_and(|i| same_file(i, exe))
            {
                return Err(WaitsReadError::StaticMpi {
                    executable: exe.to_path_buf(),
                    symbol: "PMPI_Init",
                });
            }
            return Err(WaitsReadError::NotRecording {
                why: "MPI was not initialized through it (the program has not called MPI_Init yet)"
                    .to_string(),
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

/// Whether the image path a symbol names is the executable (the same file, or the same path
/// when either cannot be resolved).
fn same_file(image: &str, exe: &std::path::Path) -> bool {
    let a = std::path::Path::new(image);
    match (std::fs::canonicalize(a), std::fs::canonicalize(exe)) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == exe,
    }
}

#[cfg(test)]
mod tests {
    use mpir_target::mock::MockTarget;
    use mpir_types::DataModel;

    use super::*;

    /// A process whose `mpir_waits` header is recording and names its tables at `tables`.
    fn process(tables: u64, state: u32) -> MockTarget {
        let mut b = MockTarget::builder(DataModel::LP64);
        let at = b.variable(waits::SYMBOL, waits::HEADER_SIZE);
        b.write_with(at, waits::HEADER_SIZE, |v| {
            v.put_bytes(0, waits::MAGIC, "magic")?;
            for (off, x) in [
                (8u64, 1u64),
                (12, 232),
                (16, 136),
                (20, 56),
                (24, 56),
                (28, 4),
                (32, 4),
                (36, 4),
                (40, 1),
                (44, u64::from(state)),
                (52, 0),
                (56, 2),
                (60, 1),
            ] {
                v.put_uint(off, 4, x, "field")?;
            }
            for off in [80u64, 88, 96] {
                v.put_uint(off, 8, tables, "table")?;
            }
            Ok(())
        });
        b.build()
    }

    #[test]
    fn tables_pointing_nowhere_are_a_typed_error_naming_the_address() {
        let t = process(0xdead_0000, 1);
        match read(&t, None) {
            Err(WaitsReadError::Read { what, source }) => {
                assert_eq!(what, "its thread slots");
                assert!(source.to_string().contains("0xdead0000"), "{source}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_library_that_records_nothing_says_why_and_no_library_is_none() {
        let t = process(0x1000, 0);
        match read(&t, None) {
            Err(WaitsReadError::NotRecording { why }) => {
                assert!(why.contains("not initialized"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let bare = MockTarget::builder(DataModel::LP64).build();
        assert!(matches!(read(&bare, None), Ok(None)));
    }
}
