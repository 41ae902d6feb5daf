//! The target abstraction: memory, symbols and types of one process image.
//!
//! Kept small on purpose so that every backend — ptrace, core files, a remote debug server, the
//! mock — can implement it. Everything else (typed reads, the proctable reader) is built on top
//! in [`MemoryExt`](crate::MemoryExt) and friends.

use mpir_types::{DataModel, TypeLayout};

use crate::error::{Result, TargetError};
use crate::strings::StringBatch;

/// Memory of one target process.
///
/// All methods take `&self`: backends use interior mutability where they need it (a tracer
/// thread, a fault counter), so one target can be shared by readers.
pub trait Memory {
    /// The target's byte order and C type sizes.
    fn data_model(&self) -> DataModel;

    /// Reads up to `buf.len()` bytes at `address` into the front of `buf`.
    ///
    /// Returns the number of bytes read: fewer than asked is a *short read* (the range ran into
    /// unmapped or protected memory), not an error. An error means not even the first byte could
    /// be read. An empty `buf` returns `Ok(0)`.
    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize>;

    /// Writes all of `data` at `address`.
    fn write(&self, address: u64, data: &[u8]) -> Result<()>;

    /// Fills `buf` from `address`, or fails with [`TargetError::ShortRead`] /
    /// [`TargetError::Unreadable`] naming where it stopped.
    fn read_exact(&self, address: u64, buf: &mut [u8]) -> Result<()> {
        let wanted = buf.len() as u64;
        let mut got = 0usize;
        while got < buf.len() {
            let at = address.wrapping_add(got as u64);
            let rest = buf.get_mut(got..).unwrap_or_default();
            match self.read_partial(at, rest) {
                Ok(0) => {
                    return Err(TargetError::ShortRead {
                        address,
                        wanted,
                        got: got as u64,
                        fault: crate::Fault::Unmapped,
                    });
                }
                Ok(n) => got += n,
                Err(TargetError::Unreadable { fault, .. }) if got > 0 => {
                    return Err(TargetError::ShortRead {
                        address,
                        wanted,
                        got: got as u64,
                        fault,
                    });
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Reads many NUL-terminated strings, each at most `max_len` bytes before its NUL, and
    /// returns them (without NUL) in the order of `addresses`, stored in a [`StringBatch`].
    ///
    /// The default reads them one by one; backends override it to batch and coalesce reads
    /// (a 1M-entry proctable must not cost millions of system calls). Duplicated addresses may
    /// be served from one read.
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> StringBatch {
        let mut batch = StringBatch::new();
        for &a in addresses {
            batch.push_result(crate::ext::read_c_string_by_chunks(self, a, max_len), a);
        }
        batch
    }
}

/// What kind of object a symbol names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum SymbolKind {
    /// Code.
    Function,
    /// Data.
    Object,
    /// Anything else (untyped, TLS, ...).
    Other,
}

/// A symbol's binding, as in ELF.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Binding {
    /// Visible to other images.
    Global,
    /// Visible to its own image only (e.g. MPICH's `MPID_Recvq_posted_head_ptr`).
    Local,
    /// Weak global.
    Weak,
}

/// A symbol found in the target, at its run-time address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct Symbol {
    /// The name looked up.
    pub name: String,
    /// Run-time address (load bias applied).
    pub address: u64,
    /// Size in bytes as the symbol table gives it (0 when unknown). Writes into interface
    /// arrays are bounded by it.
    pub size: u64,
    /// What it names.
    pub kind: SymbolKind,
    /// Its binding.
    pub binding: Binding,
    /// The image (executable or library) that defines it, when known.
    pub image: Option<String>,
    /// The file whose symbol table had it (the image, or its separate debug file), when known.
    pub found_in: Option<String>,
}

impl Symbol {
    /// A global symbol with no image information.
    pub fn new(name: impl Into<String>, address: u64, size: u64, kind: SymbolKind) -> Self {
        Symbol {
            name: name.into(),
            address,
            size,
            kind,
            binding: Binding::Global,
            image: None,
            found_in: None,
        }
    }

    /// The same symbol with another binding.
    pub fn with_binding(mut self, binding: Binding) -> Self {
        self.binding = binding;
        self
    }

    /// The same symbol, defined in `image`.
    pub fn with_image(mut self, image: impl Into<String>) -> Self {
        self.image = Some(image.into());
        self
    }
}

/// Symbols of a target, searched in every image it has loaded.
pub trait SymbolLookup {
    /// The symbol called `name` (global or local), or `None` when no image defines it.
    fn symbol(&self, name: &str) -> Result<Option<Symbol>>;
}

/// How to find a type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TypeQuery<'a> {
    /// By struct, union or typedef name.
    Named(&'a str),
    /// The type a pointer variable points to: what the MPIR spec recommends for
    /// `MPIR_PROCDESC` (the typedef name may be missing; the variable's type is not). Searched
    /// in the image that defines the variable (and the types sidecars).
    PointeeOfVariable(&'a str),
    /// A struct, union or typedef name as declared by the image that defines `symbol` (and
    /// the types sidecars); anywhere when no image defines `symbol`. Cheaper and more precise
    /// than [`TypeQuery::Named`] in a process with many libraries.
    NamedNear {
        /// The type name.
        name: &'a str,
        /// A symbol of the image to search.
        symbol: &'a str,
    },
}

/// Type layouts of a target, from its debug information.
pub trait TypeLookup {
    /// The layout of the type `query` designates, or `None` when no debug information has it.
    fn type_layout(&self, query: TypeQuery<'_>) -> Result<Option<TypeLayout>>;
}

/// A complete target: memory, symbols and types.
pub trait Target: Memory + SymbolLookup + TypeLookup {}

impl<T: Memory + SymbolLookup + TypeLookup + ?Sized> Target for T {}

impl<M: Memory + ?Sized> Memory for &M {
    fn data_model(&self) -> DataModel {
        (**self).data_model()
    }
    fn read_partial(&self, address: u64, buf: &mut [u8]) -> Result<usize> {
        (**self).read_partial(address, buf)
    }
    fn write(&self, address: u64, data: &[u8]) -> Result<()> {
        (**self).write(address, data)
    }
    fn read_exact(&self, address: u64, buf: &mut [u8]) -> Result<()> {
        (**self).read_exact(address, buf)
    }
    fn read_c_strings(&self, addresses: &[u64], max_len: u64) -> StringBatch {
        (**self).read_c_strings(addresses, max_len)
    }
}

impl<S: SymbolLookup + ?Sized> SymbolLookup for &S {
    fn symbol(&self, name: &str) -> Result<Option<Symbol>> {
        (**self).symbol(name)
    }
}

impl<T: TypeLookup + ?Sized> TypeLookup for &T {
    fn type_layout(&self, query: TypeQuery<'_>) -> Result<Option<TypeLayout>> {
        (**self).type_layout(query)
    }
}
