//! [`StringBatch`]: many C strings read at once, stored in a few buffers instead of one
//! allocation each (a million-rank table with a string per rank must not cost millions of
//! allocations).

use crate::error::{Result, TargetError};

/// Where one string lies: buffer, start, length. Buffer [`Span::ERROR`] marks a failed read,
/// with `start` the index of its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    buffer: u32,
    start: u32,
    len: u32,
}

impl Span {
    const ERROR: u32 = u32::MAX;
}

/// Largest arena buffer (span offsets are 32-bit).
const ARENA_MAX: usize = u32::MAX as usize;

/// The result of [`Memory::read_c_strings`](crate::Memory::read_c_strings): for each address
/// asked for, in order, the string's bytes (without NUL) or why it could not be read.
///
/// Strings are copied into a few large buffers (an arena) or point into buffers handed over
/// whole; each string costs 12 bytes of bookkeeping and no allocation of its own.
#[derive(Debug, Default)]
pub struct StringBatch {
    buffers: Vec<Vec<u8>>,
    spans: Vec<Span>,
    errors: Vec<TargetError>,
    /// The buffer that [`StringBatch::push_owned`] appends to.
    arena: Option<usize>,
}

impl StringBatch {
    /// An empty batch.
    pub fn new() -> Self {
        StringBatch::default()
    }

    /// An empty batch with room for `strings` strings of `bytes` bytes in all.
    pub fn with_capacity(strings: usize, bytes: usize) -> Self {
        let mut batch = StringBatch {
            spans: Vec::with_capacity(strings),
            ..StringBatch::default()
        };
        batch.arena = Some(batch.add_buffer(Vec::with_capacity(bytes.min(ARENA_MAX))));
        batch
    }

    /// Adds a buffer that later [`StringBatch::push_in`] calls point into; returns its index.
    pub fn add_buffer(&mut self, buffer: Vec<u8>) -> usize {
        self.buffers.push(buffer);
        self.buffers.len() - 1
    }

    fn push_error(&mut self, error: TargetError) {
        let start = u32::try_from(self.errors.len()).unwrap_or(u32::MAX);
        self.errors.push(error);
        self.spans.push(Span {
            buffer: Span::ERROR,
            start,
            len: 0,
        });
    }

    /// Appends a string that lies at `start..start + len` of buffer `buffer` (checked: a span
    /// outside the buffer is recorded as an error rather than trusted).
    pub fn push_in(&mut self, buffer: usize, start: usize, len: usize, address: u64) {
        let fits = self
            .buffers
            .get(buffer)
            .is_some_and(|b| start.checked_add(len).is_some_and(|end| end <= b.len()));
        match (
            fits,
            u32::try_from(buffer),
            u32::try_from(start),
            u32::try_from(len),
        ) {
            (true, Ok(buffer), Ok(start), Ok(len)) if buffer != Span::ERROR => {
                self.spans.push(Span { buffer, start, len })
            }
            _ => self.push_error(TargetError::InvalidValue {
                what: "string span".into(),
                address,
                problem: "outside its buffer".into(),
            }),
        }
    }

    /// Appends a string given as bytes (copied into the batch's arena).
    pub fn push_owned(&mut self, bytes: &[u8], address: u64) {
        let arena = match self.arena {
            Some(a)
                if self
                    .buffers
                    .get(a)
                    .is_some_and(|b| b.len() + bytes.len() <= ARENA_MAX) =>
            {
                a
            }
            _ => {
                let a = self.add_buffer(Vec::with_capacity(bytes.len().max(4096)));
                self.arena = Some(a);
                a
            }
        };
        let Some(buffer) = self.buffers.get_mut(arena) else {
            return self.push_in(usize::MAX, 0, 0, address);
        };
        let start = buffer.len();
        buffer.extend_from_slice(bytes);
        self.push_in(arena, start, bytes.len(), address);
    }

    /// Appends the result of reading one string.
    pub fn push_result(&mut self, result: Result<Vec<u8>>, address: u64) {
        match result {
            Ok(bytes) => self.push_owned(&bytes, address),
            Err(e) => self.push_error(e),
        }
    }

