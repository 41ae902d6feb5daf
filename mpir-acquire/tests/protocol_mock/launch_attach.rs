//! The state machine's paths: attach to a filled table, launch to the spawn event, programs
//! without MPIR_Breakpoint, the abort event, attach mode that leaves the ranks alone, an unknown
//! debug state, and a starter that waits for being debugged after the spawn.

use mpir_acquire::{
    AcquireError, Acquisition, Action, AttachOutcome, Event, Mode, Note, RankControl,
};
use mpir_target::MemoryExt;
use mpir_target::TargetError;
use mpir_target::mock::{MockStarter, MockTarget};
use mpir_types::DataModel;
use mpir_types::mpir::{DebugState, symbols};

use crate::{addr, attached, drain, here, starter, written};

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
