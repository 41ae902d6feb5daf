//! The merged call-prefix tree: building from ranks' stacks, merging trees, bounds.

use super::helpers::builtin_helper;
use super::ranges::Ranges;
use super::{
    Frame, NotRead, RankStacks, SourceLocation, ThreadStack, Truncation, Trust, Unreached,
};
use crate::ranks::RankSet;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What makes two frames the same node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum MergeKey {
    /// The function (symbol name, else module+offset), as STAT merges.
    #[default]
    Function,
    /// The function and its source file:line (call sites apart).
    FunctionAndLine,
}

/// How threads are grouped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum TreeView {
    /// Per process: every thread of a rank merged into one tree; node counts say how many
    /// threads pass through.
    #[default]
    Process,
    /// Per thread: under the root one node per thread kind — `main thread` (tid = pid), else
    /// the thread's name, else `thread #i` (its position) — so like threads of all ranks merge.
    Thread,
}

/// Which threads are folded into one labelled node per helper kind.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub enum HelperFolding {
    /// No folding: every thread's full stack.
    Off,
    /// The built-in signatures ([`super::BUILT_IN_HELPERS`], [`super::builtin_helper`]).
    #[default]
    BuiltIn,
    /// A caller's predicate: given a thread and its process id, the folded node's label, or
    /// `None` to keep the thread's stack.
    Custom(fn(&ThreadStack, u32) -> Option<String>),
}

/// Bounds on a tree's size; what they cut is reported in [`StackTree::cut`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct TreeLimits {
    /// The most frames kept per stack, from the outermost (deeper frames are cut).
    pub max_depth: usize,
    /// The most nodes, the root included.
    pub max_nodes: usize,
}

impl Default for TreeLimits {
    /// 1024 frames, 1 000 000 nodes.
    fn default() -> Self {
        TreeLimits {
            max_depth: 1024,
            max_nodes: 1_000_000,
        }
    }
}

impl TreeLimits {
    /// At most `max_depth` frames per stack and `max_nodes` nodes.
    pub fn new(max_depth: usize, max_nodes: usize) -> Self {
        TreeLimits {
            max_depth,
            max_nodes: max_nodes.max(1),
        }
    }
}

/// How a tree is built.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct TreeOptions {
    /// Node identity.
    pub key: MergeKey,
    /// Per process or per thread.
    pub view: TreeView,
    /// Helper threads folded or not.
    pub helpers: HelperFolding,
    /// Size bounds.
    pub limits: TreeLimits,
}

impl TreeOptions {
    /// With node identity `key`.
    pub fn with_key(mut self, key: MergeKey) -> Self {
        self.key = key;
        self
    }
    /// With view `view`.
    pub fn with_view(mut self, view: TreeView) -> Self {
        self.view = view;
        self
    }
    /// With helper folding `helpers`.
    pub fn with_helpers(mut self, helpers: HelperFolding) -> Self {
        self.helpers = helpers;
        self
    }
    /// With bounds `limits`.
    pub fn with_limits(mut self, limits: TreeLimits) -> Self {
        self.limits = limits;
        self
    }
}

/// What a node stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum NodeKind {
    /// The root (`/`), above every outermost frame.
    Root,
    /// A function with a symbol name.
    Function,
    /// A frame without symbol: `module+offset`.
    Address,
    /// A thread kind ([`TreeView::Thread`]).
    Thread,
    /// Folded helper threads of one kind.
    Helpers,
    /// A Python function at a line: Python frames are told apart by line under every
    /// [`MergeKey`], so ranks waiting at different lines of one function are different
    /// classes.
    Python,
}

/// A node's identity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub struct NodeKey {
    /// What the node stands for.
    pub kind: NodeKind,
    /// The function name, `module+0xoffset`, a thread kind or a helper label.
    pub function: Arc<str>,
    /// The module path (empty for the root, thread and helper nodes).
    pub module: Arc<str>,
    /// The source position, with [`MergeKey::FunctionAndLine`].
    pub location: Option<SourceLocation>,
}

