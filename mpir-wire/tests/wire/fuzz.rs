//! The fuzz harness (`mpir_wire::fuzzing::frames`, also the libFuzzer target `agent_wire`)
//! on bounded inputs in every test run: random bytes, and valid frame streams mutated.

use mpir_wire::{ContentKind, Hello, Limits, Message, MessageKind, NodeId, RequestId, Route};
use proptest::prelude::*;

/// A valid stream: a control byte, then a hello and some messages as frames.
fn valid_stream(control: u8, payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![control];
    let hello = mpir_wire::AgentHandshake::new(&Hello::new("node1", 9)).take_outgoing();
    out.extend(hello);
    for (i, p) in payloads.iter().enumerate() {
        let m = Message::new(MessageKind::Request, ContentKind::Json, p.clone())
            .with_request(RequestId(i as u64))
            .with_route(Route::to(NodeId(i as u32)));
        m.encode(&Limits::DEFAULT, &mut out).unwrap();
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn random_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        mpir_wire::fuzzing::frames(&data);
    }

    #[test]
    fn mutated_streams_never_panic(
        control in any::<u8>(),
        payloads in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..80), 0..4),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mut data = valid_stream(control, &payloads);
        for (at, value) in flips {
            let i = at.index(data.len());
            data[i] = value;
        }
        let end = 1 + cut.index(data.len());
        mpir_wire::fuzzing::frames(&data[..end]);
    }
}

#[test]
fn the_unmutated_stream_decodes_every_message() {
    // The harness itself asserts re-encoding; here the valid stream must get through it.
    let data = valid_stream(3 << 2 | 3, &[b"{}".to_vec(), vec![b'x'; 300]]);
    mpir_wire::fuzzing::frames(&data);
    let mut d = mpir_wire::Decoder::new(Limits::DEFAULT);
    let mut seen = 0;
    let mut input = &data[1..];
    while !input.is_empty() {
        let p = d.feed(input).unwrap();
        seen += usize::from(p.output.is_some());
        input = &input[p.consumed..];
    }
    assert_eq!(seen, 3);
}
