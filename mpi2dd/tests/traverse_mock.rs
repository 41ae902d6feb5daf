//! Traversal over mock processes: one job with two metadirectories (listing each other), three
//! directories and three worlds (two spawned) is found whole from every kind of entry process,
//! in all four data models; and hostile tables give typed problems, never a hang.

use std::sync::Arc;

use mpi2dd::abi_offset;
use mpi2dd::connect::{ConnectError, MapConnector, ProcessKey};
use mpi2dd::job::{Problem, Role, UnreachedReason};
use mpi2dd::mock::{MockDir, MockProcess, MockRank};
use mpi2dd::read::{EntryProblemKind, TableKind};
use mpi2dd::traverse::{TraverseError, TraverseOptions, traverse};
use mpi2dd::{Error, flags::MpiFlags};
use mpir_target::MockTarget;
use mpir_target::mock::MockTargetBuilder;
use mpir_types::DataModel;

const MODELS: [DataModel; 4] = [
    DataModel::LP64,
    DataModel::ILP32,
    DataModel::LP64_BE,
    DataModel::ILP32_BE,
];

const EXE: &str = "/opt/app/solver";

/// (host, pid, process) for every process of the reference mock job.
fn job_processes() -> Vec<(&'static str, i32, MockProcess)> {
    let mut m1 = MockProcess::metadirectory("m1", 10);
    m1.meta_executable = Some("/mpi/meta".into());
    m1.directories = vec![
        MockDir::new("h1", "/mpi/dir", 11),
        MockDir::new("h2", "/mpi/dir", 12),
    ];
    m1.metadirectories = vec![MockDir::new("m2", "/mpi/meta", 20)];
    let mut m2 = MockProcess::metadirectory("m2", 20);
    m2.meta_executable = Some("/mpi/meta".into());
    m2.metadirectories = vec![MockDir::new("m1", "/mpi/meta", 10)];
    m2.directories = vec![
        MockDir::new("h3", "/mpi/dir", 13),
        MockDir::new("h2", "/mpi/dir", 12),
    ];
    let mut d1 = MockProcess::directory("m1", 10);
    d1.proctable = vec![
        MockRank::new("h1", EXE, "w0", 100, 0),
        MockRank::new("h1", EXE, "w0", 101, 1),
    ];
    let mut d2 = MockProcess::directory("m1", 10);
    d2.proctable = vec![
        MockRank::new("h2", EXE, "w0", 102, 2),
        MockRank::new("h2", EXE, "w0", 103, 3),
        MockRank::new("h2", "/opt/app/child", "w1", 200, 0).spawned("w0", 1, 0),
        MockRank::new("h2", "/opt/app/child", "w1", 201, 1).spawned("w0", 1, 0),
        // Listed twice (also by d1's peer d3 below): deduplicated.
        MockRank::new("h1", EXE, "w0", 101, 1),
    ];
    let mut d3 = MockProcess::directory("m2", 20);
    d3.proctable = vec![
        MockRank::new("h3", "/opt/app/grandchild", "w2", 300, 0).spawned("w1", 0, 0),
        MockRank::new("h3", "/opt/app/other", "w3", 301, 0).spawned("w0", 1, 1),
    ];
    let rank = MockProcess::rank("m1", 10);
    vec![
        ("m1", 10, m1),
        ("m2", 20, m2),
        ("h1", 11, d1),
        ("h2", 12, d2),
        ("h3", 13, d3),
        ("h1", 100, rank.clone()),
        ("h3", 300, MockProcess::rank("m2", 20)),
    ]
}

fn connector(
    model: DataModel,
    processes: &[(&str, i32, MockProcess)],
    patch: impl Fn(&str, i32, &mut MockTargetBuilder, &mpi2dd::mock::PlacedProcess),
) -> MapConnector<MockTarget> {
    let mut c = MapConnector::new();
    for (host, pid, p) in processes {
        let mut b = MockTarget::builder(model);
        let placed = p.place(&mut b);
        patch(host, *pid, &mut b, &placed);
        c.insert(host, *pid, b.build());
    }
    c
}

fn key(h: &str, p: i32) -> ProcessKey {
    ProcessKey::new(h, p)
}

