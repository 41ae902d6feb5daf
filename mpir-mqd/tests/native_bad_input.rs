//! The native MPICH walker (debug-queue layout) on hostile mock processes: cyclic and broken
//! lists, corrupt values, missing types and members. Every walk is bounded, every failure a
//! typed error naming the address, and nothing is written to the target.

use mpir_mqd::native::{self, NativeError, ProcessInfo, Walk, WalkOptions};
use mpir_mqd::{MqdError, Queue};
use mpir_target::MockTarget;
use mpir_target::mock::MockTargetBuilder;
use mpir_types::{CStructBuilder, DataModel, FieldLayout, LayoutSource, TypeLayout};

struct Layouts {
    list: TypeLayout,
    comm: TypeLayout,
    dq: TypeLayout,
}

fn f(t: &TypeLayout, m: &str) -> FieldLayout {
    let m = t.member(m).expect("member");
    FieldLayout::new(m.offset, m.byte_size.expect("size"))
}

fn layouts(m: &DataModel, with_recvcontext: bool) -> Layouts {
    let p = m.pointer_size();
    let mut b = CStructBuilder::new();
    let seq = b.scalar(4);
    let head = b.scalar(p);
    let list = TypeLayout::new("MPIR_Comm_list", b.size(), LayoutSource::Given)
        .with_member("sequence_number", seq.offset, seq.size)
        .with_member("head", head.offset, head.size);
    let mut b = CStructBuilder::new();
    let fields = [
        ("handle", b.scalar(4)),
        ("context_id", b.scalar(2)),
        ("recvcontext_id", b.scalar(2)),
        ("rank", b.scalar(4)),
        ("local_size", b.scalar(4)),
        ("name", b.array(1, 64)),
        ("comm_next", b.scalar(p)),
    ];
    let mut comm = TypeLayout::new("MPIR_Comm", b.size(), LayoutSource::Given);
    for (n, l) in fields {
        if n != "recvcontext_id" || with_recvcontext {
            comm = comm.with_member(n, l.offset, l.size);
        }
    }
    let mut b = CStructBuilder::new();
    let fields = [
        ("req", b.scalar(p)),
        ("tag", b.scalar(4)),
        ("rank", b.scalar(4)),
        ("context_id", b.scalar(4)),
        ("buf", b.scalar(p)),
        ("count", b.scalar(8)),
        ("next", b.scalar(p)),
        ("prev", b.scalar(p)),
    ];
    let mut dq = TypeLayout::new("MPIR_Debugq", b.size(), LayoutSource::Given);
    for (n, l) in fields {
        dq = dq.with_member(n, l.offset, l.size);
    }
    Layouts { list, comm, dq }
}

/// Places a communicator; returns its address.
fn place_comm(b: &mut MockTargetBuilder, l: &Layouts, name: &str, ctx: i64, size: i64) -> u64 {
    let at = b.alloc(l.comm.byte_size);
    let c = l.comm.clone();
    let name = name.as_bytes().to_vec();
    b.write_with(at, c.byte_size, |v| {
        v.put_field_uint(f(&c, "handle"), 0x8400_0000 + ctx as u64, "handle")?;
        v.put_field_int(f(&c, "context_id"), ctx, "ctx")?;
        if c.member("recvcontext_id").is_some() {
            v.put_field_int(f(&c, "recvcontext_id"), ctx, "rctx")?;
        }
        v.put_field_int(f(&c, "rank"), 0, "rank")?;
        v.put_field_int(f(&c, "local_size"), size, "size")?;
        v.put_bytes(f(&c, "name").offset, &name, "name")
    });
    at
}

fn set_ptr(b: &mut MockTargetBuilder, at: u64, field: FieldLayout, value: u64) {
    b.write_with(at + field.offset, field.size, |v| {
        v.put_uint(0, field.size, value, "ptr")
    });
}

/// Places a debug-queue entry of context `ctx` with `tag`; returns its address.
fn place_entry(b: &mut MockTargetBuilder, l: &Layouts, ctx: i64, tag: i64) -> u64 {
    let at = b.alloc(l.dq.byte_size);
    let d = l.dq.clone();
    b.write_with(at, d.byte_size, |v| {
        v.put_field_int(f(&d, "tag"), tag, "tag")?;
        v.put_field_int(f(&d, "rank"), 0, "rank")?;
        v.put_field_int(f(&d, "context_id"), ctx, "ctx")?;
        v.put_field_int(f(&d, "count"), 1, "count")
    });
    at
}

