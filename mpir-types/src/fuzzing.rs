//! Fuzz harnesses for every decoder, shared by the cargo-fuzz targets in `fuzz/` and by the
//! bounded no-panic run in this crate's tests. Each takes arbitrary bytes, derives a data model
//! and layout from the first ones, decodes the rest, and must return without panicking whatever
//! the input. Errors are the expected outcome for most inputs and are discarded.

use crate::layout::{LayoutSource, TypeLayout};
use crate::model::DataModel;
use crate::mpir::{self, ProcDescLayout};
use crate::mqd::{self, CommunicatorLayout, OpClass, PendingOperationLayout};
use crate::ranks::RankSet;
use crate::stacks::{
    DecodeLimits, Frame, HelperFolding, MergeKey, NodeKind, RankStacks, SourceLocation, StackTree,
    ThreadStack, TreeLimits, TreeOptions, TreeView, Truncation, Trust, Unreached,
};
use crate::view::View;

/// Draws values from the front of the fuzzer's input.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn u64(&mut self) -> u64 {
        (0..8).fold(0, |acc, _| (acc << 8) | u64::from(self.u8()))
    }
    /// A value that is small most of the time, and anything some of the time.
    fn size(&mut self) -> u64 {
        match self.u8() % 4 {
            0 => self.u64(),
            _ => u64::from(self.u8()),
        }
    }
    fn model(&mut self) -> DataModel {
        let presets = DataModel::PRESETS;
        presets
            .get(usize::from(self.u8()) % presets.len())
            .map_or(DataModel::LP64, |p| p.1)
    }
    fn type_layout(&mut self, name: &str, members: &[&str]) -> TypeLayout {
        let mut t = TypeLayout::new(name, self.size(), LayoutSource::Given);
        for m in members {
            // Sometimes leave a member out; sometimes give no size.
            match self.u8() % 8 {
                0 => continue,
                1 => t
                    .members
                    .push(crate::layout::MemberLayout::new(*m, self.size(), None)),
                _ => t = t.with_member(*m, self.size(), self.size()),
            }
        }
        t
    }
    fn rest(self) -> &'a [u8] {
        self.0
    }
}

/// Address of the fuzzed starter's memory in [`discover`].
pub const DISCOVER_BASE: u64 = 0x1000;

/// The fuzzed starter of [`discover`]: its one region of memory is the input's rest, both
/// scanned and read; a descendant runs a name when the name's length and the pid have the same
/// parity.
struct FuzzStarter<'a>(&'a [u8]);

impl mpir::discover::Facts for FuzzStarter<'_> {
    fn readable(&self, address: u64, len: u64) -> bool {
        address >= DISCOVER_BASE
            && address
                .checked_add(len)
                .is_some_and(|end| end <= DISCOVER_BASE + self.0.len() as u64)
    }
    fn read(&self, address: u64, buf: &mut [u8]) -> usize {
        let Some(from) = address
            .checked_sub(DISCOVER_BASE)
            .and_then(|o| usize::try_from(o).ok())
        else {
            return 0;
        };
        let src = self.0.get(from..).unwrap_or_default();
        let n = src.len().min(buf.len());
        if let (Some(d), Some(s)) = (buf.get_mut(..n), src.get(..n)) {
            d.copy_from_slice(s);
        }
        n
    }
    fn runs(&self, pid: u32, executable: &[u8]) -> bool {
        executable.len() % 2 == pid as usize % 2
    }
}

