//! Symbols and types from a real debuginfod server (elfutils' `debuginfod`, started here on
//! localhost over a directory of debug files): the stock, stripped `mpiexec.hydra` of Debian's
//! MPICH 4.0.2 (its debug file rebuilt by `scripts/hydra-debug-symbols.sh`) and a stripped copy
//! of the debugger-enabled MPICH's `libmpi` (its split debug file made here with objcopy)
//! resolve exactly as they do from a local build-id directory, and as gdb resolves them; a
//! second search is answered by the cache with the server gone.
//!
//! Skipped without `debuginfod`, gdb, objcopy or the rebuilt files, except under
//! `MPIR_REQUIRE_PEERS=1` (CI).

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mpir_target::debuginfo::debuginfod::Artifact;
use mpir_target::debuginfo::{
    DebugOptions, DebugSource, DebuginfodOptions, ElfFile, ProcessImages,
};
use mpir_target::{Symbol, SymbolLookup, TypeLookup, TypeQuery};
use mpir_types::{LayoutSource, TypeLayout};
use support::*;

/// An elfutils `debuginfod` serving `dirs`, stopped when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Server {
    /// Starts the server and waits (bounded) until it serves the debug file of every build-id
    /// in `ids`.
    fn start(state: &Path, dirs: &[&Path], ids: &[&[u8]]) -> Result<Server, String> {
        let mut last = String::new();
        // A free port can be taken between our probe and the server's bind: a few tries.
        for attempt in 0..3 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(|e| e.to_string())?
                .port();
            let log = state.join(format!("debuginfod-{attempt}.log"));
            let mut cmd = Command::new("debuginfod");
            cmd.arg("-p")
                .arg(port.to_string())
                .arg("-d")
                .arg(state.join(format!("db-{attempt}.sqlite")))
                .arg("-F")
                .args(dirs)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?);
            let child = cmd
                .spawn()
                .map_err(|e| format!("cannot start debuginfod: {e}"))?;
            let mut server = Server { child, port };
            let ready = wait_for(60, || {
                matches!(server.child.try_wait(), Ok(Some(_)))
                    || ids.iter().all(|id| {
                        server.status(&format!("/buildid/{}/debuginfo", hex(id))) == Some(200)
                    })
            });
            if ready && matches!(server.child.try_wait(), Ok(None)) {
                return Ok(server);
            }
            last = std::fs::read_to_string(&log).unwrap_or_default();
        }
        Err(format!(
            "debuginfod never served the files; its log:\n{last}"
        ))
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The status of `GET path` (with a raw request: the client under test is not the probe).
    fn status(&self, path: &str) -> Option<u16> {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        .ok()?;
        let mut head = [0u8; 12];
        s.read_exact(&mut head).ok()?;
        std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

fn build_id(path: &Path) -> Vec<u8> {
    ElfFile::open(path)
        .unwrap()
        .build_id()
        .expect("a build-id")
        .to_vec()
}

/// Search options that look nowhere locally.
fn bare() -> DebugOptions {
    let mut o = DebugOptions::default().with_debuginfod(DebuginfodOptions::disabled());
    o.debug_dirs.clear();
    o
}

/// `bare` with debuginfod on `url` (none: the cache only) and the cache in `cache`.
fn via_debuginfod(url: Option<&str>, cache: &Path) -> DebugOptions {
    let mut d = DebuginfodOptions::enabled()
        .with_cache_dir(cache)
        .with_timeout(Duration::from_secs(10));
    if let Some(u) = url {
        d = d.with_url(u);
    } else {
        // Enabled, and the only server is one that is certainly not listening.
        d = d.with_url("http://127.0.0.1:1");
    }
    bare().with_debuginfod(d)
}

/// A layout with its source cleared (the two routes name different files).
fn sans_source(mut t: TypeLayout) -> TypeLayout {
    t.source = LayoutSource::Abi;
    t
}

/// The files of one test: the stripped library, its split debug file served by debuginfod
/// and placed in a local build-id directory too.
struct Files {
    _scratch: Scratch,
    served: PathBuf,
    local: PathBuf,
    cache: PathBuf,
    state: PathBuf,
    libmpi: PathBuf,
    hydra_debug_dir: PathBuf,
}

/// What the test needs, or why it cannot run.
fn prepare(name: &str) -> Result<Files, String> {
    for tool in ["debuginfod", "gdb", "objcopy", "mpiexec.hydra"] {
        if !have(tool) {
            return Err(format!("{tool} is not installed"));
        }
    }
    let hydra_debug_dir = std::env::var_os("MPIR_HYDRA_DEBUG_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/debug"));
    if !hydra_debug_dir.join(".build-id").is_dir() {
        return Err("no hydra debug directory (scripts/hydra-debug-symbols.sh)".into());
    }
    let mpich = std::env::var_os("MPIR_MPICH_DEBUGINFO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/mpir-rs/mpich-debuginfo"));
    let full = mpich.join("lib/libmpi.so.12.2.2");
    if !full.is_file() {
        return Err("no debugger-enabled MPICH (scripts/mpich-debuginfo.sh)".into());
    }
    let scratch = scratch(name);
    let (served, local, cache, state) = (
        scratch.join("served"),
        scratch.join("local"),
        scratch.join("cache"),
        scratch.join("state"),
    );
    for d in [&served, &local, &state] {
        std::fs::create_dir_all(d).map_err(|e| e.to_string())?;
    }
    // As a distribution ships it: the library stripped, its DWARF and symbols in a debug file.
    let debug = served.join("libmpi.so.12.2.2.debug");
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug))?;
    let libmpi = served.join("libmpi.so.12");
    run(Command::new("objcopy")
        .arg("--strip-unneeded")
        .arg(&full)
        .arg(&libmpi))?;
    let id = build_id(&libmpi);
    let in_tree = local
        .join(".build-id")
        .join(hex(&id[..1]))
        .join(format!("{}.debug", hex(&id[1..])));
    std::fs::create_dir_all(in_tree.parent().unwrap()).map_err(|e| e.to_string())?;
    std::fs::copy(&debug, &in_tree).map_err(|e| e.to_string())?;
    Ok(Files {
        _scratch: scratch,
        served,
        local,
        cache,
        state,
        libmpi,
        hydra_debug_dir,
    })
}

