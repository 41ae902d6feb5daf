//! `MPIR_proctable` decoding and resolution on a MockTarget (in every data model where the
//! case depends on widths or byte order): sizes, table pointers and string pointers chosen by
//! a hostile starter.

use mpir_target::mock::{MockStarter, MockTarget, MockTargetBuilder};
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_target::{Fault, Memory, SymbolLookupExt, TargetError};
use mpir_types::mpir::{DEFAULT_MAX_ENTRIES, ProblemKind, ProcDescLayout, RawProcDesc, symbols};
use mpir_types::{DataModel, DecodeError, LayoutSource, TypeLayout};

use super::harness::{SMALL, run_with};

const MODELS: [DataModel; 4] = [
    DataModel::LP64,
    DataModel::ILP32,
    DataModel::LP64_BE,
    DataModel::ILP32_BE,
];

/// A starter whose table holds `entries` (their string pointers made by `strings` in the
/// builder), with `MPIR_proctable_size` = `size`.
fn starter(
    model: DataModel,
    size: i64,
    strings: impl FnOnce(&mut MockTargetBuilder) -> Vec<RawProcDesc>,
) -> (MockTarget, u64) {
    let mut b = MockTarget::builder(model);
    let entries = strings(&mut b);
    let layout = ProcDescLayout::abi(&model);
    let len = layout.size * entries.len() as u64;
    let table = b.alloc_with(vec![0; len.max(1) as usize]);
    b.write_with(table, len, |v| {
        let mut tmp = vec![0; len as usize];
        mpir_types::mpir::encode_proctable(&model, &layout, table, &entries, &mut tmp)?;
        v.put_bytes(0, &tmp, "MPIR_proctable")
    });
    b.function(symbols::BREAKPOINT);
    b.int_variable(symbols::DEBUG_STATE, 1);
    b.int_variable(symbols::PROCTABLE_SIZE, size);
    b.pointer_variable(symbols::PROCTABLE, table);
    (b.build(), table)
}

fn entry(host: u64, exe: u64, pid: i64) -> RawProcDesc {
    RawProcDesc {
        host_name: host,
        executable_name: exe,
        pid,
    }
}

/// Two good entries.
fn good(b: &mut MockTargetBuilder) -> Vec<RawProcDesc> {
    let h = b.cstring("node0");
    let e = b.cstring("/bin/app");
    vec![entry(h, e, 100), entry(h, e, 101)]
}

fn set_pointer(t: &MockTarget, name: &str, value: u64) {
    let a = t.require_symbol(name).unwrap().address;
    let model = t.data_model();
    let mut bytes = vec![0; model.pointer_size() as usize];
    mpir_types::ViewMut::new(model, a, &mut bytes)
        .put_pointer(0, value, name)
        .unwrap();
    t.write(a, &bytes).unwrap();
}

fn read(t: MockTarget) -> Result<mpir_target::proctable::ProcTable, TargetError> {
    read_proctable(&t, &ReadOptions::default())
}

#[test]
fn size_is_int_max() {
    let (t, _) = starter(DataModel::LP64, i32::MAX.into(), good);
    let e = run_with("size INT_MAX", SMALL, t, read).unwrap_err();
    assert_eq!(
        e,
        TargetError::Decode(DecodeError::TooLarge {
            what: symbols::PROCTABLE_SIZE.into(),
            value: i32::MAX as u64,
            limit: DEFAULT_MAX_ENTRIES
        })
    );
}

#[test]
fn size_is_negative() {
    let (t, _) = starter(DataModel::ILP32_BE, -7, good);
    let e = run_with("size -7", SMALL, t, read).unwrap_err();
    assert_eq!(
        e,
        TargetError::Decode(DecodeError::Negative {
            what: symbols::PROCTABLE_SIZE.into(),
            value: -7
        })
    );
}

#[test]
fn size_just_above_the_callers_limit() {
    let (t, _) = starter(DataModel::LP64, 3, good);
    let e = run_with("size above limit", SMALL, t, |t| {
        read_proctable(&t, &ReadOptions::default().with_max_entries(2))
    })
    .unwrap_err();
    assert!(
        matches!(
            &e,
            TargetError::Decode(DecodeError::TooLarge {
                value: 3,
                limit: 2,
                ..
            })
        ),
        "{e}"
    );
}

#[test]
fn size_claims_millions_of_entries_where_two_are_mapped() {
    // Under the default limit (2^23), so the size itself is accepted: what is read and
    // allocated must follow the memory that is there, not the size claimed.
    for model in MODELS {
        let (t, table) = starter(model, (DEFAULT_MAX_ENTRIES - 1) as i64, good);
        let stride = ProcDescLayout::abi(&model).size;
        let e = run_with("size 2^23-1", SMALL, t, read).unwrap_err();
        assert!(
            matches!(e, TargetError::ShortRead { address, got, fault: Fault::Unmapped, .. }
                if address == table && got == 2 * stride),
            "{model:?}: {e}"
        );
    }
}

