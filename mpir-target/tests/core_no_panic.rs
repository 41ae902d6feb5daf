//! Core-file parsing on corrupted real cores: a gcore of a running process, its headers and
//! notes flipped at random and the file cut anywhere, through the same harness the `core` fuzz
//! target runs (`mpir_target::fuzzing::core`). Nothing may panic, hang or allocate without
//! bound.

mod support;

use std::process::Command;
use std::sync::OnceLock;

use mpir_target::MemoryExt;
use mpir_target::corefile::CoreFile;
use proptest::prelude::*;
use support::*;

/// A real core's bytes and where its headers and notes end (the first segment's data).
fn seed() -> Option<&'static (Vec<u8>, usize)> {
    static SEED: OnceLock<Option<(Vec<u8>, usize)>> = OnceLock::new();
    SEED.get_or_init(|| {
        if !have("gcore") {
            skip("gcore (gdb) is not installed");
            return None;
        }
        let dir = scratch("core-nopanic");
        let mut sleeper = Command::new("sleep").arg("60").spawn().ok()?;
        let prefix = dir.join("core");
        let dumped = run(Command::new("gcore")
            .arg("-o")
            .arg(&prefix)
            .arg(sleeper.id().to_string()));
        let path = format!("{}.{}", prefix.display(), sleeper.id());
        let _ = sleeper.kill();
        let _ = sleeper.wait();
        if let Err(e) = dumped {
            skip(&e);
            return None;
        }
        let core = CoreFile::open(std::path::Path::new(&path)).ok()?;
        let headers_end = core.segments().iter().map(|s| s.offset).min()? as usize;
        Some((std::fs::read(&path).ok()?, headers_end))
    })
    .as_ref()
}

#[test]
fn the_seed_parses_and_reads() {
    let Some((bytes, headers_end)) = seed() else {
        return;
    };
    assert!(*headers_end > 64 && *headers_end < bytes.len());
    let dir = scratch("core-nopanic-seed");
    let path = dir.join("core");
    std::fs::write(&path, bytes).unwrap();
    let core = CoreFile::open(&path).unwrap();
    assert!(core.pid().is_some() && !core.threads().is_empty());
    assert_eq!(core.truncation(), None);
    // Memory is readable, not just parsed: the program name AT_EXECFN points at, on the stack.
    let execfn = core.auxv().iter().find(|(k, _)| *k == 31).map(|&(_, v)| v); // AT_EXECFN
    assert!(
        execfn.is_some_and(|a| core.read_vec(a, 1).is_ok()),
        "AT_EXECFN string readable"
    );
    mpir_target::fuzzing::core(bytes);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// Flips in the ELF header, program headers and notes (where the parser reads), and a cut.
    #[test]
    fn corrupted_headers_and_notes(
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..16),
        cut in prop::option::of(any::<prop::sample::Index>()),
    ) {
        let Some((bytes, headers_end)) = seed() else { return Ok(()) };
        let mut data = bytes.clone();
        for (at, x) in flips {
            data[at.index(*headers_end)] ^= x;
        }
        if let Some(cut) = cut {
            data.truncate(cut.index(data.len()));
        }
        mpir_target::fuzzing::core(&data);
    }

    #[test]
    fn random_bytes_after_an_elf_core_header(tail in prop::collection::vec(any::<u8>(), 0..4096)) {
        let Some((bytes, _)) = seed() else { return Ok(()) };
        let mut data = bytes[..64].to_vec();
        data.extend(tail);
        mpir_target::fuzzing::core(&data);
    }
}
