//! The cooperative channel's messages as fixed layouts: `mpir-waits/COOP.md` ("Format") is
//! their one description, `mpir-waits/lib/mpir_coop.h` the C side's. Each struct below *is* a
//! table of COOP.md (sizes checked by the tests), decoded with zerocopy: every field is an
//! unaligned little-endian integer or a byte array, so no byte pattern is invalid and no
//! `unsafe` is needed. Decoding checks every length against the bytes present and the caps of
//! COOP.md before anything is allocated.

use zerocopy::byteorder::{I64, LittleEndian, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

type Le = LittleEndian;

/// `MPIRCOOP`, in requests and answers.
pub(crate) const MAGIC: [u8; 8] = *b"MPIRCOOP";
/// The protocol version.
pub(crate) const VERSION: u32 = 1;

/// Largest `READ` (1 MiB).
pub(crate) const READ_MAX: u64 = 1 << 20;
/// Largest `MAPS` answer (8 MiB).
pub(crate) const MAPS_MAX: u64 = 8 << 20;
/// Largest `HELLO` answer (32 KiB).
pub(crate) const HELLO_MAX: u64 = 32 << 10;
/// Most threads in a `THREADS` answer.
pub(crate) const THREADS_MAX: u64 = 1024;
/// Most stack bytes of one thread.
pub(crate) const STACK_MAX: u64 = 512 << 10;
/// Most stack bytes of all threads.
pub(crate) const STACKS_TOTAL: u64 = 64 << 20;
/// Largest payload of an answer whose status is not 0.
pub(crate) const ERROR_MAX: u64 = 64;
/// Registers in a thread record: x86_64 DWARF 0..=16, then fs_base.
pub(crate) const REGS: usize = 18;

/// What a request asks (COOP.md, "Opcodes").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Opcode {
    /// Who the process is.
    Hello,
    /// Bytes of its memory.
    Read,
    /// Its `/proc/self/maps`.
    Maps,
    /// Every thread's registers and stack.
    Threads,
    /// `PR_SET_PTRACER` to the connected peer.
    Ptracer,
    /// `PR_SET_PTRACER` back to none.
    PtracerEnd,
}

impl Opcode {
    /// The number on the wire.
    pub(crate) fn code(self) -> u32 {
        match self {
            Opcode::Hello => 1,
            Opcode::Read => 2,
            Opcode::Maps => 3,
            Opcode::Threads => 4,
            Opcode::Ptracer => 5,
            Opcode::PtracerEnd => 6,
        }
    }

    /// The largest ok payload COOP.md allows.
    pub(crate) fn max_payload(self) -> u64 {
        match self {
            Opcode::Hello => HELLO_MAX,
            Opcode::Read => READ_MAX,
            Opcode::Maps => MAPS_MAX,
            Opcode::Threads => {
                size_of::<ThreadsHeader>() as u64
                    + THREADS_MAX * size_of::<ThreadRecord>() as u64
                    + STACKS_TOTAL
            }
            Opcode::Ptracer | Opcode::PtracerEnd => 0,
        }
    }
}

impl std::fmt::Display for Opcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Opcode::Hello => "HELLO",
            Opcode::Read => "READ",
            Opcode::Maps => "MAPS",
            Opcode::Threads => "THREADS",
            Opcode::Ptracer => "PTRACER",
            Opcode::PtracerEnd => "PTRACER_END",
        })
    }
}

/// A request: 32 bytes.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct Request {
    pub(crate) magic: [u8; 8],
    pub(crate) version: U32<Le>,
    pub(crate) opcode: U32<Le>,
    pub(crate) arg0: U64<Le>,
    pub(crate) arg1: U64<Le>,
}

impl Request {
    pub(crate) fn new(op: Opcode, arg0: u64, arg1: u64) -> Self {
        Request {
            magic: MAGIC,
            version: VERSION.into(),
            opcode: op.code().into(),
            arg0: arg0.into(),
            arg1: arg1.into(),
        }
    }
}

/// An answer's header: 24 bytes, then `length` bytes of payload.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct Answer {
    pub(crate) magic: [u8; 8],
    pub(crate) version: U32<Le>,
    pub(crate) status: U32<Le>,
    pub(crate) length: U64<Le>,
}

