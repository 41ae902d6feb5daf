//! The extensions: tool daemons (the bounded arrays, optional daemons, the attach FIFO, daemons
//! for a running job), srun's breakpoint body, and the launcher's job and step ids.

use mpir_acquire::{AcquireError, Acquisition, Action, Event, Mode, Note, RankControl, ToolDaemon};
use mpir_target::mock::{MockStarter, MockTarget};
use mpir_target::{Memory, MemoryExt};
use mpir_types::DataModel;
use mpir_types::mpir::{DebugState, symbols};

use crate::{addr, attached, drain, here, written};

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
