//! One tool at a time per PMIx server, across the processes of this user, with a gap between
//! one tool's finalize and the next one's connect.
//!
//! Measured with PRRTE 3.0.14 (Open MPI 5.0.x's `prterun`), with our tool and with a plain C
//! tool alike: when two tools are connected at once, or a tool connects less than about a
//! second after another one finalized, `prterun` does not exit when its job ends — it waits for
//! ever, and so does whoever waits for `mpirun`. Two commands run back to back (`mpir attach`
//! then `mpir stacks`) are exactly that. So every connection to a server whose pid is known
//! takes a *turn*: an exclusive `flock` on a file of ours named after the server (pid and start
//! time), held until the connection is finalized, and the next holder waits until
//! [`GAP`] has passed since the previous one let go (the file's modification time).
//!
//! The files live in a directory of this user's only (`$XDG_RUNTIME_DIR/mpir-rs/pmix`, else
//! `<tmp>/mpir-rs-<uid>/pmix`), created mode 0700 and refused when it is anyone else's or
//! writable by others; nothing is written anywhere near the server. When no such directory can
//! be used, the turn is this process's only (the gap still holds within the process).

use crate::PmixError;
use crate::rendezvous::our_uid;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use nix::fcntl::{Flock, FlockArg};

/// The least time between one tool's finalize and the next tool's connect to the same server
/// (measured: 0.6 s apart left `prterun` running after its job, 1 s apart did not).
pub const GAP: Duration = Duration::from_secs(2);

/// Between two tries of a turn another process holds.
const POLL: Duration = Duration::from_millis(20);

/// At most this many bytes of a turn file are read.
const MAX_FILE: u64 = 256;

/// The last release of a turn in this process: which server, when.
static LAST: Mutex<Option<((u32, u64), Instant)>> = Mutex::new(None);

fn last() -> std::sync::MutexGuard<'static, Option<((u32, u64), Instant)>> {
    LAST.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A turn at a server: held while a connection to it lives; [`Turn::release`] lets it go.
#[derive(Debug)]
pub(crate) struct Turn {
    key: (u32, u64),
    lock: Option<Flock<File>>,
}

/// The start time of `pid` (clock ticks since boot, field 22 of `/proc/PID/stat`), 0 when
/// unknown.
fn start_time(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let (_, rest) = s.rsplit_once(") ")?;
            rest.split_whitespace().nth(19)?.parse().ok()
        })
        .unwrap_or(0)
}

/// A directory of ours only, created when missing; `None` when it is not safe to use.
fn private_dir(dir: &Path, uid: u32) -> Option<PathBuf> {
    match std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
    {
        Ok(()) => {}
        Err(_) => return None,
    }
    let m = std::fs::symlink_metadata(dir).ok()?;
    (m.is_dir() && m.uid() == uid && m.permissions().mode() & 0o022 == 0).then(|| dir.to_path_buf())
}

/// The directory of the turn files, when one is safe to use.
fn turn_dir() -> Option<PathBuf> {
    let uid = our_uid();
    if let Some(run) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty())
        && let Some(base) = private_dir(Path::new(&run), uid)
        && let Some(d) = private_dir(&base.join("mpir-rs"), uid)
    {
        return private_dir(&d.join("pmix"), uid);
    }
    let base = private_dir(&std::env::temp_dir().join(format!("mpir-rs-{uid}")), uid)?;
    private_dir(&base.join("pmix"), uid)
}

/// Opens (creating) the turn file of `key` in `dir`: a regular file of ours, not a link.
fn open(dir: &Path, key: (u32, u64)) -> Option<File> {
    let path = dir.join(format!("server-{}-{}", key.0, key.1));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(&path)
        .ok()?;
    let m = f.metadata().ok()?;
    (m.is_file() && m.uid() == our_uid()).then_some(f)
}

/// What the file says: `held <pid>` while a connection lives, `released <pid>` after.
fn read_state(f: &mut File) -> String {
    let mut s = String::new();
    let _ = f.rewind();
    let _ = Read::by_ref(f).take(MAX_FILE).read_to_string(&mut s);
    s
}

fn write_state(f: &mut File, state: &str) {
    let _ = f.set_len(0);
    let _ = f.rewind();
    let _ = f.write_all(format!("{state} {}\n", std::process::id()).as_bytes());
    let _ = f.sync_data();
}

/// At most this many entries of the turn directory are looked at by [`sweep`].
const MAX_SWEEP: usize = 256;

/// Removes the turn files of servers that are gone (their pid is not running with that start
/// time) and that nobody holds.
fn sweep(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in rd.take(MAX_SWEEP).flatten() {
        let name = entry.file_name();
        let Some((pid, start)) = name
            .to_str()
            .and_then(|n| n.strip_prefix("server-"))
            .and_then(|n| n.split_once('-'))
            .and_then(|(p, s)| Some((p.parse::<u32>().ok()?, s.parse::<u64>().ok()?)))
        else {
            continue;
        };
        if start_time(pid) == start {
            continue;
        }
        if let Some(f) = open(dir, (pid, start))
            && let Ok(held) = Flock::lock(f, FlockArg::LockExclusiveNonblock)
        {
            let _ = std::fs::remove_file(entry.path());
            drop(held);
        }
    }
}