/// The fixed part of a `HELLO` payload: 48 bytes.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct Hello {
    pub(crate) pid: U32<Le>,
    pub(crate) ppid: U32<Le>,
    pub(crate) uid: U32<Le>,
    pub(crate) reserved: U32<Le>,
    pub(crate) rank: I64<Le>,
    pub(crate) size: I64<Le>,
    pub(crate) start_time: U64<Le>,
    pub(crate) exe_len: U32<Le>,
    pub(crate) env_len: U32<Le>,
}

/// The fixed part of a `THREADS` payload: 16 bytes.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct ThreadsHeader {
    pub(crate) count: U32<Le>,
    pub(crate) signal: U32<Le>,
    pub(crate) wait_ns: U64<Le>,
}

/// One thread of a `THREADS` payload: 176 bytes, then `stack_len` bytes.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub(crate) struct ThreadRecord {
    pub(crate) tid: U32<Le>,
    pub(crate) status: U32<Le>,
    pub(crate) regs: [U64<Le>; REGS],
    pub(crate) regs_valid: U32<Le>,
    pub(crate) reserved: U32<Le>,
    pub(crate) stack_start: U64<Le>,
    pub(crate) stack_len: U64<Le>,
}

/// A thread record's status (COOP.md, "THREADS").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ThreadStatus {
    /// Registers and stack copied by the thread itself.
    Captured,
    /// Signalled, did not answer before the deadline.
    NoAnswer,
    /// The channel's own thread: nothing captured.
    CoopThread,
    /// Gone before it could be signalled.
    Gone,
    /// Not signalled (`tgkill` failed).
    NotSignalled,
    /// Blocks the capture signal: not sent.
    Blocked,
    /// A value this reader does not know.
    Unknown(u32),
}

impl ThreadStatus {
    pub(crate) fn from_code(code: u32) -> Self {
        match code {
            0 => ThreadStatus::Captured,
            1 => ThreadStatus::NoAnswer,
            2 => ThreadStatus::CoopThread,
            3 => ThreadStatus::Gone,
            4 => ThreadStatus::NotSignalled,
            5 => ThreadStatus::Blocked,
            n => ThreadStatus::Unknown(n),
        }
    }
}

impl std::fmt::Display for ThreadStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ThreadStatus::Captured => f.write_str("captured"),
            ThreadStatus::NoAnswer => f.write_str("did not answer the capture signal in time"),
            ThreadStatus::CoopThread => f.write_str("the cooperative channel's own thread"),
            ThreadStatus::Gone => f.write_str("exited before it could be signalled"),
            ThreadStatus::NotSignalled => f.write_str("could not be signalled"),
            ThreadStatus::Blocked => f.write_str("blocks the capture signal"),
            ThreadStatus::Unknown(n) => write!(f, "unknown status {n}"),
        }
    }
}

/// A decoded `HELLO`.
#[derive(Debug)]
pub(crate) struct HelloPayload<'a> {
    pub(crate) fixed: Hello,
    pub(crate) exe: &'a [u8],
    pub(crate) env: &'a [u8],
}

/// Decodes a `HELLO` payload; what is wrong, when it is.
pub(crate) fn decode_hello(p: &[u8]) -> Result<HelloPayload<'_>, &'static str> {
    let (fixed, rest) =
        Hello::read_from_prefix(p).map_err(|_| "HELLO shorter than its 48-byte header")?;
    let exe_len = fixed.exe_len.get() as usize;
    let env_len = fixed.env_len.get() as usize;
    if exe_len > 4096 {
        return Err("HELLO executable path longer than 4096 bytes");
    }
    if exe_len.checked_add(env_len) != Some(rest.len()) {
        return Err("HELLO lengths disagree with its size");
    }
    let (exe, env) = rest.split_at_checked(exe_len).ok_or("HELLO lengths")?;
    Ok(HelloPayload { fixed, exe, env })
}

/// One decoded thread of a `THREADS` payload.
#[derive(Debug)]
pub(crate) struct ThreadPayload<'a> {
    pub(crate) record: ThreadRecord,
    pub(crate) stack: &'a [u8],
}

/// A decoded `THREADS` payload.
#[derive(Debug)]
pub(crate) struct ThreadsPayload<'a> {
    pub(crate) header: ThreadsHeader,
    pub(crate) threads: Vec<ThreadPayload<'a>>,
}

