//! The agent side as a real process: this test binary re-run with `MPIR_WIRE_TEST_ROLE` set
//! runs [`role`] only. Its stdout is the test harness's (sent to /dev/null); the protocol goes
//! over its stdin, a socket (bidirectional, as an engine's forwarded stdio is to the agent),
//! or over TLS.

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};

use mpir_wire::{
    Connection, ContentKind, Fingerprint, Hello, Message, MessageKind, Options, TlsStream, Token,
    Transport,
};

const ROLE: &str = "MPIR_WIRE_TEST_ROLE";

/// Starts this binary as an agent of `role`, with `stdin` and extra environment.
pub(crate) fn spawn(role: &str, stdin: Stdio, env: &[(&str, String)]) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child::role", "--test-threads=1", "--quiet"])
        .env(ROLE, role)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .stdin(stdin)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// Answers each request with a reply carrying the same id, route and payload, until a
/// goodbye; announces itself with a notice first.
fn echo<T: Transport>(conn: &mut Connection<T>) {
    let hi = Message::new(
        MessageKind::Notice,
        ContentKind::Json,
        format!("{{\"pid\":{}}}", std::process::id()).into_bytes(),
    );
    conn.send(&hi).unwrap();
    loop {
        let msg = conn.recv().unwrap();
        match msg.kind {
            MessageKind::Goodbye => return,
            MessageKind::Request => {
                let reply = Message::new(MessageKind::Reply, msg.content, msg.payload)
                    .with_request(msg.request)
                    .with_route(msg.route);
                conn.send(&reply).unwrap();
            }
            other => panic!("unexpected {other}"),
        }
    }
}

fn stdin_socket() -> UnixStream {
    UnixStream::from(std::io::stdin().as_fd().try_clone_to_owned().unwrap())
}

#[test]
fn role() {
    let Ok(role) = std::env::var(ROLE) else {
        return; // not a child: nothing to do
    };
    let hello = Hello::new("child-node", std::process::id());
    let opts = crate::quick();
    match role.as_str() {
        "echo" => {
            let (mut conn, _) = Connection::agent(stdin_socket(), &hello, &opts).unwrap();
            echo(&mut conn);
        }
        "die-mid-frame" => {
            let (mut conn, _) = Connection::agent(stdin_socket(), &hello, &opts).unwrap();
            let reply = Message::new(MessageKind::Reply, ContentKind::Binary, vec![7; 1000]);
            let frames = reply.to_frames(&conn.peer_limits()).unwrap();
            conn.get_mut().write_all(&frames[..500]).unwrap();
            conn.get_mut().flush().unwrap();
            std::process::abort();
        }
        "tls-file" | "tls-env" => {
            let addr = std::env::var("MPIR_WIRE_ADDR").unwrap().parse().unwrap();
            let pin: Fingerprint = std::env::var("MPIR_WIRE_PIN").unwrap().parse().unwrap();
            let token = if role == "tls-file" {
                let path = std::env::var("MPIR_WIRE_TOKEN_FILE").unwrap();
                Token::take_file(path.as_ref()).unwrap()
            } else {
                Token::from_env("MPIR_WIRE_TOKEN").unwrap()
            };
            let hello = Hello::new(std::env::var("MPIR_WIRE_NODE").unwrap(), std::process::id())
                .with_token(token);
            let tls = TlsStream::connect(addr, &pin, &Options::default()).unwrap();
            let (mut conn, _) = Connection::agent(tls, &hello, &opts).unwrap();
            echo(&mut conn);
        }
        other => panic!("unknown role {other}"),
    }
}
