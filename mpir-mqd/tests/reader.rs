//! `QueueReader`: the engine choice (forced or automatic, with the fallback reason), the
//! reads through either engine, and missing types found as data in the error chain.

use std::rc::Rc;

mod common;
use common::*;

use mpir_mqd::native::NativeError;
use mpir_mqd::{
    DllHosting, DllSource, Engine, EngineUsed, HelperOptions, MqdError, QueueReader, ReadRank,
    ReaderOptions,
};
use mpir_target::{MockTarget, Target};
use mpir_types::DataModel;

const HELPER: &str = env!("CARGO_BIN_EXE_mpir-mqd-host");

fn out_of_process() -> ReaderOptions {
    ReaderOptions::default().with_helper(HelperOptions::default().with_program(HELPER))
}

/// The fake MPI process of the walker DLL, naming `dll` in `MPIR_dll_name` when given.
fn fake(dll: Option<&std::path::Path>, with_op_type: bool) -> Rc<dyn Target> {
    let mut b = fake_builder(DataModel::LP64, &two_comms(), true, with_op_type);
    if let Some(dll) = dll {
        let name = dll.to_str().expect("utf-8 path").as_bytes();
        b.char_array_variable("MPIR_dll_name", 256, name);
    }
    Rc::new(b.build())
}

/// An MPICH-looking process: the communicator list's and ch3's queue symbols, but none of
/// MPICH's types.
fn mpich_without_types() -> MockTarget {
    let mut b = MockTarget::builder(DataModel::LP64);
    b.variable("MPIR_All_communicators", 16);
    b.variable("MPID_Recvq_posted_head_ptr", 8);
    b.variable("MPID_Recvq_unexpected_head_ptr", 8);
    b.build()
}

fn rank(r: u64) -> ReadRank {
    ReadRank::new(Some(r), IMAGE)
}

