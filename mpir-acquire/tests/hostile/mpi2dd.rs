//! MPI2DD against hostile processes (MockTarget): a wrong header, tables whose sizes lie,
//! directories that list each other in cycles or themselves, floods of processes.

use mpi2dd::connect::{MapConnector, ProcessKey};
use mpi2dd::job::Problem;
use mpi2dd::mock::{MockDir, MockProcess, MockRank, PlacedProcess};
use mpi2dd::read::{EntryProblemKind, ReadOptions, TableKind, read_snapshot};
use mpi2dd::traverse::{TraverseError, TraverseOptions, traverse};
use mpir_target::mock::{Access, MockTargetBuilder};
use mpir_target::{Fault, MockTarget, TargetError};
use mpir_types::DataModel;

use super::harness::{SMALL, run_with};

/// One process laid out, `patch`ed with its placement known.
fn process(
    model: DataModel,
    p: &MockProcess,
    patch: impl FnOnce(&mut MockTargetBuilder, &PlacedProcess),
) -> (MockTarget, PlacedProcess) {
    let mut b = MockTarget::builder(model);
    let placed = p.place(&mut b);
    patch(&mut b, &placed);
    (b.build(), placed)
}

/// Writes `bytes` over member `$field` of the `MPI2DD_info` at `$info`.
macro_rules! poke {
    ($b:expr, $info:expr, $field:ident, $bytes:expr) => {{
        let b: &mut MockTargetBuilder = $b;
        let at = mpi2dd::abi_offset!(b.model(), Info.$field);
        let owned: Vec<u8> = $bytes.to_vec();
        b.write_with($info + at, owned.len() as u64, move |w| {
            w.put_bytes(0, &owned, "patch")
        });
    }};
}

/// Sets the 4-byte integer member `$field` of the `MPI2DD_info` at `$info`.
macro_rules! set_int {
    ($b:expr, $info:expr, $field:ident, $value:expr) => {{
        let b: &mut MockTargetBuilder = $b;
        let at = mpi2dd::abi_offset!(b.model(), Info.$field);
        b.write_with($info + at, 4, |w| {
            w.put_int(0, 4, $value, stringify!($field))
        });
    }};
}

/// Sets the address member `$field` of the `MPI2DD_info` at `$info`.
macro_rules! set_pointer {
    ($b:expr, $info:expr, $field:ident, $value:expr) => {{
        let b: &mut MockTargetBuilder = $b;
        let model = b.model();
        let at = mpi2dd::abi_offset!(model, Info.$field);
        b.write_with($info + at, model.pointer_size(), |w| {
            w.put_pointer(0, $value, stringify!($field))
        });
    }};
}

fn directory() -> MockProcess {
    let mut d = MockProcess::directory("m", 1);
    d.proctable = vec![
        MockRank::new("h", "/bin/app", "w0", 100, 0),
        MockRank::new("h", "/bin/app", "w0", 101, 1),
    ];
    d
}

fn snapshot(t: MockTarget) -> Result<mpi2dd::read::Snapshot, mpi2dd::Error> {
    read_snapshot(&t, &ReadOptions::default())
}

#[test]
fn wrong_magic() {
    let (t, placed) = process(DataModel::LP64, &directory(), |b, p| {
        poke!(b, p.info, magic, b"MPI3\x7f")
    });
    let e = run_with("wrong magic", SMALL, t, snapshot).unwrap_err();
    assert_eq!(
        e,
        mpi2dd::Error::BadMagic {
            address: placed.info,
            found: *b"MPI3\x7f"
        }
    );
}

#[test]
fn wrong_version() {
    let (t, placed) = process(DataModel::ILP32_BE, &directory(), |b, p| {
        poke!(b, p.info, version, &[2])
    });
    let e = run_with("wrong version", SMALL, t, snapshot).unwrap_err();
    assert_eq!(
        e,
        mpi2dd::Error::UnsupportedVersion {
            address: placed.info,
            found: 2
        }
    );
}

#[test]
fn wrong_variant() {
    let (t, placed) = process(DataModel::LP64_BE, &directory(), |b, p| {
        poke!(b, p.info, variant, &[0xff])
    });
    let e = run_with("wrong variant", SMALL, t, snapshot).unwrap_err();
    assert_eq!(
        e,
        mpi2dd::Error::UnsupportedVariant {
            address: placed.info,
            found: 0xff
        }
    );
}

