//! Shared by the walker-DLL tests: building the C test DLL and a mock process holding the
//! "fake MPI" structure it walks.
#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::process::Command;

use mpir_mqd::{HelperOptions, Host, HostOptions, MqdError, QueueHost};
use mpir_target::MockTarget;
use mpir_target::mock::MockTargetBuilder;
use mpir_target::testkit;
use mpir_types::{CStructBuilder, DataModel, FieldLayout, LayoutSource, TypeLayout};

pub mod compare;

/// Where a test hosts a DLL.
#[derive(Debug, Clone)]
pub enum Hosting {
    /// In this process.
    InProcess,
    /// In a helper process.
    OutOfProcess(HelperOptions),
}

/// Opens a host for `dll` as `hosting` says.
///
/// # Safety
/// In process: the contract of [`Host::load`].
pub unsafe fn open_host(
    dll: impl AsRef<std::path::Path>,
    hosting: Hosting,
    options: HostOptions,
) -> Result<Box<dyn QueueHost>, MqdError> {
    match hosting {
        // SAFETY: this function's contract, passed on to the caller.
        Hosting::InProcess => unsafe { mpir_mqd::open_in_process(dll, options) },
        Hosting::OutOfProcess(helper) => mpir_mqd::open_out_of_process(dll, options, helper),
    }
}

pub const IMAGE: &str = "/fake/app";

/// Compiles the walker DLL with `defines` into a fresh directory; `None` (test skipped) when
/// no C compiler is available.
pub fn build_dll(name: &str, defines: &[&str]) -> Option<(testkit::Scratch, PathBuf)> {
    if !testkit::have("cc") {
        testkit::skip("no C compiler (cc) to build the test MQD DLL");
        return None;
    }
    let dir = testkit::scratch(&format!("mqd-{name}"));
    let out = dir.join("libwalker.so");
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/walker_dll.c");
    let mut cmd = Command::new("cc");
    cmd.args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror", "-o"])
        .arg(&out)
        .arg(src);
    for d in defines {
        cmd.arg(format!("-D{d}"));
    }
    testkit::run(&mut cmd).unwrap_or_else(|e| panic!("{e}"));
    Some((dir, out))
}

pub fn load(path: &PathBuf, options: HostOptions) -> Result<Host, MqdError> {
    // SAFETY: the walker DLL is our own fixture, built for this host just above.
    unsafe { Host::load(path, options) }
}

pub struct CommLayout {
    pub ty: TypeLayout,
    pub next: FieldLayout,
    pub id: FieldLayout,
    pub rank: FieldLayout,
    pub size: FieldLayout,
    pub name: FieldLayout,
    pub group: FieldLayout,
    pub queues: [FieldLayout; 3],
}

pub struct OpLayout {
    pub ty: TypeLayout,
    pub next: FieldLayout,
    pub peer: FieldLayout,
    pub tag: FieldLayout,
    pub count: FieldLayout,
    pub buf: FieldLayout,
    pub seq: FieldLayout,
    pub flags: FieldLayout,
}

pub fn member(ty: TypeLayout, name: &str, f: FieldLayout) -> TypeLayout {
    ty.with_member(name, f.offset, f.size)
}

pub fn comm_layout(m: &DataModel) -> CommLayout {
    let (p, int, long) = (m.pointer_size(), m.int_size(), m.long_size());
    let mut b = CStructBuilder::new();
    let next = b.scalar(p);
    let id = b.scalar(long);
    let rank = b.scalar(int);
    let size = b.scalar(int);
    let name = b.scalar(p);
    let group = b.scalar(p);
    let queues = [b.scalar(p), b.scalar(p), b.scalar(p)];
    let mut ty = TypeLayout::new("fake_comm", b.size(), LayoutSource::Given);
    for (n, f) in [
        ("next", next),
        ("id", id),
        ("rank", rank),
        ("size", size),
        ("name", name),
        ("group", group),
        ("sends", queues[0]),
        ("recvs", queues[1]),
        ("unexpected", queues[2]),
    ] {
        ty = member(ty, n, f);
    }
    CommLayout {
        ty,
        next,
        id,
        rank,
        size,
        name,
        group,
        queues,
    }
}