impl NodeKey {
    /// A node of `kind` named `function` in `module`.
    pub fn new(kind: NodeKind, function: impl Into<Arc<str>>, module: impl Into<Arc<str>>) -> Self {
        NodeKey {
            kind,
            function: function.into(),
            module: module.into(),
            location: None,
        }
    }

    /// The node of `frame` under `key`.
    pub fn of_frame(frame: &Frame, key: MergeKey) -> Self {
        if frame.is_python() {
            return NodeKey {
                kind: NodeKind::Python,
                function: frame.symbol.clone().unwrap_or_else(|| "?".into()),
                module: frame.module.clone(),
                location: frame.location.clone(),
            };
        }
        // A symbol is shared (an `Arc` clone), not copied: most frames have one.
        let (kind, function) = match &frame.symbol {
            Some(s) => (NodeKind::Function, s.clone()),
            None => (NodeKind::Address, frame.function_label().into()),
        };
        NodeKey {
            kind,
            function,
            module: frame.module.clone(),
            location: match key {
                MergeKey::Function => None,
                MergeKey::FunctionAndLine => frame.location.clone(),
            },
        }
    }

    fn root() -> Self {
        NodeKey::new(NodeKind::Root, "/", "")
    }

    /// The label shown: the function, with ` @file:line` when the key has one.
    pub fn label(&self) -> String {
        match &self.location {
            Some(l) => format!("{} @{}:{}", self.function, l.file, l.line),
            None => self.function.to_string(),
        }
    }
}

/// A node's index in its tree ([`StackTree::node`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub(crate) usize);

impl NodeId {
    /// The root of every tree.
    pub const ROOT: NodeId = NodeId(0);

    /// The index (pre-order position in the tree).
    pub fn index(self) -> usize {
        self.0
    }
}

/// A node of the tree: a call prefix and the ranks whose stacks pass through it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackNode {
    pub(crate) key: NodeKey,
    pub(crate) ranks: Ranges,
    pub(crate) threads: u64,
    pub(crate) ends: Ranges,
    pub(crate) truncated: Ranges,
    pub(crate) trust: Option<Trust>,
    pub(crate) children: Vec<NodeId>,
    pub(crate) parent: Option<NodeId>,
}

impl StackNode {
    pub(crate) fn new(key: NodeKey, parent: Option<NodeId>) -> Self {
        StackNode {
            key,
            ranks: Ranges::default(),
            threads: 0,
            ends: Ranges::default(),
            truncated: Ranges::default(),
            trust: None,
            children: Vec::new(),
            parent,
        }
    }

    /// Its identity.
    pub fn key(&self) -> &NodeKey {
        &self.key
    }
    /// The ranks with a thread passing through it.
    pub fn ranks(&self) -> RankSet {
        self.ranks.to_rank_set()
    }
    /// How many ranks pass through it.
    pub fn rank_count(&self) -> u64 {
        self.ranks.count()
    }
    /// How many threads (of all ranks) pass through it.
    pub fn threads(&self) -> u64 {
        self.threads
    }
    /// The ranks with a thread whose stack ends here (its innermost frame).
    pub fn ends(&self) -> RankSet {
        self.ends.to_rank_set()
    }
    /// The ranks with a thread whose stack ends here because unwinding stopped early.
    pub fn truncated(&self) -> RankSet {
        self.truncated.to_rank_set()
    }
    /// The least trusted way any of its frames was found ([`Trust::Scan`] last); `None` for
    /// the root, thread and helper nodes.
    pub fn trust(&self) -> Option<Trust> {
        self.trust
    }
    /// Its children, sorted by key.
    pub fn children(&self) -> &[NodeId] {
        &self.children
    }
    /// Its parent (`None` for the root).
    pub fn parent(&self) -> Option<NodeId> {
        self.parent
    }
}

/// What the limits cut from a tree.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Cut {
    pub(crate) depth: Ranges,
    pub(crate) nodes: Ranges,
}