#[test]
fn info_symbol_in_a_prot_none_page() {
    let (t, placed) = process(DataModel::LP64, &directory(), |b, p| {
        b.set_access(p.info, Access::NONE);
    });
    let e = run_with("unreadable MPI2DD_info", SMALL, t, snapshot).unwrap_err();
    assert!(
        matches!(e, mpi2dd::Error::Target(TargetError::Unreadable { address, fault: Fault::Protected, .. }) if address == placed.info),
        "{e}"
    );
}

#[test]
fn a_null_proctable_with_entries() {
    let (t, placed) = process(DataModel::LP64, &directory(), |b, p| {
        set_pointer!(b, p.info, proctable, 0)
    });
    let snap = run_with("NULL proctable", SMALL, t, snapshot).unwrap();
    assert!(snap.proctable.is_empty());
    assert_eq!(
        snap.table_errors,
        [(
            TableKind::Proctable,
            mpi2dd::Error::NullTable {
                table: "proctable",
                size: 2,
                info: placed.info
            }
        )]
    );
}

#[test]
fn a_proctable_count_of_millions_where_two_entries_are_mapped() {
    // Under the default bound (2^22 entries), so accepted as a size: the read must cost what
    // is mapped, not what is claimed (160 MiB on 64-bit).
    let (t, placed) = process(DataModel::LP64, &directory(), |b, p| {
        set_int!(b, p.info, proctable_size, (1 << 22) - 1)
    });
    let snap = run_with("huge proctable count", SMALL, t, snapshot).unwrap();
    assert!(snap.proctable.is_empty());
    let [(TableKind::Proctable, e)] = snap.table_errors.as_slice() else {
        panic!("{:?}", snap.table_errors)
    };
    assert!(
        matches!(e, mpi2dd::Error::Target(TargetError::ShortRead { address, fault: Fault::Unmapped, .. }) if *address == placed.proctable),
        "{e}"
    );
}

#[test]
fn a_negative_directory_size() {
    let (t, _) = process(DataModel::ILP32, &directory(), |b, p| {
        set_int!(b, p.info, directory_size, i64::from(i32::MIN))
    });
    let snap = run_with("negative directory size", SMALL, t, snapshot).unwrap();
    let [(TableKind::DirectoryTable, e)] = snap.table_errors.as_slice() else {
        panic!("{:?}", snap.table_errors)
    };
    assert!(
        matches!(e, mpi2dd::Error::Decode(mpir_types::DecodeError::Negative { what, .. }) if what.contains("directory_size")),
        "{e}"
    );
    assert_eq!(snap.proctable.len(), 2, "the other tables are read");
}

#[test]
fn strings_unterminated_into_a_hole() {
    let mut d = directory();
    d.proctable[1].host = "h".repeat(200);
    let (t, _) = process(DataModel::LP64, &d, |_, _| {});
    let snap = run_with("unterminated MPI2DD strings", SMALL, t, |t| {
        read_snapshot(&t, &ReadOptions::default().with_max_string(64))
    })
    .unwrap();
    assert_eq!(snap.proctable.len(), 1);
    assert!(
        matches!(
            &snap.problems[0].kind,
            EntryProblemKind::UnreadableString { reason, .. } if reason.contains("no NUL within 64")
        ),
        "{:?}",
        snap.problems
    );
}

/// A connector of metadirectories `m0..mN` on host `meta`, each listing the next (the last
/// listing the first): a ring, walked from `m0`.
fn ring(n: i32) -> MapConnector<MockTarget> {
    let mut c = MapConnector::new();
    for i in 0..n {
        let mut m = MockProcess::metadirectory("meta", 10 + i);
        m.metadirectories = vec![MockDir::new("meta", "/mpi/meta", 10 + (i + 1) % n)];
        m.directories = vec![MockDir::new("dirs", "/mpi/dir", 100 + i)];
        let mut b = MockTarget::builder(DataModel::LP64);
        m.place(&mut b);
        c.insert("meta", 10 + i, b.build());
        let mut d = MockProcess::directory("meta", 10 + i);
        d.proctable = vec![MockRank::new("h", "/bin/app", "w0", 1000 + i, i)];
        let mut b = MockTarget::builder(DataModel::LP64);
        d.place(&mut b);
        c.insert("dirs", 100 + i, b.build());
    }
    c
}

