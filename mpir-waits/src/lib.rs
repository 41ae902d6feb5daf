//! # mpir-waits
//!
//! The wait-state preload library of mpir-rs. `libmpir_waits.so`, put in `LD_PRELOAD` of an
//! MPI job's ranks, wraps the MPI calls through the MPI profiling interface (it defines
//! `MPI_Send`, … and forwards each to `PMPI_Send`, …) and records, per thread, which call the
//! thread is in and what it waits for: peer, tag and communicator of a receive, the requests of
//! a `MPI_Waitall`, the communicator and sequence number of a collective. It exports the record
//! at the data symbol [`SYMBOL`] (`mpir_waits`, laid out as `lib/mpir_waits.h` says), so that a
//! debugger reads it from the process's memory, live or from a core, like `MPIR_proctable`.
//!
//! ```no_run
//! let lib = mpir_waits::library()?; // written out privately, verified
//! let job = std::process::Command::new("mpiexec.hydra")
//!     .args(["-n", "4", "-genv", "LD_PRELOAD"])
//!     .arg(&lib)
//!     .arg("./app")
//!     .spawn()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! One binary serves the MPICH family (MPICH, Intel MPI, MVAPICH, Cray MPICH: int handles)
//! and Open MPI (pointer handles): it includes no `mpi.h`, links no MPI library, and decides the
//! handle ABI at `MPI_Init` from facts (Open MPI's `ompi_mpi_comm_world`, else the library
//! version string). Under any other MPI (the MPI-5 standard ABI included) it only forwards, and
//! the export says why. A process that never calls `MPI_Init` (the launcher, a shell) is
//! untouched: the export there says "loaded, not recording".
//!
//! ## The cooperative channel
//!
//! Once a rank's `MPI_Init` records, the library also listens on a private Unix socket of the
//! user (`$MPIR_COOP_DIR`, else `/tmp/mpir-coop-<uid>`, `<pid>.sock`; `MPIR_COOP=0` turns it
//! off) and answers for the rank — who it is, its memory, its map, every thread's registers and
//! stack, a Yama ptracer grant — for when the kernel forbids a debugger to trace or read it.
//! `COOP.md` in this crate describes the protocol; mpir-target's `live::coop` is its client. The
//! channel is one more thread in the rank (named `mpir-coop`), blocked in `accept()`.
//!
//! ## Where the library lives
//!
//! `build.rs` compiles `lib/mpir_waits.c` (`$CC`, else `cc`); the result is embedded here and
//! written at run time by [`library`] into a private cache directory
//! (`$XDG_CACHE_HOME/mpir/waits-<hash>`, mode 0700, checked to be yours, the file compared with
//! the embedded bytes on every call: [`mpir_demo::private_files`]).

#![cfg(target_os = "linux")]
#![forbid(unsafe_code)]
#![warn(clippy::exhaustive_enums, clippy::exhaustive_structs)]

use std::path::PathBuf;

use mpir_demo::private_files::{self, PrivateFilesError};

/// The exported data symbol, a `struct mpir_waits_header` (`lib/mpir_waits.h`).
pub const SYMBOL: &str = "mpir_waits";

/// The library's file name.
const FILE_NAME: &str = "libmpir_waits.so";

/// The library, as built by `build.rs`.
static LIBRARY: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/libmpir_waits.so"));

/// Why the preload library is not available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Writing it out to the private cache directory failed.
    #[error("cannot write out the wait-state library {FILE_NAME}")]
    Install {
        /// The failure.
        #[source]
        source: PrivateFilesError,
    },
}

/// The preload library's path, ready for `LD_PRELOAD`: written out from the copy embedded in
/// this crate into a private directory of this user, or checked there (see the crate docs).
///
/// # Errors
/// [`Error::Install`]: the cache directory is not private to this user, or the file cannot be
/// written.
pub fn library() -> Result<PathBuf, Error> {
    // Readable by its owner only: the ranks run as the user who runs mpir.
    private_files::install("waits", &[(FILE_NAME, LIBRARY, 0o600)])
        .map(|dir| dir.join(FILE_NAME))
        .map_err(|source| Error::Install { source })
}

/// Has every rank of the job `starter` starts record its waits: the library is put first in
/// the starter's `LD_PRELOAD` (kept after it, what was there), which hydra, srun and a
/// single-node Open MPI pass to the ranks as they pass the whole environment, and named in
/// `OMPI_MCA_mca_base_env_list` (appended with `;` to what was there), Open MPI's own way of
/// forwarding a variable to every node (its `mpirun -x`), which other launchers ignore. The
/// starter itself loads the library too, where it does nothing (it never calls `MPI_Init`).
/// Returns the library's path.
///
/// # Errors
/// As [`library`].
pub fn record_waits(starter: &mut std::process::Command) -> Result<PathBuf, Error> {
    let lib = library()?;
    let inherited = |name: &str| {
        starter
            .get_envs()
            .find(|(k, _)| *k == name)
            .map_or_else(|| std::env::var_os(name), |(_, v)| v.map(ToOwned::to_owned))
            .filter(|v| !v.is_empty())
    };
    let mut preload = lib.clone().into_os_string();
    if let Some(old) = inherited("LD_PRELOAD") {
        preload.push(":");
        preload.push(old);
    }
    let mut forward = std::ffi::OsString::from("LD_PRELOAD");
    if let Some(old) = inherited("OMPI_MCA_mca_base_env_list") {
        forward = old;
        forward.push(";LD_PRELOAD");
    }
    starter
        .env("LD_PRELOAD", preload)
        .env("OMPI_MCA_mca_base_env_list", forward);
    Ok(lib)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_is_written_as_built_and_exports_the_symbol() {
        let path = library().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), LIBRARY);
        // The dynamic symbol table names the export (a plain byte search in .dynstr).
        let needle = format!("\0{SYMBOL}\0");
        assert!(
            LIBRARY
                .windows(needle.len())
                .any(|w| w == needle.as_bytes()),
            "{SYMBOL} is not in the library's strings"
        );
        // A second call keeps the same, verified file.
        assert_eq!(library().unwrap(), path);
    }

    #[test]
    fn record_waits_puts_the_library_first_and_keeps_what_was_there() {
        let mut c = std::process::Command::new("true");
        c.env("LD_PRELOAD", "/x/libother.so")
            .env("OMPI_MCA_mca_base_env_list", "FOO=1");
        let lib = record_waits(&mut c).unwrap();
        let env = |k: &str| {
            c.get_envs()
                .find(|(n, _)| *n == k)
                .and_then(|(_, v)| v)
                .map(|v| v.to_string_lossy().into_owned())
        };
        assert_eq!(
            env("LD_PRELOAD").unwrap(),
            format!("{}:/x/libother.so", lib.display())
        );
        assert_eq!(
            env("OMPI_MCA_mca_base_env_list").unwrap(),
            "FOO=1;LD_PRELOAD"
        );
    }
}
