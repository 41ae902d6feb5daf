//! The tool rendezvous files a PMIx server writes for tools, found and validated.
//!
//! PRRTE's `prterun` (Open MPI 5's `mpirun`) writes three identical files, mode 0600, in its
//! session directory `<tmp>/<prefix>.<pid>/` (`ompi.<pid>` under Open MPI's `mpirun`):
//! `pmix.<host>.tool`, `pmix.<host>.tool.<pid>` and `pmix.<host>.tool.<nspace>`. Their five
//! lines are the server's URI, its PMIx version, its pid, its `uid:gid` and the date.

use crate::{PmixError, RendezvousProblem};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// At most this many bytes of a rendezvous file are read (a real one is under 200).
const MAX_FILE: u64 = 4096;
/// At most this many entries of a temporary directory are looked at.
const MAX_DIR_ENTRIES: usize = 100_000;
/// At most this many candidate files are validated.
const MAX_CANDIDATES: usize = 64;

/// A validated tool rendezvous file of a running PMIx server.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Rendezvous {
    /// The file.
    pub file: PathBuf,
    /// The server's URI, e.g. `prterun-vm-523@0.0;tcp4://127.0.0.1:41147`.
    pub uri: String,
    /// The server's PMIx version, e.g. `5.0.11rc1`.
    pub version: String,
    /// The server's pid.
    pub pid: u32,
    /// The uid the server wrote in it.
    pub uid: u32,
    /// The gid the server wrote in it.
    pub gid: u32,
}

/// Our effective uid (the owner of `/proc/self`).
pub(crate) fn our_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

fn alive(pid: u32) -> bool {
    pid != 0 && Path::new(&format!("/proc/{pid}")).exists()
}

