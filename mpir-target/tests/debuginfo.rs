//! Symbols and type layouts from real binaries compiled at test time: PIE, non-PIE and shared
//! library variants, -O0/-O2, DWARF 4 and 5; run-time addresses checked against what the
//! running process prints; layouts checked against gdb; separate debug information found through
//! build-id directories, debuglinks, explicit files, dwz and types sidecars; bad files refused.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use mpir_target::debuginfo::{DebugInfoError, DebugOptions, DebugSource, ElfFile, ProcessImages};
use mpir_target::{Binding, SymbolKind, SymbolLookup, TargetError, TypeLookup, TypeQuery};
use mpir_types::mpir::ProcDescLayout;
use mpir_types::{DataModel, LayoutSource, MemberKind};
use support::*;

/// Builds the starter fixture; `None` (after skip) without a C compiler.
fn build(dir: &Path, name: &str, flags: &[&str]) -> Option<PathBuf> {
    let src = fixtures().join("starter.c");
    let mut args: Vec<&str> = flags.to_vec();
    let src = src.to_str().unwrap().to_string();
    args.push(&src);
    match cc(&dir.join(name), &args) {
        Ok(p) => Some(p),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

fn no_debug_dirs() -> DebugOptions {
    let mut o = DebugOptions::default();
    o.debug_dirs.clear();
    o
}

/// A live fixture: every symbol at the address the process itself printed; types from DWARF.
fn check_live(exe: &Path, env: &[(&str, &str)], expect_image: &str) {
    let running = Running::start(exe, env);
    let images = ProcessImages::for_pid(running.pid(), no_debug_dirs()).unwrap();
    assert_eq!(images.data_model(), DataModel::host());
    for (name, kind) in [
        ("MPIR_proctable", SymbolKind::Object),
        ("MPIR_Breakpoint", SymbolKind::Function),
        ("MPIR_debug_state", SymbolKind::Object),
    ] {
        let s = images
            .symbol(name)
            .unwrap()
            .unwrap_or_else(|| panic!("{name} not found"));
        assert_eq!(
            s.address,
            running.printed[name],
            "{name} in {}",
            exe.display()
        );
        assert_eq!(s.kind, kind, "{name}");
        // Functions live in the image that defines them. Data defined in a library and used
        // by the executable is copy-relocated into the executable, and the process uses that
        // copy (the address check above): the executable is searched first, as ld.so does.
        if kind == SymbolKind::Function {
            assert!(
                s.image.as_deref().unwrap().ends_with(expect_image),
                "{name} in {:?}",
                s.image
            );
        }
    }
    let defining = images
        .images()
        .iter()
        .find(|i| i.path().to_string_lossy().ends_with(expect_image))
        .expect("the defining image is mapped");
    assert!(!defining.elf().symbols("MPIR_proctable").is_empty());
    let local = images.symbol("local_counter").unwrap().unwrap();
    assert_eq!(local.binding, Binding::Local);
    assert_eq!(local.address, running.printed["local_counter"]);
    assert_eq!(
        images.symbol("MPIR_executable_path").unwrap().unwrap().size,
        512
    );
    assert_eq!(images.symbol("no_such_symbol").unwrap(), None);
    // The spec's reliable way: the pointee type of MPIR_proctable.
    let ty = images
        .type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))
        .unwrap()
        .expect("MPIR_PROCDESC from DWARF");
    assert_eq!(ty.name, "MPIR_PROCDESC");
    assert!(matches!(
        ty.source,
        LayoutSource::DebugInfo { file: Some(_) }
    ));
    let layout = ProcDescLayout::from_type(&ty, &images.data_model()).unwrap();
    assert_eq!(
        (layout.size, layout.pid.offset, layout.pid.size),
        (24, 16, 4)
    );
    assert_eq!(running.finish(), 0, "the fixture ran to completion");
}

