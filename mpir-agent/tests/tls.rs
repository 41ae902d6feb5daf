//! The tool-daemon engine's security, in one process over loopback (no cluster needed): a
//! front end's [`Rendezvous`] and agents running [`run_tls`] on threads, beside attackers
//! speaking the wire protocol by hand. An agent given another certificate's fingerprint
//! sends nothing (no hello reaches the impostor); hellos without a token, with another node's
//! token or with a token used before are refused and counted, and the genuine agents of the
//! same front end are admitted and serve.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mpir_acquire::live::{NodeExpectations, RankClaim};
use mpir_agent::{
    Adopt, AgentConfig, AgentError, Ended, ReadSettings, Rendezvous, Reply, Request, TlsTarget,
    run_tls,
};
use mpir_wire::{
    Connection, ContentKind, Fingerprint, Gate, HandshakeError, Hello, Message, MessageKind,
    Options, RefusalReason, RequestId, ServerIdentity, TlsListener, TlsStream, Token, TokenBook,
    WireError,
};

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mpir-agent-tls-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn config(node: &str) -> AgentConfig {
    let mut c = AgentConfig::default().with_idle_timeout(Duration::from_secs(30));
    c.node = node.to_string();
    c
}

/// A copy of a token file, as someone who read it before the agent would hold it.
fn copy_token(dir: &Path, node: &str) -> Token {
    let text = std::fs::read_to_string(dir.join(Token::file_name(node))).unwrap();
    Token::from_hex(text.trim()).unwrap()
}

/// An attacker's hello: TLS to the genuine front end (its pin is public), then `hello`.
fn attack(addr: std::net::SocketAddr, pin: &Fingerprint, hello: Hello) -> RefusalReason {
    let tls = TlsStream::connect(addr, pin, &Options::default()).expect("TLS to the front end");
    match Connection::agent(tls, &hello, &Options::default()) {
        Err(WireError::Handshake(HandshakeError::Refused(r))) => r.reason,
        other => panic!("the front end let an attacker in: {other:?}"),
    }
}

