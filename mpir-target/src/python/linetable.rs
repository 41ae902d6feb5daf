//! CPython's line tables: from an instruction's offset in a code object to its source line.
//! Pure and bounded (one pass over the table, which the caller has already bounded); a table
//! that ends early or holds garbage gives `None` or a wrong line number, never a panic.
//!
//! Three formats:
//! * 3.9 `co_lnotab`: pairs (bytecode bytes advanced: u8, lines advanced: i8).
//! * 3.10 `co_linetable` (PEP 626): pairs (bytes covered: u8, line delta: i8), a delta of −128
//!   meaning "no line" for those bytes.
//! * 3.11–3.13 `co_linetable`, the location table: entries whose first byte has bit 7 set,
//!   bits 3–6 the entry's form and bits 0–2 its length in code units minus one; the forms
//!   carry a line delta (none, 0, 1, 2, or a signed varint) and column data this reader
//!   skips. Form 15 has no location.

/// The line of the instruction at byte offset `lasti` (3.9's `f_lasti`), from `co_lnotab`.
/// A negative offset (a frame not yet started) is the first line.
pub fn lnotab_line(firstlineno: i32, table: &[u8], lasti: i64) -> Option<u32> {
    let mut line = i64::from(firstlineno);
    if lasti >= 0 {
        let mut addr: i64 = 0;
        for pair in table.chunks_exact(2) {
            let &[a, l] = pair else { break };
            addr += i64::from(a);
            if addr > lasti {
                break;
            }
            line += i64::from(l as i8);
        }
    }
    positive(line)
}

/// The line of the instruction at byte offset `lasti` (3.10: twice `f_lasti`), from the PEP
/// 626 `co_linetable`. `None` when the table says the instruction has no line or does not
/// cover it.
pub fn linetable310_line(firstlineno: i32, table: &[u8], lasti: i64) -> Option<u32> {
    if lasti < 0 {
        return positive(i64::from(firstlineno));
    }
    let mut line = i64::from(firstlineno);
    let mut end: i64 = 0;
    for pair in table.chunks_exact(2) {
        let &[width, delta] = pair else { break };
        let start = end;
        end += i64::from(width);
        let delta = delta as i8;
        let this = if delta == -128 {
            None
        } else {
            line += i64::from(delta);
            Some(line)
        };
        if start <= lasti && lasti < end {
            return this.and_then(positive);
        }
    }
    None
}

/// The line of code unit `index` (3.11–3.13: the instruction pointer's offset from the code's
/// first unit, in 2-byte units), from the location table. `None` when the instruction has no
/// location or the table does not cover it.
pub fn locations_line(firstlineno: i32, table: &[u8], index: i64) -> Option<u32> {
    if index < 0 {
        return positive(i64::from(firstlineno));
    }
    let mut line = i64::from(firstlineno);
    let mut end: i64 = 0;
    let mut at = 0usize;
    while let Some(&first) = table.get(at) {
        if first & 0x80 == 0 {
            // Not the start of an entry: a damaged table.
            return None;
        }
        let form = (first >> 3) & 0x0f;
        let start = end;
        end += i64::from(first & 7) + 1;
        let delta = match form {
            13 | 14 => signed_varint(table, at + 1)?,
            10..=12 => i64::from(form - 10),
            _ => 0,
        };
        line += delta;
        if start <= index && index < end {
            return if form == 15 { None } else { positive(line) };
        }
        // The next entry starts at the next byte with bit 7 set.
        at += 1;
        while table.get(at).is_some_and(|b| b & 0x80 == 0) {
            at += 1;
        }
    }
    None
}

/// CPython's location-table varint: 6-bit groups, least significant first, bit 6 set on all
/// but the last. At most 10 groups (a 64-bit value); more is a damaged table.
fn varint(table: &[u8], mut at: usize) -> Option<u64> {
    let mut value = 0u64;
    let mut shift = 0u32;
    loop {
        let b = *table.get(at)?;
        value |= u64::from(b & 0x3f).checked_shl(shift)?;
        if b & 0x40 == 0 {
            return Some(value);
        }
        at += 1;
        shift += 6;
        if shift >= 64 {
            return None;
        }
    }
}

/// The signed form: the sign in bit 0.
fn signed_varint(table: &[u8], at: usize) -> Option<i64> {
    let u = varint(table, at)?;
    let magnitude = i64::try_from(u >> 1).ok()?;
    Some(if u & 1 == 1 { -magnitude } else { magnitude })
}

fn positive(line: i64) -> Option<u32> {
    u32::try_from(line).ok().filter(|&l| l > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lnotab_advances_until_the_offset_is_passed() {
        // Bytes 0..6 on line 10, 6..10 on 12, then 9.
        let table = [6, 2, 4, (-3i8) as u8];
        assert_eq!(lnotab_line(10, &table, 0), Some(10));
        assert_eq!(lnotab_line(10, &table, 5), Some(10));
        assert_eq!(lnotab_line(10, &table, 6), Some(12));
        assert_eq!(lnotab_line(10, &table, 10), Some(9));
        assert_eq!(lnotab_line(10, &table, -1), Some(10));
        assert_eq!(
            lnotab_line(10, &[7], 100),
            Some(10),
            "odd table: last byte ignored"
        );
    }

    #[test]
    fn pep626_ranges_and_no_line() {
        // 0..4 → 5 (delta +0 from 5), 4..8 no line, 8..12 → 7.
        let table = [4, 0, 4, 0x80, 4, 2];
        assert_eq!(linetable310_line(5, &table, 0), Some(5));
        assert_eq!(linetable310_line(5, &table, 6), None);
        assert_eq!(linetable310_line(5, &table, 8), Some(7));
        assert_eq!(linetable310_line(5, &table, 12), None, "past the table");
    }

    #[test]
    fn location_table_forms() {
        let table = [
            0x80 | (13 << 3) | 1, // no columns, 2 units, line delta varint
            0x02,                 // +1
            0x80 | (11 << 3),     // one-line form, delta 1, 1 unit
            9,
            12,
            0x80 | (15 << 3),     // no location, 1 unit
            0x80 | (14 << 3) | 2, // long form, 3 units
            0x43,                 // signed varint continued: low 6 bits 3, more
            0x01,                 // → 3 | 1<<6 = 67: odd → −33
            0,
            1,
            1,
            0x80 | (3 << 3), // short form, same line, 1 unit
            0x05,
        ];
        assert_eq!(locations_line(100, &table, 0), Some(101));
        assert_eq!(locations_line(100, &table, 1), Some(101));
        assert_eq!(locations_line(100, &table, 2), Some(102));
        assert_eq!(locations_line(100, &table, 3), None);
        assert_eq!(locations_line(100, &table, 4), Some(69));
        assert_eq!(locations_line(100, &table, 6), Some(69));
        assert_eq!(locations_line(100, &table, 7), Some(69));
        assert_eq!(locations_line(100, &table, 8), None);
    }

    #[test]
    fn garbage_tables_end_quietly() {
        assert_eq!(locations_line(1, &[0x01, 0x02], 0), None);
        assert_eq!(locations_line(1, &[0x80 | (13 << 3), 0xff], 0), None);
        let endless = [0x80 | (14 << 3)]
            .into_iter()
            .chain(std::iter::repeat_n(0x7f, 64))
            .collect::<Vec<u8>>();
        assert_eq!(locations_line(1, &endless, 0), None);
        assert_eq!(lnotab_line(i32::MIN, &[], 0), None);
    }
}
