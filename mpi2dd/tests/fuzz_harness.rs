//! A bounded run of the fuzz harnesses (`fuzz/fuzz_targets/mpi2dd_*.rs`) inside `cargo test`:
//! random bytes, and a valid job's memory with bytes flipped, through the decoders, a snapshot
//! and a traversal. Nothing may panic.

use mpi2dd::mock::{MockDir, MockProcess, MockRank};
use mpir_target::MockTarget;
use mpir_types::DataModel;
use proptest::prelude::*;

/// A valid metadirectory-and-directory process in the harness's input format: model byte,
/// `MPI2DD_info`'s offset, then the mock's memory from its first allocation on (gaps as 0).
fn seed() -> Vec<u8> {
    let mut p = MockProcess::metadirectory("fuzz", 1);
    p.directories.push(MockDir::new("fuzz", "/bin/dir", 2));
    p.proctable
        .push(MockRank::new("fuzz", "/bin/app", "w0", 10, 0));
    let mut b = MockTarget::builder(DataModel::LP64);
    let placed = p.place(&mut b);
    let t = b.build();
    let base = mpi2dd::fuzzing::BASE;
    let offset = u16::try_from(placed.info - base).unwrap();
    let mut out = vec![0u8];
    out.extend(offset.to_le_bytes());
    out.extend((0..8192u64).map(|i| t.peek(base + i, 1).map_or(0, |b| b[0])));
    out
}

#[test]
fn the_seed_is_a_readable_job() {
    let data = seed();
    // Through the harness's own layout: the valid job reads back whole.
    mpi2dd::fuzzing::snapshot(&data);
    let snap = mpi2dd::fuzzing::snapshot_result(&data).unwrap();
    assert_eq!(snap.proctable.len(), 1);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn random_bytes(data in prop::collection::vec(any::<u8>(), 0..2048)) {
        mpi2dd::fuzzing::decoders(&data);
        mpi2dd::fuzzing::snapshot(&data);
        mpi2dd::fuzzing::traversal(&data);
    }

    #[test]
    fn a_valid_process_with_flips(
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..12),
    ) {
        let mut data = seed();
        for (at, x) in flips {
            let i = at.index(data.len());
            data[i] ^= x;
        }
        mpi2dd::fuzzing::snapshot(&data);
        mpi2dd::fuzzing::traversal(&data);
    }
}
