//! The in-process host against a test DLL written in C (`fixtures/walker_dll.c`), compiled
//! here at test time, that walks a known structure in a `MockTarget` purely through the host's
//! callbacks. Run in four data models (LP64, ILP32, and both big-endian), it proves the byte
//! order conversion, the type sizes, symbol/type lookups and the iteration.

use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;

use mpir_mqd::{Host, HostOptions, MqdError, ProcessSpec, Queue};
use mpir_target::mock::MockTargetBuilder;
use mpir_target::testkit;
use mpir_target::{MockTarget, Symbol, SymbolKind};
use mpir_types::mqd::{LengthUnit, OpStatus, Peer};
use mpir_types::{CStructBuilder, DataModel, FieldLayout, LayoutSource, TypeLayout};

const IMAGE: &str = "/fake/app";

/// Compiles the walker DLL with `defines` into a fresh directory; `None` (test skipped) when
/// no C compiler is available.
fn build_dll(name: &str, defines: &[&str]) -> Option<(testkit::Scratch, PathBuf)> {
    if !testkit::have("cc") {
        testkit::skip("no C compiler (cc) to build the test MQD DLL");
        return None;
    }
    let dir = testkit::scratch(&format!("mqd-{name}"));
    let out = dir.join("libwalker.so");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/walker_dll.c");
    let mut cmd = Command::new("cc");
    cmd.args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(src);
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    testkit::run(&mut cmd).unwrap_or_else(|e| panic!("{e}"));
    Some((dir, out))
}

fn load(path: &PathBuf, options: HostOptions) -> Result<Host, MqdError> {
    // SAFETY: the walker DLL is our own fixture, built for this host just above.
    unsafe { Host::load(path, options) }
}

struct CommLayout {
    ty: TypeLayout,
    next: FieldLayout,
    id: FieldLayout,
    rank: FieldLayout,
    size: FieldLayout,
    name: FieldLayout,
    group: FieldLayout,
    queues: [FieldLayout; 3],
}

struct OpLayout {
    ty: TypeLayout,
    next: FieldLayout,
    peer: FieldLayout,
    tag: FieldLayout,
    count: FieldLayout,
    buf: FieldLayout,
    seq: FieldLayout,
    flags: FieldLayout,
}

fn member(ty: TypeLayout, name: &str, f: FieldLayout) -> TypeLayout {
    ty.with_member(name, f.offset, f.size)
}

fn comm_layout(m: &DataModel) -> CommLayout {
    let (p, int, long) = (m.pointer_size(), m.int_size(), m.long_size());
    let mut b = CStructBuilder::new();
    let next = b.scalar(p);
    let id = b.scalar(long);
    let rank = b.scalar(int);
    let size = b.scalar(int);
    let name = b.scalar(p);
    let group = b.scalar(p);
    let queues = [b.scalar(p), b.scalar(p), b.scalar(p)];
    let mut ty = TypeLayout::new("fake_comm", b.size(), LayoutSource::Given);
    for (n, f) in [
        ("next", next),
        ("id", id),
        ("rank", rank),
        ("size", size),
        ("name", name),
        ("group", group),
        ("sends", queues[0]),
        ("recvs", queues[1]),
        ("unexpected", queues[2]),
    ] {
        ty = member(ty, n, f);
    }
    CommLayout {
        ty,
        next,
        id,
        rank,
        size,
        name,
        group,
        queues,
    }
}

fn op_layout(m: &DataModel) -> OpLayout {
    let mut b = CStructBuilder::new();
    let next = b.scalar(m.pointer_size());
    let peer = b.scalar(m.int_size());
    let tag = b.scalar(m.int_size());
    let count = b.scalar(m.long_size());
    let buf = b.scalar(m.pointer_size());
    let seq = b.scalar(8);
    let flags = b.scalar(m.short_size());
    let mut ty = TypeLayout::new("fake_op", b.size(), LayoutSource::Given);
    for (n, f) in [
        ("next", next),
        ("peer", peer),
        ("tag", tag),
        ("count", count),
        ("buf", buf),
        ("seq", seq),
        ("flags", flags),
    ] {
        ty = member(ty, n, f);
    }
    OpLayout {
        ty,
        next,
        peer,
        tag,
        count,
        buf,
        seq,
        flags,
    }
}