const HYDRA: &str = "/usr/bin/mpiexec.hydra";

const HYDRA_SYMBOLS: &[&str] = &[
    "MPIR_Breakpoint",
    "MPIR_proctable",
    "MPIR_proctable_size",
    "MPIR_debug_state",
    "MPIR_being_debugged",
    "MPIR_i_am_starter",
    "MPIR_partial_attach_ok",
];

/// Global (in `.dynsym`) and local (only in the debug file's `.symtab`) symbols of libmpi.
const LIBMPI_SYMBOLS: &[&str] = &[
    "MPIR_All_communicators",
    "MPIR_debug_gate",
    "MPIR_dll_name",
    "MPIR_Sendq_head",
    "MPIR_Abort",
    "MPIR_Allgather",
];

fn symbols(images: &ProcessImages, names: &[&str]) -> Vec<Symbol> {
    names
        .iter()
        .map(|n| {
            images
                .symbol(n)
                .unwrap()
                .unwrap_or_else(|| panic!("{n} not found"))
        })
        .collect()
}

/// The same symbol at the same address, size and kind (the file it was found in differs).
fn assert_same_symbols(what: &str, a: &[Symbol], b: &[Symbol]) {
    for (x, y) in a.iter().zip(b) {
        assert_eq!(
            (&x.name, x.address, x.size, x.kind),
            (&y.name, y.address, y.size, y.kind),
            "{what}"
        );
    }
}

