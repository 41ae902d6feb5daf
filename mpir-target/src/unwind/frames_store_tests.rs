use super::*;
use crate::debuginfo::SymbolStore;
use std::path::PathBuf;

fn frame(function: Option<&str>, location: Option<(&str, u32)>) -> SourceFrame {
    SourceFrame {
        function: function.map(Arc::from),
        location: location.map(|(f, l)| (Arc::from(f), l)),
    }
}

fn sample() -> Stored {
    let mut answers = HashMap::new();
    answers.insert(
        0x1234,
        Arc::from(vec![
            frame(Some("inlined_one"), Some(("a.c", 10))),
            frame(Some("outer"), Some(("dir/é.c", 77))),
        ]),
    );
    answers.insert(0x99, Arc::from(vec![frame(None, Some(("b.c", 3)))]));
    answers.insert(0x5, Arc::from(vec![frame(Some("no_line"), None)]));
    answers.insert(0x6, Arc::from(Vec::<SourceFrame>::new()));
    Stored {
        build_id: vec![0xde, 0xad, 0xbe, 0xef],
        sizes: Sizes {
            dwarf: 4096,
            sup: 0,
        },
        answers,
    }
}

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mpir-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_store_file_reads_back_what_was_written() {
    let s = sample();
    let bytes = s.encode();
    assert_eq!(Stored::decode(&bytes).unwrap(), s);
    // The same answers encode to the same bytes (sorted by address).
    assert_eq!(Stored::decode(&bytes).unwrap().encode(), bytes);
}

#[test]
fn every_cut_and_every_flipped_byte_is_refused_or_read_without_panic() {
    let bytes = sample().encode();
    for cut in 0..bytes.len() {
        let e = Stored::decode(&bytes[..cut]).unwrap_err();
        assert!(!e.is_empty(), "cut at {cut}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(
        Stored::decode(&longer)
            .unwrap_err()
            .contains("after the last answer")
    );
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0xff;
        let _ = Stored::decode(&b);
    }
}

#[test]
fn hostile_counts_and_strings_are_refused_with_where() {
    let mut b = Vec::new();
    b.extend_from_slice(MAGIC);
    b.push(1);
    b.push(7);
    b.extend_from_slice(&[0; 16]);
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(Stored::decode(&b).unwrap_err().contains("more than"));
    // One answer whose frame claims a 4 GiB name.
    let mut b2 = b[..b.len() - 4].to_vec();
    b2.extend_from_slice(&1u32.to_le_bytes());
    b2.extend_from_slice(&0u64.to_le_bytes());
    b2.push(1);
    b2.push(HAS_FUNCTION);
    let at = b2.len();
    b2.extend_from_slice(&u32::MAX.to_le_bytes());
    let e = Stored::decode(&b2).unwrap_err();
    assert!(e.contains(&format!("at byte {at}")), "{e}");
    // Invalid UTF-8 in a name.
    let mut b3 = b2[..at].to_vec();
    b3.extend_from_slice(&2u32.to_le_bytes());
    b3.extend_from_slice(&[0xff, 0xfe]);
    assert!(Stored::decode(&b3).unwrap_err().contains("not UTF-8"));
    // Unknown flags, too many frames, a wrong magic.
    let mut b4 = b2[..at - 1].to_vec();
    b4.push(0x80);
    assert!(
        Stored::decode(&b4)
            .unwrap_err()
            .contains("unknown frame flags")
    );
    let mut b5 = b2[..at - 2].to_vec();
    b5.push(200);
    assert!(Stored::decode(&b5).unwrap_err().contains("200 frames"));
    assert!(Stored::decode(b"MPIRFRM0").unwrap_err().contains("magic"));
}

#[test]
#[cfg_attr(miri, ignore = "writes files, which Miri's isolation forbids")]
fn frames_are_kept_per_build_id_and_only_for_the_same_debug_files() {
    let dir = tempdir("frames");
    let store = SymbolStore::open(&dir).unwrap();
    let s = sample();
    assert_eq!(load(&store, &s.build_id, s.sizes).unwrap(), None);
    save(&store, &s).unwrap();
    assert!(dir.join("deadbeef.frames").is_file());
    assert_eq!(load(&store, &s.build_id, s.sizes).unwrap(), Some(s.clone()));
    // Another debug file (a size that differs): the answers are not used.
    let other = Sizes {
        dwarf: 4097,
        sup: 0,
    };
    assert_eq!(load(&store, &s.build_id, other).unwrap(), None);
    // A file renamed to another build-id's name is refused, not believed.
    std::fs::rename(dir.join("deadbeef.frames"), dir.join("0102.frames")).unwrap();
    let e = load(&store, &[1, 2], s.sizes).unwrap_err();
    assert!(matches!(e, StoreError::Malformed { .. }), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}
