//! The unwinder on real processes, gdb as the oracle: a C fixture with a known call chain
//! (-O0 with frame pointers, -O2 without, an always-inlined function on it), a deep recursion,
//! a signal handler frame, and a second thread blocked in `read`; live through the tracer, and
//! on a gcore core of the same process. The symbolised stacks (names, file:line, inline frames)
//! equal gdb's for the fixture's frames, also with the DWARF in a separate file or split by
//! dwz.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use mpir_target::corefile::CoreTarget;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::Tracer;
use mpir_target::unwind::{
    EndReason, SnapshotOptions, Stack, SymbolCache, UnwindOptions, Unwinder, live_vdso_address,
    snapshot_live, snapshot_live_with_mappings, vdso_address,
};
use mpir_target::{Memory, SymbolLookup};
use mpir_types::DataModel;
use mpir_types::stacks::ThreadStack;
use support::*;

/// Our function names up to `main` (gdb stops there), and the index of the signal frame.
fn ours_to_main(stack: &Stack) -> Vec<String> {
    let mut names = Vec::new();
    for f in &stack.frames {
        let name = if f.signal_frame {
            "<signal handler called>".to_string()
        } else {
            f.function.as_deref().unwrap_or("??").to_string()
        };
        let is_main = name == "main";
        names.push(name);
        if is_main {
            break;
        }
    }
    names
}

/// Our frames against gdb's: the fixture's own functions (and the signal frame) appear in the
/// same order, and each of gdb's physical frames has one of ours.
fn compare<T: Memory + SymbolLookup>(
    what: &str,
    ours: &Stack,
    symbolised: &ThreadStack,
    gdb: &[GdbFrame],
    exe: &Path,
    target: &T,
) {
    let exe = exe.display().to_string();
    let names = ours_to_main(ours);
    eprintln!(
        "{what}: {} frames ({}): {names:?}",
        ours.frames.len(),
        ours.end
    );
    // The fixture's frames, inline ones included, with their source lines, up to main: the
    // symbolised stack against gdb's, name and base name:line alike.
    type Fixture = (String, Option<(String, u32)>);
    let mut our_fixture: Vec<Fixture> = Vec::new();
    for f in &symbolised.frames {
        let symbol = f.symbol.as_deref();
        if symbol.is_some_and(|s| s == "__restore_rt" || s.contains("sigreturn")) {
            our_fixture.push(("<signal handler called>".to_string(), None));
        } else if let (Some(name), true) = (symbol, &*f.module == exe.as_str()) {
            let at = f.location.as_ref().map(|l| (basename(&l.file), l.line));
            our_fixture.push((name.to_string(), at));
        }
        if symbol == Some("main") && !f.inline {
            break;
        }
    }
    let gdb_fixture: Vec<Fixture> = gdb
        .iter()
        .filter(|f| in_fixture(f) || f.name == "<signal handler called>")
        .map(|f| (f.name.clone(), f.location.clone()))
        .collect();
    assert_eq!(
        our_fixture,
        gdb_fixture,
        "{what}: fixture frames differ\nours: {:?}\n({} {})\ngdb: {gdb:?}",
        symbolised.frames,
        ours.frames.len(),
        ours.end
    );
    // The stack is complete exactly when the walk reached the outermost frame.
    assert_eq!(
        symbolised.truncated.is_none(),
        ours.end == EndReason::Outermost
    );
    // Every named frame of ours (up to main) is one of gdb's, in gdb's order: gdb names a
    // function by its DWARF name where it has one (`clone3`), we by the ELF symbol
    // (`__GI___clone3`), so both are compared without the `__GI_` and underscore prefixes;
    // and glibc's versioned entry points have DWARF names with `_impl` (gdb's
    // `__libc_start_main_impl` is the symbol `__libc_start_main`).
    let norm = |n: &str| {
        let n = n.trim_start_matches('_');
        n.strip_prefix("GI_")
            .unwrap_or(n)
            .trim_start_matches('_')
            .to_string()
    };
    // Without debug information both name a function by an ELF symbol, and one address may
    // have several (`raise` and `gsignal`): gdb's name is then an alias of ours when it names
    // the same address in the target.
    let alias = |gdb_name: &str, frame: &mpir_target::unwind::Frame| {
        let start = frame.pc - frame.function_offset.unwrap_or(0);
        matches!(target.symbol(gdb_name), Ok(Some(s)) if s.address == start)
    };
    let mut gdb_frames = gdb.iter();
    for (name, frame) in names.iter().zip(&ours.frames).filter(|(n, _)| *n != "??") {
        let want = norm(name);
        assert!(
            gdb_frames.any(|g| {
                let g_norm = norm(&g.name);
                g_norm == want
                    || g_norm.strip_prefix(want.as_str()) == Some("_impl")
                    || alias(&g.name, frame)
            }),
            "{what}: our {name} is not in gdb's stack (in order)\nours: {names:?}\ngdb: {gdb:?}"
        );
    }
    // Every pc gdb prints is one of our frames', in the same order.
    let mut our_pcs = ours.frames.iter().map(|f| f.pc);
    // Except the tail-call frames gdb synthesises from DWARF call-site information: their
    // "return address" follows a jump (`jmp rel32`, 0xe9), not a call, and no frame of the
    // stack holds it.
    let after_jump = |pc: u64| {
        let mut insn = [0u8; 1];
        target.read_exact(pc.wrapping_sub(5), &mut insn).is_ok() && insn[0] == 0xe9
    };
    for g in gdb
        .iter()
        .filter(|g| g.pc.is_some_and(|pc| !after_jump(pc)))
    {
        assert!(
            our_pcs.any(|pc| Some(pc) == g.pc),
            "{what}: gdb's frame {g:?} is not ours (in order)\nours: {:x?}\ngdb: {gdb:?}",
            ours.frames
                .iter()
                .map(|f| (
                    f.pc,
                    f.sp,
                    f.cfa,
                    f.trust,
                    f.module_offset,
                    f.function.as_deref()
                ))
                .collect::<Vec<_>>()
        );
    }
    // gdb shows inline frames as frames of their own; we show physical frames only, so we
    // have at most as many up to main.
    assert!(names.len() <= gdb.len() + 1, "{what}: {names:?} vs {gdb:?}");
    // The walk went past main to the outermost frame (_start / clone3 say "no caller").
    assert_eq!(ours.end, EndReason::Outermost, "{what}: {names:?}");
}

