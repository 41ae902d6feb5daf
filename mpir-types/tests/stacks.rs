//! Merged stack trees: merging laws (proptest), outputs checked against hand-written
//! expectations, helper folding, classes, diffs, limits, and the JSON decoder on hostile input.

use mpir_types::ranks::RankSet;
use mpir_types::stacks::{
    DecodeLimits, Frame, HelperFolding, MergeKey, NotRead, RankStacks, ReasonCode, SourceLocation,
    StackTree, ThreadStack, TreeDecodeError, TreeLimits, TreeOptions, TreeView, Truncation, Trust,
    Unreached,
};
use proptest::prelude::*;

/// A thread whose frames are `names`, innermost first, in /bin/app.
fn thread(tid: u32, names: &[&str]) -> ThreadStack {
    let frames = names
        .iter()
        .map(|n| Frame::new("/bin/app", 0x10, Trust::Cfi).with_symbol(*n))
        .collect();
    ThreadStack::new(tid, frames)
}

fn rank(rank: u64, threads: Vec<ThreadStack>) -> RankStacks {
    RankStacks::new(rank, 1000 + rank as u32, threads)
}

/// Ranks 0-2 in MPI_Barrier, 3 in MPI_Reduce; rank 1 also has a libevent helper thread.
fn collective_mismatch() -> Vec<RankStacks> {
    (0..4)
        .map(|r| {
            let pid = 1000 + r as u32;
            let leaf = if r == 3 { "MPI_Reduce" } else { "MPI_Barrier" };
            let mut threads = vec![thread(pid, &[leaf, "main", "_start"])];
            if r == 1 {
                threads.push(thread(
                    pid + 1,
                    &[
                        "epoll_wait",
                        "event_base_loop",
                        "progress_engine",
                        "start_thread",
                    ],
                ));
            }
            rank(r, threads)
        })
        .collect()
}

#[test]
fn text_tree_with_ranges_counts_helpers_and_unreached() {
    let unreached = [Unreached::new(
        4,
        NotRead::new(ReasonCode::Exited, "the process exited"),
    )];
    let tree = StackTree::build(&collective_mismatch(), &unreached, &TreeOptions::default());
    let expected = "\
/ [0-3] 4 ranks, 5 threads
  _start [0-3] 4 ranks, 4 threads
    main [0-3] 4 ranks, 4 threads
      MPI_Barrier [0-2] 3 ranks, 3 threads
      MPI_Reduce [3] 1 rank, 1 thread
  libevent event loop (event_base_loop) [1] 1 rank, 1 thread
unreached [4]: the process exited
";
    assert_eq!(tree.to_text(), expected);
    assert_eq!(
        tree.to_folded(),
        "_start;main;MPI_Barrier 3\n_start;main;MPI_Reduce 1\nlibevent event loop (event_base_loop) 1\n"
    );
    assert_eq!(tree.ranks().to_string(), "0-3");
    assert_eq!(tree.unreached(), unreached);
}

#[test]
fn helpers_unfold_on_request_and_the_main_thread_never_folds() {
    let mut stacks = collective_mismatch();
    // Rank 2's main thread sits in a progress engine: still the user's thread.
    stacks[2].threads[0] = thread(1002, &["progress_engine", "MPI_Barrier", "main", "_start"]);
    let off = TreeOptions::default().with_helpers(HelperFolding::Off);
    let text = StackTree::build(&stacks, &[], &off).to_text();
    assert!(
        text.contains("  start_thread [1] 1 rank, 1 thread"),
        "{text}"
    );
    assert!(text.contains("event_base_loop [1]"), "{text}");
    let folded = StackTree::build(&stacks, &[], &TreeOptions::default()).to_text();
    assert!(folded.contains("progress_engine [2] 1 rank"), "{folded}");
    assert!(!folded.contains("start_thread"), "{folded}");
    // A caller's predicate.
    fn epoll(t: &ThreadStack, _pid: u32) -> Option<String> {
        t.frames
            .first()
            .and_then(|f| f.symbol.as_deref())
            .filter(|s| *s == "epoll_wait")
            .map(|_| "pollers".to_string())
    }
    let custom = TreeOptions::default().with_helpers(HelperFolding::Custom(epoll));
    let text = StackTree::build(&stacks, &[], &custom).to_text();
    assert!(
        text.contains("\n  pollers [1] 1 rank, 1 thread\n"),
        "{text}"
    );
}

