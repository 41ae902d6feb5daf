//! What the protocol refuses or reports instead of going on: partial attach the starter does
//! not allow, bad pids, hostile table sizes, ranks of other nodes, timeouts and endless NULL
//! events.

use std::time::Duration;

use mpir_acquire::{
    AcquireError, AcquireOptions, Acquisition, Action, Event, GateRelease, Mode, Note, RankControl,
    RankSelection, Refusal,
};
use mpir_target::TargetError;
use mpir_target::{Memory, MemoryExt};
use mpir_types::DataModel;
use mpir_types::mpir::{DebugState, symbols};
use mpir_types::node::ThisNode;

use crate::{addr, attached, drain, here, ok, starter};

#[test]
fn partial_attach_is_honoured_only_when_the_starter_allows_it() {
    let only = here().with_ranks(RankSelection::Only(vec![1, 3].into()));
    // Hydra-style: the flag is present with value 0 — presence is what counts.
    let t = starter(4, DataModel::LP64, |s| {
        s.flags.push((symbols::PARTIAL_ATTACH_OK.into(), 0))
    });
    let mut acq = Acquisition::new(1, Mode::Attach, only.clone());
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert_eq!(acts[1], Action::AttachRanks(vec![(1, 1001), (3, 1003)]));
    acq.handle(&t, Event::RanksAttached(vec![ok(1, 1001), ok(3, 1003)]));
    drain(&mut acq);
    let job = acq.take_job().unwrap();
    assert!(job.starter.flags.partial_attach_ok.present);
    assert_eq!(job.starter.flags.partial_attach_ok.value, Some(0));
    assert_eq!(job.control(0), &RankControl::NotAttached);

    // Without MPIR_partial_attach_ok, a job that ran before we attached: its ranks were not
    // made to wait for us, so only the selection is held, and a note says the gate is left.
    let t = starter(4, DataModel::LP64, |_| {});
    let mut acq = Acquisition::new(1, Mode::Attach, only.clone());
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert_eq!(acts[1], Action::AttachRanks(vec![(1, 1001), (3, 1003)]));
    acq.handle(&t, Event::RanksAttached(vec![ok(1, 1001), ok(3, 1003)]));
    drain(&mut acq);
    let job = acq.take_job().unwrap();
    assert_eq!(job.notes, [Note::GateLeftAlone]);

    // Asked to release the gate: every rank (MPIR 1.1 §8 step 18), and a note saying why.
    let mut acq = Acquisition::new(1, Mode::Attach, only.with_gate(GateRelease::Always));
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(
        matches!(&acts[1], Action::AttachRanks(r) if r.len() == 4),
        "{acts:?}"
    );
    acq.handle(&t, Event::RanksAttached(attached(4)));
    drain(&mut acq);
    let job = acq.take_job().unwrap();
    assert_eq!(job.notes, [Note::AllRanksForGate]);
}

#[test]
fn bad_pids_are_per_rank_problems_and_the_starter_is_not_attached_twice() {
    let t = starter(4, DataModel::LP64, |s| {
        s.ranks[1].pid = 0;
        s.ranks[2].pid = -5;
        s.ranks[3].pid = 4242; // the starter itself (rank 0 runs in the starter)
    });
    let mut acq = Acquisition::new(4242, Mode::Attach, here());
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert_eq!(acts[1], Action::AttachRanks(vec![(0, 1000)]));
    acq.handle(&t, Event::RanksAttached(vec![ok(0, 1000)]));
    drain(&mut acq);
    let job = acq.take_job().unwrap();
    assert_eq!(
        job.control(1),
        &RankControl::Refused {
            reason: Refusal::InvalidPid { pid: 0 }
        }
    );
    assert_eq!(
        job.control(2),
        &RankControl::Refused {
            reason: Refusal::InvalidPid { pid: -5 }
        }
    );
    assert!(
        job.notes
            .contains(&Note::RankIsStarter { rank: 3, pid: 4242 }),
        "{:?}",
        job.notes
    );
    assert_eq!(
        job.table.resolved.problems.len(),
        2,
        "the table lists them too"
    );
}

