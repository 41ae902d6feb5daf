//! Core files read like the live process they were taken from: a gcore of a running fake
//! starter, and a kernel core of one that aborted (text not dumped: read from the mapped file).

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use mpir_target::corefile::{CoreFile, CoreTarget};
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_target::{Fault, Memory, MemoryExt, SymbolLookupExt, TargetError, TargetError as E};
use support::*;

/// What a reader sees of a starter: its table and the first bytes of MPIR_Breakpoint's code.
fn snapshot<T: mpir_target::Target>(t: &T) -> (mpir_types::mpir::ResolvedTable, Vec<u8>) {
    let table = read_proctable(t, &ReadOptions::default()).unwrap();
    assert!(
        table.resolved.problems.is_empty(),
        "{:?}",
        table.resolved.problems
    );
    let bp = t.require_symbol("MPIR_Breakpoint").unwrap();
    (table.resolved, t.read_vec(bp.address, 16).unwrap())
}

#[test]
fn gcore_reads_like_the_live_process() {
    if !have("gcore") {
        return skip("gcore (gdb) is not installed");
    }
    let dir = scratch("core-gcore");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let starter = FakeStarter::start(&exe, 200, "shared");
    let pid = starter.pid();
    let live = snapshot(&LiveTarget::open(pid, DebugOptions::default()).unwrap());
    let prefix = dir.join("core");
    run(Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .arg(pid.to_string()))
    .unwrap();
    let core_path = PathBuf::from(format!("{}.{pid}", prefix.display()));
    let target = CoreTarget::open(&core_path, DebugOptions::default()).unwrap();
    assert_eq!(target.core().pid(), Some(pid));
    assert!(
        target
            .core()
            .executable()
            .unwrap()
            .ends_with("fake_starter")
    );
    assert_eq!(snapshot(&target), live);
    assert_eq!(live.0.len(), 200);
    assert_eq!(target.core().truncation(), None);
    // The process went on after gcore detached.
    assert!(starter.finish());

    // The same core cut in half, as `ulimit -c` or a full disk leave one: it opens, says it
    // is truncated, and memory past the cut is a read error, not zeros.
    let bytes = std::fs::read(&core_path).unwrap();
    let half = bytes.len() / 2;
    let cut_path = dir.join("core.half");
    std::fs::write(&cut_path, &bytes[..half]).unwrap();
    let cut = CoreFile::open(&cut_path).unwrap();
    let t = cut.truncation().expect("a core cut in half is truncated");
    assert_eq!(t.length, half as u64);
    assert!(
        t.needed > t.length && t.needed <= bytes.len() as u64,
        "{t:?}"
    );
    assert!(t.segments_cut >= 1, "{t:?}");
    // An anonymous segment (no NT_FILE mapping to fall back on) wholly past the cut: the
    // stack is one, as it is dumped last.
    let anonymous = |s: &&mpir_target::corefile::CoreSegment| {
        !cut.mappings()
            .iter()
            .any(|m| s.vaddr < m.end && m.start < s.vaddr + s.mem_size)
    };
    let gone = cut
        .segments()
        .iter()
        .filter(anonymous)
        .find(|s| s.offset >= half as u64 && s.file_size > 0)
        .expect("an anonymous segment wholly past the cut");
    assert!(cut.read_vec(gone.vaddr, 8).is_err());
    assert!(
        t.to_string().contains(&format!("the file has {half}")),
        "{t}"
    );
}

