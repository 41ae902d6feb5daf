//! Sending the agent's program to nodes that do not share the front end's file system (issue
//! 31, point 6): through the engine's own link — the standard input of a command per node
//! ([`crate::Launch::Template`]) — into a private file there, checked against its SHA-256
//! digest before it runs, and removed by the agent as it starts ([`remove_own_file`]).
//!
//! The node runs `sh -s` (words any remote shell joins and parses the same); the front end
//! writes one line of shell to it, waits for the line `mpir-ship-ready` the shell prints once it has
//! read that line (so that the shell cannot have read any of the program), then writes the
//! program's bytes. The shell copies exactly that many bytes (`head -c`) into a file made by
//! `mktemp -d` under `umask 077`, checks the digest with `sha256sum -c`, and `exec`s it as the
//! agent; the agent's hello follows on the same link. A program sent must be statically linked
//! (nodes need not have the front end's libraries): `x86_64-unknown-linux-musl`.

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use mpir_wire::Transport;
use serde::{Deserialize, Serialize};

use crate::error::FrontEndError;

/// The line the node's shell prints once it has read the bootstrap line.
pub(crate) const READY: &[u8] = b"mpir-ship-ready\n";

/// The argument the agent is started with when it runs from a file sent to its node: it
/// removes that file as it starts.
pub const SHIPPED_FLAG: &str = "--shipped";

/// Largest program sent (a static `mpir` is tens of MiB; a bound against a wrong path).
const MAX_LEN: u64 = 1 << 30;

/// The program an agent is sent, as the plan carries it down the tree: its size and digest
/// (every agent that starts a subtree sends its own program, `/proc/self/exe`, checked
/// against them first).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Shipment {
    /// Its size in bytes.
    pub len: u64,
    /// Its SHA-256 digest, 64 lowercase hexadecimal digits.
    pub sha256: String,
}

impl Shipment {
    /// The shipment of the program at `path`: a regular file of at most 1 GiB, a statically
    /// linked ELF executable (no `PT_INTERP`: a node need not have this one's libraries).
    ///
    /// # Errors
    /// [`FrontEndError::Ship`] naming the file and what is wrong.
    pub fn of(path: &Path) -> Result<Shipment, FrontEndError> {
        let bad = |why: String| FrontEndError::Ship {
            path: path.to_path_buf(),
            why,
        };
        let bytes = read_bounded(path).map_err(|e| bad(e.to_string()))?;
        if let Some(why) = not_static_elf(&bytes) {
            return Err(bad(why));
        }
        Ok(Shipment {
            len: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        })
    }
}

/// The bytes of `path`, a regular file of at most [`MAX_LEN`].
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let f = std::fs::File::open(path)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    f.take(MAX_LEN + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_LEN {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            MAX_LEN >> 20
        )));
    }
    Ok(bytes)
}

/// Why `bytes` is not a statically linked 64-bit little-endian ELF executable, if it is not.
fn not_static_elf(bytes: &[u8]) -> Option<String> {
    const PT_INTERP: u32 = 3;
    if bytes.get(..4) != Some(b"\x7fELF") {
        return Some("not an ELF file".into());
    }
    if bytes.get(4..6) != Some(&[2, 1]) {
        return Some("not a 64-bit little-endian ELF file".into());
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?));
    let u32_at = |o: usize| Some(u32::from_le_bytes(bytes.get(o..o + 4)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?));
    let (Some(e_type), Some(phoff), Some(phentsize), Some(phnum)) =
        (u16_at(16), u64_at(32), u16_at(54), u16_at(56))
    else {
        return Some("a truncated ELF header".into());
    };
    // ET_EXEC, or ET_DYN for a static-pie executable (told apart by PT_INTERP below).
    if e_type != 2 && e_type != 3 {
        return Some(format!("not an executable (ELF type {e_type})"));
    }
    for i in 0..u64::from(phnum) {
        let at = phoff
            .checked_add(i * u64::from(phentsize))
            .and_then(|o| usize::try_from(o).ok());
        match at.and_then(u32_at) {
            Some(PT_INTERP) => {
                return Some(
                    "dynamically linked (it names a program interpreter): send a static build \
                     (cargo build --release --target x86_64-unknown-linux-musl -p mpir-cli)"
                        .into(),
                );
            }
            Some(_) => {}
            None => return Some("a program header lies outside the file".into()),
        }
    }
    None
}