impl Cut {
    /// Ranks with a stack deeper than [`TreeLimits::max_depth`] (its innermost frames cut).
    pub fn depth(&self) -> RankSet {
        self.depth.to_rank_set()
    }
    /// Ranks with frames left out because the tree had [`TreeLimits::max_nodes`] nodes.
    pub fn nodes(&self) -> RankSet {
        self.nodes.to_rank_set()
    }
    /// Whether nothing was cut.
    pub fn is_empty(&self) -> bool {
        self.depth.is_empty() && self.nodes.is_empty()
    }
}

/// Why two trees cannot merge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MergeError {
    /// They were built with different node identities or views.
    #[error("cannot merge a tree built with {left} into one built with {right}")]
    Incompatible {
        /// The other tree's key and view.
        left: String,
        /// This tree's key and view.
        right: String,
    },
}

/// Ranks' stacks merged into a call-prefix tree (see the [module documentation](super)).
///
/// Nodes are kept in a canonical order (pre-order, children sorted by key), so two trees over
/// the same stacks are equal (`==`) however they were built or merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackTree {
    pub(crate) key: MergeKey,
    pub(crate) view: TreeView,
    pub(crate) limits: TreeLimits,
    pub(crate) nodes: Vec<StackNode>,
    pub(crate) unreached: BTreeMap<u64, NotRead>,
    pub(crate) truncations: BTreeMap<Truncation, Ranges>,
    pub(crate) cut: Cut,
}

impl StackTree {
    /// A tree with only the root.
    pub fn empty(key: MergeKey, view: TreeView, limits: TreeLimits) -> Self {
        StackTree {
            key,
            view,
            limits,
            nodes: vec![StackNode::new(NodeKey::root(), None)],
            unreached: BTreeMap::new(),
            truncations: BTreeMap::new(),
            cut: Cut::default(),
        }
    }

    /// The tree of `stacks`, with `unreached` ranks listed.
    pub fn build(stacks: &[RankStacks], unreached: &[Unreached], options: &TreeOptions) -> Self {
        let mut t = StackTree::empty(options.key, options.view, options.limits);
        for rank in stacks {
            t.insert_rank(rank, options.helpers);
        }
        for u in unreached {
            t.add_unreached(u.rank, u.reason.clone());
        }
        t.canonicalize();
        t
    }

    /// Adds a rank without stacks. If it is already listed, the lesser reason (in declaration
    /// order) stays, so that merging is commutative.
    pub fn add_unreached(&mut self, rank: u64, reason: NotRead) {
        let slot = self.unreached.entry(rank).or_insert_with(|| reason.clone());
        if reason < *slot {
            *slot = reason;
        }
    }

    fn insert_rank(&mut self, stacks: &RankStacks, helpers: HelperFolding) {
        let rank = Ranges::one(stacks.rank);
        for (i, thread) in stacks.threads.iter().enumerate() {
            let mut path: Vec<(NodeKey, Option<Trust>)> = Vec::new();
            if self.view == TreeView::Thread {
                let name = if thread.tid == stacks.pid {
                    "main thread".to_string()
                } else {
                    thread
                        .name
                        .clone()
                        .unwrap_or_else(|| format!("thread #{i}"))
                };
                path.push((NodeKey::new(NodeKind::Thread, name, ""), None));
            }
            let folded = match helpers {
                HelperFolding::Off => None,
                HelperFolding::BuiltIn => builtin_helper(thread, stacks.pid).map(String::from),
                HelperFolding::Custom(f) => f(thread, stacks.pid),
            };
            let is_folded = folded.is_some();
            match folded {
                Some(label) => path.push((NodeKey::new(NodeKind::Helpers, label, ""), None)),
                None => path.extend(
                    thread
                        .frames
                        .iter()
                        .rev()
                        .map(|f| (NodeKey::of_frame(f, self.key), Some(f.trust))),
                ),
            }
            if path.len() > self.limits.max_depth {
                path.truncate(self.limits.max_depth);
                self.cut.depth.add(&rank);
            }
            let mut cur = NodeId::ROOT;
            self.add_to(cur, &rank, 1);
            let mut complete = true;
            for (key, trust) in path {
                match self.child_or_new(cur, key) {
                    Some(next) => cur = next,
                    None => {
                        self.cut.nodes.add(&rank);
                        complete = false;
                        break;
                    }
                }
                self.add_to(cur, &rank, 1);
                if let Some(node) = self.nodes.get_mut(cur.0) {
                    node.trust = node.trust.max(trust);
                }
            }
            if complete && let Some(node) = self.nodes.get_mut(cur.0) {
                node.ends.add(&rank);
                if let (Some(reason), false) = (&thread.truncated, is_folded) {
                    node.truncated.add(&rank);
                    let entry = self.truncations.entry(reason.clone()).or_default();
                    entry.add(&rank);
                }
            }
        }
    }

