//! The ELF/DWARF layout lookup on corrupted real files: a fixture compiled at test time, with
//! random bytes of its debug sections flipped and random truncations, through the same harness
//! the `elf_types` fuzz target runs. Nothing may panic.

mod support;

use std::sync::OnceLock;

use proptest::prelude::*;
use support::*;

/// A fixture's bytes and the file ranges (offset, length) of its debug sections.
type Seed = (Vec<u8>, Vec<(usize, usize)>);

fn seed() -> Option<&'static Seed> {
    static SEED: OnceLock<Option<Seed>> = OnceLock::new();
    SEED.get_or_init(|| {
        use object::{Object, ObjectSection};
        let dir = scratch("nopanic");
        let src = fixtures().join("starter.c");
        let exe = cc(&dir.join("seed"), &["-O2", "-gdwarf-4", src.to_str()?])
            .map_err(|e| skip(&e))
            .ok()?;
        let bytes = std::fs::read(exe).ok()?;
        let obj = object::File::parse(&*bytes).ok()?;
        let ranges = obj
            .sections()
            .filter(|s| s.name().is_ok_and(|n| n.starts_with(".debug")))
            .filter_map(|s| s.file_range())
            .map(|(o, n)| (o as usize, n as usize))
            .filter(|&(_, n)| n > 0)
            .collect();
        Some((bytes, ranges))
    })
    .as_ref()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn corrupted_debug_sections(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1u8..=255), 1..24),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let Some((bytes, ranges)) = seed() else { return Ok(()) };
        let mut data = bytes.clone();
        for (section, at, x) in flips {
            let (start, len) = ranges[section.index(ranges.len())];
            data[start + at.index(len)] ^= x;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len()));
        }
        mpir_target::fuzzing::elf_types(&data);
    }

    /// The stack symboliser (addr2line lines and inline frames, the function index) on the
    /// fixture with its .debug_info / .debug_line (and other debug sections) corrupted.
    #[test]
    fn corrupted_debug_sections_symbolise_without_panicking(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<prop::sample::Index>(), 1u8..=255), 1..24),
    ) {
        let Some((bytes, ranges)) = seed() else { return Ok(()) };
        let mut data = bytes.clone();
        for (section, at, x) in flips {
            let (start, len) = ranges[section.index(ranges.len())];
            data[start + at.index(len)] ^= x;
        }
        let started = std::time::Instant::now();
        mpir_target::fuzzing::elf_symbolize(&data);
        prop_assert!(started.elapsed() < std::time::Duration::from_secs(10));
    }

    /// The path `ElfFile::open` takes (ranges chosen from the headers, a sparse reader) on
    /// headers, program headers and section headers corrupted anywhere.
    #[test]
    fn corrupted_headers_through_the_sparse_reader(
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..16),
        in_section_headers in any::<bool>(),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let Some((bytes, _)) = seed() else { return Ok(()) };
        let mut data = bytes.clone();
        // The ELF header, program headers (start of file), or the section header table (end).
        let (start, len) = if in_section_headers {
            (data.len().saturating_sub(4096), 4096.min(data.len()))
        } else {
            (0, 1024.min(data.len()))
        };
        for (at, x) in flips {
            data[start + at.index(len)] ^= x;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len()));
        }
        mpir_target::fuzzing::elf_sparse(&data);
    }
}

#[test]
fn the_seed_itself_resolves_types() {
    let Some((bytes, _)) = seed() else { return };
    let elf =
        mpir_target::debuginfo::ElfFile::parse(std::path::Path::new("seed"), bytes.clone().into())
            .unwrap();
    let index = mpir_target::debuginfo::TypeIndex::load(&elf, None).unwrap();
    assert_eq!(index.named("zoo_t").unwrap().unwrap().byte_size, 128);
    mpir_target::fuzzing::elf_types(bytes);
}

#[test]
fn the_seed_itself_symbolises() {
    let Some((bytes, _)) = seed() else { return };
    // Addresses across the seed's code have source lines: the harness above exercises the
    // lookups, not only the parsing.
    assert!(mpir_target::fuzzing::elf_symbolize(bytes) > 10);
}

#[test]
fn the_sparse_reader_sees_what_the_whole_file_shows() {
    let Some((bytes, _)) = seed() else { return };
    let path = std::path::Path::new("seed");
    let whole = mpir_target::debuginfo::ElfFile::parse(path, bytes.clone().into()).unwrap();
    let sparse = mpir_target::debuginfo::ElfFile::parse_sparse(path, bytes).unwrap();
    assert_eq!(sparse.symbol_count(), whole.symbol_count());
    assert!(whole.symbol_count() > 0);
    for name in ["main", "zoo", "zoo_ptr"] {
        assert_eq!(sparse.symbols(name), whole.symbols(name), "{name}");
    }
    assert_eq!(sparse.build_id(), whole.build_id());
    assert_eq!(sparse.has_dwarf(), whole.has_dwarf());
    assert_eq!(sparse.segments(), whole.segments());
}
