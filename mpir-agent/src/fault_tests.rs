//! Hostile and failing agents against the front end's fleet (no cluster needed: fake agents
//! speak the protocol over Unix sockets in threads), and the real agent serving a local
//! process (adopt, stacks, hold, release, and the front end going away while it holds).

use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpir_acquire::live::{NodeExpectations, RankClaim};
use mpir_session::AgentFailure;
use mpir_wire::{
    AgentId, Connection, ContentKind, Gate, Hello, Message, MessageKind, Options, Transport,
};

use crate::agent::{AgentConfig, Ended, serve};
use crate::fleet::{AgentLink, Fleet};
use crate::launch::Launch;
use crate::merge;
use crate::protocol::{
    HostClaims, Plan, RankQueuesOut, RankStatus, ReadSettings, Reply, Request, StacksAsk,
};

fn plan(request_ms: u64) -> Plan {
    Plan {
        launch: Launch::Template("unused {host} {agent}".into()),
        agent: vec!["unused".into()],
        fanout: 32,
        start_timeout_ms: 5_000,
        request_timeout_ms: request_ms,
        expect: NodeExpectations::new(nix::unistd::getuid().as_raw()),
        read: ReadSettings::default(),
        ship: None,
        ship_from: None,
    }
}

fn claims(host: &str, ranks: &[u64]) -> HostClaims {
    HostClaims::new(
        host,
        ranks
            .iter()
            .map(|&r| RankClaim::new(r, 1000 + r as i64, host, Some("/bin/app".into())))
            .collect(),
    )
}

/// A fake agent for `host` in a thread: hello, then it answers adoption truthfully and
/// hands the connection to `then`.
fn fake(
    host: &'static str,
    then: impl FnOnce(&mut Connection<UnixStream>) + Send + 'static,
) -> (AgentLink, JoinHandle<()>) {
    fake_with(host, &Options::default(), then)
}

/// [`fake`], the front end's side of the link with `front` options (its limits).
fn fake_with(
    host: &'static str,
    front: &Options,
    then: impl FnOnce(&mut Connection<UnixStream>) + Send + 'static,
) -> (AgentLink, JoinHandle<()>) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let agent = std::thread::spawn(move || {
        let hello = Hello::new(host, 1);
        let Ok((mut conn, _)) = Connection::agent(theirs, &hello, &Options::default()) else {
            return;
        };
        let Ok(m) = conn.recv() else { return };
        let Ok(Request::Adopt(adopt)) = Request::from_message(&m) else {
            return;
        };
        let ranks = adopt
            .ranks
            .iter()
            .map(|c| RankStatus {
                rank: c.rank,
                pid: c.pid as u32,
                problem: None,
            })
            .collect();
        let reply = Reply::Adopted {
            node: host.into(),
            ranks,
        };
        if conn.send(&reply.to_message(m.request)).is_err() {
            return;
        }
        then(&mut conn);
    });
    let boxed: Box<dyn Transport + Send> = Box::new(ours);
    let accepted = Connection::front_end(boxed, &Gate::Engine(AgentId(1)), front).unwrap();
    (accepted.connection, agent)
}

/// Answers the next request with `reply` (the request's id), then keeps the link open
/// until the front end closes it.
fn answer(reply: Reply) -> impl FnOnce(&mut Connection<UnixStream>) + Send + 'static {
    move |conn| {
        if let Ok(m) = conn.recv() {
            let _ = conn.send(&reply.to_message(m.request));
        }
        let _ = conn.recv();
    }
}

fn queues_of(ranks: &[u64]) -> Reply {
    Reply::Queues {
        engine: None,
        ranks: ranks
            .iter()
            .map(|&r| RankQueuesOut {
                rank: r,
                pid: 1000 + r as u32,
                queues: Some(mpir_mqd::RankQueues::default()),
                problem: None,
                stacks: None,
                waits: None,
            })
            .collect(),
        release: Vec::new(),
    }
}