/// One operation to place: (peer, tag, count, buf, seq, flags).
type FakeOp = (i64, i64, i64, u64, i64, i64);

/// What a queue pointer holds.
enum FakeQueue {
    List(Vec<FakeOp>),
    /// All ones: the walker reports `mqs_no_information`.
    NoInfo,
}

struct FakeComm {
    id: u64,
    rank: i64,
    name: &'static str,
    group: Vec<i64>,
    queues: [FakeQueue; 3],
}

fn place_ops(b: &mut MockTargetBuilder, l: &OpLayout, ops: &[FakeOp]) -> u64 {
    let mut next = 0;
    for &(peer, tag, count, buf, seq, flags) in ops.iter().rev() {
        let at = b.alloc(l.ty.byte_size);
        b.write_with(at, l.ty.byte_size, |v| {
            v.put_uint(l.next.offset, l.next.size, next, "next")?;
            v.put_field_int(l.peer, peer, "peer")?;
            v.put_field_int(l.tag, tag, "tag")?;
            v.put_field_int(l.count, count, "count")?;
            v.put_field_uint(l.buf, buf, "buf")?;
            v.put_field_int(l.seq, seq, "seq")?;
            v.put_field_int(l.flags, flags, "flags")
        });
        next = at;
    }
    next
}

/// A mock process of data model `m` holding `comms`; `with_head` / `with_types` remove parts
/// for the failure tests.
fn fake_target(
    m: DataModel,
    comms: &[FakeComm],
    with_head: bool,
    with_op_type: bool,
) -> MockTarget {
    let mut b = MockTarget::builder(m);
    let cl = comm_layout(&m);
    let ol = op_layout(&m);
    b.type_layout(cl.ty.clone());
    if with_op_type {
        b.type_layout(ol.ty.clone());
    }
    b.function("fake_mpi_init");
    let all_ones = m.max_address();
    let mut next = 0;
    for c in comms.iter().rev() {
        let name = b.cstring(c.name);
        let group = b.alloc(m.int_size() * c.group.len() as u64);
        let int = m.int_size();
        let members = c.group.clone();
        b.write_with(group, int * members.len() as u64, |v| {
            for (i, g) in members.iter().enumerate() {
                v.put_int(i as u64 * int, int, *g, "group")?;
            }
            Ok(())
        });
        let queues = c.queues.each_ref().map(|q| match q {
            FakeQueue::List(ops) => place_ops(&mut b, &ol, ops),
            FakeQueue::NoInfo => all_ones,
        });
        let at = b.alloc(cl.ty.byte_size);
        let size = c.group.len() as i64;
        b.write_with(at, cl.ty.byte_size, |v| {
            v.put_field_uint(cl.next, next, "next")?;
            v.put_field_uint(cl.id, c.id, "id")?;
            v.put_field_int(cl.rank, c.rank, "rank")?;
            v.put_field_int(cl.size, size, "size")?;
            v.put_field_uint(cl.name, name, "name")?;
            v.put_field_uint(cl.group, group, "group")?;
            for (f, q) in cl.queues.iter().zip(queues) {
                v.put_field_uint(*f, q, "queue")?;
            }
            Ok(())
        });
        next = at;
    }
    if with_head {
        b.pointer_variable("fake_comm_head", next);
    }
    b.build()
}

fn two_comms() -> Vec<FakeComm> {
    vec![
        FakeComm {
            id: 0x4400_0001,
            rank: 1,
            name: "comm_a",
            group: vec![10, 11, 12, 13],
            queues: [
                // seq needs more than 32 bits: proves 8-byte conversion on 32-bit targets.
                FakeQueue::List(vec![(2, 7, 10, 0x5000, 0x1_0000_0002, -3)]),
                FakeQueue::List(vec![(-1, -1, 3, 0x6000, 1, 0), (3, 42, 1000, 0x7000, 2, 1)]),
                FakeQueue::NoInfo,
            ],
        },
        FakeComm {
            id: 0x4400_0002,
            rank: 0,
            name: "dup of comm_a",
            group: vec![13, 12],
            queues: [
                FakeQueue::List(vec![]),
                FakeQueue::List(vec![(1, 5, 8, 0x8000, 3, 0)]),
                FakeQueue::List(vec![(0, 9, 4, 0x9000, 4, 2)]),
            ],
        },
    ]
}

