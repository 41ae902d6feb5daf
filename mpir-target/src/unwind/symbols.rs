//! Functions of one image by address: the ELF symbol tables of the image and of its separate
//! debug file, sorted once, searched by link-time address.
//!
//! Jump stubs: Intel's compilers emit some functions (Intel MPI's `PMPI_Recv`, `PMPI_Send`, …)
//! as a symbol whose whole sized body is one direct `jmp` to code that no symbol names, with an
//! FDE of its own. A pc in that code is in no symbol (gdb prints `??`); it is named after the
//! stub only when the facts leave no doubt: the stub's bytes are exactly one x86 direct jump
//! (`EB rel8` of size 2 or `E9 rel32` of size 5), the jump lands on the start of the FDE that
//! covers the pc, only one stub jumps there, and no symbol starts between that FDE's start and
//! the pc.

use std::sync::Arc;

use crate::debuginfo::{ElfFile, LoadSegment};
use crate::traits::SymbolKind;

/// Sorted function symbols of one image.
#[derive(Debug, Default)]
pub(super) struct FunctionIndex {
    /// (start, size, name), sorted by start.
    functions: Vec<(u64, u64, Arc<str>)>,
    /// (jump target, stub name), sorted by target; targets several stubs jump to are dropped.
    stubs: Vec<(u64, Arc<str>)>,
}

/// The code of an image, for reading jump stubs: its bytes and `PT_LOAD` segments, when it is
/// an x86 (32- or 64-bit) file.
pub(super) struct Code<'a> {
    /// The whole file.
    pub(super) data: &'a [u8],
    /// Its `PT_LOAD` segments.
    pub(super) segments: &'a [LoadSegment],
}

impl Code<'_> {
    /// The `len` bytes at link-time address `address`, when a segment holds them in the file.
    fn bytes(&self, address: u64, len: u64) -> Option<&[u8]> {
        let seg = self.segments.iter().find(|s| {
            address >= s.vaddr
                && address
                    .checked_add(len)
                    .is_some_and(|end| end <= s.vaddr.saturating_add(s.file_size))
        })?;
        let start = usize::try_from(address - seg.vaddr + seg.offset).ok()?;
        self.data
            .get(start..start.checked_add(usize::try_from(len).ok()?)?)
    }

    /// Where the function at `address` of `size` bytes jumps, when its whole body is one
    /// direct jump.
    fn jump_target(&self, address: u64, size: u64) -> Option<u64> {
        let end = address.checked_add(size)?;
        let rel = match (size, self.bytes(address, size)?) {
            (2, [0xeb, rel]) => i64::from(*rel as i8),
            (5, [0xe9, a, b, c, d]) => i64::from(i32::from_le_bytes([*a, *b, *c, *d])),
            _ => return None,
        };
        end.checked_add_signed(rel)
    }
}

