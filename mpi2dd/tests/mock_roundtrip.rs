//! Decoders round-trip in the four endian × width combinations: a process laid out in a
//! MockTarget (LP64, ILP32, LP64_BE, ILP32_BE) reads back as it was described, every member of
//! every struct, and reading writes nothing.

use mpi2dd::abi::{info_size, procdesc_size};
use mpi2dd::abi_offset;
use mpi2dd::decode::{Info, decode_info, encode_info};
use mpi2dd::flags::{DebugState, DebuggerFlags, MpiFlags};
use mpi2dd::mock::{MockDir, MockProcess, MockRank};
use mpi2dd::read::{ReadOptions, read_abort_string, read_snapshot};
use mpir_target::{MemoryExt, MockTarget};
use mpir_types::DataModel;
use proptest::prelude::*;

const MODELS: [DataModel; 4] = [
    DataModel::LP64,
    DataModel::ILP32,
    DataModel::LP64_BE,
    DataModel::ILP32_BE,
];

/// A metadirectory that is also a directory, with both tables and a proctable holding a
/// starter-created world and a spawned one.
fn everything() -> MockProcess {
    let mut p = MockProcess::metadirectory("meta.example.org", 77);
    p.mpi_flags = MpiFlags::I_AM_METADIR | MpiFlags::I_AM_DIR | MpiFlags::PARTIAL_ATTACH_OK;
    p.debugger_flags = DebuggerFlags::REQUEST_DIRECTORY_EVENTS;
    p.debug_state = DebugState::Abort;
    p.abort = Some("rank 3 called MPI_Abort(17)".into());
    p.meta_executable = Some("/opt/mpi/bin/meta".into());
    p.proctable = vec![
        MockRank::new("n1", "/bin/a", "w0", 1001, 0),
        MockRank::new("n2", "/bin/a", "w0", 1002, 1),
        MockRank::new("n2", "/bin/child", "w0.1", 0x7fff_fff0, 0).spawned("w0", 1, 0),
        MockRank::new("fe80::1", "/bin/child", "w0.1", 2, 1).spawned("w0", 1, 0),
        MockRank::new("10.0.0.3", "/bin/other", "w0.2", 3, 0).spawned("w0", 1, 1),
    ];
    p.directories = vec![
        MockDir::new("n1", "/opt/mpi/bin/dir", 500),
        MockDir::new("n2", "/opt/mpi/bin/dir", i32::MAX),
    ];
    p.metadirectories = vec![MockDir::new("meta2", "/opt/mpi/bin/meta", 78)];
    p
}

fn check_roundtrip(model: DataModel, p: &MockProcess) {
    let mut b = MockTarget::builder(model);
    let placed = p.place(&mut b);
    let t = b.build();
    let snap = read_snapshot(&t, &ReadOptions::default()).unwrap();
    assert_eq!(snap.info_address, placed.info);
    assert!(snap.problems.is_empty(), "{model}: {:?}", snap.problems);
    assert!(
        snap.table_errors.is_empty(),
        "{model}: {:?}",
        snap.table_errors
    );
    assert!(!snap.unstable);
    let i = &snap.info;
    assert_eq!(i.debug_state, p.debug_state, "{model}");
    assert_eq!(i.debugger_flags, p.debugger_flags, "{model}");
    assert_eq!(i.mpi_flags, p.mpi_flags, "{model}");
    assert_eq!(i.meta_pid, p.meta_pid, "{model}");
    assert_eq!(snap.meta_host.as_deref(), p.meta_host.as_deref(), "{model}");
    assert_eq!(
        snap.meta_executable.as_deref(),
        p.meta_executable.as_deref()
    );
    assert_eq!(i.proctable, placed.proctable);
    assert_eq!(i.directory_table, placed.directory_table);
    assert_eq!(i.metadirectory_table, placed.metadirectory_table);
    assert_eq!(i.proctable_size as usize, p.proctable.len());
    assert_eq!(
        read_abort_string(&t, i, 4096).unwrap().as_deref(),
        p.abort.as_deref()
    );

    assert_eq!(snap.proctable.len(), p.proctable.len(), "{model}");
    for (got, want) in snap.proctable.iter().zip(&p.proctable) {
        assert_eq!(&*got.host, want.host, "{model}");
        assert_eq!(got.executable.as_deref(), Some(&*want.executable));
        assert_eq!(&*got.comm_world_id, want.comm_world_id);
        assert_eq!(got.pid, want.pid);
        assert_eq!(got.rank, want.rank);
        match (&got.spawn, &want.spawn) {
            (None, None) => {}
            (Some(g), Some(w)) => {
                assert_eq!(&*g.parent_comm_world_id, w.parent_comm_world_id);
                assert_eq!(g.parent_rank, w.parent_rank);
                assert_eq!(g.sequence, w.sequence);
            }
            (g, w) => panic!("{model}: spawn {g:?} vs {w:?}"),
        }
    }
    for (got, want) in [
        (&snap.directories, &p.directories),
        (&snap.metadirectories, &p.metadirectories),
    ] {
        assert_eq!(got.len(), want.len(), "{model}");
        for (g, w) in got.iter().zip(want) {
            assert_eq!(&*g.host, w.host);
            assert_eq!(g.executable.as_deref(), Some(&*w.executable));
            assert_eq!(g.pid, w.pid);
        }
    }
    assert!(t.writes().is_empty(), "reading wrote: {:?}", t.writes());
}

