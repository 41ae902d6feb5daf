//! Bounds-checked, typed views over target bytes.
//!
//! [`View`] reads integers, pointers and C strings of the target's widths and byte order out of a
//! byte buffer (typically one bulk read of target memory); [`ViewMut`] writes them (used to lay
//! out test targets and to encode values the tool writes). Every access is checked: an access
//! outside the buffer is a [`DecodeError::Truncated`] naming the target address, never a panic.

use crate::error::{DecodeError, Result};
use crate::layout::FieldLayout;
use crate::model::DataModel;

/// Resolves `offset..offset+len` inside a buffer of `buf_len` bytes, or says what was missing.
#[inline]
fn range(
    base: u64,
    buf_len: usize,
    offset: u64,
    len: u64,
    what: &str,
) -> Result<std::ops::Range<usize>> {
    let truncated = || DecodeError::Truncated {
        what: what.to_string(),
        address: base.wrapping_add(offset),
        needed: len,
        available: (buf_len as u64).saturating_sub(offset),
    };
    let end = offset.checked_add(len).ok_or_else(truncated)?;
    if end > buf_len as u64 {
        return Err(truncated());
    }
    // Both fit in usize: end <= buf_len.
    Ok(offset as usize..end as usize)
}

#[inline]
fn check_width(base: u64, offset: u64, width: u64, what: &str) -> Result<()> {
    if matches!(width, 1 | 2 | 4 | 8) {
        Ok(())
    } else {
        Err(DecodeError::UnsupportedWidth {
            what: what.to_string(),
            address: base.wrapping_add(offset),
            width,
        })
    }
}

#[inline]
pub(crate) fn sign_extend(value: u64, width: u64) -> i64 {
    let shift = 64 - 8 * width as u32;
    ((value << shift) as i64) >> shift
}

/// A read-only view of target bytes that start at target address `base`.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    model: DataModel,
    base: u64,
    bytes: &'a [u8],
}

impl<'a> View<'a> {
    /// A view of `bytes`, which were read from the target at address `base`.
    pub fn new(model: DataModel, base: u64, bytes: &'a [u8]) -> Self {
        View { model, base, bytes }
    }

    /// The data model values are decoded in.
    pub fn model(&self) -> DataModel {
        self.model
    }

    /// Target address of the first byte.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// The underlying bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Number of bytes in view.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Whether the view holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Target address of `offset`, checked for wrap-around.
    pub fn address_of(&self, offset: u64, what: &str) -> Result<u64> {
        self.base
            .checked_add(offset)
            .ok_or_else(|| DecodeError::AddressOverflow {
                what: what.to_string(),
                base: self.base,
                offset,
            })
    }