#[test]
fn kernel_core_reads_text_from_the_mapped_file() {
    let dir = scratch("core-kernel");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let script = format!(
        "ulimit -c unlimited 2>/dev/null || exit 77; cd {} && exec {} 64 dup",
        dir.display(),
        exe.display()
    );
    let mut child = Spawned::new(Command::new("sh").args(["-c", &script]));
    child.line();
    let pid = child.pid();
    let live = snapshot(&LiveTarget::open(pid, DebugOptions::default()).unwrap());
    run(Command::new("kill").args(["-ABRT", &pid.to_string()])).unwrap();
    let _ = child.child.wait();
    let core = std::fs::read_dir(&*dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("core"))
        });
    let Some(core) = core else {
        // core_pattern pipes cores elsewhere (or limits forbid them): gcore covers the reads.
        eprintln!(
            "SKIPPED: no kernel core in {} (core_pattern: {:?})",
            dir.display(),
            std::fs::read_to_string("/proc/sys/kernel/core_pattern").unwrap_or_default()
        );
        return;
    };
    let file = CoreFile::open(&core).unwrap();
    assert_eq!(file.pid(), Some(pid));
    assert_eq!(file.threads()[0].signal, 6, "SIGABRT");
    // The kernel does not dump file-backed code: MPIR_Breakpoint's bytes come from the file.
    let target = CoreTarget::open(&core, DebugOptions::default()).unwrap();
    let bp = target.require_symbol("MPIR_Breakpoint").unwrap();
    let dumped = file
        .segments()
        .iter()
        .any(|s| bp.address >= s.vaddr && bp.address < s.vaddr + s.file_size);
    assert!(
        !dumped,
        "expected the text of MPIR_Breakpoint not to be in the core"
    );
    assert_eq!(snapshot(&target), live);
}

#[test]
fn not_a_core_and_truncated_cores() {
    let dir = scratch("core-bad");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let e = CoreFile::open(&exe).unwrap_err();
    assert!(e.to_string().contains("not a core file"), "{e}");
    let bytes = std::fs::read(&exe).unwrap();
    let short = dir.join("short");
    std::fs::write(&short, &bytes[..20]).unwrap();
    assert!(matches!(CoreFile::open(&short), Err(E::DebugInfo(_))));
    assert!(matches!(
        CoreFile::open(Path::new("/nonexistent/core")),
        Err(E::DebugInfo(_))
    ));
}

#[test]
fn cores_are_read_only() {
    if !have("gcore") {
        return skip("gcore (gdb) is not installed");
    }
    let dir = scratch("core-ro");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let starter = FakeStarter::start(&exe, 4, "shared");
    let prefix = dir.join("core");
    run(Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .arg(starter.pid().to_string()))
    .unwrap();
    let core = CoreFile::open(Path::new(&format!(
        "{}.{}",
        prefix.display(),
        starter.pid()
    )))
    .unwrap();
    assert!(starter.finish());
    assert!(matches!(
        core.write(core.segments()[0].vaddr, &[0]),
        Err(TargetError::Unwritable {
            fault: Fault::Unsupported,
            ..
        })
    ));
    // Outside every segment and mapping: unreadable, with the address.
    assert!(matches!(
        core.read_vec(16, 8),
        Err(TargetError::Unreadable { address: 16, .. })
    ));
}

#[test]
fn a_hostile_segment_offset_is_an_error_not_a_panic() {
    if !have("gcore") {
        return skip("gcore (gdb) is not installed");
    }
    use object::read::elf::{FileHeader, ProgramHeader};
    let dir = scratch("core-hostile");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let starter = FakeStarter::start(&exe, 4, "dup");
    let prefix = dir.join("core");
    run(Command::new("gcore")
        .arg("-o")
        .arg(&prefix)
        .arg(starter.pid().to_string()))
    .unwrap();
    let (table, pid) = (starter.table, starter.pid());
    assert!(starter.finish());
    let path = PathBuf::from(format!("{}.{pid}", prefix.display()));
    let mut bytes = std::fs::read(&path).unwrap();
    // Point the segment holding the table (heap, no file behind it) past the end of u64.
    let (phoff, index) = {
        let h = object::elf::FileHeader64::<object::Endianness>::parse(&*bytes).unwrap();
        let e = h.endian().unwrap();
        let phdrs = h.program_headers(e, &*bytes).unwrap();
        let i = phdrs
            .iter()
            .position(|p| {
                let (v, m) = (p.p_vaddr(e), p.p_memsz(e));
                p.p_type(e) == object::elf::PT_LOAD && table >= v && table < v + m
            })
            .expect("a segment holds the table");
        (h.e_phoff(e) as usize, i)
    };
    let field = phoff + index * 56 + 8; // Elf64_Phdr.p_offset
    bytes[field..field + 8].copy_from_slice(&(u64::MAX - 4).to_le_bytes());
    let patched = dir.join("hostile.core");
    std::fs::write(&patched, &bytes).unwrap();
    let core = CoreFile::open(&patched).unwrap();
    assert!(matches!(
        core.read_vec(table, 8),
        Err(TargetError::Unreadable { address, .. }) if address == table
    ));
}
