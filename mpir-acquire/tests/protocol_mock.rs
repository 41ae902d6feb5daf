//! The acquisition protocol on a MockTarget: every path of the state machine without a
//! process — launch and attach, events NULL/SPAWNED/ABORTING/unknown, partial attach, the
//! extensions, hostile tables — and the writes it makes, checked against what the spec allows.

use std::time::Duration;

use mpir_acquire::{
    AcquireError, AcquireOptions, Acquisition, Action, AttachOutcome, Event, GateRelease, Mode,
    Note, Proven, RankControl, RankSelection, Refusal, ToolDaemon,
};
use mpir_target::TargetError;
use mpir_target::mock::{MockStarter, MockTarget};
use mpir_target::{Memory, MemoryExt, SymbolLookupExt};
use mpir_types::DataModel;
use mpir_types::mpir::{DebugState, symbols};
use mpir_types::node::ThisNode;

fn drain(acq: &mut Acquisition) -> Vec<Action> {
    std::iter::from_fn(|| acq.poll_action()).collect()
}

fn addr(t: &MockTarget, name: &str) -> u64 {
    t.require_symbol(name).unwrap().address
}

/// Written symbol names, in order.
fn written(t: &MockTarget) -> Vec<String> {
    t.writes()
        .into_iter()
        .map(|w| w.symbol.unwrap_or_else(|| format!("{:#x}", w.address)))
        .collect()
}

fn starter(n: usize, model: DataModel, edit: impl FnOnce(&mut MockStarter)) -> MockTarget {
    let mut s = MockStarter::uniform(n, 2, "/opt/app/bin/solver", 1000);
    edit(&mut s);
    let mut b = MockTarget::builder(model);
    s.place(&mut b);
    b.function("_start");
    b.build()
}

fn ok(rank: u64, tid: u32) -> AttachOutcome {
    AttachOutcome::attached(rank, vec![tid], Proven::InProgram)
}

fn attached(n: usize) -> Vec<AttachOutcome> {
    (0..n as u64).map(|r| ok(r, 1000 + r as u32)).collect()
}

/// Options under which the mock job's hosts (`node00`, `node01`) are this node, and attach
/// mode holds the ranks (so attaches them).
fn here() -> AcquireOptions {
    AcquireOptions::default()
        .with_this_node(ThisNode::new().with_name("node00").with_name("node01"))
        .with_hold(true)
}

