//! A bounded run of the fuzz harnesses (`fuzz/fuzz_targets/mpi2dd_*.rs`) inside `cargo test`:
//! random bytes, and valid processes' memory (`mpi2dd::fuzzing::seeds`) with bytes flipped, through the decoders, a snapshot
//! and a traversal. Nothing may panic.

use mpir_types::DataModel;
use proptest::prelude::*;

#[test]
fn every_seed_is_a_readable_process() {
    let seeds = mpi2dd::fuzzing::seeds();
    assert_eq!(seeds.len(), 16, "four processes in four data models");
    for (name, data) in &seeds {
        // Through the harness's own input format: each valid process reads back whole.
        let snap =
            mpi2dd::fuzzing::snapshot_result(data).unwrap_or_else(|e| panic!("seed {name}: {e}"));
        let expected = [("meta-to-other", 1), ("directory", 4)]
            .iter()
            .find(|(prefix, _)| name.starts_with(prefix))
            .map_or(0, |&(_, n)| n);
        assert_eq!(snap.proctable.len(), expected, "seed {name}");
        mpi2dd::fuzzing::traversal(data);
    }
}

#[test]
fn every_decoder_seed_is_a_valid_info() {
    for (name, data) in mpi2dd::fuzzing::decoder_seeds() {
        let model = [
            DataModel::LP64,
            DataModel::ILP32,
            DataModel::LP64_BE,
            DataModel::ILP32_BE,
        ]
        .into_iter()
        .find(|m| mpi2dd::decode::decode_info(m, mpi2dd::fuzzing::BASE, &data).is_ok());
        assert!(
            model.is_some(),
            "seed {name}: no data model decodes its MPI2DD_info"
        );
        mpi2dd::fuzzing::decoders(&data);
    }
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
        seed in prop::sample::select(mpi2dd::fuzzing::seeds()),
    ) {
        let mut data = seed.1;
        for (at, x) in flips {
            let i = at.index(data.len());
            data[i] ^= x;
        }
        mpi2dd::fuzzing::snapshot(&data);
        mpi2dd::fuzzing::traversal(&data);
    }
}
