//! Tests of the pipe protocol: round trips, hostile bytes, framing bounds.

use super::*;

fn op(tag: i64, text: &[&str]) -> mqd::PendingOperation {
    mqd::PendingOperation {
        status: OpStatus::Matched,
        desired_local_rank: 3,
        desired_global_rank: -1,
        tag_wild: false,
        desired_tag: tag,
        desired_length: 1 << 40,
        system_buffer: true,
        buffer: u64::MAX - 7,
        actual_local_rank: -5,
        actual_global_rank: 9,
        actual_tag: i64::MIN,
        actual_length: 0,
        extra_text: text.iter().map(|s| s.to_string()).collect(),
    }
}

#[test]
fn every_message_round_trips() {
    let layout = TypeLayout::new("t", 24, LayoutSource::Given)
        .with_member("a", 0, 8)
        .with_member("b", 16, 4);
    for m in [
        ToHelper::Load {
            path: "/x/ü.so".into(),
            max_communicators: 1,
            max_operations: u64::MAX,
            max_group_size: 7,
            max_new_processes: 3,
            read_cache: true,
        },
        ToHelper::Attach {
            target: 9,
            image_name: "app".into(),
            global_rank: Some(3),
            model: DataModel::ILP32_BE,
        },
        ToHelper::Attach {
            target: 10,
            image_name: "app".into(),
            global_rank: None,
            model: DataModel::LP64,
        },
        ToHelper::Queues {
            process: 1,
            image: 2,
        },
        ToHelper::ReadReply(Ok(vec![1, 2, 3])),
        ToHelper::ReadReply(Err("unmapped".into())),
        ToHelper::SymbolReply(Ok(Some((0xdead, 1)))),
        ToHelper::SymbolReply(Ok(None)),
        ToHelper::TypeReply(Ok(Some(layout.clone()))),
        ToHelper::TypeReply(Err("no dwarf".into())),
        ToHelper::Shutdown,
        ToHelper::NewProcesses {
            process: 4,
            image: 5,
        },
        ToHelper::SpawnBreakpoint {
            process: 6,
            image: 7,
        },
    ] {
        assert_eq!(ToHelper::decode(&m.encode()), Ok(m));
    }
    let comms = vec![RawCommQueues {
        communicator: mqd::Communicator {
            unique_id: 0xffff_0000_1234,
            local_rank: 1,
            size: 2,
            name: "dup".into(),
        },
        group: Some(vec![4, 5]),
        queues: [
            RawQueue::NoInformation,
            RawQueue::Operations(vec![op(7, &[]), op(-1, &["a", "b"])], None),
            RawQueue::Operations(
                vec![],
                Some(MqdError::Dll {
                    path: "p".into(),
                    call: "mqs_next_operation",
                    image: None,
                    code: 104,
                    message: "bad".into(),
                    callbacks: Box::new(CallbackReport::new(
                        vec!["f".into()],
                        vec!["opal_list_item_t".into()],
                    )),
                }),
            ),
        ],
    }];
    for m in [
        FromHelper::Hello { version: 1, pid: 7 },
        FromHelper::Read {
            target: 1,
            address: 2,
            len: 3,
        },
        FromHelper::Done {
            outcome: Ok(Outcome::Queues(comms)),
            messages: vec!["m".into()],
        },
        FromHelper::Done {
            outcome: Ok(Outcome::Loaded {
                version: "v".into(),
                compatibility: 2,
                taddr_width: None,
                optional: vec!["mqs_get_comm_group".into()],
            }),
            messages: vec![],
        },
        FromHelper::Done {
            outcome: Err(MqdError::Incompatible {
                path: "p".into(),
                found: 4,
                supported: 3,
            }),
            messages: vec![],
        },
        FromHelper::Done {
            outcome: Ok(Outcome::NewProcesses(vec![
                ProcessLocation::new(-1, "", ""),
                ProcessLocation::new(i64::MAX, "/bin/ü", "node7"),
            ])),
            messages: vec![],
        },
        FromHelper::Done {
            outcome: Ok(Outcome::SpawnBreakpoint("hook".into())),
            messages: vec![],
        },
        FromHelper::Done {
            outcome: Err(MqdError::Unsupported {
                path: "p".into(),
                function: "mqs_next_new_process".into(),
                reason: "not exported".into(),
            }),
            messages: vec![],
        },
        FromHelper::Done {
            outcome: Err(MqdError::IdentityInUse {
                path: "p".into(),
                identity: Some(7),
            }),
            messages: vec![],
        },
        FromHelper::Done {
            outcome: Err(MqdError::IdentityInUse {
                path: "p".into(),
                identity: None,
            }),
            messages: vec![],
        },
        FromHelper::Done {
            outcome: Err(MqdError::Protocol {
                path: "p".into(),
                reason: "helper error: x".into(),
            }),
            messages: vec![],
        },
    ] {
        assert_eq!(FromHelper::decode(&m.encode(), "p"), Ok(m));
    }
}