    /// The strings at positions `picks` (in that order) of this batch; the `k`-th pick, if past
    /// the end, becomes an error naming `address_of(k)`. Buffers and errors are moved, not
    /// copied.
    pub fn select(
        mut self,
        picks: impl IntoIterator<Item = usize>,
        address_of: impl Fn(usize) -> u64,
    ) -> StringBatch {
        let old = std::mem::take(&mut self.spans);
        for (k, i) in picks.into_iter().enumerate() {
            match old.get(i) {
                Some(&span) => self.spans.push(span),
                None => self.push_error(TargetError::InvalidValue {
                    what: "string".into(),
                    address: address_of(k),
                    problem: "not fetched".into(),
                }),
            }
        }
        self
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// String `i`: its bytes, or why it could not be read.
    pub fn get(&self, i: usize) -> Option<std::result::Result<&[u8], &TargetError>> {
        let s = self.spans.get(i)?;
        if s.buffer == Span::ERROR {
            return self.errors.get(s.start as usize).map(Err);
        }
        Some(Ok(self
            .buffers
            .get(s.buffer as usize)
            .and_then(|b| b.get(s.start as usize..(s.start as usize + s.len as usize)))
            .unwrap_or_default()))
    }

    /// All strings in order.
    pub fn iter(&self) -> impl Iterator<Item = std::result::Result<&[u8], &TargetError>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }
}

impl mpir_types::mpir::FetchedStrings for StringBatch {
    fn count(&self) -> usize {
        self.len()
    }

    fn fetched(&self, i: usize) -> Option<std::result::Result<&[u8], String>> {
        self.get(i).map(|r| r.map_err(|e| e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Fault;

    #[test]
    fn spans_owned_and_errors_in_order() {
        let mut b = StringBatch::new();
        let buf = b.add_buffer(b"node01\0/bin/app\0".to_vec());
        b.push_in(buf, 7, 8, 0x20);
        b.push_owned(b"long name", 0x30);
        b.push_result(
            Err(TargetError::Unreadable {
                address: 0x40,
                len: 1,
                fault: Fault::Unmapped,
            }),
            0x40,
        );
        b.push_in(buf, 0, 6, 0x10);
        // A span outside its buffer is an error, never a panic or a wrong slice.
        b.push_in(buf, 10, 100, 0x50);
        b.push_in(99, 0, 1, 0x60);
        let got: Vec<_> = b
            .iter()
            .map(|r| r.map(<[u8]>::to_vec).map_err(|e| e.to_string()))
            .collect();
        assert_eq!(got[0], Ok(b"/bin/app".to_vec()));
        assert_eq!(got[1], Ok(b"long name".to_vec()));
        assert!(got[2].as_ref().unwrap_err().contains("0x40"));
        assert_eq!(got[3], Ok(b"node01".to_vec()));
        assert!(got[4].as_ref().unwrap_err().contains("outside its buffer"));
        assert!(got[5].is_err());
        assert_eq!(b.len(), 6);
        assert!(b.get(6).is_none());
        // Reordered and repeated, with one position that does not exist.
        let picked = b.select([3, 0, 3, 2, 9], |i| 0x1000 + i as u64);
        let got: Vec<_> = picked
            .iter()
            .map(|r| r.map(<[u8]>::to_vec).map_err(|e| e.to_string()))
            .collect();
        assert_eq!(got[0], Ok(b"node01".to_vec()));
        assert_eq!(got[1], Ok(b"/bin/app".to_vec()));
        assert_eq!(got[2], Ok(b"node01".to_vec()));
        assert!(got[3].as_ref().unwrap_err().contains("0x40"));
        assert!(
            got[4].as_ref().unwrap_err().contains("0x1004"),
            "{:?}",
            got[4]
        );
    }

    #[test]
    fn many_owned_strings_share_one_arena() {
        let mut b = StringBatch::with_capacity(1000, 8000);
        for i in 0..1000u64 {
            b.push_owned(format!("node{i:04}").as_bytes(), i);
        }
        assert_eq!(b.buffers.len(), 1);
        assert_eq!(b.get(999).unwrap().unwrap(), b"node0999");
    }
}
