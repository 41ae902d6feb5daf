use super::*;

fn msg(kind: MessageKind, payload: &[u8]) -> Message {
    Message::new(kind, ContentKind::Binary, payload.to_vec())
        .with_request(RequestId(0x0102_0304_0506_0708))
        .with_route(Route {
            agent: AgentId(7),
            hops: 2,
        })
}

/// Feeds `bytes` `step` at a time; all messages, or the first error.
fn decode_all(limits: Limits, bytes: &[u8], step: usize) -> Result<Vec<Message>, FrameError> {
    let mut d = Decoder::new(limits);
    let mut out = Vec::new();
    for chunk in bytes.chunks(step.max(1)) {
        let mut input = chunk;
        while !input.is_empty() {
            let p = d.feed(input)?;
            input = &input[p.consumed..];
            out.extend(p.output);
        }
    }
    d.finish()?;
    Ok(out)
}

#[test]
fn the_header_is_laid_out_as_documented() {
    let frames = msg(MessageKind::Reply, b"xyz")
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    assert_eq!(frames.len(), HEADER_LEN + 3);
    assert_eq!(&frames[0..4], b"MPRW");
    assert_eq!(&frames[4..6], &[1, 0]);
    assert_eq!(frames[6], 5, "reply");
    assert_eq!(frames[7], 3, "binary");
    assert_eq!(frames[8], 0, "no more frames");
    assert_eq!(frames[9], 2, "hops");
    assert_eq!(&frames[10..12], &[0, 0]);
    assert_eq!(&frames[12..16], &[3, 0, 0, 0]);
    assert_eq!(&frames[16..24], &[8, 7, 6, 5, 4, 3, 2, 1]);
    assert_eq!(&frames[24..28], &[7, 0, 0, 0]);
    assert_eq!(&frames[28..], b"xyz");
}

#[test]
fn messages_round_trip_whatever_the_read_sizes() {
    let big: Vec<u8> = (0..(2 * MAX_FRAME + 17)).map(|i| (i % 251) as u8).collect();
    let sent = vec![
        msg(MessageKind::Request, b""),
        msg(MessageKind::Reply, b"hello"),
        msg(MessageKind::Notice, &big),
        Message::new(MessageKind::Goodbye, ContentKind::Empty, Vec::new()),
    ];
    let mut bytes = Vec::new();
    for m in &sent {
        m.encode(&Limits::DEFAULT, &mut bytes).unwrap();
    }
    // The big one is three frames.
    assert_eq!(bytes.len(), 4 * HEADER_LEN + 2 * HEADER_LEN + 5 + big.len());
    for step in [1, 7, HEADER_LEN, 4096, bytes.len()] {
        assert_eq!(
            decode_all(Limits::DEFAULT, &bytes, step).unwrap(),
            sent,
            "step {step}"
        );
    }
}

#[test]
fn wrong_magic_is_named_at_once_with_its_offset() {
    let mut bytes = msg(MessageKind::Reply, b"ok")
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    let second = bytes.len() as u64;
    bytes.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
    let e = decode_all(Limits::DEFAULT, &bytes, 1).unwrap_err();
    assert_eq!(
        e,
        FrameError::BadMagic {
            at: second,
            found: *b"G\0\0\0",
            expected: MAGIC
        },
        "named on its first byte"
    );
    let e = decode_all(Limits::DEFAULT, &bytes, 100).unwrap_err();
    assert!(
        matches!(e, FrameError::BadMagic { at, found: [b'G', b'E', b'T', b' '], .. } if at == second),
        "{e}"
    );
}