/// A process with communicators `comms` (linked in order) and the receive entries `recvs`
/// (linked in order), before `tweak` rewires things.
fn process(
    m: DataModel,
    with_recvcontext: bool,
    tweak: impl FnOnce(&mut MockTargetBuilder, &Layouts, &[u64], &[u64]),
) -> MockTarget {
    let l = layouts(&m, with_recvcontext);
    let mut b = MockTarget::builder(m);
    b.type_layout(l.list.clone());
    b.type_layout(l.comm.clone());
    b.type_layout(l.dq.clone());
    let comms = [("world", 0, 2), ("dup", 4, 2)].map(|(n, c, s)| place_comm(&mut b, &l, n, c, s));
    let recvs = [10, 11, 12].map(|t| place_entry(&mut b, &l, 0, t));
    let next = f(&l.comm, "comm_next");
    set_ptr(&mut b, comms[0], next, comms[1]);
    let dnext = f(&l.dq, "next");
    set_ptr(&mut b, recvs[0], dnext, recvs[1]);
    set_ptr(&mut b, recvs[1], dnext, recvs[2]);
    tweak(&mut b, &l, &comms, &recvs);
    let list = b.variable("MPIR_All_communicators", l.list.byte_size);
    let (seq, head) = (f(&l.list, "sequence_number"), f(&l.list, "head"));
    b.write_with(list, l.list.byte_size, |v| {
        v.put_field_int(seq, 7, "seq")?;
        v.put_field_uint(head, comms[0], "head")
    });
    b.pointer_variable("MPIR_Recvq_head", recvs[0]);
    b.pointer_variable("MPIR_Sendq_head", 0);
    b.pointer_variable("MPIR_Unexpq_head", 0);
    b.build()
}

fn walk(t: &MockTarget) -> Walk {
    let w = native::detect(t, &WalkOptions::default())
        .expect("detect")
        .queues(t, &ProcessInfo::with_global_rank(0))
        .expect("walk");
    assert!(t.writes().is_empty(), "the walker wrote to the target");
    w
}

const MODELS: [DataModel; 3] = [DataModel::LP64, DataModel::ILP32, DataModel::ILP32_BE];

#[test]
fn a_sound_mock_walks_in_every_data_model() {
    for m in MODELS {
        let t = process(m, true, |_, _, _, _| {});
        let w = walk(&t);
        assert_eq!(w.communicators.len(), 2, "{m:?}");
        assert_eq!(w.communicators_error, None);
        let tags: Vec<_> = w.communicators[0]
            .receives
            .operations()
            .iter()
            .map(|o| o.tag)
            .collect();
        assert_eq!(tags, [Some(10), Some(11), Some(12)], "{m:?}");
        assert_eq!(
            w.communicators[0].group.as_deref(),
            Some(&[Some(0), Some(1)][..]),
            "context 0 is the world"
        );
    }
}

#[test]
fn a_cyclic_communicator_list_stops_with_a_typed_error() {
    for m in MODELS {
        let t = process(m, true, |b, l, c, _| {
            set_ptr(b, c[1], f(&l.comm, "comm_next"), c[0])
        });
        let w = walk(&t);
        assert_eq!(w.communicators.len(), 2, "both read once");
        match w.communicators_error {
            Some(NativeError::Cycle {
                address, hops: 2, ..
            }) => assert_ne!(address, 0),
            e => panic!("{m:?}: {e:?}"),
        }
    }
}

#[test]
fn a_cyclic_queue_keeps_its_partial_operations() {
    let t = process(DataModel::LP64, true, |b, l, _, r| {
        set_ptr(b, r[2], f(&l.dq, "next"), r[0])
    });
    let w = walk(&t);
    match &w.communicators[0].receives {
        Queue::Failed {
            partial,
            error:
                MqdError::Native(NativeError::Cycle {
                    address, hops: 3, ..
                }),
        } => {
            assert_eq!(partial.len(), 3);
            assert_ne!(*address, 0);
        }
        q => panic!("{q:?}"),
    }
    // The same failure shows on every communicator's receive queue (one list for all).
    assert!(matches!(w.communicators[1].receives, Queue::Failed { .. }));
}

#[test]
fn a_dangling_pointer_is_a_read_error_naming_the_address() {
    let bad = 0xdead_0000u64;
    let t = process(DataModel::LP64, true, |b, l, _, r| {
        set_ptr(b, r[1], f(&l.dq, "next"), bad)
    });
    let w = walk(&t);
    match &w.communicators[0].receives {
        Queue::Failed {
            partial,
            error: MqdError::Native(NativeError::Read { address, what, .. }),
        } => {
            assert_eq!(partial.len(), 2);
            assert_eq!(*address, bad);
            assert!(what.contains("MPIR_Debugq"), "{what}");
        }
        q => panic!("{q:?}"),
    }
    let t = process(DataModel::ILP32, true, |b, l, c, _| {
        set_ptr(b, c[0], f(&l.comm, "comm_next"), bad)
    });
    let w = walk(&t);
    assert_eq!(w.communicators.len(), 1);
    assert!(
        matches!(w.communicators_error, Some(NativeError::Read { address, .. }) if address == bad)
    );
}