fn walk_in(model: DataModel, sizes: &str, name: &str) {
    let Some((_dir, dll)) = build_dll(name, &[]) else {
        return;
    };
    let target = Rc::new(fake_target(model, &two_comms(), true, true));
    let mut host = load(
        &dll,
        HostOptions::default().with_length_unit(LengthUnit::Bytes),
    )
    .expect("load walker");
    assert_eq!(host.version(), "mpir-rs test walker DLL");
    assert_eq!(host.compatibility(), 2);
    assert_eq!(host.taddr_width(), Some(8));
    assert!(host.optional_exports().contains(&"mqs_get_comm_group"));
    let p = host
        .attach(ProcessSpec {
            image_name: IMAGE.into(),
            target: target.clone(),
            global_rank: 3,
        })
        .expect("attach");
    assert_eq!(
        host.queue_messages(p).0,
        Some("/fake/app has fake queues"),
        "the has-queues message is a format taking the image name"
    );
    let comms = host.queues(p).expect("queues");
    assert_eq!(comms.len(), 2);

    let a = &comms[0];
    assert_eq!(a.communicator.name, "comm_a");
    assert_eq!(a.communicator.unique_id, 0x4400_0001);
    assert_eq!((a.communicator.local_rank, a.communicator.size), (1, 4));
    assert_eq!(a.group.as_deref(), Some(&[10, 11, 12, 13][..]));
    let s = a.sends.operations();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].peer_local, Peer::Rank(2));
    assert_eq!(
        s[0].peer_global,
        Some(12),
        "filled from the group: the DLL gave -1"
    );
    assert_eq!(s[0].tag, Some(7));
    assert_eq!(s[0].length.bytes, Some(10));
    assert_eq!(s[0].buffer, 0x5000);
    assert_eq!(s[0].status, OpStatus::Pending);
    assert_eq!(
        s[0].extra_text,
        [
            "seq=4294967298 flags=-3".to_string(),
            format!("sizes={sizes} sentinel=kept rank=3"),
        ],
        "8-byte and 2-byte values converted; only the 5 common sizes written; global rank"
    );
    let actual = s[0].actual.expect("a send has actual fields");
    assert_eq!(actual.global_rank, Some(12));
    let r = a.receives.operations();
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].peer_local, Peer::Any);
    assert_eq!((r[0].peer_global, r[0].tag), (None, None));
    assert_eq!(r[0].length.bytes, Some(3));
    assert_eq!(r[1].peer_local, Peer::Rank(3));
    assert_eq!(r[1].peer_global, Some(13));
    assert_eq!(
        (r[1].tag, r[1].length.bytes, r[1].buffer),
        (Some(42), Some(1000), 0x7000)
    );
    assert_eq!(a.unexpected, Queue::NoInformation);

    let b = &comms[1];
    assert_eq!(b.communicator.name, "dup of comm_a");
    assert_eq!((b.communicator.local_rank, b.communicator.size), (0, 2));
    assert_eq!(b.sends, Queue::Operations(vec![]));
    let r = b.receives.operations();
    assert_eq!(
        (r.len(), r[0].peer_global, r[0].tag),
        (1, Some(12), Some(5))
    );
    let u = b.unexpected.operations();
    assert_eq!(u.len(), 1);
    assert_eq!(
        (u[0].status, u[0].system_buffer),
        (OpStatus::Complete, true)
    );
    assert_eq!(
        (u[0].peer_global, u[0].tag, u[0].length.bytes),
        (Some(13), Some(9), Some(4))
    );

    assert!(
        host.dll_messages()
            .iter()
            .any(|m| m == "walker: process set up")
    );
    assert!(
        target.writes().is_empty(),
        "hosting never writes the target"
    );

    // A second walk gives the same answer (iterators restart cleanly).
    assert_eq!(host.queues(p).expect("again"), comms);
    host.detach(p).expect("detach");
    assert!(matches!(
        host.queues(p),
        Err(MqdError::UnknownProcess { .. })
    ));
    assert!(matches!(
        host.detach(p),
        Err(MqdError::UnknownProcess { .. })
    ));
}

