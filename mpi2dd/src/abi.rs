//! The fixed binary layouts of the draft's four structs in any [`DataModel`], and the names and
//! constants the draft defines.
//!
//! The draft's scalar types: `MPI2DD_ADDR_T` is a target address (the model's pointer width),
//! `MPI2DD_INT32_T`/`MPI2DD_UINT32_T` are 4 bytes whatever the model's `int`, `MPI2DD_BYTE_T`
//! is 1 byte. No layout here comes from debug information: the draft says the tables are read
//! "without first having to find its type in the debug information".
//!
//! - `MPI2DD_INFO` is an ordinary C struct. Its members happen to be in an order where the C
//!   ABI inserts no padding in any supported model (5+1+1+1 bytes, two 4-byte integers, then
//!   addresses), so the natural and the packed layouts are the same; we compute it with
//!   [`CStructBuilder`] and a test checks that the two agree.
//! - `MPI2DD_PROCDESC` is packed ("packed with no intervening padding bytes allowed"). On every
//!   supported model its natural layout is the same anyway.
//! - `MPI2DD_SPAWNDESC` and `MPI2DD_DIRECTORYENTRY`: the draft states packing in its proctable
//!   section only. We read all the table entries of variant 1 packed, the only reading that
//!   lets a tool decode them without DWARF. It matters for one struct and one width only:
//!   `MPI2DD_DIRECTORYENTRY` on 64-bit targets is 20 bytes packed and 24 with the C ABI's tail
//!   padding. The reference provider's header declares it packed (`provider/mpi2dd.h`), and the
//!   gdb oracle test checks that its DWARF says 20.

use mpir_types::{CStructBuilder, DataModel, FieldLayout, LayoutSource, TypeLayout};

/// The symbol of the `struct MPI2DD_INFO` every rank, directory, metadirectory and starter
/// defines.
pub const INFO_SYMBOL: &str = "MPI2DD_info";
/// The function MPI calls at points of interest; the debugger sets a breakpoint on it.
pub const BREAKPOINT_SYMBOL: &str = "MPI2DD_breakpoint";
/// `magic[0..5]`: `'M' 'P' 'I' '2' 0x7f`.
pub const MAGIC: [u8; 5] = *b"MPI2\x7f";
/// The only `version` the draft defines.
pub const VERSION: u8 = 1;
/// The only `variant` the draft defines.
pub const VARIANT: u8 = 1;
/// `MPI2DD_INT32_T` and `MPI2DD_UINT32_T`: four bytes on every target.
pub const INT32: u64 = 4;
/// Number of `MPI2DD_INT32_T` in `MPI2DD_INFO.padding`.
pub const PADDING_WORDS: u64 = 8;

/// Offsets and sizes of `struct MPI2DD_INFO` in one data model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
pub struct InfoLayout {
    /// `sizeof(struct MPI2DD_INFO)`: 128 bytes on 64-bit models, 96 on 32-bit ones.
    pub size: u64,
    pub magic: FieldLayout,
    pub version: FieldLayout,
    pub variant: FieldLayout,
    pub debug_state: FieldLayout,
    pub debugger_flags: FieldLayout,
    pub mpi_flags: FieldLayout,
    pub dll_name_32: FieldLayout,
    pub dll_name_64: FieldLayout,
    pub meta_host_name: FieldLayout,
    pub meta_executable_name: FieldLayout,
    pub abort_string: FieldLayout,
    pub proctable: FieldLayout,
    pub directory_table: FieldLayout,
    pub metadirectory_table: FieldLayout,
    pub proctable_size: FieldLayout,
    pub directory_size: FieldLayout,
    pub metadirectory_size: FieldLayout,
    pub meta_pid: FieldLayout,
    pub padding: FieldLayout,
}

impl InfoLayout {
    /// The layout in `model` (the C ABI's, which has no padding between members).
    pub fn new(model: &DataModel) -> Self {
        let p = model.pointer_size();
        let mut s = CStructBuilder::new();
        let magic = s.array(1, MAGIC.len() as u64);
        let version = s.scalar(1);
        let variant = s.scalar(1);
        let debug_state = s.scalar(1);
        let debugger_flags = s.scalar(INT32);
        let mpi_flags = s.scalar(INT32);
        let dll_name_32 = s.scalar(p);
        let dll_name_64 = s.scalar(p);
        let meta_host_name = s.scalar(p);
        let meta_executable_name = s.scalar(p);
        let abort_string = s.scalar(p);
        let proctable = s.scalar(p);
        let directory_table = s.scalar(p);
        let metadirectory_table = s.scalar(p);
        let proctable_size = s.scalar(INT32);
        let directory_size = s.scalar(INT32);
        let metadirectory_size = s.scalar(INT32);
        let meta_pid = s.scalar(INT32);
        let padding = s.array(INT32, PADDING_WORDS);
        InfoLayout {
            size: s.size(),
            magic,
            version,
            variant,
            debug_state,
            debugger_flags,
            mpi_flags,
            dll_name_32,
            dll_name_64,
            meta_host_name,
            meta_executable_name,
            abort_string,
            proctable,
            directory_table,
            metadirectory_table,
            proctable_size,
            directory_size,
            metadirectory_size,
            meta_pid,
            padding,
        }
    }