#[test]
fn forced_native_without_the_mpis_types_is_a_typed_error_naming_them() {
    let t = mpich_without_types();
    let e = QueueReader::open(&t, ReaderOptions::default().with_engine(Engine::Native))
        .expect_err("no walker fits");
    match &e {
        MqdError::Native(NativeError::NotRecognised { missing_types, .. }) => {
            assert!(
                missing_types.iter().any(|t| t == "MPIR_Comm"),
                "{missing_types:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    // Found by walking the chain, as a tool does with an error it wrapped.
    let types = MqdError::missing_types_in(&e);
    assert!(types.iter().any(|t| t == "MPIR_Comm_list"), "{types:?}");
    // Its source is the walker's error; the top line does not repeat it.
    let source = std::error::Error::source(&e).expect("source").to_string();
    assert!(!e.to_string().contains(&source), "{e} / {source}");
}

#[test]
fn auto_falls_back_to_the_dll_the_mpi_names_and_says_why() {
    let Some((_dir, dll)) = build_dll("reader-auto", &[]) else {
        return;
    };
    let target = fake(Some(&dll), true);
    let mut reader = QueueReader::open(&*target, out_of_process()).expect("open");
    match reader.engine() {
        EngineUsed::Dll {
            path,
            source,
            hosting,
        } => {
            assert_eq!(path, dll);
            assert_eq!(source, DllSource::MpirDllName);
            assert_eq!(hosting, DllHosting::OutOfProcess);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        reader.engine().to_string(),
        format!("dll {}", dll.display())
    );
    assert!(
        matches!(
            reader.fallback_reason(),
            Some(NativeError::NotRecognised { .. })
        ),
        "{:?}",
        reader.fallback_reason()
    );
    let q = reader.read(&rank(3), Rc::clone(&target)).expect("read");
    let names: Vec<&str> = q
        .communicators
        .iter()
        .map(|c| c.communicator.name.as_str())
        .collect();
    assert_eq!(names, ["comm_a", "dup of comm_a"]);
    assert!(q.notes.is_empty(), "{:?}", q.notes);
    assert_eq!(
        q.communicators[0].group.as_deref(),
        Some(&[Some(10), Some(11), Some(12), Some(13)][..])
    );
    // Detached after the read: the same process can be read again.
    let again = reader.read(&rank(3), target).expect("read again");
    assert_eq!(again, q);
    assert!(reader.finish().is_empty());
}

#[test]
fn a_given_dll_wins_and_may_run_in_process() {
    let Some((_dir, dll)) = build_dll("reader-given", &[]) else {
        return;
    };
    // The process names no DLL: only the given one can be used.
    let target = fake(None, true);
    // SAFETY: the walker DLL is our own fixture, built for this host just above.
    let options = unsafe {
        ReaderOptions::default()
            .with_dll(&dll)
            .with_dll_in_process()
    };
    let mut reader = QueueReader::open(&*target, options).expect("open");
    assert!(matches!(
        reader.engine(),
        EngineUsed::Dll {
            source: DllSource::Given,
            hosting: DllHosting::InProcess,
            ..
        }
    ));
    assert_eq!(reader.fallback_reason(), None, "native was not tried");
    let q = reader.read(&rank(0), target).expect("read");
    assert_eq!(q.communicators.len(), 2);
}

#[test]
fn forced_dll_without_one_is_a_typed_error() {
    let target = fake(None, true);
    let e =
        QueueReader::open(&*target, out_of_process().with_engine(Engine::Dll)).expect_err("no DLL");
    assert!(matches!(e, MqdError::NoDll { .. }), "{e:?}");
}

#[test]
fn auto_with_neither_engine_gives_both_reasons() {
    let t = mpich_without_types();
    let e = QueueReader::open(&t, out_of_process()).expect_err("nothing fits");
    match &e {
        MqdError::NoEngine { native, dll } => {
            assert!(matches!(native, NativeError::NotRecognised { .. }));
            assert!(matches!(**dll, MqdError::NoDll { .. }), "{dll:?}");
        }
        other => panic!("{other:?}"),
    }
    // The types the walker needed are the hint, found typed.
    assert!(
        MqdError::missing_types_in(&e)
            .iter()
            .any(|t| t == "MPIR_Comm")
    );
}

#[test]
fn a_dll_failing_for_a_missing_type_says_which_through_the_helper() {
    let Some((_dir, dll)) = build_dll("reader-types", &[]) else {
        return;
    };
    // The process's debug information lacks the operation type the DLL looks up.
    let target = fake(Some(&dll), false);
    let mut reader =
        QueueReader::open(&*target, out_of_process().with_engine(Engine::Dll)).expect("open");
    let e = reader.read(&rank(0), target).expect_err("the DLL fails");
    assert!(matches!(e, MqdError::Dll { .. }), "{e:?}");
    assert_eq!(MqdError::missing_types_in(&e), ["fake_op".to_string()]);
    // A failure of another cause carries none.
    let other = MqdError::NoDll { reason: "x".into() };
    assert!(MqdError::missing_types_in(&other).is_empty());
}

#[test]
fn an_mpi_that_keeps_no_queues_is_told_apart_from_one_missing_types() {
    // Intel MPI's shape: the communicator list is there (a local symbol), but none of the
    // queue heads any walker reads, no types, and no DLL named. No sidecar can help.
    let mut b = MockTarget::builder(DataModel::LP64);
    b.variable("MPIR_All_communicators", 16);
    let t = b.build();
    let e = QueueReader::open(&t, out_of_process()).expect_err("nothing fits");
    match &e {
        MqdError::NotExported { symbols, dll } => {
            assert!(symbols.contains("MPID_Recvq_posted_head_ptr"), "{symbols}");
            assert!(symbols.contains("ompi_mpi_communicators"), "{symbols}");
            assert!(dll.contains("MPIR_dll_name"), "{dll}");
        }
        other => panic!("{other:?}"),
    }
    let line = e.to_string();
    assert!(
        line.starts_with("the process exports no message queues"),
        "{line}"
    );
    assert!(!line.contains('\n'), "{line}");
    assert!(MqdError::missing_types_in(&e).is_empty(), "no types hint");
    // MPICH ≥ 4.1's debug queue symbol without its type: the queues are there, the type is
    // what is missing (a sidecar can give it), so it is not "no queues".
    let mut b = MockTarget::builder(DataModel::LP64);
    b.variable("MPIR_All_communicators", 16);
    b.variable("MPIR_Recvq_head", 8);
    let t = b.build();
    let e = QueueReader::open(&t, out_of_process()).expect_err("nothing fits");
    assert!(matches!(e, MqdError::NoEngine { .. }), "{e:?}");
    let types = MqdError::missing_types_in(&e);
    assert!(types.iter().any(|t| t == "MPIR_Debugq"), "{types:?}");
}
