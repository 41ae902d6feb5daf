//! The CFI-driven unwinder on corrupted real input, through the same harness the `unwind` fuzz
//! target runs (`mpir_target::fuzzing::unwind`): a fixture compiled at test time is the image
//! (its `.eh_frame`, `.eh_frame_hdr` and the rest of its bytes flipped), under a stack whose
//! words are flipped too. Nothing may panic, and the unmutated seed must unwind through more
//! than one frame (so the mutations start from a walk that gets somewhere).

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod support;

use std::sync::OnceLock;

use proptest::prelude::*;
use support::*;

/// The harness input of the seed, and the byte ranges worth flipping: the stack words, and the
/// image's CFI sections (offsets into the input).
type Seed = (Vec<u8>, Vec<(usize, usize)>);

fn seed() -> Option<&'static Seed> {
    static SEED: OnceLock<Option<Seed>> = OnceLock::new();
    SEED.get_or_init(|| {
        use object::{Object, ObjectSection, ObjectSymbol};
        let dir = scratch("unwind-nopanic");
        let src = fixtures().join("unwind_chain.c");
        // No -g: the image must fit the in-memory image limit (64 KiB); CFI is in .eh_frame.
        let exe = cc(
            &dir.join("seed"),
            &["-O2", "-fno-omit-frame-pointer", "-pthread", src.to_str()?],
        )
        .map_err(|e| skip(&e))
        .ok()?;
        let image = std::fs::read(exe).ok()?;
        assert!(
            image.len() < 64 << 10,
            "the seed image is {} bytes",
            image.len()
        );
        let obj = object::File::parse(&*image).ok()?;
        let address = |name: &str| {
            obj.symbols()
                .find(|s| s.name() == Ok(name))
                .map(|s| s.address())
                .unwrap_or_else(|| panic!("no {name} in the seed"))
        };
        // The thread is at the first instruction of `on_signal`, called from inside `main`:
        // the return address (main + 8) is the word at the stack pointer.
        let pc = address("on_signal");
        let ra = 0x5555_0000_0000 + address("main") + 8;
        let words: Vec<u64> = std::iter::once(ra)
            .chain((1..64).map(|i| i * 0x10))
            .collect();
        let mut data = Vec::new();
        data.extend_from_slice(&u16::try_from(pc).ok()?.to_le_bytes());
        data.extend_from_slice(&u16::try_from(words.len()).ok()?.to_le_bytes());
        let stack_at = data.len();
        data.extend(words.iter().flat_map(|w| w.to_le_bytes()));
        let image_at = data.len();
        data.extend_from_slice(&image);
        let mut ranges = vec![(stack_at, words.len() * 8)];
        ranges.extend(
            obj.sections()
                .filter(|s| s.name().is_ok_and(|n| n.starts_with(".eh_frame")))
                .filter_map(|s| s.file_range())
                .map(|(o, n)| (image_at + o as usize, n as usize))
                .filter(|&(_, n)| n > 0),
        );
        assert!(
            ranges.len() >= 3,
            "no .eh_frame / .eh_frame_hdr: {ranges:?}"
        );
        Some((data, ranges))
    })
    .as_ref()
}

#[test]
fn the_seed_unwinds_past_its_first_frame() {
    let Some((data, _)) = seed() else { return };
    let frames = mpir_target::fuzzing::unwind(data);
    assert!(frames >= 2, "the seed gave {frames} frames");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_cfi_and_stacks(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1u8..=255), 1..24),
        cut in prop::option::of(any::<prop::sample::Index>()),
        pc in prop::option::of(any::<u16>()),
    ) {
        let Some((bytes, ranges)) = seed() else { return Ok(()) };
        let mut data = bytes.clone();
        if let Some(pc) = pc {
            data[..2].copy_from_slice(&pc.to_le_bytes());
        }
        for (range, at, x) in flips {
            let (start, len) = ranges[range.index(ranges.len())];
            data[start + at.index(len)] ^= x;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len()));
        }
        mpir_target::fuzzing::unwind(&data);
    }

    #[test]
    fn random_bytes(data in prop::collection::vec(any::<u8>(), 0..4096)) {
        mpir_target::fuzzing::unwind(&data);
    }
}
