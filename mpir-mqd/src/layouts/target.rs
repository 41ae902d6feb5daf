//! [`ShippedTypes`]: a target whose missing types are answered from a proven shipped set.

use std::ops::Deref;
use std::sync::Arc;

use mpir_target::{Memory, StringBatch, Symbol, SymbolLookup, TypeLookup, TypeQuery};
use mpir_types::{DataModel, TypeLayout};

use super::LayoutSet;

/// The target `T` points to (`&dyn Target`, `Rc<dyn Target>`), with the types its own debug information (and types sidecars) lack answered from
/// `set`: a set [`choose`](super::choose) accepted for this very process. Memory and symbols
/// are `T`'s, untouched.
#[derive(Debug, Clone)]
pub struct ShippedTypes<T> {
    inner: T,
    set: Arc<LayoutSet>,
}

impl<T> ShippedTypes<T> {
    /// `inner` with `set` behind its own types.
    pub fn new(inner: T, set: Arc<LayoutSet>) -> Self {
        ShippedTypes { inner, set }
    }

    /// The set.
    pub fn set(&self) -> &LayoutSet {
        &self.set
    }
}

impl<T: Deref<Target: Memory>> Memory for ShippedTypes<T> {
    fn data_model(&self) -> DataModel {
        self.inner.data_model()
    }
    fn read_partial(&self, address: u64, buf: &mut [u8]) -> mpir_target::Result<usize> {
        self.inner.read_partial(address, buf)
    }
    fn write(&self, address: u64, data: &[u8]) -> mpir_target::Result<()> {
        self.inner.write(address, data)
    }
    fn read_exact(&self, address: u64, buf: &mut [u8]) -> mpir_target::Result<()> {
        self.inner.read_exact(address, buf)
    }
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> StringBatch {
        self.inner.read_c_strings(addresses, max_len)
    }
}

impl<T: Deref<Target: SymbolLookup>> SymbolLookup for ShippedTypes<T> {
    fn symbol(&self, name: &str) -> mpir_target::Result<Option<Symbol>> {
        self.inner.symbol(name)
    }
}

impl<T: Deref<Target: TypeLookup>> TypeLookup for ShippedTypes<T> {
    /// The set's type of that name, when it has one; `T`'s answer otherwise. The set is used
    /// only for a process whose MPI library has no such types of its own
    /// ([`needs_shipped`](super::needs_shipped)), so asking `T` first would only search every
    /// other image's debug information for each type, on every rank.
    fn type_layout(&self, query: TypeQuery<'_>) -> mpir_target::Result<Option<TypeLayout>> {
        let shipped = match query {
            TypeQuery::Named(name) | TypeQuery::NamedNear { name, .. } => self.set.get(name),
            _ => None,
        };
        match shipped {
            Some(t) => Ok(Some(t)),
            None => self.inner.type_layout(query),
        }
    }
}
