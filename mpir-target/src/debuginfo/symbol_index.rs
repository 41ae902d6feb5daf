//! The defined symbols of one ELF file by name, in a few flat arrays.
//!
//! Attaching to a starter parses every image it maps (Open MPI's `orterun`: ~70 files, with
//! libc's separate debug file ~45,000 symbols). A map of owned names to vectors cost two
//! allocations per symbol to build and as many frees to drop; without them a one-shot
//! `mpir attach` of a 64-rank job takes about a third less CPU (27 → 18–20 ms at best). Here
//! the names share one buffer and the symbols one vector, grouped by name; a name is found
//! through its 64-bit hash (std's keyed SipHash, so a file cannot choose names that collide),
//! then compared byte for byte.

use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher, RandomState};

use super::elf::ElfSymbol;

/// No name id.
const NONE: usize = usize::MAX;

/// A hasher for keys that are already hashes (`u64`): passes them through.
#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed here; anything else is folded in, still correct.
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Every defined symbol of a file, by name. Built with [`SymbolIndexBuilder`].
#[derive(Debug, Default)]
pub(super) struct SymbolIndex {
    /// Every distinct name, one after another.
    names: String,
    /// Per name id: where its name starts in `names` (it ends where the next one starts).
    name_start: Vec<usize>,
    /// Per name id, and one more: where its symbols start in `symbols` (they end where the
    /// next name's start).
    first: Vec<usize>,
    /// The symbols, grouped by name id, each name's in the order they were added.
    symbols: Vec<ElfSymbol>,
    /// A name's hash → the last name id added with that hash; `next` chains the earlier ones.
    by_hash: HashMap<u64, usize, BuildHasherDefault<PassThrough>>,
    /// Per name id: the name added before it with the same hash, or [`NONE`].
    next: Vec<usize>,
    hasher: RandomState,
}

impl SymbolIndex {
    /// The name of `id`.
    fn name(&self, id: usize) -> &str {
        let start = self.name_start.get(id).copied().unwrap_or(0);
        let end = self
            .name_start
            .get(id + 1)
            .copied()
            .unwrap_or(self.names.len());
        self.names.get(start..end).unwrap_or("")
    }

    /// The id of `name`, if it has one.
    fn id(&self, name: &str) -> Option<usize> {
        let mut id = self
            .by_hash
            .get(&self.hasher.hash_one(name))
            .copied()
            .unwrap_or(NONE);
        while id != NONE {
            if self.name(id) == name {
                return Some(id);
            }
            id = self.next.get(id).copied().unwrap_or(NONE);
        }
        None
    }

    /// The id of `name`, a new one when it has none yet.
    fn intern(&mut self, name: &str) -> usize {
        if let Some(id) = self.id(name) {
            return id;
        }
        let id = self.name_start.len();
        self.name_start.push(self.names.len());
        self.names.push_str(name);
        let earlier = self
            .by_hash
            .insert(self.hasher.hash_one(name), id)
            .unwrap_or(NONE);
        self.next.push(earlier);
        id
    }

    /// The symbols of name id `id`.
    fn of(&self, id: usize) -> &[ElfSymbol] {
        let start = self.first.get(id).copied().unwrap_or(0);
        let end = self.first.get(id + 1).copied().unwrap_or(start);
        self.symbols.get(start..end).unwrap_or(&[])
    }

    /// The definitions of `name`, in the order they were added.
    pub(super) fn get(&self, name: &str) -> &[ElfSymbol] {
        self.id(name).map_or(&[], |id| self.of(id))
    }

    /// Every symbol with its name, grouped by name.
    pub(super) fn iter(&self) -> impl Iterator<Item = (&str, &ElfSymbol)> {
        (0..self.name_start.len()).flat_map(move |id| {
            let name = self.name(id);
            self.of(id).iter().map(move |s| (name, s))
        })
    }

    /// How many distinct names.
    pub(super) fn len(&self) -> usize {
        self.name_start.len()
    }
}

/// Collects symbols, then groups them into a [`SymbolIndex`].
#[derive(Default)]
pub(super) struct SymbolIndexBuilder {
    index: SymbolIndex,
    /// (name id, symbol), in the order added.
    added: Vec<(usize, ElfSymbol)>,
}

impl SymbolIndexBuilder {
    /// Adds a definition of `name`.
    pub(super) fn add(&mut self, name: &str, symbol: ElfSymbol) {
        let id = self.index.intern(name);
        self.added.push((id, symbol));
    }

