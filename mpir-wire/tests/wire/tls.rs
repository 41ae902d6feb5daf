//! TCP + TLS on 127.0.0.1: agents (child processes and threads) connecting out to a front
//! end whose ephemeral certificate they pin; tokens from a file and from the environment;
//! wrong certificates, tokens and peers.

use std::io::Write;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Stdio;
use std::thread;
use std::time::{Duration, Instant};

use mpir_wire::{
    Accepted, Connection, ContentKind, Fingerprint, FrameError, Gate, HandshakeError, Hello,
    Limits, Message, MessageKind, Options, Phase, RefusalReason, RequestId, ServerIdentity,
    TlsListener, TlsStream, Token, TokenBook, WireError,
};

use crate::{Scratch, child, quick, request};

fn listener() -> TlsListener {
    let identity = ServerIdentity::generate().unwrap();
    let l = TlsListener::bind("127.0.0.1:0".parse().unwrap(), &identity).unwrap();
    assert_eq!(l.fingerprint(), identity.fingerprint());
    assert_eq!(
        Fingerprint::of_certificate(identity.certificate_der()),
        identity.fingerprint()
    );
    l
}

/// Talks to a child agent: its notice, two requests, goodbye; the child must exit cleanly.
fn converse(accepted: Accepted<TlsStream>, mut child: std::process::Child) {
    assert_eq!(accepted.hello.pid, child.id());
    let mut conn = accepted.connection;
    assert_eq!(conn.recv().unwrap().kind, MessageKind::Notice);
    for i in 0..2 {
        conn.send(&request(i, "{\"queues\":true}")).unwrap();
        let r = conn.recv().unwrap();
        assert_eq!((r.kind, r.request), (MessageKind::Reply, RequestId(i)));
        assert_eq!(r.payload, b"{\"queues\":true}");
    }
    conn.send(&Message::new(
        MessageKind::Goodbye,
        ContentKind::Empty,
        Vec::new(),
    ))
    .unwrap();
    assert!(child.wait().unwrap().success());
}

fn child_env(l: &TlsListener, node: &str) -> Vec<(&'static str, String)> {
    vec![
        ("MPIR_WIRE_ADDR", l.local_addr().unwrap().to_string()),
        ("MPIR_WIRE_PIN", l.fingerprint().to_string()),
        ("MPIR_WIRE_NODE", node.to_string()),
    ]
}

#[test]
fn a_child_agent_connects_out_with_its_token_file() {
    let l = listener();
    let book = TokenBook::new(Duration::from_secs(60));
    let issued = book.issue("node2").unwrap();
    let dir = Scratch::new("tls-file");
    let path = issued.token.write_file(dir.path(), "node2").unwrap();
    let mut env = child_env(&l, "node2");
    env.push(("MPIR_WIRE_TOKEN_FILE", path.display().to_string()));
    let child = child::spawn("tls-file", Stdio::null(), &env);
    let accepted = l
        .accept(Duration::from_secs(20), &Gate::Tokens(&book), &quick())
        .unwrap();
    assert_eq!(accepted.agent_id, issued.agent_id);
    assert_eq!(accepted.hello.node, "node2");
    assert!(!path.exists(), "the agent deleted the token file");
    converse(accepted, child);
    assert_eq!(book.refusals().total(), 0);
}

#[test]
fn a_child_agent_with_its_token_in_the_environment_and_a_replay_refused() {
    let l = listener();
    let book = TokenBook::new(Duration::from_secs(60));
    let issued = book.issue("node3").unwrap();
    let mut env = child_env(&l, "node3");
    env.push(("MPIR_WIRE_TOKEN", issued.token.to_hex()));
    let child = child::spawn("tls-env", Stdio::null(), &env);
    let accepted = l
        .accept(Duration::from_secs(20), &Gate::Tokens(&book), &quick())
        .unwrap();
    converse(accepted, child);

    // Someone who learned the token replays it.
    let hello = Hello::new("node3", 1).with_token(issued.token);
    let (agent, front) = attempt(&l, &book, hello, quick());
    assert_refused(agent, front, RefusalReason::TokenReused);
    assert_eq!(book.refusals().reused, 1);
}

