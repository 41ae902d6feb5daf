//! Fuzz harness for the out-of-process host's pipe protocol (`wire`), shared by the cargo-fuzz
//! target `wire` in `fuzz/` and the bounded run in this crate's tests (`tests/fuzz_wire.rs`).
//!
//! Both ends parse what the other end wrote, and a crashed or hostile helper (or a DLL that
//! scribbles on the pipe) can write anything: every frame header, count and string is checked
//! against the bytes left. The harness must return without panicking whatever the input.

use crate::wire::{FromHelper, ToHelper, read_message};

/// Most messages read from one input (each is at most one input's worth of bytes).
const MAX_MESSAGES: usize = 64;

/// Reads `data` as a stream of framed messages and decodes each as either direction; decodes
/// `data` itself as one message body; and checks that whatever decodes encodes back to the
/// same message.
pub fn wire(data: &[u8]) {
    let mut stream = data;
    for _ in 0..MAX_MESSAGES {
        match read_message(&mut stream) {
            Ok(body) => decode_both(&body),
            Err(_) => break,
        }
    }
    decode_both(data);
}

fn decode_both(body: &[u8]) {
    if let Ok(m) = ToHelper::decode(body) {
        let again = ToHelper::decode(&m.encode());
        assert_eq!(
            again.as_ref().ok(),
            Some(&m),
            "parent → helper message round trip"
        );
    }
    if let Ok(m) = FromHelper::decode(body, "fuzz.so") {
        let again = FromHelper::decode(&m.encode(), "fuzz.so");
        assert_eq!(
            again.as_ref().ok(),
            Some(&m),
            "helper → parent message round trip"
        );
    }
}

/// Valid messages of many kinds, framed as on the pipe: seeds for the fuzzer and for the
/// bounded test's mutations.
pub fn seed_stream() -> Vec<u8> {
    use mpir_types::mqd::{Communicator, OpStatus, PendingOperation};
    use mpir_types::{DataModel, LayoutSource, TypeLayout};

    use crate::raw::{RawCommQueues, RawQueue};
    use crate::wire::Outcome;

    let op = PendingOperation {
        status: OpStatus::Pending,
        desired_local_rank: 1,
        desired_global_rank: -1,
        tag_wild: false,
        desired_tag: 7,
        desired_length: 64,
        system_buffer: false,
        buffer: 0x1000,
        actual_local_rank: -1,
        actual_global_rank: -1,
        actual_tag: 0,
        actual_length: 0,
        extra_text: vec!["MPI_Irecv".into()],
    };
    let comms = vec![RawCommQueues {
        communicator: Communicator {
            unique_id: 0x5000,
            local_rank: 0,
            size: 2,
            name: "MPI_COMM_WORLD".into(),
        },
        group: Some(vec![0, 1]),
        queues: [
            RawQueue::NoInformation,
            RawQueue::Operations(vec![op.clone(), op], None),
            RawQueue::Operations(Vec::new(), None),
        ],
    }];
    let to = [
        ToHelper::Load {
            path: "/lib/libmsgq.so".into(),
            max_communicators: 16,
            max_operations: 1024,
            max_group_size: 64,
            max_new_processes: 8,
            read_cache: true,
        },
        ToHelper::Attach {
            target: 1,
            image_name: "app".into(),
            global_rank: Some(0),
            model: DataModel::LP64,
        },
        ToHelper::Queues {
            process: 1,
            image: 2,
        },
        ToHelper::ReadReply(Ok(vec![0; 32])),
        ToHelper::SymbolReply(Ok(Some((0x4000, 1)))),
        ToHelper::TypeReply(Ok(Some(
            TypeLayout::new("t", 16, LayoutSource::Given).with_member("a", 8, 8),
        ))),
        ToHelper::Shutdown,
    ];
    let from = [
        FromHelper::Hello { version: 2, pid: 7 },
        FromHelper::Read {
            target: 1,
            address: 0x4000,
            len: 64,
        },
        FromHelper::Symbol {
            target: 1,
            name: "MPIR_dll_name".into(),
        },
        FromHelper::Done {
            outcome: Ok(Outcome::Queues(comms)),
            messages: vec!["dprints".into()],
        },
    ];
    let mut out = Vec::new();
    let bodies = to
        .iter()
        .map(ToHelper::encode)
        .chain(from.iter().map(FromHelper::encode));
    for body in bodies {
        let _ = crate::wire::write_message(&mut out, &body);
    }
    out
}
