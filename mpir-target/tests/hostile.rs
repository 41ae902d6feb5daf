//! Bad target data and injected faults: every case ends in a typed error (or a per-entry
//! problem) naming the address, never a panic, a hang or an unbounded allocation.

use mpir_target::mock::{Access, MockRank, MockStarter, MockTarget};
use mpir_target::proctable::{LayoutChoice, ReadOptions, read_proctable};
use mpir_target::{Fault, Memory, MemoryExt, Symbol, SymbolKind, TargetError};
use mpir_types::mpir::{ProblemKind, ProcDescLayout, symbols};
use mpir_types::{DataModel, DecodeError, LayoutSource, TypeLayout};

fn starter_target(starter: &MockStarter, model: DataModel) -> MockTarget {
    let mut b = MockTarget::builder(model);
    starter.place(&mut b);
    b.build()
}

/// Overwrites the `int` variable `name` of a built mock (through the Memory trait).
fn set_int(target: &MockTarget, name: &str, value: i64) {
    let sym = target.symbol_of(name);
    target.write_c_int(sym, value, name).unwrap();
}

trait SymbolOf {
    fn symbol_of(&self, name: &str) -> u64;
}

impl SymbolOf for MockTarget {
    fn symbol_of(&self, name: &str) -> u64 {
        use mpir_target::SymbolLookupExt;
        self.require_symbol(name).unwrap().address
    }
}

#[test]
fn short_reads_are_counts_and_read_exact_completes() {
    let mut b = MockTarget::builder(DataModel::LP64);
    b.max_read_chunk(3);
    let a = b.alloc_with((0u8..100).collect());
    let t = b.build();
    let mut buf = [0u8; 10];
    assert_eq!(t.read_partial(a, &mut buf).unwrap(), 3);
    let v = t.read_vec(a, 100).unwrap();
    assert_eq!(v, (0u8..100).collect::<Vec<_>>());
    assert!(t.read_calls() >= 34, "chunked reads: {}", t.read_calls());
}

#[test]
fn reads_stop_at_holes_and_protected_pages() {
    let mut b = MockTarget::builder(DataModel::LP64);
    let a = b.alloc_with(vec![1; 16]);
    let p = b.protected(4096);
    let t = b.build();
    // Past the end of an allocation: a short read, then an error naming the address.
    let mut buf = [0u8; 32];
    assert_eq!(t.read_partial(a, &mut buf).unwrap(), 16);
    let e = t.read_vec(a, 32).unwrap_err();
    assert_eq!(
        e,
        TargetError::ShortRead {
            address: a,
            wanted: 32,
            got: 16,
            fault: Fault::Unmapped
        }
    );
    let e = t.read_vec(p + 8, 4).unwrap_err();
    assert!(matches!(
        e,
        TargetError::Unreadable { address, fault: Fault::Protected, .. } if address == p + 8
    ));
    assert!(e.to_string().contains(&format!("{:#x}", p + 8)), "{e}");
    assert!(matches!(
        t.read_vec(0, 1),
        Err(TargetError::Unreadable {
            address: 0,
            fault: Fault::Unmapped,
            ..
        })
    ));
    assert!(matches!(
        t.read_vec(u64::MAX, 2),
        Err(TargetError::Unreadable { .. })
    ));
}

#[test]
fn adjacent_regions_read_as_one() {
    let mut b = MockTarget::builder(DataModel::LP64);
    b.map(0x10_0000, vec![1; 8], Access::READ_WRITE);
    b.map(0x10_0008, vec![2; 8], Access::READ_ONLY);
    b.map(0x10_0010, vec![3; 8], Access::NONE);
    let t = b.build();
    let mut buf = [0u8; 24];
    assert_eq!(t.read_partial(0x10_0000, &mut buf).unwrap(), 16);
    assert_eq!(
        &buf[..16],
        &[1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2]
    );
}

#[test]
fn failing_after_n_reads() {
    let mut b = MockTarget::builder(DataModel::ILP32);
    b.fail_reads_after(2);
    let a = b.alloc_with(vec![7; 8]);
    let t = b.build();
    assert!(t.read_vec(a, 4).is_ok());
    assert!(t.read_vec(a, 4).is_ok());
    assert!(matches!(
        t.read_vec(a, 4),
        Err(TargetError::Unreadable {
            fault: Fault::Injected,
            ..
        })
    ));
}