#[test]
fn attach_to_a_filled_table_reads_it_and_attaches_every_rank() {
    for model in [
        DataModel::LP64,
        DataModel::ILP32,
        DataModel::LP64_BE,
        DataModel::ILP32_BE,
    ] {
        let t = starter(4, model, |_| {});
        let mut acq = Acquisition::new(77, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        let bp = addr(&t, symbols::BREAKPOINT);
        let acts = drain(&mut acq);
        assert_eq!(acts[0], Action::InsertBreakpoint { address: bp });
        let Action::AttachRanks(ranks) = &acts[1] else {
            panic!("{acts:?}")
        };
        assert_eq!(ranks, &[(0, 1000), (1, 1001), (2, 1002), (3, 1003)]);
        acq.handle(&t, Event::RanksAttached(attached(4)));
        assert_eq!(drain(&mut acq), [Action::Finished]);
        let job = acq.take_job().unwrap();
        let hosts: Vec<_> = job.ranks().map(|r| r.host.unwrap().to_string()).collect();
        assert_eq!(hosts, ["node00", "node01", "node00", "node01"], "{model:?}");
        assert!(job.starter.is_separate());
        assert!(job.starter.set_being_debugged);
        assert!(matches!(job.control(3), RankControl::Attached { .. }));
        // The only write: MPIR_being_debugged = 1.
        assert_eq!(written(&t), [symbols::BEING_DEBUGGED]);
        assert_eq!(
            t.read_c_int(addr(&t, symbols::BEING_DEBUGGED), "x")
                .unwrap(),
            1
        );
        mpir_acquire::protocol::undo_writes(&t, &job.starter).unwrap();
        assert_eq!(
            t.read_c_int(addr(&t, symbols::BEING_DEBUGGED), "x")
                .unwrap(),
            0
        );
    }
}

#[test]
fn launch_goes_to_the_entry_point_then_waits_for_the_spawn_event() {
    let t = starter(3, DataModel::LP64, |s| s.debug_state = DebugState::Null);
    let entry = addr(&t, "_start");
    let bp = addr(&t, symbols::BREAKPOINT);
    let state = addr(&t, symbols::DEBUG_STATE);
    let mut acq = Acquisition::new(9, Mode::Launch, here());
    acq.handle(&t, Event::Exec { entry });
    assert_eq!(
        drain(&mut acq),
        [
            Action::InsertBreakpoint { address: entry },
            Action::Continue
        ]
    );
    assert!(
        t.writes().is_empty(),
        "nothing written before the entry point"
    );
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 9,
            address: entry,
        },
    );
    assert_eq!(
        drain(&mut acq),
        [
            Action::RemoveBreakpoint { address: entry },
            Action::InsertBreakpoint { address: bp },
            Action::Continue
        ]
    );
    assert_eq!(written(&t), [symbols::BEING_DEBUGGED]);
    // An MPIR_NULL event: return and continue.
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 11,
            address: bp,
        },
    );
    assert_eq!(
        drain(&mut acq),
        [Action::ReturnFromCall { tid: 11 }, Action::Continue]
    );
    // An unknown state: noted, ignored.
    t.write_c_int(state, 7, "state").unwrap();
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 11,
            address: bp,
        },
    );
    assert_eq!(
        drain(&mut acq),
        [Action::ReturnFromCall { tid: 11 }, Action::Continue]
    );
    // The spawn event.
    t.write_c_int(state, 1, "state").unwrap();
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 11,
            address: bp,
        },
    );
    let acts = drain(&mut acq);
    assert_eq!(acts[0], Action::ReturnFromCall { tid: 11 });
    assert!(matches!(&acts[1], Action::AttachRanks(r) if r.len() == 3));
    let mut results = attached(3);
    let exited = TargetError::Control {
        pid: 1001,
        operation: "attach".into(),
        reason: "the process exited during the attach".into(),
        cause: mpir_target::ControlCause::Gone,
    };
    results[1] = AttachOutcome::failed(1, exited.clone());
    acq.handle(&t, Event::RanksAttached(results));
    assert_eq!(drain(&mut acq), [Action::Finished]);
    let job = acq.take_job().unwrap();
    assert_eq!(
        job.control(1),
        &RankControl::Failed { error: exited },
        "the driver's error is kept as it came"
    );
    assert_eq!(job.attached_pids().len(), 2);
    assert!(job.notes.contains(&Note::UnknownEventState { state: 7 }));
    assert!(
        job.notes
            .iter()
            .any(|n| n.to_string().contains("unknown MPIR_debug_state 7"))
    );
}

#[test]
fn a_program_without_mpir_breakpoint_may_exec_one_or_is_not_a_starter() {
    let mut b = MockTarget::builder(DataModel::LP64);
    let entry = b.function("_start");
    let t = b.build();
    let mut acq = Acquisition::new(5, Mode::Launch, here());
    acq.handle(&t, Event::Exec { entry });
    drain(&mut acq);
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 5,
            address: entry,
        },
    );
    assert_eq!(
        drain(&mut acq),
        [
            Action::RemoveBreakpoint { address: entry },
            Action::Continue
        ]
    );
    assert!(t.writes().is_empty());
    // It ends without exec'ing anything: not a starter.
    acq.handle(
        &t,
        Event::Ended {
            how: "exited with status 0".into(),
        },
    );
    let acts = drain(&mut acq);
    let [Action::Failed(e)] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert!(matches!(e, AcquireError::NotAStarter { pid: 5, .. }), "{e}");
    assert!(e.to_string().contains("MPIR_Breakpoint"));

    // Attach mode: an immediate, clear error.
    let mut acq = Acquisition::new(6, Mode::Attach, here());
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(
        matches!(
            &acts[..],
            [Action::Failed(AcquireError::NotAStarter { pid: 6, .. })]
        ),
        "{acts:?}"
    );
}

