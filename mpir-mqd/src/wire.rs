//! The pipe protocol between an [`crate::OutOfProcessHost`] and its helper
//! (`mpir-mqd-host`): versioned, binary, bounded.
//!
//! **Framing.** A message is sent as one or more frames: a 5-byte header (payload length as a
//! little-endian `u32`, then a flags byte whose bit 0 says "more frames follow") and at most
//! [`MAX_FRAME`] payload bytes. A reassembled message is at most [`MAX_MESSAGE`] bytes; anything
//! larger, an unknown flag or a short frame is a protocol error, never an allocation of what
//! the peer claims.
//!
//! **Messages.** A tag byte ([`tag`]: one table, read by both directions), then fields:
//! integers little-endian fixed width, strings and byte strings as a `u32` length and bytes,
//! options as a 0/1 byte, sequences as a `u32` count (checked against the bytes left before
//! anything is allocated). Each type's encoding and decoding are one definition
//! (`codec::Codec`), composed for the messages.
//!
//! **Conversation.** The helper speaks first ([`FromHelper::Hello`]: magic and
//! [`PROTOCOL_VERSION`]). Then the parent sends one request at a time ([`ToHelper`]); while
//! serving it, the helper may ask any number of callback questions ([`FromHelper::Read`],
//! [`FromHelper::Symbol`], [`FromHelper::Type`]), each answered before it goes on, and ends
//! with one [`FromHelper::Done`].

use std::io::{self, Read, Write};

mod codec;

use mpir_types::{DataModel, TypeLayout};

use self::codec::{Bytes, Codec, Rank};
use crate::error::MqdError;
use crate::mpi2::ProcessLocation;
use crate::raw::RawCommQueues;

/// The protocol version both sides must speak (bumped on any incompatible change).
pub(crate) const PROTOCOL_VERSION: u32 = 4;
/// Magic of the helper's greeting.
pub(crate) const MAGIC: [u8; 4] = *b"MQDH";
/// Largest frame payload.
pub(crate) const MAX_FRAME: usize = 1 << 20;
/// Largest reassembled message.
pub(crate) const MAX_MESSAGE: usize = 256 << 20;
/// Largest single memory read the helper may ask for.
pub(crate) const MAX_READ: u32 = 1 << 20;

/// Writes `msg` as frames and flushes.
pub(crate) fn write_message(w: &mut impl Write, msg: &[u8]) -> io::Result<()> {
    let mut chunks = msg.chunks(MAX_FRAME).peekable();
    if chunks.peek().is_none() {
        w.write_all(&[0, 0, 0, 0, 0])?;
    }
    while let Some(chunk) = chunks.next() {
        let more = u8::from(chunks.peek().is_some());
        // A chunk is at most MAX_FRAME (1 MiB) long, so it fits a u32.
        let len = chunk.len() as u32;
        let mut header = [0u8; 5];
        header[..4].copy_from_slice(&len.to_le_bytes());
        header[4] = more;
        w.write_all(&header)?;
        w.write_all(chunk)?;
    }
    w.flush()
}

/// Why no message could be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// The pipe ended cleanly between messages.
    Closed,
    /// An I/O error, or the pipe ended inside a message.
    Io(io::Error),
    /// The bytes are not framed as the protocol says.
    Framing(String),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Closed => f.write_str("pipe closed"),
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Framing(e) => f.write_str(e),
        }
    }
}