/// SHA-256 of `bytes` in lowercase hexadecimal.
fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `word` quoted for a POSIX shell (single quotes; a single quote as `'\''`).
fn quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The one line of shell that receives the program, checks it and starts it as the agent
/// with `args` (the agent's command after its program: `agent` and its options) and
/// [`SHIPPED_FLAG`]. Braces make
/// the shell read the whole line before it runs any of it.
///
/// # Errors
/// An argument that is not UTF-8 or holds a line break (the line must stay one line).
pub(crate) fn bootstrap(s: &Shipment, args: &[OsString]) -> Result<Vec<u8>, String> {
    let mut words = Vec::with_capacity(args.len() + 1);
    for a in args {
        let a = a
            .to_str()
            .ok_or_else(|| format!("an agent argument is not UTF-8: {a:?}"))?;
        if a.contains(['\n', '\r']) {
            return Err(format!("an agent argument holds a line break: {a:?}"));
        }
        words.push(quote(a));
    }
    words.push(SHIPPED_FLAG.into());
    let ready = std::str::from_utf8(READY).unwrap_or_default().trim_end();
    let line = format!(
        "{{ set -e; umask 077; d=$(mktemp -d \"${{TMPDIR:-/tmp}}/mpir-agent.XXXXXXXX\"); \
         f=\"$d/mpir\"; printf '%s\\n' {ready}; head -c {len} > \"$f\"; \
         if ! printf '%s  %s\\n' {sha} \"$f\" | sha256sum -c --status; then rm -rf \"$d\"; \
         echo 'mpir: the agent program arrived damaged or cut short (SHA-256 {sha} expected)' >&2; \
         exit 126; fi; chmod 700 \"$f\"; exec \"$f\" {args}; }}\n",
        len = s.len,
        sha = s.sha256,
        args = words.join(" "),
    );
    Ok(line.into_bytes())
}

/// The bytes of `source`, checked to be shipment `s` (read once for every node it is sent
/// to).
///
/// # Errors
/// Why not, in words (every agent it was for is then reported not started with them).
pub(crate) fn load(source: &Path, s: &Shipment) -> Result<Vec<u8>, String> {
    let bytes = read_bounded(source).map_err(|e| format!("{}: {e}", source.display()))?;
    if bytes.len() as u64 != s.len || sha256_hex(&bytes) != s.sha256 {
        return Err(format!(
            "{} is not the program to send (its size or SHA-256 differs)",
            source.display()
        ));
    }
    Ok(bytes)
}

