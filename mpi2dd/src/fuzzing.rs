//! Fuzz harnesses of this crate, shared by `fuzz/` and the bounded no-panic test
//! (`tests/fuzz_harness.rs`). Each must never panic, hang, or allocate without bound.

use mpir_target::mock::{Access, MockTarget};
use mpir_target::{Symbol, SymbolKind};
use mpir_types::DataModel;

use crate::connect::MapConnector;
use crate::decode::{decode_direntries, decode_info, decode_procdescs, decode_spawndesc};
use crate::read::{ReadOptions, read_snapshot};
use crate::traverse::{TraverseOptions, traverse};

const MODELS: [DataModel; 4] = [
    DataModel::LP64,
    DataModel::ILP32,
    DataModel::LP64_BE,
    DataModel::ILP32_BE,
];

/// Where the input is placed in mock memory (where `MockTargetBuilder` starts allocating, so
/// that memory dumped from a mock job keeps its pointers valid).
pub const BASE: u64 = 0x1_0000;

/// The decoders on arbitrary bytes, in every data model; table counts come from the input.
pub fn decoders(data: &[u8]) {
    let count = u64::from(data.first().copied().unwrap_or(0));
    for model in &MODELS {
        let _ = decode_info(model, BASE, data);
        let _ = decode_procdescs(model, BASE, data, count);
        let _ = decode_direntries(model, BASE, data, count);
        let _ = decode_spawndesc(model, BASE, data);
    }
}

/// A process from the input: byte 0 picks the data model, bytes 1–2 (little-endian) give the
/// offset of `MPI2DD_info`, the rest is memory mapped at [`BASE`].
fn process(data: &[u8]) -> MockTarget {
    let model = MODELS[usize::from(data.first().copied().unwrap_or(0) % 4)];
    let offset = u64::from(u16::from_le_bytes([
        data.get(1).copied().unwrap_or(0),
        data.get(2).copied().unwrap_or(0),
    ]));
    let mut b = MockTarget::builder(model);
    let bytes = data.get(3..).unwrap_or_default().to_vec();
    let len = bytes.len() as u64;
    if len > 0 {
        b.map(BASE, bytes, Access::READ_WRITE);
    }
    b.symbol(Symbol::new(
        "MPI2DD_info",
        BASE + offset,
        0,
        SymbolKind::Object,
    ));
    b.build()
}

fn small_bounds() -> ReadOptions {
    ReadOptions {
        max_string: 256,
        max_proctable: 4096,
        max_directory_table: 256,
        retries: 2,
    }
}

/// Reads one process's snapshot from arbitrary memory.
pub fn snapshot(data: &[u8]) {
    let _ = snapshot_result(data);
}

/// [`snapshot`], with its result (for checking that a seed is valid).
pub fn snapshot_result(data: &[u8]) -> crate::Result<crate::read::Snapshot> {
    read_snapshot(&process(data), &small_bounds())
}

/// Traverses a job whose only reachable process has arbitrary memory (everything it lists is
/// unreachable or itself).
pub fn traversal(data: &[u8]) {
    let mut c = MapConnector::new();
    c.insert("fuzz", 1, process(data));
    let options = TraverseOptions {
        read: small_bounds(),
        max_processes: 64,
        max_ranks: 4096,
    };
    let _ = traverse(&c, "fuzz", 1, &options);
}