/// Reads one message (all its frames).
pub(crate) fn read_message(r: &mut impl Read) -> Result<Vec<u8>, ReadError> {
    let mut msg = Vec::new();
    let mut first = true;
    loop {
        let mut header = [0u8; 5];
        if first {
            // A clean end of the pipe is only possible before a message starts.
            match r.read(&mut header[..1]) {
                Ok(0) => return Err(ReadError::Closed),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(ReadError::Io(e)),
            }
            r.read_exact(&mut header[1..]).map_err(ReadError::Io)?;
        } else {
            r.read_exact(&mut header).map_err(ReadError::Io)?;
        }
        first = false;
        let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
        let flags = header[4];
        if flags > 1 {
            return Err(ReadError::Framing(format!(
                "unknown frame flags {flags:#x}"
            )));
        }
        if len > MAX_FRAME {
            return Err(ReadError::Framing(format!(
                "frame of {len} bytes (limit {MAX_FRAME})"
            )));
        }
        if msg.len() + len > MAX_MESSAGE {
            return Err(ReadError::Framing(format!(
                "message over {MAX_MESSAGE} bytes"
            )));
        }
        let at = msg.len();
        msg.resize(at + len, 0);
        r.read_exact(&mut msg[at..]).map_err(ReadError::Io)?;
        if flags == 0 {
            return Ok(msg);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding.

/// A message being built.
#[derive(Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub(crate) fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        // Every byte string we send is far below 4 GiB (bounded by MAX_MESSAGE on receipt).
        self.u32(v.len() as u32);
        self.0.extend_from_slice(v);
        self
    }
    pub(crate) fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
}

/// A message being read. Every accessor fails (never panics) on a short or malformed message.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
    /// The DLL the helper hosts, for errors that travel as text ([`tag::error::TEXT`]).
    path: &'a str,
}

pub(crate) type DecResult<T> = Result<T, String>;

impl<'a> Dec<'a> {
    pub(crate) fn new(buf: &'a [u8], path: &'a str) -> Self {
        Dec { buf, pos: 0, path }
    }
    /// The DLL the message is about.
    pub(crate) fn path(&self) -> &'a str {
        self.path
    }
    fn take(&mut self, n: usize) -> DecResult<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.buf.len())
            .ok_or_else(|| format!("message truncated at byte {} (wanted {n} more)", self.pos))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub(crate) fn u8(&mut self) -> DecResult<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> DecResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> DecResult<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    pub(crate) fn i64(&mut self) -> DecResult<i64> {
        Ok(self.u64()? as i64)
    }
    pub(crate) fn i32(&mut self) -> DecResult<i32> {
        i32::try_from(self.i64()?).map_err(|_| "an int out of range".to_string())
    }
    pub(crate) fn bool(&mut self) -> DecResult<bool> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(format!("bad boolean {b}")),
        }
    }
    pub(crate) fn bytes(&mut self) -> DecResult<&'a [u8]> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub(crate) fn string(&mut self) -> DecResult<String> {
        String::from_utf8(self.bytes()?.to_vec()).map_err(|_| "a string is not UTF-8".into())
    }
    /// A count of items each at least `min_size` bytes long, checked against what is left.
    pub(crate) fn count(&mut self, min_size: usize) -> DecResult<usize> {
        let n = self.u32()? as usize;
        let left = self.buf.len() - self.pos;
        if n.saturating_mul(min_size.max(1)) > left {
            return Err(format!("{n} items announced, {left} bytes left"));
        }
        Ok(n)
    }
    pub(crate) fn end(&self) -> DecResult<()> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(format!("{} trailing bytes", self.buf.len() - self.pos))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Messages.

/// Every tag of the protocol, one table for both directions: the encoders write these and
/// the decoders match on them.
pub(crate) mod tag {
    /// [`super::ToHelper`].
    pub(crate) mod to_helper {
        pub(crate) const LOAD: u8 = 1;
        pub(crate) const ATTACH: u8 = 2;
        pub(crate) const DETACH: u8 = 3;
        pub(crate) const QUEUES: u8 = 4;
        pub(crate) const READ_REPLY: u8 = 5;
        pub(crate) const SYMBOL_REPLY: u8 = 6;
        pub(crate) const TYPE_REPLY: u8 = 7;
        pub(crate) const SHUTDOWN: u8 = 8;
        pub(crate) const NEW_PROCESSES: u8 = 9;
        pub(crate) const SPAWN_BREAKPOINT: u8 = 10;
    }
    /// [`super::FromHelper`].
    pub(crate) mod from_helper {
        pub(crate) const HELLO: u8 = 1;
        pub(crate) const READ: u8 = 2;
        pub(crate) const SYMBOL: u8 = 3;
        pub(crate) const TYPE: u8 = 4;
        pub(crate) const DONE: u8 = 5;
    }
    /// The outcome of [`super::FromHelper::Done`]: an error, or an [`super::Outcome`].
    pub(crate) mod outcome {
        pub(crate) const ERROR: u8 = 0;
        pub(crate) const LOADED: u8 = 1;
        pub(crate) const ATTACHED: u8 = 2;
        pub(crate) const DETACHED: u8 = 3;
        pub(crate) const QUEUES: u8 = 4;
        pub(crate) const SHUT_DOWN: u8 = 5;
        pub(crate) const NEW_PROCESSES: u8 = 6;
        pub(crate) const SPAWN_BREAKPOINT: u8 = 7;
    }
    /// [`crate::MqdError`] variants.
    pub(crate) mod error {
        /// Any other error, as its text.
        pub(crate) const TEXT: u8 = 0;
        pub(crate) const LOAD: u8 = 1;
        pub(crate) const MISSING_EXPORTS: u8 = 2;
        pub(crate) const INCOMPATIBLE: u8 = 3;
        pub(crate) const TADDR_WIDTH: u8 = 4;
        pub(crate) const DLL: u8 = 5;
        pub(crate) const UNBOUNDED: u8 = 6;
        pub(crate) const UNKNOWN_PROCESS: u8 = 7;
        pub(crate) const UNSUPPORTED: u8 = 8;
        pub(crate) const IDENTITY_IN_USE: u8 = 9;
        pub(crate) const PROTOCOL: u8 = 10;
    }
}

