//! Typed reads on any [`Memory`]: integers of the target's widths, pointers, bounded strings.

use mpir_types::{DecodeError, View};

use crate::error::{Result, TargetError};
use crate::traits::{Memory, SymbolLookup};

/// The largest single buffer the helpers allocate for a caller-sized read they did not bound
/// themselves (1 GiB). Callers bound sizes taken from target data well below this.
pub const MAX_READ: u64 = 1 << 30;

/// [`MemoryExt::read_vec`] reads (and allocates) larger buffers this much at a time.
const READ_CHUNK: u64 = 1 << 20;

/// Reads one C string by growing chunks, stopping at the NUL, at `max_len`, or at the first
/// unreadable byte. Used by the default [`Memory::read_c_strings`].
pub(crate) fn read_c_string_by_chunks<M: Memory + ?Sized>(
    mem: &M,
    address: u64,
    max_len: u64,
) -> Result<Vec<u8>> {
    let unterminated = || -> TargetError {
        DecodeError::Unterminated {
            what: "string".into(),
            address,
            max_len,
        }
        .into()
    };
    // At most max_len bytes and then the NUL: max_len + 1 bytes are ever read.
    let limit = max_len.saturating_add(1);
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = 128u64;
    loop {
        let done = out.len() as u64;
        if done >= limit {
            return Err(unterminated());
        }
        let want = chunk.min(limit - done);
        let at = address.checked_add(done).ok_or(TargetError::Unreadable {
            address,
            len: done,
            fault: crate::Fault::Unmapped,
        })?;
        let start = out.len();
        out.resize(start + want as usize, 0);
        let got = match mem.read_partial(at, out.get_mut(start..).unwrap_or_default()) {
            Ok(n) => n,
            Err(TargetError::Unreadable { fault, .. }) if done > 0 => {
                return Err(TargetError::ShortRead {
                    address,
                    wanted: done + 1,
                    got: done,
                    fault,
                });
            }
            Err(e) => return Err(e),
        };
        out.truncate(start + got);
        if let Some(nul) = out
            .get(start..)
            .and_then(|s| s.iter().position(|&b| b == 0))
        {
            out.truncate(start + nul);
            return Ok(out);
        }
        if got == 0 {
            return Err(TargetError::ShortRead {
                address,
                wanted: done + 1,
                got: done,
                fault: crate::Fault::Unmapped,
            });
        }
        // Grow only after full reads: a target that returns short reads (page by page) would
        // otherwise make us zero ever larger buffers for a few bytes each.
        if got as u64 == want {
            chunk = (chunk * 2).min(64 * 1024);
        }
    }
}

/// Typed reads on any [`Memory`], in the target's data model.
pub trait MemoryExt: Memory {
    /// `len` bytes at `address` (refused above [`MAX_READ`]). Large reads are made and
    /// allocated 1 MiB at a time, so that a length taken from the target costs no more memory
    /// than the target really has mapped there; errors name `address` and `len` whole.
    fn read_vec(&self, address: u64, len: u64) -> Result<Vec<u8>> {
        if len > MAX_READ {
            return Err(DecodeError::TooLarge {
                what: format!("read at {address:#x}"),
                value: len,
                limit: MAX_READ,
            }
            .into());
        }
        if len <= READ_CHUNK {
            let mut buf = vec![0; len as usize];
            self.read_exact(address, &mut buf)?;
            return Ok(buf);
        }
        // Grown a chunk at a time: a size that the target claims is only as expensive as the
        // memory that is really there.
        let mut buf = Vec::new();
        while (buf.len() as u64) < len {
            let start = buf.len();
            let n = READ_CHUNK.min(len - start as u64) as usize;
            buf.resize(start + n, 0);
            let at = address.wrapping_add(start as u64);
            let chunk = buf.get_mut(start..).unwrap_or_default();
            match self.read_exact(at, chunk) {
                Ok(()) => {}
                Err(TargetError::ShortRead { got, fault, .. }) => {
                    return Err(TargetError::ShortRead {
                        address,
                        wanted: len,
                        got: start as u64 + got,
                        fault,
                    });
                }
                Err(TargetError::Unreadable { fault, .. }) if start > 0 => {
                    return Err(TargetError::ShortRead {
                        address,
                        wanted: len,
                        got: start as u64,
                        fault,
                    });
                }
                Err(TargetError::Unreadable { fault, .. }) => {
                    return Err(TargetError::Unreadable {
                        address,
                        len,
                        fault,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(buf)
    }

    /// An unsigned integer of `width` bytes (1, 2, 4 or 8).
    fn read_uint(&self, address: u64, width: u64, what: &str) -> Result<u64> {
        let mut buf = [0u8; 8];
        let slot = buf.get_mut(..width.min(8) as usize).unwrap_or_default();
        self.read_exact(address, slot)?;
        Ok(View::new(self.data_model(), address, slot).uint(0, width, what)?)
    }

    /// A signed integer of `width` bytes, sign-extended.
    fn read_int(&self, address: u64, width: u64, what: &str) -> Result<i64> {
        let mut buf = [0u8; 8];
        let slot = buf.get_mut(..width.min(8) as usize).unwrap_or_default();
        self.read_exact(address, slot)?;
        Ok(View::new(self.data_model(), address, slot).int(0, width, what)?)
    }

    /// A C `int`.
    fn read_c_int(&self, address: u64, what: &str) -> Result<i64> {
        self.read_int(address, self.data_model().int_size(), what)
    }

    /// A pointer, as a `u64` address.
    fn read_pointer(&self, address: u64, what: &str) -> Result<u64> {
        self.read_uint(address, self.data_model().pointer_size(), what)
    }

    /// A NUL-terminated string of at most `max_len` bytes (without its NUL).
    fn read_c_string(&self, address: u64, max_len: u64) -> Result<Vec<u8>> {
        read_c_string_by_chunks(self, address, max_len)
    }

    /// Writes a C `int`.
    fn write_c_int(&self, address: u64, value: i64, what: &str) -> Result<()> {
        let model = self.data_model();
        let mut buf = vec![0u8; model.int_size() as usize];
        mpir_types::ViewMut::new(model, address, &mut buf).put_c_int(0, value, what)?;
        self.write(address, &buf)
    }
}

impl<M: Memory + ?Sized> MemoryExt for M {}

/// Symbol lookups that must succeed.
pub trait SymbolLookupExt: SymbolLookup {
    /// The symbol called `name`, or [`TargetError::SymbolNotFound`].
    fn require_symbol(&self, name: &str) -> Result<crate::Symbol> {
        self.symbol(name)?
            .ok_or_else(|| TargetError::SymbolNotFound { name: name.into() })
    }
}

impl<S: SymbolLookup + ?Sized> SymbolLookupExt for S {}
