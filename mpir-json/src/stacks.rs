//! The `mpir.stacks/2` document of `mpir stacks`: the merged tree of the last sample, in the
//! field names and forms of the library's tree document (`mpir_types::stacks::TreeDocument`,
//! so that `StackTree::from_document` reads it back), plus the tool's envelope: the source,
//! the samples, each process's stop, the ranks that did not move, and the coverage. Built
//! from the tool's own types (docs/cli-json.md).

use std::time::Duration;

use mpir_session::StacksRead;
use mpir_types::stacks::{
    MergeKey, NodeKind, NotRead, ReasonCode, SCHEMA, TreeView, Truncation, Trust,
};
use serde::Serialize;

/// The document's kind.
pub const STACKS_SCHEMA: &str = SCHEMA;

/// The whole document.
#[derive(Serialize)]
pub struct StacksDoc {
    pub schema: &'static str,
    /// `starter`, `pids` or `cores`.
    pub source: String,
    pub merge_key: &'static str,
    pub view: &'static str,
    pub limits: LimitsOut,
    pub nodes: Vec<NodeOut>,
    pub unreached: Vec<UnreachedOut>,
    pub truncations: Vec<TruncatedOut>,
    pub cut_depth: String,
    pub cut_nodes: String,
    /// Samples taken (the tree is the last one's).
    pub samples: u32,
    pub interval_ms: u64,
    /// With two samples or more: the ranks whose stacks were the same in every sample.
    pub unmoved: Option<String>,
    /// Per sample, each live process's stop.
    pub stops: Vec<Vec<StopOut>>,
    /// Ranks numbered by position (processes named by pid, cores without a starter core).
    pub numbered: Vec<NumberedOut>,
    /// The ranks' Python interpreters: versions and why frames were not read.
    pub python: PythonOut,
    pub coverage: CoverageOut,
    /// Ranks read through their cooperative channel (the kernel refused this tool them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cooperative: Vec<crate::CooperativeOut>,
    /// The job's table was built from its ranks' announcements (the starter refused).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub announced: Option<crate::AnnouncedOut>,
}

#[derive(Serialize)]
pub struct PythonOut {
    versions: Vec<VersionOut>,
    problems: Vec<ProblemOut>,
}

#[derive(Serialize)]
pub struct VersionOut {
    version: String,
    ranks: String,
}

#[derive(Serialize)]
pub struct ProblemOut {
    text: String,
    ranks: String,
}

#[derive(Serialize)]
pub struct LimitsOut {
    max_depth: u64,
    max_nodes: u64,
}

#[derive(Serialize)]
pub struct NodeOut {
    parent: Option<u64>,
    kind: &'static str,
    function: String,
    module: String,
    file: Option<String>,
    line: Option<u32>,
    ranks: String,
    threads: u64,
    ends: String,
    truncated: String,
    trust: Option<&'static str>,
}

/// A reason as the library's serde form writes it: a name, or `{"other": text}`.
#[derive(Serialize)]
#[serde(untagged)]
pub enum ReasonOut {
    Named(&'static str),
    Other { other: String },
}

#[derive(Serialize)]
pub struct UnreachedOut {
    rank: u64,
    reason: ReasonOut,
    /// The reason in words.
    text: String,
    /// When the kernel refused this tool the rank: why, as in every document.
    #[serde(skip_serializing_if = "Option::is_none")]
    denial: Option<crate::DenialOut>,
    /// Why it was not read, in the one vocabulary of every document.
    why: crate::WhyOut,
}

#[derive(Serialize)]
pub struct TruncatedOut {
    reason: ReasonOut,
    ranks: String,
    text: String,
}

#[derive(Serialize)]
pub struct StopOut {
    rank: u64,
    pid: u32,
    stopped_us: u64,
    overran: bool,
}

#[derive(Serialize)]
pub struct NumberedOut {
    rank: u64,
    pid: u32,
}

#[derive(Serialize)]
pub struct CoverageOut {
    pub ranks: usize,
    pub read: usize,
    pub complete: bool,
}

fn kind(k: NodeKind) -> &'static str {
    match k {
        NodeKind::Root => "root",
        NodeKind::Function => "function",
        NodeKind::Address => "address",
        NodeKind::Thread => "thread",
        NodeKind::Helpers => "helpers",
        NodeKind::Python => "python",
        _ => "unknown",
    }
}

fn trust(t: Trust) -> &'static str {
    match t {
        Trust::Context => "context",
        Trust::Cfi => "cfi",
        Trust::FramePointer => "frame_pointer",
        Trust::Scan => "scan",
        _ => "unknown",
    }
}