fn check_fixture(variant: &str, flags: &[&str], args: &[&str], expect: &[&str]) {
    check_build(variant, flags, false, args, expect);
}

fn check_build(variant: &str, flags: &[&str], strip: bool, args: &[&str], expect: &[&str]) {
    if !have("gdb") || !have("gcore") {
        return skip("gdb and gcore are needed as the oracle");
    }
    let dir = scratch(&format!("unwind-{variant}"));
    let Some(exe) = build_chain(&dir, flags) else {
        return;
    };
    if strip {
        run(Command::new("strip").arg("--strip-all").arg(&exe)).unwrap();
    }
    if variant.ends_with("split") {
        // The debug information (and .debug_frame, and the full symbol table) moves to a
        // separate file next to the executable, found through .gnu_debuglink.
        let debug = exe.with_extension("debug");
        run(Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&exe)
            .arg(&debug))
        .unwrap();
        run(Command::new("strip").arg("--strip-all").arg(&exe)).unwrap();
        run(Command::new("objcopy")
            .arg(format!("--add-gnu-debuglink={}", debug.display()))
            .arg(&exe))
        .unwrap();
    }
    if variant.ends_with("dwz") {
        // Two copies of the executable, their common DWARF moved by dwz into a supplementary
        // file (named by .gnu_debugaltlink): names of inlined functions and their lines may
        // now be references into it (DW_FORM_GNU_ref_alt, DW_FORM_GNU_strp_alt).
        if !have("dwz") {
            return skip("dwz is not installed");
        }
        std::fs::copy(&exe, dir.join("unwind_chain2")).unwrap();
        run(Command::new("dwz").current_dir(&*dir).args([
            "-m",
            "common.debug",
            "-M",
            "common.debug",
            "unwind_chain",
            "unwind_chain2",
        ]))
        .unwrap();
        let elf = mpir_target::debuginfo::ElfFile::open(&exe).unwrap();
        assert!(
            elf.debugaltlink().is_some(),
            "dwz left no .gnu_debugaltlink"
        );
    }
    let model = if flags.contains(&"-m32") {
        DataModel::ILP32
    } else {
        DataModel::LP64
    };
    let mut child = Spawned::new(Command::new(&exe).args(args));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    assert!(
        wait_for(20, || all_asleep(pid)),
        "{variant}: the fixture's threads never blocked"
    );
    let gdb = gdb_stacks(pid);
    assert_eq!(gdb.len(), 2, "{variant}: gdb saw {gdb:?}");

    // Live: stopped by the tracer, unwound, released.
    let tracer = Tracer::new().unwrap();
    let tids = tracer.attach(pid).unwrap();
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    // One cache for the live process and its core: the same files, parsed once.
    let cache = SymbolCache::new();
    let mut unwinder = Unwinder::with_cache(target.images(), UnwindOptions::default(), &cache);
    let word = if model == DataModel::ILP32 { 4 } else { 8 };
    let vdso = live_vdso_address(pid, word).expect("the process has a vDSO");
    unwinder.add_vdso(target.memory(), vdso).unwrap();
    let mut live = HashMap::new();
    for &tid in &tids {
        let regs = tracer.registers(pid, tid).unwrap();
        live.insert(tid, unwinder.unwind(target.memory(), &regs));
    }
    tracer.detach(pid).unwrap();
    drop(tracer);

    // The fast path: stop, copy registers and stacks, release, unwind the copy offline.
    let tracer = Tracer::new().unwrap();
    let snap = snapshot_live(&tracer, pid, model, &SnapshotOptions::default()).unwrap();
    drop(tracer);
    eprintln!(
        "{variant}: stopped for {:?} to copy {} stack bytes of {} threads",
        snap.stopped_for,
        snap.stacks.len(),
        snap.threads.len()
    );
    assert!(snap.stopped_for < std::time::Duration::from_secs(5));
    // With the mappings read with the images, and with none known (a stale list: the map is
    // read afresh while stopped): the same stacks copied as by the snapshot that reads it.
    let tracer = Tracer::new().unwrap();
    let writable = target.images().writable_mappings();
    assert!(!writable.is_empty());
    let known =
        snapshot_live_with_mappings(&tracer, pid, model, &SnapshotOptions::default(), writable)
            .unwrap();
    let stale =
        snapshot_live_with_mappings(&tracer, pid, model, &SnapshotOptions::default(), &[]).unwrap();
    drop(tracer);
    assert_eq!(known.stacks.len(), snap.stacks.len());
    assert_eq!(stale.stacks.len(), snap.stacks.len());
    // A process-wide limit smaller than one stack: the copy is cut, the walk partial.
    let tracer = Tracer::new().unwrap();
    let small = SnapshotOptions::default().with_max_total_bytes(192);
    let cut = snapshot_live(&tracer, pid, model, &small).unwrap();
    drop(tracer);
    assert!(cut.stacks.len() <= 192);
    for (_, stack) in unwinder.unwind_snapshot(&cut) {
        let stack = stack.unwrap();
        assert!(!stack.frames.is_empty());
        assert_ne!(stack.end, EndReason::Outermost, "{stack:?}");
    }
    assert_eq!(snap.threads.len(), 2);
    let started = std::time::Instant::now();
    let offline_stacks = unwinder.unwind_snapshot(&snap);
    let frames: usize = offline_stacks
        .iter()
        .map(|(_, s)| s.as_ref().map_or(0, |s| s.frames.len()))
        .sum();
    eprintln!(
        "{variant}: {frames} frames unwound offline in {:?} (CFI and symbols already loaded)",
        started.elapsed()
    );
    if args.contains(&"deep") {
        // Steady state (images parsed, CFI rows computed): the per-frame cost of a sample.
        let rounds = 200;
        let started = std::time::Instant::now();
        for _ in 0..rounds {
            std::hint::black_box(unwinder.unwind_snapshot(&snap));
        }
        let per_frame = started.elapsed().as_nanos() as f64 / (rounds * frames) as f64;
        eprintln!("{variant}: {per_frame:.0} ns per frame offline ({rounds} rounds of {frames})");
    }
    for (tid, offline) in &offline_stacks {
        let offline = offline.as_ref().unwrap();
        let direct = &live[tid];
        assert_eq!(
            offline.function_names(),
            direct.function_names(),
            "{variant}: offline vs direct, thread {tid}"
        );
        assert_eq!(offline.end, EndReason::Outermost);
    }
    let mut live_symbolised = HashMap::new();
    for (tid, stack) in &live {
        let frames = gdb
            .get(tid)
            .unwrap_or_else(|| panic!("gdb has no thread {tid}"));
        let symbolised = unwinder.thread_stack(*tid, stack);
        compare(
            &format!("{variant} live thread {tid}"),
            stack,
            &symbolised,
            frames,
            &exe,
            &target,
        );
        live_symbolised.insert(*tid, symbolised);
    }
    if !strip && !args.contains(&"deep") {
        // The always-inlined `via` is a frame of its own in gdb's stack and in ours, marked
        // inline, between c and b, with b's line being the call site.
        let ours = &live_symbolised[&pid].frames;
        let via = ours
            .iter()
            .position(|f| f.symbol.as_deref() == Some("via"))
            .unwrap_or_else(|| panic!("{variant}: no inline frame: {ours:?}"));
        assert!(ours[via].inline, "{variant}: {:?}", ours[via]);
        assert_eq!(ours[via + 1].symbol.as_deref(), Some("b"));
        assert!(!ours[via + 1].inline);
        assert!(
            gdb[&pid].iter().any(|g| g.name == "via"),
            "{variant}: {:?}",
            gdb[&pid]
        );
    }
    // The snapshot's stacks symbolise to the same frames.
    for t in unwinder.thread_stacks(&snap) {
        assert_eq!(t, live_symbolised[&t.tid], "{variant}: snapshot vs live");
    }
    let main = live.get(&pid).unwrap();
    let main_names = ours_to_main(main);
    let fixture_names: Vec<&str> = main_names
        .iter()
        .map(String::as_str)
        .filter(|n| expect.contains(n))
        .collect();
    assert!(
        fixture_names.ends_with(expect),
        "{variant}: {main_names:?} does not end with {expect:?}"
    );
    if variant.starts_with("debug-frame") {
        // b, a and main are found through the .debug_frame CFI of c, b and a (no .eh_frame
        // covers them): by CFI, not by a fallback.
        for f in main.frames.iter().skip(1).take(main_names.len() - 1) {
            assert_eq!(f.trust, mpir_target::unwind::Trust::Cfi, "{variant}: {f:?}");
        }
    }
    // The signal trampoline is recognised (CFI "S") and named by its own image's symbols.
    let trampolines: Vec<_> = main.frames.iter().filter(|f| f.signal_frame).collect();
    if args.contains(&"signal") {
        assert_eq!(trampolines.len(), 1, "{variant}: {main:?}");
        let name = trampolines[0].function.as_deref().unwrap_or_default();
        if model == DataModel::LP64 {
            assert_eq!(name, "__restore_rt", "{variant}");
        } else {
            assert!(name.contains("sigreturn"), "{variant}: {name}");
            assert_eq!(trampolines[0].module.as_deref(), Some("[vdso]"));
        }
    } else {
        assert!(trampolines.is_empty(), "{variant}: {main:?}");
    }
    if strip {
        let exe_name = exe.display().to_string();
        // Symbolised: the executable's frames are its module and offset, never a name (of
        // another module or otherwise) nor a source line.
        let symbolised = &live_symbolised[&pid];
        let in_exe: Vec<_> = symbolised
            .frames
            .iter()
            .filter(|f| *f.module == *exe_name)
            .collect();
        assert!(in_exe.len() >= 5, "{variant}: {symbolised:?}");
        for f in in_exe {
            assert_eq!((&f.symbol, &f.location, f.inline), (&None, &None, false));
            assert!(f.function_label().starts_with("unwind_chain+0x"), "{f:?}");
        }
        let in_exe: Vec<_> = main
            .frames
            .iter()
            .filter(|f| f.module.as_deref() == Some(exe_name.as_str()))
            .collect();
        // c, b, a, main and _start.
        assert!(in_exe.len() >= 5, "{variant}: {main:?}");
        for f in in_exe {
            assert_eq!(f.function, None, "{variant}: {f:?}");
            assert!(
                f.module_offset.is_some_and(|o| o < 0x10_0000),
                "{variant}: {f:?}"
            );
        }
    }

    // The same process as a gcore core, through CoreTarget.
    let core_path = mpir_target::testkit::gcore(&dir, &[pid]).unwrap().remove(0);
    let core = CoreTarget::open(&core_path, DebugOptions::default()).unwrap();
    let parsed = cache.stats().images_parsed;
    let mut unwinder = Unwinder::with_cache(core.images(), UnwindOptions::default(), &cache);
    let vdso = vdso_address(core.core().auxv()).expect("the core has AT_SYSINFO_EHDR");
    unwinder.add_vdso(core.memory(), vdso).unwrap();
    assert_eq!(core.core().threads().len(), 2);
    for t in core.core().threads() {
        let regs = t.registers.expect("x86_64 core threads have registers");
        let stack = unwinder.unwind(core.memory(), &regs);
        let frames = gdb
            .get(&t.tid)
            .unwrap_or_else(|| panic!("gdb has no thread {}", t.tid));
        let symbolised = unwinder.thread_stack(t.tid, &stack);
        compare(
            &format!("{variant} core thread {}", t.tid),
            &stack,
            &symbolised,
            frames,
            &exe,
            &core,
        );
        assert_eq!(
            symbolised, live_symbolised[&t.tid],
            "{variant}: core vs live"
        );
        let live_names: Vec<_> = live[&t.tid].function_names();
        assert_eq!(
            stack.function_names(),
            live_names,
            "{variant}: core vs live"
        );
    }
    // The core maps the same files (same build-ids) as the live process: nothing parsed again.
    assert_eq!(cache.stats().images_parsed, parsed, "{:?}", cache.stats());
    drop(child);
}