/// Parent to helper.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ToHelper {
    /// Load the DLL (first request, once).
    Load {
        path: String,
        max_communicators: u64,
        max_operations: u64,
        max_group_size: u64,
        max_new_processes: u64,
        read_cache: bool,
    },
    /// Attach a process whose callbacks go to parent target `target`.
    Attach {
        target: u64,
        image_name: String,
        global_rank: Option<u64>,
        model: DataModel,
    },
    /// Detach a process.
    Detach { process: u64, image: u64 },
    /// Iterate a process's communicators and queues.
    Queues { process: u64, image: u64 },
    /// List the processes a process created (MPI-2).
    NewProcesses { process: u64, image: u64 },
    /// Ask for the spawn breakpoint's function name (MPI-2).
    SpawnBreakpoint { process: u64, image: u64 },
    /// Answer to [`FromHelper::Read`]: the bytes read from the start (possibly fewer than
    /// asked), or why none could be.
    ReadReply(Result<Vec<u8>, String>),
    /// Answer to [`FromHelper::Symbol`]: address and kind (0 function, 1 object, 2 other).
    SymbolReply(Result<Option<(u64, u8)>, String>),
    /// Answer to [`FromHelper::Type`].
    TypeReply(Result<Option<TypeLayout>, String>),
    /// Tear down and exit.
    Shutdown,
}

/// Helper to parent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum FromHelper {
    /// The greeting: magic, protocol version, the helper's pid.
    Hello { version: u32, pid: u32 },
    /// Callback: read `len` bytes at `address` of `target`.
    Read { target: u64, address: u64, len: u32 },
    /// Callback: look up symbol `name` in `target`.
    Symbol { target: u64, name: String },
    /// Callback: look up type `name` in `target`.
    Type { target: u64, name: String },
    /// The end of a request: its outcome and the DLL's `dprints` log so far.
    Done {
        outcome: Result<Outcome, MqdError>,
        messages: Vec<String>,
    },
}

/// What a successful request produced.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    Loaded {
        version: String,
        compatibility: i32,
        taddr_width: Option<i32>,
        optional: Vec<String>,
    },
    Attached {
        process: u64,
        image: u64,
        image_message: Option<String>,
        process_message: Option<String>,
    },
    Detached,
    Queues(Vec<RawCommQueues>),
    ShutDown,
    NewProcesses(Vec<ProcessLocation>),
    SpawnBreakpoint(String),
}

/// A whole message: its codec, then nothing left over.
fn decode_all<T: Codec>(buf: &[u8], path: &str) -> DecResult<T> {
    let mut d = Dec::new(buf, path);
    let msg = T::decode(&mut d)?;
    d.end()?;
    Ok(msg)
}

fn encode_one(msg: &impl Codec) -> Vec<u8> {
    let mut e = Enc::default();
    msg.encode(&mut e);
    e.0
}

/// `(process, image)` of the requests about one attached process.
fn handles(e: &mut Enc, tag: u8, process: u64, image: u64) {
    e.u8(tag).u64(process).u64(image);
}