pub fn op_layout(m: &DataModel) -> OpLayout {
    let mut b = CStructBuilder::new();
    let next = b.scalar(m.pointer_size());
    let peer = b.scalar(m.int_size());
    let tag = b.scalar(m.int_size());
    let count = b.scalar(m.long_size());
    let buf = b.scalar(m.pointer_size());
    let seq = b.scalar(8);
    let flags = b.scalar(m.short_size());
    let mut ty = TypeLayout::new("fake_op", b.size(), LayoutSource::Given);
    for (n, f) in [
        ("next", next),
        ("peer", peer),
        ("tag", tag),
        ("count", count),
        ("buf", buf),
        ("seq", seq),
        ("flags", flags),
    ] {
        ty = member(ty, n, f);
    }
    OpLayout {
        ty,
        next,
        peer,
        tag,
        count,
        buf,
        seq,
        flags,
    }
}

/// One operation to place: (peer, tag, count, buf, seq, flags).
pub type FakeOp = (i64, i64, i64, u64, i64, i64);

/// What a queue pointer holds.
pub enum FakeQueue {
    List(Vec<FakeOp>),
    /// All ones: the walker reports `mqs_no_information`.
    NoInfo,
}

pub struct FakeComm {
    pub id: u64,
    pub rank: i64,
    pub name: &'static str,
    pub group: Vec<i64>,
    pub queues: [FakeQueue; 3],
}

pub fn place_ops(b: &mut MockTargetBuilder, l: &OpLayout, ops: &[FakeOp]) -> u64 {
    let mut next = 0;
    for &(peer, tag, count, buf, seq, flags) in ops.iter().rev() {
        let at = b.alloc(l.ty.byte_size);
        b.write_with(at, l.ty.byte_size, |v| {
            v.put_uint(l.next.offset, l.next.size, next, "next")?;
            v.put_field_int(l.peer, peer, "peer")?;
            v.put_field_int(l.tag, tag, "tag")?;
            v.put_field_int(l.count, count, "count")?;
            v.put_field_uint(l.buf, buf, "buf")?;
            v.put_field_int(l.seq, seq, "seq")?;
            v.put_field_int(l.flags, flags, "flags")
        });
        next = at;
    }
    next
}

/// A mock process of data model `m` holding `comms`; `with_head` / `with_types` remove parts
/// for the failure tests.
pub fn fake_target(
    m: DataModel,
    comms: &[FakeComm],
    with_head: bool,
    with_op_type: bool,
) -> MockTarget {
    fake_builder(m, comms, with_head, with_op_type).build()
}

/// What [`fake_target`] builds, before it is built (to add more).
pub fn fake_builder(
    m: DataModel,
    comms: &[FakeComm],
    with_head: bool,
    with_op_type: bool,
) -> MockTargetBuilder {
    let mut b = MockTarget::builder(m);
    let cl = comm_layout(&m);
    let ol = op_layout(&m);
    b.type_layout(cl.ty.clone());
    if with_op_type {
        b.type_layout(ol.ty.clone());
    }
    b.function("fake_mpi_init");
    let all_ones = m.max_address();
    let mut next = 0;
    for c in comms.iter().rev() {
        let name = b.cstring(c.name);
        let group = b.alloc(m.int_size() * c.group.len() as u64);
        let int = m.int_size();
        let members = c.group.clone();
        b.write_with(group, int * members.len() as u64, |v| {
            for (i, g) in members.iter().enumerate() {
                v.put_int(i as u64 * int, int, *g, "group")?;
            }
            Ok(())
        });
        let queues = c.queues.each_ref().map(|q| match q {
            FakeQueue::List(ops) => place_ops(&mut b, &ol, ops),
            FakeQueue::NoInfo => all_ones,
        });
        let at = b.alloc(cl.ty.byte_size);
        let size = c.group.len() as i64;
        b.write_with(at, cl.ty.byte_size, |v| {
            v.put_field_uint(cl.next, next, "next")?;
            v.put_field_uint(cl.id, c.id, "id")?;
            v.put_field_int(cl.rank, c.rank, "rank")?;
            v.put_field_int(cl.size, size, "size")?;
            v.put_field_uint(cl.name, name, "name")?;
            v.put_field_uint(cl.group, group, "group")?;
            for (f, q) in cl.queues.iter().zip(queues) {
                v.put_field_uint(*f, q, "queue")?;
            }
            Ok(())
        });
        next = at;
    }
    if with_head {
        b.pointer_variable("fake_comm_head", next);
    }
    b
}