#[test]
fn chain_o0_with_frame_pointers_matches_gdb() {
    check_fixture("o0", &["-O0"], &["chain"], &["c", "b", "a", "main"]);
}

#[test]
fn chain_o2_without_frame_pointers_matches_gdb() {
    check_fixture(
        "o2",
        &["-O2", "-fomit-frame-pointer"],
        &["chain"],
        &["c", "b", "a", "main"],
    );
}

#[test]
fn signal_handler_frame_matches_gdb() {
    check_fixture(
        "signal",
        &["-O2", "-fomit-frame-pointer"],
        &["signal"],
        &["in_handler", "on_signal", "c", "b", "a", "main"],
    );
}

#[test]
fn deep_recursion_matches_gdb() {
    let mut expect = vec!["recurse"; 1000];
    expect.extend(["a", "main"]);
    check_fixture("deep", &["-O0"], &["deep", "1000"], &expect);
}

#[test]
fn dwz_supplementary_debug_information_matches_gdb() {
    check_fixture("o2-dwz", &["-O2"], &["chain"], &["c", "b", "a", "main"]);
}

#[test]
fn a_stripped_executable_gives_module_offsets_not_another_modules_names() {
    // gdb prints "?? ()" with the pc for the executable's frames; ours have the same pcs, the
    // executable as module, and no name (never a nearest symbol of libc).
    check_build(
        "stripped",
        &["-O2", "-fomit-frame-pointer"],
        true,
        &["chain"],
        &[],
    );
}