#[test]
fn walks_lp64() {
    walk_in(DataModel::LP64, "2,4,8,8,8", "lp64");
}

#[test]
fn walks_big_endian_lp64() {
    walk_in(DataModel::LP64_BE, "2,4,8,8,8", "lp64be");
}

#[test]
fn walks_32_bit() {
    walk_in(DataModel::ILP32, "2,4,4,8,4", "ilp32");
}

#[test]
fn walks_big_endian_32_bit() {
    walk_in(DataModel::ILP32_BE, "2,4,4,8,4", "ilp32be");
}

fn attach_err(target: MockTarget, name: &str) -> Option<MqdError> {
    let (_dir, dll) = build_dll(name, &[])?;
    let mut host = load(&dll, HostOptions::default()).expect("load");
    let err = host
        .attach(ProcessSpec {
            image_name: IMAGE.into(),
            target: Rc::new(target),
            global_rank: 0,
        })
        .expect_err("attach must fail");
    Some(err)
}

#[test]
fn missing_type_fails_image_has_queues_with_the_formatted_message() {
    let t = fake_target(DataModel::LP64, &two_comms(), true, false);
    let Some(err) = attach_err(t, "notype") else {
        return;
    };
    match &err {
        MqdError::Dll {
            call,
            message,
            code,
            ..
        } => {
            assert_eq!(*call, "mqs_image_has_queues");
            assert_eq!(message, "/fake/app lacks the fake MPI types");
            assert_eq!(*code, 100);
        }
        e => panic!("unexpected {e:?}"),
    }
    assert!(err.to_string().contains("/fake/app"));
}

#[test]
fn missing_symbol_fails_process_has_queues() {
    let t = fake_target(DataModel::ILP32_BE, &two_comms(), false, true);
    let Some(err) = attach_err(t, "nosym") else {
        return;
    };
    assert!(
        matches!(&err, MqdError::Dll { call: "mqs_process_has_queues", message, .. }
            if message == "/fake/app: no fake_comm_head in this process"),
        "{err:?}"
    );
}