/// The search for a symbol-less starter's table ([`mpir::discover`]) over arbitrary memory,
/// descendants and small bounds: an answer, when there is one, must be what it claims.
/// Input: model preset, descendant count `n` (0-7), `n` pids (u8 each, + 100), bounds (reads
/// / 8, longest string), then the memory.
pub fn discover(data: &[u8]) {
    use mpir::discover::DiscoverError;
    let (descendants, outcome) = discover_search(data);
    match outcome {
        Ok(d) => {
            assert!(d.entries >= 1 && d.entries as usize == d.pids.len());
            let distinct: std::collections::BTreeSet<_> = d.pids.iter().collect();
            assert_eq!(distinct.len(), d.pids.len());
            assert!(d.pids.iter().all(|p| descendants.contains(p)));
            let _ = d.to_string();
        }
        Err(DiscoverError::Ambiguous { candidates }) => assert!(candidates.len() >= 2),
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// [`discover`]'s search: the descendants it drew and the outcome.
#[allow(clippy::type_complexity, reason = "a harness's two outputs")]
pub fn discover_search(
    data: &[u8],
) -> (
    std::collections::BTreeSet<u32>,
    Result<mpir::discover::Discovered, mpir::discover::DiscoverError>,
) {
    use mpir::discover::{Region, SearchOptions};
    let mut input = Input(data);
    let model = input.model();
    let n = input.u8() % 8;
    let descendants: std::collections::BTreeSet<u32> =
        (0..n).map(|_| u32::from(input.u8()) + 100).collect();
    let options = SearchOptions::default()
        .with_max_reads(u64::from(input.u8()) * 8)
        .with_max_string(u64::from(input.u8() % 64))
        .with_max_scan_bytes(4096);
    let memory = input.rest();
    let regions = [Region {
        address: DISCOVER_BASE,
        bytes: memory,
    }];
    let facts = FuzzStarter(memory);
    let outcome = mpir::discover::discover(&model, &regions, &descendants, &facts, &options);
    (descendants, outcome)
}

/// The proctable decoder and resolution, with an ABI or arbitrary given layout.
pub fn proctable(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let layout = if input.u8() % 2 == 0 {
        ProcDescLayout::abi(&model)
    } else {
        let ty = input.type_layout("MPIR_PROCDESC", &["host_name", "executable_name", "pid"]);
        match ProcDescLayout::from_type(&ty, &model) {
            Ok(l) => l,
            Err(_) => return,
        }
    };
    let raw_size = input.u64() as i64;
    let address = input.u64();
    let bytes = input.rest();
    let Ok(count) = mpir::proctable_len(raw_size, mpir::DEFAULT_MAX_ENTRIES) else {
        return;
    };
    if let Ok(entries) = mpir::decode_proctable(&model, &layout, address, bytes, count) {
        // Pretend every string is the table bytes themselves, some unreadable.
        let addresses = mpir::string_addresses(&entries);
        let view = View::new(model, address, bytes);
        let strings: Vec<_> = addresses
            .iter()
            .map(|&a| {
                view.cstr(a.wrapping_sub(address), mpir::DEFAULT_MAX_STRING, "name")
                    .map_err(|e| e.to_string())
            })
            .collect();
        // Also with fewer strings than addresses: missing ones are problems, not panics.
        let short = strings.get(..strings.len() / 2).unwrap_or_default();
        let _ = mpir::resolve(&entries, &addresses, short);
        let table = mpir::resolve(&entries, &addresses, &strings);
        assert_eq!(table.entries.len(), entries.len());
    }
}

/// The `mqs_communicator` decoder, with an ABI or arbitrary given layout.
pub fn communicator(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let layout = if input.u8() % 2 == 0 {
        CommunicatorLayout::abi(&model)
    } else {
        let ty = input.type_layout(
            "mqs_communicator",
            &["unique_id", "local_rank", "size", "name"],
        );
        match CommunicatorLayout::from_type(&ty, &model) {
            Ok(l) => l,
            Err(_) => return,
        }
    };
    let address = input.u64();
    let _ = mqd::decode_communicator(&model, &layout, address, input.rest());
}

/// The `mqs_pending_operation` decoder and normalisation, with an ABI or given layout.
pub fn pending_operation(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let layout = if input.u8() % 2 == 0 {
        PendingOperationLayout::abi(&model)
    } else {
        let ty = input.type_layout(
            "mqs_pending_operation",
            &[
                "status",
                "desired_local_rank",
                "desired_global_rank",
                "tag_wild",
                "desired_tag",
                "desired_length",
                "system_buffer",
                "buffer",
                "actual_local_rank",
                "actual_global_rank",
                "actual_tag",
                "actual_length",
                "extra_text",
            ],
        );
        match PendingOperationLayout::from_type(&ty, &model) {
            Ok(l) => l,
            Err(_) => return,
        }
    };
    let class = OpClass::from_raw(i64::from(input.u8() % 3)).unwrap_or(OpClass::Send);
    let unit = match input.u8() % 3 {
        0 => mqd::LengthUnit::Bytes,
        1 => mqd::LengthUnit::Elements { element_size: None },
        _ => mqd::LengthUnit::Elements {
            element_size: Some(input.size()),
        },
    };
    let address = input.u64();
    if let Ok(op) = mqd::decode_pending_operation(&model, &layout, address, input.rest()) {
        let n = mqd::normalize(&op, class, unit);
        assert!(n.extra_text.len() <= 5);
    }
}

/// The scalar and string readers of [`View`] at arbitrary offsets, widths and bounds.
pub fn view(data: &[u8]) {
    let mut input = Input(data);
    let model = input.model();
    let base = input.u64();
    let (offset, width, max) = (input.size(), input.size(), input.size());
    let v = View::new(model, base, input.rest());
    let _ = v.uint(offset, width, "u");
    let _ = v.int(offset, width, "i");
    let _ = v.pointer(offset, "p");
    let _ = v.c_long(offset, "l");
    let _ = v.char_array(offset, width, "a");
    let _ = v.address_of(offset, "o");
    if let Ok(s) = v.cstr(offset, max, "s") {
        assert!(s.len() as u64 <= max && !s.contains(&0));
    }
}

/// Names the stack harnesses draw from: plain, empty, and ones with the characters the
/// outputs escape.
const STACK_NAMES: [&str; 6] = [
    "main",
    "MPI_Barrier",
    "",
    "a;b",
    "q\"u\\o\nte",
    "progress_engine",
];

impl Input<'_> {
    fn pick<T: Copy>(&mut self, from: &[T], or: T) -> T {
        from.get(usize::from(self.u8()) % from.len().max(1))
            .copied()
            .unwrap_or(or)
    }
    fn rank_set(&mut self) -> RankSet {
        let mut set = RankSet::new();
        for _ in 0..self.u8() % 4 {
            let first = self.size();
            set = set.with_range(first, first.saturating_add(self.size()));
        }
        set
    }
    /// Tree options with small limits, and ranks' stacks over a small alphabet of frames.
    fn stacks(&mut self) -> (TreeOptions, Vec<RankStacks>) {
        let limits = TreeLimits::new(usize::from(self.u8() % 12), usize::from(self.u8() % 48));
        let options = TreeOptions::default()
            .with_limits(limits)
            .with_key(self.pick(
                &[MergeKey::Function, MergeKey::FunctionAndLine],
                MergeKey::Function,
            ))
            .with_view(self.pick(&[TreeView::Process, TreeView::Thread], TreeView::Process))
            .with_helpers(self.pick(
                &[HelperFolding::Off, HelperFolding::BuiltIn],
                HelperFolding::Off,
            ));
        let mut ranks = Vec::new();
        for rank in 0..u64::from(self.u8() % 8) {
            let mut threads = Vec::new();
            for t in 0..self.u8() % 3 {
                let frames = (0..self.u8() % 10)
                    .map(|_| {
                        let module = self.pick(&STACK_NAMES, "m");
                        let mut f = Frame::new(module, u64::from(self.u8() % 4), Trust::Cfi);
                        if !self.u8().is_multiple_of(4) {
                            f = f.with_symbol(self.pick(&STACK_NAMES, "f"));
                        }
                        if self.u8().is_multiple_of(2) {
                            f = f.with_location(SourceLocation::new(
                                "f.c",
                                u32::from(self.u8() % 3),
                            ));
                        }
                        f
                    })
                    .collect();
                let mut stack = ThreadStack::new(100 + u32::from(t), frames);
                if self.u8().is_multiple_of(4) {
                    stack = stack.with_truncation(Truncation::Cycle);
                }
                threads.push(stack);
            }
            let r = rank * u64::from(self.u8() % 3 + 1);
            ranks.push(RankStacks::new(r, 100, threads));
        }
        (options, ranks)
    }
}

/// The stack-tree document decoder ([`StackTree::from_document`]) on the document of a real
/// tree with up to three hostile edits: wrong or forward parents, roots in the middle, open or
/// oversized rank sets, duplicated or dropped nodes, hostile names and limits. A document it
/// accepts must render, analyse, merge and round-trip.
pub fn stack_tree(data: &[u8]) {
    let mut input = Input(data);
    let (options, ranks) = input.stacks();
    let unreached = [Unreached::new(
        input.size(),
        crate::unread::NotRead::new(crate::unread::ReasonCode::Exited, "exited"),
    )];
    let mut doc = StackTree::build(&ranks, &unreached, &options).to_document();
    let kinds = [
        NodeKind::Root,
        NodeKind::Function,
        NodeKind::Address,
        NodeKind::Thread,
        NodeKind::Helpers,
    ];
    for _ in 0..input.u8() % 4 {
        let n = doc.nodes.len().max(1);
        let at = usize::from(input.u8()) % n;
        let what = input.u8() % 12;
        let (rank_set, size) = (input.rank_set(), input.size());
        let name = input
            .pick(&STACK_NAMES, "f")
            .repeat(usize::from(input.u8() % 8));
        let kind = input.pick(&kinds, NodeKind::Function);
        let Some(node) = doc.nodes.get_mut(at) else {
            continue;
        };
        match what {
            0 => node.parent = (size % 4 != 0).then_some(size),
            1 => node.kind = kind,
            2 => node.function = name,
            3 => node.ranks = rank_set,
            4 => node.ends = rank_set,
            5 => node.truncated = rank_set,
            6 => node.threads = size,
            7 => (node.file, node.line) = (Some(name), (size % 2 == 0).then_some(size as u32)),
            8 => {
                let copy = node.clone();
                doc.nodes.push(copy);
            }
            9 => {
                doc.nodes.remove(at);
            }
            10 => doc.limits = TreeLimits::new(size as usize, usize::from(input.u8())),
            _ => doc.cut_nodes = rank_set,
        }
    }
    let limits = DecodeLimits::new(32, 16, 64, 256);
    if let Ok(tree) = StackTree::from_document(&doc, &limits) {
        check_tree(&tree);
        let again = StackTree::from_document(&tree.to_document(), &limits);
        assert_eq!(again.as_ref(), Ok(&tree));
    }
}

/// What every tree must satisfy, and outputs that must not panic.
fn check_tree(tree: &StackTree) {
    for (id, node) in tree.nodes() {
        for &c in node.children() {
            let child = tree.node(c).expect("children exist");
            assert_eq!(child.parent(), Some(id));
            assert!(
                child
                    .ranks()
                    .iter_within(1 << 16)
                    .all(|r| node.ranks().contains(r))
            );
        }
    }
    let _ = (tree.to_text(), tree.to_dot(), tree.to_folded());
    let classes = tree.classes();
    let covered: u64 = classes.iter().map(|c| c.ranks.count_within(u64::MAX)).sum();
    assert_eq!(covered, tree.root().rank_count());
    assert!(tree.diff(tree).moved.is_empty());
    let doubled = tree.clone().merged(tree).expect("same key and view");
    assert_eq!(doubled.len(), tree.len());
}

/// Building trees from arbitrary stacks under small limits: the limits hold, a tree's document
/// decodes back to it, and when nothing was cut, merging per-rank trees gives the tree built
/// from all ranks.
pub fn stack_build(data: &[u8]) {
    let mut input = Input(data);
    let (options, ranks) = input.stacks();
    let whole = StackTree::build(&ranks, &[], &options);
    assert!(whole.len() <= options.limits.max_nodes);
    check_tree(&whole);
    let decoded = StackTree::from_document(&whole.to_document(), &DecodeLimits::default());
    assert_eq!(decoded.as_ref(), Ok(&whole));
    if whole.cut().is_empty() {
        let mut merged = StackTree::empty(options.key, options.view, options.limits);
        for r in ranks.iter().rev() {
            let one = StackTree::build(std::slice::from_ref(r), &[], &options);
            merged.merge(&one).expect("same options");
        }
        assert_eq!(merged, whole);
    }
}

/// A harness: arbitrary bytes in, no panic out.
pub type Harness = fn(&[u8]);

/// Every harness, by name (for the test suite and tooling).
pub const ALL: [(&str, Harness); 7] = [
    ("proctable", proctable),
    ("discover", discover),
    ("communicator", communicator),
    ("pending_operation", pending_operation),
    ("view", view),
    ("stack_tree", stack_tree),
    ("stack_build", stack_build),
];
