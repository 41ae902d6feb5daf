//! Frames over pipes and sockets: a child process agent, real pipes between threads, and
//! hostile peers (garbage, other versions, silence, oversize, death mid-frame).

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use mpir_wire::{
    AgentId, Connection, ContentKind, FrameError, Gate, HandshakeError, Hello, Limits, MAGIC,
    Message, MessageKind, Phase, Pipe, RefusalReason, RequestId, Route, TokenBook, WireError,
};

use crate::{child, quick, request};

fn goodbye() -> Message {
    Message::new(MessageKind::Goodbye, ContentKind::Empty, Vec::new())
}

#[test]
fn a_child_agent_answers_over_its_forwarded_stdio() {
    let (front, agent_end) = UnixStream::pair().unwrap();
    let mut child = child::spawn(
        "echo",
        Stdio::from(std::os::fd::OwnedFd::from(agent_end)),
        &[],
    );
    let accepted = Connection::front_end(front, &Gate::Engine(AgentId(5)), &quick()).unwrap();
    assert_eq!(accepted.agent_id, AgentId(5));
    assert_eq!(accepted.hello.node, "child-node");
    assert_eq!(accepted.hello.pid, child.id());
    assert!(accepted.hello.token.is_none());
    let mut conn = accepted.connection;

    let notice = conn.recv().unwrap();
    assert_eq!(notice.kind, MessageKind::Notice);
    assert_eq!(
        notice.payload,
        format!("{{\"pid\":{}}}", child.id()).as_bytes()
    );

    // A small request, then one of several frames, routed through a relay.
    conn.send(&request(1, "{\"stacks\":[]}")).unwrap();
    let big: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7) as u8).collect();
    let route = Route::to(AgentId(42)).relayed().unwrap();
    conn.send(
        &Message::new(MessageKind::Request, ContentKind::Binary, big.clone())
            .with_request(RequestId(2))
            .with_route(route),
    )
    .unwrap();
    let r1 = conn.recv().unwrap();
    assert_eq!(
        (r1.kind, r1.request, r1.payload.as_slice()),
        (MessageKind::Reply, RequestId(1), &b"{\"stacks\":[]}"[..])
    );
    let r2 = conn.recv().unwrap();
    assert_eq!(
        (r2.request, r2.route, r2.content),
        (RequestId(2), route, ContentKind::Binary)
    );
    assert!(r2.payload == big, "3 MB payload intact");

    conn.send(&goodbye()).unwrap();
    assert!(child.wait().unwrap().success());
    // The child is gone: a clean end between messages.
    assert!(matches!(
        conn.recv(),
        Err(WireError::Closed {
            during: Phase::Receive
        })
    ));
}

#[test]
fn a_child_that_dies_mid_frame_is_a_truncated_frame() {
    let (front, agent_end) = UnixStream::pair().unwrap();
    let mut child = child::spawn(
        "die-mid-frame",
        Stdio::from(std::os::fd::OwnedFd::from(agent_end)),
        &[],
    );
    let mut conn = Connection::front_end(front, &Gate::Engine(AgentId(1)), &quick())
        .unwrap()
        .connection;
    match conn.recv() {
        Err(WireError::Frame {
            during: Phase::Receive,
            source: FrameError::Truncated {
                have: 500, wanted, ..
            },
        }) => assert_eq!(wanted, 28 + 1000),
        other => panic!("{other:?}"),
    }
    let status = child.wait().unwrap();
    assert!(!status.success(), "the child aborted");
}

/// A pair of real pipes: (front end's transport, agent's transport).
fn pipes() -> (Pipe<File, File>, Pipe<File, File>) {
    let (a_read, b_write) = nix::unistd::pipe().unwrap();
    let (b_read, a_write) = nix::unistd::pipe().unwrap();
    (
        Pipe::new(File::from(a_read), File::from(a_write)),
        Pipe::new(File::from(b_read), File::from(b_write)),
    )
}

