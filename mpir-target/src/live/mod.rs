//! Live processes: memory ([`LiveMemory`]) and a complete [`Target`](crate::Target) over a
//! running process ([`LiveTarget`]: its memory plus the symbols and types of its images).
//!
//! Reading does not stop or trace the process. Process control (stopping, breakpoints, attach
//! and detach of many processes from one tracer thread) is the next step of this module.

mod memory;

use mpir_types::{DataModel, TypeLayout};

pub use memory::LiveMemory;

use crate::debuginfo::{DebugOptions, ProcessImages};
use crate::error::Result;
use crate::traits::{Memory, Symbol, SymbolLookup, TypeLookup, TypeQuery};

/// A running process as a [`Target`](crate::Target): memory through [`LiveMemory`], symbols and
/// types through [`ProcessImages`].
#[derive(Debug)]
pub struct LiveTarget {
    memory: LiveMemory,
    images: ProcessImages,
}

impl LiveTarget {
    /// Opens process `pid` for reading (no stop, no trace).
    pub fn open(pid: u32, options: DebugOptions) -> Result<Self> {
        let images = ProcessImages::for_pid(pid, options)?;
        let memory = LiveMemory::new(pid, images.data_model());
        Ok(LiveTarget { memory, images })
    }

    /// The memory.
    pub fn memory(&self) -> &LiveMemory {
        &self.memory
    }

    /// The images, for symbols and types.
    pub fn images(&self) -> &ProcessImages {
        &self.images
    }

    /// Re-reads the process's memory map (after it loaded libraries).
    pub fn refresh(&mut self) -> Result<()> {
        self.images.refresh()
    }
}

impl Memory for LiveTarget {
    fn data_model(&self) -> DataModel {
        self.memory.data_model()
    }
    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        self.memory.read_partial(address, buf)
    }
    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        self.memory.write(address, data)
    }
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> Vec<Result<Vec<u8>>> {
        self.memory.read_c_strings(addresses, max_len)
    }
}

impl SymbolLookup for LiveTarget {
    fn symbol(&self, name: &str) -> Result<Option<Symbol>> {
        self.images.symbol(name)
    }
}

impl TypeLookup for LiveTarget {
    fn type_layout(&self, query: TypeQuery<'_>) -> Result<Option<TypeLayout>> {
        self.images.type_layout(query)
    }
}
