//! ELF files and DWARF as a tool may be handed them (a truncated download, a corrupt debug
//! file, generated code with absurd types): typed errors naming the file, bounded walks.

use std::path::{Path, PathBuf};
use std::process::Command;

use mpir_target::debuginfo::{DebugInfoError, DebugOptions, ElfFile, ProcessImages};
use mpir_target::{TargetError, TypeLookup, TypeQuery};

use super::harness::{Bounds, LIVE, run};
use super::support::{run as run_cmd, scratch, skip};

/// Whole files parsed and indexed: 10 s, 64 MiB.
const FILES: Bounds = Bounds {
    time: std::time::Duration::from_secs(10),
    bytes: 64 << 20,
};

fn no_debug_dirs() -> DebugOptions {
    let mut o = DebugOptions::default();
    o.debug_dirs.clear();
    o
}

/// Compiles C `source` (with `-g`) into `dir/name`; `None` after a skip.
fn compile(dir: &Path, name: &str, source: &str) -> Option<PathBuf> {
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let exe = dir.join(name);
    match run_cmd(
        Command::new("cc")
            .args(["-g", "-O0", "-fno-eliminate-unused-debug-types"])
            .arg(&src)
            .arg("-o")
            .arg(&exe),
    ) {
        Ok(_) => Some(exe),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

const SMALL_PROGRAM: &str = "int MPIR_proctable_size = 3;\nint main(void) { return 0; }\n";

/// What opening a file gave: its number of loadable segments and the bias a mapping at
/// 0x400000 would have, or the error.
type Opened = Result<(usize, Option<u64>), DebugInfoError>;

/// A valid executable's bytes, edited by `edit`, written as `name`, opened within bounds:
/// the path and what the open gave.
fn open_edited_result(name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> Option<(PathBuf, Opened)> {
    let dir = scratch(&format!("hostile-elf-{name}"));
    let exe = compile(&dir, "good", SMALL_PROGRAM)?;
    let mut bytes = std::fs::read(&exe).unwrap();
    edit(&mut bytes);
    let bad = dir.join(name);
    std::fs::write(&bad, &bytes).unwrap();
    let path = bad.clone();
    let r = run(
        name,
        LIVE,
        move || bad,
        |p| ElfFile::open(&p).map(|f| (f.segments().len(), f.bias_for_mapping(0x40_0000, 0))),
    );
    drop(dir);
    Some((path, r))
}

/// [`open_edited_result`] where the file must be refused.
fn open_edited(name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> Option<(PathBuf, DebugInfoError)> {
    let (path, r) = open_edited_result(name, edit)?;
    Some((path, r.expect_err("an unusable file must be an error")))
}

fn assert_elf_error(path: &Path, e: &DebugInfoError) {
    assert!(
        matches!(e, DebugInfoError::Elf { path: p, .. } if p == path),
        "{e}"
    );
    assert!(e.to_string().contains(&path.display().to_string()), "{e}");
}

#[test]
fn truncated_elf_header() {
    let Some((path, e)) = open_edited("truncated", |b| b.truncate(40)) else {
        return;
    };
    assert_elf_error(&path, &e);
}

#[test]
fn empty_file() {
    let Some((path, e)) = open_edited("empty", Vec::clear) else {
        return;
    };
    assert_elf_error(&path, &e);
}

#[test]
fn section_headers_past_the_end_of_the_file() {
    // e_shoff (offset 0x28 in a 64-bit header) far beyond the file.
    let Some((path, e)) = open_edited("shoff", |b| {
        b[0x28..0x30].copy_from_slice(&(1u64 << 40).to_le_bytes())
    }) else {
        return;
    };
    assert_elf_error(&path, &e);
}

#[test]
fn program_headers_past_the_end_of_the_file() {
    // e_phoff (0x20) beyond the file, e_phnum (0x38) at its maximum: refused, or read as a
    // file without loadable segments — onto which no mapping can be placed (no load bias).
    let Some((path, r)) = open_edited_result("phoff", |b| {
        b[0x20..0x28].copy_from_slice(&(1u64 << 40).to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&0xffffu16.to_le_bytes());
    }) else {
        return;
    };
    match r {
        Err(e) => assert_elf_error(&path, &e),
        Ok(got) => assert_eq!(got, (0, None), "no segment, no bias"),
    }
}

#[test]
fn a_directory_given_as_an_executable() {
    let dir = scratch("hostile-elf-dir");
    let path = dir.to_path_buf();
    let e = run(
        "directory as ELF",
        LIVE,
        move || path,
        |p| ElfFile::open(&p).map(|_| ()),
    )
    .unwrap_err();
    assert!(
        matches!(&e, DebugInfoError::Io { path, .. } | DebugInfoError::Elf { path, .. } if path == &dir.to_path_buf()),
        "{e}"
    );
}

#[test]
fn a_fifo_or_a_device_named_as_an_image() {
    // A path the target names (its memory map after a mapped file was replaced, a core's
    // NT_FILE note) can be a FIFO, whose open(2) waits for a writer for ever, or a device that
    // never ends. Refused as not a regular file, at once.
    let dir = scratch("hostile-elf-fifo");
    let fifo = dir.join("libfake.so");
    if let Err(e) = run_cmd(Command::new("mkfifo").arg(&fifo)) {
        return skip(&e);
    }
    for (name, path, what) in [
        ("FIFO as ELF", fifo.clone(), "a FIFO"),
        ("/dev/zero as ELF", PathBuf::from("/dev/zero"), "a device"),
    ] {
        let p = path.clone();
        let e = run(name, LIVE, move || p, |p| ElfFile::open(&p).map(|_| ())).unwrap_err();
        assert!(
            matches!(&e, DebugInfoError::Io { path: p, reason } if *p == path && reason.contains(what)),
            "{name}: {e}"
        );
    }
    // Through the image list, as a process's or a core's mappings reach it.
    let p = fifo.clone();
    let e = run(
        "FIFO among a process's images",
        LIVE,
        move || p,
        |p| ProcessImages::from_files(&[(p, 0)], no_debug_dirs()).map(|_| ()),
    )
    .unwrap_err();
    assert!(e.to_string().contains("a FIFO, not a regular file"), "{e}");
}

/// The layout `query` gives in the compiled `source`.
fn layout_of(
    name: &str,
    source: &str,
    query: &'static str,
) -> Option<Result<Option<mpir_types::TypeLayout>, TargetError>> {
    let dir = scratch(&format!("hostile-dwarf-{name}"));
    let exe = compile(&dir, name, source)?;
    Some(run(
        name,
        FILES,
        move || ProcessImages::from_files(&[(exe, 0)], no_debug_dirs()).unwrap(),
        move |images| images.type_layout(TypeQuery::Named(query)),
    ))
}

#[test]
fn a_typedef_chain_longer_than_the_bound() {
    let mut src = String::from("typedef int t0;\n");
    for i in 1..200 {
        src.push_str(&format!("typedef t{} t{i};\n", i - 1));
    }
    src.push_str("t199 deep;\nint main(void) { return 0; }\n");
    let Some(r) = layout_of("typedefs", &src, "t199") else {
        return;
    };
    let e = r.unwrap_err();
    assert!(
        matches!(&e, TargetError::DebugInfo(DebugInfoError::Type { name, reason, .. })
            if name == "t199" && reason.contains("typedef chain longer than")),
        "{e}"
    );
}

#[test]
fn arrays_nested_deeper_than_the_bound() {
    let dims = "[1]".repeat(100);
    let src = format!(
        "typedef int deep_t{dims};\ndeep_t d;\nstruct holder {{ deep_t member; int after; }} h;\n\
         int main(void) {{ return 0; }}\n"
    );
    let Some(r) = layout_of("arrays", &src, "holder") else {
        return;
    };
    // Either an error saying the nesting is too deep, or a layout from DW_AT_byte_size;
    // never a stack overflow.
    match r {
        Err(e) => assert!(e.to_string().contains("deeper than"), "{e}"),
        Ok(Some(l)) => assert_eq!(l.byte_size, 8),
        Ok(None) => panic!("holder not found"),
    }
}

#[test]
fn a_self_referencing_list_node() {
    let src = "struct node { struct node *next; struct node *prev; int v; };\n\
               struct node head;\nint main(void) { return 0; }\n";
    let Some(r) = layout_of("selfref", src, "node") else {
        return;
    };
    let l = r.unwrap().expect("struct node");
    assert_eq!(l.byte_size, 24);
    let next = l.members.iter().find(|m| m.name == "next").unwrap();
    assert_eq!((next.offset, next.byte_size), (0, Some(8)));
}

#[test]
fn corrupt_debug_info_section() {
    if Command::new("objcopy").arg("--version").output().is_err() {
        return skip("objcopy not installed");
    }
    let dir = scratch("hostile-dwarf-corrupt");
    let Some(exe) = compile(&dir, "good", SMALL_PROGRAM) else {
        return;
    };
    let garbage = dir.join("garbage.bin");
    std::fs::write(&garbage, vec![0xffu8; 4096]).unwrap();
    let corrupt = dir.join("corrupt");
    run_cmd(
        Command::new("objcopy")
            .arg(format!(
                "--update-section=.debug_info={}",
                garbage.display()
            ))
            .arg(&exe)
            .arg(&corrupt),
    )
    .unwrap();
    let path = corrupt.clone();
    let e = run(
        "corrupt .debug_info",
        FILES,
        move || ProcessImages::from_files(&[(corrupt, 0)], no_debug_dirs()).unwrap(),
        |images| images.type_layout(TypeQuery::Named("MPIR_PROCDESC")),
    )
    .unwrap_err();
    assert!(
        matches!(&e, TargetError::DebugInfo(DebugInfoError::Dwarf { path: p, .. }) if *p == path),
        "{e}"
    );
}

/// In an ELF64 little-endian file, sets the `ch_size` of section `name`'s compression header
/// (the uncompressed size the decompressor allocates up front). False when the section is
/// absent or not `SHF_COMPRESSED`.
fn set_compressed_size(bytes: &mut [u8], name: &str, size: u64) -> bool {
    let u16_at = |b: &[u8], o: usize| u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize;
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize;
    let (shoff, shentsize, shnum, shstrndx) = (
        u64_at(bytes, 0x28),
        u16_at(bytes, 0x3a),
        u16_at(bytes, 0x3c),
        u16_at(bytes, 0x3e),
    );
    let header = |i: usize| shoff + i * shentsize;
    let names = u64_at(bytes, header(shstrndx) + 24);
    for i in 0..shnum {
        let h = header(i);
        let name_at = names + u32::from_le_bytes(bytes[h..h + 4].try_into().unwrap()) as usize;
        let end = bytes[name_at..].iter().position(|&c| c == 0).unwrap();
        let compressed = u64_at(bytes, h + 8) & 0x800 != 0;
        if &bytes[name_at..name_at + end] == name.as_bytes() && compressed {
            let chdr = u64_at(bytes, h + 24);
            bytes[chdr + 8..chdr + 16].copy_from_slice(&size.to_le_bytes());
            return true;
        }
    }
    false
}

#[test]
fn compressed_debug_sections_claiming_impossible_sizes() {
    if Command::new("objcopy").arg("--version").output().is_err() {
        return skip("objcopy not installed");
    }
    let dir = scratch("hostile-dwarf-compressed");
    let src = "struct pair { long a; int b; };\nstruct pair p;\nint main(void) { return 0; }\n";
    let Some(exe) = compile(&dir, "plain", src) else {
        return;
    };
    let good = dir.join("compressed");
    run_cmd(
        Command::new("objcopy")
            .arg("--compress-debug-sections=zlib-gabi")
            .arg(&exe)
            .arg(&good),
    )
    .unwrap();
    let layout = |name: &'static str, file: PathBuf| {
        run(
            name,
            FILES,
            move || ProcessImages::from_files(&[(file, 0)], no_debug_dirs()).unwrap(),
            |images| images.type_layout(TypeQuery::Named("pair")),
        )
    };
    // The honest compressed file reads: the bound refuses no real section.
    let l = layout("zlib-compressed DWARF", good.clone())
        .unwrap()
        .expect("struct pair");
    assert_eq!(l.byte_size, 16);

    // A header claiming 720 PiB (what the fuzzer found: the decompressor reserved it), and
    // one claiming 512 MiB from a few hundred compressed bytes: refused before any
    // allocation, within the 64 MiB bound of `FILES`.
    for (name, claimed, why) in [
        (
            "720 PiB .debug_info",
            0x0a00_0000_0000_0000u64,
            "limit per section",
        ),
        (
            "512 MiB .debug_info",
            512 << 20,
            "of zlib expand to at most 1032 times",
        ),
    ] {
        let mut bytes = std::fs::read(&good).unwrap();
        assert!(set_compressed_size(&mut bytes, ".debug_info", claimed));
        let bad = dir.join(name.replace(' ', "_"));
        std::fs::write(&bad, &bytes).unwrap();
        let e = layout(name, bad.clone()).unwrap_err();
        assert!(
            matches!(&e, TargetError::DebugInfo(DebugInfoError::CompressedSection {
                path, section, claimed: c, reason, ..
            }) if *path == bad && *section == ".debug_info" && *c == claimed && reason.contains(why)),
            "{name}: {e}"
        );
    }
}