#[test]
fn bad_agents_are_cut_off_with_the_reason_and_the_good_ones_answer() {
    // node-a answers well; node-b answers for a rank it was not given; node-c sends
    // garbage frames; node-d never answers; node-e crashes (closes its end); node-f sends a
    // message bigger than the front end accepts.
    let (a, ta) = fake("node-a", answer(queues_of(&[0, 1])));
    let (b, tb) = fake("node-b", answer(queues_of(&[2, 7])));
    let (c, tc) = fake("node-c", |conn| {
        let _ = conn.recv();
        let _ = conn.get_mut().set_timeout(Duration::from_secs(1));
        let _ = std::io::Write::write_all(conn.get_mut(), b"GARBAGE, NOT A FRAME AT ALL....");
        let _ = conn.recv();
    });
    let (d, td) = fake("node-d", |conn| {
        let _ = conn.recv();
        std::thread::sleep(Duration::from_secs(3));
    });
    let (e, te) = fake("node-e", |conn| {
        let _ = conn.recv();
    });
    // This link's front end accepts 1 MiB messages (the default, 64 MiB, is the same code
    // path; a smaller one keeps the hostile write well inside the deadline on a busy machine).
    let small = Options::default().with_limits(mpir_wire::Limits::new(1 << 20));
    let (f, tf) = fake_with("node-f", &small, |conn| {
        if let Ok(m) = conn.recv() {
            // The front end announced its limit in the handshake; a hostile agent ignores
            // it and writes a huge message's frames anyway.
            let huge = Message::new(MessageKind::Reply, ContentKind::Json, vec![b' '; 4 << 20])
                .with_request(m.request);
            let frames = huge.to_frames(&mpir_wire::Limits::new(usize::MAX >> 1));
            if let Ok(bytes) = frames {
                let _ = std::io::Write::write_all(conn.get_mut(), &bytes);
            }
        }
    });
    let links = vec![
        (claims("node-a", &[0, 1]), Ok(a)),
        (claims("node-b", &[2, 3]), Ok(b)),
        (claims("node-c", &[4]), Ok(c)),
        (claims("node-d", &[5]), Ok(d)),
        (claims("node-e", &[6]), Ok(e)),
        (claims("node-f", &[8]), Ok(f)),
    ];
    let mut fleet = Fleet::connected(links, &plan(1_500));
    assert!(
        fleet.members.iter().all(|m| m.out().is_none()),
        "all adopted"
    );
    let started = Instant::now();
    let id = fleet.send_all(&Request::Queues);
    let replies = fleet.collect(id, Duration::from_millis(1_500));
    // One deadline for all: the hung agent costs the timeout once, not per agent.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    let outcomes: Vec<_> = replies
        .into_iter()
        .zip(fleet.members.iter_mut())
        .map(|(r, m)| merge::queue_outcome(r, m).map(|v| v.len()))
        .collect();
    assert_eq!(outcomes[0].as_ref().ok(), Some(&2), "node-a answers");
    let failure = |i: usize| {
        outcomes[i]
            .as_ref()
            .err()
            .map(|d| (d.failure, d.detail.clone()))
    };
    let (f1, why) = failure(1).unwrap();
    assert_eq!(f1, AgentFailure::BadAnswer);
    assert!(why.contains("rank 7"), "{why}");
    assert_eq!(failure(2).unwrap().0, AgentFailure::BadAnswer, "garbage");
    assert_eq!(failure(3).unwrap().0, AgentFailure::TimedOut, "hung");
    assert_eq!(failure(4).unwrap().0, AgentFailure::Unreachable, "crashed");
    let (f5, why) = failure(5).unwrap();
    assert_eq!(f5, AgentFailure::BadAnswer, "oversize: {why}");
    assert!(why.contains("limit"), "oversize: {why}");
    // Cut off for good: the next request goes to node-a only.
    assert!(fleet.members[0].out().is_none());
    assert!(fleet.members[1..].iter().all(|m| m.out().is_some()));
    fleet.close();
    for t in [ta, tb, tc, td, te, tf] {
        t.join().unwrap();
    }
}

#[test]
fn an_agent_that_adopts_other_ranks_is_cut_off_before_any_read() {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let agent = std::thread::spawn(move || {
        let (mut conn, _) =
            Connection::agent(theirs, &Hello::new("node-x", 1), &Options::default()).unwrap();
        let m = conn.recv().unwrap();
        let reply = Reply::Adopted {
            node: "node-x".into(),
            ranks: vec![RankStatus {
                rank: 99,
                pid: 5,
                problem: None,
            }],
        };
        conn.send(&reply.to_message(m.request)).unwrap();
        let _ = conn.recv();
    });
    let boxed: Box<dyn Transport + Send> = Box::new(ours);
    let link = Connection::front_end(boxed, &Gate::Engine(AgentId(1)), &Options::default())
        .unwrap()
        .connection;
    let fleet = Fleet::connected(vec![(claims("node-x", &[3]), Ok(link))], &plan(1_000));
    let down = fleet.members[0].out().expect("cut off");
    assert_eq!(down.failure, AgentFailure::BadAnswer);
    assert!(
        down.detail.contains("[99]") && down.detail.contains("[3]"),
        "{}",
        down.detail
    );
    drop(fleet);
    agent.join().unwrap();
}

/// A process of ours to serve: `sleep`, with the launcher's rank variable of rank 5.
fn rank_process() -> std::process::Child {
    Command::new("sleep")
        .arg("30")
        .env("OMPI_COMM_WORLD_RANK", "5")
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

fn state(pid: u32) -> (char, u32) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(str::trim)
            .unwrap()
            .to_string()
    };
    (
        field("State:").chars().next().unwrap(),
        field("TracerPid:").parse().unwrap(),
    )
}