#[test]
fn thread_view_groups_like_threads() {
    let view = TreeOptions::default()
        .with_view(TreeView::Thread)
        .with_helpers(HelperFolding::Off);
    let text = StackTree::build(&collective_mismatch(), &[], &view).to_text();
    assert!(
        text.contains("\n  main thread [0-3] 4 ranks, 4 threads\n"),
        "{text}"
    );
    assert!(
        text.contains("\n  thread #1 [1] 1 rank, 1 thread\n"),
        "{text}"
    );
}

#[test]
fn dot_is_stat_shaped_and_escapes_names() {
    let mut stacks = collective_mismatch();
    stacks[0].threads[0] = thread(1000, &["op\"er<a>tor()", "main", "_start"]);
    let dot = StackTree::build(&stacks, &[], &TreeOptions::default()).to_dot();
    assert!(dot.starts_with("digraph G {\n"), "{dot}");
    assert!(dot.ends_with("}\n"), "{dot}");
    assert!(dot.contains("\t0 [label=\"/\""), "{dot}");
    // _start is node 1 (pre-order, first child), entered by ranks 0-3.
    assert!(
        dot.contains("\t0 -> 1 [label=\"4:[0-3]\",count=4,tcount=4];"),
        "{dot}"
    );
    assert!(dot.contains("label=\"2:[1-2]\""), "{dot}");
    assert!(dot.contains("label=\"op\\\"er<a>tor()\""), "{dot}");
    let quotes = dot.matches('"').count() - dot.matches("\\\"").count();
    assert_eq!(quotes % 2, 0, "{dot}");
}

#[test]
fn function_and_line_keys_split_call_sites() {
    let at = |line| {
        ThreadStack::new(
            1,
            vec![
                Frame::new("/bin/app", 0x20, Trust::Context)
                    .with_symbol("MPI_Send")
                    .with_location(SourceLocation::new("app.c", line)),
                Frame::new("/bin/app", 0x10, Trust::Cfi).with_symbol("main"),
            ],
        )
    };
    let stacks = vec![rank(0, vec![at(10)]), rank(1, vec![at(20)])];
    let by_function = StackTree::build(&stacks, &[], &TreeOptions::default());
    assert_eq!(by_function.len(), 3);
    let by_line = StackTree::build(
        &stacks,
        &[],
        &TreeOptions::default().with_key(MergeKey::FunctionAndLine),
    );
    assert_eq!(by_line.len(), 4);
    assert!(by_line.to_text().contains("MPI_Send @app.c:20 [1]"));
    // A frame without symbol is module+offset.
    let anon = vec![rank(
        0,
        vec![ThreadStack::new(
            1,
            vec![Frame::new("/lib/libx.so", 0x4f0, Trust::Scan)],
        )],
    )];
    let t = StackTree::build(&anon, &[], &TreeOptions::default());
    assert!(
        t.to_text()
            .contains("libx.so+0x4f0 [0] 1 rank, 1 thread; found by stack scan (may be wrong)"),
        "{}",
        t.to_text()
    );
    // The least trusted way wins, whichever tree brought it.
    let cfi = vec![rank(
        1,
        vec![ThreadStack::new(
            1,
            vec![Frame::new("/lib/libx.so", 0x4f0, Trust::Cfi)],
        )],
    )];
    let t2 = StackTree::build(&cfi, &[], &TreeOptions::default());
    for merged in [t.clone().merged(&t2).unwrap(), t2.merged(&t).unwrap()] {
        let node = merged.node(merged.root().children()[0]).unwrap();
        assert_eq!(node.trust(), Some(Trust::Scan));
        assert_eq!(node.ranks().to_string(), "0-1");
    }
}

