//! `mpir` on a starter without MPIR symbols (issue 19): the PyPI MPICH 5.0.2 wheel's stripped
//! `mpiexec.hydra` (`MPIR_MPICH5_PREFIX`, made by `scripts/ci-mpich5.sh`). `attach` reports
//! the discovered table (the `mpir.job/1` document's `discovered` object, validated against
//! docs/schema), `stacks` works on its ranks through the same acquisition, `launch` says in
//! one line that it cannot, and everything is left running as found.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::mpir;
use mpir_target::testkit::{MPICH5_WHEEL, Wheel, assert_untouched, scratch, stop_launcher};

#[test]
fn attach_and_stacks_on_the_mpich5_wheels_stripped_hydra() {
    let Some(wheel) = Wheel::find(&MPICH5_WHEEL) else {
        return;
    };
    let prefix = &wheel.prefix;
    let dir = scratch("stripped-cli");
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../mpir-acquire/tests/fixtures/mpi_ranks.c");
    let Some(exe) = wheel.program(&src, &dir, "mpi_ranks") else {
        return;
    };
    let mut job = Command::new(prefix.join("bin/mpiexec.hydra"))
        .args(["-n", "4"])
        .arg(&exe)
        .arg("30")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(job.stdout.take().unwrap());
    let mut printed = Vec::new();
    let mut line = String::new();
    while printed.len() < 4 {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the job ended early");
        if let ["rank", r, "pid", p] = line.split_whitespace().collect::<Vec<_>>()[..] {
            printed.push((r.parse::<u64>().unwrap(), p.parse::<i64>().unwrap()));
        }
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
    let d = &doc["discovered"];
    assert_eq!(d["entries"], 4, "{doc:#}");
    assert!(d["table_pointer"].as_str().unwrap().starts_with("0x"));
    assert_eq!(d["size_offset"], -4, "MPICH 5.0.2's layout: {doc:#}");
    let ranks: Vec<(u64, i64)> = doc["ranks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["rank"].as_u64().unwrap(), r["pid"].as_i64().unwrap()))
        .collect();
    assert_eq!(ranks, printed, "every pid is its rank's own getpid()");
    // The schema holds the object to its shape: hex-string addresses, no unknown field.
    let rejects = |edit: &dyn Fn(&mut serde_json::Value)| {
        let mut bad = doc.clone();
        edit(&mut bad);
        std::panic::catch_unwind(|| common::validate(&bad)).is_err()
    };
    assert!(rejects(
        &|d| d["discovered"]["table_pointer"] = 4_937_432.into()
    ));
    assert!(rejects(&|d| d["discovered"]["guess"] = true.into()));
    assert!(rejects(&|d| d["discovered"]["entries"] = 0.into()));
    let notes = doc["notes"].to_string();
    assert!(notes.contains("no MPIR symbols"), "{notes}");

    // The text form says it too.
    let o = mpir().args(["attach", &starter]).output().unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("discovered"), "{text}");

    // Stacks of every rank, through the same acquisition (ranks held, then let go).
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
    assert!(stacks.to_string().contains("main"), "{stacks:#}");

    assert_untouched(job.id());
    for (_, pid) in &printed {
        assert_untouched(*pid as u32);
    }
    stop_launcher(&mut job);
}
