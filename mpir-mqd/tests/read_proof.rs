//! The proof a reader gives before a rank's queues count (`QueueReader::read`): on mock
//! processes, every branch of it and its bad input — Open MPI's `mca_pml` unreadable, ob1's
//! module missing, another module selected, nothing selected yet; MPICH's device string — read
//! through the fake MPI's DLL, the engine that runs on any process.

use std::rc::Rc;

mod common;
use common::*;

use mpir_mqd::{
    BlindReason, HelperOptions, MqdError, Queue, QueueReader, ReadNote, ReadRank, ReaderOptions,
};
use mpir_target::mock::MockTargetBuilder;
use mpir_target::{Symbol, SymbolKind, Target};
use mpir_types::DataModel;

const HELPER: &str = env!("CARGO_BIN_EXE_mpir-mqd-host");

/// `sizeof(mca_pml_base_module_t)` and `sizeof(mca_pml_ob1_t)` in Debian's Open MPI 4.1.4
/// (`nm -D --size` of libmpi.so.40 and mca_pml_ob1.so).
const PML_SIZE: u64 = 0xb8;
const OB1_SIZE: u64 = 0x970;

/// The fake MPI of the walker DLL, naming the DLL, with `extra` added.
fn fake(dll: &std::path::Path, extra: impl FnOnce(&mut MockTargetBuilder)) -> Rc<dyn Target> {
    let mut b = fake_builder(DataModel::LP64, &two_comms(), true, true);
    let name = dll.to_str().expect("utf-8 path").as_bytes();
    b.char_array_variable("MPIR_dll_name", 256, name);
    extra(&mut b);
    Rc::new(b.build())
}

/// A PML module at a fresh address: `functions` (0: NULL) as its first pointers, then zeros.
fn module(b: &mut MockTargetBuilder, name: &str, size: u64, functions: &[u64]) {
    let at = b.variable(name, size);
    b.write_with(at, size, |v| {
        for (i, &f) in functions.iter().enumerate() {
            v.put_pointer(i as u64 * 8, f, "function")?;
        }
        Ok(())
    });
}

/// ob1's first eight functions as in pml_ob1.c (`pml_progress` is NULL).
fn ob1_functions(b: &mut MockTargetBuilder) -> Vec<u64> {
    [
        "mca_pml_ob1_add_procs",
        "mca_pml_ob1_del_procs",
        "mca_pml_ob1_enable",
        "",
        "mca_pml_ob1_add_comm",
        "mca_pml_ob1_del_comm",
        "mca_pml_ob1_irecv_init",
        "mca_pml_ob1_irecv",
    ]
    .iter()
    .map(|n| if n.is_empty() { 0 } else { b.function(n) })
    .collect()
}

fn reader(target: &dyn Target) -> QueueReader {
    let options =
        ReaderOptions::default().with_helper(HelperOptions::default().with_program(HELPER));
    QueueReader::open(target, options).expect("open the DLL engine")
}

fn read(target: Rc<dyn Target>) -> Result<mpir_mqd::RankQueues, MqdError> {
    let mut r = reader(&*target);
    let result = r.read(&ReadRank::new(Some(0), IMAGE), target);
    r.finish();
    result
}

fn blind_reason(e: MqdError) -> (String, BlindReason) {
    let line = e.to_string();
    // The reason is in the line, not a source too (printed once).
    assert!(std::error::Error::source(&e).is_none(), "{e:?}");
    match e {
        MqdError::Blind { reader, why } => {
            assert!(
                line.starts_with(&format!("the {reader} cannot see")),
                "{line}"
            );
            assert!(line.contains(&why.to_string()), "{line}");
            (line, *why)
        }
        other => panic!("not Blind: {other:?}"),
    }
}