    fn add_to(&mut self, id: NodeId, ranks: &Ranges, threads: u64) {
        if let Some(node) = self.nodes.get_mut(id.0) {
            node.ranks.add(ranks);
            node.threads = node.threads.saturating_add(threads);
        }
    }

    /// The child of `parent` with `key`, created if missing and the node limit allows.
    fn child_or_new(&mut self, parent: NodeId, key: NodeKey) -> Option<NodeId> {
        let nodes = &self.nodes;
        let children = &nodes.get(parent.0)?.children;
        let pos = children.binary_search_by(|c| {
            nodes
                .get(c.0)
                .map_or(std::cmp::Ordering::Less, |n| n.key.cmp(&key))
        });
        match pos {
            Ok(p) => children.get(p).copied(),
            Err(p) => {
                if self.nodes.len() >= self.limits.max_nodes {
                    return None;
                }
                let id = NodeId(self.nodes.len());
                self.nodes.push(StackNode::new(key, Some(parent)));
                self.nodes.get_mut(parent.0)?.children.insert(p, id);
                Some(id)
            }
        }
    }

    /// Puts the nodes in canonical pre-order (children are kept sorted by key).
    pub(crate) fn canonicalize(&mut self) {
        let mut order = Vec::with_capacity(self.nodes.len());
        let mut stack = vec![NodeId::ROOT];
        while let Some(id) = stack.pop() {
            order.push(id);
            if let Some(n) = self.nodes.get(id.0) {
                stack.extend(n.children.iter().rev().copied());
            }
        }
        let mut new_index = vec![usize::MAX; self.nodes.len()];
        for (new, old) in order.iter().enumerate() {
            if let Some(slot) = new_index.get_mut(old.0) {
                *slot = new;
            }
        }
        let map = |id: NodeId| NodeId(new_index.get(id.0).copied().unwrap_or(usize::MAX));
        let mut old: Vec<Option<StackNode>> = std::mem::take(&mut self.nodes)
            .into_iter()
            .map(Some)
            .collect();
        for id in order {
            if let Some(mut n) = old.get_mut(id.0).and_then(Option::take) {
                n.children = n.children.iter().map(|&c| map(c)).collect();
                n.parent = n.parent.map(map);
                self.nodes.push(n);
            }
        }
    }

    /// Merges `other` into this tree: rank sets are united and thread counts added, node by
    /// node. Associative and commutative as long as no limit cuts the result. The limits of
    /// the result are the smaller of both, and bound the nodes merging adds (a peer's tree
    /// cannot raise them). Trees should cover disjoint ranks, since a rank in both has its
    /// threads counted twice; a rank unreached in one and reached in the other is kept in
    /// both lists.
    pub fn merge(&mut self, other: &StackTree) -> Result<(), MergeError> {
        if self.key != other.key || self.view != other.view {
            return Err(MergeError::Incompatible {
                left: format!("{:?}/{:?}", other.key, other.view),
                right: format!("{:?}/{:?}", self.key, self.view),
            });
        }
        self.limits = TreeLimits {
            max_depth: self.limits.max_depth.min(other.limits.max_depth),
            max_nodes: self.limits.max_nodes.min(other.limits.max_nodes),
        };
        // (node of other, node of self, depth)
        let mut stack = vec![(NodeId::ROOT, NodeId::ROOT, 0usize)];
        while let Some((theirs, ours, depth)) = stack.pop() {
            let Some(t) = other.nodes.get(theirs.0) else {
                continue;
            };
            self.add_to(ours, &t.ranks, t.threads);
            if let Some(o) = self.nodes.get_mut(ours.0) {
                o.ends.add(&t.ends);
                o.truncated.add(&t.truncated);
                o.trust = o.trust.max(t.trust);
            }
            for &c in &t.children {
                let Some(child) = other.nodes.get(c.0) else {
                    continue;
                };
                if depth >= self.limits.max_depth {
                    // As when building: the stacks end here, and the cut says so.
                    self.cut.depth.add(&child.ranks);
                    if let Some(o) = self.nodes.get_mut(ours.0) {
                        o.ends.add(&child.ranks);
                    }
                    continue;
                }
                match self.child_or_new(ours, child.key.clone()) {
                    Some(mine) => stack.push((c, mine, depth + 1)),
                    None => self.cut.nodes.add(&child.ranks),
                }
            }
        }
        for (rank, reason) in &other.unreached {
            self.add_unreached(*rank, reason.clone());
        }
        for (reason, ranks) in &other.truncations {
            let entry = self.truncations.entry(reason.clone()).or_default();
            entry.add(ranks);
        }
        self.cut.depth.add(&other.cut.depth);
        self.cut.nodes.add(&other.cut.nodes);
        self.canonicalize();
        Ok(())
    }