#[test]
fn another_version_names_both() {
    let mut bytes = msg(MessageKind::Hello, b"")
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    bytes[4..6].copy_from_slice(&7u16.to_le_bytes());
    let e = decode_all(Limits::DEFAULT, &bytes, 5).unwrap_err();
    assert_eq!(
        e,
        FrameError::Version {
            at: 0,
            ours: 1,
            theirs: 7
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("version 7") && text.contains("version 1"),
        "{text}"
    );
}

#[test]
fn unknown_codes_name_their_field() {
    let good = msg(MessageKind::Reply, b"ok")
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    for (offset, value, field) in [
        (6, 0u8, "message kind"),
        (6, 99, "message kind"),
        (7, 9, "content kind"),
        (8, 2, "flags"),
        (9, MAX_HOPS + 1, "hops"),
        (10, 1, "reserved"),
    ] {
        let mut bytes = good.clone();
        bytes[offset] = value;
        match decode_all(Limits::DEFAULT, &bytes, 64) {
            Err(FrameError::UnknownCode {
                field: f, at: 0, ..
            }) => assert_eq!(f, field),
            other => panic!("byte {offset} = {value}: {other:?}"),
        }
    }
}

#[test]
fn an_oversize_frame_is_refused_from_its_header_before_any_payload() {
    let limits = Limits::HANDSHAKE;
    let mut header = msg(MessageKind::Hello, &[0; 10])
        .to_frames(&limits)
        .unwrap();
    header.truncate(HEADER_LEN);
    // Claim 4 GiB - 1.
    header[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut d = Decoder::new(limits);
    let e = d.feed(&header).unwrap_err();
    assert_eq!(
        e,
        FrameError::FrameTooLarge {
            at: 0,
            len: u64::from(u32::MAX),
            limit: 4096
        }
    );
    // The decoder stays failed.
    assert_eq!(d.feed(&[0; 4]).unwrap_err(), e);
    // Just over the handshake's 4 KiB, and the 64 MiB default's 1 MiB frames.
    header[12..16].copy_from_slice(&4097u32.to_le_bytes());
    assert!(matches!(
        Decoder::new(limits).feed(&header),
        Err(FrameError::FrameTooLarge { len: 4097, .. })
    ));
    header[12..16].copy_from_slice(&(MAX_FRAME as u32 + 1).to_le_bytes());
    assert!(matches!(
        Decoder::new(Limits::DEFAULT).feed(&header),
        Err(FrameError::FrameTooLarge { .. })
    ));
}

#[test]
fn a_message_over_its_limit_is_refused_on_the_frame_that_crosses_it() {
    let limits = Limits::new(MAX_FRAME + 10);
    let big = vec![1u8; MAX_FRAME + 10];
    let bytes = msg(MessageKind::Reply, &big).to_frames(&limits).unwrap();
    assert_eq!(decode_all(limits, &bytes, 1 << 16).unwrap().len(), 1);
    let smaller = Limits::new(MAX_FRAME + 9);
    let e = decode_all(smaller, &bytes, 1 << 16).unwrap_err();
    assert!(
        matches!(e, FrameError::MessageTooLarge { at, len, frames: 2, .. } if at == (HEADER_LEN + MAX_FRAME) as u64 && len == big.len() as u64),
        "{e:?}"
    );
    // The sender refuses it first.
    assert!(matches!(
        msg(MessageKind::Reply, &big).to_frames(&smaller),
        Err(FrameError::Oversize { .. })
    ));
}

#[test]
fn endless_empty_continuation_frames_hit_the_frame_limit() {
    let mut one = msg(MessageKind::Reply, b"")
        .to_frames(&Limits::HANDSHAKE)
        .unwrap();
    one[8] = 1; // "more"
    let bytes = one.repeat(3);
    let e = decode_all(Limits::HANDSHAKE, &bytes, 1000).unwrap_err();
    assert!(
        matches!(
            e,
            FrameError::MessageTooLarge {
                frames: 2,
                max_frames: 1,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn frames_of_two_messages_may_not_interleave() {
    let mut first = msg(MessageKind::Reply, b"a")
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    first[8] = 1;
    let second = msg(MessageKind::Notice, b"b")
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    let bytes = [first.clone(), second].concat();
    let e = decode_all(Limits::DEFAULT, &bytes, 3).unwrap_err();
    assert_eq!(
        e,
        FrameError::Interleaved {
            at: first.len() as u64,
            expected: MessageKind::Reply,
            got: MessageKind::Notice
        }
    );
}

#[test]
fn a_stream_cut_anywhere_inside_a_frame_is_truncated_with_counts() {
    let bytes = msg(MessageKind::Reply, b"0123456789")
        .to_frames(&Limits::DEFAULT)
        .unwrap();
    for cut in 1..bytes.len() {
        let e = decode_all(Limits::DEFAULT, &bytes[..cut], 4).unwrap_err();
        let wanted = if cut < HEADER_LEN {
            HEADER_LEN
        } else {
            bytes.len()
        };
        assert_eq!(
            e,
            FrameError::Truncated {
                at: 0,
                have: cut as u64,
                wanted: wanted as u64
            },
            "cut at {cut}"
        );
    }
    assert!(
        Decoder::new(Limits::DEFAULT).finish().is_ok(),
        "nothing at all is a clean end"
    );
}

#[test]
fn relaying_counts_hops_up_to_the_bound() {
    let mut r = Route::to(AgentId(3));
    for _ in 0..MAX_HOPS {
        r = r.relayed().unwrap();
    }
    assert_eq!(r.hops, MAX_HOPS);
    assert_eq!(r.relayed(), None);

    let m = msg(MessageKind::Reply, b"up");
    let up = m.clone().relayed().unwrap();
    assert_eq!((up.route.agent, up.route.hops), (AgentId(7), 3));
    assert_eq!(up.payload, m.payload);
    assert_eq!(m.with_route(r).relayed(), None);
}

#[test]
fn every_tag_reads_back_as_itself() {
    for k in MessageKind::ALL {
        assert_eq!(MessageKind::from_code(k.code()), Some(*k));
    }
    for c in ContentKind::ALL {
        assert_eq!(ContentKind::from_code(c.code()), Some(*c));
    }
    assert_eq!(MessageKind::from_code(0), None);
}

#[test]
fn limits_derive_frame_counts() {
    assert_eq!(Limits::HANDSHAKE.max_frame(), 4096);
    assert_eq!(Limits::HANDSHAKE.max_frames(), 1);
    assert_eq!(Limits::DEFAULT.max_frame(), MAX_FRAME);
    assert_eq!(Limits::DEFAULT.max_frames(), 64);
    assert_eq!(Limits::new(0).max_frames(), 1);
}