#[test]
fn a_round_trip_over_real_pipes_with_a_token() {
    let (front, agent) = pipes();
    let book = TokenBook::new(Duration::from_secs(60));
    let issued = book.issue("node7").unwrap();
    let hello = Hello::new("node7", 77).with_token(issued.token);
    let agent = thread::spawn(move || {
        let (mut conn, welcome) = Connection::agent(agent, &hello, &quick()).unwrap();
        let req = conn.recv().unwrap();
        conn.send(
            &Message::new(MessageKind::Reply, ContentKind::Json, req.payload)
                .with_request(req.request),
        )
        .unwrap();
        welcome
    });
    let mut accepted = Connection::front_end(front, &Gate::Tokens(&book), &quick()).unwrap();
    assert_eq!(accepted.agent_id, issued.agent_id);
    accepted.connection.send(&request(9, "[1,2]")).unwrap();
    let reply = accepted.connection.recv().unwrap();
    assert_eq!(
        (reply.request, reply.payload.as_slice()),
        (RequestId(9), &b"[1,2]"[..])
    );
    assert_eq!(agent.join().unwrap().agent_id, issued.agent_id);
}

#[test]
fn a_thousand_frames_round_trip() {
    let (front, agent) = pipes();
    let agent = thread::spawn(move || {
        let (mut conn, _) = Connection::agent(agent, &Hello::new("n", 1), &quick()).unwrap();
        for _ in 0..1000 {
            let req = conn.recv().unwrap();
            conn.send(
                &Message::new(MessageKind::Reply, req.content, req.payload)
                    .with_request(req.request),
            )
            .unwrap();
        }
    });
    let mut conn = Connection::front_end(front, &Gate::Engine(AgentId(1)), &quick())
        .unwrap()
        .connection;
    for i in 0..1000u64 {
        let body = format!("{{\"i\":{i}}}");
        conn.send(&request(i, &body)).unwrap();
        let reply = conn.recv().unwrap();
        assert_eq!(
            (reply.request, reply.payload),
            (RequestId(i), body.into_bytes())
        );
    }
    agent.join().unwrap();
}

#[test]
fn garbage_before_a_hello_is_bad_magic_and_the_agent_is_told() {
    let (front, mut peer) = UnixStream::pair().unwrap();
    peer.write_all(b"SSH-2.0-OpenSSH_9.2\r\n").unwrap();
    match Connection::front_end(front, &Gate::Engine(AgentId(1)), &quick()) {
        Err(WireError::Handshake(HandshakeError::Frame(FrameError::BadMagic {
            at: 0,
            found,
            expected,
        }))) => {
            assert_eq!((&found, expected), (b"SSH-", MAGIC));
        }
        other => panic!("{other:?}"),
    }
    let answer = read_answer(&mut peer);
    assert_eq!(answer.kind, MessageKind::Refusal);
    assert_eq!(answer.payload[0], RefusalReason::Malformed.code());
}

/// Reads one message as a raw peer would.
fn read_answer(peer: &mut UnixStream) -> Message {
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut d = mpir_wire::Decoder::new(Limits::HANDSHAKE);
    let mut buf = [0u8; 4096];
    loop {
        let n = peer.read(&mut buf).unwrap();
        assert!(n > 0, "closed before an answer");
        if let Some(m) = d.feed(&buf[..n]).unwrap().output {
            return m;
        }
    }
}

