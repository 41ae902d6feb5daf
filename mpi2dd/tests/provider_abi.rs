//! gdb as the oracle for our layouts: the reference provider is compiled for x86_64 (LP64)
//! and i386 (ILP32, `-m32`), and `gdb -batch -ex 'ptype/o struct T'` on its DWARF must give
//! exactly the offsets and sizes our `abi` module computes from the draft, for all four
//! structs (including the packed 20-byte MPI2DD_DIRECTORYENTRY on 64-bit).
//!
//! Without a compiler, gdb or 32-bit support this skips with a reason, except when
//! `MPIR_REQUIRE_PEERS=1` (CI), where it fails.

mod support;

use mpi2dd::abi::Layouts;
use mpir_types::DataModel;
use support::{assert_matches_gdb, cc, gdb_ptype, scratch, skip};

fn check(model: DataModel, flags: &[&str], name: &str) {
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
    let l = Layouts::new(&model);
    let ours = [
        l.info.type_layout(),
        l.procdesc.type_layout(),
        l.spawndesc.type_layout(),
        l.direntry.type_layout(),
    ];
    for ((t, ours), gdb) in types.iter().zip(&ours).zip(&gdb) {
        assert_matches_gdb(&format!("{name} {t}"), ours, gdb);
    }
}

#[test]
fn lp64_layouts_match_the_providers_dwarf() {
    check(DataModel::LP64, &["-m64"], "lp64");
}

#[test]
fn ilp32_layouts_match_the_providers_dwarf() {
    check(DataModel::ILP32, &["-m32"], "ilp32");
}