#[test]
fn live_pie_non_pie_and_shared_library() {
    let dir = scratch("live");
    for (name, flags) in [
        ("pie-O2-dwarf5", &["-O2", "-gdwarf-5", "-fPIE", "-pie"][..]),
        ("pie-O0-dwarf4", &["-O0", "-gdwarf-4", "-fPIE", "-pie"][..]),
        (
            "nopie-O2-dwarf4",
            &["-O2", "-gdwarf-4", "-fno-pie", "-no-pie"][..],
        ),
    ] {
        let Some(exe) = build(&dir, name, flags) else {
            return;
        };
        check_live(&exe, &[], name);
    }
    // MPIR in a shared library (like Open MPI's libopen-rte): found at the library's bias.
    let lib = dir.join("libmpir.so");
    let libsrc = fixtures().join("libmpir.c");
    if let Err(e) = cc(
        &lib,
        &["-O2", "-g", "-shared", "-fPIC", libsrc.to_str().unwrap()],
    ) {
        return skip(&e);
    }
    let dirflag = format!("-L{}", dir.display());
    let src = fixtures().join("starter.c");
    let exe = match cc(
        &dir.join("uses-lib"),
        &[
            "-O2",
            "-g",
            "-DMPIR_IN_LIBRARY",
            src.to_str().unwrap(),
            &dirflag,
            "-lmpir",
        ],
    ) {
        Ok(exe) => exe,
        Err(e) => return skip(&e),
    };
    check_live(
        &exe,
        &[("LD_LIBRARY_PATH", dir.to_str().unwrap())],
        "libmpir.so",
    );
}

#[test]
fn layouts_agree_with_gdb() {
    if !have("gdb") {
        return skip("gdb is not installed");
    }
    let dir = scratch("gdb");
    for (name, flags) in [
        ("o2-dwarf5", &["-O2", "-gdwarf-5"][..]),
        ("o0-dwarf4", &["-O0", "-gdwarf-4"][..]),
        ("o2-dwarf2", &["-O2", "-gdwarf-2", "-gstrict-dwarf"][..]),
    ] {
        let Some(exe) = build(&dir, name, flags) else {
            return;
        };
        let images = ProcessImages::from_files(&[(exe.clone(), 0)], no_debug_dirs()).unwrap();
        let cases = [
            ("zoo_t", "zoo_t"),
            ("zoo_cv_alias", "zoo_cv_alias"),
            ("zoo_union", "union zoo_union"),
            ("zoo_inner", "struct zoo_inner"),
            ("list", "struct list"),
            ("MPIR_PROCDESC", "MPIR_PROCDESC"),
        ];
        let gdb_names: Vec<&str> = cases.iter().map(|c| c.1).collect();
        let gdb = gdb_ptype(&exe, &gdb_names).unwrap();
        // The parse saw what matters: nested named members, arrays, bitfields, union members.
        let mut zoo_members: Vec<&str> = gdb[0].members.keys().map(String::as_str).collect();
        zoo_members.sort_unstable();
        assert_eq!(zoo_members, ["arr", "bf1", "bf2", "c", "in", "names", "p"]);
        assert_eq!(gdb[2].members.len(), 2, "union zoo_union: {:?}", gdb[2]);
        for ((ours_name, gdb_name), g) in cases.iter().zip(&gdb) {
            let ours = images
                .type_layout(TypeQuery::Named(ours_name))
                .unwrap()
                .unwrap_or_else(|| panic!("{name}: {ours_name} not found"));
            assert_matches_gdb(&format!("{name} {gdb_name}"), &ours, g);
        }
        // Members of the anonymous union are reachable by name, as in C.
        let zoo = images
            .type_layout(TypeQuery::Named("zoo_t"))
            .unwrap()
            .unwrap();
        let u = zoo.member("u_c").unwrap();
        assert_eq!((u.offset, u.byte_size), (72, Some(5)));
        assert_eq!(zoo.member("arr").unwrap().byte_size, Some(48));
        assert_eq!(zoo.member("names").unwrap().byte_size, Some(32));
        // Kinds, as the fixture declares them (a `char *` and a `char[8]` differ only here).
        for (member, kind) in [
            ("p", MemberKind::Pointer),
            ("names", MemberKind::Array),
            ("arr", MemberKind::Array),
            ("u_c", MemberKind::Array),
            ("c", MemberKind::Other),
            ("in", MemberKind::Other),
            ("bf1", MemberKind::Other),
        ] {
            assert_eq!(
                zoo.member(member).unwrap().kind,
                kind,
                "{name} zoo_t.{member}"
            );
        }
        let list = images
            .type_layout(TypeQuery::Named("list"))
            .unwrap()
            .unwrap();
        assert_eq!(list.member("next").unwrap().kind, MemberKind::Pointer);
        // Through a const volatile typedef chain, by variable.
        let p = images
            .type_layout(TypeQuery::PointeeOfVariable("zoo_ptr"))
            .unwrap()
            .unwrap();
        assert_eq!(p.name, "zoo_cv_alias");
        assert_eq!(p.byte_size, zoo.byte_size);
        // Base types have sizes too (the MQD sizeof callback needs them).
        let int = images
            .type_layout(TypeQuery::Named("int"))
            .unwrap()
            .unwrap();
        assert_eq!(int.byte_size, 4);
        // Not a pointer: a clear error naming the variable.
        let e = images
            .type_layout(TypeQuery::PointeeOfVariable("zoo"))
            .unwrap_err();
        assert!(e.to_string().contains("zoo is not a pointer"), "{e}");
    }
}