#[test]
fn the_same_job_from_every_kind_of_entry_in_four_models() {
    for model in MODELS {
        let c = connector(model, &job_processes(), |_, _, _, _| {});
        let opts = TraverseOptions::default();
        let from_meta = traverse(&c, "m1", 10, &opts).unwrap();
        let job = &from_meta.job;
        assert!(job.problems.is_empty(), "{model}: {:?}", job.problems);
        assert!(job.unreachable.is_empty(), "{model}: {:?}", job.unreachable);
        assert_eq!(job.metadirectory, Some(key("m1", 10)));
        let procs: Vec<_> = job.processes.iter().map(|p| p.process.clone()).collect();
        assert_eq!(
            procs,
            [
                key("h1", 11),
                key("h2", 12),
                key("h3", 13),
                key("m1", 10),
                key("m2", 20)
            ]
        );
        let h2 = &job.processes[1];
        assert_eq!(h2.listed_by, [key("m1", 10), key("m2", 20)].into());
        assert_eq!(h2.listed_as, [Role::Directory].into());
        assert_eq!(h2.proctable_entries, 5);
        assert_eq!(h2.mpi_flags, MpiFlags::I_AM_DIR);
        assert_eq!(job.processes[4].listed_by, [key("m1", 10)].into());

        let ids: Vec<&str> = job.worlds.iter().map(|w| &*w.id).collect();
        assert_eq!(ids, ["w0", "w1", "w2", "w3"]);
        let w0 = job.world("w0").unwrap();
        let pids: Vec<i32> = w0.ranks.iter().map(|r| r.process.pid).collect();
        assert_eq!(pids, [100, 101, 102, 103]);
        assert_eq!(w0.ranks[1].listed_by, [key("h1", 11), key("h2", 12)].into());
        assert_eq!(w0.ranks[0].executable.as_deref(), Some(EXE));
        assert!(w0.spawned_by.is_none());
        let w1 = job.world("w1").unwrap();
        let s = w1.spawned_by.as_ref().unwrap();
        assert_eq!(
            (&*s.parent_comm_world_id, s.parent_rank, s.sequence),
            ("w0", 1, 0)
        );
        assert_eq!(job.roots, [Arc::<str>::from("w0")]);
        let edges: Vec<_> = job
            .spawns
            .iter()
            .map(|e| (&*e.parent_world, e.parent_rank, e.sequence, &*e.child_world))
            .collect();
        assert_eq!(
            edges,
            [("w0", 1, 0, "w1"), ("w0", 1, 1, "w3"), ("w1", 0, 0, "w2")]
        );
        assert_eq!(job.children("w0").count(), 2);

        // Entries under m2 (m2 itself, d3, w2's rank) find m2 as their metadirectory; the
        // rest of the job is identical.
        for (h, p, meta) in [
            ("m2", 20, key("m2", 20)),
            ("h1", 11, key("m1", 10)),
            ("h3", 13, key("m2", 20)),
            ("h1", 100, key("m1", 10)),
            ("h3", 300, key("m2", 20)),
        ] {
            let t = traverse(&c, h, p, &opts).unwrap();
            assert_eq!(t.entry, key(h, p));
            assert_eq!(t.job.metadirectory, Some(meta), "{model}: from {h}:{p}");
            let mut j = t.job.clone();
            j.metadirectory = job.metadirectory.clone();
            assert_eq!(j, *job, "{model}: from {h}:{p}");
        }
        for (_, t) in c.targets() {
            assert!(t.writes().is_empty(), "traversal wrote");
        }
    }
}

