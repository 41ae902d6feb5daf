//! The reference provider's C sources, for test suites that need real MPI2DD processes — this
//! workspace's (mpir-acquire's acquisition tests) and those of tools built on these crates —
//! without reaching into this crate's directory: [`write_sources`] puts them in a directory of
//! the caller's, to be compiled with any C compiler.
//!
//! - [`PROVIDER_HEADER`] (`mpi2dd.h`) and [`PROVIDER_SOURCE`] (`mpi2dd_provider.c`): how an MPI
//!   runtime exports `MPI2DD_info` and `MPI2DD_breakpoint` and maintains the tables.
//! - [`JOB_SOURCE`] (`job.c`): a dynamic MPI job in miniature built on the provider — a
//!   metadirectory that is also the starter, directories starting the ranks of a world, and
//!   spawns of new worlds on command; its usage is in its header comment.
//!
//! ```no_run
//! let dir = std::env::temp_dir().join("mpi2dd-provider");
//! let files = mpi2dd::testkit::write_sources(&dir)?;
//! let status = std::process::Command::new("cc")
//!     .arg(format!("-I{}", files.include_dir.display()))
//!     .arg(&files.provider)
//!     .arg(&files.job)
//!     .arg("-o")
//!     .arg(dir.join("job"))
//!     .status()?;
//! assert!(status.success());
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io;
use std::path::{Path, PathBuf};

/// `mpi2dd.h`: the provider's declarations of the MPI2DD structs, flags and functions.
pub const PROVIDER_HEADER: &str = include_str!("../provider/mpi2dd.h");

/// `mpi2dd_provider.c`: the reference provider (include [`PROVIDER_HEADER`] as `mpi2dd.h`).
pub const PROVIDER_SOURCE: &str = include_str!("../provider/mpi2dd_provider.c");

/// `job.c`: a dynamic MPI job in miniature on the provider (build it with
/// [`PROVIDER_SOURCE`]).
pub const JOB_SOURCE: &str = include_str!("../tests/fixtures/job.c");

/// Where [`write_sources`] put each file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProviderSources {
    /// The directory holding `mpi2dd.h` (pass it to the compiler with `-I`).
    pub include_dir: PathBuf,
    /// `mpi2dd_provider.c`.
    pub provider: PathBuf,
    /// `job.c`.
    pub job: PathBuf,
}

/// Writes `mpi2dd.h`, `mpi2dd_provider.c` and `job.c` into `dir` (created if missing),
/// replacing files of those names.
///
/// # Errors
/// The I/O error of creating `dir` or writing a file.
pub fn write_sources(dir: &Path) -> io::Result<ProviderSources> {
    std::fs::create_dir_all(dir)?;
    let sources = ProviderSources {
        include_dir: dir.to_path_buf(),
        provider: dir.join("mpi2dd_provider.c"),
        job: dir.join("job.c"),
    };
    std::fs::write(dir.join("mpi2dd.h"), PROVIDER_HEADER)?;
    std::fs::write(&sources.provider, PROVIDER_SOURCE)?;
    std::fs::write(&sources.job, JOB_SOURCE)?;
    Ok(sources)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "writes files, which Miri's isolation forbids")]
    fn the_sources_are_written_where_said_with_the_header_beside_the_provider() {
        let dir = std::env::temp_dir().join(format!("mpi2dd-testkit-{}", std::process::id()));
        let s = write_sources(&dir).unwrap();
        assert_eq!(
            std::fs::read_to_string(&s.provider).unwrap(),
            PROVIDER_SOURCE
        );
        assert_eq!(std::fs::read_to_string(&s.job).unwrap(), JOB_SOURCE);
        // Both C files include the header by its bare name, found through `include_dir`.
        for src in [PROVIDER_SOURCE, JOB_SOURCE] {
            assert!(src.contains("#include \"mpi2dd.h\""));
        }
        assert_eq!(
            std::fs::read_to_string(s.include_dir.join("mpi2dd.h")).unwrap(),
            PROVIDER_HEADER
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
