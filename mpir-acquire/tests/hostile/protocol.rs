//! The acquisition state machine against a hostile starter (MockTarget): variables that say
//! nonsense, events that never come or never stop, memory that fails in the middle.

use mpir_acquire::{
    AcquireError, AcquireOptions, Acquisition, Action, AttachOutcome, Event, Mode, Proven,
    RankControl,
};
use mpir_target::mock::{Access, MockStarter, MockTarget};
use mpir_target::{Fault, Memory, MemoryExt, SymbolLookupExt, TargetError};
use mpir_types::DataModel;
use mpir_types::mpir::{DebugState, symbols};
use mpir_types::node::ThisNode;

use super::harness::{SMALL, run_with};

fn drain(acq: &mut Acquisition) -> Vec<Action> {
    std::iter::from_fn(|| acq.poll_action()).collect()
}

fn addr(t: &MockTarget, name: &str) -> u64 {
    t.require_symbol(name).unwrap().address
}

/// Options under which the mock jobs' hosts are this node and attach mode holds the ranks.
fn here() -> AcquireOptions {
    AcquireOptions::default()
        .with_this_node(ThisNode::new().with_name("node00").with_name("node01"))
        .with_hold(true)
}

fn starter(n: usize, state: DebugState) -> MockTarget {
    let mut s = MockStarter::uniform(n, 2, "/opt/app", 1000);
    s.debug_state = state;
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    b.build()
}

/// Attaches to `t` and hits `MPIR_Breakpoint` `hits` times (or until the machine stops
/// continuing); returns the last actions.
fn attach_and_hit(t: &MockTarget, options: AcquireOptions, hits: usize) -> Vec<Action> {
    let bp = addr(t, symbols::BREAKPOINT);
    let mut acq = Acquisition::new(7, Mode::Attach, options);
    acq.handle(t, Event::Attached);
    let mut last = drain(&mut acq);
    for _ in 0..hits {
        if last.last() != Some(&Action::Continue) {
            break;
        }
        acq.handle(
            t,
            Event::Breakpoint {
                tid: 7,
                address: bp,
            },
        );
        last = drain(&mut acq);
    }
    last
}

fn failed(acts: &[Action]) -> &AcquireError {
    match acts.last() {
        Some(Action::Failed(e)) => e,
        other => panic!("expected a failure, got {other:?} ({acts:?})"),
    }
}