#[test]
fn classes_group_identical_stacks() {
    let tree = StackTree::build(&collective_mismatch(), &[], &TreeOptions::default());
    let classes = tree.classes();
    let sets: Vec<String> = classes.iter().map(|c| c.ranks.to_string()).collect();
    assert_eq!(sets, ["0,2", "1", "3"]);
    let names = |c: usize| -> Vec<Vec<String>> {
        classes[c]
            .stacks
            .iter()
            .map(|s| s.iter().map(|k| k.label()).collect())
            .collect()
    };
    assert_eq!(names(0), [["_start", "main", "MPI_Barrier"]]);
    assert_eq!(names(1).len(), 2);
    assert_eq!(names(2), [["_start", "main", "MPI_Reduce"]]);
}

#[test]
fn diff_says_which_ranks_moved() {
    let first = collective_mismatch();
    let mut second = collective_mismatch();
    second[3].threads[0] = thread(1003, &["MPI_Barrier", "main", "_start"]);
    second.remove(0);
    second.push(rank(7, vec![thread(1007, &["main", "_start"])]));
    let opts = TreeOptions::default();
    let d = StackTree::build(&first, &[], &opts).diff(&StackTree::build(&second, &[], &opts));
    assert_eq!(d.stayed.to_string(), "1-2");
    assert_eq!(d.moved.to_string(), "3");
    assert_eq!(d.vanished.to_string(), "0");
    assert_eq!(d.appeared.to_string(), "7");
    // Over three samples, only ranks whose stacks never changed count as not moving.
    let mut third = collective_mismatch();
    third[2].threads[0] = thread(1002, &["MPI_Allreduce", "main", "_start"]);
    let samples: Vec<StackTree> = [first, second, third]
        .iter()
        .map(|s| StackTree::build(s, &[], &opts))
        .collect();
    assert_eq!(mpir_types::stacks::unmoved(&samples).to_string(), "1");
    assert_eq!(
        mpir_types::stacks::unmoved(&samples[..1]).to_string(),
        "0-3"
    );
    assert!(mpir_types::stacks::unmoved(&[]).is_empty());
    // One rank's stacks, outermost first.
    let paths: Vec<Vec<String>> = samples[2]
        .stacks_of(1)
        .iter()
        .map(|p| p.iter().map(|k| k.label()).collect())
        .collect();
    assert_eq!(paths.len(), 2);
    assert_eq!(paths[0], ["_start", "main", "MPI_Barrier"]);
    assert!(samples[2].stacks_of(42).is_empty());
}

#[test]
fn limits_cut_and_say_so() {
    let deep: Vec<String> = (0..50).map(|i| format!("f{i}")).collect();
    let names: Vec<&str> = deep.iter().map(String::as_str).collect();
    let stacks = vec![
        rank(0, vec![thread(1000, &names)]),
        rank(1, vec![thread(1001, &["g", "f49"])]),
    ];
    let opts = TreeOptions::default().with_limits(TreeLimits::new(10, 1000));
    let t = StackTree::build(&stacks, &[], &opts);
    assert_eq!(t.cut().depth().to_string(), "0");
    assert_eq!(t.len(), 1 + 10 + 1);
    assert!(
        t.to_text()
            .contains("cut [0]: stacks deeper than 10 frames")
    );
    let opts = TreeOptions::default().with_limits(TreeLimits::new(100, 20));
    let t = StackTree::build(&stacks, &[], &opts);
    assert_eq!(t.len(), 20);
    assert!(t.cut().nodes().contains(0));
    assert!(!t.cut().is_empty());
    // A truncated stack is marked where it ends.
    let cut = vec![rank(
        5,
        vec![thread(1005, &["f", "g"]).with_truncation(Truncation::UnreadableStack)],
    )];
    let t = StackTree::build(&cut, &[], &TreeOptions::default());
    assert!(
        t.to_text()
            .contains("f [5] 1 rank, 1 thread; stack ends early here for [5]")
    );
    assert_eq!(
        t.truncations(),
        [(Truncation::UnreadableStack, RankSet::from_ranks([5]))]
    );
}