#[test]
fn writes_are_checked_whole_and_logged() {
    let mut b = MockTarget::builder(DataModel::LP64);
    let rw = b.int_variable("MPIR_being_debugged", 0);
    let ro = b.alloc_with(vec![9; 8]);
    b.set_access(ro, Access::READ_ONLY);
    let t = b.build();
    t.write_c_int(rw, 1, "being_debugged").unwrap();
    // Spanning into the guard gap: refused, nothing written.
    assert!(matches!(
        t.write(rw, &[0; 128]),
        Err(TargetError::Unwritable {
            fault: Fault::Unmapped,
            ..
        })
    ));
    assert!(matches!(
        t.write(ro, &[0]),
        Err(TargetError::Unwritable {
            fault: Fault::Protected,
            ..
        })
    ));
    assert_eq!(t.peek(ro, 1).unwrap(), [9]);
    let w = t.writes();
    assert_eq!(w.len(), 1, "only the successful write is logged: {w:?}");
    assert_eq!(w[0].symbol.as_deref(), Some("MPIR_being_debugged"));
    assert_eq!(w[0].bytes, 1i32.to_le_bytes());
}

#[test]
fn strings_bounded_and_unterminated() {
    let mut b = MockTarget::builder(DataModel::LP64);
    b.max_read_chunk(7);
    let exact = b.cstring("x".repeat(300));
    let long = b.alloc_with(vec![b'a'; 1 << 20]); // 1 MiB, no NUL, then a hole
    let p = b.protected(64);
    let t = b.build();
    assert_eq!(t.read_c_string(exact, 300).unwrap().len(), 300);
    let e = t.read_c_string(exact, 299).unwrap_err();
    assert!(matches!(
        e,
        TargetError::Decode(DecodeError::Unterminated { max_len: 299, .. })
    ));
    // Unterminated up to a hole: a short read naming the string's address.
    let e = t.read_c_string(long, 4 << 20).unwrap_err();
    assert!(
        matches!(e, TargetError::ShortRead { address, got, .. } if address == long && got == 1 << 20),
        "{e}"
    );
    // Bounded: we give up at max_len without reading the whole MiB.
    let before = t.read_calls();
    assert!(t.read_c_string(long, 4096).is_err());
    assert!(t.read_calls() - before <= 4097 / 7 + 2);
    assert!(matches!(
        t.read_c_string(p, 10),
        Err(TargetError::Unreadable {
            fault: Fault::Protected,
            ..
        })
    ));
}

#[test]
fn negative_and_absurd_sizes_are_refused() {
    let starter = MockStarter::uniform(2, 1, "/a", 10);
    let t = starter_target(&starter, DataModel::LP64);
    set_int(&t, symbols::PROCTABLE_SIZE, -5);
    let e = read_proctable(&t, &ReadOptions::default()).unwrap_err();
    assert_eq!(
        e,
        TargetError::Decode(DecodeError::Negative {
            what: "MPIR_proctable_size".into(),
            value: -5
        })
    );
    set_int(&t, symbols::PROCTABLE_SIZE, i32::MAX.into());
    let e = read_proctable(&t, &ReadOptions::default()).unwrap_err();
    assert!(matches!(
        e,
        TargetError::Decode(DecodeError::TooLarge { .. })
    ));
    // Under the limit but more than is mapped: the bulk read fails, bounded, with the address.
    set_int(&t, symbols::PROCTABLE_SIZE, 1000);
    let e = read_proctable(&t, &ReadOptions::default()).unwrap_err();
    assert!(matches!(e, TargetError::ShortRead { got: 48, .. }), "{e}");
    // The caller's limit is honoured.
    set_int(&t, symbols::PROCTABLE_SIZE, 2);
    let e = read_proctable(&t, &ReadOptions::default().with_max_entries(1)).unwrap_err();
    assert!(e.to_string().contains("above the limit of 1"), "{e}");
}