#[test]
fn a_process_listing_itself_is_a_problem_not_a_loop() {
    let mut procs = job_processes();
    // m1 lists itself in both tables; d1 lists itself as a directory.
    procs[0]
        .2
        .directories
        .push(MockDir::new("m1", "/mpi/meta", 10));
    procs[0]
        .2
        .metadirectories
        .push(MockDir::new("m1", "/mpi/meta", 10));
    procs[2]
        .2
        .directories
        .push(MockDir::new("h1", "/mpi/dir", 11));
    let c = connector(DataModel::LP64, &procs, |_, _, _, _| {});
    let job = traverse(&c, "h1", 100, &TraverseOptions::default())
        .unwrap()
        .job;
    assert_eq!(
        job.problems,
        [
            Problem::ListsItself {
                process: key("h1", 11),
                table: TableKind::DirectoryTable
            },
            Problem::ListsItself {
                process: key("m1", 10),
                table: TableKind::DirectoryTable
            },
            Problem::ListsItself {
                process: key("m1", 10),
                table: TableKind::MetadirectoryTable
            },
        ]
    );
    assert_eq!(job.worlds.len(), 4, "the rest of the job is intact");
}

#[test]
fn unreachable_and_invalid_directories_are_listed_with_their_listers() {
    let mut procs = job_processes();
    procs[0]
        .2
        .directories
        .push(MockDir::new("far.away", "/mpi/dir", 77));
    procs[0]
        .2
        .directories
        .push(MockDir::new("h1", "/mpi/dir", 78)); // no such pid on h1
    // d3 (h3:13) has a corrupt magic.
    let c = connector(DataModel::ILP32_BE, &procs, |h, p, b, placed| {
        if (h, p) == ("h3", 13) {
            b.write_with(placed.info + 3, 1, |w| w.put_bytes(0, b"3", "magic"));
        }
    });
    let job = traverse(&c, "m1", 10, &TraverseOptions::default())
        .unwrap()
        .job;
    let un: Vec<_> = job
        .unreachable
        .iter()
        .map(|u| (u.process.clone(), u.listed_by.clone(), u.reason.clone()))
        .collect();
    assert_eq!(un.len(), 3, "{un:?}");
    assert_eq!(un[0].0, key("far.away", 77));
    assert_eq!(un[0].1, [key("m1", 10)].into());
    assert!(
        matches!(&un[0].2, UnreachedReason::Connect(ConnectError::Remote { host }) if host == "far.away")
    );
    assert_eq!(un[1].0, key("h1", 78));
    assert!(matches!(
        &un[1].2,
        UnreachedReason::Connect(ConnectError::NoSuchProcess { pid: 78, .. })
    ));
    assert_eq!(un[2].0, key("h3", 13));
    assert_eq!(un[2].1, [key("m2", 20)].into());
    assert!(matches!(
        &un[2].2,
        UnreachedReason::Read(Error::BadMagic { found, .. }) if found == b"MPI3\x7f"
    ));
    // w2 and w3 lived only in h3:13's table; w0 and w1 are complete.
    let ids: Vec<&str> = job.worlds.iter().map(|w| &*w.id).collect();
    assert_eq!(ids, ["w0", "w1"]);
}

#[test]
fn an_invalid_entry_is_an_error() {
    let procs = job_processes();
    let c = connector(DataModel::LP64, &procs, |h, _, b, placed| {
        if h == "m1" {
            b.write_with(placed.info + 5, 2, |w| w.put_bytes(0, &[1, 2], "variant"));
        }
        if h == "m2" {
            b.write_with(placed.info + 5, 1, |w| w.put_bytes(0, &[0], "version"));
        }
    });
    let e = traverse(&c, "m1", 10, &TraverseOptions::default()).unwrap_err();
    assert!(matches!(
        e,
        TraverseError::Read {
            error: Error::UnsupportedVariant { found: 2, .. },
            ..
        }
    ));
    let e = traverse(&c, "m2", 20, &TraverseOptions::default()).unwrap_err();
    assert!(matches!(
        e,
        TraverseError::Read {
            error: Error::UnsupportedVersion { found: 0, .. },
            ..
        }
    ));
    let e = traverse(&c, "nowhere", 1, &TraverseOptions::default()).unwrap_err();
    assert!(matches!(
        e,
        TraverseError::Connect(ConnectError::Remote { .. })
    ));
    // From a rank, the metadirectory with a bad variant is unreachable, not fatal.
    let job = traverse(&c, "h1", 100, &TraverseOptions::default())
        .unwrap()
        .job;
    assert_eq!(job.unreachable[0].process, key("m1", 10));
    assert!(job.worlds.is_empty());
}