/// Sends `bytes` (a [`load`]ed program) over `link`, a node's `sh -s`: the bootstrap `line`,
/// the shell's [`READY`], then the bytes; every wait ends by `deadline`. The agent's hello
/// follows on `link`.
///
/// # Errors
/// Why not, in words (the agent is then reported not started with them).
pub(crate) fn deliver(
    link: &mut dyn Transport,
    line: &[u8],
    bytes: &[u8],
    deadline: Instant,
) -> Result<(), String> {
    let bound = |link: &mut dyn Transport| {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err("the start timeout passed while sending the agent program".to_string());
        }
        link.set_timeout(left.max(Duration::from_millis(1)))
            .map_err(|e| e.to_string())
    };
    bound(link)?;
    link.write_all(line)
        .and_then(|()| link.flush())
        .map_err(|e| format!("writing the bootstrap to the node's shell: {e}"))?;
    // Byte by byte: nothing past the line is the shell's to read, nor ours.
    let mut got = Vec::with_capacity(READY.len());
    while got.len() < READY.len() {
        bound(link)?;
        let mut b = [0u8];
        match link.read(&mut b) {
            Ok(0) => {
                return Err(format!(
                    "the node's shell ended before it was ready to receive the agent program \
                     (after {:?})",
                    String::from_utf8_lossy(&got)
                ));
            }
            Ok(_) => got.push(b[0]),
            Err(e) => return Err(format!("waiting for the node's shell: {e}")),
        }
        if !READY.starts_with(&got) {
            return Err(format!(
                "the node's shell answered {:?}, not {:?}",
                String::from_utf8_lossy(&got),
                String::from_utf8_lossy(READY)
            ));
        }
    }
    for chunk in bytes.chunks(1 << 16) {
        bound(link)?;
        link.write_all(chunk)
            .map_err(|e| format!("sending the agent program: {e}"))?;
    }
    link.flush()
        .map_err(|e| format!("sending the agent program: {e}"))
}

/// Where an agent started from a file sent to its node finds its own program to send on down
/// its subtree: its executable, even once removed.
pub(crate) fn own_program() -> PathBuf {
    PathBuf::from("/proc/self/exe")
}

