//! How a tool tests itself with no MPI job and no process: `MockTarget` plays the starter's
//! memory, `MockStarter` lays out its process table, and a fake starter — a few lines that
//! answer the sans-IO acquisition's actions as a real starter's stops would — takes the place
//! of the processes.
//!
//! ```text
//! cargo test -p mpir-examples --example tool_tests     # the tool's test suite
//! cargo run -p mpir-examples --example tool_tests      # the same jobs, printed
//! ```
//!
//! The tool under test is [`plan`]: which ranks it will inspect, given a job — the same
//! `Job` that `mpir_session::Session::job` gives from a live starter, here built by
//! [`FakeStarter::acquire`] from a mock one.

use std::collections::BTreeSet;

use mpir_acquire::{
    AcquireError, AcquireOptions, Acquisition, Action, AttachOutcome, Event, Job, Mode, Proven,
    RankControl, Refusal,
};
use mpir_target::mock::{MockRank, MockStarter, MockTarget};
use mpir_types::DataModel;
use mpir_types::node::ThisNode;

/// The tool's own logic: one line per rank, saying whether the tool will read it.
pub fn plan(job: &Job) -> Vec<String> {
    job.ranks()
        .map(|r| {
            let what = match job.control(r.rank) {
                RankControl::Attached { .. } => "inspect".to_string(),
                RankControl::Remote => format!("skip (remote: {})", r.host.unwrap_or("?")),
                RankControl::Refused { reason } => format!("skip ({reason})"),
                other => format!("skip ({other:?})"),
            };
            format!("rank {} pid {}: {what}", r.rank, r.pid)
        })
        .collect()
}

/// A fake starter: the mock memory of a starter whose job is spawned, and the processes that
/// exist (pids a real driver would prove to be the table's ranks).
pub struct FakeStarter {
    /// The starter's memory, symbols and table.
    pub target: MockTarget,
    /// Pids that are this job's processes; any other pid in the table is refused.
    pub live_ranks: BTreeSet<u32>,
    /// What the fake did, in order (breakpoints planted, ranks attached…).
    pub log: Vec<String>,
}

impl FakeStarter {
    /// A starter whose table lists `ranks`, in `model`; every listed pid is one of its ranks
    /// unless `not_ranks` names it.
    pub fn new(model: DataModel, ranks: Vec<MockRank>, not_ranks: &[u32]) -> Self {
        let live_ranks = ranks
            .iter()
            .filter_map(|r| u32::try_from(r.pid).ok())
            .filter(|p| !not_ranks.contains(p))
            .collect();
        let mut b = MockTarget::builder(model);
        MockStarter::new(ranks).place(&mut b);
        FakeStarter {
            target: b.build(),
            live_ranks,
            log: Vec::new(),
        }
    }

    /// Attach mode, holding the ranks: the acquisition's actions answered as a starter
    /// stopped at a filled table would, with `this_node` saying which hosts are here.
    pub fn acquire(&mut self, this_node: ThisNode) -> Result<Job, AcquireError> {
        let options = AcquireOptions::default()
            .with_this_node(this_node)
            .with_hold(true);
        let mut acq = Acquisition::new(4242, Mode::Attach, options);
        acq.handle(&self.target, Event::Attached);
        loop {
            let Some(action) = acq.poll_action() else {
                return Err(AcquireError::Usage("the protocol stalled".into()));
            };
            match action {
                Action::InsertBreakpoint { address } => {
                    self.log.push(format!("breakpoint {address:#x}"));
                }
                Action::RemoveBreakpoint { address } => {
                    self.log.push(format!("remove breakpoint {address:#x}"));
                }
                // A filled table needs no waiting; a starter that never spawns times out.
                Action::Continue => acq.handle(&self.target, Event::Timeout),
                Action::AttachRanks(ranks) => {
                    let outcome = ranks
                        .into_iter()
                        .map(|(rank, pid)| {
                            self.log.push(format!("attach rank {rank} pid {pid}"));
                            let control = if self.live_ranks.contains(&pid) {
                                RankControl::Attached {
                                    threads: vec![pid],
                                    proven: Proven::InProgram,
                                }
                            } else {
                                RankControl::Refused {
                                    reason: Refusal::NoProcess {
                                        reason: format!("no process {pid}"),
                                    },
                                }
                            };
                            AttachOutcome::new(rank, control)
                        })
                        .collect();
                    acq.handle(&self.target, Event::RanksAttached(outcome));
                }
                Action::Finished => {
                    return acq
                        .take_job()
                        .ok_or_else(|| AcquireError::Usage("no job".into()));
                }
                Action::Failed(e) => return Err(e),
                other => self.log.push(format!("ignored {other:?}")),
            }
        }
    }
}