#[test]
fn table_pointer_is_null_with_entries() {
    let (t, _) = starter(DataModel::LP64, 2, good);
    set_pointer(&t, symbols::PROCTABLE, 0);
    let var = t.require_symbol(symbols::PROCTABLE).unwrap().address;
    let e = run_with("NULL table", SMALL, t, read).unwrap_err();
    assert!(
        matches!(&e, TargetError::InvalidValue { address, problem, .. }
            if *address == var && problem.contains("NULL")),
        "{e}"
    );
}

#[test]
fn table_pointer_is_unmapped() {
    let (t, _) = starter(DataModel::ILP32, 2, good);
    set_pointer(&t, symbols::PROCTABLE, 0x7000_0000);
    let e = run_with("unmapped table", SMALL, t, read).unwrap_err();
    assert!(
        matches!(
            e,
            TargetError::Unreadable {
                address: 0x7000_0000,
                fault: Fault::Unmapped,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn table_in_a_prot_none_page() {
    let mut hole = 0;
    let (t, _) = starter(DataModel::LP64_BE, 2, |b| {
        hole = b.protected(4096);
        good(b)
    });
    set_pointer(&t, symbols::PROCTABLE, hole);
    let e = run_with("PROT_NONE table", SMALL, t, read).unwrap_err();
    assert!(
        matches!(e, TargetError::Unreadable { address, fault: Fault::Protected, .. } if address == hole),
        "{e}"
    );
}

#[test]
fn table_wraps_around_the_address_space() {
    let (t, _) = starter(DataModel::LP64, 4, good);
    set_pointer(&t, symbols::PROCTABLE, u64::MAX - 16);
    let e = run_with("wrapping table", SMALL, t, read).unwrap_err();
    assert!(
        matches!(
            &e,
            TargetError::Decode(DecodeError::AddressOverflow { base, .. }) if *base == u64::MAX - 16
        ),
        "{e}"
    );
}

#[test]
fn size_variable_in_a_prot_none_page() {
    let mut b = MockTarget::builder(DataModel::LP64);
    let hole = b.protected(64);
    b.symbol(mpir_target::Symbol::new(
        symbols::PROCTABLE_SIZE,
        hole,
        4,
        mpir_target::SymbolKind::Object,
    ));
    b.pointer_variable(symbols::PROCTABLE, 0);
    let e = run_with("unreadable size", SMALL, b.build(), read).unwrap_err();
    assert!(
        matches!(e, TargetError::Unreadable { address, fault: Fault::Protected, .. } if address == hole),
        "{e}"
    );
}

#[test]
fn no_proctable_symbols_at_all() {
    let t = MockTarget::builder(DataModel::LP64).build();
    let e = run_with("no symbols", SMALL, t, read).unwrap_err();
    assert_eq!(
        e,
        TargetError::SymbolNotFound {
            name: symbols::PROCTABLE_SIZE.into()
        }
    );
}

/// Reads a starter whose entries point at what `strings` makes, and returns the problems.
fn problems_of(
    name: &str,
    model: DataModel,
    strings: impl FnOnce(&mut MockTargetBuilder) -> Vec<RawProcDesc>,
) -> (Vec<mpir_types::mpir::EntryProblem>, usize) {
    let (t, _) = starter(model, 2, strings);
    run_with(name, SMALL, t, |t| {
        let table = read(t).expect("a bad entry is no table error");
        (table.resolved.problems, table.resolved.entries.len())
    })
}

#[test]
fn string_pointers_are_null() {
    for model in MODELS {
        let (p, n) = problems_of("NULL strings", model, |b| {
            let e = b.cstring("/bin/app");
            vec![entry(0, e, 100), entry(0, 0, 101)]
        });
        assert_eq!(n, 2);
        let kinds: Vec<_> = p.iter().map(|p| (p.rank, &p.kind)).collect();
        assert_eq!(
            kinds,
            [
                (0, &ProblemKind::NullPointer),
                (1, &ProblemKind::NullPointer),
                (1, &ProblemKind::NullPointer)
            ],
            "{model:?}"
        );
    }
}

#[test]
fn string_pointers_are_unmapped() {
    for model in MODELS {
        let (p, _) = problems_of("unmapped strings", model, |b| {
            let e = b.cstring("/bin/app");
            vec![entry(0x6000_0000, e, 100), entry(0x6000_0000, e, 101)]
        });
        assert_eq!(p.len(), 2, "{model:?}: {p:?}");
        for q in p {
            assert!(
                matches!(&q.kind, ProblemKind::Unreadable { address: 0x6000_0000, reason } if reason.contains("unmapped")),
                "{model:?}: {q:?}"
            );
        }
    }
}

#[test]
fn strings_in_prot_none_pages() {
    for model in MODELS {
        let mut hole = 0;
        let (p, _) = problems_of("PROT_NONE strings", model, |b| {
            hole = b.protected(4096);
            let e = b.cstring("/bin/app");
            vec![entry(hole + 8, e, 100), entry(hole + 8, e, 101)]
        });
        assert_eq!(p.len(), 2);
        for q in p {
            assert!(
                matches!(&q.kind, ProblemKind::Unreadable { address, reason }
                    if *address == hole + 8 && reason.contains("protected")),
                "{model:?}: {q:?}"
            );
        }
    }
}

#[test]
fn string_unterminated_up_to_a_hole() {
    let mut at = 0;
    let (p, _) = problems_of("unterminated string", DataModel::LP64, |b| {
        at = b.alloc_with(vec![b'a'; 100]); // no NUL, then the gap before the next region
        let e = b.cstring("/bin/app");
        vec![entry(at, e, 100), entry(at, e, 101)]
    });
    assert!(
        matches!(&p[0].kind, ProblemKind::Unreadable { address, reason }
            if *address == at && reason.contains("short read")),
        "{p:?}"
    );
}

#[test]
fn one_mebibyte_string() {
    let mut at = 0;
    let (t, _) = starter(DataModel::LP64, 2, |b| {
        let mut s = vec![b'x'; 1 << 20];
        s.push(0);
        at = b.alloc_with(s);
        let e = b.cstring("/bin/app");
        vec![entry(at, e, 100), entry(at, e, 101)]
    });
    let (p, reads) = run_with("1 MiB string", SMALL, t, |t| {
        let table = read_proctable(&t, &ReadOptions::default()).unwrap();
        (table.resolved.problems, t.read_calls())
    });
    assert!(
        matches!(&p[0].kind, ProblemKind::Unreadable { address, reason }
            if *address == at && reason.contains("no NUL within 4096")),
        "{p:?}"
    );
    assert!(reads < 64, "bounded reads: {reads}");
}

#[test]
fn ten_thousand_entries_share_one_unreadable_string() {
    let (t, _) = starter(DataModel::LP64, 10_000, |b| {
        let hole = b.protected(64);
        let e = b.cstring("/bin/app");
        (0..10_000).map(|i| entry(hole, e, 100 + i)).collect()
    });
    let (problems, reads) = run_with("shared bad string", SMALL, t, |t| {
        let table = read_proctable(&t, &ReadOptions::default()).unwrap();
        (table.resolved.problems.len(), t.read_calls())
    });
    assert_eq!(problems, 10_000);
    assert!(reads <= 8, "the bad address is tried once: {reads} reads");
}

#[test]
fn pids_zero_and_negative() {
    let (p, n) = problems_of("bad pids", DataModel::LP64, |b| {
        let h = b.cstring("n");
        vec![entry(h, h, 0), entry(h, h, -1)]
    });
    assert_eq!(n, 2);
    let kinds: Vec<_> = p.into_iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [ProblemKind::InvalidPid(0), ProblemKind::InvalidPid(-1)]
    );
}

#[test]
fn debug_type_puts_the_pid_outside_the_entry() {
    let mut b = MockTarget::builder(DataModel::LP64);
    MockStarter::uniform(2, 1, "/x", 50).place(&mut b);
    b.type_layout(
        TypeLayout::new("MPIR_PROCDESC", 16, LayoutSource::Given)
            .with_member("host_name", 0, 8)
            .with_member("executable_name", 8, 8)
            .with_member("pid", 1 << 40, 4),
    );
    let e = run_with("pid outside", SMALL, b.build(), read).unwrap_err();
    assert!(
        matches!(&e, TargetError::Decode(DecodeError::InvalidLayout { type_name, .. }) if type_name.contains("MPIR_PROCDESC")),
        "{e}"
    );
}

#[test]
fn debug_type_of_size_zero() {
    let mut b = MockTarget::builder(DataModel::LP64);
    MockStarter::uniform(2, 1, "/x", 50).place(&mut b);
    b.type_layout(
        TypeLayout::new("MPIR_PROCDESC", 0, LayoutSource::Given)
            .with_member("host_name", 0, 8)
            .with_member("executable_name", 0, 8)
            .with_member("pid", 0, 4),
    );
    let e = run_with("size 0 type", SMALL, b.build(), read).unwrap_err();
    assert!(
        matches!(&e, TargetError::Decode(DecodeError::InvalidLayout { .. })),
        "{e}"
    );
}

#[test]
fn the_reader_never_writes() {
    // Whatever the table holds, reading it writes nothing into the starter.
    let (t, _) = starter(DataModel::LP64, 2, |b| {
        let hole = b.protected(16);
        vec![entry(hole, 0, -3), entry(0x10, hole, 0)]
    });
    let writes = run_with("no writes", SMALL, t, |t| {
        let _ = read_proctable(&t, &ReadOptions::default());
        t.writes().len()
    });
    assert_eq!(writes, 0);
}
