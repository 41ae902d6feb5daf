//! Functions of one image by address: the ELF symbol tables of the image and of its separate
//! debug file, sorted once, searched by link-time address.

use crate::debuginfo::ElfFile;
use crate::traits::SymbolKind;

/// Sorted function symbols of one image.
#[derive(Debug, Default)]
pub(super) struct FunctionIndex {
    /// (start, size, name), sorted by start.
    functions: Vec<(u64, u64, String)>,
}

impl FunctionIndex {
    /// The functions of `files` (the image, then its debug file); one entry per start address,
    /// the sized and global definitions preferred.
    pub(super) fn build<'a>(files: impl IntoIterator<Item = &'a ElfFile>) -> FunctionIndex {
        let mut functions: Vec<(u64, u64, String)> = Vec::new();
        for file in files {
            for (name, s) in file.all_symbols() {
                if s.kind == SymbolKind::Function && s.address != 0 && !name.is_empty() {
                    functions.push((s.address, s.size, name.to_string()));
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
    pub(super) fn lookup(&self, address: u64) -> Option<(&str, u64)> {
        let i = self.functions.partition_point(|f| f.0 <= address);
        let (start, size, name) = self.functions.get(i.checked_sub(1)?)?;
        let offset = address - start;
        let inside = if *size > 0 {
            offset < *size
        } else {
            self.functions.get(i).is_some_and(|next| address < next.0)
        };
        inside.then_some((name.as_str(), offset))
    }
}
