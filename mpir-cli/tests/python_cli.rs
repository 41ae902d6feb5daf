//! Python ranks (issue 34): `mpir stacks` shows each thread's Python frames in place of the
//! interpreter's, live and from a core, on every CPython this machine has (3.9–3.13 under
//! pyenv, Debian's 3.11); and on mpi4py jobs over Debian's Open MPI and MPICH the merged tree
//! holds each rank's Python frames and `mpir deadlock` names the Python line that called MPI.
//!
//! Oracles: the scripts' own lines (tests/fixtures/python/*.py mark them `# LINE:<name>`) and
//! py-spy (`py-spy dump --json`, from `MPIR_MPI4PY_DIR`, scripts/ci-mpi4py.sh), which reads
//! the same interpreter memory independently. Skipped without them, failed under
//! `MPIR_REQUIRE_PEERS=1`.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::stock::{Stack, mpich_stock, open_mpi_stock};
use common::{Job, json_doc, mpir, ompi_sidecar, validate};
use mpir_target::testkit::{assert_untouched, have, scratch, skip};
use serde_json::Value;

/// A Python frame as compared: (function's last name, file, line).
type PyFrame = (String, String, u64);

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/python")
        .join(name)
}

/// The line marked `# LINE:<mark>` in fixture `script`.
fn line(script: &str, mark: &str) -> u64 {
    let text = std::fs::read_to_string(fixture(script)).unwrap();
    let needle = format!("# LINE:{mark}");
    let at = text
        .lines()
        .position(|l| l.trim_end().ends_with(&needle))
        .unwrap_or_else(|| panic!("{script} marks no {mark}"));
    at as u64 + 1
}

/// The last component of a qualified name (py-spy names 3.9/3.10 functions by `co_name`).
fn last(name: &str) -> String {
    name.rsplit('.').next().unwrap_or(name).to_string()
}

/// The directory scripts/ci-mpi4py.sh made (venvs and py-spy).
fn mpi4py_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("MPIR_MPI4PY_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/var/cache/mpir-rs/mpi4py".into());
    if dir.join("bin/py-spy").is_file() && dir.join("openmpi/bin/python").is_file() {
        Some(dir)
    } else {
        skip(&format!(
            "no mpi4py venvs and py-spy in {} (scripts/ci-mpi4py.sh, MPIR_MPI4PY_DIR)",
            dir.display()
        ));
        None
    }
}

/// Every thread's Python frames as py-spy reads them, outermost first, as a set.
fn pyspy(dir: &Path, pid: u32) -> BTreeSet<Vec<PyFrame>> {
    let out = Command::new(dir.join("bin/py-spy"))
        .args(["dump", "--json", "--pid", &pid.to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "py-spy dump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    doc.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let mut frames: Vec<PyFrame> = t["frames"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| {
                    (
                        last(f["name"].as_str().unwrap()),
                        f["filename"].as_str().unwrap().to_string(),
                        f["line"].as_u64().unwrap(),
                    )
                })
                .collect();
            frames.reverse();
            frames
        })
        .filter(|f| !f.is_empty())
        .collect()
}

/// The Python frames of `rank` in a `mpir.stacks/2` document: one chain per innermost Python
/// node of the rank (outermost first), as a set.
fn chains(doc: &Value, rank: u64) -> BTreeSet<Vec<PyFrame>> {
    let nodes = doc["nodes"].as_array().unwrap();
    let has = |n: &Value| {
        n["ranks"]
            .as_str()
            .unwrap()
            .parse::<mpir_types::ranks::RankSet>()
            .ok()
            .is_some_and(|s| s.contains(rank))
    };
    let python = |i: usize| nodes[i]["kind"] == "python" && has(&nodes[i]);
    let parent = |i: usize| nodes[i]["parent"].as_u64().map(|p| p as usize);
    // A Python node with a Python node of the rank below it (directly, or under native
    // frames with --native) is not the innermost.
    let mut inner = vec![false; nodes.len()];
    for j in (0..nodes.len()).filter(|&j| python(j)) {
        let mut at = parent(j);
        while let Some(i) = at {
            inner[i] = true;
            at = parent(i);
        }
    }
    let leaves: Vec<usize> = (0..nodes.len())
        .filter(|&i| python(i) && !inner[i])
        .collect();
    leaves
        .into_iter()
        .map(|leaf| {
            let mut chain = Vec::new();
            let mut at = Some(leaf);
            while let Some(i) = at {
                if nodes[i]["kind"] == "python" {
                    chain.push((
                        last(nodes[i]["function"].as_str().unwrap()),
                        nodes[i]["file"].as_str().unwrap().to_string(),
                        nodes[i]["line"].as_u64().unwrap(),
                    ));
                }
                at = parent(i);
            }
            chain.reverse();
            chain
        })
        .collect()
}