/// Decodes a `THREADS` payload: counts and lengths checked against COOP.md's caps and the bytes
/// present before anything is kept.
pub(crate) fn decode_threads(p: &[u8]) -> Result<ThreadsPayload<'_>, &'static str> {
    let (header, mut rest) =
        ThreadsHeader::read_from_prefix(p).map_err(|_| "THREADS shorter than its header")?;
    let count = u64::from(header.count.get());
    if count > THREADS_MAX {
        return Err("THREADS counts more than 1024 threads");
    }
    if count.saturating_mul(size_of::<ThreadRecord>() as u64) > rest.len() as u64 {
        return Err("THREADS counts more records than it holds");
    }
    let mut threads = Vec::with_capacity(count as usize);
    let mut total = 0u64;
    for _ in 0..count {
        let (record, after) =
            ThreadRecord::read_from_prefix(rest).map_err(|_| "THREADS record cut short")?;
        let len = record.stack_len.get();
        if len > STACK_MAX {
            return Err("THREADS stack longer than 512 KiB");
        }
        total += len;
        if total > STACKS_TOTAL {
            return Err("THREADS stacks longer than 64 MiB in all");
        }
        let (stack, after) = after
            .split_at_checked(len as usize)
            .ok_or("THREADS stack cut short")?;
        threads.push(ThreadPayload { record, stack });
        rest = after;
    }
    if !rest.is_empty() {
        return Err("THREADS has bytes after its last record");
    }
    Ok(ThreadsPayload { header, threads })
}

#[cfg(test)]
mod tests {
    use super::*;
    use zerocopy::FromZeros;

    #[test]
    fn the_layouts_have_the_sizes_of_coop_md() {
        assert_eq!(size_of::<Request>(), 32);
        assert_eq!(size_of::<Answer>(), 24);
        assert_eq!(size_of::<Hello>(), 48);
        assert_eq!(size_of::<ThreadsHeader>(), 16);
        assert_eq!(size_of::<ThreadRecord>(), 176);
        // Hand-computed from COOP.md's record table.
        assert_eq!(std::mem::offset_of!(ThreadRecord, regs_valid), 152);
        assert_eq!(std::mem::offset_of!(ThreadRecord, stack_start), 160);
        assert_eq!(std::mem::offset_of!(Hello, start_time), 32);
    }

    #[test]
    fn a_request_is_laid_out_as_coop_md_says() {
        let r = Request::new(Opcode::Read, 0x1122, 7);
        let mut want = b"MPIRCOOP".to_vec();
        want.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0]);
        want.extend_from_slice(&[0x22, 0x11, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(r.as_bytes(), want.as_slice());
    }

    #[test]
    fn hostile_payloads_are_refused_not_trusted() {
        assert!(decode_hello(&[0; 10]).is_err());
        let mut h = Hello::new_zeroed();
        h.exe_len = 5.into();
        h.env_len = u32::MAX.into();
        let mut p = h.as_bytes().to_vec();
        p.extend_from_slice(b"/bin/");
        assert!(decode_hello(&p).is_err());
        h.env_len = 0.into();
        let mut p = h.as_bytes().to_vec();
        p.extend_from_slice(b"/bin/");
        assert_eq!(decode_hello(&p).unwrap().exe, b"/bin/");

        let mut t = ThreadsHeader::new_zeroed();
        t.count = u32::MAX.into();
        assert!(decode_threads(t.as_bytes()).is_err());
        t.count = 1.into();
        let mut rec = ThreadRecord::new_zeroed();
        rec.stack_len = u64::MAX.into();
        let mut p = t.as_bytes().to_vec();
        p.extend_from_slice(rec.as_bytes());
        assert!(decode_threads(&p).is_err());
        rec.stack_len = 4.into();
        let mut p = t.as_bytes().to_vec();
        p.extend_from_slice(rec.as_bytes());
        p.extend_from_slice(&[1, 2, 3]);
        assert!(decode_threads(&p).is_err(), "a stack cut short");
        p.push(4);
        assert_eq!(decode_threads(&p).unwrap().threads[0].stack, &[1, 2, 3, 4]);
        p.push(5);
        assert!(decode_threads(&p).is_err(), "trailing bytes");
    }
}
