//! One definition per wire type: [`Codec`] gives each value its encoding and its decoding side
//! by side (quinn-proto's `coding.rs` pattern), so the two directions cannot drift apart.
//! Integers are little-endian and fixed width; strings are a length and UTF-8 bytes, bounded
//! by the field's own limit before anything is copied.

use crate::error::DecodeError;

/// A value's wire form: [`Codec::encode`] and [`Codec::decode`] are the one definition of it.
pub(crate) trait Codec: Sized {
    /// Appends the value.
    fn encode(&self, e: &mut Enc);
    /// Reads a value; fails (never panics) on short or malformed input.
    fn decode(d: &mut Dec<'_>) -> Result<Self, DecodeError>;
}

/// Bytes being written.
#[derive(Debug, Default)]
pub(crate) struct Enc(pub(crate) Vec<u8>);

impl Enc {
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    pub(crate) fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
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
    pub(crate) fn raw(&mut self, v: &[u8]) -> &mut Self {
        self.0.extend_from_slice(v);
        self
    }
    /// A string of at most 65,535 bytes: a `u16` length, then the bytes. Longer strings are
    /// cut at a character boundary (every caller bounds its strings far below that first).
    pub(crate) fn str16(&mut self, v: &str) -> &mut Self {
        let mut end = v.len().min(usize::from(u16::MAX));
        while !v.is_char_boundary(end) {
            end -= 1;
        }
        // `end` is at most u16::MAX.
        self.u16(end as u16);
        self.raw(&v.as_bytes()[..end])
    }
}

/// Bytes being read, with the position for errors.
#[derive(Debug)]
pub(crate) struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Dec { buf, pos: 0 }
    }
    /// Where the next field starts.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
    /// The next `n` bytes, for field `what`.
    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        let Some(end) = end else {
            return Err(DecodeError::Truncated {
                field: what,
                at: self.pos,
                wanted: n,
                left: self.buf.len() - self.pos,
            });
        };
        let s = self.buf.get(self.pos..end).unwrap_or_default();
        self.pos = end;
        Ok(s)
    }
    pub(crate) fn array<const N: usize>(
        &mut self,
        what: &'static str,
    ) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N, what)?);
        Ok(a)
    }
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }
    /// A `u16`-length string of at most `limit` bytes (checked before the bytes are taken).
    pub(crate) fn str16(
        &mut self,
        what: &'static str,
        limit: usize,
    ) -> Result<String, DecodeError> {
        let at = self.pos;
        let len = usize::from(self.u16(what)?);
        if len > limit {
            return Err(DecodeError::TooLong {
                field: what,
                at,
                len,
                limit,
            });
        }
        let bytes = self.take(len, what)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| DecodeError::NotUtf8 { field: what, at })
    }
    /// The whole input must have been read.
    pub(crate) fn end(&self, what: &'static str) -> Result<(), DecodeError> {
        match self.buf.len() - self.pos {
            0 => Ok(()),
            n => Err(DecodeError::Trailing {
                message: what,
                at: self.pos,
                count: n,
            }),
        }
    }
}

/// Decodes a whole value from `buf`: the value, then nothing.
pub(crate) fn decode_all<T: Codec>(buf: &[u8], what: &'static str) -> Result<T, DecodeError> {
    let mut d = Dec::new(buf);
    let v = T::decode(&mut d)?;
    d.end(what)?;
    Ok(v)
}

/// Encodes a value into a fresh buffer.
pub(crate) fn encode_to_vec<T: Codec>(v: &T) -> Vec<u8> {
    let mut e = Enc::default();
    v.encode(&mut e);
    e.0
}

/// Defines a fieldless enum of one-byte wire tags: the enum, its codes, its names for
/// messages, and the lookup from a code — one table read by both directions (quinn-proto's
/// `frame.rs` pattern).
macro_rules! tags {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$vmeta:meta])* $variant:ident = $code:literal => $text:literal, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name {
            $( $(#[$vmeta])* $variant = $code, )*
        }

        impl $name {
            /// Every value, in code order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),*];

            /// Its one-byte code on the wire.
            pub fn code(self) -> u8 {
                self as u8
            }

            /// The value of a code, if the code is known.
            pub fn from_code(code: u8) -> Option<Self> {
                match code {
                    $( $code => Some(Self::$variant), )*
                    _ => None,
                }
            }

            /// Its name, as errors and logs show it.
            pub fn name(self) -> &'static str {
                match self {
                    $( Self::$variant => $text, )*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}
pub(crate) use tags;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_input_names_the_field_and_position() {
        let mut d = Dec::new(&[1, 2, 3]);
        assert_eq!(d.u16("first").unwrap(), 0x0201);
        let e = d.u32("second").unwrap_err();
        assert_eq!(
            e,
            DecodeError::Truncated {
                field: "second",
                at: 2,
                wanted: 4,
                left: 1
            }
        );
    }

    #[test]
    fn a_string_longer_than_its_limit_is_refused_before_its_bytes() {
        let mut e = Enc::default();
        e.str16("hello world");
        let mut d = Dec::new(&e.0);
        let err = d.str16("name", 5).unwrap_err();
        assert!(
            matches!(
                err,
                DecodeError::TooLong {
                    len: 11,
                    limit: 5,
                    ..
                }
            ),
            "{err:?}"
        );
        // A length announcing more than there is: truncated, nothing allocated for it.
        let mut d = Dec::new(&[0xff, 0xff, b'a']);
        assert!(matches!(
            d.str16("name", usize::MAX),
            Err(DecodeError::Truncated { .. })
        ));
    }

    #[test]
    fn str16_cuts_at_a_character_boundary() {
        let long = "é".repeat(40_000);
        let mut e = Enc::default();
        e.str16(&long);
        let mut d = Dec::new(&e.0);
        let s = d.str16("s", usize::MAX).unwrap();
        assert!(s.len() <= usize::from(u16::MAX) && s.chars().all(|c| c == 'é'));
    }
}
