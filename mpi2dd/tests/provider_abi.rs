//! gdb as the oracle for our layouts: the reference provider is compiled for x86_64 (LP64)
//! and i386 (ILP32, `-m32`), and `gdb -batch -ex 'ptype/o struct T'` on its DWARF must give
//! exactly the offsets and sizes of our `abi` structs (`offset_of!`/`size_of` on each field of
//! the 64-bit and 32-bit aliases), for all four structs (including the packed 20-byte
//! MPI2DD_DIRECTORYENTRY on 64-bit).
//!
//! Without a compiler, gdb or 32-bit support this skips with a reason, except when
//! `MPIR_REQUIRE_PEERS=1` (CI), where it fails.

mod support;

use std::mem::{offset_of, size_of};

use mpi2dd::abi::{self, LittleEndian as Le};
use mpir_types::{LayoutSource, TypeLayout};
use support::{assert_matches_gdb, cc, gdb_ptype, scratch, skip};

/// `size_of` the field that `get` borrows.
fn field_size<T, F>(_get: for<'a> fn(&'a T) -> &'a F) -> u64 {
    size_of::<F>() as u64
}

/// The layout of Rust struct `$ty` as a [`TypeLayout`] named `$name`: its size, and the
/// offset and size of each listed field (the test lists every field: gdb counts members).
macro_rules! layout {
    ($name:literal, $ty:ty, [$($f:ident),* $(,)?]) => {
        TypeLayout::new($name, size_of::<$ty>() as u64, LayoutSource::Abi)
            $(.with_member(
                stringify!($f),
                offset_of!($ty, $f) as u64,
                field_size::<$ty, _>(|s| &s.$f),
            ))*
    };
}

macro_rules! layouts {
    ($info:ty, $procdesc:ty, $spawndesc:ty, $direntry:ty) => {
        [
            layout!(
                "MPI2DD_INFO",
                $info,
                [
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
                ]
            ),
            layout!(
                "MPI2DD_PROCDESC",
                $procdesc,
                [
                    host_name,
                    executable_name,
                    spawn_desc,
                    comm_world_id,
                    pid,
                    rank,
                ]
            ),
            layout!(
                "MPI2DD_SPAWNDESC",
                $spawndesc,
                [parent_comm_world_id, parent_rank, sequence]
            ),
            layout!(
                "MPI2DD_DIRECTORYENTRY",
                $direntry,
                [host_name, executable_name, pid]
            ),
        ]
    };
}

fn check(ours: [TypeLayout; 4], flags: &[&str], name: &str) {
    let dir = scratch(name);
    let mut all = vec!["-g", "-c"];
    all.extend_from_slice(flags);
    let obj = match cc(
        &dir.join("provider.o"),
        &all,
        &["provider/mpi2dd_provider.c"],
    ) {
        Ok(o) => o,
        Err(e) => return skip(&e),
    };
    let types = [
        "struct MPI2DD_INFO",
        "struct MPI2DD_PROCDESC",
        "struct MPI2DD_SPAWNDESC",
        "struct MPI2DD_DIRECTORYENTRY",
    ];
    let gdb = match gdb_ptype(&obj, &types) {
        Ok(l) => l,
        Err(e) => return skip(&e),
    };
    for ((t, ours), gdb) in types.iter().zip(&ours).zip(&gdb) {
        assert_matches_gdb(&format!("{name} {t}"), ours, gdb);
    }
}

#[test]
fn lp64_layouts_match_the_providers_dwarf() {
    let ours = layouts!(
        abi::Info64<Le>,
        abi::ProcDesc64<Le>,
        abi::SpawnDesc64<Le>,
        abi::DirEntry64<Le>
    );
    check(ours, &["-m64"], "lp64");
}

#[test]
fn ilp32_layouts_match_the_providers_dwarf() {
    let ours = layouts!(
        abi::Info32<Le>,
        abi::ProcDesc32<Le>,
        abi::SpawnDesc32<Le>,
        abi::DirEntry32<Le>
    );
    check(ours, &["-m32"], "ilp32");
}
