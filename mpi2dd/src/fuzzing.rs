//! Fuzz harnesses of this crate, shared by `fuzz/` and the bounded no-panic test
//! (`tests/fuzz_harness.rs`). Each must never panic, hang, or allocate without bound.

use mpir_target::mock::{Access, MockTarget};
use mpir_target::{Symbol, SymbolKind};
use mpir_types::DataModel;

use crate::connect::MapConnector;
use crate::decode::{decode_direntries, decode_info, decode_procdescs, decode_spawndesc};
use crate::mock::{MockDir, MockProcess, MockRank};
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

/// Valid processes in the snapshot and traversal harnesses' input format, for seeding the
/// fuzzer's corpus and the bounded test's mutations: a metadirectory naming an unreachable
/// directory, one naming itself (a cycle), a directory with spawned ranks, and a rank, in all
/// four data models. Without them random bytes rarely get past `MPI2DD_info`'s magic.
pub fn seeds() -> Vec<(String, Vec<u8>)> {
    let mut to_other = MockProcess::metadirectory("fuzz", 1);
    to_other
        .directories
        .push(MockDir::new("fuzz", "/bin/dir", 2));
    to_other
        .proctable
        .push(MockRank::new("fuzz", "/bin/app", "w0", 10, 0));
    let mut to_itself = MockProcess::metadirectory("fuzz", 1);
    to_itself
        .metadirectories
        .push(MockDir::new("fuzz", "/bin/meta", 1));
    to_itself
        .directories
        .push(MockDir::new("fuzz", "/bin/meta", 1));
    let mut directory = MockProcess::directory("fuzz", 1);
    for rank in 0..4 {
        let r = MockRank::new("node", "/bin/app", "w1", 100 + rank, rank);
        directory.proctable.push(if rank < 2 {
            r
        } else {
            r.spawned("w0", 0, rank)
        });
    }
    let rank = MockProcess::rank("fuzz", 1);
    let mut out = Vec::new();
    for (name, p) in [
        ("meta-to-other", &to_other),
        ("meta-to-itself", &to_itself),
        ("directory", &directory),
        ("rank", &rank),
    ] {
        for (m, model) in ["lp64", "ilp32", "lp64-be", "ilp32-be"].iter().enumerate() {
            out.push((format!("{name}-{model}"), seed_input(p, m)));
        }
    }
    out
}

/// Seeds for [`decoders`]: each of [`seeds`]' memory from its `MPI2DD_info` on, so that the
/// info decoder gets past its magic, version and variant checks.
pub fn decoder_seeds() -> Vec<(String, Vec<u8>)> {
    seeds()
        .into_iter()
        .map(|(name, data)| {
            let offset = usize::from(u16::from_le_bytes([data[1], data[2]]));
            let info = data.get(3 + offset..).unwrap_or_default().to_vec();
            (name, info)
        })
        .collect()
}

/// `p` placed in a mock of model `MODELS[m]`, dumped in the harness's input format: model
/// byte, `MPI2DD_info`'s offset, then memory from [`BASE`] to the end of the last
/// allocation (gaps as 0).
fn seed_input(p: &MockProcess, m: usize) -> Vec<u8> {
    let mut b = MockTarget::builder(MODELS[m]);
    let placed = p.place(&mut b);
    let end = b.alloc(1);
    let t = b.build();
    let offset = u16::try_from(placed.info.saturating_sub(BASE)).unwrap_or(u16::MAX);
    let mut out = vec![m as u8];
    out.extend(offset.to_le_bytes());
    out.extend((BASE..end).map(|a| t.peek(a, 1).map_or(0, |b| b[0])));
    out
}