/// Two nodes, two ranks each; pid 1003 listed on this node but not a rank of the job.
fn two_nodes(model: DataModel) -> FakeStarter {
    FakeStarter::new(
        model,
        vec![
            MockRank::new("node00", "/opt/app/solver", 1000),
            MockRank::new("node01", "/opt/app/solver", 1001),
            MockRank::new("node00", "/opt/app/solver", 1002),
            MockRank::new("node00", "/opt/app/solver", 1003),
        ],
        &[1003],
    )
}

fn node00() -> ThisNode {
    ThisNode::new().with_name("node00")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    for (name, model) in [
        ("LP64", DataModel::LP64),
        ("ILP32 big-endian", DataModel::ILP32_BE),
    ] {
        let mut fake = two_nodes(model);
        let job = fake.acquire(node00())?;
        println!("{name}: {} ranks", job.len());
        for line in plan(&job) {
            println!("  {line}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpir_types::mpir::symbols;

    #[test]
    fn only_this_nodes_ranks_are_attached_and_inspected_in_every_data_model() {
        for model in [
            DataModel::LP64,
            DataModel::ILP32,
            DataModel::LP64_BE,
            DataModel::ILP32_BE,
        ] {
            let mut fake = two_nodes(model);
            let job = fake.acquire(node00()).unwrap();
            let lines = plan(&job);
            assert_eq!(lines[0], "rank 0 pid 1000: inspect", "{model:?}");
            assert_eq!(lines[1], "rank 1 pid 1001: skip (remote: node01)");
            assert_eq!(lines[2], "rank 2 pid 1002: inspect");
            assert!(lines[3].starts_with("rank 3 pid 1003: skip (not this job's process"));
            // The remote rank's pid was never even handed to the driver.
            assert!(
                !fake.log.iter().any(|l| l.contains("pid 1001")),
                "{:?}",
                fake.log
            );
        }
    }

    #[test]
    fn an_alias_makes_a_node_local() {
        let mut fake = two_nodes(DataModel::LP64);
        let job = fake.acquire(node00().with_alias("node01")).unwrap();
        assert_eq!(plan(&job)[1], "rank 1 pid 1001: inspect");
    }

    #[test]
    fn acquiring_writes_only_what_the_spec_lets_a_tool_write() {
        let mut fake = two_nodes(DataModel::LP64);
        fake.acquire(node00()).unwrap();
        for w in fake.target.writes() {
            assert_eq!(w.symbol.as_deref(), Some(symbols::BEING_DEBUGGED), "{w:?}");
        }
    }

    #[test]
    fn a_starter_that_never_spawns_is_an_error_naming_what_was_awaited() {
        let mut s = MockStarter::new(Vec::new());
        s.debug_state = mpir_types::mpir::DebugState::Null;
        let mut b = MockTarget::builder(DataModel::LP64);
        s.place(&mut b);
        let mut fake = FakeStarter {
            target: b.build(),
            live_ranks: BTreeSet::new(),
            log: Vec::new(),
        };
        let e = fake.acquire(node00()).unwrap_err();
        assert!(matches!(e, AcquireError::Timeout { .. }), "{e}");
    }

    #[test]
    fn a_hostile_table_entry_is_reported_not_a_panic() {
        let mut fake = FakeStarter::new(
            DataModel::LP64,
            vec![
                MockRank::new("node00", "/opt/app/solver", 1000),
                MockRank::new("node00", "/opt/app/solver", -5),
            ],
            &[],
        );
        let job = fake.acquire(node00()).unwrap();
        let lines = plan(&job);
        assert_eq!(lines[0], "rank 0 pid 1000: inspect");
        assert!(lines[1].contains("skip"), "{lines:?}");
    }
}
