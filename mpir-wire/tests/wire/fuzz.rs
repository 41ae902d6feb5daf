//! The fuzz harness (`mpir_wire::fuzzing::frames`, also the libFuzzer target `agent_wire`)
//! on bounded inputs in every test run: random bytes, and valid frame streams mutated.

use std::sync::OnceLock;

use mpir_wire::Limits;

/// The seeds, made once.
static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        mpir_wire::fuzzing::frames(&data);
    }

    #[test]
    fn mutated_streams_never_panic(
        seed in any::<prop::sample::Index>(),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        // The small seeds (the one of several 1 MiB frames would cost seconds per case in a
        // debug build; reassembly has its own unit tests).
        let seeds = SEEDS.get_or_init(|| {
            mpir_wire::fuzzing::seeds().into_iter().filter(|s| s.len() < 1 << 16).collect()
        });
        let mut data = seeds[seed.index(seeds.len())].clone();
        for (at, value) in flips {
            let i = at.index(data.len());
            data[i] = value;
        }
        let end = 1 + cut.index(data.len());
        mpir_wire::fuzzing::frames(&data[..end]);
    }
}

#[test]
fn the_seeds_decode_whole() {
    let seeds = mpir_wire::fuzzing::seeds();
    assert!(seeds.len() >= 5);
    for seed in &seeds {
        mpir_wire::fuzzing::frames(seed);
        // Every frame of the seed is a whole, valid message.
        let mut d = mpir_wire::Decoder::new(Limits::DEFAULT);
        let mut seen = 0;
        let mut input = &seed[1..];
        while !input.is_empty() {
            let p = d.feed(input).unwrap();
            seen += usize::from(p.output.is_some());
            input = &input[p.consumed..];
        }
        assert!(d.is_idle());
        assert!(seen >= 1, "{seen}");
    }
}
