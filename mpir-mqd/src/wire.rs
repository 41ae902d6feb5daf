//! The pipe protocol between an [`crate::OutOfProcessHost`] and its helper
//! (`mpir-mqd-host`): versioned, binary, bounded.
//!
//! **Framing.** A message is sent as one or more frames: a 5-byte header (payload length as a
//! little-endian `u32`, then a flags byte whose bit 0 says "more frames follow") and at most
//! [`MAX_FRAME`] payload bytes. A reassembled message is at most [`MAX_MESSAGE`] bytes; anything
//! larger, an unknown flag or a short frame is a protocol error, never an allocation of what
//! the peer claims.
//!
//! **Messages.** A tag byte, then fields: integers little-endian fixed width, strings and byte
//! strings as a `u32` length and bytes, options as a 0/1 byte, sequences as a `u32` count
//! (checked against the bytes left before anything is allocated).
//!
//! **Conversation.** The helper speaks first ([`FromHelper::Hello`]: magic and
//! [`PROTOCOL_VERSION`]). Then the parent sends one request at a time ([`ToHelper`]); while
//! serving it, the helper may ask any number of callback questions ([`FromHelper::Read`],
//! [`FromHelper::Symbol`], [`FromHelper::Type`]), each answered before it goes on, and ends
//! with one [`FromHelper::Done`].

use std::io::{self, Read, Write};

use mpir_types::mqd::{self, OpStatus};
use mpir_types::{ByteOrder, DataModel, LayoutSource, TypeLayout, TypeSizes};

use crate::error::{CallbackReport, MqdError};
use crate::mpi2::ProcessLocation;
use crate::raw::{RawCommQueues, RawQueue};

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
    pub(crate) fn new(tag: u8) -> Self {
        Enc(vec![tag])
    }
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
    pub(crate) fn opt_str(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            None => self.u8(0),
            Some(s) => self.u8(1).str(s),
        }
    }
    pub(crate) fn strs(&mut self, v: &[String]) -> &mut Self {
        self.u32(v.len() as u32);
        for s in v {
            self.str(s);
        }
        self
    }
}

/// A message being read. Every accessor fails (never panics) on a short or malformed message.
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

pub(crate) type DecResult<T> = Result<T, String>;