#[test]
fn hostile_sizes_are_typed_errors() {
    for size in [-1i64, i64::from(i32::MAX)] {
        let t = starter(2, DataModel::LP64, |_| {});
        t.write_c_int(addr(&t, symbols::PROCTABLE_SIZE), size, "size")
            .unwrap();
        let mut acq = Acquisition::new(3, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        let acts = drain(&mut acq);
        match (size, acts.last()) {
            // A negative size while the state says SPAWNED: an error at once, naming it.
            (-1, Some(Action::Failed(e))) => {
                assert!(matches!(e, AcquireError::BadTable { size: -1, .. }), "{e}");
                assert!(e.to_string().contains("MPIR_proctable_size = -1"), "{e}");
            }
            (_, Some(Action::Failed(e))) => {
                // The context says what was read; the source names the variable and what is
                // wrong with it.
                let cause = std::error::Error::source(e).map(ToString::to_string);
                assert!(
                    cause
                        .as_deref()
                        .is_some_and(|c| c.contains("MPIR_proctable_size")),
                    "{e}: {cause:?}"
                )
            }
            other => panic!("{other:?}"),
        }
    }
    // A negative size before any spawn (a starter still setting up): wait for the spawn
    // event (bounded by the timeout), where a still negative size is the same error.
    let t = starter(2, DataModel::LP64, |s| s.debug_state = DebugState::Null);
    t.write_c_int(addr(&t, symbols::PROCTABLE_SIZE), -5, "size")
        .unwrap();
    let mut acq = Acquisition::new(3, Mode::Attach, here());
    acq.handle(&t, Event::Attached);
    assert_eq!(drain(&mut acq).last(), Some(&Action::Continue));
    t.write_c_int(addr(&t, symbols::DEBUG_STATE), 1, "state")
        .unwrap();
    let bp = addr(&t, symbols::BREAKPOINT);
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 3,
            address: bp,
        },
    );
    assert!(
        matches!(
            drain(&mut acq).last(),
            Some(Action::Failed(AcquireError::BadTable { size: -5, .. }))
        ),
        "answered at once, not after the timeout"
    );
    // A NULL table with entries.
    let t = starter(2, DataModel::LP64, |_| {});
    t.write(addr(&t, symbols::PROCTABLE), &[0; 8]).unwrap();
    let mut acq = Acquisition::new(3, Mode::Attach, here());
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(
        matches!(
            acts.last(),
            Some(Action::Failed(AcquireError::Target {
                source: TargetError::InvalidValue { what, problem, .. },
                ..
            })) if what == symbols::PROCTABLE && problem.contains("NULL")
        ),
        "{acts:?}"
    );
}

#[test]
fn timeouts_and_endless_null_events_end_with_errors_that_say_what_was_awaited() {
    let t = starter(0, DataModel::LP64, |s| s.debug_state = DebugState::Null);
    let bp = addr(&t, symbols::BREAKPOINT);
    let mut opts = here().with_timeout(Duration::from_millis(5));
    opts.max_events = 3;
    let mut acq = Acquisition::new(2, Mode::Attach, opts.clone());
    acq.handle(&t, Event::Attached);
    drain(&mut acq);
    acq.handle(&t, Event::Timeout);
    let acts = drain(&mut acq);
    let [Action::Failed(e)] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert!(e.to_string().contains("spawn event"), "{e}");

    let mut acq = Acquisition::new(2, Mode::Attach, opts);
    acq.handle(&t, Event::Attached);
    drain(&mut acq);
    for _ in 0..3 {
        acq.handle(
            &t,
            Event::Breakpoint {
                tid: 2,
                address: bp,
            },
        );
        assert_eq!(drain(&mut acq).last(), Some(&Action::Continue));
    }
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 2,
            address: bp,
        },
    );
    let acts = drain(&mut acq);
    assert!(
        matches!(
            acts.last(),
            Some(Action::Failed(AcquireError::TooManyEvents {
                events: 4,
                ..
            }))
        ),
        "{acts:?}"
    );
}

#[test]
fn only_this_nodes_ranks_are_ever_candidates() {
    // node00 is this node; node01 is another (its pids mean nothing here).
    let opts = here().with_this_node(ThisNode::new().with_name("node00"));
    let t = starter(6, DataModel::LP64, |_| {});
    let mut acq = Acquisition::new(9, Mode::Attach, opts);
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    let Some(Action::AttachRanks(ranks)) = acts.get(1) else {
        panic!("{acts:?}")
    };
    assert_eq!(ranks, &[(0, 1000), (2, 1002), (4, 1004)]);
    acq.handle(
        &t,
        Event::RanksAttached(ranks.iter().map(|&(r, p)| ok(r, p)).collect()),
    );
    drain(&mut acq);
    let job = acq.take_job().unwrap();
    for r in [1, 3, 5] {
        assert_eq!(job.control(r), &RankControl::Remote, "rank {r}");
        assert!(!job.locality(r).is_local());
    }
    assert!(job.locality(0).is_local());
    let nodes: Vec<(Option<&str>, bool, usize)> = job
        .nodes()
        .iter()
        .map(|n| (n.host, n.locality.is_local(), n.ranks))
        .collect();
    assert_eq!(
        nodes,
        [(Some("node00"), true, 3), (Some("node01"), false, 3)]
    );
    // With no facts at all, only loopback names are this node: nothing is attached.
    let t = starter(4, DataModel::LP64, |_| {});
    let mut acq = Acquisition::new(9, Mode::Attach, AcquireOptions::default().with_hold(true));
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(!acts.iter().any(|a| matches!(a, Action::AttachRanks(_))));
    // An alias the caller gives makes node01 this node.
    let mut acq = Acquisition::new(
        9,
        Mode::Attach,
        AcquireOptions::default()
            .with_hold(true)
            .with_alias("NODE01."),
    );
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert_eq!(
        acts.get(1),
        Some(&Action::AttachRanks(vec![(1, 1001), (3, 1003)]))
    );
}