    /// This tree merged with `other` ([`merge`](Self::merge)).
    pub fn merged(mut self, other: &StackTree) -> Result<StackTree, MergeError> {
        self.merge(other)?;
        Ok(self)
    }

    /// The node identity it was built with.
    pub fn merge_key(&self) -> MergeKey {
        self.key
    }
    /// The view it was built with.
    pub fn view(&self) -> TreeView {
        self.view
    }
    /// Its bounds.
    pub fn limits(&self) -> TreeLimits {
        self.limits
    }
    /// The root.
    pub fn root(&self) -> &StackNode {
        // Every constructor and decoder makes the root first.
        self.nodes
            .first()
            .unwrap_or_else(|| unreachable!("a tree always has a root"))
    }
    /// A node by id.
    pub fn node(&self, id: NodeId) -> Option<&StackNode> {
        self.nodes.get(id.0)
    }
    /// Every node, in pre-order (root first, children sorted by key).
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &StackNode)> {
        self.nodes.iter().enumerate().map(|(i, n)| (NodeId(i), n))
    }
    /// How many nodes, the root included.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
    /// Whether only the root is there (no stacks).
    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }
    /// The ranks with stacks.
    pub fn ranks(&self) -> RankSet {
        self.root().ranks()
    }
    /// The ranks without stacks, each with why.
    pub fn unreached(&self) -> Vec<Unreached> {
        self.unreached
            .iter()
            .map(|(&rank, reason)| Unreached::new(rank, reason.clone()))
            .collect()
    }
    /// Why stacks stopped early, with the ranks concerned.
    pub fn truncations(&self) -> Vec<(Truncation, RankSet)> {
        self.truncations
            .iter()
            .map(|(t, r)| (t.clone(), r.to_rank_set()))
            .collect()
    }
    /// What the limits cut.
    pub fn cut(&self) -> &Cut {
        &self.cut
    }
    /// The keys from the outermost frame down to `id` (the root excluded).
    pub fn path(&self, id: NodeId) -> Vec<&NodeKey> {
        let mut keys = Vec::new();
        let mut cur = Some(id);
        // Parents come before children in pre-order, so the walk ends within len() steps.
        for _ in 0..self.nodes.len() {
            let Some(n) = cur.and_then(|c| self.nodes.get(c.0)) else {
                break;
            };
            if n.parent.is_none() {
                break;
            }
            keys.push(&n.key);
            cur = n.parent;
        }
        keys.reverse();
        keys
    }
    /// Threads whose stack ends at `id`: its threads less its children's.
    pub fn ending_threads(&self, id: NodeId) -> u64 {
        let Some(n) = self.nodes.get(id.0) else {
            return 0;
        };
        let below: u64 = n
            .children
            .iter()
            .filter_map(|c| self.nodes.get(c.0))
            .fold(0u64, |s, c| s.saturating_add(c.threads));
        n.threads.saturating_sub(below)
    }
}