/// One agent attempt on a thread against one accept: (agent's result, front end's result).
fn attempt(
    l: &TlsListener,
    book: &TokenBook,
    hello: Hello,
    opts: Options,
) -> (
    Result<(), WireError>,
    Result<Accepted<TlsStream>, WireError>,
) {
    let addr = l.local_addr().unwrap();
    let pin = l.fingerprint();
    let agent = thread::spawn(move || {
        let tls = TlsStream::connect(addr, &pin, &opts)?;
        Connection::agent(tls, &hello, &opts).map(drop)
    });
    let front = l.accept(Duration::from_secs(10), &Gate::Tokens(book), &opts);
    (agent.join().unwrap(), front)
}

fn assert_refused(
    agent: Result<(), WireError>,
    front: Result<Accepted<TlsStream>, WireError>,
    reason: RefusalReason,
) {
    match agent {
        Err(WireError::Handshake(HandshakeError::Refused(r))) => assert_eq!(r.reason, reason),
        other => panic!("agent: {other:?}"),
    }
    match front {
        Err(WireError::Handshake(HandshakeError::Refused(r))) => assert_eq!(r.reason, reason),
        other => panic!("front end: {other:?}"),
    }
}

#[test]
fn agents_without_the_right_token_are_refused_and_counted() {
    let l = listener();
    let book = TokenBook::new(Duration::from_secs(60));
    let real = book.issue("node2").unwrap();

    let (a, f) = attempt(&l, &book, Hello::new("node2", 1), quick());
    assert_refused(a, f, RefusalReason::TokenMissing);

    let forged = Hello::new("node2", 1).with_token(Token::generate().unwrap());
    let (a, f) = attempt(&l, &book, forged, quick());
    assert_refused(a, f, RefusalReason::TokenUnknown);

    // The right token claimed for another node.
    let elsewhere = Hello::new("node9", 1).with_token(real.token.clone());
    let (a, f) = attempt(&l, &book, elsewhere, quick());
    assert_refused(a, f, RefusalReason::TokenUnknown);

    let (a, f) = attempt(
        &l,
        &book,
        Hello::new("node2", 1).with_token(real.token.clone()),
        quick(),
    );
    a.unwrap();
    assert_eq!(f.unwrap().agent_id, real.agent_id);

    let (a, f) = attempt(
        &l,
        &book,
        Hello::new("node2", 1).with_token(real.token),
        quick(),
    );
    assert_refused(a, f, RefusalReason::TokenReused);

    let short = TokenBook::new(Duration::from_millis(1));
    let old = short.issue("node4").unwrap();
    thread::sleep(Duration::from_millis(20));
    let (a, f) = attempt(
        &l,
        &short,
        Hello::new("node4", 1).with_token(old.token),
        quick(),
    );
    assert_refused(a, f, RefusalReason::TokenExpired);

    let c = book.refusals();
    assert_eq!((c.missing, c.unknown, c.reused, c.expired), (1, 2, 1, 0));
    assert_eq!(short.refusals().expired, 1);
}

