//! [`StringBatch`]: many C strings read at once, stored in a few buffers instead of one
//! allocation each (a million-rank table with a string per rank must not cost millions of
//! allocations).

use crate::error::{Result, TargetError};

/// Where one string lies: buffer, start, length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    buffer: u32,
    start: u32,
    len: u32,
}

/// The result of [`Memory::read_c_strings`](crate::Memory::read_c_strings): for each address
/// asked for, in order, the string's bytes (without NUL) or why it could not be read.
#[derive(Debug, Default)]
pub struct StringBatch {
    buffers: Vec<Vec<u8>>,
    entries: Vec<std::result::Result<Span, TargetError>>,
}

impl StringBatch {
    /// An empty batch.
    pub fn new() -> Self {
        StringBatch::default()
    }

    /// Adds a buffer that later [`StringBatch::push_in`] calls point into; returns its index.
    pub fn add_buffer(&mut self, buffer: Vec<u8>) -> usize {
        self.buffers.push(buffer);
        self.buffers.len() - 1
    }

    /// Appends a string that lies at `start..start + len` of buffer `buffer` (checked: a span
    /// outside the buffer is recorded as an error rather than trusted).
    pub fn push_in(&mut self, buffer: usize, start: usize, len: usize, address: u64) {
        let fits = self
            .buffers
            .get(buffer)
            .is_some_and(|b| start.checked_add(len).is_some_and(|end| end <= b.len()));
        let span = match (
            fits,
            u32::try_from(buffer),
            u32::try_from(start),
            u32::try_from(len),
        ) {
            (true, Ok(buffer), Ok(start), Ok(len)) => Ok(Span { buffer, start, len }),
            _ => Err(TargetError::InvalidValue {
                what: "string span".into(),
                address,
                problem: "outside its buffer".into(),
            }),
        };
        self.entries.push(span);
    }

    /// Appends a string given as its own bytes.
    pub fn push_owned(&mut self, bytes: Vec<u8>, address: u64) {
        let len = bytes.len();
        let b = self.add_buffer(bytes);
        self.push_in(b, 0, len, address);
    }

    /// Appends the result of reading one string.
    pub fn push_result(&mut self, result: Result<Vec<u8>>, address: u64) {
        match result {
            Ok(bytes) => self.push_owned(bytes, address),
            Err(e) => self.entries.push(Err(e)),
        }
    }

    /// Number of strings.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// String `i`: its bytes, or why it could not be read.
    pub fn get(&self, i: usize) -> Option<std::result::Result<&[u8], &TargetError>> {
        Some(match self.entries.get(i)? {
            Ok(s) => Ok(self
                .buffers
                .get(s.buffer as usize)
                .and_then(|b| b.get(s.start as usize..(s.start + s.len) as usize))
                .unwrap_or_default()),
            Err(e) => Err(e),
        })
    }

    /// All strings in order.
    pub fn iter(&self) -> impl Iterator<Item = std::result::Result<&[u8], &TargetError>> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
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
        b.push_owned(b"long name".to_vec(), 0x30);
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
    }
}