#[test]
fn rank_sets_stay_compact_at_scale() {
    let n = 100_000u64;
    let stacks: Vec<RankStacks> = (0..n)
        .map(|r| rank(r, vec![thread(1, &["MPI_Barrier", "main", "_start"])]))
        .collect();
    let t = StackTree::build(&stacks, &[], &TreeOptions::default());
    assert_eq!(t.len(), 4);
    for (_, node) in t.nodes() {
        assert_eq!(node.ranks().to_string(), "0-99999");
        assert_eq!(node.rank_count(), n);
    }
    assert_eq!(t.classes().len(), 1);
    // Alternating stacks: 50 000 pieces per set, still two classes, found without expanding.
    let alternating: Vec<RankStacks> = (0..n)
        .map(|r| {
            let leaf = if r % 2 == 0 { "MPI_Send" } else { "MPI_Recv" };
            rank(r, vec![thread(1, &[leaf, "main"])])
        })
        .collect();
    let t = StackTree::build(&alternating, &[], &TreeOptions::default());
    let classes = t.classes();
    assert_eq!(classes.len(), 2);
    assert_eq!(classes[0].ranks.count_within(n), n / 2);
    assert!(classes[0].ranks.contains(0) && classes[1].ranks.contains(1));
    assert_eq!(classes[1].stacks[0][1].label(), "MPI_Recv");
}

#[test]
fn decoder_refuses_broken_documents() {
    let tree = StackTree::build(&collective_mismatch(), &[], &TreeOptions::default());
    let limits = DecodeLimits::default();
    assert_eq!(
        StackTree::from_document(&tree.to_document(), &limits).as_ref(),
        Ok(&tree)
    );
    let refused = |edit: &dyn Fn(&mut mpir_types::stacks::TreeDocument)| {
        let mut doc = tree.to_document();
        edit(&mut doc);
        StackTree::from_document(&doc, &limits).unwrap_err()
    };
    assert!(matches!(
        refused(&|d| d.schema = "x".into()),
        TreeDecodeError::Schema { .. }
    ));
    assert!(matches!(
        refused(&|d| d.nodes[2].parent = Some(5)),
        TreeDecodeError::Node { index: 2, .. }
    ));
    assert!(matches!(
        refused(&|d| d.nodes[0].parent = Some(0)),
        TreeDecodeError::Node { index: 0, .. }
    ));
    assert!(matches!(
        refused(&|d| d.nodes[3].ranks = "0-".parse().unwrap()),
        TreeDecodeError::Document(_)
    ));
    assert!(matches!(
        refused(&|d| d.nodes[3].ranks = "0-9".parse().unwrap()),
        TreeDecodeError::Node { index: 3, .. }
    ));
    assert!(matches!(
        refused(&|d| {
            let dup = d.nodes[4].clone();
            d.nodes.push(dup);
        }),
        TreeDecodeError::Node { .. }
    ));
    assert!(matches!(
        refused(&|d| d.nodes[1].threads = 1),
        TreeDecodeError::Node { index: 1, .. }
    ));
    assert!(matches!(
        refused(&|d| d.limits = TreeLimits::new(1, 3)),
        TreeDecodeError::TooLarge { .. }
    ));
    let small = DecodeLimits::new(100, 100, 3, 100);
    assert!(matches!(
        StackTree::from_document(&tree.to_document(), &small),
        Err(TreeDecodeError::TooLarge {
            what: "string bytes",
            ..
        })
    ));
}

