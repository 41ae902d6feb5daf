//! Fuzz harnesses, shared by `fuzz/` (libFuzzer target `agent_wire`) and `tests/wire/fuzz.rs`
//! (bounded, in every `cargo test`). Each must never panic, whatever the input.

use crate::codec::encode_to_vec;
use crate::frame::{AgentId, ContentKind, Decoder, Limits, Message, MessageKind, RequestId, Route};
use crate::handshake::{AgentHandshake, FrontEndHandshake, Hello, Refusal, RefusalReason, Welcome};
use crate::token::{Token, TokenBook};

/// The frame decoder and both handshakes over `data`: the first byte chooses the limits and
/// how the rest is cut into reads; every decoded message must re-encode to frames that
/// decode to the same message.
pub fn frames(data: &[u8]) {
    let Some((&control, rest)) = data.split_first() else {
        return;
    };
    let limits = match control & 3 {
        0 => Limits::HANDSHAKE,
        1 => Limits::new(0),
        2 => Limits::new(100),
        _ => Limits::new(3 << 20),
    };
    let step = usize::from(control >> 2).max(1);

    let mut decoder = Decoder::new(limits);
    let mut front = FrontEndHandshake::new();
    let mut agent = AgentHandshake::new(&Hello::new("fuzz", 1));
    let book = TokenBook::new(std::time::Duration::from_secs(60));
    let (mut front_done, mut agent_done) = (false, false);
    for chunk in rest.chunks(step) {
        let mut input = chunk;
        while !input.is_empty() {
            let Ok(p) = decoder.feed(input) else { break };
            assert!(p.consumed <= input.len());
            if let Some(msg) = p.output {
                assert!(msg.payload.len() <= limits.max_message());
                let again = msg
                    .to_frames(&limits)
                    .expect("a received message fits its limits");
                let mut d = Decoder::new(limits);
                let p2 = d.feed(&again).expect("re-encoded frames decode");
                assert_eq!(p2.consumed, again.len());
                assert_eq!(p2.output.as_ref(), Some(&msg));
            }
            if p.consumed == 0 {
                break;
            }
            input = &input[p.consumed..];
        }
        if !front_done {
            match front.feed(chunk) {
                Ok(p) => {
                    if let Some(hello) = p.output {
                        match book.admit(&hello) {
                            Ok(id) => front.welcome(&Welcome::new(id, limits)),
                            Err(refusal) => front.refuse(&refusal),
                        }
                        front_done = true;
                    }
                }
                Err(_) => front_done = true,
            }
        }
        if !agent_done {
            agent_done = agent
                .feed(chunk)
                .map(|p| p.output.is_some())
                .unwrap_or(true);
        }
    }
    let _ = decoder.finish();
    let _ = front.take_outgoing();
    let _ = Refusal::new(RefusalReason::Other, String::from_utf8_lossy(rest));
}

/// Valid inputs for [`frames`]: a control byte, then a handshake message (hello with and
/// without a token, welcome, refusal) and a few messages of every kind, including one of
/// several frames. Seeds for the fuzzer (`fuzz/seed.sh`) and for the bounded test's
/// mutations.
pub fn seeds() -> Vec<Vec<u8>> {
    let control = |kind, value: Vec<u8>| Message::new(kind, ContentKind::Control, value);
    let token = Token::from_bytes([0x5a; crate::token::TOKEN_LEN]);
    let openings = [
        control(MessageKind::Hello, encode_to_vec(&Hello::new("node1", 9))),
        control(
            MessageKind::Hello,
            encode_to_vec(&Hello::new("node2", 10).with_token(token)),
        ),
        control(
            MessageKind::Welcome,
            encode_to_vec(&Welcome::new(AgentId(3), Limits::DEFAULT)),
        ),
        control(
            MessageKind::Refusal,
            encode_to_vec(&Refusal::new(RefusalReason::TokenReused, "used")),
        ),
    ];
    let mut seeds = Vec::new();
    for (i, opening) in openings.iter().enumerate() {
        // Limits: handshake, 0, 100 bytes, 3 MiB; reads of 1, 5, 29 and 64 bytes.
        let control_byte = [1u8, 5, 29, 64][i] << 2 | i as u8;
        let mut out = vec![control_byte];
        opening
            .encode(&Limits::DEFAULT, &mut out)
            .unwrap_or_default();
        for (n, kind) in MessageKind::ALL.iter().enumerate() {
            let content = ContentKind::ALL[n % ContentKind::ALL.len()];
            let m = Message::new(*kind, content, vec![b'{'; n * 7])
                .with_request(RequestId(n as u64))
                .with_route(Route::to(AgentId(n as u32)));
            m.encode(&Limits::DEFAULT, &mut out).unwrap_or_default();
        }
        seeds.push(out);
    }
    let mut long = vec![3u8 | 64 << 2];
    let big = Message::new(
        MessageKind::Reply,
        ContentKind::Binary,
        vec![1; crate::MAX_FRAME + 3],
    );
    big.encode(&Limits::DEFAULT, &mut long).unwrap_or_default();
    seeds.push(long);
    seeds
}