#[test]
fn an_abort_event_reports_the_abort_string() {
    let t = starter(2, DataModel::ILP32_BE, |s| {
        s.debug_state = DebugState::Aborting;
        s.abort_string = Some("rank 1 called MPI_Abort(3)".into());
        s.ranks.clear();
    });
    let bp = addr(&t, symbols::BREAKPOINT);
    let mut acq = Acquisition::new(8, Mode::Attach, here());
    acq.handle(&t, Event::Attached);
    assert_eq!(
        drain(&mut acq),
        [Action::InsertBreakpoint { address: bp }, Action::Continue]
    );
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 8,
            address: bp,
        },
    );
    let acts = drain(&mut acq);
    let [Action::Failed(AcquireError::JobAborted { message, .. })] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert_eq!(message, "rank 1 called MPI_Abort(3)");
}

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
fn the_tool_daemon_extension_writes_bounded_arrays_or_nothing() {
    let daemon = ToolDaemon::new("/opt/tool/bin/toold", ["--port", "4000"]);
    let make = |path_len: u64| {
        let mut s = MockStarter::uniform(0, 1, "x", 1);
        s.debug_state = DebugState::Null;
        let mut b = MockTarget::builder(DataModel::LP64);
        s.place(&mut b);
        b.char_array_variable(symbols::EXECUTABLE_PATH, path_len, b"");
        b.char_array_variable(symbols::SERVER_ARGUMENTS, 1024, b"");
        b.build()
    };
    let t = make(512);
    let mut acq = Acquisition::new(2, Mode::Attach, here().with_tool_daemon(daemon.clone()));
    acq.handle(&t, Event::Attached);
    drain(&mut acq);
    let path = t
        .read_c_string(addr(&t, symbols::EXECUTABLE_PATH), 512)
        .unwrap();
    assert_eq!(path, b"/opt/tool/bin/toold");
    let args = t.read_vec(addr(&t, symbols::SERVER_ARGUMENTS), 13).unwrap();
    assert_eq!(args, b"--port\x004000\0\0");
    assert_eq!(
        written(&t),
        [
            symbols::EXECUTABLE_PATH,
            symbols::SERVER_ARGUMENTS,
            symbols::BEING_DEBUGGED
        ],
        "the daemon is described before MPIR_being_debugged tells the starter to look"
    );

    // A shorter list than the one written before clears that one's tail (Open MPI 4 reads
    // the whole array, NUL by NUL, and would run the daemon with the tail as arguments).
    let mut s = MockStarter::uniform(0, 1, "x", 1);
    s.debug_state = DebugState::Null;
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    b.char_array_variable(symbols::EXECUTABLE_PATH, 512, b"");
    b.char_array_variable(symbols::SERVER_ARGUMENTS, 1024, b"");
    let t = b.build();
    t.write(
        addr(&t, symbols::SERVER_ARGUMENTS),
        b"--token-dir\0/a/much/longer/path/from/before\0\0",
    )
    .unwrap();
    let mut acq = Acquisition::new(2, Mode::Attach, here().with_tool_daemon(daemon.clone()));
    acq.handle(&t, Event::Attached);
    drain(&mut acq);
    let args = t
        .read_vec(addr(&t, symbols::SERVER_ARGUMENTS), 1024)
        .unwrap();
    assert_eq!(&args[..13], b"--port\x004000\0\0");
    assert!(args[13..].iter().all(|&b| b == 0), "{args:?}");

    // The path does not fit a 16-byte array: refused, nothing written.
    let t = make(16);
    let mut acq = Acquisition::new(2, Mode::Attach, here().with_tool_daemon(daemon));
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(
        matches!(&acts[..], [Action::Failed(AcquireError::ToolDaemon(m))] if m.contains("16")),
        "{acts:?}"
    );
    assert!(t.writes().is_empty());
}

