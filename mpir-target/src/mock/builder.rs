//! Laying out a [`MockTarget`].

use std::collections::{BTreeMap, HashMap};

use mpir_types::{DataModel, DecodeError, TypeLayout, ViewMut};

use super::{Access, Faults, MockTarget, Region};
use crate::traits::{Symbol, SymbolKind};

/// First address handed out by [`MockTargetBuilder::alloc`]; low enough for 32-bit targets.
const ALLOC_BASE: u64 = 0x0001_0000;
/// Unmapped bytes left after every allocation, so that overruns hit a hole.
const GUARD: u64 = 64;

/// Builds a [`MockTarget`]: memory regions, values in the target's data model, symbols, types,
/// and faults.
///
/// Allocations are separate regions with an unmapped gap after each, so a reader that runs past
/// the end of an object sees a short read, as it would on a real process. Builder methods panic
/// on misuse by the test author (overlapping regions, values that do not fit the model), with a
/// message saying what was wrong; that is never caused by target data.
#[derive(Debug, Clone)]
pub struct MockTargetBuilder {
    model: DataModel,
    /// Regions by start address; they never overlap.
    regions: BTreeMap<u64, Region>,
    next: u64,
    symbols: HashMap<String, Symbol>,
    types: HashMap<String, TypeLayout>,
    variable_types: HashMap<String, String>,
    faults: Faults,
}

impl MockTargetBuilder {
    /// An empty target of data model `model`.
    pub fn new(model: DataModel) -> Self {
        MockTargetBuilder {
            model,
            regions: BTreeMap::new(),
            next: ALLOC_BASE,
            symbols: HashMap::new(),
            types: HashMap::new(),
            variable_types: HashMap::new(),
            faults: Faults::default(),
        }
    }

    /// The data model values are laid out in.
    pub fn model(&self) -> DataModel {
        self.model
    }

    /// Maps `bytes` at `address` with `access`.
    ///
    /// # Panics
    /// If the region overlaps another, wraps the address space, or does not fit the model's
    /// pointer width.
    pub fn map(&mut self, address: u64, bytes: Vec<u8>, access: Access) -> &mut Self {
        let end = address
            .checked_add(bytes.len() as u64)
            .expect("mock region wraps the address space");
        assert!(
            end.saturating_sub(1) <= self.model.max_address(),
            "mock region {address:#x}..{end:#x} does not fit a {}-byte pointer",
            self.model.pointer_size()
        );
        self.next = self.next.max((end + GUARD).next_multiple_of(16));
        if bytes.is_empty() {
            // Nothing is readable there; an empty region would only shadow others.
            return self;
        }
        // The only candidate for an overlap is the last region starting before `end`.
        if let Some((_, r)) = self.regions.range(..end).next_back()
            && r.end() > address
        {
            panic!(
                "mock region {address:#x}..{end:#x} overlaps {:#x}..{:#x}",
                r.start,
                r.end()
            );
        }
        self.regions.insert(
            address,
            Region {
                start: address,
                bytes,
                access,
            },
        );
        self
    }

    /// Allocates `size` zeroed, read-write bytes at a fresh 16-byte aligned address.
    pub fn alloc(&mut self, size: u64) -> u64 {
        self.alloc_with(vec![
            0;
            usize::try_from(size).expect("allocation too large")
        ])
    }

    /// Allocates a read-write region holding `bytes`.
    pub fn alloc_with(&mut self, bytes: Vec<u8>) -> u64 {
        let address = self.next;
        self.map(address, bytes, Access::READ_WRITE);
        address
    }

    /// Allocates a NUL-terminated copy of `s` and returns its address.
    pub fn cstring(&mut self, s: impl AsRef<[u8]>) -> u64 {
        let mut bytes = s.as_ref().to_vec();
        bytes.push(0);
        self.alloc_with(bytes)
    }

    /// Allocates a region of `len` bytes that cannot be read or written (a `PROT_NONE` page).
    pub fn protected(&mut self, len: u64) -> u64 {
        let address = self.next;
        self.map(
            address,
            vec![0; usize::try_from(len).expect("region too large")],
            Access::NONE,
        );
        address
    }

    /// Changes the access rights of the region that starts at `address`.
    ///
    /// # Panics
    /// If no region starts there.
    pub fn set_access(&mut self, address: u64, access: Access) -> &mut Self {
        let r = self
            .regions
            .get_mut(&address)
            .unwrap_or_else(|| panic!("no mock region starts at {address:#x}"));
        r.access = access;
        self
    }