#[test]
fn an_agent_refuses_a_server_with_another_certificate() {
    let l = listener();
    let other = ServerIdentity::generate().unwrap();
    assert_ne!(other.fingerprint(), l.fingerprint());
    let addr = l.local_addr().unwrap();
    let pin = other.fingerprint();
    let agent = thread::spawn(move || TlsStream::connect(addr, &pin, &quick()));
    let book = TokenBook::new(Duration::from_secs(60));
    let front = l.accept(Duration::from_secs(10), &Gate::Tokens(&book), &quick());
    match agent.join().unwrap() {
        Err(WireError::FingerprintMismatch {
            expected,
            presented,
        }) => {
            assert_eq!(expected, other.fingerprint());
            assert_eq!(presented, l.fingerprint());
        }
        other => panic!("{other:?}"),
    }
    let e = front.unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Tls {
                during: Phase::Tls,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn silent_peers_on_either_side_time_out() {
    let l = listener();
    let opts = quick().with_handshake_timeout(Duration::from_millis(300));
    let book = TokenBook::new(Duration::from_secs(60));
    let _silent = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let start = Instant::now();
    let e = l
        .accept(Duration::from_secs(5), &Gate::Tokens(&book), &opts)
        .unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Timeout {
                during: Phase::Tls,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(start.elapsed() < Duration::from_secs(3));

    // Nobody connecting at all.
    let e = l.accept_tcp(Duration::from_millis(100)).unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Timeout {
                during: Phase::Connect,
                ..
            }
        ),
        "{e:?}"
    );

    // A "front end" that accepts TCP and never speaks TLS.
    let mute = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr: SocketAddr = mute.local_addr().unwrap();
    let e = TlsStream::connect(addr, &l.fingerprint(), &opts).unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Timeout {
                during: Phase::Tls,
                ..
            }
        ),
        "{e:?}"
    );
    drop(mute);

    // A TLS client that never says hello (TLS itself gets time enough on a loaded machine).
    let addr = l.local_addr().unwrap();
    let pin = l.fingerprint();
    let t = thread::spawn(move || {
        let tls = TlsStream::connect(addr, &pin, &quick()).unwrap();
        thread::sleep(Duration::from_millis(2500));
        drop(tls);
    });
    let opts = quick().with_handshake_timeout(Duration::from_millis(1500));
    let e = l
        .accept(Duration::from_secs(5), &Gate::Tokens(&book), &opts)
        .unwrap_err();
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
    t.join().unwrap();
}

#[test]
fn plain_text_to_the_tls_port_is_a_tls_error() {
    let l = listener();
    let book = TokenBook::new(Duration::from_secs(60));
    let mut plain = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    plain
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let e = l
        .accept(Duration::from_secs(5), &Gate::Tokens(&book), &quick())
        .unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Tls {
                during: Phase::Tls,
                ..
            }
        ),
        "{e:?}"
    );
}

#[test]
fn an_oversize_hello_inside_tls_is_refused_from_its_header() {
    let l = listener();
    let book = TokenBook::new(Duration::from_secs(60));
    let addr = l.local_addr().unwrap();
    let pin = l.fingerprint();
    let t = thread::spawn(move || {
        let mut tls = TlsStream::connect(addr, &pin, &quick()).unwrap();
        let mut frames = Message::new(MessageKind::Hello, ContentKind::Control, Vec::new())
            .to_frames(&Limits::HANDSHAKE)
            .unwrap();
        frames[12..16].copy_from_slice(&(1u32 << 20).to_le_bytes());
        tls.write_all(&frames).unwrap();
        tls.flush().unwrap();
        // Read the refusal.
        let mut d = mpir_wire::Decoder::new(Limits::HANDSHAKE);
        let mut buf = [0u8; 4096];
        loop {
            let n = std::io::Read::read(&mut tls, &mut buf).unwrap();
            assert!(n > 0);
            if let Some(m) = d.feed(&buf[..n]).unwrap().output {
                return m;
            }
        }
    });
    let e = l
        .accept(Duration::from_secs(5), &Gate::Tokens(&book), &quick())
        .unwrap_err();
    assert!(
        matches!(
            e,
            WireError::Handshake(HandshakeError::Frame(FrameError::FrameTooLarge {
                limit: 4096,
                ..
            }))
        ),
        "{e:?}"
    );
    let refusal = t.join().unwrap();
    assert_eq!(refusal.kind, MessageKind::Refusal);
    assert_eq!(refusal.payload[0], RefusalReason::Malformed.code());
    assert_eq!(book.refusals().total(), 0, "no token was ever checked");
}

#[test]
fn fingerprints_print_and_parse() {
    let id = ServerIdentity::generate().unwrap();
    let text = id.fingerprint().to_string();
    assert!(
        text.starts_with("sha256:") && text.len() == 7 + 64,
        "{text}"
    );
    assert_eq!(text.parse::<Fingerprint>().unwrap(), id.fingerprint());
    assert_eq!(text[7..].parse::<Fingerprint>().unwrap(), id.fingerprint());
    for bad in ["", "sha256:", "sha256:zz", &text[..70], &format!("{text}0")] {
        assert!(bad.parse::<Fingerprint>().is_err(), "{bad:?}");
    }
}

