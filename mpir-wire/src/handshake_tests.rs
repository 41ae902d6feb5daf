use super::*;
use crate::frame::HEADER_LEN;
use crate::token::TokenBook;
use std::time::Duration;

/// Runs both sides in memory, the front end deciding with `decide`.
fn exchange(
    hello: &Hello,
    decide: impl FnOnce(&Hello) -> Result<Welcome, Refusal>,
) -> (
    Result<Hello, HandshakeError>,
    Result<Welcome, HandshakeError>,
) {
    let mut agent = AgentHandshake::new(hello);
    let mut front = FrontEndHandshake::new();
    let to_front = agent.take_outgoing();
    let got = front.feed(&to_front).map(|p| {
        assert_eq!(p.consumed, to_front.len());
        p.output.expect("a whole hello")
    });
    if let Ok(h) = &got {
        match decide(h) {
            Ok(w) => front.welcome(&w),
            Err(r) => front.refuse(&r),
        }
    }
    let to_agent = front.take_outgoing();
    let answer = agent
        .feed(&to_agent)
        .map(|p| p.output.expect("a whole answer"));
    (got, answer)
}

#[test]
fn a_welcome_round_trips_with_every_field() {
    let token = Token::generate().unwrap();
    let mut hello = Hello::new("node2", 4242).with_token(token.clone());
    hello.max_message = 1000;
    let (got, answer) = exchange(&hello, |h| {
        assert_eq!(h, &hello);
        assert!(h.token.as_ref().unwrap().matches(&token));
        Ok(Welcome::new(AgentId(9), Limits::new(12345)))
    });
    assert_eq!(got.unwrap().pid, 4242);
    let w = answer.unwrap();
    assert_eq!(w.agent_id, AgentId(9));
    assert_eq!(w.max_message, 12345);
}

#[test]
fn a_refusal_reaches_the_agent_with_its_reason() {
    let book = TokenBook::new(Duration::from_secs(60));
    let (_, answer) = exchange(&Hello::new("node2", 1), |h| {
        book.admit(h).map(|id| Welcome::new(id, Limits::DEFAULT))
    });
    match answer {
        Err(HandshakeError::Refused(r)) => assert_eq!(r.reason, RefusalReason::TokenMissing),
        other => panic!("{other:?}"),
    }
    assert_eq!(book.refusals().missing, 1);
}

#[test]
fn a_hello_of_another_version_is_refused_naming_both_versions() {
    let mut bytes = AgentHandshake::new(&Hello::new("n", 1)).take_outgoing();
    bytes[4..6].copy_from_slice(&2u16.to_le_bytes());
    let mut front = FrontEndHandshake::new();
    match front.feed(&bytes) {
        Err(HandshakeError::Frame(FrameError::Version {
            ours: 1, theirs: 2, ..
        })) => {}
        other => panic!("{other:?}"),
    }
    // The refusal is queued, in the front end's own version: an agent of version 2 would
    // read its header's version and name both.
    let out = front.take_outgoing();
    let msg = Decoder::new(Limits::HANDSHAKE)
        .feed(&out)
        .unwrap()
        .output
        .unwrap();
    let refusal: Refusal = control(&msg).unwrap();
    assert_eq!(refusal.reason, RefusalReason::Version);
    assert!(
        refusal.detail.contains("version 1") && refusal.detail.contains('2'),
        "{refusal}"
    );
}

#[test]
fn a_message_other_than_hello_first_is_refused_as_malformed() {
    let req = Message::new(MessageKind::Request, ContentKind::Json, b"{}".to_vec())
        .to_frames(&Limits::HANDSHAKE)
        .unwrap();
    let mut front = FrontEndHandshake::new();
    assert!(matches!(
        front.feed(&req),
        Err(HandshakeError::Unexpected {
            got: MessageKind::Request,
            ..
        })
    ));
    assert!(!front.take_outgoing().is_empty(), "a refusal is queued");
}

#[test]
fn a_hello_with_a_bad_body_names_the_field() {
    // A node name claiming 300 bytes (over the 255 limit).
    let mut body = Vec::new();
    body.extend_from_slice(&300u16.to_le_bytes());
    body.extend_from_slice(&[b'a'; 300]);
    let bytes = Message::new(MessageKind::Hello, ContentKind::Control, body)
        .to_frames(&Limits::HANDSHAKE)
        .unwrap();
    match FrontEndHandshake::new().feed(&bytes) {
        Err(HandshakeError::Decode {
            kind: MessageKind::Hello,
            source:
                DecodeError::TooLong {
                    field: "node name",
                    len: 300,
                    limit: 255,
                    ..
                },
        }) => {}
        other => panic!("{other:?}"),
    }
    // Trailing bytes after a valid hello.
    let mut body = encode_to_vec(&Hello::new("n", 1));
    body.push(0);
    let bytes = Message::new(MessageKind::Hello, ContentKind::Control, body)
        .to_frames(&Limits::HANDSHAKE)
        .unwrap();
    assert!(matches!(
        FrontEndHandshake::new().feed(&bytes),
        Err(HandshakeError::Decode {
            source: DecodeError::Trailing { count: 1, .. },
            ..
        })
    ));
}

#[test]
fn a_hello_over_the_handshake_limit_is_refused_from_its_header() {
    let bytes = Message::new(MessageKind::Hello, ContentKind::Control, vec![0; 5000])
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    let mut front = FrontEndHandshake::new();
    let e = front.feed(&bytes[..HEADER_LEN]).unwrap_err();
    assert!(
        matches!(
            e,
            HandshakeError::Frame(FrameError::FrameTooLarge {
                len: 5000,
                limit: 4096,
                ..
            })
        ),
        "{e:?}"
    );
}

#[test]
fn long_names_and_details_are_cut_to_their_limits() {
    let h = Hello::new("é".repeat(200), 1);
    assert!(h.node.len() <= MAX_NODE_NAME);
    let r = Refusal::new(RefusalReason::Other, "x".repeat(5000));
    assert_eq!(r.detail.len(), MAX_REFUSAL_DETAIL);
    let back: Refusal = decode_all(&encode_to_vec(&r), "refusal").unwrap();
    assert_eq!(back, r);
}