/// `mpir stacks ARGS --json`, validated.
fn stacks(args: &[&str]) -> Value {
    let out = mpir()
        .arg("stacks")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    let doc = json_doc(&out);
    validate(&doc);
    doc
}

/// The interpreters to try: pyenv's 3.9–3.13 and Debian's 3.11.
fn interpreters() -> Vec<PathBuf> {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/root/.pyenv".into());
    let mut found = Vec::new();
    for minor in 9..=13 {
        let versions = std::fs::read_dir(root.join("versions"))
            .map(|d| {
                d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| {
                        n.strip_prefix(&format!("3.{minor}."))
                            .is_some_and(|p| p.chars().all(|c| c.is_ascii_digit()))
                    })
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        match versions.first() {
            Some(v) => found.push(
                root.join("versions")
                    .join(v)
                    .join(format!("bin/python3.{minor}")),
            ),
            None => skip(&format!("no CPython 3.{minor} under {}", root.display())),
        }
    }
    if Path::new("/usr/bin/python3.11").is_file() {
        found.push("/usr/bin/python3.11".into());
    } else {
        skip("no Debian python3.11");
    }
    found
}

/// The chains the two threads of threads.py must show from its own line marks (the worker's
/// outer frames are threading's: only its last three are the script's).
fn expected_threads(script: &str) -> (Vec<PyFrame>, Vec<PyFrame>) {
    let f = |name: &str, mark: &str| {
        (
            name.to_string(),
            script.to_string(),
            line("threads.py", mark),
        )
    };
    let main = vec![
        f("<module>", "module"),
        f("main", "main"),
        f("outer", "outer"),
        f("hold", "hold"),
        f("inner", "inner"),
    ];
    let worker_tail = vec![f("outer", "outer"), f("hold", "hold"), f("inner", "inner")];
    (main, worker_tail)
}

#[test]
fn every_cpython_shows_its_python_frames_live_and_from_a_core() {
    let pyspy_dir = mpi4py_dir();
    let script = fixture("threads.py");
    let script_s = script.display().to_string();
    let (main_chain, worker_tail) = expected_threads(&script_s);
    for python in interpreters() {
        let dir = scratch("python-threads");
        let mut cmd = Command::new(&python);
        cmd.arg(&script)
            .arg(&*dir)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let job = Job::start(&mut cmd, &dir, 1, Duration::from_millis(200));
        let pid = job.pids[0];
        let name = python.display().to_string();
        let doc = stacks(&["--pid", &pid.to_string()]);
        let got = chains(&doc, 0);
        assert!(got.contains(&main_chain), "{name}: {got:#?}");
        assert!(
            got.iter()
                .any(|c| c.ends_with(&worker_tail) && c.len() > worker_tail.len()),
            "{name}: no worker thread chain ending {worker_tail:?} under threading's: {got:#?}"
        );
        assert_eq!(got.len(), 2, "{name}: {got:#?}");
        let versions = &doc["python"]["versions"];
        assert_eq!(versions.as_array().unwrap().len(), 1, "{name}: {versions}");
        assert!(
            doc["python"]["problems"].as_array().unwrap().is_empty(),
            "{name}: {}",
            doc["python"]
        );
        // py-spy reads the same frames.
        if let Some(d) = &pyspy_dir {
            assert_eq!(pyspy(d, pid), got, "{name}: py-spy against mpir");
        }
        // The interpreter's evaluation frames are gone by default, kept with --native; no
        // Python frame at all with --no-python.
        let evals = |doc: &Value| {
            doc["nodes"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|n| n["function"] == "_PyEval_EvalFrameDefault")
                .count()
        };
        assert_eq!(evals(&doc), 0, "{name}");
        let native = stacks(&["--pid", &pid.to_string(), "--native"]);
        assert!(evals(&native) > 0, "{name}: --native");
        assert_eq!(
            chains(&native, 0),
            got,
            "{name}: --native keeps the same Python frames"
        );
        let plain = stacks(&["--pid", &pid.to_string(), "--no-python"]);
        assert!(chains(&plain, 0).is_empty(), "{name}: --no-python");
        assert!(evals(&plain) > 0, "{name}: --no-python");
        // A core of the process: the same frames, from the file.
        if have("gdb") {
            let core = dir.join("python.core");
            let out = Command::new("gdb")
                .args(["-batch", "-nx", "-p", &pid.to_string(), "-ex"])
                .arg(format!("gcore {}", core.display()))
                .output()
                .unwrap();
            assert!(
                core.is_file(),
                "{name}: gcore: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let from_core = stacks(&["--core", &core.display().to_string()]);
            assert_eq!(chains(&from_core, 0), got, "{name}: from its core");
        } else {
            skip("no gdb to write a core");
        }
        assert_untouched(pid);
    }
}

#[test]
fn a_cpython_without_a_layout_keeps_its_native_frames_and_says_why() {
    // pyenv's 3.8: older than every layout; its evaluation frames stay, the reason is given.
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/root/.pyenv".into());
    let Some(python) = std::fs::read_dir(root.join("versions"))
        .ok()
        .and_then(|d| {
            d.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .find(|n| n.starts_with("3.8."))
        })
        .map(|v| root.join("versions").join(v).join("bin/python3.8"))
    else {
        skip("no CPython 3.8 under pyenv (a version without a layout)");
        return;
    };
    let dir = scratch("python-old");
    let mut cmd = Command::new(&python);
    cmd.arg(fixture("threads.py"))
        .arg(&*dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let job = Job::start(&mut cmd, &dir, 1, Duration::from_millis(200));
    let pid = job.pids[0].to_string();
    let doc = stacks(&["--pid", &pid]);
    assert!(chains(&doc, 0).is_empty());
    let problems = doc["python"]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{}", doc["python"]);
    assert_eq!(
        problems[0]["text"],
        "CPython older than 3.9 has no known layout (3.9–3.13 are read)"
    );
    assert_eq!(problems[0]["ranks"], "0");
    assert!(
        doc["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["function"] == "_PyEval_EvalFrameDefault"),
        "the native frames are kept"
    );
    let out = mpir().args(["stacks", "--pid", &pid]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Python frames not read: [0] CPython older than 3.9 has no known layout"),
        "{text}"
    );
    assert_untouched(job.pids[0]);
}

/// `n` ranks of `script` (run by `python`) under `stack`'s launcher, once each wrote its pid.
fn start(stack: &Stack, python: &Path, script: &str, dir: &Path, n: usize) -> Job {
    let mut launcher = Command::new(&stack.launcher[0]);
    launcher
        .args(&stack.launcher[1..])
        .args(["-n", &n.to_string()])
        .arg(python)
        .arg(fixture(script))
        .arg(dir)
        .env("OMPI_MPIR_DO_NOT_WARN", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    Job::start(&mut launcher, dir, n, Duration::from_millis(1500))
}

/// Every `call_site` object anywhere in `doc`.
fn call_sites(doc: &Value, out: &mut Vec<Value>) {
    match doc {
        Value::Object(m) => {
            for (k, v) in m {
                if (k == "call_site" || k == "at") && v.is_object() {
                    out.push(v.clone());
                }
                if k == "call_sites" {
                    out.extend(v.as_array().into_iter().flatten().cloned());
                }
                call_sites(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| call_sites(v, out)),
        _ => {}
    }
}

/// `mpir deadlock --json` on the job: (exit status, document).
fn deadlock(stack: &Stack, job: &Job, extra: &[String]) -> (i32, Value) {
    let out = mpir()
        .args([
            "deadlock",
            "--json",
            "--starter",
            &job.starter().to_string(),
        ])
        .args(&stack.extra)
        .args(extra)
        .output()
        .unwrap();
    let doc = json_doc(&out);
    validate(&doc);
    (out.status.code().unwrap_or(-1), doc)
}

/// Every call site of `doc` is a Python line of `script`, and `expect` are all among them.
fn sites_are_python_lines(name: &str, doc: &Value, script: &str, expect: &[(&str, u64)]) {
    let mut sites = Vec::new();
    call_sites(doc, &mut sites);
    assert!(!sites.is_empty(), "{name}: no call site in {doc:#}");
    let path = fixture(script).display().to_string();
    let mut seen = BTreeSet::new();
    for s in &sites {
        let function = s["function"].as_str().unwrap_or_default();
        assert!(
            !function.starts_with("__pyx_"),
            "{name}: a Cython frame as the call site: {s}"
        );
        assert_eq!(s["location"]["file"], path.as_str(), "{name}: {s}");
        seen.insert((last(function), s["location"]["line"].as_u64().unwrap()));
    }
    for (f, l) in expect {
        assert!(
            seen.contains(&(f.to_string(), *l)),
            "{name}: {f}:{l} not in {seen:?}"
        );
    }
}

/// The Python frames every rank of ring.py shows, outermost first, from its own line marks.
fn ring_chain() -> Vec<PyFrame> {
    let script = fixture("ring.py").display().to_string();
    let f = |name: &str, mark: &str| (name.to_string(), script.clone(), line("ring.py", mark));
    vec![
        f("<module>", "module"),
        f("main", "main"),
        f("step", "step"),
        f("wait_for_left", "recv"),
    ]
}

fn mpi_stacks() -> Vec<(Stack, &'static str)> {
    let mut out = Vec::new();
    if let Some(s) = open_mpi_stock() {
        out.push((s, "openmpi"));
    }
    if let Some(s) = mpich_stock() {
        out.push((s, "mpich"));
    }
    out
}

#[test]
fn an_mpi4py_ring_shows_each_ranks_python_frames_and_its_wait_names_the_python_line() {
    let Some(dir) = mpi4py_dir() else { return };
    let expected = ring_chain();
    for (stack, venv) in mpi_stacks() {
        let name = stack.name;
        let work = scratch("python-ring");
        let job = start(
            &stack,
            &dir.join(venv).join("bin/python"),
            "ring.py",
            &work,
            3,
        );
        let mut args = vec!["--starter".to_string(), job.starter().to_string()];
        args.extend(stack.extra.iter().cloned());
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let doc = stacks(&args);
        for (rank, &pid) in job.pids.iter().enumerate() {
            let got = chains(&doc, rank as u64);
            assert_eq!(
                got,
                BTreeSet::from([expected.clone()]),
                "{name} rank {rank}"
            );
            assert_eq!(
                pyspy(&dir, pid),
                got,
                "{name} rank {rank}: py-spy against mpir"
            );
        }
        // The hang: stock Open MPI's queues are read with the shipped layouts (the cycle
        // itself); the stock MPICH's only from the stacks (every rank blocked where ring.py
        // receives).
        let (code, d) = deadlock(&stack, &job, &[]);
        assert_eq!(code, 3, "{name}: {d:#}");
        let verdict = if venv == "openmpi" {
            "deadlock"
        } else {
            "blocked_in_mpi"
        };
        assert_eq!(d["verdict"], verdict, "{name}: {d:#}");
        sites_are_python_lines(
            name,
            &d,
            "ring.py",
            &[("wait_for_left", line("ring.py", "recv"))],
        );
        // Open MPI with a types sidecar: the same cycle, at the same lines.
        if venv == "openmpi"
            && let Some(sidecar) = ompi_sidecar()
        {
            let (code, d) = deadlock(
                &stack,
                &job,
                &["--types".into(), sidecar.display().to_string()],
            );
            assert_eq!(code, 3, "{name} with types: {d:#}");
            assert_eq!(d["verdict"], "deadlock", "{name} with types: {d:#}");
            sites_are_python_lines(
                name,
                &d,
                "ring.py",
                &[("wait_for_left", line("ring.py", "recv"))],
            );
        }
        assert_untouched(job.starter());
        for &p in &job.pids {
            assert_untouched(p);
        }
    }
}

#[test]
fn a_python_collective_mismatch_names_each_python_line() {
    let Some(dir) = mpi4py_dir() else { return };
    for (stack, venv) in mpi_stacks() {
        let name = stack.name;
        let work = scratch("python-collective");
        let job = start(
            &stack,
            &dir.join(venv).join("bin/python"),
            "collective.py",
            &work,
            3,
        );
        let (code, d) = deadlock(&stack, &job, &[]);
        assert_eq!(code, 3, "{name}: {d:#}");
        assert_eq!(d["verdict"], "collective_mismatch", "{name}: {d:#}");
        sites_are_python_lines(
            name,
            &d,
            "collective.py",
            &[
                ("sync", line("collective.py", "barrier")),
                ("reduce", line("collective.py", "allreduce")),
            ],
        );
        assert_untouched(job.starter());
    }
}

#[test]
fn python_ranks_on_other_nodes_show_their_python_frames_through_the_agents() {
    // An mpi4py ring on Debian's MPICH across node2 and node3 of the simulated cluster,
    // started by hydra inside node1; from node1, `mpir stacks` and `mpir deadlock` read every
    // rank through agents on their nodes (a second hydra job): each rank's Python frames
    // cross the wire with its stacks, and the waits name the Python line.
    let Some(cluster) = mpir_acquire::testkit::multinode::Cluster::from_env() else {
        return;
    };
    let Some(venvs) = mpi4py_dir() else { return };
    if !have("mpiexec.hydra") {
        skip("MPICH (mpiexec.hydra) is not installed");
        return;
    }
    let Some(debug) = common::stock::hydra_debug_dir() else {
        return;
    };
    let dir = scratch("python-multinode");
    let mut hydra = Command::new("mpiexec.hydra");
    hydra
        .args(["-launcher", "ssh", "-launcher-exec"])
        .arg(cluster.nsrsh())
        .args(["-hosts", "node2,node3", "-n", "4"])
        .arg(venvs.join("mpich/bin/python"))
        .arg(fixture("ring.py"))
        .arg(&*dir)
        // UCX over TCP only: its shared-memory transports cannot cross the nodes' PID
        // namespaces.
        .env("UCX_TLS", "tcp,self")
        .env("UCX_NET_DEVICES", "lo")
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .current_dir(&*dir);
    let mut wrapped = cluster.run_in(1, &hydra);
    wrapped
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut starter = cluster.spawn(1, wrapped);
    let started = mpir_target::testkit::wait_for(90, || {
        (0..4).all(|r| dir.join(format!("{r}.pid")).is_file())
    });
    assert!(started, "the ranks did not start");
    std::thread::sleep(Duration::from_millis(1500));
    let pid = starter.local_pid.to_string();
    let o = common::mn::mpir_in_node1(
        &cluster,
        &["stacks", "--json", "--debug-dir", &debug, "--starter", &pid],
    );
    let doc = json_doc(&o);
    validate(&doc);
    assert_eq!(doc["coverage"]["read"], 4, "{doc:#}");
    let expected = ring_chain();
    for rank in 0..4 {
        assert_eq!(
            chains(&doc, rank),
            BTreeSet::from([expected.clone()]),
            "rank {rank}"
        );
    }
    assert_eq!(
        doc["python"]["versions"][0]["ranks"], "0-3",
        "{}",
        doc["python"]
    );
    let o = common::mn::mpir_in_node1(
        &cluster,
        &[
            "deadlock",
            "--json",
            "--debug-dir",
            &debug,
            "--starter",
            &pid,
        ],
    );
    let d = json_doc(&o);
    validate(&d);
    assert_eq!(o.status.code(), Some(3), "{d:#}");
    sites_are_python_lines(
        "mpich across nodes",
        &d,
        "ring.py",
        &[("wait_for_left", line("ring.py", "recv"))],
    );
    for node in 1..=cluster.nodes() {
        assert!(
            mpir_target::testkit::wait_for(15, || !cluster
                .processes(node)
                .iter()
                .any(|p| p.comm == "mpir")),
            "an agent is left on node{node}"
        );
    }
    starter.stop();
}
