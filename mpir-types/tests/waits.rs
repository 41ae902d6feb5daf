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
use stack_shapes::in_mpi;

mod stack_shapes;

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

/// A thread in collective `call` on `comm`, its number `seq` there, with `root` (-2: none).
fn coll_slot(call: u32, comm: u64, seq: u32, root: i32) -> Vec<u8> {
    let mut b = slot(&SlotSpec {
        tid: 7,
        call,
        comm,
        peer: -2,
        tag: -2,
        calls: 1,
        reqs: vec![],
    });
    put32(&mut b, 48, root as u32);
    put32(&mut b, 52, seq);
    b
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
    let s: Vec<u8> = slots.iter().flat_map(slot).collect();
    export_raw(rank, size, slots.len() as u32, &s, &[], reqs)
}

/// The export of rank `rank` of `size` with raw slots, these communicators `(id, size, rank)`
/// beside MPI_COMM_WORLD and MPI_COMM_SELF, and requests.
fn export_raw(
    rank: i32,
    size: i32,
    nslots: u32,
    s: &[u8],
    comms: &[(u64, i32, i32)],
    reqs: &[Vec<u8>],
) -> WaitStates {
    let h = Header::decode(model(), 0x1000, &header(rank, size, nslots)).unwrap();
    let mut c = comm(1, size, rank);
    c.extend(comm(2, 1, 0));
    for &(id, n, r) in comms {
        c.extend(comm(id, n, r));
    }
    c.resize(8 * 56, 0);
    let mut r: Vec<u8> = reqs.concat();
    r.resize(8 * 56, 0);
    waits::decode_tables(model(), h, s, &c, &r).unwrap()
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

/// A rank in one collective: the call's code, its communicator, its number there, its root
/// (-2: none), and the rank's communicators beside the predefined ones.
type InCollective = (u32, u64, u32, i32, Vec<(u64, i32, i32)>);

/// Ranks each in one collective, as one snapshot.
fn collectives(ranks: &[InCollective]) -> JobSnapshot {
    let n = ranks.len() as i32;
    JobSnapshot::new(
        ranks
            .iter()
            .enumerate()
            .map(|(r, (call, comm, seq, root, comms))| {
                let w = export_raw(
                    r as i32,
                    n,
                    1,
                    &coll_slot(*call, *comm, *seq, *root),
                    comms,
                    &[],
                );
                // The stacks show the same call, from line 20 (every rank, every sample).
                let name = Call(*call).name().unwrap().replace("MPI_", "PMPI_");
                w.rank_queues(r as u64, None)
                    .0
                    .with_activity(in_mpi(&name, 20))
            })
            .collect(),
    )
}

#[test]
fn collectives_are_matched_by_communicator_and_number() {
    let world = |call: u32, seq: u32, root: i32| (call, 1u64, seq, root, vec![]);
    // Different calls at the same number: MPI_Barrier (60) and MPI_Bcast (61), both #5.
    let job = collectives(&[world(60, 5, -2), world(60, 5, -2), world(61, 5, 0)]);
    let rep = deadlock::confirm(&[job.clone(), job]).unwrap();
    assert_eq!(rep.verdict, Verdict::CollectiveMismatch, "{rep}");
    let h = &rep.collective[0];
    let calls: Vec<(&str, Option<u32>)> = h
        .calls
        .iter()
        .map(|c| (c.call.as_str(), c.sequence))
        .collect();
    assert_eq!(calls, [("MPI_Barrier", Some(5)), ("MPI_Bcast", Some(5))]);
    assert!(rep.to_string().contains("(its collective #5)"), "{rep}");
    // The same call with different roots: MPI_Reduce (62) at root 0 and at root 1.
    let job = collectives(&[world(62, 3, 0), world(62, 3, 1), world(62, 3, 1)]);
    let rep = deadlock::confirm(&[job.clone(), job]).unwrap();
    assert_eq!(rep.verdict, Verdict::CollectiveMismatch, "{rep}");
    let roots: Vec<Option<u64>> = rep.collective[0].calls.iter().map(|c| c.root).collect();
    assert_eq!(roots, [Some(0), Some(1)]);
    // One call at different numbers (a broadcast's root has gone on to the next one): no
    // mismatch from the collectives (the stacks-only rule still sees every rank blocked).
    let job = collectives(&[world(61, 4, 0), world(61, 3, 0), world(61, 3, 0)]);
    let rep = deadlock::confirm(&[job.clone(), job]).unwrap();
    assert!(rep.collective.is_empty(), "{rep}");
}

#[test]
fn the_same_collective_on_two_communicators_is_a_mismatch_on_each() {
    // A and B both hold all four ranks; ranks 0-1 are in MPI_Allreduce (63) on A, ranks 2-3
    // on B: each side waits for the other.
    let both = [(0xa, 4, 0), (0xb, 4, 0)];
    let on = |id: u64, r: i32| {
        let comms = both.iter().map(|&(c, n, _)| (c, n, r)).collect::<Vec<_>>();
        (63u32, id, 1u32, -2i32, comms)
    };
    let job = collectives(&[on(0xa, 0), on(0xa, 1), on(0xb, 2), on(0xb, 3)]);
    let rep = deadlock::confirm(&[job.clone(), job]).unwrap();
    assert_eq!(rep.verdict, Verdict::CollectiveMismatch, "{rep}");
    assert_eq!(rep.collective.len(), 2, "{rep}");
    let on_a = &rep.collective[0];
    assert_eq!(
        on_a.calls[0].communicator.as_ref().unwrap().context_id,
        Some(0xa)
    );
    assert_eq!(on_a.calls[0].ranks, "0-1".parse().unwrap());
    assert_eq!(on_a.elsewhere[0].ranks, "2-3".parse().unwrap());
}

#[test]
fn sub_communicators_in_different_collectives_are_no_mismatch() {
    // Ranks 0-1 in MPI_Barrier on A = {0, 1}, ranks 2-3 in MPI_Allreduce on B = {2, 3}: each
    // communicator has all its members in one same collective. From call names alone this was
    // one reported mismatch.
    let job = collectives(&[
        (60, 0xa, 1, -2, vec![(0xa, 2, 0)]),
        (60, 0xa, 1, -2, vec![(0xa, 2, 1)]),
        (63, 0xb, 1, -2, vec![(0xb, 2, 0)]),
        (63, 0xb, 1, -2, vec![(0xb, 2, 1)]),
    ]);
    let rep = deadlock::confirm(&[job.clone(), job]).unwrap();
    assert!(rep.collective.is_empty(), "{rep}");
}

#[test]
fn a_collective_every_member_is_in_is_no_hang() {
    // Every rank in MPI_Barrier #9 on MPI_COMM_WORLD, unmoved over the samples (a slow barrier
    // on a loaded machine): it has all its members, so it is progressing, not hung.
    let job = collectives(&[
        (60, 1, 9, -2, vec![]),
        (60, 1, 9, -2, vec![]),
        (60, 1, 9, -2, vec![]),
    ]);
    let rep = deadlock::confirm(&[job.clone(), job.clone(), job]).unwrap();
    assert!(!rep.has_hang(), "{rep}");
    assert!(rep.stack_waits.is_none(), "{rep}");
}

#[test]
fn a_loop_of_collectives_at_one_call_site_moves_by_its_numbers() {
    // Every rank in MPI_Barrier at the same line in both samples, but ranks 1-2 a barrier
    // behind rank 0 in the first and all at the next in the second: they progress.
    let first = collectives(&[
        (60, 1, 6, -2, vec![]),
        (60, 1, 5, -2, vec![]),
        (60, 1, 5, -2, vec![]),
    ]);
    let second = collectives(&[
        (60, 1, 7, -2, vec![]),
        (60, 1, 7, -2, vec![]),
        (60, 1, 6, -2, vec![]),
    ]);
    let rep = deadlock::confirm(&[first.clone(), second]).unwrap();
    assert!(!rep.has_hang(), "{rep}");
    // The same numbers in both samples, not all in one: stuck.
    let rep = deadlock::confirm(&[first.clone(), first]).unwrap();
    assert_eq!(rep.verdict, Verdict::BlockedInMpi, "{rep}");
}