/// Stacks of ranks drawn from a small alphabet of frames, so that paths share prefixes.
fn arb_ranks(ranks: std::ops::Range<u64>) -> impl Strategy<Value = Vec<RankStacks>> {
    let names = prop::sample::select(vec![
        "main",
        "_start",
        "MPI_Wait",
        "MPI_Barrier",
        "solve",
        "progress_engine",
    ]);
    let stack = prop::collection::vec(names, 0..6);
    let threads = prop::collection::vec(stack, 1..3);
    let per_rank = prop::collection::vec(threads, ranks.end.saturating_sub(ranks.start) as usize);
    per_rank.prop_map(move |all| {
        all.into_iter()
            .zip(ranks.clone())
            .filter(|(_, r)| r % 5 != 4) // some ranks missing, so sets have gaps
            .map(|(threads, r)| {
                let ts = threads
                    .iter()
                    .enumerate()
                    .map(|(i, names)| thread(1000 + r as u32 + i as u32, names))
                    .collect();
                rank(r, ts)
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn merge_is_associative_and_commutative(
        a in arb_ranks(0..6), b in arb_ranks(6..12), c in arb_ranks(12..18), line in any::<bool>(),
    ) {
        let opts = TreeOptions::default().with_key(if line { MergeKey::FunctionAndLine } else { MergeKey::Function });
        let (ta, tb, tc) = (StackTree::build(&a, &[], &opts), StackTree::build(&b, &[], &opts), StackTree::build(&c, &[], &opts));
        let ab = ta.clone().merged(&tb).unwrap();
        prop_assert_eq!(&ab, &tb.clone().merged(&ta).unwrap());
        let ab_c = ab.merged(&tc).unwrap();
        let a_bc = ta.merged(&tb.merged(&tc).unwrap()).unwrap();
        prop_assert_eq!(&ab_c, &a_bc);
        let all: Vec<RankStacks> = a.iter().chain(&b).chain(&c).cloned().collect();
        prop_assert_eq!(&ab_c, &StackTree::build(&all, &[], &opts));
    }

    #[test]
    fn per_rank_trees_in_any_grouping_equal_the_whole(
        all in arb_ranks(0..24), cuts in prop::collection::vec(0usize..24, 0..5), view in any::<bool>(),
    ) {
        let opts = TreeOptions::default().with_view(if view { TreeView::Thread } else { TreeView::Process });
        let whole = StackTree::build(&all, &[Unreached::new(99, NotRead::new(ReasonCode::NotStopped, "did not stop in time"))], &opts);
        let mut bounds: Vec<usize> = cuts.into_iter().map(|c| c.min(all.len())).collect();
        bounds.extend([0, all.len()]);
        bounds.sort_unstable();
        // Each group merges its per-rank trees; the groups then merge, last first.
        let mut groups: Vec<StackTree> = bounds.windows(2).map(|w| {
            let mut g = StackTree::empty(opts.key, opts.view, opts.limits);
            for r in &all[w[0]..w[1]] {
                g.merge(&StackTree::build(std::slice::from_ref(r), &[], &opts)).unwrap();
            }
            g
        }).collect();
        groups.push(StackTree::build(&[], &[Unreached::new(99, NotRead::new(ReasonCode::NotStopped, "did not stop in time"))], &opts));
        let mut merged = StackTree::empty(opts.key, opts.view, opts.limits);
        for g in groups.iter().rev() {
            merged.merge(g).unwrap();
        }
        prop_assert_eq!(&merged, &whole);
        // Classes partition the ranks, and a tree does not move against itself.
        let n: u64 = whole.classes().iter().map(|c| c.ranks.count_within(u64::MAX)).sum();
        prop_assert_eq!(n, whole.root().rank_count());
        prop_assert!(whole.diff(&merged).moved.is_empty());
    }
}

#[cfg(feature = "serde")]
mod json {
    use super::*;

    #[test]
    fn round_trips_through_json() {
        let opts = TreeOptions::default().with_key(MergeKey::FunctionAndLine);
        let mut stacks = collective_mismatch();
        stacks[0].threads[0] =
            thread(1000, &["f", "main"]).with_truncation(Truncation::Other("odd".into()));
        let tree = StackTree::build(
            &stacks,
            &[Unreached::new(
                9,
                NotRead::new(ReasonCode::ReadFailed, "gone"),
            )],
            &opts,
        );
        let json = serde_json::to_string(&tree.to_document()).unwrap();
        assert!(json.contains("\"schema\":\"mpir.stacks/2\""), "{json}");
        assert!(
            json.contains(r#""truncations":[{"reason":{"other":"odd"},"ranks":"0"}]"#),
            "{json}"
        );
        assert!(
            json.contains(
                r#""unreached":[{"rank":9,"reason":{"code":"read_failed","text":"gone"}}]"#
            ),
            "{json}"
        );
        // Empty rank sets are "" (RankSet's own form refuses them).
        assert!(json.contains(r#""truncated":"""#), "{json}");
        let doc: mpir_types::stacks::TreeDocument = serde_json::from_str(&json).unwrap();
        assert_eq!(
            StackTree::from_document(&doc, &DecodeLimits::default()),
            Ok(tree)
        );
        let rs: Vec<RankStacks> =
            serde_json::from_str(&serde_json::to_string(&stacks).unwrap()).unwrap();
        assert_eq!(rs, stacks);
    }

    fn decode(text: &str) {
        if let Ok(doc) = serde_json::from_str::<mpir_types::stacks::TreeDocument>(text) {
            let _ = StackTree::from_document(&doc, &DecodeLimits::new(64, 16, 64, 256));
        }
    }

    #[test]
    fn deep_nesting_is_refused() {
        let deep = "[".repeat(100_000);
        assert!(serde_json::from_str::<mpir_types::stacks::TreeDocument>(&deep).is_err());
        decode(&deep);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn hostile_json_never_panics(
            bytes in prop::collection::vec(any::<u8>(), 0..512),
            flips in prop::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in any::<usize>(),
        ) {
            decode(&String::from_utf8_lossy(&bytes));
            let tree = StackTree::build(&collective_mismatch(), &[], &TreeOptions::default());
            let mut json = serde_json::to_string(&tree.to_document()).unwrap().into_bytes();
            for (i, b) in flips {
                let n = json.len();
                json[i % n] = b" 0123456789,[]{}\":-nulltruefalse"[usize::from(b) % 32];
            }
            json.truncate(cut % (json.len() + 1) + json.len() / 2);
            decode(&String::from_utf8_lossy(&json));
        }
    }
}

/// A rank's stacks computed from the input alone: the distinct paths, outermost first.
fn naive_paths(r: &RankStacks) -> std::collections::BTreeSet<Vec<String>> {
    r.threads
        .iter()
        .map(|t| t.frames.iter().rev().map(|f| f.function_label()).collect())
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]

    /// Classes and diffs against a plain computation over the input stacks.
    #[test]
    fn classes_and_diff_agree_with_the_input(a in arb_ranks(0..16), b in arb_ranks(0..16)) {
        use std::collections::BTreeMap;
        let opts = TreeOptions::default().with_helpers(HelperFolding::Off);
        let ta = StackTree::build(&a, &[], &opts);
        let mut expected: BTreeMap<std::collections::BTreeSet<Vec<String>>, Vec<u64>> = BTreeMap::new();
        for r in &a {
            expected.entry(naive_paths(r)).or_default().push(r.rank);
        }
        let mut got: BTreeMap<std::collections::BTreeSet<Vec<String>>, Vec<u64>> = BTreeMap::new();
        for c in ta.classes() {
            let paths = c.stacks.iter().map(|s| s.iter().map(|k| k.label()).collect()).collect();
            prop_assert!(got.insert(paths, c.ranks.iter_within(16).collect()).is_none());
        }
        prop_assert_eq!(got, expected);

        let tb = StackTree::build(&b, &[], &opts);
        let d = ta.diff(&tb);
        let (mut stayed, mut moved) = (Vec::new(), Vec::new());
        for ra in &a {
            if let Some(rb) = b.iter().find(|rb| rb.rank == ra.rank) {
                if naive_paths(ra) == naive_paths(rb) { stayed.push(ra.rank) } else { moved.push(ra.rank) }
            }
        }
        prop_assert_eq!(d.stayed.iter_within(16).collect::<Vec<_>>(), stayed);
        prop_assert_eq!(d.moved.iter_within(16).collect::<Vec<_>>(), moved);
    }
}