#[test]
fn stripped_hydra_and_libmpi_resolve_from_a_real_debuginfod_as_from_build_id_dirs() {
    let files = match prepare("dbgd-real") {
        Ok(f) => f,
        Err(why) => return skip(&why),
    };
    let hydra = PathBuf::from(HYDRA);
    let (hydra_id, libmpi_id) = (build_id(&hydra), build_id(&files.libmpi));
    let server = Server::start(
        &files.state,
        &[&files.hydra_debug_dir, &files.served],
        &[&hydra_id, &libmpi_id],
    )
    .unwrap();
    let url = server.url();

    // hydra: the debuginfod route against the local build-id directory, and against gdb.
    let local = ProcessImages::from_files(
        &[(hydra.clone(), 0)],
        bare().with_debug_dir(&files.hydra_debug_dir),
    )
    .unwrap();
    let t = Instant::now();
    let remote = ProcessImages::from_files(
        &[(hydra.clone(), 0)],
        via_debuginfod(Some(&url), &files.cache),
    )
    .unwrap();
    eprintln!("hydra's debug file fetched in {:?}", t.elapsed());
    let (path, how) = remote.images()[0].debug_file().expect("a debug file");
    assert_eq!(
        how,
        &DebugSource::Debuginfod {
            path: files.cache.join(hex(&hydra_id)).join("debuginfo"),
            server: Some(url.clone()),
        }
    );
    assert_eq!(
        std::fs::read(path).unwrap(),
        std::fs::read(local.images()[0].debug_file().unwrap().0).unwrap(),
        "the served file is the local one"
    );
    let (ours, theirs) = (
        symbols(&remote, HYDRA_SYMBOLS),
        symbols(&local, HYDRA_SYMBOLS),
    );
    assert_same_symbols("hydra", &ours, &theirs);
    let setup = format!(
        "set debug-file-directory {}",
        files.hydra_debug_dir.display()
    );
    let gdb = gdb_addresses(&[&setup], &[HYDRA], HYDRA_SYMBOLS).unwrap();
    for s in &ours {
        assert_eq!(
            Some(&s.address),
            gdb.get(&s.name),
            "{}: ours vs gdb",
            s.name
        );
    }
    let q = TypeQuery::PointeeOfVariable("MPIR_proctable");
    let ty = remote.type_layout(q).unwrap().expect("MPIR_PROCDESC");
    assert!(
        matches!(&ty.source, LayoutSource::DebugInfo { file: Some(f) } if Path::new(f) == path),
        "{:?}",
        ty.source
    );
    assert_eq!(
        sans_source(ty.clone()),
        sans_source(local.type_layout(q).unwrap().unwrap())
    );
    let gdb = gdb_ptype_with(&setup, &hydra, &["*MPIR_proctable"]);
    assert_matches_gdb("hydra MPIR_PROCDESC", &ty, &gdb[0]);

    // The stripped libmpi: symbols only its debug file has, and its types.
    let lib_local = ProcessImages::from_files(
        &[(files.libmpi.clone(), 0)],
        bare().with_debug_dir(&files.local),
    )
    .unwrap();
    let lib_remote = ProcessImages::from_files(
        &[(files.libmpi.clone(), 0)],
        via_debuginfod(Some(&url), &files.cache),
    )
    .unwrap();
    assert!(
        matches!(lib_remote.images()[0].debug_file(), Some((_, DebugSource::Debuginfod { server: Some(s), .. })) if *s == url)
    );
    let (ours, theirs) = (
        symbols(&lib_remote, LIBMPI_SYMBOLS),
        symbols(&lib_local, LIBMPI_SYMBOLS),
    );
    assert_same_symbols("libmpi", &ours, &theirs);
    let abort = ours.iter().find(|s| s.name == "MPIR_Abort").unwrap();
    assert!(
        abort.found_in.as_deref().unwrap().ends_with("/debuginfo"),
        "a local symbol from the fetched file: {abort:?}"
    );
    let setup = format!("set debug-file-directory {}", files.local.display());
    let lib = files.libmpi.display().to_string();
    let gdb = gdb_addresses(&[&setup], &[&lib], LIBMPI_SYMBOLS).unwrap();
    for s in &ours {
        assert_eq!(
            Some(&s.address),
            gdb.get(&s.name),
            "{}: ours vs gdb",
            s.name
        );
    }
    let types = ["MPIR_Comm", "MPIR_Comm_list"];
    let gdb = gdb_ptype_with(
        &setup,
        &files.libmpi,
        &["struct MPIR_Comm", "struct MPIR_Comm_list"],
    );
    for (name, gdb) in types.iter().zip(&gdb) {
        let ty = lib_remote
            .type_layout(TypeQuery::Named(name))
            .unwrap()
            .unwrap_or_else(|| panic!("{name}"));
        assert_eq!(
            sans_source(ty.clone()),
            sans_source(
                lib_local
                    .type_layout(TypeQuery::Named(name))
                    .unwrap()
                    .unwrap()
            ),
            "{name}"
        );
        assert_matches_gdb(name, &ty, gdb);
    }

    // The image itself by build-id: the stripped library is served too.
    let client = DebuginfodOptions::enabled()
        .with_url(&url)
        .with_cache_dir(&files.cache)
        .client()
        .unwrap();
    let exe = client.fetch(&libmpi_id, Artifact::Executable).unwrap();
    assert_eq!(exe.server.as_deref(), Some(url.as_str()));
    assert_eq!(
        std::fs::read(&exe.path).unwrap(),
        std::fs::read(&files.libmpi).unwrap()
    );

    // The server gone: a new search finds both files in the cache.
    drop(server);
    for (file, id) in [(&hydra, &hydra_id), (&files.libmpi, &libmpi_id)] {
        let cached =
            ProcessImages::from_files(&[(file.clone(), 0)], via_debuginfod(None, &files.cache))
                .unwrap();
        assert_eq!(
            cached.images()[0].debug_file().map(|(_, s)| s.clone()),
            Some(DebugSource::Debuginfod {
                path: files.cache.join(hex(id)).join("debuginfo"),
                server: None,
            })
        );
        assert!(cached.symbol("MPIR_debug_gate").is_ok());
    }
}

