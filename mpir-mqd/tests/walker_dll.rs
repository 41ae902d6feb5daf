//! The in-process host against a test DLL written in C (`fixtures/walker_dll.c`), compiled
//! here at test time, that walks a known structure in a `MockTarget` purely through the host's
//! callbacks. Run in four data models (LP64, ILP32, and both big-endian), it proves the byte
//! order conversion, the type sizes, symbol/type lookups and the iteration.

use std::rc::Rc;

mod common;
use common::*;

use mpir_mqd::{HostOptions, MqdError, ProcessSpec, Queue};
use mpir_target::{MockTarget, Symbol, SymbolKind};
use mpir_types::DataModel;
use mpir_types::mqd::{LengthUnit, OpStatus, Peer};

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
        .attach(ProcessSpec::new(IMAGE, target.clone(), Some(3)))
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
    assert_eq!(
        a.group.as_deref(),
        Some(&[Some(10), Some(11), Some(12), Some(13)][..])
    );
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
        .attach(ProcessSpec::new(IMAGE, Rc::new(target), Some(0)))
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
        .attach(ProcessSpec::new(IMAGE, Rc::new(b.build()), Some(0)))
        .expect("attach");
    match host.queues(p) {
        Err(MqdError::Dll {
            call,
            message,
            callbacks,
            ..
        }) => {
            let faults = &callbacks.faults;
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
    // Versions 2 (MPI-1) and 3 (MPI-2) are hosted; 4 is from the future, 1 from the past.
    for (name, compat) in [("compat4", 4), ("compat1", 1)] {
        let define = format!("COMPAT={compat}");
        let Some((_d1, dll)) = build_dll(name, &[define.as_str()]) else {
            return;
        };
        let err = load(&dll, HostOptions::default()).expect_err("unsupported version");
        assert!(
            matches!(
                err,
                MqdError::Incompatible {
                    found,
                    supported: 3,
                    ..
                } if found == compat
            ),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(
            text.contains(&format!("interface version {compat}"))
                && text.contains("versions 2 (MPI-1) to 3"),
            "{text}"
        );
    }
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
        .attach(ProcessSpec::new(
            IMAGE,
            Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
            Some(0),
        ))
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
        .attach(ProcessSpec::new(
            IMAGE,
            Rc::new(fake_target(DataModel::LP64, &two_comms(), true, true)),
            Some(0),
        ))
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
        .attach(ProcessSpec::new(IMAGE, Rc::new(b.build()), Some(0)))
        .expect_err("probe must fail");
    assert!(
        matches!(&err, MqdError::Dll { message, .. } if message == "/fake/app: fake_mpi_init not found"),
        "{err:?}"
    );
}
