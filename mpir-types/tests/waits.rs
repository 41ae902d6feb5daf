//! The wait-state export (`mpir_waits`, issue 29): the header's checks against hostile values,
//! torn and free entries, and what the wait-for analysis makes of the waits of a ring, a
//! `Waitall`, a buffered send and a job that progresses between samples. The byte layout the
//! tests write is `mpir-waits/lib/mpir_waits.h`'s; the preload library's own tests check the
//! same offsets against gdb on the real library.

use mpir_types::DataModel;
use mpir_types::deadlock::{self, JobSnapshot, Verdict, WaitSource};
use mpir_types::mqd::{OpClass, Peer};
use mpir_types::waits::{
    self, Abi, Arg, Call, Header, RequestEntry, Slot, State, Table, WaitStates, WaitsError,
};
use proptest::prelude::*;

fn model() -> DataModel {
    DataModel::LP64
}

fn put32(b: &mut [u8], off: usize, v: u32) {
    b[off..off + 4].copy_from_slice(&v.to_le_bytes());
}
fn put64(b: &mut [u8], off: usize, v: u64) {
    b[off..off + 8].copy_from_slice(&v.to_le_bytes());
}

/// A header: recording, MPICH ABI, rank `rank` of `size`, `slots` slots used.
fn header(rank: i32, size: i32, slots: u32) -> Vec<u8> {
    let mut b = vec![0u8; waits::HEADER_SIZE as usize];
    b[..8].copy_from_slice(b"MPIRWAIT");
    for (off, v) in [
        (8, 1),
        (12, 232),
        (16, 136),
        (20, 56),
        (24, 56),
        (28, 256),
        (32, 8),
        (36, 8),
        (40, 1),
        (44, 1),
        (48, 0),
        (52, rank as u32),
        (56, size as u32),
        (60, slots),
    ] {
        put32(&mut b, off, v);
    }
    put64(&mut b, 80, 0x10_000);
    put64(&mut b, 88, 0x20_000);
    put64(&mut b, 96, 0x30_000);
    b[104..104 + 5].copy_from_slice(b"MPICH");
    b
}

struct SlotSpec {
    tid: u32,
    call: u32,
    comm: u64,
    peer: i32,
    tag: i32,
    calls: u64,
    reqs: Vec<u32>,
}

fn slot(s: &SlotSpec) -> Vec<u8> {
    let mut b = vec![0u8; 136];
    put64(&mut b, 8, s.calls);
    put64(&mut b, 16, s.comm);
    put32(&mut b, 24, s.tid);
    put32(&mut b, 28, s.call);
    put32(&mut b, 32, s.peer as u32);
    put32(&mut b, 36, s.tag as u32);
    put32(&mut b, 40, (-2i32) as u32);
    put32(&mut b, 44, (-2i32) as u32);
    put32(&mut b, 48, (-2i32) as u32);
    put32(&mut b, 56, s.reqs.len() as u32);
    for (i, r) in s.reqs.iter().enumerate() {
        put32(&mut b, 64 + 4 * i, *r);
    }
    b
}

fn comm(id: u64, size: i32, rank: i32) -> Vec<u8> {
    let mut b = vec![0u8; 56];
    put64(&mut b, 8, id);
    put64(&mut b, 24, 0x4400_0000 + id);
    put32(&mut b, 32, size as u32);
    put32(&mut b, 36, rank as u32);
    b
}

fn request(handle: u64, kind: u32, peer: i32, tag: i32) -> Vec<u8> {
    let mut b = vec![0u8; 56];
    put64(&mut b, 8, handle);
    put64(&mut b, 16, 1);
    put32(&mut b, 24, kind);
    put32(&mut b, 28, 1);
    put32(&mut b, 32, peer as u32);
    put32(&mut b, 36, tag as u32);
    b
}

/// The export of rank `rank` of `size` (on MPI_COMM_WORLD only) with these slots and
/// requests (the request table has 8 entries).
fn export(rank: i32, size: i32, slots: &[SlotSpec], reqs: &[Vec<u8>]) -> WaitStates {
    let h = Header::decode(model(), 0x1000, &header(rank, size, slots.len() as u32)).unwrap();
    let s: Vec<u8> = slots.iter().flat_map(slot).collect();
    let mut c = comm(1, size, rank);
    c.extend(comm(2, 1, 0));
    c.resize(8 * 56, 0);
    let mut r: Vec<u8> = reqs.concat();
    r.resize(8 * 56, 0);
    waits::decode_tables(model(), h, &s, &c, &r).unwrap()
}