/// One spawned process to place for the MPI-2 walker: (pid, image, host).
pub type FakeSpawned<'a> = (i64, &'a str, &'a str);

/// Adds what the MPI-2 walker reads besides the queues: the process's internal name
/// (`int fake_my_name`) and the processes it spawned (`struct fake_spawned { long pid;
/// char *image; char *host; }`, an array at `fake_new_procs` of `int fake_new_proc_count`
/// entries). An empty `spawned` places neither the array nor the type.
pub fn add_mpi2(b: &mut MockTargetBuilder, my_name: i64, spawned: &[FakeSpawned]) {
    b.int_variable("fake_my_name", my_name);
    if spawned.is_empty() {
        return;
    }
    let m = b.model();
    let mut sb = CStructBuilder::new();
    let pid = sb.scalar(m.long_size());
    let image = sb.scalar(m.pointer_size());
    let host = sb.scalar(m.pointer_size());
    let size = sb.size();
    let mut ty = TypeLayout::new("fake_spawned", size, LayoutSource::Given);
    for (n, f) in [("pid", pid), ("image", image), ("host", host)] {
        ty = member(ty, n, f);
    }
    b.type_layout(ty);
    let strings: Vec<(u64, u64)> = spawned
        .iter()
        .map(|(_, i, h)| (b.cstring(i), b.cstring(h)))
        .collect();
    let array = b.alloc(size * spawned.len() as u64);
    b.write_with(array, size * spawned.len() as u64, |v| {
        for (k, ((p, _, _), (i, h))) in spawned.iter().zip(&strings).enumerate() {
            let at = k as u64 * size;
            v.put_int(at + pid.offset, pid.size, *p, "pid")?;
            v.put_uint(at + image.offset, image.size, *i, "image")?;
            v.put_uint(at + host.offset, host.size, *h, "host")?;
        }
        Ok(())
    });
    b.pointer_variable("fake_new_procs", array);
    b.int_variable("fake_new_proc_count", spawned.len() as i64);
}

pub fn two_comms() -> Vec<FakeComm> {
    vec![
        FakeComm {
            id: 0x4400_0001,
            rank: 1,
            name: "comm_a",
            group: vec![10, 11, 12, 13],
            queues: [
                // seq needs more than 32 bits: proves 8-byte conversion on 32-bit targets.
                FakeQueue::List(vec![(2, 7, 10, 0x5000, 0x1_0000_0002, -3)]),
                FakeQueue::List(vec![(-1, -1, 3, 0x6000, 1, 0), (3, 42, 1000, 0x7000, 2, 1)]),
                FakeQueue::NoInfo,
            ],
        },
        FakeComm {
            id: 0x4400_0002,
            rank: 0,
            name: "dup of comm_a",
            group: vec![13, 12],
            queues: [
                FakeQueue::List(vec![]),
                FakeQueue::List(vec![(1, 5, 8, 0x8000, 3, 0)]),
                FakeQueue::List(vec![(0, 9, 4, 0x9000, 4, 2)]),
            ],
        },
    ]
}

/// A job started by a live test: its launcher and the ranks it reported, all killed when
/// dropped (only processes the test started).
pub struct Job {
    pub launcher: std::process::Child,
    pub pids: Vec<u32>,
}

impl Job {
    /// Starts `launcher`, then waits (up to 60 s) until each of the `ranks` ranks has written
    /// its pid to `DIR/RANK.pid` (after posting its operations), and reads the pids.
    pub fn start(launcher: &mut std::process::Command, dir: &std::path::Path, ranks: usize) -> Job {
        let mut job = Job {
            launcher: launcher.spawn().expect("start the MPI launcher"),
            pids: Vec::new(),
        };
        let pid_file = |r: usize| dir.join(format!("{r}.pid"));
        assert!(
            testkit::wait_for(60, || (0..ranks).all(|r| pid_file(r).is_file())),
            "ranks did not post their operations in time"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
        job.pids = (0..ranks)
            .map(|r| {
                std::fs::read_to_string(pid_file(r))
                    .expect("pid file")
                    .trim()
                    .parse()
                    .expect("pid")
            })
            .collect();
        job
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        for &pid in &self.pids {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        mpir_target::testkit::stop_launcher(&mut self.launcher);
    }
}

/// The communicator called `name`.
pub fn comm<'a>(
    comms: &'a [mpir_mqd::CommunicatorQueues],
    name: &str,
) -> &'a mpir_mqd::CommunicatorQueues {
    comms
        .iter()
        .find(|c| c.communicator.name == name)
        .unwrap_or_else(|| panic!("no communicator {name} in {comms:#?}"))
}