    /// Every member with its draft name, in declaration order.
    pub fn members(&self) -> [(&'static str, FieldLayout); 19] {
        [
            ("magic", self.magic),
            ("version", self.version),
            ("variant", self.variant),
            ("debug_state", self.debug_state),
            ("debugger_flags", self.debugger_flags),
            ("mpi_flags", self.mpi_flags),
            ("dll_name_32", self.dll_name_32),
            ("dll_name_64", self.dll_name_64),
            ("meta_host_name", self.meta_host_name),
            ("meta_executable_name", self.meta_executable_name),
            ("abort_string", self.abort_string),
            ("proctable", self.proctable),
            ("directory_table", self.directory_table),
            ("metadirectory_table", self.metadirectory_table),
            ("proctable_size", self.proctable_size),
            ("directory_size", self.directory_size),
            ("metadirectory_size", self.metadirectory_size),
            ("meta_pid", self.meta_pid),
            ("padding", self.padding),
        ]
    }

    /// As a [`TypeLayout`] named `MPI2DD_INFO`, to compare with what a debugger says.
    pub fn type_layout(&self) -> TypeLayout {
        to_type_layout("MPI2DD_INFO", self.size, &self.members())
    }
}

/// Offsets and sizes of the packed `struct MPI2DD_PROCDESC` in one data model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
pub struct ProcDescLayout {
    /// `sizeof`, the table's stride: 40 bytes on 64-bit models, 24 on 32-bit ones.
    pub size: u64,
    pub host_name: FieldLayout,
    pub executable_name: FieldLayout,
    pub spawn_desc: FieldLayout,
    pub comm_world_id: FieldLayout,
    pub pid: FieldLayout,
    pub rank: FieldLayout,
}

impl ProcDescLayout {
    /// The packed layout in `model`.
    pub fn new(model: &DataModel) -> Self {
        let mut s = Packed::default();
        ProcDescLayout {
            host_name: s.field(model.pointer_size()),
            executable_name: s.field(model.pointer_size()),
            spawn_desc: s.field(model.pointer_size()),
            comm_world_id: s.field(model.pointer_size()),
            pid: s.field(INT32),
            rank: s.field(INT32),
            size: s.0,
        }
    }

    /// Every member with its draft name, in declaration order.
    pub fn members(&self) -> [(&'static str, FieldLayout); 6] {
        [
            ("host_name", self.host_name),
            ("executable_name", self.executable_name),
            ("spawn_desc", self.spawn_desc),
            ("comm_world_id", self.comm_world_id),
            ("pid", self.pid),
            ("rank", self.rank),
        ]
    }

    /// As a [`TypeLayout`] named `MPI2DD_PROCDESC`.
    pub fn type_layout(&self) -> TypeLayout {
        to_type_layout("MPI2DD_PROCDESC", self.size, &self.members())
    }
}

/// Offsets and sizes of the packed `struct MPI2DD_SPAWNDESC` in one data model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
pub struct SpawnDescLayout {
    /// `sizeof`: 16 bytes on 64-bit models, 12 on 32-bit ones.
    pub size: u64,
    pub parent_comm_world_id: FieldLayout,
    pub parent_rank: FieldLayout,
    pub sequence: FieldLayout,
}

impl SpawnDescLayout {
    /// The packed layout in `model`.
    pub fn new(model: &DataModel) -> Self {
        let mut s = Packed::default();
        SpawnDescLayout {
            parent_comm_world_id: s.field(model.pointer_size()),
            parent_rank: s.field(INT32),
            sequence: s.field(INT32),
            size: s.0,
        }
    }

    /// Every member with its draft name, in declaration order.
    pub fn members(&self) -> [(&'static str, FieldLayout); 3] {
        [
            ("parent_comm_world_id", self.parent_comm_world_id),
            ("parent_rank", self.parent_rank),
            ("sequence", self.sequence),
        ]
    }

    /// As a [`TypeLayout`] named `MPI2DD_SPAWNDESC`.
    pub fn type_layout(&self) -> TypeLayout {
        to_type_layout("MPI2DD_SPAWNDESC", self.size, &self.members())
    }
}

/// Offsets and sizes of the packed `struct MPI2DD_DIRECTORYENTRY` in one data model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // one field per member of the draft's struct, same names
pub struct DirEntryLayout {
    /// `sizeof`, the stride of directory and metadirectory tables: 20 bytes on 64-bit models
    /// (packed, see the [module documentation](self)), 12 on 32-bit ones.
    pub size: u64,
    pub host_name: FieldLayout,
    pub executable_name: FieldLayout,
    pub pid: FieldLayout,
}

impl DirEntryLayout {
    /// The packed layout in `model`.
    pub fn new(model: &DataModel) -> Self {
        let mut s = Packed::default();
        DirEntryLayout {
            host_name: s.field(model.pointer_size()),
            executable_name: s.field(model.pointer_size()),
            pid: s.field(INT32),
            size: s.0,
        }
    }