/// Sets the size member `$field` of the `MPI2DD_info` at `$info` to `$value`.
macro_rules! set_size {
    ($b:expr, $info:expr, $field:ident, $value:expr) => {{
        let b: &mut MockTargetBuilder = $b;
        let at = mpi2dd::abi_offset!(b.model(), Info.$field);
        b.write_with($info + at, 4, |w| {
            w.put_int(0, 4, $value, stringify!($field))
        });
    }};
}

#[test]
fn hostile_table_sizes_are_refused_per_table() {
    for model in MODELS {
        let procs = job_processes();
        let c = connector(model, &procs, |h, _, b, placed| match h {
            "h1" => set_size!(b, placed.info, proctable_size, i64::from(i32::MAX)),
            "h2" => set_size!(b, placed.info, proctable_size, -3),
            "m2" => {
                // A directory table that would run past the end of the address space.
                let model = b.model();
                let at = model.max_address() - 100;
                b.write_with(
                    placed.info + abi_offset!(model, Info.directory_table),
                    model.pointer_size(),
                    |w| w.put_pointer(0, at, "directory_table"),
                );
                set_size!(b, placed.info, directory_size, 1000);
                // And a NULL metadirectory table with a size.
                b.write_with(
                    placed.info + abi_offset!(model, Info.metadirectory_table),
                    model.pointer_size(),
                    |w| w.put_pointer(0, 0, "metadirectory_table"),
                );
            }
            _ => {}
        });
        let job = traverse(&c, "m1", 10, &TraverseOptions::default())
            .unwrap()
            .job;
        let tables: Vec<_> = job
            .problems
            .iter()
            .filter_map(|p| match p {
                Problem::Table {
                    process,
                    table,
                    error,
                } => Some((process.clone(), *table, error.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(tables.len(), 4, "{model}: {:?}", job.problems);
        assert_eq!(tables[0].0, key("h1", 11));
        assert!(tables[0].2.contains("above the limit"), "{}", tables[0].2);
        assert_eq!(tables[1].0, key("h2", 12));
        assert!(tables[1].2.contains("negative"), "{}", tables[1].2);
        assert_eq!(
            (tables[2].0.clone(), tables[2].1),
            (key("m2", 20), TableKind::DirectoryTable)
        );
        assert!(tables[2].2.contains("overflow"), "{model}: {}", tables[2].2);
        assert_eq!(tables[3].1, TableKind::MetadirectoryTable);
        assert!(tables[3].2.contains("NULL"), "{}", tables[3].2);
        // d3 was listed only by m2's (refused) directory table.
        let ids: Vec<&str> = job.worlds.iter().map(|w| &*w.id).collect();
        assert!(ids.is_empty(), "{model}: {ids:?}");
    }
}

#[test]
fn bad_strings_and_pids_drop_only_their_entry() {
    let mut procs = job_processes();
    procs[2]
        .2
        .proctable
        .push(MockRank::new("h1", EXE, "w0", -5, 9));
    procs[2]
        .2
        .proctable
        .push(MockRank::new("h1", EXE, "w0", 104, -1));
    let c = connector(DataModel::LP64_BE, &procs, |h, p, b, placed| {
        if (h, p) == ("h1", 11) {
            // Entry 0's host_name: unmapped. Entry 1's comm_world_id: an unterminated string.
            b.write_with(placed.proctable, 8, |w| {
                w.put_pointer(0, 0xdead_0000, "host")
            });
            let junk = b.alloc_with(vec![b'x'; 64]);
            b.write_with(placed.proctable + 40 + 24, 8, |w| {
                w.put_pointer(0, junk, "cw")
            });
        }
    });
    let mut opts = TraverseOptions::default();
    opts.read.max_string = 32;
    let job = traverse(&c, "m1", 10, &opts).unwrap().job;
    let kinds: Vec<_> = job
        .problems
        .iter()
        .map(|p| match p {
            Problem::Entry { process, problem } => {
                assert_eq!(*process, key("h1", 11));
                (problem.index, problem.kind.clone())
            }
            p => panic!("unexpected {p:?}"),
        })
        .collect();
    assert_eq!(kinds.len(), 4, "{kinds:?}");
    assert!(matches!(
        &kinds[0],
        (
            0,
            EntryProblemKind::UnreadableString {
                field: "MPI2DD_PROCDESC.host_name",
                address: 0xdead_0000,
                ..
            }
        )
    ));
    assert!(
        matches!(&kinds[1], (1, EntryProblemKind::UnreadableString { field: "MPI2DD_PROCDESC.comm_world_id", reason, .. }) if reason.contains("unterminated"))
    );
    assert_eq!(kinds[2], (2, EntryProblemKind::InvalidPid(-5)));
    assert_eq!(kinds[3], (3, EntryProblemKind::InvalidRank(-1)));
    // Rank 1 is still known through d2's listing.
    let w0 = job.world("w0").unwrap();
    let ranks: Vec<i32> = w0.ranks.iter().map(|r| r.rank).collect();
    assert_eq!(ranks, [1, 2, 3]);
}

#[test]
fn conflicting_ranks_and_spawn_cycles_are_reported() {
    let mut procs = job_processes();
    // d3 claims w0 rank 0 is another process, and w4/w5 spawn each other.
    procs[4].2.proctable.extend([
        MockRank::new("h3", EXE, "w0", 999, 0),
        MockRank::new("h3", EXE, "w4", 400, 0).spawned("w5", 0, 0),
        MockRank::new("h3", EXE, "w5", 500, 0).spawned("w4", 0, 0),
        MockRank::new("h3", EXE, "w6", 600, 0).spawned("w-unknown", 3, 0),
    ]);
    let c = connector(DataModel::ILP32, &procs, |_, _, _, _| {});
    let job = traverse(&c, "m1", 10, &TraverseOptions::default())
        .unwrap()
        .job;
    let w = |s: &str| Arc::<str>::from(s);
    assert_eq!(
        job.problems,
        [
            Problem::ConflictingRank {
                world: w("w0"),
                rank: 0,
                kept: key("h1", 100),
                other: key("h3", 999)
            },
            Problem::UnknownParentWorld {
                world: w("w6"),
                parent: w("w-unknown")
            },
            Problem::SpawnCycle { world: w("w4") },
            Problem::SpawnCycle { world: w("w5") },
        ]
    );
    assert_eq!(job.roots, [w("w0"), w("w4"), w("w5"), w("w6")]);
}

#[test]
fn a_flood_of_listed_processes_is_bounded() {
    let mut m = MockProcess::metadirectory("m1", 10);
    m.directories = (1..=5000).map(|p| MockDir::new("flood", "/x", p)).collect();
    // Two metadirectories listing each other plus the flood.
    let mut m2 = m.clone();
    m2.meta_host = Some("m2".into());
    m2.meta_pid = 20;
    m.metadirectories = vec![MockDir::new("m2", "/mpi/meta", 20)];
    m2.metadirectories = vec![MockDir::new("m1", "/mpi/meta", 10)];
    let procs = vec![("m1", 10, m), ("m2", 20, m2)];
    let c = connector(DataModel::LP64, &procs, |_, _, _, _| {});
    let opts = TraverseOptions::default().with_max_processes(100);
    let job = traverse(&c, "m1", 10, &opts).unwrap().job;
    assert_eq!(job.processes.len(), 2);
    assert_eq!(job.unreachable.len(), 98);
    assert_eq!(
        job.problems,
        [Problem::LimitReached {
            limit: "max_processes",
            value: 100,
            // m1 and m2 each list flood 99..=5000 beyond the bound.
            dropped: 2 * 4902,
        }]
    );
}

#[test]
fn a_huge_directory_table_is_refused_before_reading() {
    let mut m = MockProcess::metadirectory("m1", 10);
    m.directories = vec![MockDir::new("h", "/x", 1)];
    let c = connector(DataModel::LP64, &[("m1", 10, m)], |_, _, b, placed| {
        set_size!(b, placed.info, directory_size, 1 << 20);
    });
    let job = traverse(&c, "m1", 10, &TraverseOptions::default())
        .unwrap()
        .job;
    assert!(matches!(
        &job.problems[..],
        [Problem::Table { table: TableKind::DirectoryTable, error, .. }] if error.contains("above the limit of 65536")
    ));
}
