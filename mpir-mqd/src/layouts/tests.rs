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
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("layouts/openmpi");
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