#[test]
fn an_error_of_no_tag_of_its_own_reads_back_stable() {
    // The `wire` fuzz target's crash input: a Done whose error has tag 0 (an error kind with no
    // tag of its own, sent by its message). It decodes as `Protocol`, which must then encode to
    // itself, not to another layer of "broke the protocol: helper error:".
    let crash = [5u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    let m = FromHelper::decode(&crash, "fuzz.so").expect("a Done with an error");
    let FromHelper::Done {
        outcome: Err(MqdError::Protocol { reason, .. }),
        ..
    } = &m
    else {
        panic!("tag 0 decodes as a protocol error: {m:?}");
    };
    assert_eq!(reason, "helper error: ");
    assert_eq!(FromHelper::decode(&m.encode(), "fuzz.so"), Ok(m));
}

#[test]
fn garbage_is_an_error_never_a_panic_or_a_huge_allocation() {
    // Every prefix of a valid message, and some hostile ones.
    let valid = FromHelper::Done {
        outcome: Ok(Outcome::Queues(vec![])),
        messages: vec!["x".into()],
    }
    .encode();
    for n in 0..valid.len() {
        assert!(FromHelper::decode(&valid[..n], "p").is_err(), "prefix {n}");
    }
    // A count of 2^32-1 strings in a tiny message.
    let mut huge = vec![5u8];
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(FromHelper::decode(&huge, "p").is_err());
    // A count of 2^32-1 new-process locations in a tiny message.
    let mut locations = vec![5u8, 0, 0, 0, 0, 6];
    locations.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(FromHelper::decode(&locations, "p").is_err());
    // Trailing bytes.
    let mut trailing = FromHelper::Hello { version: 1, pid: 1 }.encode();
    trailing.push(0);
    assert!(FromHelper::decode(&trailing, "p").is_err());
    // A pseudo-random byte soup.
    let mut x: u32 = 12345;
    for _ in 0..2000 {
        let len = (x % 64) as usize;
        let soup: Vec<u8> = (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
                (x >> 16) as u8
            })
            .collect();
        let _ = FromHelper::decode(&soup, "p");
        let _ = ToHelper::decode(&soup);
    }
}

#[test]
fn framing_splits_reassembles_and_bounds() {
    let big: Vec<u8> = (0..(MAX_FRAME * 2 + 17)).map(|i| i as u8).collect();
    let mut pipe = Vec::new();
    write_message(&mut pipe, &big).expect("write");
    write_message(&mut pipe, &[]).expect("write empty");
    assert_eq!(
        pipe.len(),
        big.len() + 3 * 5 + 5,
        "three frames then an empty one"
    );
    let mut r = &pipe[..];
    assert_eq!(read_message(&mut r).expect("big"), big);
    assert_eq!(read_message(&mut r).expect("empty"), Vec::<u8>::new());
    assert!(matches!(read_message(&mut r), Err(ReadError::Closed)));
    // An oversized frame header is refused before anything is allocated.
    let mut bad = ((MAX_FRAME + 1) as u32).to_le_bytes().to_vec();
    bad.push(0);
    assert!(matches!(
        read_message(&mut &bad[..]),
        Err(ReadError::Framing(_))
    ));
    // Unknown flags, and a pipe that ends inside a frame.
    assert!(matches!(
        read_message(&mut &[1, 0, 0, 0, 2, 9][..]),
        Err(ReadError::Framing(_))
    ));
    assert!(matches!(
        read_message(&mut &[4, 0, 0, 0, 0, 9][..]),
        Err(ReadError::Io(_))
    ));
}
