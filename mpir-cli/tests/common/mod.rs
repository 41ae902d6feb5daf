//! What the tool's integration tests share: the `mpir` binary, the real stacks' locations, and
//! a guard for a running MPI job.
#![allow(dead_code, unreachable_pub)] // each test file uses part of it

pub mod mn;
pub mod stock;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use mpir_target::testkit::{Scratch, run, scratch, skip, wait_for};

/// The `mpir` binary under test.
pub fn mpir() -> Command {
    Command::new(env!("CARGO_BIN_EXE_mpir"))
}

/// Every kind of document the tool prints, by its `schema` value, and the file of
/// `docs/schema/` that describes it.
pub const SCHEMAS: [(&str, &str); 8] = [
    ("mpir.job/1", "job.v1.json"),
    ("mpir.queues/1", "queues.v1.json"),
    ("mpir.core/3", "core.v3.json"),
    ("mpir.deadlock/4", "deadlock.v4.json"),
    ("mpir.demo/4", "demo.v4.json"),
    ("mpir.stacks/2", "stacks.v2.json"),
    ("mpir.report/1", "report.v1.json"),
    ("mpir.watch-bundle/1", "watch-bundle.v1.json"),
];

/// The schemas of `docs/schema/`, compiled once (they refer to each other by file name).
fn compiled() -> &'static (
    boon::Schemas,
    std::collections::HashMap<&'static str, boon::SchemaIndex>,
) {
    static COMPILED: std::sync::OnceLock<(
        boon::Schemas,
        std::collections::HashMap<&'static str, boon::SchemaIndex>,
    )> = std::sync::OnceLock::new();
    COMPILED.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/schema");
        // A base that is never fetched: every file is given to the compiler up front.
        let url = |file: &str| format!("https://mpir-rs.invalid/schema/{file}");
        let mut compiler = boon::Compiler::new();
        compiler.set_default_draft(boon::Draft::V2020_12);
        for (_, file) in SCHEMAS {
            let text = std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("docs/schema/{file}: {e}"));
            let value: serde_json::Value =
                serde_json::from_str(&text).unwrap_or_else(|e| panic!("docs/schema/{file}: {e}"));
            compiler
                .add_resource(&url(file), value)
                .unwrap_or_else(|e| panic!("docs/schema/{file}: {e}"));
        }
        let mut schemas = boon::Schemas::new();
        let index = SCHEMAS
            .iter()
            .map(|&(kind, file)| {
                let i = compiler
                    .compile(&url(file), &mut schemas)
                    .unwrap_or_else(|e| panic!("docs/schema/{file}: {e:#}"));
                (kind, i)
            })
            .collect();
        (schemas, index)
    })
}

/// Checks `doc` against the schema its `schema` value names; panics with every violation
/// (and the document) when it does not validate, or names no known schema.
pub fn validate(doc: &serde_json::Value) {
    let (schemas, index) = compiled();
    let kind = doc["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("a document without a schema string: {doc}"));
    let i = index
        .get(kind)
        .unwrap_or_else(|| panic!("schema {kind:?} has no file in docs/schema"));
    if let Err(e) = schemas.validate(doc, *i) {
        panic!(
            "the {kind} document does not match its schema:\n{e:#}\ndocument:\n{}",
            serde_json::to_string_pretty(doc).unwrap()
        );
    }
}

/// The one way the tests read the tool's `--json` output: its stdout parsed as one JSON
/// document and validated against its schema ([`validate`]).
pub fn json_doc(out: &std::process::Output) -> serde_json::Value {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not one JSON document ({e}):\n{}\nstderr: {}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    validate(&doc);
    doc
}

/// The golden `mpir demo --json` document (`tests/golden/demo.json`, written by hand from the
/// demo's C sources: see `golden_demo.rs`).
pub fn golden_demo() -> serde_json::Value {
    serde_json::from_str(include_str!("../golden/demo.json")).unwrap()
}

/// Replaces the run-specific values of a document by placeholders, checking them first: pids,
/// this machine's host name and facts, the programs' directories, target addresses (hex; the
/// null address is kept) and communicator ids.
pub fn normalise(doc: &mut serde_json::Value) {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    normalise_in(doc, host.trim());
}

fn normalise_in(v: &mut serde_json::Value, host: &str) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map.iter_mut() {
                match (k.as_str(), &*x) {
                    ("pid", serde_json::Value::Number(n)) => {
                        assert!(n.as_u64().is_some_and(|p| p > 1), "pid {n}");
                        *x = serde_json::Value::from("<pid>");
                    }
                    // Stack facts: the main thread's id is the pid; a module and a source
                    // file by their base names (the build's directories differ); a pc's offset
                    // in its module is the compiler's.
                    ("tid", serde_json::Value::Number(n)) => {
                        assert!(n.as_u64().is_some_and(|p| p > 1), "tid {n}");
                        *x = serde_json::Value::from("<tid>");
                    }
                    ("offset", serde_json::Value::Number(_)) => {
                        *x = serde_json::Value::from("<offset>");
                    }
                    ("image" | "executable" | "module" | "file", serde_json::Value::String(s)) => {
                        let base = std::path::Path::new(s).file_name().unwrap();
                        *x = serde_json::Value::from(base.to_str().unwrap());
                    }
                    ("host", serde_json::Value::String(s)) if s == host => {
                        *x = serde_json::Value::from("<this host>")
                    }
                    ("this_node", serde_json::Value::Object(t)) => {
                        assert!(t["names"].as_array().unwrap().iter().any(|n| n == host));
                        *x = serde_json::Value::from("<this node>");
                    }
                    ("id" | "comm_unique_id", serde_json::Value::Number(_)) => {
                        *x = serde_json::Value::from("<comm>")
                    }
                    ("buffer", serde_json::Value::String(s)) => {
                        assert!(
                            s.strip_prefix("0x").is_some_and(|h| !h.is_empty()
                                && h.bytes()
                                    .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())),
                            "buffer {s}"
                        );
                        if s != "0x0" {
                            *x = serde_json::Value::from("<addr>");
                        }
                    }
                    _ => normalise_in(x, host),
                }
            }
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(|x| normalise_in(x, host)),
        _ => {}
    }
}