/// The Open MPI types sidecar named by `$MPIR_OMPI_TYPES_SIDECAR` (the repository's
/// `scripts/openmpi-types-sidecar.sh` builds it and prints its path; `.ci/run` exports it);
/// `None` when unset or not a file. The crate's tests do not run the script themselves: they
/// must work from the published crate, which has no `scripts/`.
pub fn sidecar() -> Option<std::path::PathBuf> {
    std::env::var_os("MPIR_OMPI_TYPES_SIDECAR")
        .map(std::path::PathBuf::from)
        .filter(|p| p.is_file())
}

/// The peer's sends of `fixtures/ompi_pending.c`, found in our unexpected queues: tag 44 (2 MiB) on the
/// world, tag 55 (1 MiB) on the dup.
pub fn check_ompi_unexpected(comms: &[mpir_mqd::CommunicatorQueues], rank: u64) {
    let peer = (rank + 1) % 2;
    for (name, tag, bytes) in [
        ("MPI_COMM_WORLD", 44, 8u64 << 18),
        ("mpir_dup", 55, 8 << 17),
    ] {
        let c = comm(comms, name);
        let found: Vec<_> = c
            .unexpected
            .operations()
            .iter()
            .filter(|o| o.tag == Some(tag))
            .collect();
        assert_eq!(
            found.len(),
            1,
            "rank {rank}: the peer's tag-{tag} send on {name}: {c:#?}"
        );
        let u = found[0];
        assert_eq!(u.peer_local, mpir_types::mqd::Peer::Rank(peer));
        assert_eq!(u.peer_global, Some(peer));
        assert_eq!(u.status, mpir_types::mqd::OpStatus::Pending);
        assert_eq!(u.length.bytes, Some(bytes), "the message's full size");
        assert!(u.system_buffer);
    }
    let world = comm(comms, "MPI_COMM_WORLD");
    assert_eq!(world.origin, mpir_mqd::CommOrigin::Predefined);
    assert_eq!(comm(comms, "mpir_dup").origin, mpir_mqd::CommOrigin::User);
    assert_eq!(world.group.as_deref(), Some(&[Some(0), Some(1)][..]));
}

/// A stock Open MPI rank (no debug information, no types sidecar) with the shipped layout set
/// proven on it (`mpir_mqd::layouts`): what `QueueReader` does for such a rank, for the tests
/// that drive a walker or a DLL host directly. Panics when no set is proven.
pub fn with_shipped<T: mpir_target::Target + 'static>(
    target: T,
    rank: Option<u64>,
) -> std::rc::Rc<dyn mpir_target::Target> {
    use mpir_mqd::layouts::{Expect, ShippedTypes, choose};
    assert!(
        mpir_mqd::layouts::needs_shipped(&target),
        "the rank has types of its own"
    );
    let chosen =
        choose(&target, Expect::rank(rank, None)).unwrap_or_else(|e| panic!("rank {rank:?}: {e}"));
    std::rc::Rc::new(ShippedTypes::new(std::rc::Rc::new(target), chosen.set))
}

/// `launcher` (`orterun`, `mpirun`) running `n` copies of `app DIR`, allowed as root, its
/// output discarded: the command a live Open MPI test starts with [`Job::start`].
pub fn open_mpi_launcher(
    launcher: &std::path::Path,
    n: usize,
    app: &std::path::Path,
    dir: &std::path::Path,
) -> std::process::Command {
    let mut c = std::process::Command::new(launcher);
    c.args([
        "--allow-run-as-root",
        "--oversubscribe",
        "-n",
        &n.to_string(),
    ])
    .arg(app)
    .arg(dir)
    .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
    .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    .env("OMPI_MPIR_DO_NOT_WARN", "1")
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    c
}
