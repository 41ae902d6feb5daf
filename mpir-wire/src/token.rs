//! One-time tokens: made from the operating system's random number generator, checked in
//! constant time, used once, expiring with the session; and the ways one reaches an agent
//! without appearing on a command line (a private file, the environment, any reader such as
//! stdin).

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ring::rand::{SecureRandom, SystemRandom};
use subtle::ConstantTimeEq;

use crate::error::TokenError;
use crate::frame::AgentId;
use crate::handshake::{Hello, Refusal, RefusalReason};

/// Bytes in a token (256 bits).
pub const TOKEN_LEN: usize = 32;
/// Longest token text read from a file, a variable or a reader (64 hex digits and a newline,
/// with room for a carriage return).
const MAX_TOKEN_TEXT: usize = 2 * TOKEN_LEN + 2;

/// A one-time secret. Its `Debug` form hides it; it compares only in constant time
/// ([`Token::matches`]); it is zeroed when dropped.
#[derive(Clone)]
pub struct Token([u8; TOKEN_LEN]);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl PartialEq for Token {
    fn eq(&self, other: &Self) -> bool {
        self.matches(other)
    }
}
impl Eq for Token {}

impl Drop for Token {
    fn drop(&mut self) {
        for b in &mut self.0 {
            // Best effort (the optimiser may elide it; no `unsafe` volatile write here): a
            // token is single use, so a copy left in freed memory grants nothing once used.
            *b = 0;
        }
        std::hint::black_box(&self.0);
    }
}

impl Token {
    /// A fresh token from the operating system's random number generator.
    pub fn generate() -> Result<Token, TokenError> {
        let mut b = [0u8; TOKEN_LEN];
        SystemRandom::new()
            .fill(&mut b)
            .map_err(|_| TokenError::Random)?;
        Ok(Token(b))
    }

    /// A token from its bytes (as the wire carries it).
    pub(crate) fn from_bytes(b: [u8; TOKEN_LEN]) -> Token {
        Token(b)
    }

    /// Its bytes, for the wire.
    pub(crate) fn secret_bytes(&self) -> &[u8; TOKEN_LEN] {
        &self.0
    }

    /// True if both are the same token, compared in constant time.
    pub fn matches(&self, other: &Token) -> bool {
        self.0.ct_eq(&other.0).into()
    }

    /// Its text form: 64 lowercase hexadecimal digits. This is the secret; never put it on a
    /// command line.
    pub fn to_hex(&self) -> String {
        let mut s = String::with_capacity(2 * TOKEN_LEN);
        for b in self.0 {
            s.push(char::from(HEX[usize::from(b >> 4)]));
            s.push(char::from(HEX[usize::from(b & 15)]));
        }
        s
    }

    /// Parses the text form (surrounding white space ignored).
    pub fn from_hex(text: &str) -> Result<Token, TokenError> {
        let t = text.trim();
        let bad = || TokenError::Malformed {
            expected: 2 * TOKEN_LEN,
            found: t.chars().count(),
        };
        if t.len() != 2 * TOKEN_LEN {
            return Err(bad());
        }
        let mut b = [0u8; TOKEN_LEN];
        for (i, pair) in t.as_bytes().chunks_exact(2).enumerate() {
            let hi = hex_value(pair[0]).ok_or_else(bad)?;
            let lo = hex_value(pair[1]).ok_or_else(bad)?;
            b[i] = hi << 4 | lo;
        }
        Ok(Token(b))
    }

    /// Reads a token's text from `reader` (stdin, say): at most 66 bytes are read.
    pub fn read_from(reader: impl Read) -> Result<Token, TokenError> {
        let mut text = Vec::new();
        reader
            .take(MAX_TOKEN_TEXT as u64 + 1)
            .read_to_end(&mut text)
            .map_err(|source| TokenError::Io {
                path: PathBuf::from("<reader>"),
                source,
            })?;
        let line = text.split(|&b| b == b'\n').next().unwrap_or_default();
        Token::from_hex(std::str::from_utf8(line).unwrap_or_default())
    }

