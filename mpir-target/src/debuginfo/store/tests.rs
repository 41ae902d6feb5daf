use super::*;
use std::os::unix::fs::PermissionsExt;

fn tempdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mpir-store-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn sym(address: u64, binding: Binding, table: SymbolTable) -> ElfSymbol {
    ElfSymbol {
        address,
        size: 8,
        kind: SymbolKind::Object,
        binding,
        table,
    }
}

fn names() -> HashMap<String, Vec<ElfSymbol>> {
    let mut m = HashMap::new();
    m.insert(
        "MPIR_proctable".to_string(),
        vec![sym(0x4010, Binding::Global, SymbolTable::Symtab)],
    );
    m.insert(
        "counter".to_string(),
        vec![
            sym(0x10, Binding::Local, SymbolTable::Symtab),
            sym(0x20, Binding::Local, SymbolTable::Symtab),
        ],
    );
    m.insert("MPI2DD_INFO".to_string(), Vec::new());
    m.insert(
        "_PyRuntime".to_string(),
        vec![sym(1, Binding::Weak, SymbolTable::Dynsym)],
    );
    m
}

#[test]
fn a_names_file_reads_back_what_was_written_and_refuses_any_other_file() {
    let id = [0xab, 0xcd];
    let bytes = encode_names(&id, 1234, &names());
    assert_eq!(decode_names(&bytes, &id, 1234).unwrap(), names());
    assert_eq!(
        encode_names(&id, 1234, &decode_names(&bytes, &id, 1234).unwrap()),
        bytes
    );
    // The same build-id, another size (a stripped copy): refused.
    assert!(
        decode_names(&bytes, &id, 1235)
            .unwrap_err()
            .contains("another file")
    );
    assert!(
        decode_names(&bytes, &[0xab], 1234)
            .unwrap_err()
            .contains("another file")
    );
    for cut in 0..bytes.len() {
        assert!(
            decode_names(&bytes[..cut], &id, 1234).is_err(),
            "cut at {cut}"
        );
    }
    for i in 0..bytes.len() {
        let mut b = bytes.clone();
        b[i] ^= 0xff;
        let _ = decode_names(&b, &id, 1234);
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(
        decode_names(&longer, &id, 1234)
            .unwrap_err()
            .contains("after the last")
    );
}

#[test]
fn hostile_names_files_are_refused_with_where() {
    let id = [7u8];
    let mut b = Vec::new();
    b.extend_from_slice(NAMES_MAGIC);
    put_id(&mut b, &id);
    b.extend_from_slice(&9u64.to_le_bytes());
    let head = b.clone();
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_names(&b, &id, 9).unwrap_err().contains("more than"));
    // One name claiming a million symbols.
    let mut b2 = head.clone();
    b2.extend_from_slice(&1u32.to_le_bytes());
    put_string(&mut b2, "x");
    let at = b2.len();
    b2.extend_from_slice(&1_000_000u32.to_le_bytes());
    let e = decode_names(&b2, &id, 9).unwrap_err();
    assert!(e.contains(&format!("at byte {at}")), "{e}");
    // A symbol kind out of range.
    let mut b3 = b2[..at].to_vec();
    b3.extend_from_slice(&1u32.to_le_bytes());
    b3.extend_from_slice(&[0; 16]);
    b3.extend_from_slice(&[9, 0, 0]);
    assert!(
        decode_names(&b3, &id, 9)
            .unwrap_err()
            .contains("symbol kind 9")
    );
    assert!(
        decode_names(b"MPIRSYM0", &id, 9)
            .unwrap_err()
            .contains("magic")
    );
}

#[test]
#[cfg_attr(miri, ignore = "writes files, which Miri's isolation forbids")]
fn names_are_kept_in_private_files() {
    let dir = tempdir("names");
    let store = SymbolStore::open(&dir).unwrap();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    assert_eq!(store.load_names(&[1, 2], 5).unwrap(), None);
    store.save_names(&[1, 2], 5, &names()).unwrap();
    let file = dir.join("0102-5.names");
    let fmode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(fmode, 0o600);
    assert_eq!(store.load_names(&[1, 2], 5).unwrap(), Some(names()));
    assert_eq!(store.load_names(&[1, 2], 6).unwrap(), None);
    // No temporary file is left behind.
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
#[cfg_attr(miri, ignore = "writes files, which Miri's isolation forbids")]
fn a_store_another_user_could_write_is_not_used() {
    let dir = tempdir("open");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = SymbolStore::open(&dir).unwrap_err();
    assert!(matches!(e, StoreError::NotPrivate { .. }), "{e}");
    assert!(e.to_string().contains("mode 777"), "{e}");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let store = SymbolStore::open(&dir).unwrap();
    // A store file writable by others, or a link, is refused the same way.
    store.save_names(&[1], 1, &names()).unwrap();
    let file = dir.join("01-1.names");
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o666)).unwrap();
    assert!(matches!(
        store.load_names(&[1], 1).unwrap_err(),
        StoreError::NotPrivate { .. }
    ));
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", &file).unwrap();
    assert!(matches!(
        store.load_names(&[1], 1).unwrap_err(),
        StoreError::Io { .. }
    ));
    // A file that is not a directory is no store.
    let not_dir = dir.join("plain");
    std::fs::write(&not_dir, b"x").unwrap();
    assert!(SymbolStore::open(&not_dir).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_default_place_follows_the_environment() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |k: &str| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| std::ffi::OsString::from(v))
        }
    };
    let mine = |p: &Path| p == Path::new("/h") || p == Path::new("/c");
    assert_eq!(
        default_dir_from(env(&[("MPIR_SYMBOL_CACHE", "/x"), ("HOME", "/h")]), mine),
        Some(PathBuf::from("/x"))
    );
    assert_eq!(
        default_dir_from(env(&[("MPIR_SYMBOL_CACHE", "off"), ("HOME", "/h")]), mine),
        None
    );
    // Unnamed: the conventional place, when the directory it lies in is this user's.
    assert_eq!(
        default_dir_from(env(&[("HOME", "/h")]), mine),
        Some(PathBuf::from("/h/.cache/mpir/symbols"))
    );
    assert_eq!(
        default_dir_from(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")]), mine),
        Some(PathBuf::from("/c/mpir/symbols"))
    );
    // Another user's home (root run with someone's HOME): no store unless named.
    assert_eq!(default_dir_from(env(&[("HOME", "/other")]), mine), None);
    assert_eq!(
        default_dir_from(env(&[("XDG_CACHE_HOME", "/other"), ("HOME", "/h")]), mine),
        None
    );
    assert_eq!(default_dir_from(env(&[]), mine), None);
    assert_eq!(
        conventional_dir_from(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")])),
        Some(PathBuf::from("/c/mpir/symbols"))
    );
    assert_eq!(
        conventional_dir_from(env(&[("HOME", "/h")])),
        Some(PathBuf::from("/h/.cache/mpir/symbols"))
    );
    assert_eq!(conventional_dir_from(env(&[])), None);
}

#[test]
#[cfg_attr(miri, ignore = "Miri has no file system")]
fn the_default_place_needs_a_base_of_this_users() {
    let dir = std::env::temp_dir().join(format!("mpir-store-base-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    assert!(base_is_mine(&dir));
    assert!(!base_is_mine(&dir.join("missing")));
    // A file is no base.
    let file = dir.join("file");
    std::fs::write(&file, b"").unwrap();
    assert!(!base_is_mine(&file));
    std::fs::remove_dir_all(&dir).unwrap();
}
