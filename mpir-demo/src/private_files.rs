//! Files that mpir writes out and then runs or loads (the demo job's programs, the wait-state
//! preload library of `mpir-waits`), kept in a directory private to the user.
//!
//! [`install`] writes them into `mpir/<kind>-<hash>` under `$XDG_CACHE_HOME` (else
//! `~/.cache`), or `mpir-<uid>/<kind>-<hash>` under the temporary directory when there is no
//! home. The directories are created mode 0700 and used only when they are ours (owner, no
//! access for group or others, not a symbolic link); the hash names the files' names, modes and
//! contents, and on every call each file is compared with the given bytes and rewritten
//! (through a new file renamed into place) when it differs. A file changed by anyone is never
//! handed out.
//!
//! ```no_run
//! let dir = mpir_demo::private_files::install("example", &[("hello.sh", b"#!/bin/sh\necho hi\n", 0o700)])?;
//! std::process::Command::new(dir.join("hello.sh")).status()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Why the private files are not available.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PrivateFilesError {
    /// A directory that would hold the files is not private to this user.
    #[error("{} {why}: it cannot hold files mpir runs", path.display())]
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
    /// Creating, reading or writing the directory or a file failed.
    #[error("cannot write mpir's private files to {}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The failure.
        #[source]
        source: std::io::Error,
    },
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> PrivateFilesError + '_ {
    move |source| PrivateFilesError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Writes `files` (name, bytes, permission bits such as `0o700`) into this user's private
/// directory for `kind` and this set of files (see the module docs), or checks the copies
/// already there: the directory, each file in it as given.
///
/// # Errors
/// [`PrivateFilesError`]: the cache directory is not private to this user, or a file cannot
/// be written.
pub fn install(kind: &str, files: &[(&str, &[u8], u32)]) -> Result<PathBuf, PrivateFilesError> {
    let dir = private_dir(kind, content_hash(files))?;
    for &(name, bytes, mode) in files {
        materialise(&dir, name, bytes, mode)?;
    }
    Ok(dir)
}

/// FNV-1a over the files' names, modes, lengths and bytes: names the directory of one build's
/// files, so that two `mpir` builds never share one. Not a defence: the bytes are compared.
fn content_hash(files: &[(&str, &[u8], u32)]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for &(name, bytes, mode) in files {
        eat(name.as_bytes());
        eat(&mode.to_le_bytes());
        eat(bytes);
    }
    h
}

/// This process's real uid (the owner its directories must have).
fn my_uid() -> Result<u32, PrivateFilesError> {
    mpir_target::live::procfs::ProcessFacts::read(std::process::id())
        .map(|f| f.uid)
        .map_err(|source| PrivateFilesError::Uid { source })
}

/// The directory for one build's files, created when missing, checked private.
fn private_dir(kind: &str, hash: u64) -> Result<PathBuf, PrivateFilesError> {
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
    let dir = base.join(format!("{kind}-{hash:016x}"));
    private(&dir, uid)?;
    Ok(dir)
}

/// Creates `dir` mode 0700 when missing; an error unless it is a directory (not a link) owned
/// by `uid` that nobody else may enter or write.
fn private(dir: &Path, uid: u32) -> Result<(), PrivateFilesError> {
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
        Some(why) => Err(PrivateFilesError::NotPrivate {
            path: dir.to_path_buf(),
            why,
        }),
        None => Ok(()),
    }
}

