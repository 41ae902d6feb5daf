//! [`ImageTarget`]: any memory backend plus the symbols and types of the process's images — the
//! complete [`Target`](crate::Target) that live processes and core files both are.

use std::sync::OnceLock;

use mpir_types::stacks::PythonProblem;
use mpir_types::{DataModel, TypeLayout};

use crate::debuginfo::ProcessImages;
use crate::error::Result;
use crate::python::Interpreter;
use crate::traits::{Memory, Symbol, SymbolLookup, TypeLookup, TypeQuery};

/// Memory `M` with symbols and types from [`ProcessImages`].
///
/// [`LiveTarget`](crate::live::LiveTarget) and [`CoreTarget`](crate::corefile::CoreTarget) are
/// this type over [`LiveMemory`](crate::live::LiveMemory) and
/// [`CoreFile`](crate::corefile::CoreFile).
#[derive(Debug)]
pub struct ImageTarget<M> {
    memory: M,
    images: ProcessImages,
    /// The CPython interpreter of these images, found on first use.
    python: OnceLock<std::result::Result<Option<Interpreter>, PythonProblem>>,
}

impl<M: Memory> ImageTarget<M> {
    /// Pairs `memory` with `images`.
    pub fn new(memory: M, images: ProcessImages) -> Self {
        ImageTarget {
            memory,
            images,
            python: OnceLock::new(),
        }
    }

    /// The memory backend.
    pub fn memory(&self) -> &M {
        &self.memory
    }

    /// The images, for symbols and types.
    pub fn images(&self) -> &ProcessImages {
        &self.images
    }

    /// Re-reads the process's memory map (after it loaded libraries); a no-op for cores.
    pub fn refresh(&mut self) -> Result<()> {
        self.python = OnceLock::new();
        self.images.refresh()
    }

    /// The CPython interpreter these images hold ([`Interpreter::find`]), found once per
    /// target (again after [`refresh`](Self::refresh)): every read of the process's Python
    /// frames, in every sample, shares it.
    pub fn python(&self) -> std::result::Result<Option<&Interpreter>, &PythonProblem> {
        self.python
            .get_or_init(|| Interpreter::find(self))
            .as_ref()
            .map(Option::as_ref)
    }
}

impl<M: Memory> Memory for ImageTarget<M> {
    fn data_model(&self) -> DataModel {
        self.memory.data_model()
    }
    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        self.memory.read_partial(address, buf)
    }
    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        self.memory.write(address, data)
    }
    fn read_exact(&self, address: u64, buf: &mut [u8]) -> Result<()> {
        self.memory.read_exact(address, buf)
    }
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> crate::StringBatch {
        self.memory.read_c_strings(addresses, max_len)
    }
}

impl<M> SymbolLookup for ImageTarget<M> {
    fn symbol(&self, name: &str) -> Result<Option<Symbol>> {
        self.images.symbol(name)
    }
}

impl<M> TypeLookup for ImageTarget<M> {
    fn type_layout(&self, query: TypeQuery<'_>) -> Result<Option<TypeLayout>> {
        self.images.type_layout(query)
    }
}
