//! The JSON form of a tree (schema `mpir.stacks/1`) and its bounded decoder.
//!
//! Nodes are a flat list in pre-order, each naming its parent by index, so a document's nesting
//! depth is fixed whatever the tree's depth (no recursion in a JSON parser, none here). The
//! decoder checks every count and index against [`DecodeLimits`] and the tree's invariants
//! (a child's ranks are within its parent's, siblings are distinct) before building.

use super::ranges::Ranges;
use super::tree::{
    Cut, MergeKey, NodeId, NodeKey, NodeKind, StackNode, StackTree, TreeLimits, TreeView,
};
use super::{ReasonCode, SourceLocation, Truncation, Trust, Unreached};
use crate::ranks::RankSet;
use std::collections::BTreeMap;

/// Rank sets that may be empty (`""`), which [`RankSet`]'s own form refuses.
#[cfg(feature = "serde")]
mod maybe_empty {
    use crate::ranks::RankSet;

    pub(super) fn serialize<S: serde::Serializer>(set: &RankSet, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(set)
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<RankSet, D::Error> {
        let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
        if text.is_empty() {
            return Ok(RankSet::new());
        }
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The `schema` of a tree document.
pub const SCHEMA: &str = "mpir.stacks/2";

/// The earlier version, without Python nodes: read as well (its documents are a subset).
pub(super) const SCHEMA_V1: &str = "mpir.stacks/1";

/// One node of a [`TreeDocument`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct DocumentNode {
    /// The parent's index (earlier in the list); `None` only for the root (index 0).
    pub parent: Option<u64>,
    /// What the node stands for.
    pub kind: NodeKind,
    /// Function, `module+0xoffset`, thread kind or helper label.
    pub function: String,
    /// Module path (may be empty).
    pub module: String,
    /// Source file, with the function-and-line key.
    pub file: Option<String>,
    /// Source line, with the function-and-line key.
    pub line: Option<u32>,
    /// Ranks passing through.
    #[cfg_attr(feature = "serde", serde(with = "maybe_empty"))]
    pub ranks: RankSet,
    /// Threads passing through.
    pub threads: u64,
    /// Ranks with a thread ending here.
    #[cfg_attr(feature = "serde", serde(with = "maybe_empty"))]
    pub ends: RankSet,
    /// Ranks with a thread ending here because unwinding stopped early.
    #[cfg_attr(feature = "serde", serde(with = "maybe_empty"))]
    pub truncated: RankSet,
    /// The least trusted way one of its frames was found.
    pub trust: Option<Trust>,
}

/// Ranks whose stacks stopped early for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct TruncatedRanks {
    /// Why.
    pub reason: Truncation,
    /// The ranks.
    #[cfg_attr(feature = "serde", serde(with = "maybe_empty"))]
    pub ranks: RankSet,
}

/// A tree as a document: what `--json` prints and agents exchange.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct TreeDocument {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Node identity.
    pub merge_key: MergeKey,
    /// Per process or per thread.
    pub view: TreeView,
    /// The bounds the tree was built with.
    pub limits: TreeLimits,
    /// The nodes in pre-order, the root first.
    pub nodes: Vec<DocumentNode>,
    /// Ranks without stacks.
    pub unreached: Vec<Unreached>,
    /// Why stacks stopped early, with the ranks concerned.
    pub truncations: Vec<TruncatedRanks>,
    /// Ranks cut by the depth limit.
    #[cfg_attr(feature = "serde", serde(with = "maybe_empty"))]
    pub cut_depth: RankSet,
    /// Ranks with frames left out at the node limit.
    #[cfg_attr(feature = "serde", serde(with = "maybe_empty"))]
    pub cut_nodes: RankSet,
}

/// Bounds on what [`StackTree::from_document`] accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct DecodeLimits {
    /// The most nodes.
    pub max_nodes: usize,
    /// The deepest node.
    pub max_depth: usize,
    /// The longest string (bytes).
    pub max_string: usize,
    /// The most ranges in all rank sets together, plus unreached ranks.
    pub max_ranges: usize,
}

impl Default for DecodeLimits {
    /// 1 000 000 nodes, depth 1024, 4096-byte strings, 10 000 000 ranges.
    fn default() -> Self {
        DecodeLimits {
            max_nodes: 1_000_000,
            max_depth: 1024,
            max_string: 4096,
            max_ranges: 10_000_000,
        }
    }
}

impl DecodeLimits {
    /// With these bounds.
    pub fn new(max_nodes: usize, max_depth: usize, max_string: usize, max_ranges: usize) -> Self {
        DecodeLimits {
            max_nodes,
            max_depth,
            max_string,
            max_ranges,
        }
    }
}

