//! Memory of live processes: a fake starter with a filled table read through `LiveTarget`
//! (symbols from its images, memory through process_vm_readv), scatter/gather reads across
//! holes, batched strings, writes, and a process that is gone.

mod support;

use mpir_target::debuginfo::DebugOptions;
use mpir_target::live::{LiveMemory, LiveTarget};
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_target::{Fault, Memory, MemoryExt, SymbolLookupExt, TargetError};
use mpir_types::mpir::ProblemKind;
use mpir_types::{DataModel, LayoutSource};
use support::*;

#[test]
fn reads_a_filled_table_shared_and_duplicated() {
    let dir = scratch("live-table");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    for (mode, n) in [("shared", 1000), ("dup", 5000), ("shared", 0)] {
        let starter = FakeStarter::start(&exe, n, mode);
        let target = LiveTarget::open(starter.pid(), DebugOptions::default()).unwrap();
        assert_eq!(target.memory().data_model(), DataModel::host());
        let table = read_proctable(&target, &ReadOptions::default()).unwrap();
        assert_eq!(
            table.table_address,
            if n == 0 {
                table.table_address
            } else {
                starter.table
            }
        );
        assert!(matches!(
            table.layout.source,
            LayoutSource::DebugInfo { .. }
        ));
        let e: Vec<_> = table.resolved.ranks().collect();
        assert_eq!(e.len(), n, "{mode}");
        assert!(
            table.resolved.problems.is_empty(),
            "{:?}",
            table.resolved.problems
        );
        for (i, entry) in e.iter().enumerate() {
            assert_eq!(entry.pid, 100_000 + i as i64);
            assert_eq!(entry.host, Some(format!("node{:02}", i % 16).as_str()));
            assert_eq!(entry.executable, Some("/opt/app/bin/solver"));
        }
        let distinct = mpir_types::mpir::string_addresses(&table.raw).len();
        assert_eq!(
            distinct,
            if mode == "shared" {
                (n.min(16)) + usize::from(n > 0)
            } else {
                2 * n
            }
        );
        assert!(starter.finish(), "the starter ran on unharmed");
    }
}