/// Takes the turn at server `pid`, waiting up to `timeout` for another process's connection
/// to end, then for [`GAP`] since it ended.
///
/// # Errors
/// [`PmixError::Busy`] when another process still holds its connection at the deadline.
pub(crate) fn take(pid: u32, server: &str, timeout: Duration) -> Result<Turn, PmixError> {
    let key = (pid, start_time(pid));
    let deadline = Instant::now() + timeout;
    let mut lock = None;
    let dir = turn_dir();
    if let Some(d) = &dir {
        sweep(d);
    }
    if let Some(mut file) = dir.and_then(|d| open(&d, key)) {
        let mut f = loop {
            match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                Ok(l) => break l,
                Err((back, _)) => {
                    file = back;
                    if Instant::now() >= deadline {
                        let state = read_state(&mut file);
                        let holder = state
                            .strip_prefix("held ")
                            .and_then(|p| p.trim().parse().ok());
                        return Err(PmixError::Busy {
                            server: server.to_string(),
                            holder,
                            after: timeout,
                        });
                    }
                    std::thread::sleep(POLL);
                }
            }
        };
        let state = read_state(&mut f);
        let since = if state.starts_with("released") {
            f.metadata().and_then(|m| m.modified()).ok().map(|t| {
                SystemTime::now()
                    .duration_since(t)
                    .unwrap_or(Duration::ZERO)
            })
        } else if state.starts_with("held") {
            // Its holder died without letting go: when the server saw it go is unknown.
            Some(Duration::ZERO)
        } else {
            None
        };
        if let Some(since) = since {
            std::thread::sleep(GAP.saturating_sub(since));
        }
        write_state(&mut f, "held");
        lock = Some(f);
    }
    let in_process = *last();
    if let Some((k, at)) = in_process
        && k == key
    {
        std::thread::sleep(GAP.saturating_sub(at.elapsed()));
    }
    Ok(Turn { key, lock })
}

impl Turn {
    /// Lets the turn go once the connection is finalized: the time is written for the next
    /// holder.
    pub(crate) fn release(mut self) {
        *last() = Some((self.key, Instant::now()));
        if let Some(f) = self.lock.as_mut() {
            write_state(f, "released");
        }
        // Dropping the Flock unlocks it.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg_attr(miri, ignore = "processes, file system and flock")]
    fn turns_exclude_each_other_and_keep_the_gap() {
        let mut server = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = server.id();
        let first = take(pid, "test server", Duration::from_secs(1)).unwrap();
        assert!(first.lock.is_some(), "a private directory was usable");
        let key = first.key;
        // Held (another open file description, as another process would have): busy, named.
        let t0 = Instant::now();
        let e = take(pid, "test server", Duration::from_millis(200)).unwrap_err();
        assert!(t0.elapsed() >= Duration::from_millis(200));
        match &e {
            PmixError::Busy { holder, .. } => assert_eq!(*holder, Some(std::process::id())),
            other => panic!("{other}"),
        }
        assert!(e.to_string().contains("test server"), "{e}");
        first.release();
        // Let go: the next turn comes GAP after, not before.
        let t0 = Instant::now();
        let second = take(pid, "test server", Duration::from_secs(5)).unwrap();
        let waited = t0.elapsed();
        assert!(waited >= GAP - Duration::from_millis(50), "{waited:?}");
        assert!(waited < GAP + Duration::from_secs(1), "{waited:?}");
        second.release();
        // Once the server is gone, its file is swept by the next turn at any server.
        let _ = server.kill();
        let _ = server.wait();
        let file = turn_dir()
            .unwrap()
            .join(format!("server-{}-{}", key.0, key.1));
        assert!(file.is_file());
        let other = take(std::process::id(), "this process", Duration::from_secs(1)).unwrap();
        assert!(!file.exists(), "{} swept", file.display());
        other.release();
    }

    #[test]
    #[cfg_attr(miri, ignore = "file system and flock")]
    fn a_turn_file_is_refused_when_it_is_a_link() {
        let dir = std::env::temp_dir().join(format!("mpir-turn-test-{}", std::process::id()));
        let dir = private_dir(&dir, our_uid()).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.join("server-1-2")).unwrap();
        assert!(
            open(&dir, (1, 2)).is_none(),
            "a symbolic link is not opened"
        );
        assert!(open(&dir, (1, 3)).is_some());
        // A directory others may write to is not ours to use.
        let open_dir = dir.join("shared");
        std::fs::create_dir(&open_dir).unwrap();
        std::fs::set_permissions(&open_dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(private_dir(&open_dir, our_uid()).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