#[test]
fn every_member_roundtrips_in_four_models() {
    for model in MODELS {
        check_roundtrip(model, &everything());
    }
}

#[test]
fn a_plain_rank_has_no_tables() {
    for model in MODELS {
        let p = MockProcess::rank("meta", 42);
        check_roundtrip(model, &p);
        let mut b = MockTarget::builder(model);
        let placed = p.place(&mut b);
        assert_eq!(
            (
                placed.proctable,
                placed.directory_table,
                placed.metadirectory_table
            ),
            (0, 0, 0)
        );
    }
}

/// The bytes in target memory are where the draft puts them, checked with plain reads at the
/// computed offsets (not with the decoder), in both byte orders.
#[test]
fn bytes_are_where_the_draft_puts_them() {
    for model in MODELS {
        let mut b = MockTarget::builder(model);
        let placed = everything().place(&mut b);
        let t = b.build();
        assert_eq!(t.read_vec(placed.info, 5).unwrap(), b"MPI2\x7f");
        assert_eq!(t.read_vec(placed.info + 5, 3).unwrap(), [1, 1, 8]);
        let meta_pid = t
            .read_int(
                placed.info + abi_offset!(model, Info.meta_pid),
                4,
                "meta_pid",
            )
            .unwrap();
        assert_eq!(meta_pid, 77);
        // Entry 2's pid, then its rank right after (packed).
        let pid_at = abi_offset!(model, ProcDesc.pid);
        let e2 = placed.proctable + 2 * procdesc_size(&model);
        assert_eq!(t.read_int(e2 + pid_at, 4, "pid").unwrap(), 0x7fff_fff0);
        assert_eq!(t.read_int(e2 + pid_at + 4, 4, "rank").unwrap(), 0);
        let ptr = model.pointer_size();
        assert_eq!(pid_at, 4 * ptr);
        assert_eq!(abi_offset!(model, Info.meta_pid), 8 + 8 + 8 * ptr + 12);
    }
}

fn arb_info() -> impl Strategy<Value = Info> {
    (
        (any::<u8>(), any::<u32>(), any::<u32>()),
        proptest::array::uniform8(any::<u32>()),
        proptest::array::uniform4(any::<i32>()),
    )
        .prop_map(|((s, d, m), a, n)| Info {
            debug_state: DebugState::from_raw(s),
            debugger_flags: DebuggerFlags::from_bits_retain(d),
            mpi_flags: MpiFlags::from_bits_retain(m),
            dll_name_32: a[0].into(),
            dll_name_64: a[1].into(),
            meta_host_name: a[2].into(),
            meta_executable_name: a[3].into(),
            abort_string: a[4].into(),
            proctable: a[5].into(),
            directory_table: a[6].into(),
            metadirectory_table: a[7].into(),
            proctable_size: n[0],
            directory_size: n[1],
            metadirectory_size: n[2],
            meta_pid: n[3],
        })
}

proptest! {
    /// Any INFO value (32-bit addresses so that every model holds them) encodes and decodes
    /// to itself in every model.
    #[test]
    fn info_roundtrips(info in arb_info(), at in any::<u32>()) {
        for model in MODELS {
            let mut buf = vec![0; info_size(&model) as usize];
            encode_info(&model, at.into(), &info, &mut buf).unwrap();
            prop_assert_eq!(decode_info(&model, at.into(), &buf).unwrap(), info);
        }
    }

    /// Arbitrary bytes never panic the INFO decoder; whatever it accepts starts with the magic.
    #[test]
    fn info_decoder_survives_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..140)) {
        for model in MODELS {
            if decode_info(&model, 0x1000, &bytes).is_ok() {
                prop_assert_eq!(&bytes[..5], b"MPI2\x7f");
                prop_assert!(bytes.len() as u64 >= info_size(&model));
            }
        }
    }
}