#[test]
fn hostile_entries_become_problems() {
    let dir = scratch("live-hostile");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let starter = FakeStarter::start(&exe, 10, "hostile");
    let target = LiveTarget::open(starter.pid(), DebugOptions::default()).unwrap();
    let table = read_proctable(&target, &ReadOptions::default()).unwrap();
    assert_eq!(table.resolved.entries.len(), 10);
    let p = &table.resolved.problems;
    assert_eq!(p.len(), 2, "{p:?}");
    assert_eq!((p[0].rank, p[1].rank), (1, 2));
    assert!(
        matches!(&p[0].kind, ProblemKind::Unreadable { address: 16, .. }),
        "{p:?}"
    );
    match &p[1].kind {
        ProblemKind::Unreadable { reason, .. } => {
            assert!(reason.contains("no NUL within 4096"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(table.resolved.rank(3).unwrap().host, Some("node03"));
    assert!(starter.finish());
}

#[test]
fn scatter_gather_continues_past_holes() {
    let dir = scratch("live-sg");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let starter = FakeStarter::start(&exe, 4, "shared");
    let mem = LiveMemory::new(starter.pid(), DataModel::host());
    let (mut a, mut b, mut c) = ([0u8; 48], [0u8; 8], [0u8; 24]);
    let mut requests: Vec<(u64, &mut [u8])> = vec![
        (starter.table, &mut a),
        (16, &mut b),
        (starter.table + 24, &mut c),
    ];
    let results = mem.read_many(&mut requests);
    assert_eq!(results.len(), 3);
    assert_eq!(results[0].as_ref().unwrap(), &48);
    assert!(
        matches!(results[1], Err(TargetError::Unreadable { address: 16, .. })),
        "{:?}",
        results[1]
    );
    assert_eq!(results[2].as_ref().unwrap(), &24);
    assert_eq!(&a[24..48], &c[..], "entry 1 read twice, the same");
    // The pid of entry 1 (offset 16 in the entry) as the process wrote it.
    assert_eq!(i32::from_ne_bytes(c[16..20].try_into().unwrap()), 100_001);
    assert!(starter.finish());
}

#[test]
fn writes_reach_the_process() {
    let dir = scratch("live-write");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let mut starter = FakeStarter::start(&exe, 2, "shared");
    let target = LiveTarget::open(starter.pid(), DebugOptions::default()).unwrap();
    let sym = target.require_symbol("MPIR_being_debugged").unwrap();
    assert_eq!(starter.show(), "being_debugged=0");
    target
        .write_c_int(sym.address, 1, "MPIR_being_debugged")
        .unwrap();
    assert_eq!(starter.show(), "being_debugged=1");
    assert_eq!(target.read_c_int(sym.address, "x").unwrap(), 1);
    target
        .write_c_int(sym.address, 0, "MPIR_being_debugged")
        .unwrap();
    assert_eq!(starter.show(), "being_debugged=0");
    assert!(matches!(
        target.write(16, &[1]),
        Err(TargetError::Unwritable { address: 16, .. })
    ));
    assert!(starter.finish());
}

#[test]
fn a_process_that_is_gone() {
    let dir = scratch("live-gone");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    let mut starter = FakeStarter::start(&exe, 2, "shared");
    let mem = LiveMemory::new(starter.pid(), DataModel::host());
    let table = starter.table;
    starter.spawned.child.kill().unwrap();
    starter.spawned.child.wait().unwrap();
    let e = mem.read_vec(table, 8).unwrap_err();
    assert!(
        matches!(
            e,
            TargetError::Unreadable {
                fault: Fault::ProcessGone,
                ..
            }
        ),
        "{e}"
    );
    let strings = mem.read_c_strings(&[table, table + 8], 64);
    assert_eq!(strings.len(), 2);
    assert!(strings.iter().all(|s| s.is_err()));
}

#[test]
fn prot_none_pages_are_read_like_a_debugger() {
    let dir = scratch("live-protnone");
    let src = fixtures().join("protnone.c");
    let exe = match cc(&dir.join("protnone"), &["-O2", src.to_str().unwrap()]) {
        Ok(e) => e,
        Err(e) => return skip(&e),
    };
    let mut child = Spawned::new(&mut std::process::Command::new(&exe));
    let line = child.line();
    let mut it = line
        .split_whitespace()
        .map(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).unwrap());
    let (readable, hidden) = (it.next().unwrap(), it.next().unwrap());
    let mem = LiveMemory::new(child.pid(), DataModel::host());
    assert_eq!(mem.read_c_string(readable, 64).unwrap(), b"readable");
    // process_vm_readv refuses the PROT_NONE page; /proc/PID/mem reads it as gdb would.
    assert_eq!(mem.read_c_string(hidden, 64).unwrap(), b"hidden");
    let across = mem.read_vec(hidden - 4, 10).unwrap();
    assert_eq!(&across[4..], b"hidden");
    assert!(child.finish().success());
}

#[test]
fn a_zombie_is_a_clear_error() {
    let dir = scratch("live-zombie");
    let src = fixtures().join("zombie.c");
    let exe = match cc(&dir.join("zombie"), &["-O2", src.to_str().unwrap()]) {
        Ok(e) => e,
        Err(e) => return skip(&e),
    };
    let mut child = Spawned::new(&mut std::process::Command::new(&exe));
    let zombie: u32 = child.line().parse().unwrap();
    assert!(wait_for(5, || std::fs::read_to_string(format!(
        "/proc/{zombie}/status"
    ))
    .is_ok_and(|s| s.contains("State:\tZ"))));
    let e = LiveTarget::open(zombie, DebugOptions::default()).unwrap_err();
    assert!(e.to_string().contains("zombie"), "{e}");
    let mem = LiveMemory::new(zombie, DataModel::host());
    assert!(mem.read_vec(0x1000, 8).is_err());
    assert!(child.finish().success());
}

#[test]
fn writes_reach_a_target_that_exec_d_through_a_wrapper() {
    let dir = scratch("live-exec");
    let Some(exe) = build_fake_starter(&dir) else {
        return;
    };
    // A wrapper shell that execs the real starter on request, as launch scripts do.
    let script = format!("read go; exec {} 2 shared", exe.display());
    let mut child = Spawned::new(std::process::Command::new("sh").args(["-c", &script]));
    let pid = child.pid();
    let mem = LiveMemory::new(pid, DataModel::host());
    // Opens /proc/PID/mem on the shell's image (the read itself fails: address 16 is unmapped).
    assert!(mem.read_vec(16, 1).is_err());
    child.send("go");
    let line = child.line(); // the starter's "table=..." line: it has exec'd
    assert!(line.starts_with("table="), "{line}");
    let target = LiveTarget::open(pid, DebugOptions::default()).unwrap();
    let flag = target
        .require_symbol("MPIR_being_debugged")
        .unwrap()
        .address;
    // The old LiveMemory still writes into the new image (its descriptor is reopened).
    mem.write_c_int(flag, 1, "MPIR_being_debugged").unwrap();
    child.send("show");
    let line = child.line();
    assert_eq!(line.trim(), "being_debugged=1");
    assert!(child.finish().success());
}