impl Codec for ToHelper {
    const MIN_SIZE: usize = 1;
    fn encode(&self, e: &mut Enc) {
        use tag::to_helper as t;
        match self {
            ToHelper::Load {
                path,
                max_communicators,
                max_operations,
                max_group_size,
                max_new_processes,
                read_cache,
            } => {
                e.u8(t::LOAD)
                    .str(path)
                    .u64(*max_communicators)
                    .u64(*max_operations)
                    .u64(*max_group_size)
                    .u64(*max_new_processes)
                    .bool(*read_cache);
            }
            ToHelper::Attach {
                target,
                image_name,
                global_rank,
                model,
            } => {
                e.u8(t::ATTACH).u64(*target).str(image_name);
                Rank(*global_rank).encode(e);
                model.encode(e);
            }
            ToHelper::Detach { process, image } => handles(e, t::DETACH, *process, *image),
            ToHelper::Queues { process, image } => handles(e, t::QUEUES, *process, *image),
            ToHelper::NewProcesses { process, image } => {
                handles(e, t::NEW_PROCESSES, *process, *image)
            }
            ToHelper::SpawnBreakpoint { process, image } => {
                handles(e, t::SPAWN_BREAKPOINT, *process, *image)
            }
            ToHelper::ReadReply(r) => {
                e.u8(t::READ_REPLY);
                // `Result<Bytes, String>`'s form (as decoded below), without copying the bytes.
                match r {
                    Ok(b) => {
                        e.u8(0).bytes(b);
                    }
                    Err(why) => {
                        e.u8(1).str(why);
                    }
                }
            }
            ToHelper::SymbolReply(r) => {
                e.u8(t::SYMBOL_REPLY);
                r.encode(e);
            }
            ToHelper::TypeReply(r) => {
                e.u8(t::TYPE_REPLY);
                r.encode(e);
            }
            ToHelper::Shutdown => {
                e.u8(t::SHUTDOWN);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        use tag::to_helper as t;
        Ok(match d.u8()? {
            t::LOAD => ToHelper::Load {
                path: d.string()?,
                max_communicators: d.u64()?,
                max_operations: d.u64()?,
                max_group_size: d.u64()?,
                max_new_processes: d.u64()?,
                read_cache: d.bool()?,
            },
            t::ATTACH => ToHelper::Attach {
                target: d.u64()?,
                image_name: d.string()?,
                global_rank: Rank::decode(d)?.0,
                model: DataModel::decode(d)?,
            },
            t::DETACH => ToHelper::Detach {
                process: d.u64()?,
                image: d.u64()?,
            },
            t::QUEUES => ToHelper::Queues {
                process: d.u64()?,
                image: d.u64()?,
            },
            t::READ_REPLY => {
                ToHelper::ReadReply(Result::<Bytes, String>::decode(d)?.map(|Bytes(b)| b))
            }
            t::SYMBOL_REPLY => ToHelper::SymbolReply(Codec::decode(d)?),
            t::TYPE_REPLY => ToHelper::TypeReply(Codec::decode(d)?),
            t::SHUTDOWN => ToHelper::Shutdown,
            t::NEW_PROCESSES => ToHelper::NewProcesses {
                process: d.u64()?,
                image: d.u64()?,
            },
            t::SPAWN_BREAKPOINT => ToHelper::SpawnBreakpoint {
                process: d.u64()?,
                image: d.u64()?,
            },
            other => return Err(format!("unknown request tag {other}")),
        })
    }
}

impl ToHelper {
    pub(crate) fn encode(&self) -> Vec<u8> {
        encode_one(self)
    }

    pub(crate) fn decode(buf: &[u8]) -> DecResult<Self> {
        decode_all(buf, "")
    }
}

/// The outcome of a request: [`tag::outcome::ERROR`] and the error, or an outcome's tag and
/// its fields.
impl Codec for Result<Outcome, MqdError> {
    const MIN_SIZE: usize = 1;
    fn encode(&self, e: &mut Enc) {
        use tag::outcome as t;
        match self {
            Err(err) => {
                e.u8(t::ERROR);
                err.encode(e);
            }
            Ok(Outcome::Loaded {
                version,
                compatibility,
                taddr_width,
                optional,
            }) => {
                e.u8(t::LOADED).str(version);
                compatibility.encode(e);
                taddr_width.encode(e);
                optional.encode(e);
            }
            Ok(Outcome::Attached {
                process,
                image,
                image_message,
                process_message,
            }) => {
                e.u8(t::ATTACHED).u64(*process).u64(*image);
                image_message.encode(e);
                process_message.encode(e);
            }
            Ok(Outcome::Detached) => {
                e.u8(t::DETACHED);
            }
            Ok(Outcome::Queues(comms)) => {
                e.u8(t::QUEUES);
                comms.encode(e);
            }
            Ok(Outcome::ShutDown) => {
                e.u8(t::SHUT_DOWN);
            }
            Ok(Outcome::NewProcesses(locations)) => {
                e.u8(t::NEW_PROCESSES);
                locations.encode(e);
            }
            Ok(Outcome::SpawnBreakpoint(name)) => {
                e.u8(t::SPAWN_BREAKPOINT).str(name);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        use tag::outcome as t;
        Ok(match d.u8()? {
            t::ERROR => Err(MqdError::decode(d)?),
            t::LOADED => Ok(Outcome::Loaded {
                version: d.string()?,
                compatibility: d.i32()?,
                taddr_width: Codec::decode(d)?,
                optional: Codec::decode(d)?,
            }),
            t::ATTACHED => Ok(Outcome::Attached {
                process: d.u64()?,
                image: d.u64()?,
                image_message: Codec::decode(d)?,
                process_message: Codec::decode(d)?,
            }),
            t::DETACHED => Ok(Outcome::Detached),
            t::QUEUES => Ok(Outcome::Queues(Codec::decode(d)?)),
            t::SHUT_DOWN => Ok(Outcome::ShutDown),
            t::NEW_PROCESSES => Ok(Outcome::NewProcesses(Codec::decode(d)?)),
            t::SPAWN_BREAKPOINT => Ok(Outcome::SpawnBreakpoint(d.string()?)),
            other => return Err(format!("unknown outcome tag {other}")),
        })
    }
}

impl Codec for FromHelper {
    const MIN_SIZE: usize = 1;
    fn encode(&self, e: &mut Enc) {
        use tag::from_helper as t;
        match self {
            FromHelper::Hello { version, pid } => {
                e.u8(t::HELLO);
                e.0.extend_from_slice(&MAGIC);
                e.u32(*version).u32(*pid);
            }
            FromHelper::Read {
                target,
                address,
                len,
            } => {
                e.u8(t::READ).u64(*target).u64(*address).u32(*len);
            }
            FromHelper::Symbol { target, name } => {
                e.u8(t::SYMBOL).u64(*target).str(name);
            }
            FromHelper::Type { target, name } => {
                e.u8(t::TYPE).u64(*target).str(name);
            }
            FromHelper::Done { outcome, messages } => {
                e.u8(t::DONE);
                messages.encode(e);
                outcome.encode(e);
            }
        }
    }
    fn decode(d: &mut Dec<'_>) -> DecResult<Self> {
        use tag::from_helper as t;
        Ok(match d.u8()? {
            t::HELLO => {
                if d.take(4)? != MAGIC {
                    return Err("bad greeting magic".into());
                }
                FromHelper::Hello {
                    version: d.u32()?,
                    pid: d.u32()?,
                }
            }
            t::READ => FromHelper::Read {
                target: d.u64()?,
                address: d.u64()?,
                len: d.u32()?,
            },
            t::SYMBOL => FromHelper::Symbol {
                target: d.u64()?,
                name: d.string()?,
            },
            t::TYPE => FromHelper::Type {
                target: d.u64()?,
                name: d.string()?,
            },
            t::DONE => {
                let messages = Codec::decode(d)?;
                FromHelper::Done {
                    outcome: Codec::decode(d)?,
                    messages,
                }
            }
            other => return Err(format!("unknown helper message tag {other}")),
        })
    }
}

impl FromHelper {
    pub(crate) fn encode(&self) -> Vec<u8> {
        encode_one(self)
    }

    /// Decodes a helper message; `path` (the DLL) goes into decoded errors.
    pub(crate) fn decode(buf: &[u8], path: &str) -> DecResult<Self> {
        decode_all(buf, path)
    }
}

#[cfg(test)]
mod tests;
