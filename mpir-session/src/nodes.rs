//! The job's other nodes: one more place a [`Session`] reads its ranks from (issue 31).
//!
//! A session reads the ranks of its own node itself. The ranks on every other node are read
//! by whatever reaches those nodes — `mpir-agent`'s agents, started through the job's own
//! launcher — installed once with [`Session::reach_other_nodes`](crate::Session::reach_other_nodes). From then on the same
//! [`Session::queues`](crate::Session::queues), [`Session::stacks`](crate::Session::stacks) and [`Session::deadlock`](crate::Session::deadlock) return the whole job:
//! each read is sent to the other nodes first, this node's ranks are read meanwhile, and the
//! other nodes' answers are put in place of their ranks' entries. A caller never merges.
//!
//! Reads of a few chosen ranks ([`Session::stacks_of`](crate::Session::stacks_of)) and a profiler's sampling
//! ([`Session::sample_stacks`](crate::Session::sample_stacks)) stay on this node.

use mpir_mqd::EngineUsed;

use crate::error::AgentFailure;
use crate::reads::RankRead;
use crate::stack_reads::{RemoteSample, StackOptions};

/// The ranks of a session's job on other nodes, as something that reads them (implemented by
/// `mpir-agent`'s front end). Each read is split in two: `start_*` sends the request before
/// this node's ranks are held, so every node reads at the same time; `finish_*` waits
/// (bounded) for the answers. Every `start_*` is followed by its `finish_*`, also when this
/// node's part fails.
pub trait OtherNodes {
    /// Asks every other node for its ranks' queues.
    fn start_queues(&mut self);
    /// The answers to the last [`start_queues`](OtherNodes::start_queues), each put into
    /// `ranks` (the job's selected ranks in order, the other nodes' entries unreadable as
    /// remote until their answer replaces them). `ranks` may be empty when this node's part
    /// failed: the answers are then only drained.
    fn finish_queues(&mut self, ranks: &mut [RankRead]);
    /// Asks every other node for its ranks' stacks with `options` (the same samples as this
    /// node's).
    fn start_stacks(&mut self, options: &StackOptions);
    /// The answers to the last [`start_stacks`](OtherNodes::start_stacks): one list per node
    /// of its parts of the `samples` samples, in order.
    fn finish_stacks(&mut self, options: &StackOptions, samples: usize) -> Vec<Vec<RemoteSample>>;
    /// The queue engine the other nodes used, for a read with no rank on this node.
    fn engine(&self) -> Option<EngineUsed>;
    /// Where each node stands.
    fn nodes(&self) -> Vec<NodeState>;
}

/// Where one other node stands (as the front end talking to it sees it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeState {
    /// The node (as the job's table names it) whose agent the front end talks to.
    pub host: String,
    /// The nodes whose agents it started and answers for (a tree's subtree).
    pub subtree: Vec<String>,
    /// The ranks it answers for.
    pub ranks: Vec<u64>,
    /// `None` while its agent serves; otherwise why not.
    pub down: Option<(AgentFailure, String)>,
    /// The ranks that are not served (refused on their node, or on a node of the subtree
    /// whose agent failed), with the reason.
    pub refused: Vec<(u64, String)>,
}

impl NodeState {
    /// Node `host`, answering for `ranks` of the nodes in `subtree`, serving.
    pub fn new(host: impl Into<String>, subtree: Vec<String>, ranks: Vec<u64>) -> Self {
        NodeState {
            host: host.into(),
            subtree,
            ranks,
            down: None,
            refused: Vec::new(),
        }
    }

    /// Down for `failure` (`detail` says more).
    pub fn with_down(mut self, failure: AgentFailure, detail: impl Into<String>) -> Self {
        self.down = Some((failure, detail.into()));
        self
    }

    /// With these ranks not served.
    pub fn with_refused(mut self, refused: Vec<(u64, String)>) -> Self {
        self.refused = refused;
        self
    }
}
