//! The Python bindings as a user gets them: builds the wheel with maturin (debug profile), checks
//! the committed type stub `python/mpir/_mpir.pyi` against one generated from the build,
//! installs the wheel into a scratch directory, runs the pytest suite (tests/*.py), then
//! `mypy.stubtest` (the stubs against the module) and `mypy --strict` (the package and the
//! tests).
//!
//! The tools come from the venv scripts/ci-python.sh makes (`$MPIR_PY_VENV`, default
//! /var/cache/mpir-rs/py-venv). Without it the test is skipped with the reason printed; under
//! `MPIR_REQUIRE_PEERS=1` (CI) it fails instead.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn skip(reason: &str) {
    if std::env::var_os("MPIR_REQUIRE_PEERS").is_some_and(|v| v == "1") {
        panic!("MPIR_REQUIRE_PEERS=1: {reason}");
    }
    eprintln!("SKIPPED: {reason}");
}

fn venv() -> Result<PathBuf, String> {
    let dir = std::env::var_os("MPIR_PY_VENV").map_or_else(
        || PathBuf::from("/var/cache/mpir-rs/py-venv"),
        PathBuf::from,
    );
    for tool in ["python", "maturin"] {
        if !dir.join("bin").join(tool).is_file() {
            return Err(format!(
                "no {tool} in the venv {} (make it with scripts/ci-python.sh)",
                dir.display()
            ));
        }
    }
    Ok(dir)
}

/// Runs `cmd`, printing what it printed when it fails.
fn run(what: &str, cmd: &mut Command) {
    let started = Instant::now();
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot run {cmd:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    // The closing lines (pytest's summary, mypy's verdict) in the test's output.
    let tail: Vec<&str> = text.lines().rev().take(3).collect();
    eprintln!(
        "{what}: ok in {:.1} s: {}",
        started.elapsed().as_secs_f64(),
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    );
}

/// A scratch directory removed when the test ends, passed or failed.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn python_suite() {
    let venv = match venv() {
        Ok(v) => v,
        Err(reason) => return skip(&reason),
    };
    let bin = |tool: &str| venv.join("bin").join(tool);
    let here = crate_dir();
    let scratch =
        Scratch(std::env::temp_dir().join(format!("mpir-py-test-{}", std::process::id())));
    let dir: &Path = &scratch.0;
    std::fs::create_dir_all(dir).unwrap();

    // The wheel (debug profile: the suite tests behaviour, not speed), into the workspace's
    // target directory like every other build.
    let wheels = dir.join("wheels");
    run(
        "maturin build",
        Command::new(bin("maturin"))
            .args(["build", "--quiet", "--profile", "dev", "--manifest-path"])
            .arg(here.join("Cargo.toml"))
            .arg("-o")
            .arg(&wheels),
    );
    let wheel = std::fs::read_dir(&wheels)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|x| x == "whl"))
        .expect("maturin built no wheel");

    // The committed stub is the one the build generates.
    let stubs = dir.join("stubs");
    run(
        "maturin generate-stubs",
        Command::new(bin("maturin"))
            .args([
                "generate-stubs",
                "--quiet",
                "--profile",
                "dev",
                "--manifest-path",
            ])
            .arg(here.join("Cargo.toml"))
            .arg("-o")
            .arg(&stubs),
    );
    let fresh = std::fs::read_to_string(stubs.join("mpir/_mpir.pyi")).unwrap();
    let committed = std::fs::read_to_string(here.join("python/mpir/_mpir.pyi")).unwrap();
    assert!(
        fresh == committed,
        "python/mpir/_mpir.pyi is not the stub the build generates: run mpir-py/stubs.sh and \
         commit it. Generated:\n{fresh}"
    );

    // Installed as pip installs it, into a directory of its own (the cached venv is not
    // changed).
    let site = dir.join("site");
    run(
        "pip install",
        Command::new(bin("python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--disable-pip-version-check",
            ])
            .arg("--target")
            .arg(&site)
            .arg(&wheel),
    );
    let python = |args: &[&str]| {
        let mut cmd = Command::new(bin("python"));
        cmd.args(args)
            .env("PYTHONPATH", &site)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            // Run from the scratch directory: `import mpir` is the installed wheel.
            .current_dir(dir);
        cmd
    };
    let tests = here.join("tests");
    run(
        "pytest",
        python(&["-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs"]).arg(&tests),
    );
    run(
        "mypy.stubtest",
        python(&["-m", "mypy.stubtest", "--mypy-config-file"])
            .arg(here.join("pyproject.toml"))
            .arg("mpir"),
    );
    // The package, and the tests as a user of its typed API.
    let test_files = std::fs::read_dir(&tests)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "py"));
    run(
        "mypy --strict",
        python(&["-m", "mypy", "--strict", "--cache-dir"])
            .arg(dir.join("mypy-cache"))
            .arg(site.join("mpir"))
            .args(test_files)
            .env("MYPYPATH", &tests),
    );
    other_nodes(&bin("python"), &site, &tests.join("multinode_tool.py"));
}