/// mpir-acquire's fake starter and rank (C fixtures), compiled into a scratch directory.
pub struct Fixtures {
    pub dir: Scratch,
    pub starter: PathBuf,
    pub rank: PathBuf,
}

/// Compiles the fake starter and rank into scratch directory `name`; `None` after a skip (no
/// C compiler).
pub fn fixtures(name: &str) -> Option<Fixtures> {
    let dir = scratch(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../mpir-acquire/tests/fixtures");
    let build = |file: &str, out: &str| -> Option<PathBuf> {
        let exe = dir.join(out);
        match run(Command::new("cc")
            .args(["-g", "-pthread"])
            .arg(src.join(file))
            .arg("-o")
            .arg(&exe))
        {
            Ok(_) => Some(exe),
            Err(e) => {
                skip(&e);
                None
            }
        }
    };
    let starter = build("starter.c", "starter")?;
    let rank = build("rank.c", "rank")?;
    Some(Fixtures { dir, starter, rank })
}

/// The Open MPI types sidecar: `$MPIR_OMPI_TYPES_SIDECAR`, else what the project script prints
/// (it builds and caches the object); `None` when neither gives a file.
pub fn ompi_sidecar() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("MPIR_OMPI_TYPES_SIDECAR") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/openmpi-types-sidecar.sh");
    let out = Command::new(script)
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.lines()
        .last()
        .map(PathBuf::from)
        .filter(|p| p.is_file())
}

/// The debugger-enabled MPICH (`$MPIR_MPICH_DEBUGINFO`, default
/// `/var/cache/mpir-rs/mpich-debuginfo`), whether or not it is there.
pub fn mpich_root() -> PathBuf {
    PathBuf::from(
        std::env::var("MPIR_MPICH_DEBUGINFO")
            .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into()),
    )
}

/// A running job whose ranks write `DIR/RANK.pid` when they reach the state under test;
/// everything is killed on drop.
pub struct Job {
    pub launcher: Child,
    pub pids: Vec<u32>,
}

impl Job {
    /// Starts `launcher` and waits (up to 60 s) for `ranks` pid files in `dir`, then `settle`
    /// more for the ranks to get where the files announce. Files an earlier job left in `dir`
    /// are removed first: read as this job's, they let the test go on while its ranks were
    /// still in `MPI_Init` (an Open MPI 5 ring read "not initialised yet") and named the
    /// earlier job's dead ranks as this one's.
    pub fn start(launcher: &mut Command, dir: &Path, ranks: usize, settle: Duration) -> Job {
        let file = |r: usize| dir.join(format!("{r}.pid"));
        for r in 0..ranks {
            match std::fs::remove_file(file(r)) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    panic!("remove {}: {e}", file(r).display())
                }
                _ => {}
            }
        }
        let mut job = Job {
            launcher: launcher.spawn().expect("start the launcher"),
            pids: Vec::new(),
        };
        assert!(
            wait_for(60, || (0..ranks).all(|r| file(r).is_file())),
            "the ranks did not write their pid files in time"
        );
        std::thread::sleep(settle);
        job.pids = (0..ranks)
            .map(|r| {
                std::fs::read_to_string(file(r))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap()
            })
            .collect();
        job
    }

    /// The launcher's pid (the starter).
    pub fn starter(&self) -> u32 {
        self.launcher.id()
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

/// The 1-based line of the first line containing `needle` after the first line containing
/// `anchor` in tests/fixtures/deadlock.c (what a call site's line must be: the fixture's own
/// source is the oracle).
pub fn fixture_line(anchor: &str, needle: &str) -> u64 {
    let src = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/deadlock.c"),
    )
    .unwrap();
    let lines: Vec<&str> = src.lines().collect();
    let from = lines.iter().position(|l| l.contains(anchor)).unwrap();
    let at = lines[from..]
        .iter()
        .position(|l| l.contains(needle))
        .unwrap();
    (from + at + 1) as u64
}

/// The Slurm job id of the jobs named `name` (`squeue`), once there is exactly one.
pub fn slurm_job_id(name: &str) -> u64 {
    let mut id = None;
    assert!(
        wait_for(20, || {
            let out = Command::new("squeue")
                .args(["-h", "-o", "%i", "-n", name])
                .output()
                .ok();
            let text = out.map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
            let ids: Vec<u64> = text
                .unwrap_or_default()
                .lines()
                .filter_map(|l| l.trim().parse().ok())
                .collect();
            id = (ids.len() == 1).then(|| ids[0]);
            id.is_some()
        }),
        "squeue never listed job {name}"
    );
    id.unwrap_or_default()
}