#[test]
fn null_and_empty_tables() {
    let t = starter_target(&MockStarter::new(vec![]), DataModel::ILP32_BE);
    let table = read_proctable(&t, &ReadOptions::default()).unwrap();
    assert!(table.resolved.entries.is_empty());

    let mut b = MockTarget::builder(DataModel::LP64);
    b.int_variable(symbols::PROCTABLE_SIZE, 3);
    let p = b.pointer_variable(symbols::PROCTABLE, 0);
    let t = b.build();
    let e = read_proctable(&t, &ReadOptions::default()).unwrap_err();
    assert!(
        matches!(&e, TargetError::InvalidValue { address, .. } if *address == p),
        "{e}"
    );
    let t = MockTarget::builder(DataModel::LP64).build();
    assert_eq!(
        read_proctable(&t, &ReadOptions::default()).unwrap_err(),
        TargetError::SymbolNotFound {
            name: "MPIR_proctable_size".into()
        }
    );
}

#[test]
fn bad_entries_are_problems_not_failures() {
    let mut b = MockTarget::builder(DataModel::LP64);
    let starter = MockStarter::new(vec![
        MockRank::new("good", "/bin/app", 100),
        MockRank::new("bad", "/bin/app", -1),
        MockRank::new("good", "/bin/app", 0),
    ]);
    let placed = starter.place(&mut b);
    let hole = b.protected(16);
    let mut t_raw = placed.raw.clone();
    t_raw[1].host_name = hole; // points into a PROT_NONE page
    t_raw[2].executable_name = 0; // NULL
    let layout = placed.layout.clone();
    b.write_with(placed.table_address, layout.size * 3, |v| {
        let mut tmp = v.as_view().bytes().to_vec();
        mpir_types::mpir::encode_proctable(
            &DataModel::LP64,
            &layout,
            placed.table_address,
            &t_raw,
            &mut tmp,
        )?;
        v.put_bytes(0, &tmp, "table")
    });
    let t = b.build();
    let table = read_proctable(&t, &ReadOptions::default()).unwrap();
    let e: Vec<_> = table.resolved.ranks().collect();
    assert_eq!(e.len(), 3);
    assert_eq!(e[0].host, Some("good"));
    assert_eq!(e[1].host, None);
    assert_eq!(e[2].executable, None);
    let p = &table.resolved.problems;
    assert_eq!(p.len(), 4, "{p:?}");
    assert!(
        matches!(&p[0].kind, ProblemKind::Unreadable { address, reason } if *address == hole && reason.contains("protected"))
    );
    assert_eq!(p[1].kind, ProblemKind::InvalidPid(-1));
    assert_eq!(p[2].kind, ProblemKind::NullPointer);
    assert_eq!(p[3].kind, ProblemKind::InvalidPid(0));
}

#[test]
fn unusable_debug_type_is_an_error_unless_abi_is_chosen() {
    let mut b = MockTarget::builder(DataModel::LP64);
    MockStarter::uniform(3, 1, "/x", 50).place(&mut b);
    // Debug info says pid lies past the end of the struct.
    b.type_layout(
        TypeLayout::new("MPIR_PROCDESC", 16, LayoutSource::Given)
            .with_member("host_name", 0, 8)
            .with_member("executable_name", 8, 8)
            .with_member("pid", 16, 4),
    );
    let t = b.build();
    let e = read_proctable(&t, &ReadOptions::default()).unwrap_err();
    assert!(
        matches!(&e, TargetError::Decode(DecodeError::InvalidLayout { .. })),
        "{e}"
    );
    let table = read_proctable(&t, &ReadOptions::default().with_layout(LayoutChoice::Abi)).unwrap();
    assert_eq!(table.resolved.entries[2].pid, 52);
    assert_eq!(table.layout.source, LayoutSource::Abi);
    // A given layout is validated against the data model.
    let mut bad = ProcDescLayout::abi(&DataModel::LP64);
    bad.host_name.size = 4;
    assert!(
        read_proctable(
            &t,
            &ReadOptions::default().with_layout(LayoutChoice::Given(bad))
        )
        .is_err()
    );
}