#[test]
fn open_mpi_with_ob1_selected_is_read() {
    let Some((_dir, dll)) = build_dll("proof-ob1", &[]) else {
        return;
    };
    let target = fake(&dll, |b| {
        let f = ob1_functions(b);
        module(b, "mca_pml", PML_SIZE, &f);
        module(b, "mca_pml_ob1", OB1_SIZE, &f);
    });
    let q = read(target).expect("ob1 is selected: read");
    assert_eq!(q.communicators.len(), 2);
    assert!(q.notes.is_empty(), "{:?}", q.notes);
}

#[test]
fn open_mpi_with_another_pml_is_blind() {
    let Some((_dir, dll)) = build_dll("proof-ucx", &[]) else {
        return;
    };
    // UCX selected and ob1 still loaded (a static build keeps every component).
    let target = fake(&dll, |b| {
        let ob1 = ob1_functions(b);
        let ucx: Vec<u64> = [
            "mca_pml_ucx_add_procs",
            "mca_pml_ucx_del_procs",
            "mca_pml_ucx_enable",
        ]
        .iter()
        .map(|n| b.function(n))
        .collect();
        module(b, "mca_pml", PML_SIZE, &ucx);
        module(b, "mca_pml_ob1", OB1_SIZE, &ob1);
    });
    let (line, why) = blind_reason(read(target).expect_err("UCX selected"));
    assert_eq!(why, BlindReason::NotOb1);
    assert!(line.contains("ob1") && line.contains("PML"), "{line}");

    // One function differing past the first is enough.
    let target = fake(&dll, |b| {
        let ob1 = ob1_functions(b);
        let mut other = ob1.clone();
        other[7] = b.function("mca_pml_monitoring_irecv");
        module(b, "mca_pml", PML_SIZE, &other);
        module(b, "mca_pml_ob1", OB1_SIZE, &ob1);
    });
    assert_eq!(
        blind_reason(read(target).unwrap_err()).1,
        BlindReason::NotOb1
    );

    // UCX selected, ob1 unloaded (Debian's Open MPI 4.1.4 under `--mca pml ucx`).
    let target = fake(&dll, |b| {
        let ucx = [b.function("mca_pml_ucx_add_procs")];
        module(b, "mca_pml", PML_SIZE, &ucx);
    });
    let (line, why) = blind_reason(read(target).unwrap_err());
    assert_eq!(why, BlindReason::Ob1NotLoaded);
    assert!(line.contains("mca_pml_ob1"), "{line}");
}

#[test]
fn open_mpi_bad_input_is_a_typed_refusal() {
    let Some((_dir, dll)) = build_dll("proof-bad", &[]) else {
        return;
    };
    // mca_pml unreadable.
    let target = fake(&dll, |b| {
        let at = b.protected(PML_SIZE);
        b.symbol(Symbol::new("mca_pml", at, PML_SIZE, SymbolKind::Object));
        let f = ob1_functions(b);
        module(b, "mca_pml_ob1", OB1_SIZE, &f);
    });
    match blind_reason(read(target).unwrap_err()).1 {
        BlindReason::Unreadable { symbol, what, .. } => {
            assert_eq!(symbol, "mca_pml");
            assert_eq!(what, "PML");
        }
        other => panic!("{other:?}"),
    }
    // mca_pml_ob1 unreadable.
    let target = fake(&dll, |b| {
        let f = ob1_functions(b);
        module(b, "mca_pml", PML_SIZE, &f);
        let at = b.protected(OB1_SIZE);
        b.symbol(Symbol::new("mca_pml_ob1", at, OB1_SIZE, SymbolKind::Object));
    });
    assert!(matches!(
        blind_reason(read(target).unwrap_err()).1,
        BlindReason::Unreadable { symbol, .. } if symbol == "mca_pml_ob1"
    ));
    // mca_pml at the end of its mapping: a short read.
    let target = fake(&dll, |b| {
        let at = b.alloc(16);
        b.symbol(Symbol::new("mca_pml", at, 0, SymbolKind::Object));
    });
    assert!(matches!(
        blind_reason(read(target).unwrap_err()).1,
        BlindReason::Unreadable { .. }
    ));
    // A symbol too small to be a module.
    let target = fake(&dll, |b| {
        b.variable("mca_pml", 8);
    });
    assert_eq!(
        blind_reason(read(target).unwrap_err()).1,
        BlindReason::TooSmall {
            symbol: "mca_pml".into(),
            size: 8
        }
    );
    // Nothing selected yet: mca_pml as pml_base_frame.c initialises it.
    let target = fake(&dll, |b| {
        let progress = b.function("mca_pml_base_progress");
        module(b, "mca_pml", PML_SIZE, &[0, 0, 0, progress]);
        let f = ob1_functions(b);
        module(b, "mca_pml_ob1", OB1_SIZE, &f);
    });
    assert_eq!(
        blind_reason(read(target).unwrap_err()).1,
        BlindReason::NoPmlSelected
    );
}