#[test]
fn i386_process_matches_gdb() {
    // A 32-bit build needs the compiler's multilib support, which is optional here (the CI
    // image may lack gcc-multilib): without it this test says so and checks nothing.
    let dir = scratch("unwind-m32-probe");
    let probe = dir.join("probe.c");
    std::fs::write(&probe, "int main(void) { return 0; }\n").unwrap();
    if cc(&dir.join("probe"), &["-m32", probe.to_str().unwrap()]).is_err() {
        eprintln!("NOT RUN: the C compiler cannot build 32-bit programs (no multilib)");
        return;
    }
    check_fixture(
        "i386",
        &["-m32", "-O2", "-fomit-frame-pointer"],
        &["signal"],
        &["in_handler", "on_signal", "c", "b", "a", "main"],
    );
}

#[test]
fn without_cfi_the_fallbacks_find_the_fixture_and_cross_the_signal_frame() {
    // -O0 keeps frame pointers in the fixture; libc has none, so a frame or two may be
    // skipped, but every frame found must be one of gdb's, in gdb's order, and x86_64's
    // __restore_rt is crossed through its saved ucontext.
    if !have("gdb") {
        return skip("gdb is needed as the oracle");
    }
    let dir = scratch("unwind-nocfi");
    let Some(exe) = build_chain(&dir, &["-O0"]) else {
        return;
    };
    let mut child = Spawned::new(Command::new(&exe).arg("signal"));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    assert!(
        wait_for(20, || all_asleep(pid)),
        "the fixture never blocked"
    );
    let gdb = gdb_stacks(pid);
    let tracer = Tracer::new().unwrap();
    tracer.attach(pid).unwrap();
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let options = mpir_target::unwind::UnwindOptions::default().with_cfi(false);
    let unwinder = Unwinder::with_options(target.images(), options);
    let regs = tracer.registers(pid, pid).unwrap();
    let stack = unwinder.unwind(target.memory(), &regs);
    tracer.detach(pid).unwrap();
    let names = ours_to_main(&stack);
    eprintln!(
        "{:x?}",
        stack
            .frames
            .iter()
            .map(|f| (f.pc, f.trust, f.function.as_deref()))
            .collect::<Vec<_>>()
    );
    let ours: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| {
            [
                "in_handler",
                "on_signal",
                "<signal handler called>",
                "c",
                "b",
                "a",
                "main",
            ]
            .contains(n)
        })
        .collect();
    assert_eq!(
        ours,
        [
            "in_handler",
            "on_signal",
            "<signal handler called>",
            "c",
            "b",
            "a",
            "main"
        ]
        .iter()
        .filter(|n| names.iter().any(|m| m == *n))
        .copied()
        .collect::<Vec<_>>()
    );
    for must in ["on_signal", "<signal handler called>", "b", "a", "main"] {
        assert!(names.iter().any(|n| n == must), "{must} missing: {names:?}");
    }
    let restorer = stack.frames.iter().position(|f| f.signal_frame).unwrap();
    assert_eq!(
        stack.frames[restorer].function.as_deref(),
        Some("__restore_rt")
    );
    assert_eq!(
        stack.frames[restorer + 1].trust,
        mpir_target::unwind::Trust::SignalContext
    );
    // The interrupted frame is gdb's frame after "<signal handler called>" (gdb prints no pc
    // for it: it is at the start of a line).
    let main_gdb = &gdb[&pid];
    let after = main_gdb
        .iter()
        .position(|g| g.name == "<signal handler called>")
        .unwrap();
    assert_eq!(
        stack.frames[restorer + 1].function.as_deref(),
        Some(main_gdb[after + 1].name.as_str())
    );
    // No invented frames: every other pc of ours (not the trampoline's, which gdb does not
    // print) is one of gdb's.
    let gdb_pcs: Vec<u64> = main_gdb.iter().filter_map(|g| g.pc).collect();
    for f in stack.frames.iter().take(names.len()) {
        use mpir_target::unwind::Trust;
        if !f.signal_frame && !matches!(f.trust, Trust::Context | Trust::SignalContext) {
            assert!(
                gdb_pcs.contains(&f.pc),
                "{f:?} is not one of gdb's frames: {gdb:?}"
            );
        }
    }
    drop(child);
}

