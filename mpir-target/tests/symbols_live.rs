//! Symbolised stacks across processes and images: two processes of one executable share one
//! symbol cache entry per build-id, and a stripped shared library gives module+offset and only
//! its own names; gdb as the oracle. An executable deleted or replaced on disk while it runs
//! (under a name that is not UTF-8 and holds a newline) is read from the running image
//! (`/proc/PID/map_files`), with `nm` on a saved copy as the oracle.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::process::Command;

use mpir_target::SymbolLookup;
use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::LiveTarget;
use mpir_target::live::tracer::Tracer;
use mpir_target::unwind::{SnapshotOptions, SymbolCache, UnwindOptions, Unwinder, snapshot_live};
use mpir_types::DataModel;
use support::*;

/// The chain fixture, started and asleep in its call chain.
fn spawn_chain(exe: &std::path::Path) -> Spawned {
    let mut child = Spawned::new(Command::new(exe).arg("chain"));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    assert!(
        wait_for(20, || all_asleep(pid)),
        "the fixture never blocked"
    );
    child
}

#[test]
fn two_processes_of_one_executable_share_one_cache_entry_per_build_id() {
    let dir = scratch("unwind-shared-cache");
    let Some(exe) = build_chain(&dir, &["-O2"]) else {
        return;
    };
    let (first, second) = (spawn_chain(&exe), spawn_chain(&exe));
    let cache = SymbolCache::new();
    let mut stacks = Vec::new();
    let mut after_first = None;
    for child in [&first, &second] {
        let pid = child.pid();
        let tracer = Tracer::new().unwrap();
        let snap =
            snapshot_live(&tracer, pid, DataModel::LP64, &SnapshotOptions::default()).unwrap();
        drop(tracer);
        let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
        let unwinder = Unwinder::with_cache(target.images(), UnwindOptions::default(), &cache);
        let threads = unwinder.thread_stacks(&snap);
        assert_eq!(threads.len(), 2);
        // Thread ids differ between the processes; the frames do not.
        let mut frames: Vec<_> = threads.into_iter().map(|t| t.frames).collect();
        frames.sort_by_key(|f| f.len());
        stacks.push(frames);
        after_first.get_or_insert(cache.stats());
    }
    let (one, two) = (after_first.unwrap(), cache.stats());
    eprintln!("after one process: {one:?}\nafter two: {two:?}");
    // The first process parsed each image it unwound through (executable, libc, ld.so...);
    // the second parsed nothing more, took every image from the cache, and had every source
    // lookup answered from the first's answers.
    assert!(one.images_parsed >= 2, "{one:?}");
    assert_eq!(two.images_parsed, one.images_parsed, "{two:?}");
    assert_eq!(two.entries, one.entries);
    assert!(two.images_reused >= one.images_parsed, "{two:?}");
    assert_eq!(two.dwarf_loaded, one.dwarf_loaded);
    assert!(one.lookups > 0, "{one:?}");
    assert_eq!(
        two.lookups_cached - one.lookups_cached,
        two.lookups - one.lookups
    );
    assert_eq!(stacks[0], stacks[1]);
    // A cache with room for one image keeps one and parses the rest per unwinder.
    let small = SymbolCache::with_max_images(1);
    let target = LiveTarget::open(first.pid(), DebugOptions::default()).unwrap();
    let tracer = Tracer::new().unwrap();
    let snap = snapshot_live(
        &tracer,
        first.pid(),
        DataModel::LP64,
        &SnapshotOptions::default(),
    )
    .unwrap();
    drop(tracer);
    let bounded = Unwinder::with_cache(target.images(), UnwindOptions::default(), &small)
        .thread_stacks(&snap);
    let mut frames: Vec<_> = bounded.into_iter().map(|t| t.frames).collect();
    frames.sort_by_key(|f| f.len());
    assert_eq!(frames, stacks[0]);
    let s = small.stats();
    assert_eq!(s.entries, 1, "{s:?}");
    assert!(s.images_uncached >= 1, "{s:?}");
}