#[test]
fn type_found_by_name_when_variable_type_is_unknown() {
    let mut b = MockTarget::builder(DataModel::LP64);
    let mut starter = MockStarter::uniform(2, 1, "/x", 50);
    starter.layout = None;
    starter.place(&mut b);
    // pid widened to 8 bytes at offset 16 would misread a 4-byte table: the reader must use it.
    b.type_layout(
        TypeLayout::new("MPIR_PROCDesc", 24, LayoutSource::Given)
            .with_member("host_name", 0, 8)
            .with_member("executable_name", 8, 8)
            .with_member("pid", 16, 8),
    );
    let t = b.build();
    let table = read_proctable(&t, &ReadOptions::default()).unwrap();
    assert_eq!(table.layout.pid.size, 8);
    assert_eq!(table.layout.source, LayoutSource::Given);
    // The upper 4 bytes are the 0xa5 padding of the real table: the 8-byte read sees them.
    assert_ne!(table.resolved.entries[0].pid, 50);
}

#[test]
fn shared_strings_are_read_once() {
    let shared = MockStarter::uniform(1000, 4, "/bin/app", 1);
    let mut dup = shared.clone();
    dup.share_strings = false;
    let count = |s: &MockStarter| {
        let t = starter_target(s, DataModel::LP64);
        let before = t.read_calls();
        let table = read_proctable(&t, &ReadOptions::default()).unwrap();
        assert_eq!(table.resolved.entries.len(), 1000);
        t.read_calls() - before
    };
    let (s, d) = (count(&shared), count(&dup));
    // 4 hosts + 1 executable + the size, pointer and table reads, and one probe of the
    // table's last entry (which decides whether its claimed size may be reserved).
    assert!(s <= 9, "shared strings: {s} reads");
    assert!(d >= 2000, "duplicated strings: {d} reads");
}

#[test]
fn symbols_carry_size_and_binding() {
    let mut b = MockTarget::builder(DataModel::LP64);
    b.symbol(
        Symbol::new("MPID_Recvq_posted_head_ptr", 0x1234, 8, SymbolKind::Object)
            .with_binding(mpir_target::Binding::Local)
            .with_image("libmpi.so.12"),
    );
    let t = b.build();
    use mpir_target::SymbolLookup;
    let s = t.symbol("MPID_Recvq_posted_head_ptr").unwrap().unwrap();
    assert_eq!(s.binding, mpir_target::Binding::Local);
    assert_eq!(s.image.as_deref(), Some("libmpi.so.12"));
    assert_eq!(t.symbol("nope").unwrap(), None);
}

#[test]
#[should_panic(expected = "overlaps")]
fn overlapping_mock_regions_are_refused() {
    let mut b = MockTarget::builder(DataModel::LP64);
    b.map(0x2000, vec![0; 16], Access::READ_WRITE);
    b.map(0x1ff8, vec![0; 9], Access::READ_WRITE);
}

#[test]
fn large_tables_with_duplicated_strings() {
    // 2 regions per rank: the mock must find regions in logarithmic time.
    let mut starter = MockStarter::uniform(100_000, 16, "/bin/app", 1);
    starter.share_strings = false;
    let mut b = MockTarget::builder(DataModel::ILP32_BE);
    starter.place(&mut b);
    let t = b.build();
    let table = read_proctable(&t, &ReadOptions::default()).unwrap();
    assert_eq!(table.resolved.entries.len(), 100_000);
    assert_eq!(table.resolved.rank(99_999).unwrap().host, Some("node15"));
    assert!(table.resolved.problems.is_empty());
}

#[test]
fn large_reads_grow_with_what_is_mapped_and_name_the_whole_range() {
    let mut b = MockTarget::builder(DataModel::LP64);
    let mapped = 3 << 20;
    let a = b.alloc_with(vec![7; mapped]);
    let t = b.build();
    // Read in 1 MiB steps: the error names the whole request and how far it got.
    let e = t.read_vec(a, 8 << 20).unwrap_err();
    assert_eq!(
        e,
        TargetError::ShortRead {
            address: a,
            wanted: 8 << 20,
            got: mapped as u64,
            fault: Fault::Unmapped
        }
    );
    let e = t.read_vec(0x10, 4 << 20).unwrap_err();
    assert_eq!(
        e,
        TargetError::Unreadable {
            address: 0x10,
            len: 4 << 20,
            fault: Fault::Unmapped
        }
    );
    let whole = t.read_vec(a, mapped as u64).unwrap();
    assert_eq!(whole.len(), mapped);
    assert!(whole.iter().all(|&x| x == 7));
}
