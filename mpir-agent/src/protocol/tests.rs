//! The protocol's tests: requests and replies round-trip and garbage is a typed error; a
//! rank's problems cross the wire (and a tree's relays) and keep their meaning at the front
//! end.

use super::*;

#[test]
fn a_rank_s_wait_state_problem_crosses_the_wire_and_old_agents_still_parse() {
    let out = RankQueuesOut {
        rank: 3,
        pid: 9,
        queues: None,
        problem: None,
        stacks: None,
        waits: Some(WaitsOut::Problem("the wait-state export: torn".into())),
    };
    let reply = Reply::Queues {
        engine: None,
        ranks: vec![out.clone()],
        release: Vec::new(),
    };
    match Reply::from_message(&reply.to_message(RequestId(7))).unwrap() {
        Reply::Queues { ranks, .. } => assert_eq!(ranks, [out]),
        other => panic!("{other:?}"),
    }
    // An agent from before the export sends no `waits`: it reads as none.
    let old: RankQueuesOut =
        serde_json::from_str(r#"{"rank":1,"pid":2,"queues":null,"problem":null,"stacks":null}"#)
            .unwrap();
    assert_eq!(old.waits, None);
}

/// `problem` as the front end gets it: through a reply's message.
fn relayed(problem: Problem) -> Problem {
    let reply = Reply::Queues {
        engine: None,
        ranks: vec![RankQueuesOut {
            rank: 0,
            pid: 1,
            queues: None,
            problem: Some(problem),
            stacks: None,
            waits: None,
        }],
        release: Vec::new(),
    };
    match Reply::from_message(&reply.to_message(RequestId(1))).unwrap() {
        Reply::Queues { mut ranks, .. } => ranks.remove(0).problem.unwrap(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_agents_missing_reader_reaches_the_front_end_as_the_agent_said_it() {
    use mpir_mqd::MqdError;
    use mpir_mqd::native::NativeError;
    use mpir_session::RankError;
    use mpir_types::unread::ReasonCode;

    // As the agent's session classifies it, then as the front end's merge keeps it.
    let across = |e: MqdError, host: &str| {
        let here = RankError::NoReader(e);
        let mut p = Problem::new(ProblemKind::ReadFailed, mpir_session::chain(&here));
        p.why = Some(here.not_read());
        let there = crate::merge::rank_error(host.into(), relayed(p));
        (here.not_read(), there)
    };

    // The MPI keeps no queue.
    let (here, there) = across(
        MqdError::NotExported {
            symbols: "MPICH: symbol MPIR_All_communicators".into(),
            dll: "MPIR_dll_name is not set".into(),
        },
        "node2",
    );
    assert_eq!(here.code, ReasonCode::NotExported);
    let why = there.not_read();
    assert_eq!((&why.code, &why.text), (&here.code, &here.text));
    assert_eq!(why.host.as_deref(), Some("node2"));
    assert!(
        matches!(&there, RankError::Elsewhere { host, .. } if host == "node2"),
        "{there:?}"
    );
    assert_eq!(there.to_string(), format!("on node2: {}", here.text));

    // Only the MPI's types are missing, and it has no DLL: the same types, the same words.
    let (here, there) = across(
        MqdError::NoEngine {
            native: NativeError::NotRecognised {
                tried: vec![
                    (
                        "Open MPI ob1".into(),
                        vec!["type ompi_communicator_t".into()],
                    ),
                    ("MPICH".into(), vec!["symbol MPIR_All_communicators".into()]),
                ],
                missing_types: vec!["ompi_communicator_t".into()],
                missing_symbols: vec![
                    ("Open MPI ob1".into(), Vec::new()),
                    ("MPICH".into(), vec!["MPIR_All_communicators".into()]),
                ],
            },
            dll: Box::new(MqdError::NoDll {
                reason: "libompi_dbg_msgq.so does not exist".into(),
            }),
        },
        "node3",
    );
    assert_eq!(here.code, ReasonCode::MissingTypes);
    assert!(here.text.contains("Open MPI ob1"), "{}", here.text);
    let why = there.not_read();
    assert_eq!(
        (&why.code, &why.text, &why.missing_types),
        (&here.code, &here.text, &here.missing_types)
    );
    assert_eq!(why.host.as_deref(), Some("node3"));

    // A code this front end does not know (a newer agent): kept with its text.
    let mut p = Problem::new(ProblemKind::ReadFailed, "m");
    p.why = Some(mpir_types::unread::NotRead::new(
        ReasonCode::from("held_by_a_newer_thing".to_string()),
        "a newer reason",
    ));
    let why = crate::merge::rank_error("node4".into(), relayed(p)).not_read();
    assert_eq!(why.code.as_str(), "held_by_a_newer_thing");
    assert_eq!(why.text, "a newer reason");

    // An older agent's problem without a reason: its words, as a failed read.
    let json = r#"{"kind":"read_failed","message":"m","failure":null}"#;
    let old: Problem = serde_json::from_str(json).unwrap();
    let why = crate::merge::rank_error("node5".into(), old).not_read();
    assert_eq!((why.code, why.text.as_str()), (ReasonCode::ReadFailed, "m"));
}

#[test]
fn requests_and_replies_round_trip_and_garbage_is_a_typed_error() {
    let adopt = Request::Adopt(Box::new(Adopt::new(
        vec![RankClaim::new(3, 4242, "node2", Some("/shared/app".into()))],
        NodeExpectations::new(1000).with_job_env("SLURM_JOB_ID", "9"),
        ReadSettings::default(),
    )));
    let m = adopt.to_message(RequestId(7));
    assert_eq!(m.request, RequestId(7));
    assert_eq!(Request::from_message(&m).unwrap(), adopt);
    let stacks = Request::Stacks(StacksAsk::new(2, 100, Some(5000)));
    assert_eq!(
        Request::from_message(&stacks.to_message(RequestId(8))).unwrap(),
        stacks
    );

    let reply = Reply::Adopted {
        node: "node2".into(),
        ranks: vec![RankStatus {
            rank: 3,
            pid: 4242,
            problem: Some(Problem::new(ProblemKind::Refused, "runs /bin/sh")),
        }],
    };
    let m = reply.to_message(RequestId(7));
    assert_eq!(Reply::from_message(&m).unwrap(), reply);
    // A reply where a request belongs, garbage, binary content: errors naming why.
    assert!(matches!(
        Request::from_message(&m),
        Err(ProtocolError::Unexpected { .. })
    ));
    let junk = Message::new(
        MessageKind::Reply,
        ContentKind::Json,
        b"{\"reply\":7".to_vec(),
    );
    assert!(matches!(
        Reply::from_message(&junk),
        Err(ProtocolError::Payload { len: 10, .. })
    ));
    let bin = Message::new(MessageKind::Reply, ContentKind::Binary, vec![1, 2]);
    assert!(matches!(
        Reply::from_message(&bin),
        Err(ProtocolError::Content { .. })
    ));
    // Deep nesting stops at serde_json's recursion limit instead of the stack.
    let deep = "[".repeat(100_000);
    let deep = Message::new(MessageKind::Reply, ContentKind::Json, deep.into_bytes());
    assert!(Reply::from_message(&deep).is_err());
}

proptest::proptest! {
    /// Whatever bytes an agent or a front end sends as a payload, decoding is a value or
    /// a typed error, never a panic; and every reply the front end can receive decodes
    /// back to itself after any single byte is flipped, or fails typed.
    #[test]
    fn any_payload_decodes_or_is_refused(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2048)) {
        let m = Message::new(MessageKind::Reply, ContentKind::Json, bytes.clone());
        let _ = Reply::from_message(&m);
        let m = Message::new(MessageKind::Request, ContentKind::Json, bytes);
        let _ = Request::from_message(&m);
    }

    #[test]
    fn a_corrupted_reply_is_refused_or_decoded(at in 0usize..4096, to in proptest::num::u8::ANY) {
        let reply = Reply::Stacks {
            samples: vec![SampleOut {
                ranks: Vec::new(),
                unreached: vec![Unreached::new(
                    3,
                    mpir_types::unread::NotRead::new(mpir_types::unread::ReasonCode::Exited, "the process exited"),
                )],
                stops: vec![StopOut { rank: 3, pid: 9, stopped_us: 12 }],
                overran: vec![3],
            }],
        };
        let mut m = reply.to_message(RequestId(1));
        if !m.payload.is_empty() {
            let i = at % m.payload.len();
            m.payload[i] = to;
        }
        let _ = Reply::from_message(&m);
    }
}

#[test]
fn a_reason_a_newer_agent_sends_is_kept_with_its_code_and_text() {
    // An agent that knows a reason this front end does not: its `why` crosses the wire as is.
    let json = r#"{"kind":"not_stopped","message":"held by a new thing","failure":null,
        "why":{"code":"held_by_a_new_thing","text":"held by a new thing (pid 7)"}}"#;
    let p: Problem = serde_json::from_str(json).unwrap();
    let p = relayed(p);
    let why = p.why.expect("the agent's reason");
    assert_eq!(why.code.as_str(), "held_by_a_new_thing");
    assert_eq!(why.text, "held by a new thing (pid 7)");
    // Through the front end's model of the rank: the same code and text, the node added.
    let u = mpir_session::Unreadable::Agent {
        host: "node9".into(),
        failure: mpir_session::AgentFailure::ReadFailed,
        detail: p.message,
        denial: p.denial,
        why: Some(Box::new(why.clone())),
    };
    let shown = u.not_read();
    assert_eq!(shown.code, why.code);
    assert_eq!(shown.text, why.text);
    assert_eq!(shown.host.as_deref(), Some("node9"));
    // An agent from before `why`: still parses, and the front end says what it can.
    let old: Problem = serde_json::from_str(
        r#"{"kind":"refused","message":"not this job's process","failure":null}"#,
    )
    .unwrap();
    assert_eq!(old.why, None);
}