#[test]
fn an_agent_pinned_to_another_certificate_sends_nothing() {
    // An impostor front end with a certificate of its own, and a token book that would
    // count any hello it receives.
    let impostor = ServerIdentity::generate().unwrap();
    let listener = TlsListener::bind("127.0.0.1:0".parse().unwrap(), &impostor).unwrap();
    let book = TokenBook::new(Duration::from_secs(60));
    let genuine = ServerIdentity::generate().unwrap().fingerprint();
    assert_ne!(genuine, impostor.fingerprint());
    // The agent's token, in a private directory.
    let dir = scratch("pin");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    Token::generate()
        .unwrap()
        .write_file(&dir, "node-x")
        .unwrap();
    let target = TlsTarget::new(listener.local_addr().unwrap(), genuine, dir.clone());
    let agent = std::thread::spawn(move || run_tls(&target, &config("node-x")));
    let at_impostor = listener.accept(
        Duration::from_secs(20),
        &Gate::Tokens(&book),
        &Options::default(),
    );
    let ended = agent.join().unwrap();
    match ended {
        Err(AgentError::Wire(WireError::FingerprintMismatch {
            expected,
            presented,
        })) => {
            assert_eq!(expected, genuine);
            assert_eq!(presented, impostor.fingerprint());
        }
        other => panic!("the agent did not refuse the impostor: {other:?}"),
    }
    // The TLS handshake failed before any hello: the impostor saw no node name, no token.
    match at_impostor {
        Err(WireError::Handshake(_)) | Ok(_) => panic!("a hello reached the impostor"),
        Err(_) => {}
    }
    assert_eq!(book.refusals().total(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hellos_without_the_right_token_are_refused_counted_and_the_other_agents_serve() {
    let parent = scratch("tokens");
    let nodes = ["node-a".to_string(), "node-b".to_string()];
    let rendezvous = Rendezvous::open(
        Some("127.0.0.1:0".parse().unwrap()),
        &parent,
        &nodes,
        Duration::from_secs(120),
    )
    .unwrap();
    let (addr, pin) = (rendezvous.address().unwrap(), rendezvous.fingerprint());
    let dir = rendezvous.token_dir().to_path_buf();
    // Private: the directory 0700, each file 0600, nothing secret in the arguments.
    let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o777;
    use std::os::unix::fs::MetadataExt;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&dir.join(Token::file_name("node-a"))), 0o600);
    let copy_a = copy_token(&dir, "node-a");
    let copy_b = copy_token(&dir, "node-b");
    let args = rendezvous.agent_arguments().join(" ");
    assert!(!args.contains(&copy_a.to_hex()) && !args.contains(&copy_b.to_hex()));
    assert!(args.contains(&pin.to_string()) && args.contains(&addr.to_string()));

    let give_up = AtomicBool::new(false);
    let again = AtomicBool::new(false);
    let deadline = Instant::now() + Duration::from_secs(60);
    std::thread::scope(|s| {
        let accepting = s.spawn(|| rendezvous.accept(deadline, &Options::default(), &give_up));
        // No token; node-b's token in a hello naming node-a.
        assert_eq!(
            attack(addr, &pin, Hello::new("node-a", 1)),
            RefusalReason::TokenMissing
        );
        assert_eq!(
            attack(
                addr,
                &pin,
                Hello::new("node-a", 2).with_token(copy_b.clone())
            ),
            RefusalReason::TokenUnknown
        );
        // The genuine agents, each from its own token file.
        let target = TlsTarget::new(addr, pin, dir.clone());
        let agents: Vec<_> = nodes
            .iter()
            .map(|n| {
                let (t, c) = (target.clone(), config(n));
                s.spawn(move || run_tls(&t, &c))
            })
            .collect();
        let mut links = accepting.join().unwrap();
        let mut got: Vec<&String> = links.keys().collect();
        got.sort();
        assert_eq!(got, [&nodes[0], &nodes[1]], "both genuine agents admitted");
        // The token files were read once and deleted.
        assert!(!dir.join(Token::file_name("node-a")).exists());
        // node-a's token again (copied before its agent used it): refused as reused, while
        // the front end accepts again.
        let late = s.spawn(|| {
            rendezvous.accept(
                Instant::now() + Duration::from_secs(20),
                &Options::default(),
                &again,
            )
        });
        assert_eq!(
            attack(
                addr,
                &pin,
                Hello::new("node-a", 3).with_token(copy_a.clone())
            ),
            RefusalReason::TokenReused
        );
        again.store(true, Ordering::Relaxed);
        assert!(late.join().unwrap().is_empty(), "the reused token admitted");
        let refused = rendezvous.refusals();
        assert_eq!(
            (refused.missing, refused.unknown, refused.reused),
            (1, 1, 1)
        );

        // The genuine agents serve: each adopts (a process of this node that is no rank of
        // any job: refused by its proof, answered all the same) and says goodbye.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let uid = nix::unistd::getuid().as_raw();
        for (i, n) in nodes.iter().enumerate() {
            let link = links.get_mut(n).unwrap();
            let claim = RankClaim::new(i as u64, i64::from(child.id()), n.clone(), None);
            let adopt = Adopt::new(
                vec![claim],
                NodeExpectations::new(uid),
                ReadSettings::default(),
            );
            link.send(&Request::Adopt(Box::new(adopt)).to_message(RequestId(7)))
                .unwrap();
            let reply = link.recv().unwrap();
            assert_eq!(reply.request, RequestId(7));
            match Reply::from_message(&reply).unwrap() {
                Reply::Adopted { node, ranks } => {
                    assert_eq!(&node, n);
                    assert_eq!(ranks.len(), 1);
                    assert_eq!(ranks[0].rank, i as u64);
                    assert!(ranks[0].problem.is_some(), "a non-rank was proven");
                }
                other => panic!("{n}: {other:?}"),
            }
            link.send(&Message::new(
                MessageKind::Goodbye,
                ContentKind::Empty,
                Vec::new(),
            ))
            .unwrap();
        }
        for a in agents {
            assert_eq!(a.join().unwrap().unwrap(), Ended::Bye);
        }
        let _ = child.kill();
        let _ = child.wait();
    });
    drop(rendezvous);
    assert!(!dir.exists(), "the token directory outlived the rendezvous");
    let _ = std::fs::remove_dir_all(&parent);
}

#[test]
fn an_agent_without_a_token_file_exits_quietly() {
    let parent = scratch("none");
    let rendezvous = Rendezvous::open(
        Some("127.0.0.1:0".parse().unwrap()),
        &parent,
        &["node-a".to_string()],
        Duration::from_secs(60),
    )
    .unwrap();
    let target = TlsTarget::new(
        rendezvous.address().unwrap(),
        rendezvous.fingerprint(),
        rendezvous.token_dir().to_path_buf(),
    );
    // A node the front end expects no agent on (no rank there): nothing to connect for.
    let ended = run_tls(&target, &config("node-without-ranks")).unwrap();
    assert_eq!(ended, Ended::NotExpected);
    assert_eq!(rendezvous.refusals().total(), 0);
    assert!(
        rendezvous
            .token_dir()
            .join(Token::file_name("node-a"))
            .exists(),
        "another node's token was touched"
    );
    drop(rendezvous);
    let _ = std::fs::remove_dir_all(&parent);
}

#[test]
fn an_agent_whose_front_end_vanishes_ends_on_its_own() {
    let parent = scratch("gone");
    let rendezvous = Rendezvous::open(
        Some("127.0.0.1:0".parse().unwrap()),
        &parent,
        &["node-a".to_string()],
        Duration::from_secs(60),
    )
    .unwrap();
    let target = TlsTarget::new(
        rendezvous.address().unwrap(),
        rendezvous.fingerprint(),
        rendezvous.token_dir().to_path_buf(),
    );
    let agent = std::thread::spawn(move || run_tls(&target, &config("node-a")));
    let links = rendezvous.accept(
        Instant::now() + Duration::from_secs(20),
        &Options::default(),
        &AtomicBool::new(false),
    );
    assert_eq!(links.len(), 1);
    // The front end's socket closes without a goodbye or TLS's closing notice (as when it
    // is killed): the agent, idle for 30 s otherwise, ends at once.
    let gone = Instant::now();
    drop(links);
    drop(rendezvous);
    let ended = agent.join().unwrap();
    assert!(
        gone.elapsed() < Duration::from_secs(5),
        "{:?}",
        gone.elapsed()
    );
    assert_eq!(ended.unwrap(), Ended::FrontEndGone);
    let _ = std::fs::remove_dir_all(&parent);
}

/// Launch mode: the daemons start with the job, before the front end knows its nodes. An
/// agent told to wait (`--token-wait`, which [`Rendezvous::listen`]'s arguments carry)
/// connects once its token is issued; one of a node given no token ends as soon as the
/// tokens are out; one whose front end ends before issuing any ends when the directory
/// goes, long before its wait is over.
#[test]
fn agents_started_before_the_tokens_wait_for_them_bounded() {
    let parent = scratch("wait");
    let mut rendezvous = Rendezvous::listen(
        Some("127.0.0.1:0".parse().unwrap()),
        &parent,
        Duration::from_secs(60),
    )
    .unwrap();
    let args = rendezvous.agent_arguments();
    let wait = args
        .iter()
        .position(|a| a == "--token-wait")
        .map(|i| args[i + 1].clone());
    assert_eq!(wait.as_deref(), Some("60"), "{args:?}");
    let target = TlsTarget::new(
        rendezvous.address().unwrap(),
        rendezvous.fingerprint(),
        rendezvous.token_dir().to_path_buf(),
    )
    .with_token_wait(Duration::from_secs(60));
    let (a, b) = (target.clone(), target);
    let with_rank = std::thread::spawn(move || run_tls(&a, &config("node-a")));
    let without = std::thread::spawn(move || run_tls(&b, &config("node-without-ranks")));
    // Both wait: no token, and no word that none is coming.
    std::thread::sleep(Duration::from_millis(500));
    assert!(!with_rank.is_finished() && !without.is_finished());
    let issued = Instant::now();
    rendezvous.issue(&["node-a".to_string()]).unwrap();
    let links = rendezvous.accept(
        Instant::now() + Duration::from_secs(20),
        &Options::default(),
        &AtomicBool::new(false),
    );
    assert_eq!(links.keys().collect::<Vec<_>>(), ["node-a"]);
    assert_eq!(without.join().unwrap().unwrap(), Ended::NotExpected);
    assert!(
        issued.elapsed() < Duration::from_secs(10),
        "{:?}",
        issued.elapsed()
    );
    drop(links);
    drop(rendezvous);
    assert_eq!(with_rank.join().unwrap().unwrap(), Ended::FrontEndGone);

    // A front end that ends before issuing: its waiting agent ends with it.
    let rendezvous = Rendezvous::listen(
        Some("127.0.0.1:0".parse().unwrap()),
        &parent,
        Duration::from_secs(60),
    )
    .unwrap();
    let target = TlsTarget::new(
        rendezvous.address().unwrap(),
        rendezvous.fingerprint(),
        rendezvous.token_dir().to_path_buf(),
    )
    .with_token_wait(Duration::from_secs(60));
    let agent = std::thread::spawn(move || run_tls(&target, &config("node-a")));
    std::thread::sleep(Duration::from_millis(300));
    let gone = Instant::now();
    drop(rendezvous);
    assert_eq!(agent.join().unwrap().unwrap(), Ended::NotExpected);
    assert!(
        gone.elapsed() < Duration::from_secs(5),
        "{:?}",
        gone.elapsed()
    );
    let _ = std::fs::remove_dir_all(&parent);
}

/// Launch mode with no address given: the front end listens only once the job's nodes are
/// known, where the kernel routes to them from, and writes that address with the tokens; the
/// daemons, whose arguments carry no address, read it there and connect.
#[test]
fn agents_told_no_address_read_the_one_chosen_when_the_tokens_are_issued() {
    let parent = scratch("deferred");
    let mut rendezvous = Rendezvous::listen(None, &parent, Duration::from_secs(60)).unwrap();
    assert_eq!(rendezvous.address(), None);
    let args = rendezvous.agent_arguments();
    assert!(!args.iter().any(|a| a == "--connect"), "{args:?}");
    let target = TlsTarget::address_in_token_dir(
        rendezvous.fingerprint(),
        rendezvous.token_dir().to_path_buf(),
    )
    .with_token_wait(Duration::from_secs(60));
    // A node given by address: 127.0.0.0/8 is routed through lo.
    let node = "127.0.7.7".to_string();
    let agent = std::thread::spawn(move || run_tls(&target, &config("127.0.7.7")));
    std::thread::sleep(Duration::from_millis(300));
    assert!(!agent.is_finished());
    rendezvous.issue(std::slice::from_ref(&node)).unwrap();
    let address = rendezvous.address().expect("listening once issued");
    assert!(
        address.ip().is_loopback() && address.port() != 0,
        "{address}"
    );
    // The file agents started before the tokens read the address from (documented on
    // `TlsTarget::address_in_token_dir` and `Rendezvous::listen`).
    let written = std::fs::read_to_string(rendezvous.token_dir().join("issued")).unwrap();
    assert_eq!(written, format!("{address}\n"));
    let links = rendezvous.accept(
        Instant::now() + Duration::from_secs(20),
        &Options::default(),
        &AtomicBool::new(false),
    );
    assert_eq!(links.keys().collect::<Vec<_>>(), [&node]);
    drop(links);
    drop(rendezvous);
    assert_eq!(agent.join().unwrap().unwrap(), Ended::FrontEndGone);
    let _ = std::fs::remove_dir_all(&parent);
}