#[test]
fn a_stripped_library_gives_module_offsets_and_only_its_own_names() {
    if !have("gdb") {
        return skip("gdb is needed as the oracle");
    }
    let dir = scratch("unwind-stripped-lib");
    let src = fixtures().join("unwind_lib.c");
    let src = src.to_str().unwrap();
    let lib = dir.join("libunwind_lib.so");
    let built = cc(&lib, &["-O0", "-g", "-shared", "-fPIC", "-DLIB", src]).and_then(|lib| {
        let libdir = format!("-L{}", dir.display());
        cc(
            &dir.join("unwind_lib"),
            &["-O0", "-g", src, &libdir, "-lunwind_lib"],
        )
        .map(|exe| (lib, exe))
    });
    let Ok((lib, exe)) = built.map_err(|e| skip(&e)) else {
        return;
    };
    run(Command::new("strip").arg("--strip-all").arg(&lib)).unwrap();
    let mut child = Spawned::new(Command::new(&exe).env("LD_LIBRARY_PATH", &*dir));
    assert_eq!(child.line(), "ready");
    let pid = child.pid();
    let asleep = || {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.rsplit_once(") ").is_some_and(|(_, r)| r.starts_with('S')))
    };
    assert!(wait_for(20, asleep), "the fixture never blocked");
    let gdb = gdb_stacks(pid);
    let gdb = &gdb[&pid];
    let tracer = Tracer::new().unwrap();
    let snap = snapshot_live(&tracer, pid, DataModel::LP64, &SnapshotOptions::default()).unwrap();
    drop(tracer);
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let unwinder = Unwinder::new(target.images());
    let stacks = unwinder.thread_stacks(&snap);
    let ours = &stacks[0];
    assert_eq!(ours.truncated, None, "{ours:?}");
    let (lib_name, lib_bias) = target
        .images()
        .images()
        .iter()
        .find(|i| i.path().ends_with("libunwind_lib.so"))
        .map(|i| (i.path().display().to_string(), i.bias()))
        .expect("the library is mapped");
    let in_lib: Vec<_> = ours
        .frames
        .iter()
        .filter(|f| *f.module == *lib_name)
        .collect();
    eprintln!("{in_lib:?}\ngdb: {gdb:?}");
    // hidden_wait, then lib_enter: the first nameless (gdb's "??"), the second by the
    // library's own exported symbol; neither named from the executable or libc.
    assert_eq!(in_lib.len(), 2, "{ours:?}");
    assert_eq!(
        (in_lib[0].symbol.as_deref(), in_lib[1].symbol.as_deref()),
        (None, Some("lib_enter"))
    );
    assert!(in_lib.iter().all(|f| f.location.is_none() && !f.inline));
    assert_eq!(
        in_lib[0].function_label(),
        format!("libunwind_lib.so+{:#x}", in_lib[0].offset)
    );
    let gdb_names: Vec<&str> = gdb.iter().map(|g| g.name.as_str()).collect();
    let at = gdb_names
        .iter()
        .position(|n| *n == "??")
        .expect("gdb's nameless frame");
    assert_eq!(
        gdb_names.get(at + 1..at + 3),
        Some(&["lib_enter", "main"][..]),
        "{gdb:?}"
    );
    // The same two frames: gdb's pcs are the library's bias plus our offsets.
    for (ours, gdb) in in_lib.iter().zip(&gdb[at..]) {
        assert_eq!(Some(lib_bias + ours.offset), gdb.pc, "{ours:?} vs {gdb:?}");
    }
    // The executable's main, after the library's frames, keeps its name and line.
    let main = ours
        .frames
        .iter()
        .find(|f| f.symbol.as_deref() == Some("main"))
        .expect("main");
    let gdb_main = gdb.iter().find(|g| g.name == "main").unwrap();
    assert_eq!(
        main.location.as_ref().map(|l| (basename(&l.file), l.line)),
        gdb_main.location.clone()
    );
    drop(child);
}

/// The value of `symbol` in `file` as `nm` reads it (the oracle: a copy of the executable saved
/// before it was deleted or replaced).
fn nm_address(file: &std::path::Path, symbol: &str) -> u64 {
    let out = run(Command::new("nm").arg(file)).unwrap();
    out.lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let (value, _kind, name) = (f.next()?, f.next()?, f.next()?);
            (name == symbol).then(|| u64::from_str_radix(value, 16).ok())?
        })
        .unwrap_or_else(|| panic!("nm: no {symbol} in {}", file.display()))
}