    /// `len` raw bytes at `offset`.
    #[inline]
    pub fn slice(&self, offset: u64, len: u64, what: &str) -> Result<&'a [u8]> {
        let r = range(self.base, self.bytes.len(), offset, len, what)?;
        // `range` checked the bounds.
        Ok(self.bytes.get(r).unwrap_or_default())
    }

    /// A sub-view of `len` bytes at `offset`.
    #[inline]
    pub fn sub(&self, offset: u64, len: u64, what: &str) -> Result<View<'a>> {
        let bytes = self.slice(offset, len, what)?;
        Ok(View {
            model: self.model,
            base: self.base.wrapping_add(offset),
            bytes,
        })
    }

    /// An unsigned integer of `width` bytes (1, 2, 4 or 8) at `offset`.
    #[inline]
    pub fn uint(&self, offset: u64, width: u64, what: &str) -> Result<u64> {
        check_width(self.base, offset, width, what)?;
        let b = self.slice(offset, width, what)?;
        Ok(self.model.byte_order().read_uint(b))
    }

    /// A signed integer of `width` bytes (1, 2, 4 or 8) at `offset`, sign-extended.
    #[inline]
    pub fn int(&self, offset: u64, width: u64, what: &str) -> Result<i64> {
        Ok(sign_extend(self.uint(offset, width, what)?, width))
    }

    /// A pointer (the model's pointer width) at `offset`, as a `u64` address.
    #[inline]
    pub fn pointer(&self, offset: u64, what: &str) -> Result<u64> {
        self.uint(offset, self.model.pointer_size(), what)
    }

    /// A C `int` at `offset`.
    #[inline]
    pub fn c_int(&self, offset: u64, what: &str) -> Result<i64> {
        self.int(offset, self.model.int_size(), what)
    }

    /// A C `long` at `offset`.
    #[inline]
    pub fn c_long(&self, offset: u64, what: &str) -> Result<i64> {
        self.int(offset, self.model.long_size(), what)
    }

    /// A C `unsigned long` at `offset`.
    #[inline]
    pub fn c_ulong(&self, offset: u64, what: &str) -> Result<u64> {
        self.uint(offset, self.model.long_size(), what)
    }

    /// The unsigned integer a field layout describes.
    #[inline]
    pub fn field_uint(&self, field: FieldLayout, what: &str) -> Result<u64> {
        self.uint(field.offset, field.size, what)
    }

    /// The signed integer a field layout describes.
    #[inline]
    pub fn field_int(&self, field: FieldLayout, what: &str) -> Result<i64> {
        self.int(field.offset, field.size, what)
    }

    /// A NUL-terminated string at `offset`, without its NUL, of at most `max_len` bytes before
    /// the NUL (so at most `max_len + 1` bytes are examined).
    ///
    /// No NUL within those bytes is [`DecodeError::Unterminated`]; the buffer ending before a NUL
    /// or the bound is [`DecodeError::Truncated`] (the caller may read more and retry).
    pub fn cstr(&self, offset: u64, max_len: u64, what: &str) -> Result<&'a [u8]> {
        let start = range(self.base, self.bytes.len(), offset, 0, what)?.start;
        let rest = self.bytes.get(start..).unwrap_or_default();
        let bound = usize::try_from(max_len.saturating_add(1)).unwrap_or(usize::MAX);
        let window = rest.len().min(bound);
        let searched = rest.get(..window).unwrap_or_default();
        match searched.iter().position(|&b| b == 0) {
            Some(n) => Ok(searched.get(..n).unwrap_or_default()),
            None if window == bound => Err(DecodeError::Unterminated {
                what: what.to_string(),
                address: self.base.wrapping_add(offset),
                max_len,
            }),
            None => Err(DecodeError::Truncated {
                what: what.to_string(),
                address: self.base.wrapping_add(offset),
                needed: (window as u64).saturating_add(1),
                available: window as u64,
            }),
        }
    }

    /// A fixed-size C character array (`char name[len]`) at `offset`: the bytes before the first
    /// NUL, or all `len` bytes when the array is full and unterminated, as C code may leave it.
    pub fn char_array(&self, offset: u64, len: u64, what: &str) -> Result<&'a [u8]> {
        let b = self.slice(offset, len, what)?;
        let n = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        Ok(b.get(..n).unwrap_or_default())
    }
}

/// A writable view of a buffer that will be placed at target address `base`.
#[derive(Debug)]
pub struct ViewMut<'a> {
    model: DataModel,
    base: u64,
    bytes: &'a mut [u8],
}

impl<'a> ViewMut<'a> {
    /// A writable view of `bytes`, destined for target address `base`.
    pub fn new(model: DataModel, base: u64, bytes: &'a mut [u8]) -> Self {
        ViewMut { model, base, bytes }
    }

    /// The data model values are encoded in.
    pub fn model(&self) -> DataModel {
        self.model
    }

