use super::*;
use std::os::unix::fs::PermissionsExt;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("mpir-wire-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir(&dir).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    dir
}

#[test]
fn tokens_are_random_and_their_text_round_trips() {
    let a = Token::generate().unwrap();
    let b = Token::generate().unwrap();
    assert!(!a.matches(&b));
    let hex = a.to_hex();
    assert_eq!(hex.len(), 64);
    assert!(Token::from_hex(&hex).unwrap().matches(&a));
    assert!(
        Token::from_hex(&format!("  {}\n", hex.to_uppercase()))
            .unwrap()
            .matches(&a)
    );
    assert_eq!(
        format!("{a:?}"),
        "Token(..)",
        "Debug never shows the secret"
    );
    for bad in ["", "abc", &hex[1..], &format!("{}g", &hex[1..])] {
        assert!(
            matches!(Token::from_hex(bad), Err(TokenError::Malformed { .. })),
            "{bad:?}"
        );
    }
}

#[test]
fn a_token_file_is_private_read_once_and_deleted() {
    let dir = scratch("file");
    let t = Token::generate().unwrap();
    let path = t.write_file(&dir, "node/2 ../x").unwrap();
    assert_eq!(
        path.parent().unwrap(),
        dir,
        "the name cannot leave the directory"
    );
    let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // Never over an existing file.
    assert!(matches!(
        t.write_file(&dir, "node/2 ../x"),
        Err(TokenError::Io { .. })
    ));
    let read = Token::take_file(&path).unwrap();
    assert!(read.matches(&t));
    assert!(!path.exists(), "deleted once read");
    assert!(matches!(
        Token::take_file(&path),
        Err(TokenError::Io { .. })
    ));
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_open_directory_or_file_is_refused() {
    let dir = scratch("open");
    let t = Token::generate().unwrap();
    let path = t.write_file(&dir, "n").unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
    match Token::take_file(&path) {
        Err(TokenError::Unsafe { why, .. }) => assert!(why.contains("644"), "{why}"),
        other => panic!("{other:?}"),
    }
    assert!(path.exists(), "a refused file is left alone");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    assert!(matches!(
        Token::take_file(&path),
        Err(TokenError::Unsafe { .. })
    ));
    assert!(matches!(
        t.write_file(&dir, "m"),
        Err(TokenError::Unsafe { .. })
    ));
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    // A symbolic link to the token is not followed.
    let link = dir.join("link.token");
    std::os::unix::fs::symlink(&path, &link).unwrap();
    assert!(Token::take_file(&link).is_err());
    assert!(path.exists());
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_reader_gives_at_most_one_line() {
    let t = Token::generate().unwrap();
    let text = format!("{}\nmore frames follow", t.to_hex());
    assert!(Token::read_from(text.as_bytes()).unwrap().matches(&t));
    let endless = std::io::repeat(b'a');
    assert!(matches!(
        Token::read_from(endless),
        Err(TokenError::Malformed { .. })
    ));
}

#[test]
fn the_environment_form_reads_the_variable() {
    assert!(matches!(
        Token::from_env("MPIR_WIRE_TEST_UNSET_VARIABLE"),
        Err(TokenError::NoVariable { .. })
    ));
    // PATH is set and is not a token.
    assert!(matches!(
        Token::from_env("PATH"),
        Err(TokenError::Malformed { .. })
    ));
}

#[test]
fn the_book_admits_each_token_once_for_its_node_until_it_expires() {
    let book = TokenBook::new(Duration::from_secs(100));
    let t0 = Instant::now();
    let a = book.issue_at("node2", t0).unwrap();
    let b = book.issue_at("node3", t0).unwrap();
    assert_ne!(a.agent_id, b.agent_id);
    assert_ne!(a.agent_id, AgentId::FRONT_END);

    let hello = |node: &str, t: &Token| Hello::new(node, 1).with_token(t.clone());
    let reason = |r: Result<AgentId, Refusal>| r.unwrap_err().reason;

    // node3's token presented by node2: unknown.
    assert_eq!(
        reason(book.admit_at(&hello("node2", &b.token), t0)),
        RefusalReason::TokenUnknown
    );
    assert_eq!(
        reason(book.admit_at(&hello("node9", &a.token), t0)),
        RefusalReason::TokenUnknown
    );
    assert_eq!(
        reason(book.admit_at(&Hello::new("node2", 1), t0)),
        RefusalReason::TokenMissing
    );
    assert_eq!(
        book.admit_at(&hello("node2", &a.token), t0).unwrap(),
        a.agent_id
    );
    assert_eq!(
        reason(book.admit_at(&hello("node2", &a.token), t0)),
        RefusalReason::TokenReused
    );
    let late = t0 + Duration::from_secs(100);
    assert_eq!(
        reason(book.admit_at(&hello("node3", &b.token), late)),
        RefusalReason::TokenExpired
    );
    // An expired token stays unused: still expired, not admitted later.
    assert_eq!(
        reason(book.admit_at(&hello("node3", &b.token), late)),
        RefusalReason::TokenExpired
    );

    let c = book.refusals();
    assert_eq!((c.missing, c.unknown, c.reused, c.expired), (1, 2, 1, 2));
    assert_eq!(c.total(), 6);

    // Re-issuing keeps the node's id and voids the old token.
    let a2 = book.issue_at("node2", t0).unwrap();
    assert_eq!(a2.agent_id, a.agent_id);
    assert_eq!(
        reason(book.admit_at(&hello("node2", &a.token), t0)),
        RefusalReason::TokenUnknown
    );
    assert_eq!(
        book.admit_at(&hello("node2", &a2.token), t0).unwrap(),
        a.agent_id
    );
}