/// The `reason` of a `mpir.stacks/2` unreached rank (kept as it was; `why` carries the one
/// vocabulary): the named ones, else the text.
fn unreached_reason(r: &NotRead) -> ReasonOut {
    match r.code {
        ReasonCode::Exited => ReasonOut::Named("exited"),
        ReasonCode::NotStopped => ReasonOut::Named("timeout"),
        ReasonCode::NoCore => ReasonOut::Named("no_core"),
        ReasonCode::NotSelected => ReasonOut::Named("not_selected"),
        ReasonCode::Denied => ReasonOut::Named("denied"),
        _ => ReasonOut::Other {
            other: r.text.clone(),
        },
    }
}

fn truncation(t: &Truncation) -> ReasonOut {
    match t {
        Truncation::FrameLimit => ReasonOut::Named("frame_limit"),
        Truncation::UnreadableStack => ReasonOut::Named("unreadable_stack"),
        Truncation::NoUnwindInfo => ReasonOut::Named("no_unwind_info"),
        Truncation::Cycle => ReasonOut::Named("cycle"),
        other => ReasonOut::Other {
            other: other.to_string(),
        },
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

impl StacksDoc {
    /// The document of what the session read.
    pub fn of(read: &StacksRead, source: &str, interval: Duration) -> Self {
        let tree = read.tree();
        let doc = tree.to_document();
        let last = read.last();
        StacksDoc {
            schema: STACKS_SCHEMA,
            source: source.to_string(),
            merge_key: match doc.merge_key {
                MergeKey::FunctionAndLine => "function_and_line",
                _ => "function",
            },
            view: match doc.view {
                TreeView::Thread => "thread",
                _ => "process",
            },
            limits: LimitsOut {
                max_depth: doc.limits.max_depth as u64,
                max_nodes: doc.limits.max_nodes as u64,
            },
            nodes: doc
                .nodes
                .iter()
                .map(|n| NodeOut {
                    parent: n.parent,
                    kind: kind(n.kind),
                    function: n.function.clone(),
                    module: n.module.clone(),
                    file: n.file.clone(),
                    line: n.line,
                    ranks: n.ranks.to_string(),
                    threads: n.threads,
                    ends: n.ends.to_string(),
                    truncated: n.truncated.to_string(),
                    trust: n.trust.map(trust),
                })
                .collect(),
            unreached: doc
                .unreached
                .iter()
                .map(|u| UnreachedOut {
                    rank: u.rank,
                    reason: unreached_reason(&u.reason),
                    text: u.reason.to_string(),
                    denial: u.reason.denial.as_ref().map(crate::DenialOut::of),
                    why: crate::WhyOut::of(&u.reason),
                })
                .collect(),
            truncations: doc
                .truncations
                .iter()
                .map(|t| TruncatedOut {
                    reason: truncation(&t.reason),
                    ranks: t.ranks.to_string(),
                    text: t.reason.to_string(),
                })
                .collect(),
            cut_depth: doc.cut_depth.to_string(),
            cut_nodes: doc.cut_nodes.to_string(),
            samples: read.samples.len() as u32,
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            unmoved: read.unmoved.as_ref().map(ToString::to_string),
            stops: read
                .samples
                .iter()
                .map(|s| {
                    s.stops
                        .iter()
                        .map(|t| StopOut {
                            rank: t.rank,
                            pid: t.pid,
                            stopped_us: micros(t.stopped_for),
                            overran: s.overran.contains(&t.rank),
                        })
                        .collect()
                })
                .collect(),
            numbered: read
                .numbered
                .iter()
                .map(|&(rank, pid)| NumberedOut { rank, pid })
                .collect(),
            cooperative: read
                .cooperative
                .iter()
                .map(|(rank, d)| crate::CooperativeOut {
                    rank: Some(*rank),
                    pid: None,
                    denial: crate::DenialOut::of(d),
                })
                .collect(),
            announced: read.announced.as_ref().map(crate::AnnouncedOut::of),
            python: {
                let summary = mpir_types::stacks::PythonSummary::of(&last.ranks);
                PythonOut {
                    versions: summary
                        .versions
                        .iter()
                        .map(|(v, r)| VersionOut {
                            version: v.clone(),
                            ranks: r.to_string(),
                        })
                        .collect(),
                    problems: summary
                        .problems
                        .iter()
                        .map(|(t, r)| ProblemOut {
                            text: t.clone(),
                            ranks: r.to_string(),
                        })
                        .collect(),
                }
            },
            coverage: CoverageOut {
                ranks: last.ranks.len() + last.unreached.len(),
                read: last.ranks.len(),
                complete: last.unreached.is_empty(),
            },
        }
    }
}