/// A daemon asked "if supported" of a starter without the extension's arrays: nothing of it
/// is written, the acquisition goes on, and a note says why. Asked of one with them, it is
/// written as any daemon. Asked without "if supported", the same starter refuses.
#[test]
fn an_optional_tool_daemon_is_left_out_for_a_starter_without_the_extension() {
    let daemon = ToolDaemon::new("/opt/tool/bin/toold", ["-v"]);
    let starter = |with_arrays: bool| {
        let s = MockStarter::uniform(2, 2, "/opt/app/bin/solver", 1000);
        let mut b = MockTarget::builder(DataModel::LP64);
        s.place(&mut b);
        if with_arrays {
            b.char_array_variable(symbols::EXECUTABLE_PATH, 256, b"");
            b.char_array_variable(symbols::SERVER_ARGUMENTS, 1024, b"");
        }
        b.build()
    };
    let acquire = |t: &MockTarget, daemon: ToolDaemon| {
        let o = here().with_hold(false).with_tool_daemon(daemon);
        let mut acq = Acquisition::new(9, Mode::Attach, o);
        acq.handle(t, Event::Attached);
        let acts = drain(&mut acq);
        (acts, acq.take_job())
    };
    let t = starter(false);
    let (acts, job) = acquire(&t, daemon.clone().if_supported());
    assert_eq!(acts.last(), Some(&Action::Finished), "{acts:?}");
    assert_eq!(
        written(&t),
        [symbols::BEING_DEBUGGED],
        "only the spec's write"
    );
    let notes = job.unwrap().notes;
    assert!(
        notes.contains(&Note::ToolDaemonUnsupported {
            symbol: symbols::EXECUTABLE_PATH
        }),
        "{notes:?}"
    );

    let t = starter(true);
    let (acts, job) = acquire(&t, daemon.clone().if_supported());
    assert_eq!(acts.last(), Some(&Action::Finished), "{acts:?}");
    let path = t
        .read_c_string(addr(&t, symbols::EXECUTABLE_PATH), 256)
        .unwrap();
    assert_eq!(path, b"/opt/tool/bin/toold");
    assert!(
        !job.unwrap()
            .notes
            .iter()
            .any(|n| matches!(n, Note::ToolDaemonUnsupported { .. }))
    );

    let t = starter(false);
    let (acts, _) = acquire(&t, daemon);
    assert!(
        matches!(
            &acts[..],
            [Action::Failed(AcquireError::ToolDaemon(m))] if m.contains(symbols::EXECUTABLE_PATH)
        ),
        "{acts:?}"
    );
    assert!(t.writes().is_empty(), "a refused daemon writes nothing");
}

#[test]
fn the_attach_fifo_is_written_after_being_debugged() {
    let mut s = MockStarter::uniform(0, 1, "x", 1);
    s.debug_state = DebugState::Null;
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    b.char_array_variable(symbols::ATTACH_FIFO, 512, b"/tmp/mpir-fifo-123");
    let t = b.build();
    let bp = addr(&t, symbols::BREAKPOINT);
    let mut acq = Acquisition::new(2, Mode::Attach, here());
    acq.handle(&t, Event::Attached);
    assert_eq!(
        drain(&mut acq),
        [
            Action::InsertBreakpoint { address: bp },
            Action::WriteAttachFifo {
                path: "/tmp/mpir-fifo-123".into()
            },
            Action::Continue
        ]
    );
    assert_eq!(written(&t), [symbols::BEING_DEBUGGED]);
}