fn recv_slot(peer: i32, calls: u64) -> SlotSpec {
    SlotSpec {
        tid: 100,
        call: 5,
        comm: 1,
        peer,
        tag: 10,
        calls,
        reqs: vec![],
    }
}

#[test]
fn the_header_reads_what_the_library_writes() {
    let h = Header::decode(model(), 0x1000, &header(2, 4, 3)).unwrap();
    assert_eq!(h.abi, Abi::Mpich);
    assert_eq!(h.state, State::Recording);
    assert_eq!((h.world_rank, h.world_size), (Some(2), Some(4)));
    assert_eq!(h.slots_used, 3);
    assert_eq!(
        (h.slots, h.comms, h.requests),
        (0x10_000, 0x20_000, 0x30_000)
    );
    assert_eq!(h.library, "MPICH");
    // Before MPI_Init returned: no rank yet.
    let h = Header::decode(model(), 0x1000, &header(-1, 0, 0)).unwrap();
    assert_eq!((h.world_rank, h.world_size), (None, None));
}

#[test]
fn hostile_headers_are_typed_errors() {
    let mut b = header(0, 1, 0);
    b[0] = b'X';
    assert!(matches!(
        Header::decode(model(), 0x1000, &b),
        Err(WaitsError::Magic {
            address: 0x1000,
            ..
        })
    ));
    let mut b = header(0, 1, 0);
    put32(&mut b, 8, 7);
    assert!(matches!(
        Header::decode(model(), 0x1000, &b),
        Err(WaitsError::Version { version: 7, .. })
    ));
    for (off, v, what) in [
        (16, 8, "slot_size"),
        (28, 1 << 30, "slot_capacity"),
        (32, u32::MAX, "comm_capacity"),
        (60, 300, "slots_used"),
        (12, 10, "header_size"),
    ] {
        let mut b = header(0, 1, 0);
        put32(&mut b, off, v);
        match Header::decode(model(), 0x1000, &b) {
            Err(WaitsError::Bound { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{what}: {other:?}"),
        }
    }
    // Capacities within their bounds whose tables together would be huge.
    let mut b = header(0, 1, 0);
    put32(&mut b, 24, 4096);
    put32(&mut b, 36, 65_536);
    assert!(matches!(
        Header::decode(model(), 0x1000, &b),
        Err(WaitsError::Bound {
            what: "request table bytes",
            ..
        })
    ));
    // Too few bytes.
    assert!(matches!(
        Header::decode(model(), 0x1000, &header(0, 1, 0)[..100]),
        Err(WaitsError::Decode(_))
    ));
    // Tables shorter than the header says.
    let h = Header::decode(model(), 0x1000, &header(0, 1, 2)).unwrap();
    assert!(matches!(
        waits::decode_tables(model(), h, &[0u8; 136], &[0u8; 8 * 56], &[0u8; 8 * 56]),
        Err(WaitsError::Decode(_))
    ));
}

#[test]
fn torn_and_free_entries_are_never_used() {
    let mut b = slot(&recv_slot(1, 5));
    put64(&mut b, 0, 3); // odd: being written
    let t = Slot::decode(model(), 0x10_000, 7, &b).unwrap().unwrap_err();
    assert_eq!((t.table, t.index), (Table::Slot, 7));
    let free = slot(&SlotSpec {
        tid: 0,
        ..recv_slot(1, 0)
    });
    assert_eq!(Slot::decode(model(), 0, 0, &free).unwrap(), Ok(None));
    // More requests than a slot lists: 16 listed, all counted.
    let mut b = slot(&recv_slot(1, 5));
    put32(&mut b, 56, 1000);
    let s = Slot::decode(model(), 0, 0, &b).unwrap().unwrap().unwrap();
    assert_eq!((s.nreqs, s.requests.len()), (1000, 16));
    // Deleted and free requests.
    let mut r = request(u64::MAX, 24, 0, 1);
    assert_eq!(RequestEntry::decode(model(), 0, 0, &r).unwrap(), Ok(None));
    put64(&mut r, 8, 0);
    assert_eq!(RequestEntry::decode(model(), 0, 0, &r).unwrap(), Ok(None));
    // Arguments with a meaning of their own.
    let s = Slot::decode(model(), 0, 0, &slot(&recv_slot(-1, 1)))
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(
        (s.peer, s.tag, s.root),
        (Arg::Any, Arg::Value(10), Arg::None)
    );
    assert_eq!(s.call.name(), Some("MPI_Recv"));
}

fn ring(calls: [u64; 3]) -> JobSnapshot {
    JobSnapshot::new(
        (0..3)
            .map(|r| {
                let w = export(r, 3, &[recv_slot((r + 1) % 3, calls[r as usize])], &[]);
                w.rank_queues(r as u64, Some(100 + i64::from(r))).0
            })
            .collect(),
    )
}

#[test]
fn a_ring_of_blocking_receives_is_a_cycle_from_the_waits_alone() {
    let one = ring([4, 4, 4]);
    assert!(one.ranks.iter().all(|r| r.source == WaitSource::WaitStates));
    let rep = deadlock::confirm(&[one.clone(), one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::Deadlock, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [0, 1, 2]);
    let step = &rep.cycles[0].chain[0];
    assert_eq!(step.op.class, OpClass::Receive);
    assert_eq!(step.op.tag, Some(10));
    assert_eq!(step.op.comm.name, "MPI_COMM_WORLD");
    assert_eq!(rep.sources.len(), 1);
    assert_eq!(rep.sources[0].source, WaitSource::WaitStates);
    assert!(
        rep.to_string()
            .contains("waits read from: wait-state export for ranks 0-2"),
        "{rep}"
    );
}

#[test]
fn a_thread_that_returned_and_called_again_is_not_the_same_wait() {
    // The same receive, peer and tag in both samples, but rank 1 entered another call in
    // between (a ring that progresses): no deadlock.
    let rep = deadlock::confirm(&[ring([4, 4, 4]), ring([4, 5, 4])]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
}

#[test]
fn a_waitall_waits_for_its_requests() {
    // Rank 0 waits for an Irecv from 1 (tag 3) and an Isend to 1 (tag 4); rank 1 for an
    // Irecv from 0 with tag 9: nothing matches, 0 and 1 wait on each other.
    let r0 = export(
        0,
        2,
        &[SlotSpec {
            tid: 1,
            call: 41,
            comm: 1,
            peer: -2,
            tag: -2,
            calls: 3,
            reqs: vec![1, 2],
        }],
        &[request(0xa, 24, 1, 3), request(0xb, 20, 1, 4)],
    );
    let (q0, notes) = r0.rank_queues(0, None);
    assert!(notes.is_empty(), "{notes:?}");
    let world = &q0.communicators[0];
    let ops: Vec<(OpClass, Peer, Option<i64>)> = world
        .operations
        .iter()
        .map(|o| (o.class, o.peer_local, o.tag))
        .collect();
    assert_eq!(
        ops,
        [
            (OpClass::Receive, Peer::Rank(1), Some(3)),
            (OpClass::Send, Peer::Rank(1), Some(4))
        ]
    );
    let r1 = export(
        1,
        2,
        &[SlotSpec {
            tid: 2,
            call: 40,
            comm: 1,
            peer: -2,
            tag: -2,
            calls: 9,
            reqs: vec![1],
        }],
        &[request(0xc, 24, 0, 9)],
    );
    let job = JobSnapshot::new(vec![q0, r1.rank_queues(1, None).0]);
    let rep = deadlock::confirm(&[job.clone(), job]).unwrap();
    assert_eq!(rep.verdict, Verdict::Deadlock, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [0, 1]);
}

#[test]
fn buffered_sends_wait_for_nobody_and_unknown_communicators_are_said() {
    let w = export(
        0,
        2,
        &[SlotSpec {
            tid: 1,
            call: 3, // MPI_Bsend
            comm: 1,
            peer: 1,
            tag: 1,
            calls: 1,
            reqs: vec![],
        }],
        &[],
    );
    let (q, notes) = w.rank_queues(0, None);
    assert!(q.communicators.iter().all(|c| c.operations.is_empty()));
    assert!(notes.is_empty());
    let w = export(0, 2, &[recv_slot(1, 1)], &[]);
    let mut w2 = w.clone();
    w2.threads[0].comm = 0xdead;
    let (q, notes) = w2.rank_queues(0, None);
    assert!(q.communicators.iter().all(|c| c.operations.is_empty()));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("0xdead"), "{notes:?}");
    assert_eq!(Call(5).name(), Some("MPI_Recv"));
    assert_eq!(Call(999).name(), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400),
                                   magic in any::<bool>()) {
        let mut b = bytes;
        if magic && b.len() >= 12 {
            b[..8].copy_from_slice(b"MPIRWAIT");
            b[8..12].copy_from_slice(&1u32.to_le_bytes());
        }
        let _ = Header::decode(model(), 0, &b);
        let _ = Slot::decode(model(), 0, 0, &b);
        let _ = waits::CommEntry::decode(model(), 0, 0, &b);
        let _ = RequestEntry::decode(model(), 0, 0, &b);
    }
}