    /// Writes values in the target's data model into mapped memory at `address`..`address+len`
    /// through a [`ViewMut`] (offsets are relative to `address`).
    ///
    /// # Panics
    /// If the range is not inside one region, or `fill` fails (a value that does not fit).
    pub fn write_with(
        &mut self,
        address: u64,
        len: u64,
        fill: impl FnOnce(&mut ViewMut<'_>) -> Result<(), DecodeError>,
    ) -> &mut Self {
        let model = self.model;
        if len == 0 {
            let mut empty = [];
            fill(&mut ViewMut::new(model, address, &mut empty))
                .unwrap_or_else(|e| panic!("mock write at {address:#x}: {e}"));
            return self;
        }
        let r = self
            .regions
            .range_mut(..=address)
            .next_back()
            .map(|(_, r)| r)
            .filter(|r| address.saturating_add(len) <= r.end())
            .unwrap_or_else(|| panic!("{address:#x}+{len} is not inside one mock region"));
        let off = (address - r.start) as usize;
        let slot = &mut r.bytes[off..off + len as usize];
        fill(&mut ViewMut::new(model, address, slot))
            .unwrap_or_else(|e| panic!("mock write at {address:#x}: {e}"));
        self
    }

    /// Registers a symbol.
    pub fn symbol(&mut self, symbol: Symbol) -> &mut Self {
        self.symbols.insert(symbol.name.clone(), symbol);
        self
    }

    /// Allocates a data object of `size` bytes named `name` and returns its address.
    pub fn variable(&mut self, name: &str, size: u64) -> u64 {
        let address = self.alloc(size);
        self.symbol(Symbol::new(name, address, size, SymbolKind::Object));
        address
    }

    /// A C `int` variable with `value`.
    pub fn int_variable(&mut self, name: &str, value: i64) -> u64 {
        let size = self.model.int_size();
        let address = self.variable(name, size);
        self.write_with(address, size, |v| v.put_c_int(0, value, name));
        address
    }

    /// A pointer variable holding `value`.
    pub fn pointer_variable(&mut self, name: &str, value: u64) -> u64 {
        let size = self.model.pointer_size();
        let address = self.variable(name, size);
        self.write_with(address, size, |v| v.put_pointer(0, value, name));
        address
    }

    /// A `char name[len]` variable holding `text` (NUL-padded).
    pub fn char_array_variable(&mut self, name: &str, len: u64, text: &[u8]) -> u64 {
        let address = self.variable(name, len);
        self.write_with(address, len, |v| {
            v.put_char_array(0, len, text, false, name)
        });
        address
    }

    /// A function symbol with a few bytes of read-only "code".
    pub fn function(&mut self, name: &str) -> u64 {
        let address = self.next;
        // x86 `ret` padded with `int3`: recognisable, never executed.
        self.map(address, vec![0xc3, 0xcc, 0xcc, 0xcc], Access::READ_ONLY);
        self.symbol(Symbol::new(name, address, 4, SymbolKind::Function));
        address
    }

    /// Registers a type layout under its name.
    pub fn type_layout(&mut self, layout: TypeLayout) -> &mut Self {
        self.types.insert(layout.name.clone(), layout);
        self
    }

    /// Declares that pointer variable `variable` points to the type named `pointee` (for
    /// [`TypeQuery::PointeeOfVariable`](crate::TypeQuery::PointeeOfVariable)).
    pub fn variable_type(&mut self, variable: &str, pointee: &str) -> &mut Self {
        self.variable_types
            .insert(variable.to_string(), pointee.to_string());
        self
    }

    /// Every `read_partial` returns at most `n` bytes (n ≥ 1).
    pub fn max_read_chunk(&mut self, n: usize) -> &mut Self {
        self.faults.max_read_chunk = Some(n.max(1));
        self
    }

    /// `read_partial` calls after the first `n` fail with an injected fault.
    pub fn fail_reads_after(&mut self, n: u64) -> &mut Self {
        self.faults.fail_reads_after = Some(n);
        self
    }

    /// The target.
    pub fn build(self) -> MockTarget {
        MockTarget::from_parts(
            self.model,
            self.regions.into_values().collect(),
            self.symbols,
            self.types,
            self.variable_types,
            self.faults,
        )
    }
}