/// Removes the file this agent runs from and its private directory, when it was sent here
/// ([`SHIPPED_FLAG`]): only a file named `mpir` in a directory `mpir-agent.*` of this user's,
/// as the bootstrap made them. The running program is unaffected; nothing is left on the node
/// however the agent ends.
///
/// # Errors
/// Why the file was left (it is then the caller's to report).
pub fn remove_own_file() -> Result<(), String> {
    use std::os::unix::fs::MetadataExt as _;
    let exe = std::fs::read_link("/proc/self/exe").map_err(|e| format!("/proc/self/exe: {e}"))?;
    let dir = exe
        .parent()
        .filter(|d| {
            d.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("mpir-agent."))
        })
        .filter(|_| exe.file_name().is_some_and(|n| n == "mpir"))
        .ok_or_else(|| format!("{} is not where a sent agent program is put", exe.display()))?;
    let uid = nix::unistd::getuid().as_raw();
    let owned = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() == uid);
    if !owned(&exe) || !owned(dir) {
        return Err(format!("{} is not this user's", exe.display()));
    }
    std::fs::remove_file(&exe).map_err(|e| format!("{}: {e}", exe.display()))?;
    std::fs::remove_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_static_elf_executable_is_sent() {
        // This test program is dynamically linked (the host's target).
        let own = std::env::current_exe().unwrap();
        let e = Shipment::of(&own).unwrap_err();
        assert!(e.to_string().contains("dynamically linked"), "{e}");
        let dir = std::env::temp_dir().join(format!("mpir-ship-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("script");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        let e = Shipment::of(&script).unwrap_err();
        assert!(e.to_string().contains("not an ELF file"), "{e}");
        let e = Shipment::of(&dir).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        // A header whose program headers lie past the end.
        let mut elf = vec![0u8; 64];
        elf[..6].copy_from_slice(b"\x7fELF\x02\x01");
        elf[16] = 2;
        elf[32..40].copy_from_slice(&4096u64.to_le_bytes());
        elf[54] = 56;
        elf[56] = 1;
        assert_eq!(
            not_static_elf(&elf).as_deref(),
            Some("a program header lies outside the file")
        );
        // The same with no program header: static.
        elf[56] = 0;
        assert_eq!(not_static_elf(&elf), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A private directory for one test.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mpir-ship-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// `sh -s` with its stdio piped, `TMPDIR` set to `tmp`.
    fn shell(tmp: &Path) -> std::process::Child {
        std::process::Command::new("sh")
            .arg("-s")
            .env("TMPDIR", tmp)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    #[test]
    fn a_real_shell_receives_the_program_checks_it_and_runs_it_with_its_arguments() {
        let dir = scratch("deliver");
        let tmp = dir.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        // The "agent": prints where it runs from, its mode and its arguments.
        let program = dir.join("program");
        std::fs::write(
            &program,
            "#!/bin/sh\nprintf 'ran %s %s' \"$0\" \"$(stat -c %a \"$0\")\"\n\
             for a; do printf ' [%s]' \"$a\"; done; echo\n",
        )
        .unwrap();
        let bytes = std::fs::read(&program).unwrap();
        let s = Shipment {
            len: bytes.len() as u64,
            sha256: sha256_hex(&bytes),
        };
        let line = bootstrap(&s, &["agent".into(), "--node".into(), "it's n1".into()]).unwrap();
        let mut child = shell(&tmp);
        let mut link =
            mpir_wire::Pipe::new(child.stdout.take().unwrap(), child.stdin.take().unwrap());
        let deadline = Instant::now() + Duration::from_secs(30);
        deliver(&mut link, &line, &load(&program, &s).unwrap(), deadline).unwrap();
        let (mut out, _stdin) = link.into_inner();
        let mut text = String::new();
        out.read_to_string(&mut text).unwrap();
        assert!(child.wait().unwrap().success());
        let tmp_s = tmp.display().to_string();
        let rest = text
            .strip_prefix(&format!("ran {tmp_s}/mpir-agent."))
            .unwrap_or_else(|| panic!("{text:?}"));
        assert!(
            rest.ends_with("/mpir 700 [agent] [--node] [it's n1] [--shipped]\n"),
            "{text:?}"
        );
        // A program that is not the shipment's is refused before anything is sent.
        let other = dir.join("other");
        std::fs::write(&other, b"#!/bin/sh\n").unwrap();
        let e = load(&other, &s).unwrap_err();
        assert!(e.contains("is not the program to send"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_program_is_refused_on_arrival_and_nothing_is_left() {
        let dir = scratch("damaged");
        let tmp = dir.join("tmp");
        std::fs::create_dir(&tmp).unwrap();
        let program = b"#!/bin/sh\necho ran\n";
        // The digest of other bytes than those sent.
        let s = Shipment {
            len: program.len() as u64,
            sha256: sha256_hex(b"#!/bin/sh\necho RAN\n"),
        };
        let line = bootstrap(&s, &[]).unwrap();
        let mut child = shell(&tmp);
        let mut stdin = child.stdin.take().unwrap();
        let mut stdout = child.stdout.take().unwrap();
        use std::io::Write as _;
        stdin.write_all(&line).unwrap();
        let mut ready = vec![0u8; READY.len()];
        stdout.read_exact(&mut ready).unwrap();
        assert_eq!(ready, READY);
        stdin.write_all(program).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(126));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("arrived damaged or cut short"), "{err}");
        let mut rest = String::new();
        stdout.read_to_string(&mut rest).unwrap();
        assert!(!rest.contains("ran"), "{rest}");
        assert_eq!(
            std::fs::read_dir(&tmp).unwrap().count(),
            0,
            "a file was left"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_bootstrap_quotes_every_argument_and_stays_one_line() {
        let s = Shipment {
            len: 12,
            sha256: "ab".repeat(32),
        };
        let line = bootstrap(&s, &["agent".into(), "--node".into(), "it's n1".into()]).unwrap();
        let text = String::from_utf8(line).unwrap();
        assert_eq!(text.matches('\n').count(), 1);
        assert!(text.ends_with("; }\n"), "{text}");
        assert!(text.contains("head -c 12 "), "{text}");
        assert!(
            text.contains(r#"exec "$f" 'agent' '--node' 'it'\''s n1' --shipped; }"#),
            "{text}"
        );
        assert!(bootstrap(&s, &["a\nb".into()]).is_err());
    }
}
