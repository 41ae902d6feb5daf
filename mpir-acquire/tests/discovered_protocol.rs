//! The protocol with a discovered table ([`Acquisition::with_discovered`]) on a MockTarget: the
//! table is read and the ranks attached as with symbols, but the starter is never written (no
//! breakpoint, no `MPIR_being_debugged`), and what cannot be done without writing (launch mode,
//! a tool daemon, waiting for a spawn) is refused.

use std::collections::BTreeSet;

use mpir_acquire::{
    AcquireError, AcquireOptions, Acquisition, Action, AttachOutcome, Event, Mode, Note, Proven,
    ToolDaemon,
};
use mpir_target::mock::{MockStarter, MockTarget};
use mpir_types::DataModel;
use mpir_types::mpir::discover::{self, Discovered, Facts, Region, SearchOptions};
use mpir_types::node::ThisNode;

/// A [`Discovered`] (only the search makes one): a one-entry table in a tiny memory.
fn found() -> Discovered {
    struct Mem(Vec<u8>);
    impl Facts for Mem {
        fn readable(&self, a: u64, len: u64) -> bool {
            a >= 0x1000 && a + len <= 0x1000 + self.0.len() as u64
        }
        fn read(&self, a: u64, buf: &mut [u8]) -> usize {
            let from = (a - 0x1000) as usize;
            let n = buf.len().min(self.0.len().saturating_sub(from));
            buf[..n].copy_from_slice(&self.0[from..from + n]);
            n
        }
        fn runs(&self, _: u32, exe: &[u8]) -> bool {
            exe == b"app"
        }
    }
    let mut m = vec![0u8; 0x10 + 48];
    m[0] = 1;
    m[8..16].copy_from_slice(&0x1010u64.to_le_bytes());
    m[0x10..0x18].copy_from_slice(&0x1040u64.to_le_bytes());
    m[0x18..0x20].copy_from_slice(&0x1042u64.to_le_bytes());
    m[0x20..0x24].copy_from_slice(&4242u32.to_le_bytes());
    m.extend_from_slice(b"h\0app\0");
    let regions = [Region {
        address: 0x1000,
        bytes: &m[..16],
    }];
    let mem = Mem(m.clone());
    discover::discover(
        &DataModel::LP64,
        &regions,
        &BTreeSet::from([4242]),
        &mem,
        &SearchOptions::default(),
    )
    .unwrap()
}

fn drain(acq: &mut Acquisition) -> Vec<Action> {
    std::iter::from_fn(|| acq.poll_action()).collect()
}

/// A mock starter of `n` ranks (its MPIR symbols stand for the discovered addresses).
fn starter(n: usize) -> MockTarget {
    let s = MockStarter::uniform(n, 1, "/opt/app/bin/solver", 1000);
    let mut b = MockTarget::builder(DataModel::LP64);
    s.place(&mut b);
    b.build()
}

fn here() -> AcquireOptions {
    AcquireOptions::default()
        .with_this_node(ThisNode::new().with_name("node00"))
        .with_hold(true)
}

#[test]
fn a_discovered_table_is_read_and_its_ranks_attached_without_a_write() {
    let t = starter(3);
    let d = found();
    let mut acq = Acquisition::new(77, Mode::Attach, here()).with_discovered(d.clone());
    acq.handle(&t, Event::Attached);
    let acts = drain(&mut acq);
    assert!(
        !acts
            .iter()
            .any(|a| matches!(a, Action::InsertBreakpoint { .. })),
        "{acts:?}"
    );
    let [Action::AttachRanks(ranks)] = acts.as_slice() else {
        panic!("{acts:?}")
    };
    assert_eq!(ranks, &[(0, 1000), (1, 1001), (2, 1002)]);
    let attached = ranks
        .iter()
        .map(|&(r, pid)| AttachOutcome::attached(r, vec![pid], Proven::InProgram))
        .collect();
    acq.handle(&t, Event::RanksAttached(attached));
    assert_eq!(drain(&mut acq), [Action::Finished]);
    let job = acq.take_job().unwrap();
    assert_eq!(job.discovered.as_ref(), Some(&d));
    assert_eq!(job.starter.breakpoint, 0);
    assert!(!job.starter.set_being_debugged);
    assert!(
        job.notes
            .iter()
            .any(|n| matches!(n, Note::TableDiscovered { evidence } if evidence == &d)),
        "{:?}",
        job.notes
    );
    assert!(t.writes().is_empty(), "{:?}", t.writes());
}

#[test]
fn what_needs_a_write_or_a_breakpoint_is_refused() {
    let failed = |acq: &mut Acquisition| match drain(acq).as_slice() {
        [Action::Failed(e)] => e.clone(),
        other => panic!("{other:?}"),
    };
    // Launch mode.
    let t = starter(2);
    let mut acq = Acquisition::new(77, Mode::Launch, here()).with_discovered(found());
    acq.handle(&t, Event::Exec { entry: 0x400000 });
    drain(&mut acq);
    acq.handle(
        &t,
        Event::Breakpoint {
            tid: 77,
            address: 0x400000,
        },
    );
    let e = failed(&mut acq);
    assert!(
        matches!(e, AcquireError::LaunchWithoutSymbols { pid: 77 }),
        "{e}"
    );
    // A tool daemon.
    let mut acq = Acquisition::new(
        77,
        Mode::Attach,
        here().with_tool_daemon(ToolDaemon::new("/opt/tool", ["-v"])),
    )
    .with_discovered(found());
    acq.handle(&t, Event::Attached);
    let e = failed(&mut acq);
    assert!(
        matches!(&e, AcquireError::ToolDaemon(m) if m.contains("no MPIR symbols")),
        "{e}"
    );
    // A table emptied since it was found: no spawn event can be waited for.
    let empty = starter(0);
    let mut acq = Acquisition::new(77, Mode::Attach, here()).with_discovered(found());
    acq.handle(&empty, Event::Attached);
    let e = failed(&mut acq);
    assert!(e.to_string().contains("no spawn event"), "{e}");
    assert!(t.writes().is_empty() && empty.writes().is_empty());
}