fn objcopy(args: &[&str]) {
    run(Command::new("objcopy").args(args)).unwrap();
}

/// A stripped executable and its debug file, as distributions ship them.
fn stripped_pair(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let exe = build(dir, "full", &["-O2", "-g", "-Wl,--build-id"])?;
    let debug = dir.join("full.debug");
    let stripped = dir.join("stripped");
    objcopy(&["--only-keep-debug", exe.to_str()?, debug.to_str()?]);
    objcopy(&["--strip-all", exe.to_str()?, stripped.to_str()?]);
    Some((stripped, debug))
}

fn build_id_dir(root: &Path, exe: &Path, debug: &Path) -> PathBuf {
    let id = ElfFile::open(exe).unwrap().build_id().unwrap().to_vec();
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let dir = root.join(".build-id").join(&hex[..2]);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(debug, dir.join(format!("{}.debug", &hex[2..]))).unwrap();
    root.to_path_buf()
}

#[test]
fn separate_debug_information() {
    let dir = scratch("separate");
    let Some((stripped, debug)) = stripped_pair(&dir) else {
        return;
    };
    // Stripped, nothing to help: the MPIR variables are gone (not exported), no types.
    let bare = ProcessImages::from_files(&[(stripped.clone(), 0)], no_debug_dirs()).unwrap();
    assert_eq!(bare.symbol("MPIR_proctable").unwrap(), None);
    assert_eq!(
        bare.type_layout(TypeQuery::Named("MPIR_PROCDESC")).unwrap(),
        None
    );

    let expect_found = |images: &ProcessImages, source: fn(&DebugSource) -> bool| {
        let s = images
            .symbol("MPIR_proctable")
            .unwrap()
            .expect("symbol from debug file");
        assert!(s.found_in.as_deref().unwrap().ends_with(".debug"), "{s:?}");
        let (_, how) = images.images()[0].debug_file().expect("a debug file");
        assert!(source(how), "{how:?}");
        let ty = images
            .type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))
            .unwrap()
            .unwrap();
        assert_eq!(ty.byte_size, 24);
    };

    // 1. A build-id directory.
    let ids = build_id_dir(&dir.join("debugroot"), &stripped, &debug);
    let images = ProcessImages::from_files(
        &[(stripped.clone(), 0)],
        no_debug_dirs().with_debug_dir(&ids),
    )
    .unwrap();
    expect_found(&images, |s| matches!(s, DebugSource::BuildId(_)));

    // 2. A debuglink next to the file, CRC-checked.
    let linked = dir.join("linked");
    objcopy(&[
        &format!("--add-gnu-debuglink={}", debug.display()),
        stripped.to_str().unwrap(),
        linked.to_str().unwrap(),
    ]);
    let images = ProcessImages::from_files(&[(linked.clone(), 0)], no_debug_dirs()).unwrap();
    expect_found(&images, |s| matches!(s, DebugSource::Debuglink(_)));
    // The same with a debug file whose CRC no longer matches: refused, and said why.
    let mut bytes = std::fs::read(&debug).unwrap();
    bytes.extend_from_slice(b"tampered");
    std::fs::write(&debug, &bytes).unwrap();
    let images = ProcessImages::from_files(&[(linked, 0)], no_debug_dirs()).unwrap();
    assert!(images.images()[0].debug_file().is_none());
    let notes = images.images()[0].notes().join("\n");
    assert!(notes.contains("CRC"), "{notes}");
    bytes.truncate(bytes.len() - 8);
    std::fs::write(&debug, &bytes).unwrap();

    // 3. An explicit symbol file.
    let images = ProcessImages::from_files(
        &[(stripped.clone(), 0)],
        no_debug_dirs().with_symbol_file(&debug),
    )
    .unwrap();
    expect_found(&images, |s| matches!(s, DebugSource::Explicit(_)));

    // 4. A build-id file of another binary is refused.
    let other = build(&dir, "other", &["-O0", "-g", "-DOTHER=1", "-Wl,--build-id"]).unwrap();
    let other_debug = dir.join("other.debug");
    objcopy(&[
        "--only-keep-debug",
        other.to_str().unwrap(),
        other_debug.to_str().unwrap(),
    ]);
    let wrong_root = dir.join("wrongroot");
    let id = ElfFile::open(&stripped)
        .unwrap()
        .build_id()
        .unwrap()
        .to_vec();
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(wrong_root.join(".build-id").join(&hex[..2])).unwrap();
    std::fs::copy(
        &other_debug,
        wrong_root
            .join(".build-id")
            .join(&hex[..2])
            .join(format!("{}.debug", &hex[2..])),
    )
    .unwrap();
    let images = ProcessImages::from_files(
        &[(stripped.clone(), 0)],
        no_debug_dirs().with_debug_dir(&wrong_root),
    )
    .unwrap();
    assert!(images.images()[0].debug_file().is_none());
    assert!(
        images.images()[0]
            .notes()
            .join("\n")
            .contains("does not match"),
        "{:?}",
        images.images()[0].notes()
    );

    // 5. A types sidecar: a -c object with the types only, relocations applied.
    let sidecar = dir.join("types.o");
    let src = fixtures().join("starter.c");
    cc(
        &sidecar,
        &[
            "-g",
            "-c",
            "-fno-eliminate-unused-debug-types",
            src.to_str().unwrap(),
        ],
    )
    .unwrap();
    let images = ProcessImages::from_files(
        &[(stripped, 0)],
        no_debug_dirs().with_types_sidecar(&sidecar),
    )
    .unwrap();
    let zoo = images
        .type_layout(TypeQuery::Named("zoo_t"))
        .unwrap()
        .unwrap();
    assert_eq!(zoo.byte_size, 128);
    assert_eq!(zoo.member("p").unwrap().offset, 88);
    match &zoo.source {
        LayoutSource::DebugInfo { file: Some(f) } => assert!(f.ends_with("types.o"), "{f}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn dwz_supplementary_files() {
    if !have("dwz") {
        return skip("dwz is not installed");
    }
    let dir = scratch("dwz");
    let Some(a) = build(&dir, "a", &["-O2", "-g"]) else {
        return;
    };
    let b = dir.join("b");
    std::fs::copy(&a, &b).unwrap();
    // Common DWARF of a and b moves into common.debug, referenced by .gnu_debugaltlink.
    run(Command::new("dwz").current_dir(&dir).args([
        "-m",
        "common.debug",
        "-M",
        "common.debug",
        "a",
        "b",
    ]))
    .unwrap();
    let elf = ElfFile::open(&a).unwrap();
    assert!(
        elf.debugaltlink().is_some(),
        "dwz left no .gnu_debugaltlink"
    );
    let images = ProcessImages::from_files(&[(a, 0)], no_debug_dirs()).unwrap();
    let ty = images
        .type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))
        .unwrap()
        .unwrap();
    assert_eq!(ty.byte_size, 24);
    let zoo = images
        .type_layout(TypeQuery::Named("zoo_t"))
        .unwrap()
        .unwrap();
    assert_eq!(zoo.byte_size, 128);
    // Without the supplementary file: an error that says so, not a panic or a wrong answer.
    std::fs::remove_file(dir.join("common.debug")).unwrap();
    let images = ProcessImages::from_files(&[(b, 0)], no_debug_dirs()).unwrap();
    match images.type_layout(TypeQuery::Named("zoo_t")) {
        Ok(None) | Err(_) => {}
        Ok(Some(t)) => panic!("answered without the dwz file: {t:?}"),
    }
}

