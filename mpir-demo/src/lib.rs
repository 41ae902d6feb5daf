//! # mpir-demo
//!
//! The bundled demo job of mpir-rs: a fake MPIR starter (`demo/starter.c`) and ranks
//! (`demo/rank.c`) that keep message queues in MPICH 4.1's debug-queue layout, with a deadlock
//! among them (ranks 0 → 1 → 2 → 0 wait in a cycle, rank 3 is blocked by it). No MPI library
//! is involved. The tool `mpir demo`, the C API (`mpir_demo_starter`) and the Python bindings
//! (`mpir.demo_starter()`) run it, so that anyone can try the SDK without an MPI installation.
//!
//! ```no_run
//! let starter = mpir_demo::starter()?; // written out privately, verified, ready to run
//! let mut job = std::process::Command::new(starter).args(["-n", "4"]).spawn()?;
//! # job.kill()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The ranks block for ever (that is the demo's point): launch the starter under control
//! (`mpir_session::Session::launch`) and end the job by signalling the starter.
//!
//! ## Where the programs live
//!
//! `build.rs` compiles `demo/starter.c` and `demo/rank.c` (`$CC`, else `cc`); both are embedded
//! here, so that the programs exist wherever a binary built with this crate is installed
//! (`cargo install` keeps the binary only, not the build's `OUT_DIR`), and written out at run
//! time into a private directory by [`private_files::install`]: `mpir/demo-<hash>` under
//! `$XDG_CACHE_HOME` (else `~/.cache`), or `mpir-<uid>/demo-<hash>` under the temporary
//! directory when there is no home. The directories are created mode 0700 and used only when
//! they are ours (owner, no access for group or others, not a symbolic link); the hash names
//! the programs' contents, and before each run every file is compared with the embedded bytes
//! and rewritten (through a new file renamed into place) when it differs. A file changed by
//! anyone is never run. Other crates of mpir-rs that write out files to run or load (the
//! wait-state library of `mpir-waits`) use the same module.
//!
//! `$MPIR_DEMO_DIR` overrides all this: a directory holding `mpir-demo-starter` and
//! `mpir-demo-rank`, used as it is.

#![cfg(target_os = "linux")]
#![forbid(unsafe_code)]

use std::path::PathBuf;

pub mod private_files;

use private_files::PrivateFilesError;

/// The starter (it finds the rank program next to itself), as built by `build.rs`.
static STARTER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mpir-demo-starter"));
/// The rank program, as built by `build.rs`.
static RANK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mpir-demo-rank"));

/// The programs' file names (the starter looks for the rank's name next to itself), contents
/// and modes (executable by their owner only).
const FILES: [(&str, &[u8], u32); 2] = [
    ("mpir-demo-starter", STARTER, 0o700),
    ("mpir-demo-rank", RANK, 0o700),
];

/// Why the demo job's programs are not available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DemoFilesError {
    /// `$MPIR_DEMO_DIR` does not hold the starter.
    #[error(
        "the demo job's starter is not at {} ($MPIR_DEMO_DIR must name a directory holding \
         mpir-demo-starter and mpir-demo-rank; unset it to use the programs built into mpir)",
        path.display()
    )]
    NotInDemoDir {
        /// Where it was looked for.
        path: PathBuf,
    },
    /// A directory that would hold the programs is not private to this user.
    #[error("{} {why}: it cannot hold programs mpir runs", path.display())]
    NotPrivate {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        why: &'static str,
    },
    /// This process's own uid could not be read.
    #[error("cannot tell which user runs mpir")]
    Uid {
        /// The failure.
        #[source]
        source: mpir_target::TargetError,
    },
    /// Creating, reading or writing the directory or a program failed.
    #[error("cannot write the demo job's programs to {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

impl From<PrivateFilesError> for DemoFilesError {
    fn from(e: PrivateFilesError) -> Self {
        match e {
            PrivateFilesError::NotPrivate { path, why } => DemoFilesError::NotPrivate { path, why },
            PrivateFilesError::Uid { source } => DemoFilesError::Uid { source },
            PrivateFilesError::Io { path, source } => DemoFilesError::Io { path, source },
        }
    }
}

/// The demo job's starter, ready to run: from `$MPIR_DEMO_DIR` when set, else written out from
/// the copies embedded in this crate (see the crate docs).
///
/// # Errors
/// [`DemoFilesError`]: `$MPIR_DEMO_DIR` lacks the starter, the cache directory is not private
/// to this user, or a file cannot be written.
pub fn starter() -> Result<PathBuf, DemoFilesError> {
    if let Some(dir) = std::env::var_os("MPIR_DEMO_DIR") {
        let path = PathBuf::from(dir).join(FILES[0].0);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(DemoFilesError::NotInDemoDir { path })
        };
    }
    Ok(private_files::install("demo", &FILES)?.join(FILES[0].0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_starter_and_rank_are_written_side_by_side() {
        // Not under $MPIR_DEMO_DIR (a test environment may set it): the embedded programs.
        let dir = private_files::install("demo", &FILES).unwrap();
        for (name, bytes, _) in FILES {
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes, "{name}");
        }
    }
}