#[test]
fn the_spawn_event_never_comes() {
    // An empty table: attach waits for the spawn event.
    let t = starter(0, DebugState::Null);
    let acts = run_with("breakpoint never hit", SMALL, t, |t| {
        let mut acq = Acquisition::new(7, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        drain(&mut acq);
        acq.handle(&t, Event::Timeout);
        drain(&mut acq)
    });
    let e = failed(&acts);
    assert!(
        matches!(e, AcquireError::Timeout { pid: 7, waiting_for, .. } if waiting_for.contains("spawn event")),
        "{e}"
    );
}

#[test]
fn debug_state_holds_unknown_values_forever() {
    let t = starter(0, DebugState::Null);
    t.write_c_int(addr(&t, symbols::DEBUG_STATE), 0x7fff_fff0, "state")
        .unwrap();
    let mut o = here();
    o.max_events = 50;
    let acts = run_with("unknown debug_state", SMALL, t, move |t| {
        attach_and_hit(&t, o, 10_000)
    });
    assert!(
        matches!(
            failed(&acts),
            AcquireError::TooManyEvents { pid: 7, events: 51 }
        ),
        "{acts:?}"
    );
}

#[test]
fn debug_state_is_negative() {
    let t = starter(0, DebugState::Null);
    t.write_c_int(addr(&t, symbols::DEBUG_STATE), -1, "state")
        .unwrap();
    let mut o = here();
    o.max_events = 3;
    let acts = run_with("negative debug_state", SMALL, t, move |t| {
        attach_and_hit(&t, o, 100)
    });
    assert!(
        matches!(failed(&acts), AcquireError::TooManyEvents { .. }),
        "{acts:?}"
    );
}

/// A starter (an empty table, `state`) whose variable `name` has `access`: the mock is laid out
/// twice, the same way, to learn the variable's address first.
fn starter_with_access(name: &str, state: DebugState, access: Access) -> (MockTarget, u64) {
    let layout = || {
        let mut s = MockStarter::uniform(0, 1, "/x", 10);
        s.debug_state = state;
        let mut b = MockTarget::builder(DataModel::LP64);
        s.place(&mut b);
        b
    };
    let var = addr(&layout().build(), name);
    let mut b = layout();
    b.set_access(var, access);
    (b.build(), var)
}

#[test]
fn debug_state_is_unreadable() {
    let (t, state) = starter_with_access(symbols::DEBUG_STATE, DebugState::Spawned, Access::NONE);
    let acts = run_with("unreadable debug_state", SMALL, t, |t| {
        let mut acq = Acquisition::new(7, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        let mut acts = drain(&mut acq);
        if acts.last() == Some(&Action::Continue) {
            let bp = addr(&t, symbols::BREAKPOINT);
            acq.handle(
                &t,
                Event::Breakpoint {
                    tid: 7,
                    address: bp,
                },
            );
            acts = drain(&mut acq);
        }
        acts
    });
    let e = failed(&acts);
    assert!(
        matches!(e, AcquireError::Target { source: TargetError::Unreadable { address, fault: Fault::Protected, .. }, .. } if *address == state),
        "{e:?}"
    );
}

/// Attaches while the table is empty, then raises the spawn event after `edit` changed the
/// starter's variables.
fn spawn_after(t: &MockTarget, edit: impl FnOnce(&MockTarget)) -> Vec<Action> {
    let bp = addr(t, symbols::BREAKPOINT);
    let mut acq = Acquisition::new(7, Mode::Attach, here());
    acq.handle(t, Event::Attached);
    assert_eq!(drain(&mut acq).last(), Some(&Action::Continue));
    edit(t);
    t.write_c_int(addr(t, symbols::DEBUG_STATE), 1, "state")
        .unwrap();
    acq.handle(
        t,
        Event::Breakpoint {
            tid: 7,
            address: bp,
        },
    );
    drain(&mut acq)
}

#[test]
fn the_spawn_event_comes_with_a_null_table() {
    let t = starter(0, DebugState::Null);
    let table = addr(&t, symbols::PROCTABLE);
    let size = addr(&t, symbols::PROCTABLE_SIZE);
    let acts = run_with("NULL table at spawn", SMALL, t, move |t| {
        spawn_after(&t, |t| {
            t.write(table, &[0; 8]).unwrap();
            t.write_c_int(size, 3, "size").unwrap();
        })
    });
    let e = failed(&acts);
    assert!(
        matches!(e, AcquireError::Target { source: TargetError::InvalidValue { address, .. }, .. } if *address == table),
        "{e:?}"
    );
}

#[test]
fn the_spawn_event_comes_with_a_huge_size() {
    let t = starter(0, DebugState::Null);
    let size = addr(&t, symbols::PROCTABLE_SIZE);
    let acts = run_with("huge size at spawn", SMALL, t, move |t| {
        spawn_after(&t, |t| {
            t.write_c_int(size, i64::from(i32::MAX), "size").unwrap()
        })
    });
    let e = failed(&acts);
    // The context says what was read; its source why it cannot be.
    let AcquireError::Target { source, .. } = e else {
        panic!("{e:?}")
    };
    let cause = source.to_string();
    assert!(
        cause.contains("MPIR_proctable_size") && cause.contains("above the limit"),
        "{e}: {cause}"
    );
}

#[test]
fn every_spawn_event_comes_with_an_empty_table() {
    // A spawn event with a size of 0 is taken as "not yet" (noted), and another awaited: a
    // starter that keeps doing it ends in TooManyEvents, never in a loop or an allocation.
    let t = starter(0, DebugState::Null);
    let mut o = here();
    o.max_events = 20;
    let state = addr(&t, symbols::DEBUG_STATE);
    let acts = run_with("empty table at every spawn", SMALL, t, move |t| {
        t.write_c_int(state, 1, "state").unwrap();
        attach_and_hit(&t, o, 1000)
    });
    assert!(
        matches!(
            failed(&acts),
            AcquireError::TooManyEvents { events: 21, .. }
        ),
        "{acts:?}"
    );
}

#[test]
fn a_spawned_table_with_a_negative_size_fails_at_once() {
    // SPAWNED with a negative size cannot become a table: a typed error naming the value at
    // the first sight of it, not after the timeout or the event limit.
    let t = starter(0, DebugState::Spawned);
    t.write_c_int(addr(&t, symbols::PROCTABLE_SIZE), -1, "size")
        .unwrap();
    let acts = run_with("negative size, spawned", SMALL, t, move |t| {
        attach_and_hit(&t, here(), 1000)
    });
    assert!(
        matches!(failed(&acts), AcquireError::BadTable { size: -1, .. }),
        "{acts:?}"
    );
}

#[test]
fn the_table_changes_between_two_spawn_events() {
    // The starter raises the spawn event, then (say, a buggy second spawn) replaces the
    // table's contents: the machine has read the table once, at the first event, and the job
    // it returns is that table, not a mix.
    let t = starter(2, DebugState::Spawned);
    let table = t.read_pointer(addr(&t, symbols::PROCTABLE), "t").unwrap();
    let job = run_with("table changes", SMALL, t, move |t| {
        let mut acq = Acquisition::new(7, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        let acts = drain(&mut acq);
        let Some(Action::AttachRanks(ranks)) = acts.last().cloned() else {
            panic!("{acts:?}")
        };
        t.write(table, &[0xff; 48]).unwrap(); // garbage now
        acq.handle(
            &t,
            Event::RanksAttached(
                ranks
                    .iter()
                    .map(|&(r, p)| AttachOutcome::attached(r, vec![p], Proven::InProgram))
                    .collect(),
            ),
        );
        drain(&mut acq);
        acq.take_job().unwrap()
    });
    let pids: Vec<i64> = job.ranks().map(|r| r.pid).collect();
    assert_eq!(pids, [1000, 1001]);
}

#[test]
fn memory_fails_in_the_middle_of_the_acquisition() {
    for n in 0..12u64 {
        let mut s = MockStarter::uniform(3, 1, "/x", 10);
        s.debug_state = DebugState::Spawned;
        let mut b = MockTarget::builder(DataModel::ILP32_BE);
        s.place(&mut b);
        b.fail_reads_after(n);
        let acts = run_with("reads fail after n", SMALL, b.build(), |t| {
            let mut acq = Acquisition::new(7, Mode::Attach, here());
            acq.handle(&t, Event::Attached);
            drain(&mut acq)
        });
        // Either the table was read before the fault (ranks to attach; or none, when the
        // fault left the host names unreadable: a rank on no known host is never touched) or
        // a typed error.
        match acts.last() {
            Some(Action::AttachRanks(r)) => assert_eq!(r.len(), 3),
            Some(Action::Finished) => {}
            Some(Action::Failed(AcquireError::Target { source, .. })) => assert!(
                matches!(
                    source,
                    TargetError::Unreadable {
                        fault: Fault::Injected,
                        ..
                    } | TargetError::ShortRead { .. }
                ),
                "after {n} reads: {source}"
            ),
            other => panic!("after {n} reads: {other:?}"),
        }
    }
}

#[test]
fn being_debugged_is_read_only() {
    let (t, var) =
        starter_with_access(symbols::BEING_DEBUGGED, DebugState::Null, Access::READ_ONLY);
    let (acts, writes) = run_with("read-only being_debugged", SMALL, t, |t| {
        let mut acq = Acquisition::new(7, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        (drain(&mut acq), t.writes().len())
    });
    let e = failed(&acts);
    assert!(
        matches!(e, AcquireError::Target { source: TargetError::Unwritable { address, fault: Fault::Protected, .. }, .. } if *address == var),
        "{e:?}"
    );
    assert_eq!(writes, 0);
}

#[test]
fn the_abort_string_is_unterminated() {
    let mut s = MockStarter::uniform(0, 1, "/x", 10);
    s.debug_state = DebugState::Aborting;
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    let junk = b.alloc_with(vec![b'!'; 64 << 10]); // no NUL, 64 KiB, then a hole
    b.pointer_variable(symbols::DEBUG_ABORT_STRING, junk);
    let acts = run_with("unterminated abort string", SMALL, b.build(), |t| {
        attach_and_hit(&t, here(), 1)
    });
    let e = failed(&acts);
    let AcquireError::JobAborted { pid: 7, message } = e else {
        panic!("{e:?}")
    };
    assert!(
        message.len() < 4096 + 200,
        "bounded: {} bytes",
        message.len()
    );
    assert!(message.contains(&format!("{junk:#x}")), "{message}");
}

#[test]
fn the_abort_string_is_unmapped() {
    let mut s = MockStarter::uniform(0, 1, "/x", 10);
    s.debug_state = DebugState::Aborting;
    let mut b = MockTarget::builder(DataModel::ILP32);
    s.place(&mut b);
    b.pointer_variable(symbols::DEBUG_ABORT_STRING, 0x5000_0000);
    let acts = run_with("unmapped abort string", SMALL, b.build(), |t| {
        attach_and_hit(&t, here(), 1)
    });
    let e = failed(&acts);
    assert!(
        matches!(e, AcquireError::JobAborted { message, .. } if message.contains("0x50000000")),
        "{e:?}"
    );
}

#[test]
fn no_mpir_breakpoint() {
    let mut b = MockTarget::builder(DataModel::LP64);
    b.int_variable(symbols::PROCTABLE_SIZE, 2);
    b.pointer_variable(symbols::PROCTABLE, 0x1234);
    let acts = run_with("no MPIR_Breakpoint", SMALL, b.build(), |t| {
        let mut acq = Acquisition::new(7, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        drain(&mut acq)
    });
    assert!(
        matches!(failed(&acts), AcquireError::NotAStarter { pid: 7, symbol, .. } if *symbol == symbols::BREAKPOINT),
        "{acts:?}"
    );
}

#[test]
fn every_rank_fails_to_attach() {
    let t = starter(4, DebugState::Spawned);
    let job = run_with("all ranks fail", SMALL, t, |t| {
        let mut acq = Acquisition::new(7, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        let acts = drain(&mut acq);
        let Some(Action::AttachRanks(ranks)) = acts.last().cloned() else {
            panic!("{acts:?}")
        };
        let failed = ranks
            .iter()
            .map(|&(r, _)| {
                AttachOutcome::failed(
                    r,
                    TargetError::Unreadable {
                        address: 0,
                        len: 0,
                        fault: Fault::ProcessGone,
                    },
                )
            })
            .collect();
        acq.handle(&t, Event::RanksAttached(failed));
        assert_eq!(drain(&mut acq), [Action::Finished]);
        acq.take_job().unwrap()
    });
    assert_eq!(job.len(), 4);
    assert!(job.attached_pids().is_empty());
    assert!(
        (0..4).all(|r| matches!(
            job.control(r),
            RankControl::Failed {
                error: TargetError::Unreadable {
                    fault: Fault::ProcessGone,
                    ..
                }
            }
        )),
        "{job:?}"
    );
}