/// The module on the simulated multi-node cluster (`$MPIR_MULTINODE`, issue 31): a Python tool
/// inside node1 attaches to an Open MPI job whose ranks all run on node2 and node3, with the
/// agents' settings `mpir` takes (`agent_program`, `agent_launch`, `agent_timeout`), and gets
/// the same queues document as `mpir queues --json` there.
fn other_nodes(python: &Path, site: &Path, tool: &Path) {
    use mpir_acquire::testkit::multinode::Cluster;
    use mpir_acquire::testkit::ring::Ring;
    use std::process::Stdio;
    let Some(cluster) = Cluster::from_env() else {
        return;
    };
    // The test binary is in target/<profile>/deps; `mpir` one level up.
    let exe = std::env::current_exe().unwrap();
    let Some(mpir) = exe
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("mpir"))
        .filter(|p| p.is_file())
    else {
        return mpir_target::testkit::skip(
            "no mpir program built beside the tests (cargo build -p mpir-cli)",
        );
    };
    let dir = mpir_target::testkit::scratch("py-mn");
    let Some(mut ring) = Ring::start(&cluster, &dir, &[(2, 2), (3, 2)]) else {
        return;
    };
    let template = format!("{} {{host}} {{agent}}", cluster.nsrsh().display());
    let starter = ring.orterun.local_pid.to_string();
    let bounded = |program: &Path| {
        let mut c = Command::new("timeout");
        c.args(["-s", "KILL", "180"]).arg(program);
        c
    };
    let mut c = bounded(python);
    c.arg(tool)
        .arg(&starter)
        .arg(&mpir)
        .arg(&template)
        .env("PYTHONPATH", site)
        .env("PYTHONDONTWRITEBYTECODE", "1");
    let o = cluster.run_in(1, &c).stdin(Stdio::null()).output().unwrap();
    let said = |o: &std::process::Output| {
        format!(
            "exit {:?}\nstdout:\n{}\nstderr:\n{}",
            o.status.code(),
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };
    assert!(o.status.success(), "{}", said(&o));
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    let mut lines = out.lines();
    let queues: serde_json::Value = serde_json::from_str(lines.next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("queues JSON: {e}: {}", said(&o)));
    let stacks: serde_json::Value = serde_json::from_str(lines.next().unwrap_or_default())
        .unwrap_or_else(|e| panic!("stacks JSON: {e}: {}", said(&o)));
    let ranks = |d: &serde_json::Value| d["ranks"].as_array().cloned().unwrap_or_default();
    let read = ranks(&queues);
    assert_eq!(read.len(), ring.ranks.len(), "{queues:#}");
    for (r, (rank, pid, host)) in read.iter().zip(&ring.ranks) {
        assert_eq!(r["rank"], *rank, "{r}");
        assert_eq!(r["pid"], *pid, "{r}");
        assert!(r["error"].is_null(), "rank {rank} on {host}: {r}");
        assert!(r.to_string().contains("\"tag\":42"), "rank {rank}: {r}");
    }
    assert_eq!(
        stacks["unreached"].as_array().map_or(0, Vec::len),
        0,
        "{stacks:#}"
    );
    assert!(stacks.to_string().contains("MPI_Recv"), "{stacks:#}");

    let mut c = bounded(&mpir);
    c.args([
        "queues",
        "--json",
        "--agent-launch",
        &template,
        "--starter",
        &starter,
    ]);
    let o = cluster.run_in(1, &c).stdin(Stdio::null()).output().unwrap();
    assert!(o.status.success(), "{}", said(&o));
    let by_mpir: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(ranks(&by_mpir), read, "the Python module and mpir disagree");
    ring.assert_untouched(&cluster);
}