    /// A read-only view of the same bytes.
    pub fn as_view(&self) -> View<'_> {
        View::new(self.model, self.base, self.bytes)
    }

    fn slot(&mut self, offset: u64, len: u64, what: &str) -> Result<&mut [u8]> {
        let r = range(self.base, self.bytes.len(), offset, len, what)?;
        Ok(self.bytes.get_mut(r).unwrap_or_default())
    }

    /// Raw bytes at `offset`.
    pub fn put_bytes(&mut self, offset: u64, data: &[u8], what: &str) -> Result<()> {
        self.slot(offset, data.len() as u64, what)?
            .copy_from_slice(data);
        Ok(())
    }

    /// An unsigned integer of `width` bytes at `offset`; it must fit.
    pub fn put_uint(&mut self, offset: u64, width: u64, value: u64, what: &str) -> Result<()> {
        check_width(self.base, offset, width, what)?;
        if width < 8 && value >> (8 * width) != 0 {
            return Err(DecodeError::TooLarge {
                what: what.to_string(),
                value,
                limit: (1u64 << (8 * width)) - 1,
            });
        }
        let order = self.model.byte_order();
        order.write_uint(self.slot(offset, width, what)?, value);
        Ok(())
    }

    /// A signed integer of `width` bytes at `offset`; it must fit.
    pub fn put_int(&mut self, offset: u64, width: u64, value: i64, what: &str) -> Result<()> {
        check_width(self.base, offset, width, what)?;
        if sign_extend(value as u64, width) != value {
            return Err(DecodeError::TooLarge {
                what: what.to_string(),
                value: value.unsigned_abs(),
                limit: if width >= 8 {
                    i64::MAX as u64
                } else {
                    (1u64 << (8 * width - 1)) - 1
                },
            });
        }
        let order = self.model.byte_order();
        order.write_uint(self.slot(offset, width, what)?, value as u64);
        Ok(())
    }

    /// A pointer at `offset`; the address must fit the model's pointer width.
    pub fn put_pointer(&mut self, offset: u64, address: u64, what: &str) -> Result<()> {
        self.put_uint(offset, self.model.pointer_size(), address, what)
    }

    /// A C `int` at `offset`.
    pub fn put_c_int(&mut self, offset: u64, value: i64, what: &str) -> Result<()> {
        self.put_int(offset, self.model.int_size(), value, what)
    }

    /// A C `long` at `offset`.
    pub fn put_c_long(&mut self, offset: u64, value: i64, what: &str) -> Result<()> {
        self.put_int(offset, self.model.long_size(), value, what)
    }

    /// A C `unsigned long` at `offset`.
    pub fn put_c_ulong(&mut self, offset: u64, value: u64, what: &str) -> Result<()> {
        self.put_uint(offset, self.model.long_size(), value, what)
    }

    /// The integer a field layout describes.
    pub fn put_field_int(&mut self, field: FieldLayout, value: i64, what: &str) -> Result<()> {
        self.put_int(field.offset, field.size, value, what)
    }

    /// The unsigned integer a field layout describes.
    pub fn put_field_uint(&mut self, field: FieldLayout, value: u64, what: &str) -> Result<()> {
        self.put_uint(field.offset, field.size, value, what)
    }

    /// A `char[len]` array at `offset`: `text` then NUL padding. `text` must leave room for the
    /// NUL unless `allow_full` (C code may fill an array completely).
    pub fn put_char_array(
        &mut self,
        offset: u64,
        len: u64,
        text: &[u8],
        allow_full: bool,
        what: &str,
    ) -> Result<()> {
        let room = if allow_full {
            len
        } else {
            len.saturating_sub(1)
        };
        if text.len() as u64 > room {
            return Err(DecodeError::TooLarge {
                what: format!("{what} (text for a char[{len}])"),
                value: text.len() as u64,
                limit: room,
            });
        }
        if let Some(nul) = text.iter().position(|&b| b == 0) {
            return Err(DecodeError::InvalidLayout {
                type_name: what.to_string(),
                reason: format!("text has a NUL at byte {nul}; C would cut it there"),
            });
        }
        let slot = self.slot(offset, len, what)?;
        slot.fill(0);
        if let Some(dst) = slot.get_mut(..text.len()) {
            dst.copy_from_slice(text);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_width_in_each_order() {
        let bytes = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08];
        let le = View::new(DataModel::LP64, 0x1000, &bytes);
        let be = View::new(DataModel::LP64_BE, 0x1000, &bytes);
        assert_eq!(le.uint(0, 2, "x").unwrap(), 0x0201);
        assert_eq!(be.uint(0, 2, "x").unwrap(), 0x0102);
        assert_eq!(le.uint(0, 8, "x").unwrap(), 0x0807_0605_0403_0201);
        assert_eq!(be.uint(4, 4, "x").unwrap(), 0x0506_0708);
        assert_eq!(be.pointer(0, "p").unwrap(), 0x0102_0304_0506_0708);
        let be32 = View::new(DataModel::ILP32_BE, 0, &bytes);
        assert_eq!(be32.pointer(4, "p").unwrap(), 0x0506_0708);
    }

    #[test]
    fn sign_extends() {
        let bytes = [0xff, 0xff, 0xff, 0xfe];
        let v = View::new(DataModel::ILP32_BE, 0, &bytes);
        assert_eq!(v.c_int(0, "i").unwrap(), -2);
        assert_eq!(v.uint(0, 4, "u").unwrap(), 0xffff_fffe);
        assert_eq!(v.int(2, 1, "c").unwrap(), -1);
    }

    #[test]
    fn out_of_bounds_names_the_address() {
        let bytes = [0u8; 6];
        let v = View::new(DataModel::LP64, 0x4000, &bytes);
        let e = v.uint(4, 4, "MPIR_PROCDESC[0].pid").unwrap_err();
        assert_eq!(
            e,
            DecodeError::Truncated {
                what: "MPIR_PROCDESC[0].pid".into(),
                address: 0x4004,
                needed: 4,
                available: 2
            }
        );
        assert!(e.to_string().contains("0x4004"), "{e}");
        assert!(v.uint(u64::MAX, 8, "x").is_err());
        assert!(matches!(
            v.uint(0, 3, "odd"),
            Err(DecodeError::UnsupportedWidth { width: 3, .. })
        ));
    }

    #[test]
    fn cstr_bounds() {
        let v = View::new(DataModel::LP64, 0x10, b"abc\0def");
        assert_eq!(v.cstr(0, 64, "s").unwrap(), b"abc");
        assert_eq!(v.cstr(3, 64, "s").unwrap(), b"");
        assert!(matches!(
            v.cstr(4, 64, "s"),
            Err(DecodeError::Truncated { address: 0x14, .. })
        ));
        // "abc" is 3 bytes: allowed with max_len 3, not with 2.
        assert_eq!(v.cstr(0, 3, "s").unwrap(), b"abc");
        assert!(matches!(
            v.cstr(0, 2, "s"),
            Err(DecodeError::Unterminated {
                address: 0x10,
                max_len: 2,
                ..
            })
        ));
        assert_eq!(v.cstr(3, 0, "s").unwrap(), b"");
        // At the end of the buffer: more bytes are needed.
        assert!(matches!(
            v.cstr(7, 0, "s"),
            Err(DecodeError::Truncated { address: 0x17, .. })
        ));
        assert!(v.cstr(8, 1, "s").is_err());
    }

    #[test]
    fn char_arrays_may_be_full() {
        let v = View::new(DataModel::LP64, 0, b"abcd");
        assert_eq!(v.char_array(0, 4, "a").unwrap(), b"abcd");
        let v = View::new(DataModel::LP64, 0, b"ab\0d");
        assert_eq!(v.char_array(0, 4, "a").unwrap(), b"ab");
    }

    #[test]
    fn writes_check_fit() {
        let mut buf = [0u8; 8];
        let mut w = ViewMut::new(DataModel::ILP32, 0, &mut buf);
        assert!(w.put_pointer(0, 0x1_0000_0000, "p").is_err());
        w.put_pointer(0, 0xdead_beef, "p").unwrap();
        assert!(w.put_int(4, 2, 40_000, "s").is_err());
        w.put_int(4, 2, -2, "s").unwrap();
        assert!(w.put_char_array(0, 4, b"abcd", false, "n").is_err());
        w.put_char_array(4, 4, b"abcd", true, "n").unwrap();
        let v = w.as_view();
        assert_eq!(v.pointer(0, "p").unwrap(), 0xdead_beef);
        assert_eq!(v.char_array(4, 4, "n").unwrap(), b"abcd");
    }
}