/// Finds the tool rendezvous file of the PMIx server `server_pid` and validates it.
///
/// Looks in the temporary directories (`$TMPDIR`, `/tmp`) for `pmix.*.tool.<pid>`, directly
/// and in the session directories `*.<pid>/` (`ompi.<pid>` of Open MPI's `mpirun`, `prte.<pid>`
/// of a PRRTE DVM), then for `pmix.*.tool` in those session directories. The first candidate
/// that validates is the answer; when none does, the first refusal is the error.
///
/// # Errors
/// [`PmixError::NotAServer`] when the process does not exist or no rendezvous file names it;
/// [`PmixError::Rendezvous`] naming the file and the [`RendezvousProblem`] when files were found
/// but all refused (another uid's, writable by others, not a regular file, garbage, another pid's,
/// stale).
pub fn rendezvous(server_pid: u32) -> Result<Rendezvous, PmixError> {
    if !alive(server_pid) {
        return Err(PmixError::NotAServer {
            pid: server_pid,
            reason: "no such process".into(),
        });
    }
    let mut bases = vec![std::env::temp_dir(), PathBuf::from("/tmp")];
    bases.dedup();
    let suffix = format!(".{server_pid}");
    let named = |n: &str| n.starts_with("pmix.") && n.contains(".tool") && n.ends_with(&suffix);
    // Every candidate, those naming the pid first: the first that validates wins, so that a
    // file planted by someone else cannot hide the server's own.
    let (mut by_pid, mut generic) = (Vec::new(), Vec::new());
    for base in &bases {
        let Ok(rd) = std::fs::read_dir(base) else {
            continue;
        };
        for entry in rd.take(MAX_DIR_ENTRIES).flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if named(&name) {
                by_pid.push(entry.path());
                continue;
            }
            if !name.ends_with(&suffix) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let Ok(sub) = std::fs::read_dir(entry.path()) else {
                continue;
            };
            for f in sub.take(MAX_DIR_ENTRIES).flatten() {
                let n = f.file_name().to_string_lossy().into_owned();
                if named(&n) {
                    by_pid.push(f.path());
                } else if n.starts_with("pmix.") && n.ends_with(".tool") {
                    generic.push(f.path());
                }
            }
        }
    }
    let mut first_refusal = None;
    for f in by_pid.iter().chain(&generic).take(MAX_CANDIDATES) {
        match validate_file(f, Some(server_pid)) {
            Ok(r) => return Ok(r),
            Err(e) => {
                first_refusal.get_or_insert(e);
            }
        }
    }
    Err(first_refusal.unwrap_or_else(|| PmixError::NotAServer {
        pid: server_pid,
        reason: format!(
            "no tool rendezvous file pmix.<host>.tool.{server_pid} in {} or their *.{server_pid}/ session directories",
            bases
                .iter()
                .map(|b| b.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }))
}

/// Validates the rendezvous file `file`: a regular file (not a symlink), ours, not writable by
/// others, the five lines of a PMIx server, naming `expected_pid` when given, whose server is
/// running.
///
/// # Errors
/// [`PmixError::Rendezvous`] naming the file and why.
pub fn validate_file(file: &Path, expected_pid: Option<u32>) -> Result<Rendezvous, PmixError> {
    let refuse = |problem| PmixError::Rendezvous {
        file: file.to_path_buf(),
        problem,
    };
    let meta = std::fs::symlink_metadata(file)
        .map_err(|e| refuse(RendezvousProblem::Unreadable(e.to_string())))?;
    if !meta.file_type().is_file() {
        return Err(refuse(RendezvousProblem::NotRegularFile));
    }
    let ours = our_uid();
    if meta.uid() != ours {
        return Err(refuse(RendezvousProblem::Foreign {
            owner: meta.uid(),
            ours,
        }));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(refuse(RendezvousProblem::Writable { mode }));
    }
    let bytes = {
        use std::io::Read;
        let mut buf = Vec::new();
        std::fs::File::open(file)
            .and_then(|f| f.take(MAX_FILE).read_to_end(&mut buf))
            .map_err(|e| refuse(RendezvousProblem::Unreadable(e.to_string())))?;
        buf
    };
    let r = parse(&bytes).map_err(|w| refuse(RendezvousProblem::Garbage(w)))?;
    if let Some(asked) = expected_pid
        && r.pid != asked
    {
        return Err(refuse(RendezvousProblem::OtherPid {
            found: r.pid,
            asked,
        }));
    }
    if !alive(r.pid) {
        return Err(refuse(RendezvousProblem::Stale { pid: r.pid }));
    }
    Ok(Rendezvous {
        file: file.to_path_buf(),
        ..r
    })
}

/// The fields of a rendezvous file's text, or what is wrong with it.
fn parse(bytes: &[u8]) -> Result<Rendezvous, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())?;
    let mut lines = text.lines();
    let mut line = |what: &str| {
        lines
            .next()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .ok_or_else(|| format!("no {what} line"))
    };
    let uri = line("URI")?;
    // `<nspace>.<rank>;<transport>://<address>`
    if !uri.contains(';') || !uri.contains("://") {
        return Err(format!("first line {uri:?} is not a PMIx server URI"));
    }
    let version = line("version")?;
    if !version.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(format!("second line {version:?} is not a PMIx version"));
    }
    let pid_line = line("pid")?;
    let pid = pid_line
        .parse::<u32>()
        .ok()
        .filter(|&p| p > 0)
        .ok_or_else(|| format!("third line {pid_line:?} is not a pid"))?;
    let ids = line("uid:gid")?;
    let (uid, gid) = ids
        .split_once(':')
        .and_then(|(u, g)| Some((u.parse().ok()?, g.parse().ok()?)))
        .ok_or_else(|| format!("fourth line {ids:?} is not uid:gid"))?;
    Ok(Rendezvous {
        file: PathBuf::new(),
        uri: uri.to_string(),
        version: version.to_string(),
        pid,
        uid,
        gid,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_five_lines_of_prterun_parse() {
        let r = parse(
            b"prterun-vm-523@0.0;tcp4://127.0.0.1:41147\n5.0.11rc1\n523\n0:0\nTue Nov 24 21:57:49 2026\n",
        )
        .unwrap();
        assert_eq!(r.uri, "prterun-vm-523@0.0;tcp4://127.0.0.1:41147");
        assert_eq!(
            (r.version.as_str(), r.pid, r.uid, r.gid),
            ("5.0.11rc1", 523, 0, 0)
        );
    }

    #[test]
    fn garbage_says_which_line() {
        for (text, want) in [
            (&b""[..], "no URI line"),
            (b"hello\n", "not a PMIx server URI"),
            (b"a@0.0;tcp4://x:1\nv5\n", "not a PMIx version"),
            (b"a@0.0;tcp4://x:1\n5.0\n0\n0:0\n", "not a pid"),
            (b"a@0.0;tcp4://x:1\n5.0\n12\nroot\n", "not uid:gid"),
            (b"\xff\xfe", "not UTF-8"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
    }
}