/// Tool daemons for a job that already runs (Open MPI 4): with the table filled, the daemon
/// is described, the attach FIFO written, and the starter's spawn event awaited — it is the
/// daemons', so the ranks are then read as a running job's, none attached.
#[test]
fn tool_daemons_for_a_running_job_go_through_the_attach_fifo() {
    let mut s = MockStarter::uniform(2, 2, "/opt/app/bin/solver", 1000);
    s.flags.push((symbols::PARTIAL_ATTACH_OK.into(), 1));
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    b.char_array_variable(symbols::EXECUTABLE_PATH, 256, b"");
    b.char_array_variable(symbols::SERVER_ARGUMENTS, 1024, b"");
    b.char_array_variable(symbols::ATTACH_FIFO, 512, b"/tmp/mpir-fifo-7");
    let t = b.build();
    let bp = addr(&t, symbols::BREAKPOINT);
    let daemon = ToolDaemon::new("/opt/tool/bin/toold", ["--port", "4000"]);
    let mut acq = Acquisition::new(
        9,
        Mode::Attach,
        here().with_hold(false).with_tool_daemon(daemon.clone()),
    );
    acq.handle(&t, Event::Attached);
    assert_eq!(
        drain(&mut acq),
        [
            Action::InsertBreakpoint { address: bp },
            Action::WriteAttachFifo {
                path: "/tmp/mpir-fifo-7".into()
            },
            Action::Continue
        ]
    );
    assert_eq!(
        written(&t),
        [
            symbols::EXECUTABLE_PATH,
            symbols::SERVER_ARGUMENTS,
            symbols::BEING_DEBUGGED
        ]
    );
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 9,
            address: bp,
        },
    );
    let acts = drain(&mut acq);
    assert!(
        !acts.iter().any(|a| matches!(a, Action::AttachRanks(_))),
        "{acts:?}"
    );
    assert_eq!(acts.last(), Some(&Action::Finished), "{acts:?}");
    let job = acq.take_job().unwrap();
    assert!((0..2).all(|r| job.control(r) == &RankControl::NotAttached));

    // Without a FIFO the filled table is read at once (the daemon written, never launched).
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    b.char_array_variable(symbols::EXECUTABLE_PATH, 256, b"");
    b.char_array_variable(symbols::SERVER_ARGUMENTS, 1024, b"");
    let t = b.build();
    let mut acq = Acquisition::new(
        9,
        Mode::Attach,
        here().with_hold(false).with_tool_daemon(daemon),
    );
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(
        !acts
            .iter()
            .any(|a| matches!(a, Action::WriteAttachFifo { .. })),
        "{acts:?}"
    );
    assert_eq!(acts.last(), Some(&Action::Finished), "{acts:?}");
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
fn attach_mode_reads_a_running_job_without_touching_its_ranks() {
    let t = starter(4, DataModel::LP64, |s| {
        s.flags.push((symbols::PARTIAL_ATTACH_OK.into(), 1))
    });
    let mut acq = Acquisition::new(9, Mode::Attach, here().with_hold(false));
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(
        !acts.iter().any(|a| matches!(a, Action::AttachRanks(_))),
        "{acts:?}"
    );
    assert_eq!(acts.last(), Some(&Action::Finished));
    let job = acq.take_job().unwrap();
    assert!((0..4).all(|r| job.control(r) == &RankControl::NotAttached));
    assert!(job.attached_pids().is_empty());
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

#[test]
fn an_unknown_debug_state_is_kept_and_reported() {
    let t = starter(2, DataModel::LP64, |s| {
        s.debug_state = DebugState::Unknown(77)
    });
    let mut acq = Acquisition::new(9, Mode::Attach, here().with_hold(false));
    acq.handle(&t, Event::Attached);
    drain(&mut acq);
    let job = acq.take_job().unwrap();
    assert_eq!(job.starter.debug_state, Some(77));
    assert_eq!(
        job.starter.debug_state_name(),
        Some(DebugState::Unknown(77))
    );
    assert!(
        job.notes.contains(&Note::UndefinedDebugState { value: 77 }),
        "{:?}",
        job.notes
    );
}

#[test]
fn a_starter_that_waits_for_being_debugged_after_the_spawn_keeps_it_set() {
    // Intel MPI's hydra under -tv waits after MPIR_Breakpoint until MPIR_being_debugged is
    // non-zero: the function that does so is the fact; with it the flag is not reset.
    for waits in [false, true] {
        let mut s = MockStarter::uniform(2, 2, "/opt/app/bin/solver", 1000);
        s.debug_state = DebugState::Spawned;
        let mut b = MockTarget::builder(DataModel::LP64);
        s.place(&mut b);
        if waits {
            b.function(mpir_acquire::quirks::INTEL_WAIT_FOR_DEBUGGER);
        }
        let t = b.build();
        let mut acq = Acquisition::new(7, Mode::Attach, here());
        acq.handle(&t, Event::Attached);
        let _ = drain(&mut acq);
        acq.handle(&t, Event::RanksAttached(attached(2)));
        let job = acq.take_job().unwrap();
        assert!(job.starter.set_being_debugged);
        assert_eq!(job.starter.keeps_being_debugged, waits);
        let told = job.notes.iter().any(|n| {
            matches!(
                n,
                Note::Quirk(mpir_acquire::quirks::QuirkFact::IntelWaitsForDebugger)
            )
        });
        assert_eq!(told, waits, "{:?}", job.notes);
        mpir_acquire::protocol::undo_writes(&t, &job.starter).unwrap();
        let value = t
            .read_c_int(addr(&t, symbols::BEING_DEBUGGED), "x")
            .unwrap();
        assert_eq!(value, i64::from(waits), "waits: {waits}");
    }
}

/// Slurm's `srun` (`MPIR_Breakpoint` in `/usr/bin/srun`): its breakpoint's body wakes the
/// tasks, so the protocol never makes it return early — past the breakpoint when it goes on
/// waiting, parked at its entry when the job is acquired there — and reads the step ids.
#[test]
fn srun_runs_its_breakpoint_body_and_names_its_step() {
    let mut s = MockStarter::uniform(2, 1, "sleep", 1000);
    s.debug_state = DebugState::Null;
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    let _ = b.function("_start");
    let bp = b.function("srun_MPIR_Breakpoint");
    b.symbol(
        mpir_target::Symbol::new(
            symbols::BREAKPOINT,
            bp,
            4,
            mpir_target::SymbolKind::Function,
        )
        .with_image("/usr/bin/srun"),
    );
    let job_text = b.char_array_variable("job_text", 8, b"1234");
    let step_text = b.char_array_variable("step_text", 8, b" 7");
    b.pointer_variable(mpir_acquire::LAUNCHER_JOB_ID, job_text);
    b.pointer_variable(mpir_acquire::LAUNCHER_STEP_ID, step_text);
    let t = b.build();
    let entry = addr(&t, "_start");
    let state = addr(&t, symbols::DEBUG_STATE);
    let mut acq = Acquisition::new(9, Mode::Launch, here());
    acq.handle(&t, Event::Exec { entry });
    drain(&mut acq);
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 9,
            address: entry,
        },
    );
    assert!(drain(&mut acq).contains(&Action::InsertBreakpoint { address: bp }));
    // MPIR_NULL: the body runs (stepped past the breakpoint), and the starter goes on.
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 11,
            address: bp,
        },
    );
    assert_eq!(
        drain(&mut acq),
        [Action::StepOverBreakpoint { tid: 11 }, Action::Continue]
    );
    assert_eq!(acq.parked(), None);
    // The spawn: the ranks are taken while srun stays at the breakpoint's entry.
    t.write_c_int(state, 1, "state").unwrap();
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 11,
            address: bp,
        },
    );
    let acts = drain(&mut acq);
    assert!(
        matches!(acts.as_slice(), [Action::AttachRanks(r)] if r.len() == 2),
        "{acts:?}"
    );
    assert_eq!(acq.parked(), Some(11));
    acq.handle(&t, Event::RanksAttached(attached(2)));
    assert_eq!(drain(&mut acq), [Action::Finished]);
    let job = acq.take_job().unwrap();
    assert_eq!(
        job.starter.launcher,
        Some(mpir_acquire::quirks::Launcher::Slurm)
    );
    assert_eq!(
        (job.starter.job_id, job.starter.step_id),
        (Some(1234), Some(7))
    );
    assert!(job.notes.contains(&Note::Quirk(
        mpir_acquire::quirks::QuirkFact::SlurmBreakpointWakesTasks
    )));
}

