use super::*;
use crate::debuginfo::SymbolStore;

fn key() -> Key {
    Key {
        build_id: vec![0xfe, 0xed, 0x01],
        image: 123_456,
        debug: 0,
    }
}

fn sample() -> HashMap<Query, Answer> {
    let mut answers = HashMap::new();
    answers.insert(Query::At(0x1000), Some((Arc::from("main"), 0x10)));
    answers.insert(Query::At(0x2000), None);
    answers.insert(
        Query::Stub {
            body: 0x3000,
            at: 0x3004,
        },
        Some((Arc::from("PMPI_Recv é"), 4)),
    );
    answers
}

#[test]
fn answers_round_trip() {
    let bytes = encode(&key(), &sample());
    let (k, answers) = decode(&bytes).unwrap();
    assert_eq!(k, key());
    assert_eq!(answers, sample());
}

#[test]
fn every_truncation_and_corruption_is_refused_without_panic() {
    let bytes = encode(&key(), &sample());
    for n in 0..bytes.len() {
        assert!(decode(&bytes[..n]).is_err(), "truncated to {n} bytes");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(decode(&longer).is_err(), "a byte past the end");
    let mut magic = bytes.clone();
    magic[0] ^= 1;
    assert!(decode(&magic).unwrap_err().contains("magic"));
    // Every single byte flipped: an error or another well-formed file, never a panic.
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] = b[i].wrapping_add(0x41);
        let _ = decode(&b);
    }
    // A count far past what the bytes hold.
    let mut huge = MAGIC.to_vec();
    put_id(&mut huge, &key().build_id);
    huge.extend_from_slice(&0u64.to_le_bytes());
    huge.extend_from_slice(&0u64.to_le_bytes());
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode(&huge).unwrap_err().contains("more than"));
}

#[test]
fn the_same_question_twice_is_refused() {
    let mut answers = HashMap::new();
    answers.insert(Query::At(1), None);
    let mut bytes = encode(&key(), &answers);
    // count 1 -> 2, and the entry repeated.
    let entry = bytes[bytes.len() - 10..].to_vec();
    let count_at = bytes.len() - 10 - 4;
    bytes[count_at..count_at + 4].copy_from_slice(&2u32.to_le_bytes());
    bytes.extend_from_slice(&entry);
    assert!(decode(&bytes).unwrap_err().contains("twice"));
}

#[test]
#[cfg_attr(miri, ignore = "writes files, which Miri's isolation forbids")]
fn answers_are_used_only_for_the_files_they_came_from() {
    let dir = std::env::temp_dir().join(format!("mpir-functions-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = SymbolStore::open(&dir).unwrap();
    store
        .write(&file_name(&key().build_id), &encode(&key(), &sample()))
        .unwrap();
    assert_eq!(load(&store, &key()).unwrap(), Some(sample()));
    // Another debug file (installed since), another image size (a stripped copy): unused.
    for other in [
        Key {
            debug: 4096,
            ..key()
        },
        Key { image: 1, ..key() },
    ] {
        assert_eq!(load(&store, &other).unwrap(), None, "{other:?}");
    }
    // A file named for one build-id that names another: refused.
    let mut liar = key();
    liar.build_id = vec![1, 2, 3];
    store
        .write(&file_name(&key().build_id), &encode(&liar, &sample()))
        .unwrap();
    assert!(matches!(
        load(&store, &key()),
        Err(StoreError::Malformed { .. })
    ));
    let _ = std::fs::remove_dir_all(&dir);
}