impl<'a> Dec<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
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
    pub(crate) fn opt_string(&mut self) -> DecResult<Option<String>> {
        Ok(if self.bool()? {
            Some(self.string()?)
        } else {
            None
        })
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
    pub(crate) fn strings(&mut self) -> DecResult<Vec<String>> {
        let n = self.count(4)?;
        (0..n).map(|_| self.string()).collect()
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

fn enc_model(e: &mut Enc, m: &DataModel) {
    let z = m.sizes();
    e.u8(match m.byte_order() {
        ByteOrder::Little => 0,
        ByteOrder::Big => 1,
    });
    for s in [z.short, z.int, z.long, z.long_long, z.pointer] {
        e.u8(s);
    }
}

fn dec_model(d: &mut Dec) -> DecResult<DataModel> {
    let order = match d.u8()? {
        0 => ByteOrder::Little,
        1 => ByteOrder::Big,
        b => return Err(format!("bad byte order {b}")),
    };
    let sizes = TypeSizes {
        short: d.u8()?,
        int: d.u8()?,
        long: d.u8()?,
        long_long: d.u8()?,
        pointer: d.u8()?,
    };
    DataModel::new(order, sizes).map_err(|e| format!("bad data model: {e}"))
}

fn enc_result_text<T>(e: &mut Enc, r: &Result<T, String>, ok: impl FnOnce(&mut Enc, &T)) {
    match r {
        Ok(v) => {
            e.u8(0);
            ok(e, v);
        }
        Err(t) => {
            e.u8(1).str(t);
        }
    }
}

fn dec_result_text<T>(
    d: &mut Dec,
    ok: impl FnOnce(&mut Dec) -> DecResult<T>,
) -> DecResult<Result<T, String>> {
    match d.u8()? {
        0 => Ok(Ok(ok(d)?)),
        1 => Ok(Err(d.string()?)),
        b => Err(format!("bad result tag {b}")),
    }
}

impl ToHelper {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let e = match self {
            ToHelper::Load {
                path,
                max_communicators,
                max_operations,
                max_group_size,
                max_new_processes,
                read_cache,
            } => {
                let mut e = Enc::new(1);
                e.str(path)
                    .u64(*max_communicators)
                    .u64(*max_operations)
                    .u64(*max_group_size)
                    .u64(*max_new_processes)
                    .bool(*read_cache);
                e
            }
            ToHelper::Attach {
                target,
                image_name,
                global_rank,
                model,
            } => {
                let mut e = Enc::new(2);
                e.u64(*target).str(image_name).i64(
                    global_rank
                        .and_then(|r| i64::try_from(r).ok())
                        .unwrap_or(-1),
                );
                enc_model(&mut e, model);
                e
            }
            ToHelper::Detach { process, image } => {
                let mut e = Enc::new(3);
                e.u64(*process).u64(*image);
                e
            }
            ToHelper::Queues { process, image } => {
                let mut e = Enc::new(4);
                e.u64(*process).u64(*image);
                e
            }
            ToHelper::ReadReply(r) => {
                let mut e = Enc::new(5);
                enc_result_text(&mut e, r, |e, b| {
                    e.bytes(b);
                });
                e
            }
            ToHelper::SymbolReply(r) => {
                let mut e = Enc::new(6);
                enc_result_text(&mut e, r, |e, s| match s {
                    None => {
                        e.u8(0);
                    }
                    Some((a, k)) => {
                        e.u8(1).u64(*a).u8(*k);
                    }
                });
                e
            }
            ToHelper::TypeReply(r) => {
                let mut e = Enc::new(7);
                enc_result_text(&mut e, r, |e, t| match t {
                    None => {
                        e.u8(0);
                    }
                    Some(t) => {
                        e.u8(1).str(&t.name).u64(t.byte_size);
                        e.u32(t.members.len() as u32);
                        for m in &t.members {
                            e.str(&m.name).u64(m.offset);
                            match m.byte_size {
                                None => e.u8(0),
                                Some(s) => e.u8(1).u64(s),
                            };
                        }
                    }
                });
                e
            }
            ToHelper::Shutdown => Enc::new(8),
            ToHelper::NewProcesses { process, image } => {
                let mut e = Enc::new(9);
                e.u64(*process).u64(*image);
                e
            }
            ToHelper::SpawnBreakpoint { process, image } => {
                let mut e = Enc::new(10);
                e.u64(*process).u64(*image);
                e
            }
        };
        e.0
    }

    pub(crate) fn decode(buf: &[u8]) -> DecResult<Self> {
        let mut d = Dec::new(buf);
        let msg = match d.u8()? {
            1 => ToHelper::Load {
                path: d.string()?,
                max_communicators: d.u64()?,
                max_operations: d.u64()?,
                max_group_size: d.u64()?,
                max_new_processes: d.u64()?,
                read_cache: d.bool()?,
            },
            2 => ToHelper::Attach {
                target: d.u64()?,
                image_name: d.string()?,
                global_rank: u64::try_from(d.i64()?).ok(),
                model: dec_model(&mut d)?,
            },
            3 => ToHelper::Detach {
                process: d.u64()?,
                image: d.u64()?,
            },
            4 => ToHelper::Queues {
                process: d.u64()?,
                image: d.u64()?,
            },
            5 => ToHelper::ReadReply(dec_result_text(&mut d, |d| Ok(d.bytes()?.to_vec()))?),
            6 => ToHelper::SymbolReply(dec_result_text(&mut d, |d| {
                Ok(if d.bool()? {
                    Some((d.u64()?, d.u8()?))
                } else {
                    None
                })
            })?),
            7 => ToHelper::TypeReply(dec_result_text(&mut d, |d| {
                if !d.bool()? {
                    return Ok(None);
                }
                let mut t = TypeLayout::new(d.string()?, d.u64()?, LayoutSource::Given);
                let n = d.count(13)?;
                for _ in 0..n {
                    let name = d.string()?;
                    let offset = d.u64()?;
                    let size = if d.bool()? { Some(d.u64()?) } else { None };
                    t = t.with_member(name, offset, size.unwrap_or(0));
                    if size.is_none()
                        && let Some(m) = t.members.last_mut()
                    {
                        m.byte_size = None;
                    }
                }
                Ok(Some(t))
            })?),
            8 => ToHelper::Shutdown,
            9 => ToHelper::NewProcesses {
                process: d.u64()?,
                image: d.u64()?,
            },
            10 => ToHelper::SpawnBreakpoint {
                process: d.u64()?,
                image: d.u64()?,
            },
            t => return Err(format!("unknown request tag {t}")),
        };
        d.end()?;
        Ok(msg)
    }
}

/// DLL calls a [`MqdError::Dll`] can name (the field is `&'static str`).
const CALLS: [&str; 15] = [
    "mqs_setup_image",
    "mqs_image_has_queues",
    "mqs_setup_process",
    "mqs_process_has_queues",
    "mqs_update_communicator_list",
    "mqs_setup_communicator_iterator",
    "mqs_get_communicator",
    "mqs_next_communicator",
    "mqs_setup_operation_iterator",
    "mqs_next_operation",
    "mqs_setup_job",
    "mqs_set_process_identity",
    "mqs_setup_new_process_iterator",
    "mqs_next_new_process",
    "mqs_spawn_breakpoint_name",
];

fn enc_error(e: &mut Enc, err: &MqdError) {
    match err {
        MqdError::Load { path, reason } => {
            e.u8(1).str(path).str(reason);
        }
        MqdError::MissingExports { path, names } => {
            e.u8(2).str(path).strs(names);
        }
        MqdError::Incompatible {
            path,
            found,
            supported,
        } => {
            e.u8(3)
                .str(path)
                .i64(i64::from(*found))
                .i64(i64::from(*supported));
        }
        MqdError::TaddrWidth { path, found, host } => {
            e.u8(4).str(path).i64(i64::from(*found)).u64(*host as u64);
        }
        MqdError::Dll {
            path,
            call,
            image,
            code,
            message,
            callbacks,
        } => {
            e.u8(5)
                .str(path)
                .str(call)
                .opt_str(image.as_deref())
                .i64(i64::from(*code))
                .str(message)
                .strs(&callbacks.faults)
                .strs(&callbacks.missing_types);
        }
        MqdError::Unbounded { path, what, limit } => {
            e.u8(6).str(path).str(what).u64(*limit as u64);
        }
        MqdError::UnknownProcess { handle } => {
            e.u8(7).u64(*handle as u64);
        }
        MqdError::Unsupported {
            path,
            function,
            reason,
        } => {
            e.u8(8).str(path).str(function).str(reason);
        }
        MqdError::IdentityInUse { path, identity } => {
            e.u8(9)
                .str(path)
                .i64(identity.and_then(|r| i64::try_from(r).ok()).unwrap_or(-1));
        }
        // Its own tag, so that it reads back as itself: under tag 0 it came back wrapped in
        // another "broke the protocol: helper error:" at each round trip (found by the `wire`
        // fuzz target; protocol version 3).
        MqdError::Protocol { path, reason } => {
            e.u8(10).str(path).str(reason);
        }
        other => {
            e.u8(0).str(&other.to_string());
        }
    }
}

fn dec_error(d: &mut Dec, path: &str) -> DecResult<MqdError> {
    let usize_of = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    Ok(match d.u8()? {
        0 => MqdError::Protocol {
            path: path.to_string(),
            reason: format!("helper error: {}", d.string()?),
        },
        1 => MqdError::Load {
            path: d.string()?,
            reason: d.string()?,
        },
        2 => MqdError::MissingExports {
            path: d.string()?,
            names: d.strings()?,
        },
        3 => MqdError::Incompatible {
            path: d.string()?,
            found: d.i32()?,
            supported: d.i32()?,
        },
        4 => MqdError::TaddrWidth {
            path: d.string()?,
            found: d.i32()?,
            host: usize_of(d.u64()?),
        },
        5 => {
            let path = d.string()?;
            let call = d.string()?;
            MqdError::Dll {
                path,
                call: CALLS
                    .iter()
                    .find(|c| **c == call)
                    .copied()
                    .unwrap_or("an MQD DLL function"),
                image: d.opt_string()?,
                code: d.i32()?,
                message: d.string()?,
                callbacks: Box::new(CallbackReport::new(d.strings()?, d.strings()?)),
            }
        }
        6 => MqdError::Unbounded {
            path: d.string()?,
            what: d.string()?,
            limit: usize_of(d.u64()?),
        },
        7 => MqdError::UnknownProcess {
            handle: usize_of(d.u64()?),
        },
        8 => MqdError::Unsupported {
            path: d.string()?,
            function: d.string()?,
            reason: d.string()?,
        },
        9 => MqdError::IdentityInUse {
            path: d.string()?,
            identity: u64::try_from(d.i64()?).ok(),
        },
        10 => MqdError::Protocol {
            path: d.string()?,
            reason: d.string()?,
        },
        t => return Err(format!("unknown error tag {t}")),
    })
}

fn enc_op(e: &mut Enc, o: &mqd::PendingOperation) {
    e.i64(o.status.to_raw())
        .i64(o.desired_local_rank)
        .i64(o.desired_global_rank)
        .bool(o.tag_wild)
        .i64(o.desired_tag)
        .i64(o.desired_length)
        .bool(o.system_buffer)
        .u64(o.buffer)
        .i64(o.actual_local_rank)
        .i64(o.actual_global_rank)
        .i64(o.actual_tag)
        .i64(o.actual_length)
        .strs(&o.extra_text);
}

/// Encoded size of a process location with empty strings (the minimum, for count checks).
const MIN_LOCATION: usize = 8 + 4 + 4;

/// Encoded size of an operation with no extra text (the minimum, for count checks).
const MIN_OP: usize = 10 * 8 + 2 + 4;

fn dec_op(d: &mut Dec) -> DecResult<mqd::PendingOperation> {
    Ok(mqd::PendingOperation {
        status: OpStatus::from_raw(d.i64()?),
        desired_local_rank: d.i64()?,
        desired_global_rank: d.i64()?,
        tag_wild: d.bool()?,
        desired_tag: d.i64()?,
        desired_length: d.i64()?,
        system_buffer: d.bool()?,
        buffer: d.u64()?,
        actual_local_rank: d.i64()?,
        actual_global_rank: d.i64()?,
        actual_tag: d.i64()?,
        actual_length: d.i64()?,
        extra_text: d.strings()?,
    })
}

fn enc_comm(e: &mut Enc, c: &RawCommQueues) {
    e.u64(c.communicator.unique_id)
        .i64(c.communicator.local_rank)
        .i64(c.communicator.size)
        .str(&c.communicator.name);
    match &c.group {
        None => {
            e.u8(0);
        }
        Some(g) => {
            e.u8(1).u32(g.len() as u32);
            for r in g {
                e.i64(*r);
            }
        }
    }
    for q in &c.queues {
        match q {
            RawQueue::NoInformation => {
                e.u8(0);
            }
            RawQueue::Operations(ops, err) => {
                e.u8(1).u32(ops.len() as u32);
                for o in ops {
                    enc_op(e, o);
                }
                match err {
                    None => {
                        e.u8(0);
                    }
                    Some(err) => {
                        e.u8(1);
                        enc_error(e, err);
                    }
                }
            }
        }
    }
}

fn dec_comm(d: &mut Dec, path: &str) -> DecResult<RawCommQueues> {
    let communicator = mqd::Communicator {
        unique_id: d.u64()?,
        local_rank: d.i64()?,
        size: d.i64()?,
        name: d.string()?,
    };
    let group = if d.bool()? {
        let n = d.count(8)?;
        Some((0..n).map(|_| d.i64()).collect::<DecResult<Vec<_>>>()?)
    } else {
        None
    };
    let mut queue = || -> DecResult<RawQueue> {
        Ok(match d.u8()? {
            0 => RawQueue::NoInformation,
            1 => {
                let n = d.count(MIN_OP)?;
                let ops = (0..n).map(|_| dec_op(d)).collect::<DecResult<Vec<_>>>()?;
                let err = if d.bool()? {
                    Some(dec_error(d, path)?)
                } else {
                    None
                };
                RawQueue::Operations(ops, err)
            }
            t => return Err(format!("unknown queue tag {t}")),
        })
    };
    let queues = [queue()?, queue()?, queue()?];
    Ok(RawCommQueues {
        communicator,
        group,
        queues,
    })
}

impl FromHelper {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let e = match self {
            FromHelper::Hello { version, pid } => {
                let mut e = Enc::new(1);
                e.0.extend_from_slice(&MAGIC);
                e.u32(*version).u32(*pid);
                e
            }
            FromHelper::Read {
                target,
                address,
                len,
            } => {
                let mut e = Enc::new(2);
                e.u64(*target).u64(*address).u32(*len);
                e
            }
            FromHelper::Symbol { target, name } => {
                let mut e = Enc::new(3);
                e.u64(*target).str(name);
                e
            }
            FromHelper::Type { target, name } => {
                let mut e = Enc::new(4);
                e.u64(*target).str(name);
                e
            }
            FromHelper::Done { outcome, messages } => {
                let mut e = Enc::new(5);
                e.strs(messages);
                match outcome {
                    Err(err) => {
                        e.u8(0);
                        enc_error(&mut e, err);
                    }
                    Ok(Outcome::Loaded {
                        version,
                        compatibility,
                        taddr_width,
                        optional,
                    }) => {
                        e.u8(1)
                            .str(version)
                            .i64(i64::from(*compatibility))
                            .bool(taddr_width.is_some())
                            .i64(i64::from(taddr_width.unwrap_or(0)))
                            .strs(optional);
                    }
                    Ok(Outcome::Attached {
                        process,
                        image,
                        image_message,
                        process_message,
                    }) => {
                        e.u8(2)
                            .u64(*process)
                            .u64(*image)
                            .opt_str(image_message.as_deref())
                            .opt_str(process_message.as_deref());
                    }
                    Ok(Outcome::Detached) => {
                        e.u8(3);
                    }
                    Ok(Outcome::Queues(comms)) => {
                        e.u8(4).u32(comms.len() as u32);
                        for c in comms {
                            enc_comm(&mut e, c);
                        }
                    }
                    Ok(Outcome::ShutDown) => {
                        e.u8(5);
                    }
                    Ok(Outcome::NewProcesses(locations)) => {
                        e.u8(6).u32(locations.len() as u32);
                        for l in locations {
                            e.i64(l.pid).str(&l.image_name).str(&l.host_name);
                        }
                    }
                    Ok(Outcome::SpawnBreakpoint(name)) => {
                        e.u8(7).str(name);
                    }
                }
                e
            }
        };
        e.0
    }

    /// Decodes a helper message; `path` (the DLL) goes into decoded errors.
    pub(crate) fn decode(buf: &[u8], path: &str) -> DecResult<Self> {
        let mut d = Dec::new(buf);
        let msg = match d.u8()? {
            1 => {
                if d.take(4)? != MAGIC {
                    return Err("bad greeting magic".into());
                }
                FromHelper::Hello {
                    version: d.u32()?,
                    pid: d.u32()?,
                }
            }
            2 => FromHelper::Read {
                target: d.u64()?,
                address: d.u64()?,
                len: d.u32()?,
            },
            3 => FromHelper::Symbol {
                target: d.u64()?,
                name: d.string()?,
            },
            4 => FromHelper::Type {
                target: d.u64()?,
                name: d.string()?,
            },
            5 => {
                let messages = d.strings()?;
                let outcome = match d.u8()? {
                    0 => Err(dec_error(&mut d, path)?),
                    1 => {
                        let version = d.string()?;
                        let compatibility = d.i32()?;
                        let has_width = d.bool()?;
                        let width = d.i32()?;
                        Ok(Outcome::Loaded {
                            version,
                            compatibility,
                            taddr_width: has_width.then_some(width),
                            optional: d.strings()?,
                        })
                    }
                    2 => Ok(Outcome::Attached {
                        process: d.u64()?,
                        image: d.u64()?,
                        image_message: d.opt_string()?,
                        process_message: d.opt_string()?,
                    }),
                    3 => Ok(Outcome::Detached),
                    4 => {
                        let n = d.count(8 + 8 + 8 + 4 + 1 + 3)?;
                        Ok(Outcome::Queues(
                            (0..n)
                                .map(|_| dec_comm(&mut d, path))
                                .collect::<DecResult<Vec<_>>>()?,
                        ))
                    }
                    5 => Ok(Outcome::ShutDown),
                    6 => {
                        let n = d.count(MIN_LOCATION)?;
                        Ok(Outcome::NewProcesses(
                            (0..n)
                                .map(|_| {
                                    Ok(ProcessLocation::new(d.i64()?, d.string()?, d.string()?))
                                })
                                .collect::<DecResult<Vec<_>>>()?,
                        ))
                    }
                    7 => Ok(Outcome::SpawnBreakpoint(d.string()?)),
                    t => return Err(format!("unknown outcome tag {t}")),
                };
                FromHelper::Done { outcome, messages }
            }
            t => return Err(format!("unknown helper message tag {t}")),
        };
        d.end()?;
        Ok(msg)
    }
}

#[cfg(test)]
mod tests;
