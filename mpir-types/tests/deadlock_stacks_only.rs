//! The stacks-only rule (issue 29): ranks whose waits no queue shows — queues not read, or read
//! and empty while the stacks are inside MPI — and the `blocked_in_mpi` verdict, over one and
//! several snapshots; every way it must refuse to call a job hung.

mod stack_shapes;

use mpir_types::deadlock::{
    self, CommQueues, JobSnapshot, RankSnapshot, Verdict, WaitSource, WhyProgressing,
};
use mpir_types::mqd::{Length, OpClass, OpStatus, Operation, Peer};
use mpir_types::ranks::RankSet;
use mpir_types::stacks::{RankActivity, UnknownWhy};
use stack_shapes::*;

fn stacks_only(r: u64, a: RankActivity) -> RankSnapshot {
    RankSnapshot::stacks_only(r, Some(4000 + r as i64), a)
}

/// `n` ranks known by their stacks alone, each at `acts[r]`.
fn job(acts: Vec<RankActivity>) -> JobSnapshot {
    JobSnapshot::new(
        acts.into_iter()
            .zip(0u64..)
            .map(|(a, r)| stacks_only(r, a))
            .collect(),
    )
}

fn ring_recv() -> RankActivity {
    in_mpi("PMPI_Recv", 20)
}

fn set(s: &str) -> RankSet {
    s.parse().unwrap()
}