/// Why a document is not a tree.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TreeDecodeError {
    /// Another schema.
    #[error("schema {found:?} is not {SCHEMA}")]
    Schema {
        /// The document's schema.
        found: String,
    },
    /// Over a bound.
    #[error("{what}: {found} is over the limit of {limit}")]
    TooLarge {
        /// What was counted.
        what: &'static str,
        /// How many.
        found: u64,
        /// The bound.
        limit: u64,
    },
    /// A node breaks the tree's rules.
    #[error("node {index}: {problem}")]
    Node {
        /// The node's index.
        index: usize,
        /// What is wrong.
        problem: &'static str,
    },
    /// Elsewhere in the document.
    #[error("{0}")]
    Document(&'static str),
}

impl StackTree {
    /// The tree as a document.
    pub fn to_document(&self) -> TreeDocument {
        let nodes = self
            .nodes()
            .map(|(_, n)| DocumentNode {
                parent: n.parent.map(|p| p.index() as u64),
                kind: n.key.kind,
                function: n.key.function.to_string(),
                module: n.key.module.to_string(),
                file: n.key.location.as_ref().map(|l| l.file.to_string()),
                line: n.key.location.as_ref().map(|l| l.line),
                ranks: n.ranks.to_rank_set(),
                threads: n.threads,
                ends: n.ends.to_rank_set(),
                truncated: n.truncated.to_rank_set(),
                trust: n.trust,
            })
            .collect();
        TreeDocument {
            schema: SCHEMA.to_string(),
            merge_key: self.key,
            view: self.view,
            limits: self.limits,
            nodes,
            unreached: self.unreached(),
            truncations: self
                .truncations()
                .into_iter()
                .map(|(reason, ranks)| TruncatedRanks { reason, ranks })
                .collect(),
            cut_depth: self.cut.depth.to_rank_set(),
            cut_nodes: self.cut.nodes.to_rank_set(),
        }
    }