#[test]
fn bad_files_are_errors() {
    let dir = scratch("bad");
    let Some(exe) = build(&dir, "good", &["-O2", "-g"]) else {
        return;
    };
    let bytes = std::fs::read(&exe).unwrap();
    // Truncated ELF header, garbage, an empty file.
    for (name, content) in [
        ("truncated", bytes[..40].to_vec()),
        ("garbage", vec![0x7f; 4096]),
        ("empty", vec![]),
    ] {
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        let e = ElfFile::open(&p).unwrap_err();
        assert!(matches!(e, DebugInfoError::Elf { .. }), "{name}: {e}");
        assert!(e.to_string().contains(name), "{e}");
        let e = ProcessImages::from_files(&[(p, 0)], no_debug_dirs()).unwrap_err();
        assert!(matches!(e, TargetError::DebugInfo(_)), "{e}");
    }
    // Corrupt .debug_info: type lookup fails with an error naming the file, never panics.
    let corrupt = dir.join("corrupt");
    let garbage = dir.join("garbage.bin");
    std::fs::write(&garbage, vec![0xffu8; 512]).unwrap();
    objcopy(&[
        &format!("--update-section=.debug_info={}", garbage.display()),
        exe.to_str().unwrap(),
        corrupt.to_str().unwrap(),
    ]);
    let images = ProcessImages::from_files(&[(corrupt, 0)], no_debug_dirs()).unwrap();
    let e = images
        .type_layout(TypeQuery::Named("MPIR_PROCDESC"))
        .unwrap_err();
    assert!(e.to_string().contains("corrupt"), "{e}");
    // Symbols of the same file still work.
    assert!(images.symbol("MPIR_proctable").unwrap().is_some());
}