#[test]
fn metadirectories_listing_each_other_in_a_ring() {
    let c = ring(50);
    let job = run_with("metadirectory ring", SMALL, c, |c| {
        traverse(&c, "meta", 10, &TraverseOptions::default())
    })
    .unwrap()
    .job;
    assert_eq!(job.processes.len(), 100, "each read once");
    assert_eq!(job.worlds[0].ranks.len(), 50);
    assert!(job.problems.is_empty(), "{:?}", job.problems);
}

#[test]
fn a_directory_lists_itself_and_its_lister() {
    let mut c = MapConnector::new();
    let mut m = MockProcess::metadirectory("meta", 10);
    m.directories = vec![MockDir::new("d", "/mpi/dir", 20)];
    let mut d = directory();
    d.meta_host = Some("meta".into());
    d.meta_pid = 10;
    // Itself as a directory, and the metadirectory as a directory too.
    d.directories = vec![
        MockDir::new("d", "/mpi/dir", 20),
        MockDir::new("meta", "/mpi/meta", 10),
    ];
    for (h, p, proc_) in [("meta", 10, m), ("d", 20, d)] {
        let mut b = MockTarget::builder(DataModel::LP64);
        proc_.place(&mut b);
        c.insert(h, p, b.build());
    }
    let job = run_with("self-listing directory", SMALL, c, |c| {
        traverse(&c, "d", 20, &TraverseOptions::default())
    })
    .unwrap()
    .job;
    assert!(
        job.problems.contains(&Problem::ListsItself {
            process: ProcessKey::new("d", 20),
            table: TableKind::DirectoryTable
        }),
        "{:?}",
        job.problems
    );
    assert_eq!(job.processes.len(), 2);
}

#[test]
fn a_flood_of_listed_processes() {
    let mut m = MockProcess::metadirectory("meta", 10);
    m.directories = (1..=60_000)
        .map(|p| MockDir::new("flood", "/x", p))
        .collect();
    let mut b = MockTarget::builder(DataModel::LP64);
    m.place(&mut b);
    let mut c = MapConnector::new();
    c.insert("meta", 10, b.build());
    let opts = TraverseOptions::default().with_max_processes(64);
    // The metadirectory's own table (60,000 entries, under the 2^16 bound) is kept whole in
    // its snapshot; what the bound on processes cuts is everything beyond it.
    let bounds = super::harness::Bounds {
        bytes: 16 << 20,
        ..SMALL
    };
    let job = run_with("flood", bounds, c, move |c| traverse(&c, "meta", 10, &opts))
        .unwrap()
        .job;
    assert!(
        job.problems.iter().any(|p| matches!(
            p,
            Problem::LimitReached {
                limit: "max_processes",
                value: 64,
                ..
            }
        )),
        "{:?}",
        job.problems
    );
    assert!(job.unreachable.len() <= 64);
}

#[test]
fn spawn_descriptors_in_a_cycle() {
    let mut d = directory();
    d.proctable = vec![
        MockRank::new("h", "/a", "wa", 1, 0).spawned("wb", 0, 0),
        MockRank::new("h", "/b", "wb", 2, 0).spawned("wa", 0, 0),
    ];
    d.meta_host = None;
    let mut b = MockTarget::builder(DataModel::ILP32_BE);
    d.place(&mut b);
    let mut c = MapConnector::new();
    c.insert("d", 5, b.build());
    let job = run_with("spawn cycle", SMALL, c, |c| {
        traverse(&c, "d", 5, &TraverseOptions::default())
    })
    .unwrap()
    .job;
    let cycles: Vec<_> = job
        .problems
        .iter()
        .filter(|p| matches!(p, Problem::SpawnCycle { .. }))
        .collect();
    assert_eq!(cycles.len(), 2, "{:?}", job.problems);
    assert_eq!(job.roots.len(), 2, "both made roots");
}

#[test]
fn the_entry_process_is_not_an_mpi2dd_process() {
    let mut c = MapConnector::new();
    c.insert("x", 1, MockTarget::builder(DataModel::LP64).build());
    let e = run_with("no MPI2DD_info", SMALL, c, |c| {
        traverse(&c, "x", 1, &TraverseOptions::default())
    })
    .unwrap_err();
    assert!(
        matches!(&e, TraverseError::Read { process, error: mpi2dd::Error::NotProvided } if *process == ProcessKey::new("x", 1)),
        "{e}"
    );
}
