//! Fuzz harnesses, shared by `fuzz/` (libFuzzer) and `tests/fuzz.rs` (bounded, in every
//! `cargo test`). Each must never panic, whatever the input.

use crate::frame::NodeId;
use crate::frame::{Decoder, Limits};
use crate::handshake::{AgentHandshake, FrontEndHandshake, Hello, Refusal, RefusalReason, Welcome};

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
                        front.welcome(&Welcome::new(NodeId(1), limits));
                        let _ = hello;
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