impl FunctionIndex {
    /// The functions of `files` (the image, then its debug file); one entry per start address,
    /// the sized and global definitions preferred. With the image's `code` (x86 only), the
    /// jump stubs among them.
    pub(super) fn build<'a>(
        files: impl IntoIterator<Item = &'a ElfFile>,
        code: Option<Code<'_>>,
    ) -> FunctionIndex {
        let mut functions: Vec<(u64, u64, Arc<str>)> = Vec::new();
        for file in files {
            for (name, s) in file.all_symbols() {
                if s.kind == SymbolKind::Function && s.address != 0 && !name.is_empty() {
                    functions.push((s.address, s.size, Arc::from(name)));
                }
            }
        }
        // Larger size first at one address, then by name, so that the choice is stable.
        functions.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(b.1.cmp(&a.1))
                .then_with(|| a.2.cmp(&b.2))
        });
        functions.dedup_by_key(|f| f.0);
        let stubs = code
            .map(|c| Self::build_stubs(&functions, &c))
            .unwrap_or_default();
        FunctionIndex { functions, stubs }
    }

    /// The jump stubs among `functions` (sorted by start), by target; a target two stubs jump
    /// to names nothing for certain and is left out.
    fn build_stubs(functions: &[(u64, u64, Arc<str>)], code: &Code<'_>) -> Vec<(u64, Arc<str>)> {
        let mut stubs: Vec<(u64, Arc<str>)> = functions
            .iter()
            .filter(|(_, size, _)| matches!(size, 2 | 5))
            .filter_map(|(a, size, n)| Some((code.jump_target(*a, *size)?, Arc::clone(n))))
            .collect();
        stubs.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut unique: Vec<(u64, Arc<str>)> = Vec::with_capacity(stubs.len());
        let mut rest = &stubs[..];
        while let Some((target, _)) = rest.first() {
            let same = rest.iter().take_while(|s| s.0 == *target).count();
            if let [only] = &rest[..same] {
                unique.push(only.clone());
            }
            rest = &rest[same..];
        }
        unique
    }

    /// The stub whose jump lands on `body` (the start of the FDE covering `address`), with
    /// `address`'s offset from `body`: when no symbol covers `address` and none starts in
    /// `body..=address`.
    pub(super) fn stub_body(&self, body: u64, address: u64) -> Option<(&Arc<str>, u64)> {
        if address < body || self.lookup(address).is_some() {
            return None;
        }
        let first_after = self.functions.partition_point(|f| f.0 < body);
        if self
            .functions
            .get(first_after)
            .is_some_and(|f| f.0 <= address)
        {
            return None;
        }
        let i = self.stubs.binary_search_by_key(&body, |s| s.0).ok()?;
        Some((&self.stubs[i].1, address - body))
    }

    /// The function containing link-time address `address`, with the offset into it. A symbol
    /// without a size contains only addresses before the next symbol.
    pub(super) fn lookup(&self, address: u64) -> Option<(&Arc<str>, u64)> {
        let i = self.functions.partition_point(|f| f.0 <= address);
        let (start, size, name) = self.functions.get(i.checked_sub(1)?)?;
        let offset = address - start;
        let inside = if *size > 0 {
            offset < *size
        } else {
            self.functions.get(i).is_some_and(|next| address < next.0)
        };
        inside.then_some((name, offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(functions: &[(u64, u64, &str)]) -> FunctionIndex {
        let mut functions: Vec<_> = functions
            .iter()
            .map(|(a, s, n)| (*a, *s, Arc::from(*n)))
            .collect();
        functions.sort_by_key(|f| f.0);
        FunctionIndex {
            functions,
            stubs: Vec::new(),
        }
    }

    fn look(idx: &FunctionIndex, address: u64) -> Option<(&str, u64)> {
        idx.lookup(address).map(|(n, o)| (&**n, o))
    }

    #[test]
    fn an_address_is_inside_a_sized_symbol_or_before_the_next_unsized_one() {
        let idx = index(&[
            (0x100, 0x10, "sized"),
            (0x200, 0, "unsized"),
            (0x300, 4, "last"),
        ]);
        assert_eq!(look(&idx, 0x100), Some(("sized", 0)));
        assert_eq!(look(&idx, 0x10f), Some(("sized", 0xf)));
        // Past a sized symbol's end: in no function (never the nearest one).
        assert_eq!(idx.lookup(0x110), None);
        assert_eq!(look(&idx, 0x2ff), Some(("unsized", 0xff)));
        assert_eq!(idx.lookup(0x304), None);
        assert_eq!(idx.lookup(0xff), None);
        assert_eq!(idx.lookup(u64::MAX), None);
        assert_eq!(FunctionIndex::default().lookup(0x100), None);
    }

    #[test]
    fn a_body_reached_only_through_a_jump_stub_is_named_after_the_stub() {
        // Segment at link address 0x1000 (file offset 0): a 2-byte stub at 0x1000 jumping to
        // 0x1010 (EB 0E), a 5-byte stub at 0x1020 jumping to 0x1100 (E9 DB 00 00 00), a
        // 2-byte symbol that is not a jump (C3 90) and a sized function at 0x1200.
        let mut data = vec![0x90u8; 0x300];
        data[0..2].copy_from_slice(&[0xeb, 0x0e]);
        data[0x20..0x25].copy_from_slice(&[0xe9, 0xdb, 0x00, 0x00, 0x00]);
        data[0x40..0x42].copy_from_slice(&[0xc3, 0x90]);
        let segments = [LoadSegment {
            vaddr: 0x1000,
            offset: 0,
            file_size: 0x300,
            mem_size: 0x300,
        }];
        let code = Code {
            data: &data,
            segments: &segments,
        };
        assert_eq!(code.jump_target(0x1000, 2), Some(0x1010));
        assert_eq!(code.jump_target(0x1020, 5), Some(0x1100));
        assert_eq!(code.jump_target(0x1040, 2), None);
        assert_eq!(code.jump_target(0x12f0, 0x20), None, "past the segment");
        let mut idx = index(&[
            (0x1000, 2, "PMPI_Recv"),
            (0x1020, 5, "PMPI_Send"),
            (0x1040, 2, "not_a_jump"),
            (0x1200, 0x10, "named"),
        ]);
        let functions: Vec<_> = idx.functions.clone();
        idx.stubs = FunctionIndex::build_stubs(&functions, &code);
        assert_eq!(
            idx.stub_body(0x1010, 0x1050).map(|(n, o)| (&**n, o)),
            None,
            "a symbol starts between the body and the pc"
        );
        assert_eq!(
            idx.stub_body(0x1100, 0x1150).map(|(n, o)| (&**n, o)),
            Some(("PMPI_Send", 0x50))
        );
        // Not the start of a jumped-to body, or covered by a symbol: nothing.
        assert_eq!(idx.stub_body(0x1104, 0x1150), None);
        assert_eq!(idx.stub_body(0x1200, 0x1204), None);
        // Two stubs jumping to one place name nothing.
        let twice = [(0x1000, 2, Arc::from("a")), (0x1002, 2, Arc::from("b"))];
        let mut data2 = vec![0x90u8; 0x20];
        data2[0..2].copy_from_slice(&[0xeb, 0x0e]); // 0x1002 + 0x0e = 0x1010
        data2[2..4].copy_from_slice(&[0xeb, 0x0c]); // 0x1004 + 0x0c = 0x1010
        let code2 = Code {
            data: &data2,
            segments: &[LoadSegment {
                vaddr: 0x1000,
                offset: 0,
                file_size: 0x20,
                mem_size: 0x20,
            }],
        };
        assert!(FunctionIndex::build_stubs(&twice, &code2).is_empty());
    }
}