#[test]
fn mpich_device_decides_what_its_readers_see() {
    let Some((_dir, dll)) = build_dll("proof-mpich", &[]) else {
        return;
    };
    let device = |b: &mut MockTargetBuilder, d: &str| {
        b.char_array_variable("MPII_Version_device", d.len() as u64 + 1, d.as_bytes());
    };
    // ch3's queues (what MPICH ≤ 4.0's DLL reads) on ch3: everything.
    let target = fake(&dll, |b| {
        b.variable("MPIR_All_communicators", 16);
        device(b, "ch3:nemesis");
    });
    let q = read(target).expect("ch3");
    assert!(q.notes.is_empty(), "{:?}", q.notes);
    assert!(
        q.communicators
            .iter()
            .any(|c| c.unexpected != Queue::NoInformation)
    );
    // ch3's queues on ch4: blind, naming the device.
    let target = fake(&dll, |b| {
        b.variable("MPIR_All_communicators", 16);
        device(b, "ch4:ucx");
    });
    let (line, why) = blind_reason(read(target).unwrap_err());
    assert!(
        matches!(why, BlindReason::Device { ref device, .. } if device == "ch4:ucx"),
        "{why:?}"
    );
    assert!(line.contains("ch4:ucx"), "{line}");
    // The debugger queues on ch4: sends and receives count, unexpected messages are unknown.
    let target = fake(&dll, |b| {
        b.variable("MPIR_All_communicators", 16);
        b.variable("MPIR_Recvq_head", 8);
        device(b, "ch4:ofi");
    });
    let q = read(target).expect("ch4 debug queues");
    assert!(
        q.communicators
            .iter()
            .all(|c| c.unexpected == Queue::NoInformation)
    );
    assert_eq!(
        q.communicators[0].receives.operations().len(),
        2,
        "the fake comm_a's receives"
    );
    match q.notes.as_slice() {
        [ReadNote::NotRead { what }] => assert!(what.contains("ch4:ofi"), "{what}"),
        other => panic!("{other:?}"),
    }
    // The debugger queues of a process that does not say its device: the same, said so.
    let target = fake(&dll, |b| {
        b.variable("MPIR_All_communicators", 16);
        b.variable("MPIR_Recvq_head", 8);
    });
    let q = read(target).expect("no device string");
    assert!(
        q.communicators
            .iter()
            .all(|c| c.unexpected == Queue::NoInformation)
    );
    assert!(
        matches!(q.notes.as_slice(), [ReadNote::NotRead { what }] if what.contains("MPII_Version_device")),
        "{:?}",
        q.notes
    );
    // ch3's queues without a device string: the ch3 queue symbols are ch3's own.
    let target = fake(&dll, |b| {
        b.variable("MPIR_All_communicators", 16);
    });
    assert!(read(target).expect("ch3 symbols").notes.is_empty());
    // A device nobody knows: blind.
    let target = fake(&dll, |b| {
        b.variable("MPIR_All_communicators", 16);
        b.variable("MPIR_Recvq_head", 8);
        device(b, "ch5:quantum");
    });
    assert!(matches!(
        blind_reason(read(target).unwrap_err()).1,
        BlindReason::Device { device, .. } if device == "ch5:quantum"
    ));
}
