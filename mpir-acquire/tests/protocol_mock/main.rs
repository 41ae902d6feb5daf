//! The acquisition protocol on a MockTarget: every path of the state machine without a
//! process — launch and attach, events NULL/SPAWNED/ABORTING/unknown, partial attach, the
//! extensions, hostile tables — and the writes it makes, checked against what the spec allows.
//!
//! Helpers here; the tests by behaviour: [`launch_attach`] (the state machine's paths),
//! [`refusals`] (what it refuses or reports instead of going on) and [`extensions`] (tool
//! daemons, the attach FIFO, srun, launcher ids).

mod extensions;
mod launch_attach;
mod refusals;

use mpir_acquire::{AcquireOptions, Acquisition, Action, AttachOutcome, Proven};
use mpir_target::SymbolLookupExt;
use mpir_target::mock::{MockStarter, MockTarget};
use mpir_types::DataModel;
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