#[test]
fn a_live_stripped_hydra_resolves_through_debuginfod_as_gdb_does() {
    let files = match prepare("dbgd-live") {
        Ok(f) => f,
        Err(why) => return skip(&why),
    };
    let hydra_id = build_id(Path::new(HYDRA));
    let server = Server::start(&files.state, &[&files.hydra_debug_dir], &[&hydra_id]).unwrap();
    let job = Job::spawn(Command::new(HYDRA).args(["-n", "1", "sleep", "60"])).unwrap();
    assert!(wait_for(20, || {
        std::fs::read_to_string(format!("/proc/{}/maps", job.pid()))
            .is_ok_and(|m| m.contains("mpiexec.hydra"))
    }));
    let live = ProcessImages::for_pid(job.pid(), via_debuginfod(Some(&server.url()), &files.cache))
        .unwrap();
    let local =
        ProcessImages::for_pid(job.pid(), bare().with_debug_dir(&files.hydra_debug_dir)).unwrap();
    let (ours, theirs) = (
        symbols(&live, HYDRA_SYMBOLS),
        symbols(&local, HYDRA_SYMBOLS),
    );
    assert_same_symbols("live hydra", &ours, &theirs);
    let setup = format!(
        "set debug-file-directory {}",
        files.hydra_debug_dir.display()
    );
    let pid = job.pid().to_string();
    let gdb = gdb_addresses(&[&setup], &["-p", &pid], HYDRA_SYMBOLS).unwrap();
    for s in &ours {
        assert_eq!(
            Some(&s.address),
            gdb.get(&s.name),
            "{}: ours vs gdb",
            s.name
        );
        assert!(
            s.found_in.as_deref().unwrap().ends_with("/debuginfo"),
            "{s:?}"
        );
    }
}

fn gdb_ptype_with(setup: &str, file: &Path, types: &[&str]) -> Vec<GdbLayout> {
    let mut cmd = Command::new("gdb");
    cmd.args(["-nx", "-batch", "-iex", setup]);
    for t in types {
        cmd.args(["-ex", &format!("ptype/o {t}")]);
    }
    let text = run(cmd.arg(file)).unwrap();
    parse_ptype(&text, types.len()).unwrap()
}