#[test]
fn unreadable_memory_is_a_dll_error_with_callback_context() {
    let Some((_dir, dll)) = build_dll("unreadable", &[]) else {
        return;
    };
    // A head pointer into unmapped memory.
    let mut b = MockTarget::builder(DataModel::LP64);
    b.type_layout(comm_layout(&DataModel::LP64).ty);
    b.type_layout(op_layout(&DataModel::LP64).ty);
    b.function("fake_mpi_init");
    b.pointer_variable("fake_comm_head", 0xdead_0000);
    let mut host = load(&dll, HostOptions::default()).expect("load");
    let p = host
        .attach(ProcessSpec {
            image_name: IMAGE.into(),
            target: Rc::new(b.build()),
            global_rank: 0,
        })
        .expect("attach");
    match host.queues(p) {
        Err(MqdError::Dll {
            call,
            message,
            faults,
            ..
        }) => {
            assert_eq!(call, "mqs_get_communicator");
            assert_eq!(
                message, "walker: read failed",
                "rendered by mqs_dll_error_string"
            );
            assert!(
                faults.iter().any(|f| f.contains("fetch_data(0xdead0")),
                "{faults:?}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn refuses_wrong_compatibility_and_width_before_anything_else() {
    let Some((_d1, compat3)) = build_dll("compat3", &["COMPAT=3"]) else {
        return;
    };
    let err = load(&compat3, HostOptions::default()).expect_err("compat 3");
    assert!(
        matches!(
            err,
            MqdError::Incompatible {
                found: 3,
                supported: 2,
                ..
            }
        ),
        "{err:?}"
    );
    let Some((_d2, width4)) = build_dll("width4", &["WIDTH=4"]) else {
        return;
    };
    let err = load(&width4, HostOptions::default()).expect_err("width 4");
    assert!(
        matches!(
            err,
            MqdError::TaddrWidth {
                found: 4,
                host: 8,
                ..
            }
        ),
        "{err:?}"
    );
    // A refused DLL is not left registered as hosted... but it stays loaded, so loading the
    // same file again is refused the same way, not as AlreadyHosted.
    let again = load(&width4, HostOptions::default()).expect_err("again");
    assert!(matches!(again, MqdError::TaddrWidth { .. }), "{again:?}");
}

#[test]
fn missing_required_export_is_named() {
    let Some((_d, dll)) = build_dll("noexport", &["NO_NEXT_OPERATION"]) else {
        return;
    };
    let err = load(&dll, HostOptions::default()).expect_err("missing export");
    match err {
        MqdError::MissingExports { names, .. } => assert_eq!(names, ["mqs_next_operation"]),
        e => panic!("unexpected {e:?}"),
    }
}

#[test]
fn an_endless_queue_is_bounded() {
    let Some((_d, dll)) = build_dll("endless", &["ENDLESS"]) else {
        return;
    };
    let mut host = load(&dll, HostOptions::default().with_bounds(16, 50)).expect("load");
    let p = host
        .attach(ProcessSpec {
            image_name: IMAGE.into(),
            target: Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
            global_rank: 0,
        })
        .expect("attach");
    let comms = host.queues(p).expect("communicators still listed");
    match &comms[0].sends {
        Queue::Failed {
            partial,
            error: MqdError::Unbounded { limit: 50, .. },
        } => assert_eq!(partial.len(), 50),
        q => panic!("unexpected {q:?}"),
    }
}

#[test]
fn without_comm_group_global_ranks_stay_unknown() {
    let Some((_d, dll)) = build_dll("nogroup", &["NO_COMM_GROUP"]) else {
        return;
    };
    let mut host = load(&dll, HostOptions::default()).expect("load");
    assert!(!host.optional_exports().contains(&"mqs_get_comm_group"));
    let p = host
        .attach(ProcessSpec {
            image_name: IMAGE.into(),
            target: Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
            global_rank: 0,
        })
        .expect("attach");
    let comms = host.queues(p).expect("queues");
    assert_eq!(comms[0].group, None);
    let s = comms[0].sends.operations();
    assert_eq!((s[0].peer_local, s[0].peer_global), (Peer::Rank(2), None));
    // Lengths in elements when the unit is not given and the DLL is not Open MPI's.
    assert_eq!(s[0].length.elements, Some(10));
    assert_eq!(s[0].length.bytes, None);
}

#[test]
fn one_host_per_dll() {
    let Some((_d, dll)) = build_dll("once", &[]) else {
        return;
    };
    let first = load(&dll, HostOptions::default()).expect("first");
    let err = load(&dll, HostOptions::default()).expect_err("second");
    assert!(matches!(err, MqdError::AlreadyHosted { .. }), "{err:?}");
    drop(first);
    load(&dll, HostOptions::default()).expect("after the first is dropped");
}

#[test]
fn a_symbol_that_is_data_is_not_a_function() {
    let Some((_d, dll)) = build_dll("datafn", &[]) else {
        return;
    };
    // fake_mpi_init exists but as a data object: the NULL-pointer function probe must fail.
    let mut b = MockTarget::builder(DataModel::LP64);
    b.type_layout(comm_layout(&DataModel::LP64).ty);
    b.type_layout(op_layout(&DataModel::LP64).ty);
    b.symbol(Symbol::new("fake_mpi_init", 0x1000, 4, SymbolKind::Object));
    let mut host = load(&dll, HostOptions::default()).expect("load");
    let err = host
        .attach(ProcessSpec {
            image_name: IMAGE.into(),
            target: Rc::new(b.build()),
            global_rank: 0,
        })
        .expect_err("probe must fail");
    assert!(
        matches!(&err, MqdError::Dll { message, .. } if message == "/fake/app: fake_mpi_init not found"),
        "{err:?}"
    );
}
