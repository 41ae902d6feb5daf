//! Real MPI starters, unmodified: stock Open MPI keeps every MPIR symbol in the `.dynsym` of
//! `libopen-rte.so.40` (no DWARF anywhere); stock MPICH's `mpiexec.hydra` is stripped, and its
//! symbols and types come from a debug file rebuilt from Debian's source and placed in a
//! build-id directory by `scripts/hydra-debug-symbols.sh`. gdb says where each symbol is.
//!
//! Skipped without the stacks, except under `MPIR_REQUIRE_PEERS=1` (CI).

mod support;

use std::path::PathBuf;
use std::process::Command;

use mpir_target::debuginfo::{DebugOptions, DebugSource, ProcessImages};
use mpir_target::{SymbolKind, SymbolLookup, TypeLookup, TypeQuery};
use mpir_types::LayoutSource;
use mpir_types::mpir::ProcDescLayout;
use support::*;

const OPEN_MPI_SYMBOLS: &[&str] = &[
    "MPIR_Breakpoint",
    "MPIR_proctable",
    "MPIR_proctable_size",
    "MPIR_being_debugged",
    "MPIR_debug_state",
    "MPIR_i_am_starter",
    "MPIR_partial_attach_ok",
    "MPIR_force_to_main",
    "MPIR_executable_path",
    "MPIR_server_arguments",
    "MPIR_attach_fifo",
];

fn maps_contain(pid: u32, needle: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains(needle))
}

#[test]
fn open_mpi_symbols_live_in_libopen_rte() {
    if !have("orterun") || !have("gdb") {
        return skip("Open MPI (orterun) or gdb is not installed");
    }
    let job = Job::spawn(
        Command::new("orterun")
            .args(["--oversubscribe", "-n", "2", "sleep", "60"])
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .env("OMPI_MPIR_DO_NOT_WARN", "1"),
    )
    .unwrap();
    assert!(
        wait_for(20, || maps_contain(job.pid(), "libopen-rte.so.40")),
        "orterun never mapped libopen-rte"
    );
    let images = ProcessImages::for_pid(job.pid(), DebugOptions::default()).unwrap();
    let pid = job.pid().to_string();
    let gdb = gdb_addresses(&[], &["-p", &pid], OPEN_MPI_SYMBOLS).unwrap();
    for name in OPEN_MPI_SYMBOLS {
        let s = images
            .symbol(name)
            .unwrap()
            .unwrap_or_else(|| panic!("{name} not found"));
        assert!(
            s.image.as_deref().unwrap().contains("/libopen-rte.so.40"),
            "{name} in {:?}",
            s.image
        );
        assert_eq!(Some(&s.address), gdb.get(*name), "{name}: ours vs gdb");
    }
    let bp = images.symbol("MPIR_Breakpoint").unwrap().unwrap();
    assert_eq!(bp.kind, SymbolKind::Function);
    // Sizes from the symbol table, which bound writes: Open MPI's path is 512, not the spec's 256.
    let size = |n: &str| images.symbol(n).unwrap().unwrap().size;
    assert_eq!(size("MPIR_executable_path"), 512);
    assert_eq!(size("MPIR_server_arguments"), 1024);
    for absent in [
        "MPIR_acquired_pre_main",
        "MPIR_ignore_queues",
        "MPIR_debug_abort_string",
    ] {
        assert_eq!(images.symbol(absent).unwrap(), None, "{absent}");
    }
    // No DWARF anywhere: no type, and the ABI layout is the fallback.
    assert_eq!(
        images
            .type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))
            .unwrap(),
        None
    );
    assert_eq!(ProcDescLayout::abi(&images.data_model()).size, 24);
}

/// The build-id debug directory made by `scripts/hydra-debug-symbols.sh`.
fn hydra_debug_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MPIR_HYDRA_DEBUG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/debug"));
    dir.join(".build-id").is_dir().then_some(dir)
}

#[test]
fn stock_hydra_with_rebuilt_symbols() {
    if !have("mpiexec.hydra") || !have("gdb") {
        return skip("MPICH (mpiexec.hydra) or gdb is not installed");
    }
    let Some(debug_dir) = hydra_debug_dir() else {
        return skip("no hydra debug directory (run scripts/hydra-debug-symbols.sh)");
    };
    let hydra = PathBuf::from("/usr/bin/mpiexec.hydra");
    let options = DebugOptions::default().with_debug_dir(&debug_dir);
    // Without the debug directory the stripped binary has no MPIR symbol at all.
    let mut bare = DebugOptions::default();
    bare.debug_dirs.clear();
    let images = ProcessImages::from_files(&[(hydra.clone(), 0)], bare).unwrap();
    assert_eq!(images.symbol("MPIR_proctable").unwrap(), None);

    let images = ProcessImages::from_files(&[(hydra.clone(), 0)], options.clone()).unwrap();
    let (debug_file, how) = images.images()[0].debug_file().expect("debug file found");
    assert!(matches!(how, DebugSource::BuildId(_)), "{how:?}");
    let ty = images
        .type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))
        .unwrap()
        .expect("MPIR_PROCDESC from the rebuilt DWARF");
    assert_eq!(ty.byte_size, 24);
    assert!(
        matches!(&ty.source, LayoutSource::DebugInfo { file: Some(f) } if f == &debug_file.display().to_string())
    );
    let layout = ProcDescLayout::from_type(&ty, &images.data_model()).unwrap();
    assert_eq!((layout.pid.offset, layout.pid.size), (16, 4));
    let setup = format!("set debug-file-directory {}", debug_dir.display());
    let gdb = gdb_ptype_with(&setup, &hydra, "*MPIR_proctable");
    assert_matches_gdb("hydra MPIR_PROCDESC", &ty, &gdb);

    // Live: a running hydra, symbols at the addresses gdb finds with the same debug directory.
    let job = Job::spawn(Command::new(&hydra).args(["-n", "1", "sleep", "60"])).unwrap();
    assert!(wait_for(20, || maps_contain(job.pid(), "mpiexec.hydra")));
    let live = ProcessImages::for_pid(job.pid(), options).unwrap();
    let names = [
        "MPIR_Breakpoint",
        "MPIR_proctable",
        "MPIR_proctable_size",
        "MPIR_debug_state",
        "MPIR_being_debugged",
        "MPIR_i_am_starter",
        "MPIR_partial_attach_ok",
    ];
    let pid = job.pid().to_string();
    let gdb = gdb_addresses(&[&setup], &["-p", &pid], &names).unwrap();
    for name in names {
        let s = live
            .symbol(name)
            .unwrap()
            .unwrap_or_else(|| panic!("{name}"));
        assert!(s.found_in.as_deref().unwrap().ends_with(".debug"), "{s:?}");
        assert_eq!(Some(&s.address), gdb.get(name), "{name}: ours vs gdb");
    }
}

fn gdb_ptype_with(setup: &str, file: &std::path::Path, ty: &str) -> GdbLayout {
    let text = run(Command::new("gdb")
        .args([
            "-nx",
            "-batch",
            "-iex",
            setup,
            "-ex",
            &format!("ptype/o {ty}"),
        ])
        .arg(file))
    .unwrap();
    parse_ptype(&text, 1).unwrap().remove(0)
}