#[test]
fn several_threads_accept_several_agents_on_one_listener() {
    let l = listener();
    let book = TokenBook::new(Duration::from_secs(60));
    let nodes: Vec<String> = (0..6).map(|i| format!("node{i}")).collect();
    let agents: Vec<_> = nodes
        .iter()
        .map(|n| {
            let token = book.issue(n).unwrap().token;
            let hello = Hello::new(n.clone(), 1).with_token(token);
            let (addr, pin) = (l.local_addr().unwrap(), l.fingerprint());
            thread::spawn(move || {
                let tls = TlsStream::connect(addr, &pin, &quick()).unwrap();
                let (mut conn, welcome) = Connection::agent(tls, &hello, &quick()).unwrap();
                // 200 requests answered, each routed back as this node.
                for _ in 0..200 {
                    let r = conn.recv().unwrap();
                    let reply = Message::new(MessageKind::Reply, r.content, r.payload)
                        .with_request(r.request)
                        .with_route(mpir_wire::Route::to(welcome.agent_id));
                    conn.send(&reply).unwrap();
                }
            })
        })
        .collect();
    let seen = std::sync::Mutex::new(Vec::new());
    thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                for _ in 0..3 {
                    let mut a = l
                        .accept(Duration::from_secs(20), &Gate::Tokens(&book), &quick())
                        .unwrap();
                    for i in 0..200 {
                        a.connection.send(&request(i, &a.hello.node)).unwrap();
                        let r = a.connection.recv().unwrap();
                        assert_eq!(r.request, RequestId(i));
                        assert_eq!(r.route.agent, a.agent_id);
                        assert_eq!(r.payload, a.hello.node.as_bytes());
                    }
                    seen.lock().unwrap().push(a.hello.node.clone());
                }
            });
        }
    });
    for a in agents {
        a.join().unwrap();
    }
    let mut seen = seen.into_inner().unwrap();
    seen.sort();
    assert_eq!(seen, nodes);
    assert_eq!(book.refusals().total(), 0);
}

#[test]
fn an_orderly_close_an_abrupt_one_and_a_cut_message_are_told_apart() {
    let l = listener();
    let book = TokenBook::new(Duration::from_secs(60));
    for how in ["close", "drop", "cut"] {
        let token = book.issue(how).unwrap().token;
        let hello = Hello::new(how, 1).with_token(token);
        let (addr, pin) = (l.local_addr().unwrap(), l.fingerprint());
        let agent = thread::spawn(move || {
            let tls = TlsStream::connect(addr, &pin, &quick()).unwrap();
            let (mut conn, _) = Connection::agent(tls, &hello, &quick()).unwrap();
            conn.send(&request(1, "{}")).unwrap();
            match how {
                "close" => conn.close().unwrap(),
                "drop" => drop(conn),
                _ => {
                    let frames = request(2, "{\"cut\":1}")
                        .to_frames(&Limits::DEFAULT)
                        .unwrap();
                    conn.get_mut().write_all(&frames[..30]).unwrap();
                    conn.get_mut().flush().unwrap();
                    drop(conn);
                }
            }
        });
        let mut a = l
            .accept(Duration::from_secs(10), &Gate::Tokens(&book), &quick())
            .unwrap();
        agent.join().unwrap();
        assert_eq!(a.connection.recv().unwrap().request, RequestId(1));
        let e = a.connection.recv().unwrap_err();
        if how == "cut" {
            assert!(
                matches!(
                    e,
                    WireError::Frame {
                        during: Phase::Receive,
                        source: FrameError::Truncated { have: 30, .. }
                    }
                ),
                "{how}: {e:?}"
            );
        } else {
            assert!(
                matches!(
                    e,
                    WireError::Closed {
                        during: Phase::Receive
                    }
                ),
                "{how}: {e:?}"
            );
        }
    }
}
