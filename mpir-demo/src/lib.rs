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
//! time into a private directory: `mpir/demo-<hash>` under `$XDG_CACHE_HOME` (else
//! `~/.cache`), or `mpir-<uid>/demo-<hash>` under the temporary directory when there is no
//! home. The directories are created mode 0700 and used only when they are ours (owner, no
//! access for group or others, not a symbolic link); the hash names the programs' contents, and
//! before each run every file is compared with the embedded bytes and rewritten (through a
//! new file renamed into place) when it differs. A file changed by anyone is never run.
//!
//! `$MPIR_DEMO_DIR` overrides all this: a directory holding `mpir-demo-starter` and
//! `mpir-demo-rank`, used as it is.

#![cfg(target_os = "linux")]
#![forbid(unsafe_code)]

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The starter (it finds the rank program next to itself), as built by `build.rs`.
static STARTER: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mpir-demo-starter"));
/// The rank program, as built by `build.rs`.
static RANK: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mpir-demo-rank"));

/// The programs' file names (the starter looks for the rank's name next to itself).
const FILES: [(&str, &[u8]); 2] = [("mpir-demo-starter", STARTER), ("mpir-demo-rank", RANK)];

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

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> DemoFilesError + '_ {
    move |source| DemoFilesError::Io {
        path: path.to_path_buf(),
        source,
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
    let dir = private_dir()?;
    for (name, bytes) in FILES {
        materialise(&dir, name, bytes)?;
    }
    Ok(dir.join(FILES[0].0))
}

/// FNV-1a over both programs (with their lengths): names the directory of this build's
/// programs, so that two `mpir` builds never share one. Not a defence: the bytes are compared.
fn content_hash() -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (_, bytes) in FILES {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

/// This process's real uid (the owner its directories must have).
fn my_uid() -> Result<u32, DemoFilesError> {
    mpir_target::live::procfs::ProcessFacts::read(std::process::id())
        .map(|f| f.uid)
        .map_err(|source| DemoFilesError::Uid { source })
}

/// The directory for this build's programs, created when missing, checked private.
fn private_dir() -> Result<PathBuf, DemoFilesError> {
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let uid = my_uid()?;
    let base = match absolute(std::env::var_os("XDG_CACHE_HOME"))
        .or_else(|| absolute(std::env::var_os("HOME")).map(|h| h.join(".cache")))
    {
        Some(cache) => {
            std::fs::create_dir_all(&cache).map_err(io(&cache))?;
            cache.join("mpir")
        }
        // No home: a directory of our own in the shared temporary directory.
        None => std::env::temp_dir().join(format!("mpir-{uid}")),
    };
    private(&base, uid)?;
    let dir = base.join(format!("demo-{:016x}", content_hash()));
    private(&dir, uid)?;
    Ok(dir)
}

/// Creates `dir` mode 0700 when missing; an error unless it is a directory (not a link) owned
/// by `uid` that nobody else may enter or write.
fn private(dir: &Path, uid: u32) -> Result<(), DemoFilesError> {
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io(dir)(e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(io(dir))?;
    let why = if !meta.file_type().is_dir() {
        Some("is not a directory")
    } else if meta.uid() != uid {
        Some("is not owned by you")
    } else if meta.mode() & 0o077 != 0 {
        Some("is open to other users (mode is not 0700)")
    } else {
        None
    };
    match why {
        Some(why) => Err(DemoFilesError::NotPrivate {
            path: dir.to_path_buf(),
            why,
        }),
        None => Ok(()),
    }
}

/// Makes `dir/name` a regular file holding exactly `bytes`, executable by its owner only:
/// kept when it already is, else written anew and renamed into place.
fn materialise(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), DemoFilesError> {
    let path = dir.join(name);
    let intact = std::fs::symlink_metadata(&path).is_ok_and(|m| {
        m.file_type().is_file() && m.mode() & 0o777 == 0o700 && m.len() == bytes.len() as u64
    }) && std::fs::read(&path).is_ok_and(|b| b == bytes);
    if intact {
        return Ok(());
    }
    // A name of this writer's own: two processes, or two threads of one (tests, a tool's
    // threads), each write their own copy and rename it into place.
    static WRITERS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(".{name}.{}.{n}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o700)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&path)(e));
    }
    tracing::info!(path = %path.display(), "demo program written");
    Ok(())
}

/// Whether `name` is one of the programs (for tests of this module).
#[cfg(test)]
fn is_program(name: &std::ffi::OsStr) -> bool {
    FILES.iter().any(|(n, _)| std::ffi::OsStr::new(n) == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpir-demo-files-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_tampered_or_loosened_program_is_rewritten() {
        let uid = my_uid().unwrap();
        let dir = scratch("tamper");
        private(&dir, uid).unwrap();
        for (name, bytes) in FILES {
            materialise(&dir, name, bytes).unwrap();
            assert_eq!(std::fs::read(dir.join(name)).unwrap(), bytes);
        }
        let rank = dir.join("mpir-demo-rank");
        std::fs::write(&rank, b"#!/bin/sh\necho pwned\n").unwrap();
        materialise(&dir, "mpir-demo-rank", RANK).unwrap();
        assert_eq!(std::fs::read(&rank).unwrap(), RANK);
        // Same bytes, but writable by others: rewritten with mode 0700.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&rank, std::fs::Permissions::from_mode(0o777)).unwrap();
        materialise(&dir, "mpir-demo-rank", RANK).unwrap();
        assert_eq!(std::fs::metadata(&rank).unwrap().mode() & 0o777, 0o700);
        // Only the programs are left (no temporary file).
        for e in std::fs::read_dir(&dir).unwrap() {
            assert!(is_program(&e.unwrap().file_name()));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_directory_open_to_others_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let uid = my_uid().unwrap();
        let dir = scratch("open");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = private(&dir, uid).unwrap_err();
        assert!(matches!(e, DemoFilesError::NotPrivate { .. }), "{e}");
        // Another owner is refused too (any uid but ours).
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = private(&dir, uid.wrapping_add(1)).unwrap_err();
        assert!(matches!(e, DemoFilesError::NotPrivate { .. }), "{e}");
        std::fs::remove_dir(&dir).unwrap();
        // A symbolic link to a private directory is not one.
        let real = scratch("real");
        private(&real, uid).unwrap();
        std::os::unix::fs::symlink(&real, &dir).unwrap();
        let e = private(&dir, uid).unwrap_err();
        assert!(matches!(e, DemoFilesError::NotPrivate { .. }), "{e}");
        std::fs::remove_file(&dir).unwrap();
        std::fs::remove_dir(&real).unwrap();
    }

    #[test]
    fn threads_writing_the_programs_at_once_all_succeed() {
        // Tests and tools call `starter()` from several threads of one process: each writer
        // needs its own temporary file (one name per process lost a race here once).
        let uid = my_uid().unwrap();
        let dir = scratch("threads");
        private(&dir, uid).unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| materialise(&dir, "mpir-demo-rank", RANK)))
                .collect();
            for h in handles {
                h.join().unwrap().unwrap();
            }
        });
        assert_eq!(std::fs::read(dir.join("mpir-demo-rank")).unwrap(), RANK);
        for e in std::fs::read_dir(&dir).unwrap() {
            assert!(is_program(&e.unwrap().file_name()));
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
