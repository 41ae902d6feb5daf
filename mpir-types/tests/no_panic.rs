//! The fuzz harnesses (shared with `fuzz/`), run on bounded random input inside `cargo test`:
//! no decoder may panic, whatever the bytes. Two input shapes per harness: uniformly random
//! bytes, and "mostly valid" ones (a real encoding with a few bytes flipped and a random cut),
//! which reach deeper than random bytes do.

use mpir_types::DataModel;
use mpir_types::fuzzing;
use mpir_types::mpir::{self, ProcDescLayout, RawProcDesc};
use mpir_types::mqd::{self, CommunicatorLayout, PendingOperationLayout};
use proptest::prelude::*;

/// Cases per harness and shape; ~10k harness runs in all, a few seconds in debug builds.
const CASES: u32 = 1200;

/// A valid header for each harness: model index 0 (LP64) and ABI layout, then the payload.
fn valid_input(harness: &str, model: DataModel, entries: u8) -> Vec<u8> {
    let mut v = vec![0u8, 0u8]; // preset 0 (lp64), ABI layout
    match harness {
        "proctable" => {
            let n = u64::from(entries);
            v.extend_from_slice(&n.to_be_bytes()); // raw size
            v.extend_from_slice(&0x1000u64.to_be_bytes()); // address
            let layout = ProcDescLayout::abi(&model);
            let raw: Vec<RawProcDesc> = (0..n)
                .map(|i| RawProcDesc {
                    host_name: 0x1000 + i * 3,
                    executable_name: 0x1000 + layout.size * n,
                    pid: i as i64 + 1,
                })
                .collect();
            let mut table = vec![0u8; (layout.size * n) as usize];
            mpir::encode_proctable(&model, &layout, 0x1000, &raw, &mut table).unwrap();
            v.extend_from_slice(&table);
            v.extend_from_slice(b"host\0/bin/app\0");
        }
        "communicator" => {
            v.extend_from_slice(&0x2000u64.to_be_bytes());
            let l = CommunicatorLayout::abi(&model);
            let mut b = vec![0u8; l.size as usize];
            let c = mqd::Communicator {
                unique_id: 7,
                local_rank: 1,
                size: 4,
                name: "MPI_COMM_WORLD".into(),
            };
            mqd::encode_communicator(&model, &l, &c, &mut b).unwrap();
            v.extend_from_slice(&b);
        }
        "pending_operation" => {
            v.extend_from_slice(&[1, 1]); // class receive, lengths in elements of unknown size
            v.extend_from_slice(&0x3000u64.to_be_bytes());
            let l = PendingOperationLayout::abi(&model);
            let b = vec![0x41u8; l.size as usize];
            v.extend_from_slice(&b);
        }
        "discover" => {
            // Descendants 101..=104 (`entries` of them make a valid table), generous bounds,
            // then the memory at DISCOVER_BASE: [size int, pad, pointer] and the table with
            // its strings ("h", and "ab" which pids of even parity run).
            let n = entries.min(7);
            v.truncate(1); // preset 0 (lp64); no layout byte
            v.push(n);
            v.extend((1..=n).map(|i| i * 2)); // pids 102, 104, ...: even
            v.extend_from_slice(&[255, 63]);
            let base = fuzzing::DISCOVER_BASE;
            let layout = ProcDescLayout::abi(&model);
            let table_at = base + 16;
            let strings_at = table_at + layout.size * u64::from(n) + layout.size;
            let mut mem = vec![0u8; 16];
            mem[0..4].copy_from_slice(&u32::from(n).to_le_bytes());
            mem[8..16].copy_from_slice(&table_at.to_le_bytes());
            let raw: Vec<RawProcDesc> = (1..=u64::from(n))
                .map(|i| RawProcDesc {
                    host_name: strings_at,
                    executable_name: strings_at + 2,
                    pid: 100 + 2 * i as i64,
                })
                .collect();
            let mut table = vec![0u8; (layout.size * (u64::from(n) + 1)) as usize];
            mpir::encode_proctable(&model, &layout, table_at, &raw, &mut table).unwrap();
            mem.extend_from_slice(&table);
            mem.extend_from_slice(b"h\0ab\0");
            v.extend_from_slice(&mem);
        }
        _ => v.extend_from_slice(&[0; 32]),
    }
    v
}

fn mutate(mut v: Vec<u8>, flips: &[(usize, u8)], cut: usize) -> Vec<u8> {
    for &(i, b) in flips {
        if !v.is_empty() {
            let n = v.len();
            v[i % n] ^= b;
        }
    }
    v.truncate(cut.min(v.len()));
    v
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: CASES,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn random_bytes(data in prop::collection::vec(any::<u8>(), 0..1024)) {
        for (_, harness) in fuzzing::ALL {
            harness(&data);
        }
    }

    #[test]
    fn mutated_valid_encodings(
        entries in 0u8..20,
        flips in prop::collection::vec((any::<usize>(), 1u8..=255), 0..6),
        cut in any::<usize>(),
    ) {
        for (name, harness) in fuzzing::ALL {
            let v = valid_input(name, DataModel::LP64, entries);
            harness(&v);
            harness(&mutate(v, &flips, cut));
        }
    }
}

/// The valid inputs do reach the decoders' success paths (otherwise the mutated run above
/// would only exercise early exits).
#[test]
fn valid_inputs_decode() {
    let v = valid_input("proctable", DataModel::LP64, 3);
    let table = &v[18..18 + 72];
    let raw = mpir::decode_proctable(
        &DataModel::LP64,
        &ProcDescLayout::abi(&DataModel::LP64),
        0x1000,
        table,
        3,
    )
    .unwrap();
    assert_eq!(raw[2].pid, 3);
    // The search's valid input has one table, found.
    let v = valid_input("discover", DataModel::LP64, 3);
    assert_eq!(v.len(), 7 + 16 + 4 * 24 + 5);
    let found = fuzzing::discover_search(&v).1.unwrap();
    assert_eq!((found.entries, found.size_offset()), (3, -8));
    assert_eq!(found.pids, [102, 104, 106]);
    for (_, harness) in fuzzing::ALL {
        harness(&v);
    }
}

#[cfg(feature = "serde")]
#[test]
fn serde_roundtrip_of_the_public_model() {
    let layout = ProcDescLayout::abi(&DataModel::ILP32_BE);
    let json = serde_json::to_string(&layout).unwrap();
    assert_eq!(
        serde_json::from_str::<ProcDescLayout>(&json).unwrap(),
        layout
    );
    let m: DataModel =
        serde_json::from_str(&serde_json::to_string(&DataModel::LLP64).unwrap()).unwrap();
    assert_eq!(m, DataModel::LLP64);
    // An impossible model is refused at deserialisation.
    let bad =
        r#"{"byte_order":"little","sizes":{"short":2,"int":4,"long":8,"long_long":8,"pointer":3}}"#;
    assert!(serde_json::from_str::<DataModel>(bad).is_err());
    let state = mpir::DebugState::Unknown(9);
    let json = serde_json::to_string(&state).unwrap();
    assert_eq!(
        serde_json::from_str::<mpir::DebugState>(&json).unwrap(),
        state
    );
}
