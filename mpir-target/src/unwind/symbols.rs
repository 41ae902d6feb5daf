//! Functions of one image by address: the ELF symbol tables of the image and of its separate
//! debug file, sorted once, searched by link-time address.

use std::sync::Arc;

use crate::debuginfo::ElfFile;
use crate::traits::SymbolKind;

/// Sorted function symbols of one image.
#[derive(Debug, Default)]
pub(super) struct FunctionIndex {
    /// (start, size, name), sorted by start.
    functions: Vec<(u64, u64, Arc<str>)>,
}

impl FunctionIndex {
    /// The functions of `files` (the image, then its debug file); one entry per start address,
    /// the sized and global definitions preferred.
    pub(super) fn build<'a>(files: impl IntoIterator<Item = &'a ElfFile>) -> FunctionIndex {
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
        FunctionIndex { functions }
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
        FunctionIndex { functions }
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
}