#[test]
fn versions_are_named_on_both_sides() {
    // An agent of version 2 meets this front end.
    let (front, mut peer) = UnixStream::pair().unwrap();
    let mut hello = Message::new(MessageKind::Hello, ContentKind::Control, Vec::new())
        .to_frames(&Limits::HANDSHAKE)
        .unwrap();
    hello[4..6].copy_from_slice(&2u16.to_le_bytes());
    peer.write_all(&hello).unwrap();
    let e = Connection::front_end(front, &Gate::Engine(AgentId(1)), &quick()).unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Handshake(HandshakeError::Frame(FrameError::Version {
                ours: 1,
                theirs: 2,
                ..
            }))
        ),
        "{e:?}"
    );
    let refusal = read_answer(&mut peer);
    let detail = String::from_utf8_lossy(&refusal.payload[3..]).into_owned();
    assert!(
        detail.contains("version 1") && detail.contains("agent 2"),
        "{detail}"
    );

    // A front end of version 3 answers this agent.
    let (agent_end, mut front_peer) = UnixStream::pair().unwrap();
    let t = thread::spawn(move || {
        let mut buf = [0u8; 4096];
        let _ = front_peer.read(&mut buf).unwrap();
        let mut welcome = Message::new(MessageKind::Welcome, ContentKind::Control, vec![0; 12])
            .to_frames(&Limits::HANDSHAKE)
            .unwrap();
        welcome[4..6].copy_from_slice(&3u16.to_le_bytes());
        front_peer.write_all(&welcome).unwrap();
    });
    let e = Connection::agent(agent_end, &Hello::new("n", 1), &quick()).unwrap_err();
    let text = format!("{}", std::error::Error::source(&e).unwrap());
    assert!(text.contains("not frames"), "{text}");
    assert!(
        matches!(
            e,
            WireError::Handshake(HandshakeError::Frame(FrameError::Version {
                ours: 1,
                theirs: 3,
                ..
            }))
        ),
        "{e:?}"
    );
    t.join().unwrap();
}

#[test]
fn a_silent_peer_is_a_bounded_handshake_timeout() {
    let opts = quick().with_handshake_timeout(Duration::from_millis(300));
    let (front, _silent) = UnixStream::pair().unwrap();
    let start = Instant::now();
    let e = Connection::front_end(front, &Gate::Engine(AgentId(1)), &opts).unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Timeout {
                during: Phase::Handshake,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));

    // Over pipes, the agent waiting for an answer that never comes.
    let (_front, agent) = pipes();
    let e = Connection::agent(agent, &Hello::new("n", 1), &opts).unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Timeout {
                during: Phase::Handshake,
                ..
            }
        ),
        "{e:?}"
    );

    // A peer that sends half a hello and then nothing.
    let (front, mut peer) = UnixStream::pair().unwrap();
    peer.write_all(&MAGIC).unwrap();
    let e = Connection::front_end(front, &Gate::Engine(AgentId(1)), &opts).unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Timeout {
                during: Phase::Handshake,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn a_hello_that_is_too_big_is_refused_from_its_header() {
    let (front, mut peer) = UnixStream::pair().unwrap();
    let mut header = Message::new(MessageKind::Hello, ContentKind::Control, Vec::new())
        .to_frames(&Limits::HANDSHAKE)
        .unwrap();
    header[12..16].copy_from_slice(&(64u32 << 20).to_le_bytes());
    peer.write_all(&header).unwrap();
    match Connection::front_end(front, &Gate::Engine(AgentId(1)), &quick()) {
        Err(WireError::Handshake(HandshakeError::Frame(FrameError::FrameTooLarge {
            len,
            limit: 4096,
            ..
        }))) => {
            assert_eq!(len, 64 << 20)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn oversize_after_the_handshake_is_refused_by_both_sides() {
    let (front, agent) = UnixStream::pair().unwrap();
    let small = quick().with_limits(Limits::new(10_000));
    let agent = thread::spawn(move || {
        let (mut conn, welcome) = Connection::agent(agent, &Hello::new("n", 1), &quick()).unwrap();
        assert_eq!(welcome.max_message, 10_000);
        // The sender refuses before writing anything.
        let big = Message::new(MessageKind::Reply, ContentKind::Binary, vec![0; 10_001]);
        assert!(matches!(
            conn.send(&big),
            Err(WireError::Frame {
                during: Phase::Send,
                source: FrameError::Oversize {
                    len: 10_001,
                    limit: 10_000,
                    ..
                }
            })
        ));
        // A peer that writes it anyway.
        let frames = big.to_frames(&Limits::DEFAULT).unwrap();
        conn.get_mut().write_all(&frames).unwrap();
        conn
    });
    let mut conn = Connection::front_end(front, &Gate::Engine(AgentId(1)), &small)
        .unwrap()
        .connection;
    match conn.recv() {
        Err(WireError::Frame {
            during: Phase::Receive,
            source:
                FrameError::FrameTooLarge {
                    len: 10_001,
                    limit: 10_000,
                    ..
                },
        }) => {}
        other => panic!("{other:?}"),
    }
    drop(agent.join().unwrap());
}
