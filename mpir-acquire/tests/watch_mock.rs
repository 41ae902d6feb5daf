//! The MPI2DD event watch, sans-IO: jobs traversed from mock processes, events fed by hand.

use mpi2dd::connect::ConnectError;
use mpi2dd::connect::{MapConnector, ProcessKey};
use mpi2dd::events::Event;
use mpi2dd::flags::{DebugState, DebuggerFlags};
use mpi2dd::job::Job;
use mpi2dd::mock::{MockDir, MockProcess, MockRank};
use mpi2dd::traverse::{TraverseError, TraverseOptions, traverse};
use mpir_acquire::mpi2dd_watch::{Watch, WatchAction, WatchInput, WatchReport};
use mpir_target::MockTarget;
use mpir_types::DataModel;

/// A metadirectory (pid 10) listing one directory (pid 11) whose proctable has `ranks`.
fn job(ranks: &[MockRank]) -> Job {
    let mut meta = MockProcess::metadirectory("n0", 10);
    meta.directories.push(MockDir::new("n0", "/bin/dir", 11));
    let mut dir = MockProcess::directory("n0", 10);
    dir.proctable.extend(ranks.iter().cloned());
    let mut c = MapConnector::new();
    for (pid, p) in [(10, &meta), (11, &dir)] {
        let mut b = MockTarget::builder(DataModel::LP64);
        p.place(&mut b);
        c.insert("n0", pid, b.build());
    }
    traverse(&c, "n0", 10, &TraverseOptions::default())
        .unwrap()
        .job
}

fn drain(w: &mut Watch) -> Vec<WatchAction> {
    std::iter::from_fn(|| w.poll_action()).collect()
}

fn key(pid: i32) -> ProcessKey {
    ProcessKey::new("n0", pid)
}

#[test]
fn every_process_is_held_with_the_flags_the_draft_gives_the_debugger() {
    let w0 = [
        MockRank::new("n0", "/bin/app", "w0", 100, 0),
        MockRank::new("n0", "/bin/app", "w0", 101, 1),
    ];
    let mut w = Watch::new(job(&w0));
    let acts = drain(&mut w);
    let hold = |pid, flags| WatchAction::Hold {
        process: key(pid),
        flags,
    };
    assert!(
        acts.contains(&hold(11, DebuggerFlags::REQUEST_DIRECTORY_EVENTS)),
        "{acts:?}"
    );
    assert!(acts.contains(&hold(100, DebuggerFlags::GATE)), "{acts:?}");
    assert!(acts.contains(&hold(101, DebuggerFlags::GATE)), "{acts:?}");
    assert_eq!(acts.len(), 4, "meta, dir, two ranks: {acts:?}");
    assert_eq!(w.held().len(), 4);
}

#[test]
fn a_spawn_event_traverses_reports_the_delta_and_holds_the_new_ranks() {
    let w0 = vec![MockRank::new("n0", "/bin/app", "w0", 100, 0)];
    let mut w = Watch::new(job(&w0));
    drain(&mut w);
    let event = Event::new(DebugState::Spawn, None);
    w.handle(WatchInput::Stopped {
        process: key(100),
        tid: 100,
        event,
    });
    assert_eq!(drain(&mut w), [WatchAction::Traverse { from: key(100) }]);
    let mut after = w0.clone();
    after.push(MockRank::new("n0", "/bin/kid", "w1", 200, 0).spawned("w0", 0, 0));
    w.handle(WatchInput::Traversed(Ok(job(&after))));
    let acts = drain(&mut w);
    assert_eq!(
        acts[0],
        WatchAction::Hold {
            process: key(200),
            flags: DebuggerFlags::GATE
        }
    );
    let WatchAction::Report(WatchReport::Changed { state, delta, from }) = &acts[1] else {
        panic!("{acts:?}")
    };
    assert_eq!((*state, from), (DebugState::Spawn, &key(100)));
    assert_eq!(delta.new_ranks.len(), 1);
    assert_eq!(&*delta.new_ranks[0].0, "w1");
    assert_eq!(
        acts[2],
        WatchAction::Resume {
            process: key(100),
            tid: 100
        }
    );
    assert_eq!(w.job().spawns.len(), 1, "the parentage is kept");
}

#[test]
fn aborts_unknown_states_and_failed_traversals_are_reported_and_resumed() {
    let mut w = Watch::new(job(&[]));
    drain(&mut w);
    w.handle(WatchInput::Stopped {
        process: key(11),
        tid: 7,
        event: Event::new(DebugState::Abort, Some("MPI_Abort(9)".into())),
    });
    let acts = drain(&mut w);
    assert!(matches!(
        &acts[0],
        WatchAction::Report(WatchReport::Aborting { message: Some(m), .. }) if m == "MPI_Abort(9)"
    ));
    assert!(matches!(acts[1], WatchAction::Resume { tid: 7, .. }));

    w.handle(WatchInput::Stopped {
        process: key(11),
        tid: 7,
        event: Event::new(DebugState::Unknown(42), None),
    });
    let acts = drain(&mut w);
    assert!(matches!(
        &acts[0],
        WatchAction::Report(WatchReport::Unknown { state: 42, .. })
    ));

    w.handle(WatchInput::Stopped {
        process: key(11),
        tid: 7,
        event: Event::new(DebugState::DirectoryChanged, None),
    });
    drain(&mut w);
    let unreachable = TraverseError::Connect(ConnectError::NoSuchProcess {
        host: "node0".into(),
        pid: 11,
    });
    w.handle(WatchInput::Traversed(Err(unreachable.clone())));
    let acts = drain(&mut w);
    assert!(matches!(
        &acts[0],
        WatchAction::Report(WatchReport::Failed { error, .. }) if *error == unreachable
    ));
    assert!(matches!(acts[1], WatchAction::Resume { .. }));
}

#[test]
fn every_event_that_can_change_the_job_asks_for_a_traversal() {
    for state in [
        DebugState::Start,
        DebugState::Spawn,
        DebugState::Connect,
        DebugState::Accept,
        DebugState::Join,
        DebugState::DirectoryChanged,
        DebugState::MetadirectoryChanged,
    ] {
        let mut w = Watch::new(job(&[]));
        drain(&mut w);
        w.handle(WatchInput::Stopped {
            process: key(10),
            tid: 10,
            event: Event::new(state, None),
        });
        assert_eq!(
            drain(&mut w),
            [WatchAction::Traverse { from: key(10) }],
            "{state:?}"
        );
        w.handle(WatchInput::Traversed(Ok(job(&[]))));
        let acts = drain(&mut w);
        assert!(
            matches!(&acts[0], WatchAction::Report(WatchReport::Changed { state: s, delta, .. }) if *s == state && delta.is_empty()),
            "{acts:?}"
        );
    }
}