    /// Every member with its draft name, in declaration order.
    pub fn members(&self) -> [(&'static str, FieldLayout); 3] {
        [
            ("host_name", self.host_name),
            ("executable_name", self.executable_name),
            ("pid", self.pid),
        ]
    }

    /// As a [`TypeLayout`] named `MPI2DD_DIRECTORYENTRY`.
    pub fn type_layout(&self) -> TypeLayout {
        to_type_layout("MPI2DD_DIRECTORYENTRY", self.size, &self.members())
    }
}

/// All four layouts of one data model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Layouts {
    /// `MPI2DD_INFO`.
    pub info: InfoLayout,
    /// `MPI2DD_PROCDESC`.
    pub procdesc: ProcDescLayout,
    /// `MPI2DD_SPAWNDESC`.
    pub spawndesc: SpawnDescLayout,
    /// `MPI2DD_DIRECTORYENTRY`.
    pub direntry: DirEntryLayout,
}

impl Layouts {
    /// The layouts of version 1, variant 1 in `model`.
    pub fn new(model: &DataModel) -> Self {
        Layouts {
            info: InfoLayout::new(model),
            procdesc: ProcDescLayout::new(model),
            spawndesc: SpawnDescLayout::new(model),
            direntry: DirEntryLayout::new(model),
        }
    }
}

/// Members one after the other, no alignment.
#[derive(Default)]
struct Packed(u64);

impl Packed {
    fn field(&mut self, size: u64) -> FieldLayout {
        let f = FieldLayout::new(self.0, size);
        self.0 += size;
        f
    }
}

fn to_type_layout(name: &str, size: u64, members: &[(&str, FieldLayout)]) -> TypeLayout {
    members.iter().fold(
        TypeLayout::new(name, size, LayoutSource::Abi),
        |t, (n, f)| t.with_member(*n, f.offset, f.size),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODELS: [DataModel; 5] = [
        DataModel::LP64,
        DataModel::ILP32,
        DataModel::LLP64,
        DataModel::LP64_BE,
        DataModel::ILP32_BE,
    ];

    /// Members tile the struct: each starts where the previous ended, and the last ends at
    /// `size`. For `MPI2DD_INFO` this is the claim that the C ABI adds no padding.
    fn assert_tiles(name: &str, size: u64, members: &[(&str, FieldLayout)]) {
        let mut at = 0;
        for (n, f) in members {
            assert_eq!(
                f.offset, at,
                "{name}.{n} is not right after the previous member"
            );
            at += f.size;
        }
        assert_eq!(at, size, "{name}: members do not end at sizeof");
    }

    #[test]
    fn every_struct_is_unpadded_in_every_model() {
        for m in MODELS {
            let l = Layouts::new(&m);
            assert_tiles("MPI2DD_INFO", l.info.size, &l.info.members());
            assert_tiles("MPI2DD_PROCDESC", l.procdesc.size, &l.procdesc.members());
            assert_tiles("MPI2DD_SPAWNDESC", l.spawndesc.size, &l.spawndesc.members());
            assert_tiles(
                "MPI2DD_DIRECTORYENTRY",
                l.direntry.size,
                &l.direntry.members(),
            );
        }
    }

    #[test]
    fn sizes_follow_the_pointer_width() {
        // Counted by hand from the draft: 8 bytes of bytes, two u32, 8 addresses, 4 i32 and
        // 32 bytes of padding.
        assert_eq!(
            InfoLayout::new(&DataModel::LP64).size,
            8 + 8 + 8 * 8 + 16 + 32
        );
        assert_eq!(
            InfoLayout::new(&DataModel::ILP32).size,
            8 + 8 + 8 * 4 + 16 + 32
        );
        assert_eq!(ProcDescLayout::new(&DataModel::LP64_BE).size, 4 * 8 + 8);
        assert_eq!(ProcDescLayout::new(&DataModel::ILP32_BE).size, 4 * 4 + 8);
        assert_eq!(SpawnDescLayout::new(&DataModel::LP64).size, 16);
        assert_eq!(DirEntryLayout::new(&DataModel::LP64).size, 20);
        assert_eq!(DirEntryLayout::new(&DataModel::ILP32).size, 12);
        assert_eq!(InfoLayout::new(&DataModel::LP64).meta_pid.offset, 92);
    }
}
