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

use std::sync::{Arc, OnceLock};

use crate::debuginfo::{ElfFile, LoadSegment};
use crate::traits::SymbolKind;

/// Sorted function symbols of one image.
#[derive(Debug, Default)]
pub(super) struct FunctionIndex {
    /// Sorted by start.
    functions: Vec<Function>,
    /// Every kept function's name, one after another.
    names: String,
    /// Per function: its name as shared text, made on first use (libc's debug file names
    /// ~45,000 functions; a stack asks for a few).
    shared: Vec<OnceLock<Arc<str>>>,
    /// (jump target, stub name), sorted by target; targets several stubs jump to are dropped.
    stubs: Vec<(u64, Arc<str>)>,
}

/// One function: where it starts, its size, and where its name is in [`FunctionIndex::names`].
#[derive(Debug, Clone, Copy)]
struct Function {
    start: u64,
    size: u64,
    name: (usize, usize),
}

/// The code of an image, for reading jump stubs: its bytes and `PT_LOAD` segments, when it is
/// an x86 (32- or 64-bit) file.
pub(super) struct Code<'a, R> {
    /// The file (read where asked).
    pub(super) data: R,
    /// Its `PT_LOAD` segments.
    pub(super) segments: &'a [LoadSegment],
}

impl<'d, R: object::ReadRef<'d>> Code<'_, R> {
    /// The `len` bytes at link-time address `address`, when a segment holds them in the file.
    fn bytes(&self, address: u64, len: u64) -> Option<&'d [u8]> {
        let seg = self.segments.iter().find(|s| {
            address >= s.vaddr
                && address
                    .checked_add(len)
                    .is_some_and(|end| end <= s.vaddr.saturating_add(s.file_size))
        })?;
        self.data
            .read_bytes_at(address - seg.vaddr + seg.offset, len)
            .ok()
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
    pub(super) fn build<'a, 'd, R: object::ReadRef<'d>>(
        files: impl IntoIterator<Item = &'a ElfFile>,
        code: Option<Code<'_, R>>,
    ) -> FunctionIndex {
        let mut names = String::new();
        let mut functions: Vec<Function> = Vec::new();
        for file in files {
            file.each_symbol(|name, s| {
                if s.kind == SymbolKind::Function && s.address != 0 && !name.is_empty() {
                    let at = names.len();
                    names.push_str(name);
                    functions.push(Function {
                        start: s.address,
                        size: s.size,
                        name: (at, names.len()),
                    });
                }
            });
        }
        let mut index = FunctionIndex::from_parts(functions, names);
        if let Some(code) = code {
            index.stubs = index.build_stubs(&code);
        }
        index
    }

    /// The index of `functions` named in `names`: sorted, one per start address (the larger
    /// size first at one address, then by name, so that the choice is stable).
    fn from_parts(mut functions: Vec<Function>, names: String) -> FunctionIndex {
        let name = |f: &Function| names.get(f.name.0..f.name.1).unwrap_or("");
        functions.sort_by(|a, b| {
            a.start
                .cmp(&b.start)
                .then(b.size.cmp(&a.size))
                .then_with(|| name(a).cmp(name(b)))
        });
        functions.dedup_by_key(|f| f.start);
        let shared = std::iter::repeat_with(OnceLock::new)
            .take(functions.len())
            .collect();
        FunctionIndex {
            functions,
            names,
            shared,
            stubs: Vec::new(),
        }
    }

    /// The name of function `i`, shared.
    fn name(&self, i: usize) -> Option<&Arc<str>> {
        let f = self.functions.get(i)?;
        let shared = self.shared.get(i)?;
        Some(shared.get_or_init(|| Arc::from(self.names.get(f.name.0..f.name.1).unwrap_or(""))))
    }

    /// The jump stubs among the functions, by target; a target two stubs jump to names
    /// nothing for certain and is left out.
    fn build_stubs<'d, R: object::ReadRef<'d>>(&self, code: &Code<'_, R>) -> Vec<(u64, Arc<str>)> {
        let mut stubs: Vec<(u64, Arc<str>)> = self
            .functions
            .iter()
            .enumerate()
            .filter(|(_, f)| matches!(f.size, 2 | 5))
            .filter_map(|(i, f)| {
                let target = code.jump_target(f.start, f.size)?;
                Some((target, Arc::clone(self.name(i)?)))
            })
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
        let first_after = self.functions.partition_point(|f| f.start < body);
        if self
            .functions
            .get(first_after)
            .is_some_and(|f| f.start <= address)
        {
            return None;
        }
        let i = self.stubs.binary_search_by_key(&body, |s| s.0).ok()?;
        Some((&self.stubs[i].1, address - body))
    }

    /// The function containing link-time address `address`, with the offset into it. A symbol
    /// without a size contains only addresses before the next symbol.
    pub(super) fn lookup(&self, address: u64) -> Option<(&Arc<str>, u64)> {
        let i = self.functions.partition_point(|f| f.start <= address);
        let f = self.functions.get(i.checked_sub(1)?)?;
        let offset = address - f.start;
        let inside = if f.size > 0 {
            offset < f.size
        } else {
            self.functions
                .get(i)
                .is_some_and(|next| address < next.start)
        };
        if !inside {
            return None;
        }
        Some((self.name(i - 1)?, offset))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(functions: &[(u64, u64, &str)]) -> FunctionIndex {
        let mut names = String::new();
        let functions = functions
            .iter()
            .map(|(a, s, n)| {
                let at = names.len();
                names.push_str(n);
                Function {
                    start: *a,
                    size: *s,
                    name: (at, names.len()),
                }
            })
            .collect();
        FunctionIndex::from_parts(functions, names)
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
            data: &data[..],
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
        idx.stubs = idx.build_stubs(&code);
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
        let twice = index(&[(0x1000, 2, "a"), (0x1002, 2, "b")]);
        let mut data2 = [0x90u8; 0x20];
        data2[0..2].copy_from_slice(&[0xeb, 0x0e]); // 0x1002 + 0x0e = 0x1010
        data2[2..4].copy_from_slice(&[0xeb, 0x0c]); // 0x1004 + 0x0c = 0x1010
        let code2 = Code {
            data: &data2[..],
            segments: &[LoadSegment {
                vaddr: 0x1000,
                offset: 0,
                file_size: 0x20,
                mem_size: 0x20,
            }],
        };
        assert!(twice.build_stubs(&code2).is_empty());
    }
}
