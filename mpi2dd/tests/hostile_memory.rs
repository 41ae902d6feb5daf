//! Hostile memory: an `MPI2DD_info` whose pointers and sizes are arbitrary, over a heap of
//! arbitrary bytes, never panics or hangs the reader, in both byte orders and widths; what it
//! returns never has more entries than the sizes claimed.

use mpi2dd::abi::info_size;
use mpi2dd::decode::{Info, encode_info};
use mpi2dd::flags::{DebugState, DebuggerFlags, MpiFlags};
use mpi2dd::read::{ReadOptions, TableKind, read_snapshot};
use mpir_target::mock::Access;
use mpir_target::{MockTarget, Symbol, SymbolKind};
use mpir_types::DataModel;
use proptest::prelude::*;

const HEAP: u64 = 0x10000;
const HEAP_LEN: u64 = 2048;
const INFO_AT: u64 = 0x8000;

/// An address: NULL, inside the heap (possibly near its end), or anywhere.
fn address() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        (0..HEAP_LEN).prop_map(|o| HEAP + o),
        any::<u32>().prop_map(u64::from),
    ]
}

fn size() -> impl Strategy<Value = i32> {
    prop_oneof![
        0..8i32,
        Just(-1),
        Just(i32::MAX),
        Just(i32::MIN),
        any::<i32>()
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]
    #[test]
    fn arbitrary_tables_never_panic(
        heap in proptest::collection::vec(any::<u8>(), HEAP_LEN as usize),
        ptrs in proptest::array::uniform8(address()),
        sizes in proptest::array::uniform3(size()),
        be in any::<bool>(),
        wide in any::<bool>(),
    ) {
        let model = match (be, wide) {
            (false, true) => DataModel::LP64,
            (false, false) => DataModel::ILP32,
            (true, true) => DataModel::LP64_BE,
            (true, false) => DataModel::ILP32_BE,
        };
        let info = Info {
            debug_state: DebugState::Spawn,
            debugger_flags: DebuggerFlags::EMPTY,
            mpi_flags: MpiFlags::I_AM_DIR,
            dll_name_32: ptrs[0],
            dll_name_64: ptrs[1],
            meta_host_name: ptrs[2],
            meta_executable_name: ptrs[3],
            abort_string: ptrs[4],
            proctable: ptrs[5],
            directory_table: ptrs[6],
            metadirectory_table: ptrs[7],
            proctable_size: sizes[0],
            directory_size: sizes[1],
            metadirectory_size: sizes[2],
            meta_pid: 1,
        };
        let size = info_size(&model);
        let mut bytes = vec![0; size as usize];
        encode_info(&model, INFO_AT, &info, &mut bytes).unwrap();
        let mut b = MockTarget::builder(model);
        b.map(INFO_AT, bytes, Access::READ_WRITE);
        b.map(HEAP, heap, Access::READ_ONLY);
        b.symbol(Symbol::new("MPI2DD_info", INFO_AT, size, SymbolKind::Object));
        let t = b.build();
        let opts = ReadOptions::default().with_max_string(64).with_max_proctable(1 << 12).with_max_directory_table(1 << 10).with_retries(2);
        let snap = read_snapshot(&t, &opts).unwrap();
        let claimed = |s: i32| u64::try_from(s).unwrap_or(0);
        let dropped = |k: TableKind| snap.problems.iter().filter(|p| p.table == k).count() as u64;
        prop_assert!(snap.proctable.len() as u64 + dropped(TableKind::Proctable) <= claimed(sizes[0]));
        prop_assert!(snap.directories.len() as u64 + dropped(TableKind::DirectoryTable) <= claimed(sizes[1]));
        prop_assert!(snap.metadirectories.len() as u64 + dropped(TableKind::MetadirectoryTable) <= claimed(sizes[2]));
        prop_assert!(!snap.unstable, "nothing changes in a mock");
        prop_assert!(t.writes().is_empty());
    }
}