/// A DIE found by name: its unit's start in `.debug_info`, its unit-relative offset, the
/// unit-relative offset of the next DIE, and its `DW_AT_type` reference (unit-relative).
#[derive(Debug, Clone, Copy)]
struct Die {
    unit_base: u64,
    offset: u64,
    next: u64,
    type_ref: u64,
}

/// The file offset of `.debug_info` and the DIEs called `names`, in DIE order.
fn find_dies(file: &Path, names: &[&str]) -> (u64, Vec<Die>) {
    use object::{Object, ObjectSection};
    let data = std::fs::read(file).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let (info_offset, _) = obj
        .section_by_name(".debug_info")
        .unwrap()
        .file_range()
        .unwrap();
    let dwarf = gimli::Dwarf::load(|id| -> Result<_, gimli::Error> {
        let d = obj
            .section_by_name(id.name())
            .map_or(&[][..], |s| s.data().unwrap());
        Ok(gimli::EndianSlice::new(d, gimli::LittleEndian))
    })
    .unwrap();
    let mut found = Vec::new();
    let mut units = dwarf.units();
    while let Some(header) = units.next().unwrap() {
        let unit = dwarf.unit(header).unwrap();
        let mut all = Vec::new();
        let mut cursor = unit.entries();
        while let Some(e) = cursor.next_dfs().unwrap() {
            let name = e
                .attr_value(gimli::DW_AT_name)
                .and_then(|v| dwarf.attr_string(&unit, v).ok())
                .map(|s| s.to_string_lossy().into_owned());
            let type_ref = match e.attr_value(gimli::DW_AT_type) {
                Some(gimli::AttributeValue::UnitRef(o)) => o.0 as u64,
                _ => 0,
            };
            all.push((e.offset().0 as u64, name, type_ref));
        }
        for (i, (offset, name, type_ref)) in all.iter().enumerate() {
            if name.as_deref().is_some_and(|n| names.contains(&n)) {
                found.push(Die {
                    unit_base: header.offset().0 as u64,
                    offset: *offset,
                    next: all.get(i + 1).map_or(offset + 32, |n| n.0),
                    type_ref: *type_ref,
                });
            }
        }
    }
    (info_offset, found)
}