    /// The tree of a document, if it is one within `limits`: every index, count, string and
    /// rank set is checked before use; nothing panics, whatever the document.
    pub fn from_document(
        doc: &TreeDocument,
        limits: &DecodeLimits,
    ) -> Result<StackTree, TreeDecodeError> {
        use TreeDecodeError as E;
        if doc.schema != SCHEMA && doc.schema != SCHEMA_V1 {
            return Err(E::Schema {
                found: doc.schema.chars().take(64).collect(),
            });
        }
        let too_large = |what, found: usize, limit: usize| E::TooLarge {
            what,
            found: found as u64,
            limit: limit as u64,
        };
        let max_nodes = limits.max_nodes.min(doc.limits.max_nodes);
        if doc.nodes.len() > max_nodes {
            return Err(too_large("nodes", doc.nodes.len(), max_nodes));
        }
        let max_depth = limits.max_depth.min(doc.limits.max_depth);
        if doc.unreached.len() > limits.max_ranges {
            return Err(too_large(
                "unreached ranks",
                doc.unreached.len(),
                limits.max_ranges,
            ));
        }
        let mut used = 0usize;
        let mut ranges = |set: &RankSet, what: &'static str| -> Result<Ranges, TreeDecodeError> {
            let r = Ranges::from_rank_set(set).ok_or(E::Document(what))?;
            used = used.saturating_add(r.pieces());
            if used > limits.max_ranges {
                return Err(too_large("rank ranges", used, limits.max_ranges));
            }
            Ok(r)
        };
        let check_str = |s: &str| {
            if s.len() > limits.max_string {
                Err(too_large("string bytes", s.len(), limits.max_string))
            } else {
                Ok(())
            }
        };
        let mut nodes: Vec<StackNode> = Vec::with_capacity(doc.nodes.len());
        let mut depths: Vec<usize> = Vec::with_capacity(doc.nodes.len());
        for (index, d) in doc.nodes.iter().enumerate() {
            let bad = |problem| E::Node { index, problem };
            check_str(&d.function)?;
            check_str(&d.module)?;
            if let Some(f) = &d.file {
                check_str(f)?;
            }
            let parent = match (index, d.parent, d.kind) {
                (0, None, NodeKind::Root) => None,
                (0, _, _) => return Err(bad("the first node must be the root, without parent")),
                (_, _, NodeKind::Root) | (_, None, _) => {
                    return Err(bad("only the first node may be a root"));
                }
                (_, Some(p), _) => {
                    let p = usize::try_from(p).ok().filter(|&p| p < index);
                    Some(p.ok_or(bad("parent is not an earlier node"))?)
                }
            };
            let depth = match parent {
                None => 0,
                Some(p) => depths.get(p).copied().unwrap_or(0) + 1,
            };
            if depth > max_depth {
                return Err(too_large("tree depth", depth, max_depth));
            }
            let location = match (&d.file, d.line) {
                (Some(f), Some(l)) => Some(SourceLocation::new(f.as_str(), l)),
                (None, None) => None,
                _ => return Err(bad("a file without a line or a line without a file")),
            };
            if location.is_some() && doc.merge_key == MergeKey::Function {
                return Err(bad("a source position in a tree merged by function"));
            }
            let mut node = StackNode::new(
                NodeKey {
                    kind: d.kind,
                    function: d.function.as_str().into(),
                    module: d.module.as_str().into(),
                    location,
                },
                parent.map(NodeId),
            );
            node.ranks = ranges(&d.ranks, "an open rank range in a node")?;
            node.ends = ranges(&d.ends, "an open rank range in a node")?;
            node.truncated = ranges(&d.truncated, "an open rank range in a node")?;
            node.threads = d.threads;
            node.trust = d.trust;
            if node.threads < node.ranks.count() {
                return Err(bad("fewer threads than ranks"));
            }
            if !node.ends.difference(&node.ranks).is_empty() {
                return Err(bad("ends holds ranks the node does not"));
            }
            if !node.truncated.difference(&node.ends).is_empty() {
                return Err(bad("truncated holds ranks that do not end here"));
            }
            if let Some(p) = parent {
                let parent_node = nodes
                    .get_mut(p)
                    .ok_or(bad("parent is not an earlier node"))?;
                if !node.ranks.difference(&parent_node.ranks).is_empty() {
                    return Err(bad("holds ranks its parent does not"));
                }
                parent_node.children.push(NodeId(index));
            }
            nodes.push(node);
            depths.push(depth);
        }
        if nodes.is_empty() {
            return Err(E::Document("no root node"));
        }
        let cut = Cut {
            depth: ranges(&doc.cut_depth, "an open rank range in cut_depth")?,
            nodes: ranges(&doc.cut_nodes, "an open rank range in cut_nodes")?,
        };
        // Every rank through a node ends there or goes on to a child (or was cut).
        for (index, n) in nodes.iter().enumerate() {
            let mut covered = n.ends.union(&cut.nodes);
            for c in &n.children {
                if let Some(child) = nodes.get(c.0) {
                    covered.add(&child.ranks);
                }
            }
            if !n.ranks.difference(&covered).is_empty() {
                return Err(E::Node {
                    index,
                    problem: "holds ranks that neither end here nor go on to a child",
                });
            }
        }
        // Children sorted by key, distinct, and with no more threads than their parent.
        let keys: Vec<NodeKey> = nodes.iter().map(|n| n.key.clone()).collect();
        let threads: Vec<u64> = nodes.iter().map(|n| n.threads).collect();
        for (index, n) in nodes.iter_mut().enumerate() {
            n.children.sort_by(|a, b| keys.get(a.0).cmp(&keys.get(b.0)));
            if n.children.windows(2).any(|w| match w {
                [a, b] => keys.get(a.0) == keys.get(b.0),
                _ => false,
            }) {
                return Err(E::Node {
                    index,
                    problem: "two children with the same key",
                });
            }
            let below = n.children.iter().try_fold(0u64, |s, c| {
                s.checked_add(threads.get(c.0).copied().unwrap_or(0))
            });
            if below.is_none_or(|b| b > n.threads) {
                return Err(E::Node {
                    index,
                    problem: "fewer threads than its children together",
                });
            }
        }
        let mut unreached = BTreeMap::new();
        for u in &doc.unreached {
            check_str(&u.reason.text)?;
            if let ReasonCode::Other(s) = &u.reason.code {
                check_str(s)?;
            }
            if let Some(h) = &u.reason.host {
                check_str(h)?;
            }
            for t in &u.reason.missing_types {
                check_str(t)?;
            }
            unreached.insert(u.rank, u.reason.clone());
        }
        let mut truncations: BTreeMap<Truncation, Ranges> = BTreeMap::new();
        for TruncatedRanks {
            reason: t,
            ranks: set,
        } in &doc.truncations
        {
            if let Truncation::Other(s) = t {
                check_str(s)?;
            }
            let r = ranges(set, "an open rank range in truncations")?;
            let entry = truncations.entry(t.clone()).or_default();
            entry.add(&r);
        }
        let mut tree = StackTree {
            key: doc.merge_key,
            view: doc.view,
            limits: TreeLimits::new(doc.limits.max_depth, doc.limits.max_nodes),
            nodes,
            unreached,
            truncations,
            cut,
        };
        tree.canonicalize();
        Ok(tree)
    }
}