#[test]
fn a_deleted_or_replaced_executable_is_read_from_the_running_image() {
    if !have("nm") {
        return skip("nm (binutils) is needed as the oracle");
    }
    let dir = scratch("replaced-exe");
    let src = fixtures().join("replaced.c");
    let src = src.to_str().unwrap();
    // Not position-independent: a symbol's address in the process is nm's value.
    let built = cc(&dir.join("original"), &["-O1", "-no-pie", src]).and_then(|_| {
        cc(
            &dir.join("replacement"),
            &["-O1", "-no-pie", "-DREPLACEMENT", src],
        )
    });
    if let Err(e) = built {
        return skip(&e);
    }
    let saved = dir.join("saved");
    std::fs::copy(dir.join("original"), &saved).unwrap();
    let expected = nm_address(&saved, "mpir_replaced_original");
    for how in ["deleted", "replaced"] {
        // A name that is not UTF-8 and holds a newline (the kernel's maps write it `\012`).
        let mut name = format!("prog-{how}-").into_bytes();
        name.extend_from_slice(b"\xff\n1");
        let exe = dir.join(<std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(&name));
        std::fs::copy(&saved, &exe).unwrap();
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let mut child = Spawned::new(&mut Command::new(&exe));
        assert_eq!(child.line(), "ready 2");
        let pid = child.pid();
        match how {
            "deleted" => std::fs::remove_file(&exe).unwrap(),
            // Another program at the same path (a rebuild): a new file, renamed over it.
            _ => std::fs::rename(dir.join("replacement"), &exe).unwrap(),
        }
        let maps = std::fs::read(format!("/proc/{pid}/maps")).unwrap();
        let maps = String::from_utf8_lossy(&maps);
        assert!(maps.contains("\\0121 (deleted)"), "{how}: {maps}");
        let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
        let images = target.images().images();
        assert_eq!(
            images.first().map(|i| i.path()),
            Some(exe.as_path()),
            "{how}: the executable first, by its path without the kernel's mark"
        );
        let found = target.symbol("mpir_replaced_original").unwrap();
        assert_eq!(
            found.map(|s| s.address),
            Some(expected),
            "{how}: the running image's symbol"
        );
        assert!(
            target
                .symbol("mpir_replaced_replacement")
                .unwrap()
                .is_none(),
            "{how}: nothing of the file now at the path"
        );
        child.send("done");
        assert!(child.finish().success());
    }
}

/// A second run over the same images, with the store the first one filled, names every frame
/// as the first did without indexing any image's function symbols: the functions at the
/// frames' addresses are the store's answers. A store for other files is not believed.
#[test]
fn a_warm_store_names_functions_without_indexing_symbols() {
    let dir = scratch("unwind-functions-store");
    let Some(exe) = build_chain(&dir, &["-O2"]) else {
        return;
    };
    let child = spawn_chain(&exe);
    let pid = child.pid();
    let tracer = Tracer::new().unwrap();
    let snap = snapshot_live(&tracer, pid, DataModel::LP64, &SnapshotOptions::default()).unwrap();
    drop(tracer);
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let store = mpir_target::debuginfo::SymbolStore::open(dir.join("store")).unwrap();
    let read = |cache: &SymbolCache| {
        let unwinder = Unwinder::with_cache(target.images(), UnwindOptions::default(), cache);
        let mut frames: Vec<_> = unwinder
            .thread_stacks(&snap)
            .into_iter()
            .map(|t| t.frames)
            .collect();
        frames.sort_by_key(|f| f.len());
        frames
    };
    let cold = SymbolCache::with_store(store.clone());
    let first = read(&cold);
    assert!(
        first
            .iter()
            .flatten()
            .any(|f| f.symbol.as_deref() == Some("main")),
        "{first:?}"
    );
    let s = cold.stats();
    assert!(s.functions_indexed >= 2, "{s:?}");
    assert!(
        cold.save() >= s.functions_indexed as usize,
        "{:?}",
        cold.stats()
    );
    let warm = SymbolCache::with_store(store.clone());
    assert_eq!(read(&warm), first);
    let s = warm.stats();
    assert_eq!(s.functions_indexed, 0, "{s:?}");
    assert!(store.problems().is_empty(), "{:?}", store.problems());
    // Every answer file altered to claim other files' sizes is no longer used: the
    // functions are indexed again, and the frames are still right.
    for entry in std::fs::read_dir(dir.join("store")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "functions") {
            let mut bytes = std::fs::read(&path).unwrap();
            // magic (8), build-id (1 + n), then the image's size.
            let at = 8 + 1 + usize::from(bytes[8]);
            bytes[at] ^= 1;
            std::fs::write(&path, bytes).unwrap();
        }
    }
    let other = SymbolCache::with_store(store);
    assert_eq!(read(&other), first);
    assert!(other.stats().functions_indexed >= 2, "{:?}", other.stats());
}