/// The real agent in a thread over a socket pair, adopting `rank`.
fn real_agent(
    rank: RankClaim,
) -> (
    Connection<UnixStream>,
    JoinHandle<Result<Ended, crate::AgentError>>,
) {
    let (ours, theirs) = UnixStream::pair().unwrap();
    let host = rank.host.clone();
    let agent = std::thread::spawn(move || {
        let config = AgentConfig::default();
        let (mut conn, _) =
            Connection::agent(theirs, &Hello::new(host, 1), &Options::default()).unwrap();
        serve(&mut conn, &config)
    });
    let mut front = Connection::front_end(ours, &Gate::Engine(AgentId(1)), &Options::default())
        .unwrap()
        .connection;
    let adopt = crate::protocol::Adopt::new(
        vec![rank],
        NodeExpectations::new(nix::unistd::getuid().as_raw()),
        ReadSettings::default(),
    );
    front
        .send(&Request::Adopt(Box::new(adopt)).to_message(mpir_wire::RequestId(1)))
        .unwrap();
    (front, agent)
}

fn ask(front: &mut Connection<UnixStream>, request: &Request, id: u64) -> Reply {
    front
        .send(&request.to_message(mpir_wire::RequestId(id)))
        .unwrap();
    let m = front.recv().unwrap();
    assert_eq!(m.request.0, id);
    Reply::from_message(&m).unwrap()
}

#[test]
fn the_agent_serves_a_local_rank_and_lets_it_go_when_its_front_end_goes() {
    let mut p = rank_process();
    let pid = p.id();
    let host = mpir_target::live::node::this_node()
        .display_name()
        .to_string();
    let (mut front, agent) = real_agent(RankClaim::new(5, pid.into(), &host, Some("sleep".into())));
    let adopted = Reply::from_message(&front.recv().unwrap()).unwrap();
    let Reply::Adopted { ranks, node } = adopted else {
        panic!("{adopted:?}")
    };
    assert_eq!(node, mpir_target::live::node::this_node().display_name());
    assert_eq!(ranks.len(), 1);
    assert!(ranks[0].problem.is_none(), "{ranks:?}");

    // Stacks: the process's own frames, and it runs again afterwards.
    let reply = ask(&mut front, &Request::Stacks(StacksAsk::new(1, 0, None)), 2);
    let Reply::Stacks { samples } = reply else {
        panic!("{reply:?}")
    };
    assert_eq!(samples[0].ranks.len(), 1, "{samples:?}");
    assert_eq!(samples[0].ranks[0].pid, pid);
    assert!(!samples[0].ranks[0].threads[0].frames.is_empty());
    assert_eq!(state(pid).1, 0, "traced after a read");

    // Hold: stopped and traced by this process until released.
    let reply = ask(&mut front, &Request::Hold, 3);
    assert!(matches!(reply, Reply::Held { .. }), "{reply:?}");
    let (st, tracer) = state(pid);
    assert!(st == 't' || st == 'T', "state {st}");
    assert_ne!(tracer, 0);
    let reply = ask(&mut front, &Request::Release, 4);
    assert!(
        matches!(&reply, Reply::Released { problems } if problems.is_empty()),
        "{reply:?}"
    );
    assert!(mpir_target::testkit::wait_for(5, || state(pid).1 == 0));

    // Held again, then the front end vanishes: the agent lets go and ends.
    let reply = ask(&mut front, &Request::Hold, 5);
    assert!(matches!(reply, Reply::Held { .. }), "{reply:?}");
    drop(front);
    let ended = agent.join().unwrap().unwrap();
    assert_eq!(ended, Ended::FrontEndGone);
    mpir_target::testkit::assert_untouched(pid);
    p.kill().unwrap();
    p.wait().unwrap();
}

#[test]
fn the_agent_refuses_a_process_that_is_not_the_rank_and_never_touches_it() {
    let mut p = rank_process();
    let pid = p.id();
    let host = mpir_target::live::node::this_node()
        .display_name()
        .to_string();
    // The table says rank 2, the process's launcher says 5.
    let (mut front, agent) = real_agent(RankClaim::new(2, pid.into(), &host, Some("sleep".into())));
    let Reply::Adopted { ranks, .. } = Reply::from_message(&front.recv().unwrap()).unwrap() else {
        panic!("not adopted")
    };
    let problem = ranks[0].problem.as_ref().expect("refused");
    assert!(
        problem.message.contains("OMPI_COMM_WORLD_RANK=5"),
        "{problem:?}"
    );
    let reply = ask(&mut front, &Request::Hold, 2);
    let Reply::Held { ranks } = reply else {
        panic!("{reply:?}")
    };
    assert!(ranks[0].problem.is_some());
    assert_eq!(state(pid).1, 0, "a refused process was traced");
    front
        .send(&Message::new(
            MessageKind::Goodbye,
            ContentKind::Empty,
            Vec::new(),
        ))
        .unwrap();
    assert_eq!(agent.join().unwrap().unwrap(), Ended::Bye);
    mpir_target::testkit::assert_untouched(pid);
    p.kill().unwrap();
    p.wait().unwrap();
}