    /// Reads the token from environment variable `var`. The variable stays set (removing it
    /// would not erase `/proc/PID/environ`); clear it from the environment of any process the
    /// agent starts.
    pub fn from_env(var: &str) -> Result<Token, TokenError> {
        let value = std::env::var(var).map_err(|_| TokenError::NoVariable {
            var: var.to_string(),
        })?;
        Token::from_hex(&value)
    }

    /// The name of the token file for `name` ([`Token::write_file`]): `<name>.token`, every
    /// character but ASCII letters, digits, `-`, `_` and `.` replaced by `_`, no leading dot.
    pub fn file_name(name: &str) -> String {
        let safe: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        format!("{}.token", safe.trim_start_matches('.'))
    }

    /// Writes the token into a new file `dir/<name>.token` of mode 0600 and returns its path.
    /// `dir` must be a directory of this user's only (owned by the effective user, no group or
    /// other permissions, not a symbolic link); the file must not exist yet (never follows or
    /// reuses a planted file).
    pub fn write_file(&self, dir: &Path, name: &str) -> Result<PathBuf, TokenError> {
        check_private_dir(dir)?;
        let path = dir.join(Token::file_name(name));
        let io = |source| TokenError::Io {
            path: path.clone(),
            source,
        };
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC)
            .open(&path)
            .map_err(io)?;
        f.write_all(format!("{}\n", self.to_hex()).as_bytes())
            .map_err(io)?;
        f.sync_all().map_err(io)?;
        Ok(path)
    }

    /// Reads the token file at `path` and deletes it (a token file is read once). The file
    /// must be a regular file of the effective user with no group or other permissions, in a
    /// directory of this user's only; otherwise it is refused (and left alone).
    pub fn take_file(path: &Path) -> Result<Token, TokenError> {
        let io = |source| TokenError::Io {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            check_private_dir(dir)?;
        }
        let f = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(io)?;
        let meta = f.metadata().map_err(io)?;
        let unsafe_because = |why: String| TokenError::Unsafe {
            path: path.to_path_buf(),
            why,
        };
        if !meta.is_file() {
            return Err(unsafe_because("not a regular file".into()));
        }
        let uid = nix::unistd::geteuid().as_raw();
        if meta.uid() != uid {
            return Err(unsafe_because(format!(
                "owned by uid {}, not {uid}",
                meta.uid()
            )));
        }
        if meta.mode() & 0o077 != 0 {
            return Err(unsafe_because(format!(
                "mode {:o} lets others read it",
                meta.mode() & 0o777
            )));
        }
        let token = Token::read_from(&f);
        fs::remove_file(path).map_err(io)?;
        token
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// A directory only this user can enter, list or write: owned by the effective user, no
/// group or other permission bits, not a symbolic link.
fn check_private_dir(dir: &Path) -> Result<(), TokenError> {
    let meta = fs::symlink_metadata(dir).map_err(|source| TokenError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let why = if !meta.is_dir() {
        Some("not a directory (or a symbolic link)".to_string())
    } else if meta.uid() != nix::unistd::geteuid().as_raw() {
        Some(format!("owned by uid {}", meta.uid()))
    } else if meta.mode() & 0o077 != 0 {
        Some(format!(
            "mode {:o} opens it to others (0700 needed)",
            meta.mode() & 0o777
        ))
    } else {
        None
    };
    match why {
        Some(why) => Err(TokenError::Unsafe {
            path: dir.to_path_buf(),
            why,
        }),
        None => Ok(()),
    }
}

/// How many hellos a [`TokenBook`] refused, by reason.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RefusalCounts {
    /// Hellos without a token.
    pub missing: u64,
    /// Tokens not issued for that node (or for no node).
    pub unknown: u64,
    /// Tokens already used.
    pub reused: u64,
    /// Tokens past their session's end.
    pub expired: u64,
}

impl RefusalCounts {
    /// All refusals.
    pub fn total(&self) -> u64 {
        self.missing + self.unknown + self.reused + self.expired
    }
}

/// A token handed out by [`TokenBook::issue`].
#[derive(Debug)]
#[non_exhaustive]
pub struct Issued {
    /// The secret to deliver to the node's agent (file, environment or stdin; never argv).
    pub token: Token,
    /// The id the agent will get in its [`crate::Welcome`].
    pub agent_id: AgentId,
}

#[derive(Debug)]
struct Entry {
    agent_id: AgentId,
    token: Token,
    expires: Instant,
    used: bool,
}

#[derive(Debug, Default)]
struct Book {
    entries: HashMap<String, Entry>,
    next_id: u32,
    counts: RefusalCounts,
}

/// The front end's tokens: one per expected node, issued before its agent starts, checked
/// and consumed by the agent's hello. Shared by the threads accepting agents.
#[derive(Debug)]
pub struct TokenBook {
    lifetime: Duration,
    book: Mutex<Book>,
}

impl TokenBook {
    /// An empty book whose tokens expire `lifetime` after they are issued (the session's
    /// lifetime).
    pub fn new(lifetime: Duration) -> TokenBook {
        TokenBook {
            lifetime,
            book: Mutex::new(Book::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        // A panic while holding the lock leaves the book consistent (every update is one
        // assignment), so a poisoned lock is still usable.
        self.book.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Issues a fresh token for `node` (replacing an earlier one; the node keeps its id).
    pub fn issue(&self, node: &str) -> Result<Issued, TokenError> {
        self.issue_at(node, Instant::now())
    }

    /// [`TokenBook::issue`] as of `now`.
    pub fn issue_at(&self, node: &str, now: Instant) -> Result<Issued, TokenError> {
        let token = Token::generate()?;
        let mut book = self.lock();
        let agent_id = match book.entries.get(node) {
            Some(e) => e.agent_id,
            None => {
                book.next_id += 1;
                AgentId(book.next_id)
            }
        };
        book.entries.insert(
            node.to_string(),
            Entry {
                agent_id,
                token: token.clone(),
                expires: now + self.lifetime,
                used: false,
            },
        );
        Ok(Issued { token, agent_id })
    }

    /// Checks a hello's token and consumes it: the node's id, or the refusal to send (and
    /// the refusal is counted).
    pub fn admit(&self, hello: &Hello) -> Result<AgentId, Refusal> {
        self.admit_at(hello, Instant::now())
    }

    /// [`TokenBook::admit`] as of `now`.
    pub fn admit_at(&self, hello: &Hello, now: Instant) -> Result<AgentId, Refusal> {
        let mut book = self.lock();
        let book = &mut *book;
        let Some(token) = &hello.token else {
            book.counts.missing += 1;
            return Err(Refusal::new(
                RefusalReason::TokenMissing,
                "this front end requires a token",
            ));
        };
        // The lookup by node name reveals nothing secret; the comparison is constant-time.
        let entry = book
            .entries
            .get_mut(&hello.node)
            .filter(|e| e.token.matches(token));
        let Some(entry) = entry else {
            book.counts.unknown += 1;
            return Err(Refusal::new(
                RefusalReason::TokenUnknown,
                format!("no such token was issued for node {}", hello.node),
            ));
        };
        if entry.used {
            book.counts.reused += 1;
            return Err(Refusal::new(
                RefusalReason::TokenReused,
                format!("node {}'s token was used before", hello.node),
            ));
        }
        if now >= entry.expires {
            book.counts.expired += 1;
            return Err(Refusal::new(
                RefusalReason::TokenExpired,
                format!("node {}'s token expired", hello.node),
            ));
        }
        entry.used = true;
        Ok(entry.agent_id)
    }

    /// What the book refused so far.
    pub fn refusals(&self) -> RefusalCounts {
        self.lock().counts
    }
}

#[cfg(test)]
#[path = "token_tests.rs"]
mod tests;