#[test]
fn corrupt_values_are_refused() {
    let t = process(DataModel::LP64, true, |b, l, c, _| {
        let size = f(&l.comm, "local_size");
        b.write_with(c[1] + size.offset, size.size, |v| {
            v.put_int(0, size.size, -5, "size")
        });
    });
    let w = walk(&t);
    assert_eq!(w.communicators.len(), 1);
    match w.communicators_error {
        Some(NativeError::Corrupt { what, reason, .. }) => {
            assert!(
                what.contains("local_size") && reason.contains("-5"),
                "{what}: {reason}"
            )
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn long_lists_are_bounded() {
    let t = process(DataModel::LP64, true, |_, _, _, _| {});
    let w = native::detect(&t, &WalkOptions::default())
        .unwrap()
        .queues_with(
            &t,
            &ProcessInfo::default(),
            &WalkOptions::default().with_bounds(1, 2),
        )
        .unwrap();
    assert_eq!(w.communicators.len(), 1);
    assert!(matches!(
        w.communicators_error,
        Some(NativeError::TooLong { limit: 1, .. })
    ));
    assert!(matches!(
        &w.communicators[0].receives,
        Queue::Failed { partial, error: MqdError::Native(NativeError::TooLong { limit: 2, .. }) } if partial.len() == 2
    ));
}

#[test]
fn missing_types_and_members_are_named() {
    // No recvcontext_id in MPIR_Comm: the walker says so.
    let t = process(DataModel::LP64, false, |_, _, _, _| {});
    match native::detect(&t, &WalkOptions::default()) {
        Err(e @ NativeError::NotRecognised { .. }) => {
            assert!(
                !e.lacks_queue_symbols(),
                "MPICH lacks a member only: its queues are there"
            );
            let NativeError::NotRecognised {
                tried,
                missing_types,
                missing_symbols,
            } = e
            else {
                unreachable!()
            };
            assert_eq!(
                missing_symbols,
                [
                    ("MPICH".to_string(), vec![]),
                    (
                        "Open MPI ob1".to_string(),
                        vec!["ompi_mpi_communicators".to_string()]
                    )
                ]
            );
            // A member is missing, not a type: no types sidecar would help.
            assert!(missing_types.is_empty(), "{missing_types:?}");
            let (_, mpich) = tried
                .iter()
                .find(|(w, _)| w == "MPICH")
                .expect("MPICH tried");
            assert_eq!(mpich, &["MPIR_Comm.recvcontext_id".to_string()]);
            let (_, ompi) = tried
                .iter()
                .find(|(w, _)| w.starts_with("Open MPI"))
                .expect("tried");
            assert_eq!(ompi, &["symbol ompi_mpi_communicators".to_string()]);
        }
        other => panic!("{other:?}"),
    }
    // Nothing of MPI at all.
    let t = MockTarget::builder(DataModel::LP64).build();
    let e = native::detect(&t, &WalkOptions::default()).unwrap_err();
    assert!(e.to_string().contains("MPIR_All_communicators"), "{e}");
    // The list but no queue layout: neither ch3's nor 4.1's.
    let mut b = MockTarget::builder(DataModel::LP64);
    let l = layouts(&DataModel::LP64, true);
    b.type_layout(l.list.clone());
    b.type_layout(l.comm.clone());
    b.variable("MPIR_All_communicators", l.list.byte_size);
    let t = b.build();
    let e = native::detect(&t, &WalkOptions::default()).unwrap_err();
    // The missing types are named as types, found also through the error chain.
    let types = e.missing_types();
    assert!(types.iter().any(|t| t == "MPIR_Request"), "{types:?}");
    assert!(!types.iter().any(|t| t.contains("MPID_Recvq")), "{types:?}");
    let wrapped = MqdError::from(e.clone());
    assert_eq!(MqdError::missing_types_in(&wrapped), types);
    let e = e.to_string();
    for need in [
        "symbol MPID_Recvq_posted_head_ptr",
        "type MPIR_Request",
        "type MPIDI_Message_match_parts_t",
    ] {
        assert!(e.contains(need), "{need} in {e}");
    }
}