#[test]
fn cyclic_typedefs_are_an_error() {
    let dir = scratch("cycle");
    let src = fixtures().join("cycle.c");
    let exe = match cc(
        &dir.join("cycle"),
        &["-O0", "-gdwarf-4", src.to_str().unwrap()],
    ) {
        Ok(e) => e,
        Err(e) => return skip(&e),
    };
    let (info_offset, dies) = find_dies(&exe, &["A", "B"]);
    let [a, b] = dies[..] else {
        panic!("expected typedefs A and B: {dies:?}")
    };
    assert_eq!(b.type_ref, a.offset, "B is a typedef of A");
    // Rewrite A's DW_AT_type (a 4-byte unit-relative reference to struct S) to point at B.
    let mut bytes = std::fs::read(&exe).unwrap();
    let start = (info_offset + a.unit_base + a.offset) as usize;
    let end = (info_offset + a.unit_base + a.next) as usize;
    let old = (a.type_ref as u32).to_le_bytes();
    let hits: Vec<usize> = bytes[start..end]
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == old)
        .map(|(i, _)| start + i)
        .collect();
    assert_eq!(hits.len(), 1, "A's type reference is not unique in its DIE");
    bytes[hits[0]..hits[0] + 4].copy_from_slice(&(b.offset as u32).to_le_bytes());
    let patched = dir.join("cyclic");
    std::fs::write(&patched, &bytes).unwrap();
    let (_, dies) = find_dies(&patched, &["A"]);
    assert_eq!(dies[0].type_ref, b.offset, "the patch made A -> B -> A");

    let images = ProcessImages::from_files(&[(patched, 0)], no_debug_dirs()).unwrap();
    for name in ["A", "B"] {
        let e = images.type_layout(TypeQuery::Named(name)).unwrap_err();
        assert!(e.to_string().contains("a cycle?"), "{name}: {e}");
    }
    let e = images
        .type_layout(TypeQuery::PointeeOfVariable("pa"))
        .unwrap_err();
    assert!(e.to_string().contains("a cycle?"), "{e}");
    // The struct itself is still fine.
    let s = images.type_layout(TypeQuery::Named("S")).unwrap().unwrap();
    assert_eq!(s.byte_size, 4);
}

#[test]
fn refresh_sees_libraries_loaded_later() {
    let dir = scratch("dlopen");
    let lib = dir.join("libmpir.so");
    let libsrc = fixtures().join("libmpir.c");
    if let Err(e) = cc(
        &lib,
        &["-O2", "-g", "-shared", "-fPIC", libsrc.to_str().unwrap()],
    ) {
        return skip(&e);
    }
    let src = fixtures().join("late_dlopen.c");
    let exe = cc(
        &dir.join("late"),
        &["-O2", "-g", src.to_str().unwrap(), "-ldl"],
    )
    .unwrap();
    let mut child = Spawned::new(Command::new(&exe).arg(&lib));
    assert_eq!(child.line(), "ready");
    let mut images = ProcessImages::for_pid(child.pid(), no_debug_dirs()).unwrap();
    let before = images.images().len();
    assert_eq!(images.symbol("MPIR_proctable").unwrap(), None);

    child.send("go");
    let line = child.line();
    let printed = u64::from_str_radix(line.trim().split("=0x").nth(1).unwrap(), 16).unwrap();
    images.refresh().unwrap();
    assert_eq!(images.images().len(), before + 1);
    let s = images.symbol("MPIR_proctable").unwrap().unwrap();
    assert_eq!(s.address, printed);
    assert!(s.image.unwrap().ends_with("libmpir.so"));
    // The library's DWARF is found too.
    let ty = images
        .type_layout(TypeQuery::PointeeOfVariable("MPIR_proctable"))
        .unwrap()
        .unwrap();
    assert_eq!(ty.byte_size, 24);
    assert!(child.finish().success());
}