#[test]
fn a_core_truncated_inside_the_stack_gives_a_partial_stack_with_the_reason() {
    if !have("gcore") {
        return skip("gcore (gdb) is not installed");
    }
    let dir = scratch("unwind-truncated");
    let Some(exe) = build_chain(&dir, &["-O0"]) else {
        return;
    };
    let mut child = Spawned::new(Command::new(&exe).args(["deep", "200"]));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    assert!(
        wait_for(20, || all_asleep(pid)),
        "the fixture never blocked"
    );
    let path = mpir_target::testkit::gcore(&dir, &[pid]).unwrap().remove(0);
    drop(child);
    let whole = CoreTarget::open(&path, DebugOptions::default()).unwrap();
    let thread = whole.core().threads()[0];
    let regs = thread.registers.unwrap();
    let sp = regs.sp().unwrap();
    let full = Unwinder::new(whole.images()).unwind(whole.memory(), &regs);
    assert_eq!(full.end, EndReason::Outermost);
    assert!(full.frames.len() > 200, "{}", full.frames.len());
    // Cut the file 4 KiB above the stack pointer: the rest of the stack (and everything
    // after it in the core) is gone.
    let seg = *whole
        .core()
        .segments()
        .iter()
        .find(|s| s.vaddr <= sp && sp < s.vaddr + s.mem_size && s.file_size > 0)
        .expect("the stack is dumped");
    let cut = seg.offset + (sp - seg.vaddr) + 4096;
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(cut).unwrap();
    drop(file);
    let cut_core = CoreTarget::open(&path, DebugOptions::default()).unwrap();
    assert!(cut_core.core().truncation().is_some());
    // gcore writes its notes (NT_FILE: the images) after the memory, so they are cut too; a
    // kernel core, notes first, keeps them. The images of the whole core stand for those.
    let partial = Unwinder::new(whole.images()).unwind(cut_core.memory(), &regs);
    assert!(
        partial.frames.len() > 3 && partial.frames.len() < full.frames.len(),
        "{} frames of {}: {}",
        partial.frames.len(),
        full.frames.len(),
        partial.end
    );
    // The frames found are the true ones.
    for (p, f) in partial.frames.iter().zip(&full.frames) {
        assert_eq!((p.pc, p.sp), (f.pc, f.sp));
    }
    assert!(
        matches!(partial.end, EndReason::Unreadable { .. }),
        "{}",
        partial.end
    );
}

/// Flags that leave the fixture's own functions without `.eh_frame`: their CFI is only in
/// `.debug_frame` (crt's start-up code keeps its `.eh_frame`).
const DEBUG_FRAME_ONLY: &[&str] = &[
    "-O2",
    "-fomit-frame-pointer",
    "-fno-asynchronous-unwind-tables",
    "-fno-unwind-tables",
];

#[test]
fn debug_frame_only_matches_gdb() {
    check_fixture(
        "debug-frame",
        DEBUG_FRAME_ONLY,
        &["chain"],
        &["c", "b", "a", "main"],
    );
}

#[test]
fn debug_frame_in_a_separate_debug_file_matches_gdb() {
    check_fixture(
        "debug-frame-split",
        DEBUG_FRAME_ONLY,
        &["chain"],
        &["c", "b", "a", "main"],
    );
}