    /// The index: each name's symbols in the order added, a definition at an address the
    /// name already has left out (the same symbol in `.symtab` and `.dynsym`: the first kept).
    pub(super) fn finish(self) -> SymbolIndex {
        let SymbolIndexBuilder {
            mut index,
            mut added,
        } = self;
        // Stable: each name's definitions stay in the order they were added.
        added.sort_by_key(|&(id, _)| id);
        let names = index.name_start.len();
        let mut first = Vec::with_capacity(names + 1);
        let mut symbols: Vec<ElfSymbol> = Vec::with_capacity(added.len());
        let mut group = 0;
        for (id, symbol) in added {
            while first.len() <= id {
                first.push(symbols.len());
                group = symbols.len();
            }
            let seen = symbols
                .get(group..)
                .is_some_and(|g| g.iter().any(|s| s.address == symbol.address));
            if !seen {
                symbols.push(symbol);
            }
        }
        while first.len() <= names {
            first.push(symbols.len());
        }
        index.first = first;
        index.symbols = symbols;
        index
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::debuginfo::SymbolTable;
    use crate::traits::{Binding, SymbolKind};

    fn sym(address: u64, table: SymbolTable) -> ElfSymbol {
        ElfSymbol {
            address,
            size: 8,
            kind: SymbolKind::Object,
            binding: Binding::Global,
            table,
        }
    }

    #[test]
    fn names_find_their_definitions_in_order_without_duplicate_addresses() {
        let mut b = SymbolIndexBuilder::default();
        b.add("a", sym(1, SymbolTable::Symtab));
        b.add("bb", sym(2, SymbolTable::Symtab));
        b.add("a", sym(3, SymbolTable::Symtab));
        // The same symbol again from .dynsym: the .symtab one (added first) is kept.
        b.add("a", sym(1, SymbolTable::Dynsym));
        b.add("", sym(4, SymbolTable::Dynsym));
        let index = b.finish();
        assert_eq!(
            index.get("a"),
            &[sym(1, SymbolTable::Symtab), sym(3, SymbolTable::Symtab)]
        );
        assert_eq!(index.get("bb"), &[sym(2, SymbolTable::Symtab)]);
        assert_eq!(index.get(""), &[sym(4, SymbolTable::Dynsym)]);
        assert!(index.get("b").is_empty() && index.get("abb").is_empty());
        assert_eq!(index.len(), 3);
        let mut all: Vec<(&str, u64)> = index.iter().map(|(n, s)| (n, s.address)).collect();
        all.sort_unstable();
        assert_eq!(all, [("", 4), ("a", 1), ("a", 3), ("bb", 2)]);
    }

    #[test]
    fn names_sharing_a_hash_stay_apart() {
        // Force every name into one chain: all share the hash of "x".
        let mut index = SymbolIndex::default();
        let ids: Vec<usize> = ["x", "y", "z"]
            .iter()
            .map(|n| {
                let id = index.name_start.len();
                index.name_start.push(index.names.len());
                index.names.push_str(n);
                let h = index.hasher.hash_one("x");
                let earlier = index.by_hash.insert(h, id).unwrap_or(NONE);
                index.next.push(earlier);
                id
            })
            .collect();
        assert_eq!(ids, [0, 1, 2]);
        assert_eq!(index.id("x"), Some(0));
        // "y" and "z" hash elsewhere, so they are not found through the shared chain.
        assert_eq!(index.id("y"), None);
        let chained: Vec<&str> = {
            let mut id = *index.by_hash.get(&index.hasher.hash_one("x")).unwrap();
            let mut v = Vec::new();
            while id != NONE {
                v.push(index.name(id));
                id = index.next[id];
            }
            v
        };
        assert_eq!(chained, ["z", "y", "x"]);
    }

    #[test]
    fn many_names_round_trip() {
        // Fewer under Miri, which runs this a thousand times slower.
        let n: u64 = if cfg!(miri) { 300 } else { 5000 };
        let mut b = SymbolIndexBuilder::default();
        for i in 0..n {
            b.add(&format!("sym_{i}"), sym(i, SymbolTable::Dynsym));
            b.add(
                &format!("sym_{}", i / 2),
                sym(10_000 + i, SymbolTable::Dynsym),
            );
        }
        let index = b.finish();
        assert_eq!(index.len() as u64, n);
        for i in 0..n {
            let got: Vec<u64> = index
                .get(&format!("sym_{i}"))
                .iter()
                .map(|s| s.address)
                .collect();
            let mut want = vec![i];
            if 2 * i < n {
                want.extend([10_000 + 2 * i, 10_000 + 2 * i + 1]);
            }
            // The order added: sym_i itself comes first (added at step i), then the two
            // added at steps 2i and 2i+1.
            assert_eq!(got, want, "sym_{i}");
        }
        assert_eq!(index.iter().count() as u64, 2 * n);
    }
}