/// Opening reads the headers alone; the symbol tables are read when first asked for, from the
/// file as it was opened. The answers agree with the tables `nm` lists (gdb's and binutils'
/// reading, not ours), and a file replaced between the open and the first question gives no
/// symbols: never another file's.
#[test]
fn symbols_are_read_on_first_use_from_the_file_opened() {
    let dir = scratch("lazy-symbols");
    let Some(exe) = build(&dir, "lazy", &["-O0", "-g"]) else {
        return;
    };
    if !have("nm") {
        skip("no nm (binutils) to check the symbol tables against");
        return;
    }
    let nm = |args: &[&str]| -> Vec<(String, u64)> {
        let out = Command::new("nm").args(args).arg(&exe).output().unwrap();
        assert!(out.status.success(), "nm {args:?}");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut w = l.split_whitespace();
                let (addr, kind, name) = (w.next()?, w.next()?, w.next()?);
                ["T", "D", "B"]
                    .contains(&kind)
                    .then(|| (name.to_string(), u64::from_str_radix(addr, 16).ok()))
                    .and_then(|(n, a)| Some((n, a?)))
            })
            .collect()
    };
    let globals = nm(&["--defined-only"]);
    assert!(
        globals.iter().any(|(n, _)| n == "MPIR_proctable"),
        "{globals:?}"
    );
    let elf = ElfFile::open(&exe).unwrap();
    for (name, address) in &globals {
        let found = elf.symbols(name);
        assert!(
            found.iter().any(|s| s.address == *address),
            "{name} at {address:#x}: {found:?}"
        );
    }
    // A store keeps what a lookup found in a file it read.
    let store = mpir_target::debuginfo::SymbolStore::open(dir.join("store")).unwrap();
    let read = ElfFile::open(&exe).unwrap();
    assert!(!read.lookup("MPIR_proctable", Some(&store)).is_empty());
    assert!(read.save_names(), "a found answer is kept");
    // Replaced after the open, before the first question: no symbols, and that "none" is
    // not kept in the store as the file's answer.
    let elf = ElfFile::open(&exe).unwrap();
    let other = dir.join("other");
    std::fs::copy(&exe, &other).unwrap();
    std::fs::rename(&other, &exe).unwrap();
    assert_eq!(elf.lookup("no_such_symbol", Some(&store)), vec![]);
    assert!(!elf.save_names(), "an unread table's answer was kept");
    assert_eq!(elf.symbols("MPIR_proctable"), &[], "read from another file");
    assert_eq!(elf.symbol_count(), 0);
    // Opened again: the new file's symbols.
    let elf = ElfFile::open(&exe).unwrap();
    assert!(!elf.symbols("MPIR_proctable").is_empty());
}

/// Threads opening the same files through one cache get one parse of each, whichever thread
/// made it; a process's images built on several threads at once are the same images.
#[test]
fn one_parse_per_file_whatever_the_threads() {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let mut paths: Vec<PathBuf> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| p.starts_with('/'))
        .map(PathBuf::from)
        .collect();
    paths.sort();
    paths.dedup();
    assert!(paths.len() >= 2, "{paths:?}");
    let cache = std::sync::Arc::new(mpir_target::debuginfo::FileCache::new());
    let opened: Vec<Vec<Option<std::sync::Arc<ElfFile>>>> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (cache, paths) = (&cache, &paths);
                s.spawn(move || {
                    // Each thread in another order, so that they meet on files.
                    let mut order: Vec<usize> = (0..paths.len()).collect();
                    order.rotate_left(t * paths.len() / 4);
                    let mut got = vec![None; paths.len()];
                    for i in order {
                        got[i] = cache.open(&paths[i]).ok();
                    }
                    got
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let mut parsed = 0;
    for (i, p) in paths.iter().enumerate() {
        let first = &opened[0][i];
        parsed += usize::from(first.is_some());
        for other in &opened[1..] {
            assert!(
                match (first, &other[i]) {
                    (Some(a), Some(b)) => std::sync::Arc::ptr_eq(a, b),
                    // Not ELF (a locale archive): refused alike.
                    (None, None) => true,
                    _ => false,
                },
                "{}: two parses, or one parse and one refusal",
                p.display()
            );
        }
    }
    assert!(parsed >= 2, "{paths:?}");
    let pid = std::process::id();
    let images: Vec<ProcessImages> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let cache = std::sync::Arc::clone(&cache);
                s.spawn(move || {
                    ProcessImages::for_pid_with_cache(pid, no_debug_dirs(), cache).unwrap()
                })
            })
            .collect();
        threads.into_iter().map(|t| t.join().unwrap()).collect()
    });
    let files = |i: &ProcessImages| -> Vec<(PathBuf, u64)> {
        i.images()
            .iter()
            .map(|im| (im.path().to_path_buf(), im.bias()))
            .collect()
    };
    assert!(!images[0].images().is_empty());
    for other in &images[1..] {
        assert_eq!(files(other), files(&images[0]));
        for (a, b) in other.images().iter().zip(images[0].images()) {
            assert!(
                std::sync::Arc::ptr_eq(a.elf(), b.elf()),
                "{}",
                a.path().display()
            );
        }
    }
}