#[test]
fn a_ring_seen_only_by_its_stacks_is_a_hang_over_samples() {
    let one = job(vec![ring_recv(), ring_recv(), ring_recv()]);
    let rep = deadlock::confirm(&[one.clone(), one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::BlockedInMpi, "{rep}");
    assert!(rep.has_hang() && !rep.has_unknown_waits());
    assert!(rep.cycles.is_empty() && rep.waits.is_empty());
    let w = rep.stack_waits.as_ref().unwrap();
    assert!(w.hang);
    assert_eq!(w.blocked.len(), 1);
    assert_eq!(w.blocked[0].call, "MPI_Recv");
    assert_eq!(w.blocked[0].ranks, set("0-2"));
    let site = w.blocked[0].call_site.as_ref().unwrap();
    assert_eq!(site.location.as_ref().unwrap().line, 20);
    assert_eq!(w.queues_not_read, set("0-2"));
    assert!(w.queues_empty.is_empty() && w.progressing.is_empty());
    let text = rep.to_string();
    assert!(
        text.starts_with(
            "hang: every rank is blocked inside MPI and none moved in all 3 snapshots"
        ),
        "{text}"
    );
    assert!(
        text.contains("ranks 0-2 in MPI_Recv at main (ring.c:20)"),
        "{text}"
    );
    assert!(text.contains("queues not read for ranks 0-2"), "{text}");
}

#[test]
fn one_snapshot_is_only_a_potential_hang() {
    let rep = deadlock::analyze(&job(vec![ring_recv(), ring_recv()])).unwrap();
    assert_eq!(rep.verdict, Verdict::PotentialBlockedInMpi, "{rep}");
    assert!(rep.has_hang());
    assert!(rep.to_string().starts_with("potential hang"), "{rep}");
}

#[test]
fn a_rank_outside_mpi_means_no_hang_and_no_all_clear() {
    // Ranks 0-1 wait in MPI_Recv; rank 2 sleeps outside MPI, unmoved: it may be what they
    // wait for, so this is no hang — and no "no problem" either.
    let one = job(vec![ring_recv(), ring_recv(), outside(9)]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
    assert!(!rep.has_hang());
    assert!(rep.has_unknown_waits());
    let w = rep.stack_waits.as_ref().unwrap();
    assert!(!w.hang);
    assert_eq!(w.blocked[0].ranks, set("0-1"));
    assert_eq!(w.progressing.len(), 1);
    assert_eq!(w.progressing[0].why, WhyProgressing::NotInMpi);
    assert_eq!(w.progressing[0].ranks, set("2"));
    let text = rep.to_string();
    assert!(
        text.contains("but ranks 0-1 inside MPI waiting for what no queue shows"),
        "{text}"
    );
    assert!(text.contains("not a hang"), "{text}");
    assert!(text.contains("rank 2: not inside MPI"), "{text}");
}

#[test]
fn a_rank_that_moves_between_snapshots_is_not_stuck() {
    let first = job(vec![ring_recv(), ring_recv(), ring_recv()]);
    // Rank 2 is in MPI_Recv from another line in the second snapshot: it progressed.
    let second = job(vec![ring_recv(), ring_recv(), in_mpi("PMPI_Recv", 21)]);
    let rep = deadlock::confirm(&[first, second]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
    let w = rep.stack_waits.as_ref().unwrap();
    assert!(!w.hang);
    assert_eq!(w.blocked[0].ranks, set("0-1"));
    assert_eq!(w.progressing[0].why, WhyProgressing::Moved);
    assert_eq!(w.progressing[0].ranks, set("2"));
    // A rank missing from a later snapshot moved too (it cannot be shown to have stayed).
    let first = job(vec![ring_recv(), ring_recv()]);
    let second = job(vec![ring_recv()]);
    let rep = deadlock::confirm(&[first, second]).unwrap();
    assert!(!rep.has_hang(), "{rep}");
}

#[test]
fn ranks_all_outside_mpi_are_no_hang_and_nothing_unknown() {
    let one = job(vec![outside(3), computing(0x40)]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle);
    assert!(rep.stack_waits.is_none(), "{rep}");
    assert!(!rep.has_hang() && !rep.has_unknown_waits());
}

#[test]
fn an_unknown_or_unread_rank_forbids_the_verdict() {
    let unknown = job(vec![
        ring_recv(),
        ring_recv(),
        RankActivity::Unknown(UnknownWhy::NoStacks),
    ]);
    let rep = deadlock::confirm(&[unknown.clone(), unknown]).unwrap();
    assert!(!rep.has_hang(), "{rep}");
    assert!(rep.has_unknown_waits());
    assert_eq!(rep.stack_waits.as_ref().unwrap().unknown, set("2"));
    assert!(
        rep.to_string().contains("rank 2: unknown (no stacks)"),
        "{rep}"
    );

    // Every rank in the snapshot is blocked, but one rank of the job was not read at all.
    let partial = job(vec![ring_recv(), ring_recv()]).with_unread(1);
    let rep = deadlock::confirm(&[partial.clone(), partial]).unwrap();
    assert_eq!(rep.verdict, Verdict::NoCycle, "{rep}");
    assert!(rep.has_unknown_waits());
    assert_eq!(rep.stack_waits.as_ref().unwrap().unread, 1);
    assert!(
        rep.to_string().contains("1 more ranks not read at all"),
        "{rep}"
    );
}

#[test]
fn finished_ranks_end_no_wait_so_the_rest_is_a_hang() {
    let one = job(vec![
        ring_recv(),
        RankActivity::Exited,
        RankActivity::Finalized,
    ]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::BlockedInMpi, "{rep}");
    assert_eq!(rep.stack_waits.as_ref().unwrap().finished, set("1-2"));
    // Ranks all finished: nobody is blocked, no section.
    let done = job(vec![RankActivity::Exited, RankActivity::Finalized]);
    assert!(
        deadlock::confirm(&[done.clone(), done])
            .unwrap()
            .stack_waits
            .is_none()
    );
}

fn world(n: u64, r: u64, ops: Vec<Operation>) -> RankSnapshot {
    let mut c = CommQueues::new(0x7000, "MPI_COMM_WORLD", n, r);
    c.context_id = Some(0);
    c.operations = ops;
    RankSnapshot::new(r, Some(1000 + r as i64), vec![c])
}

fn pending(class: OpClass, peer: u64, tag: i64) -> Operation {
    let mut op = Operation::new(class, Peer::Rank(peer));
    op.status = OpStatus::Pending;
    op.tag = Some(tag);
    op.length = Length {
        bytes: Some(8),
        elements: None,
    };
    op.buffer = 0x2000 + peer;
    op
}

#[test]
fn read_queues_that_show_nothing_do_not_outvote_the_stacks() {
    // Queues read and empty (a reader blind to the path the MPI uses, or a collective), every
    // rank in MPI_Allreduce at the same place: the stacks say blocked.
    let one = JobSnapshot::new(
        (0..3)
            .map(|r| world(3, r, vec![]).with_activity(in_mpi("PMPI_Allreduce", 40)))
            .collect(),
    );
    let rep = deadlock::confirm(&[one.clone(), one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::BlockedInMpi, "{rep}");
    let w = rep.stack_waits.as_ref().unwrap();
    assert_eq!(w.queues_empty, set("0-2"));
    assert!(w.queues_not_read.is_empty());
    assert!(
        rep.to_string()
            .contains("the queues of ranks 0-2 show no pending operation"),
        "{rep}"
    );
}

#[test]
fn queued_waits_that_can_complete_keep_a_rank_progressing() {
    // Rank 0 receives from 1, and rank 1 has the matching send pending: rank 0's wait can
    // complete. Rank 1 is in MPI_Send with that send, rank 2 blocked by its stacks alone.
    let mut r0 = world(3, 0, vec![pending(OpClass::Receive, 1, 5)]);
    r0.activity = Some(ring_recv());
    let mut r1 = world(3, 1, vec![pending(OpClass::Send, 0, 5)]);
    r1.activity = Some(in_mpi("PMPI_Send", 30));
    let r2 = stacks_only(2, ring_recv());
    let one = JobSnapshot::new(vec![r0, r1, r2]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert!(!rep.has_hang(), "{rep}");
    let w = rep.stack_waits.as_ref().unwrap();
    assert_eq!(w.blocked[0].ranks, set("2"));
    assert_eq!(w.progressing[0].why, WhyProgressing::WaitsCanComplete);
    assert_eq!(w.progressing[0].ranks, set("0-1"));
}

#[test]
fn a_cycle_in_the_queues_wins_over_the_stacks_only_verdict() {
    // Ranks 0 and 1 receive from each other (queues), rank 2 is known by its stacks only.
    let mut r0 = world(3, 0, vec![pending(OpClass::Receive, 1, 5)]);
    r0.activity = Some(ring_recv());
    let mut r1 = world(3, 1, vec![pending(OpClass::Receive, 0, 5)]);
    r1.activity = Some(ring_recv());
    let one = JobSnapshot::new(vec![r0, r1, stacks_only(2, ring_recv())]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::Deadlock, "{rep}");
    assert_eq!(rep.cycles[0].ranks, [0, 1]);
    let w = rep.stack_waits.as_ref().unwrap();
    // The cycle's ranks are deadlocked, not progressing: the stacks-only account is a hang too.
    assert!(w.hang);
    assert_eq!(w.blocked[0].ranks, set("2"));
    assert!(w.progressing.is_empty());
}

#[test]
fn a_collective_mismatch_wins_over_the_stacks_only_verdict() {
    let one = job(vec![
        in_mpi("PMPI_Barrier", 50),
        in_mpi("PMPI_Barrier", 50),
        in_mpi("PMPI_Bcast", 51),
    ]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::CollectiveMismatch, "{rep}");
    assert!(rep.stack_waits.as_ref().unwrap().hang);
}

#[test]
fn blocked_ranks_are_grouped_by_call_and_call_site() {
    let one = job(vec![
        ring_recv(),
        in_mpi("PMPI_Recv", 22),
        ring_recv(),
        in_mpi("PMPI_Finalize", 60),
    ]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    let w = rep.stack_waits.as_ref().unwrap();
    let groups: Vec<(String, u32, RankSet)> = w
        .blocked
        .iter()
        .map(|b| {
            let line = b
                .call_site
                .as_ref()
                .unwrap()
                .location
                .as_ref()
                .unwrap()
                .line;
            (b.call.clone(), line, b.ranks.clone())
        })
        .collect();
    assert_eq!(
        groups,
        [
            ("MPI_Finalize".to_string(), 60, set("3")),
            ("MPI_Recv".to_string(), 20, set("0,2")),
            ("MPI_Recv".to_string(), 22, set("1")),
        ]
    );
}

#[cfg(feature = "serde")]
#[test]
fn the_source_is_absent_from_json_for_queues_and_round_trips() {
    let q = world(1, 0, vec![]);
    let v = serde_json::to_value(&q).unwrap();
    assert!(v.get("source").is_none(), "{v}");
    let s = stacks_only(0, ring_recv());
    let v = serde_json::to_value(&s).unwrap();
    assert_eq!(v["source"], "stacks");
    let back: RankSnapshot = serde_json::from_value(v).unwrap();
    assert_eq!(back.source, WaitSource::Stacks);
    let snap = JobSnapshot::new(vec![s]).with_unread(2);
    let v = serde_json::to_value(&snap).unwrap();
    assert_eq!(v["unread"], 2);
    let back: JobSnapshot = serde_json::from_value(v).unwrap();
    assert_eq!(back, snap);
    // A report with a stacks-only hang round-trips.
    let rep = deadlock::analyze(&snap).unwrap();
    let back: deadlock::DeadlockReport =
        serde_json::from_value(serde_json::to_value(&rep).unwrap()).unwrap();
    assert_eq!(back, rep);
}

#[test]
fn a_rank_inside_mpi_finalize_sends_nothing_more() {
    // Rank 0 receives from rank 1 (tag 5), which went on to MPI_Finalize without sending it
    // (a tag mismatch, a skipped send): the wait can never end. Before, a rank in MPI_Finalize
    // could still "progress", and rank 0 was reported progressing.
    let mut r0 = world(2, 0, vec![pending(OpClass::Receive, 1, 5)]);
    r0.activity = Some(ring_recv());
    let r1 = world(2, 1, vec![]).with_activity(in_mpi("PMPI_Finalize", 60));
    let one = JobSnapshot::new(vec![r0, r1]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert!(rep.has_hang(), "{rep}");
    assert_eq!(rep.blocked.len(), 1, "{rep}");
    assert_eq!(rep.blocked[0].rank, 0);
    assert_eq!(rep.blocked[0].waits_for, [1]);
    assert!(
        rep.to_string()
            .contains("blocked, waiting on ranks that finalized, are finalizing or exited"),
        "{rep}"
    );
    // A message rank 1 already sent (pending at rank 1) still satisfies the receive.
    let mut r0 = world(2, 0, vec![pending(OpClass::Receive, 1, 5)]);
    r0.activity = Some(ring_recv());
    let r1 =
        world(2, 1, vec![pending(OpClass::Send, 0, 5)]).with_activity(in_mpi("PMPI_Finalize", 60));
    let one = JobSnapshot::new(vec![r0, r1]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert!(rep.blocked.is_empty(), "{rep}");
}

#[test]
fn a_queued_wait_on_a_rank_blocked_for_something_unknown_is_no_way_out() {
    // Rank 0's queues (or wait-states) say it receives from rank 1; ranks 1 and 2 are known
    // only by their stacks, both blocked in MPI_Recv. Rank 1 is not free just because its
    // waits are unknown: rank 0 is blocked too, and nothing can progress.
    // (Its reader knows the peer's job rank, as Open MPI's DLL and the wait-states on
    // MPI_COMM_WORLD say it.)
    let mut recv = pending(OpClass::Receive, 1, 10);
    recv.peer_global = Some(1);
    let mut r0 = world(3, 0, vec![recv.clone()]);
    r0.activity = Some(ring_recv());
    let one = JobSnapshot::new(vec![
        r0,
        stacks_only(1, ring_recv()),
        stacks_only(2, ring_recv()),
    ]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert_eq!(rep.verdict, Verdict::BlockedInMpi, "{rep}");
    let w = rep.stack_waits.as_ref().unwrap();
    assert_eq!(w.blocked[0].ranks, set("0-2"));
    assert_eq!(w.waits_on_blocked, set("0"));
    assert_eq!(w.queues_not_read, set("1-2"));
    assert!(
        rep.to_string()
            .contains("rank 0 wait, by their queues, on ranks blocked for something unknown"),
        "{rep}"
    );
    // The same with rank 2 computing outside MPI: rank 1 may be waiting for it, so no hang,
    // and rank 0 still waits on a blocked rank.
    let mut r0 = world(3, 0, vec![recv]);
    r0.activity = Some(ring_recv());
    let one = JobSnapshot::new(vec![
        r0,
        stacks_only(1, ring_recv()),
        stacks_only(2, outside(3)),
    ]);
    let rep = deadlock::confirm(&[one.clone(), one]).unwrap();
    assert!(!rep.has_hang(), "{rep}");
    assert!(rep.has_unknown_waits());
    assert_eq!(rep.stack_waits.as_ref().unwrap().waits_on_blocked, set("0"));
}