/// Makes `dir/name` a regular file holding exactly `bytes` with permission bits `mode`: kept
/// when it already is, else written anew and renamed into place.
fn materialise(dir: &Path, name: &str, bytes: &[u8], mode: u32) -> Result<(), PrivateFilesError> {
    let path = dir.join(name);
    let intact = std::fs::symlink_metadata(&path).is_ok_and(|m| {
        m.file_type().is_file() && m.mode() & 0o7777 == mode && m.len() == bytes.len() as u64
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
        .mode(mode)
        .open(&tmp)
        .and_then(|mut f| {
            // The mode given to open() is masked by the umask: set it exactly.
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
            f.write_all(bytes)?;
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io(&path)(e));
    }
    tracing::info!(path = %path.display(), "private file written");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRAM: &[u8] = b"#!/bin/sh\necho fine\n";

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("mpir-private-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn only(dir: &Path, names: &[&str]) {
        for e in std::fs::read_dir(dir).unwrap() {
            let name = e.unwrap().file_name();
            assert!(
                names.iter().any(|n| std::ffi::OsStr::new(n) == name),
                "{name:?}"
            );
        }
    }

    #[test]
    fn a_tampered_or_loosened_file_is_rewritten() {
        let uid = my_uid().unwrap();
        let dir = scratch("tamper");
        private(&dir, uid).unwrap();
        materialise(&dir, "prog", PROGRAM, 0o700).unwrap();
        materialise(&dir, "lib.so", b"\x7fELF", 0o600).unwrap();
        let prog = dir.join("prog");
        assert_eq!(std::fs::read(&prog).unwrap(), PROGRAM);
        std::fs::write(&prog, b"#!/bin/sh\necho pwned\n").unwrap();
        materialise(&dir, "prog", PROGRAM, 0o700).unwrap();
        assert_eq!(std::fs::read(&prog).unwrap(), PROGRAM);
        // Same bytes, but writable by others: rewritten with the mode asked for.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o777)).unwrap();
        materialise(&dir, "prog", PROGRAM, 0o700).unwrap();
        assert_eq!(std::fs::metadata(&prog).unwrap().mode() & 0o777, 0o700);
        assert_eq!(
            std::fs::metadata(dir.join("lib.so")).unwrap().mode() & 0o777,
            0o600
        );
        // Only the files are left (no temporary file).
        only(&dir, &["prog", "lib.so"]);
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
        assert!(matches!(e, PrivateFilesError::NotPrivate { .. }), "{e}");
        // Another owner is refused too (any uid but ours).
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let e = private(&dir, uid.wrapping_add(1)).unwrap_err();
        assert!(matches!(e, PrivateFilesError::NotPrivate { .. }), "{e}");
        std::fs::remove_dir(&dir).unwrap();
        // A symbolic link to a private directory is not one.
        let real = scratch("real");
        private(&real, uid).unwrap();
        std::os::unix::fs::symlink(&real, &dir).unwrap();
        let e = private(&dir, uid).unwrap_err();
        assert!(matches!(e, PrivateFilesError::NotPrivate { .. }), "{e}");
        std::fs::remove_file(&dir).unwrap();
        std::fs::remove_dir(&real).unwrap();
    }

    #[test]
    fn threads_writing_a_file_at_once_all_succeed() {
        // Tests and tools install from several threads of one process: each writer needs its
        // own temporary file (one name per process lost a race here once).
        let uid = my_uid().unwrap();
        let dir = scratch("threads");
        private(&dir, uid).unwrap();
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| s.spawn(|| materialise(&dir, "prog", PROGRAM, 0o700)))
                .collect();
            for h in handles {
                h.join().unwrap().unwrap();
            }
        });
        assert_eq!(std::fs::read(dir.join("prog")).unwrap(), PROGRAM);
        only(&dir, &["prog"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_directory_name_follows_names_modes_and_bytes() {
        let base = content_hash(&[("a", b"x", 0o700)]);
        assert_ne!(base, content_hash(&[("b", b"x", 0o700)]));
        assert_ne!(base, content_hash(&[("a", b"y", 0o700)]));
        assert_ne!(base, content_hash(&[("a", b"x", 0o600)]));
        // Lengths are hashed: moving a byte between name and contents changes the name.
        assert_ne!(
            content_hash(&[("ab", b"", 0)]),
            content_hash(&[("a", b"b", 0)])
        );
    }
}