/// A step id that is no number is a note, not a wrong id.
#[test]
fn unusable_launcher_ids_are_notes() {
    let mut s = MockStarter::uniform(1, 1, "x", 1000);
    s.debug_state = DebugState::Spawned;
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    let text = b.char_array_variable("job_text", 8, b"12;rm");
    b.pointer_variable(mpir_acquire::LAUNCHER_JOB_ID, text);
    b.pointer_variable(mpir_acquire::LAUNCHER_STEP_ID, 0);
    let t = b.build();
    let mut acq = Acquisition::new(9, Mode::Attach, here());
    acq.handle(&t, Event::Attached);
    drain(&mut acq);
    acq.handle(&t, Event::RanksAttached(attached(1)));
    drain(&mut acq);
    let job = acq.take_job().unwrap();
    assert_eq!((job.starter.job_id, job.starter.step_id), (None, None));
    let unusable: Vec<&Note> = job
        .notes
        .iter()
        .filter(|n| matches!(n, Note::LauncherIdUnusable { .. }))
        .collect();
    assert_eq!(unusable.len(), 2, "{:?}", job.notes);
    assert!(
        unusable[0].to_string().contains("not a decimal number"),
        "{}",
        unusable[0]
    );
    assert!(unusable[1].to_string().ends_with("NULL"), "{}", unusable[1]);
}
