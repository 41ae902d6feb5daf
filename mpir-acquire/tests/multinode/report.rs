//! What the ranks printed and what the tool inside node1 reports: the "rank R pid P on HOST"
//! lines, the tool's "MN …" report and its parsing, and running one of this binary's tests
//! inside node1.

use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_acquire::testkit::multinode::Cluster;
use mpir_acquire::{AcquireOptions, Job, RankControl};

/// Separates the fields of an inner test's argument.
pub(crate) const SEP: char = '\u{1f}';

pub(crate) fn options() -> AcquireOptions {
    AcquireOptions::default().with_timeout(Duration::from_secs(60))
}

/// A rank as it printed itself, and the lines of a job's output that name ranks: the ring
/// fixture's own.
pub(crate) use mpir_acquire::testkit::ring::{RingRank as Printed, printed};

/// What the tool inside node1 reported: one line per rank, "MN rank R host H pid P control
/// C local L", and "MN out LINE" for the job's output it read.
#[derive(Debug, Default)]
pub(crate) struct Report {
    pub(crate) ranks: Vec<(Printed, String, bool)>,
    pub(crate) attached: usize,
    pub(crate) job: Option<u64>,
    pub(crate) out: String,
}

/// One word for how a rank was handled.
pub(crate) fn control_word(c: &RankControl) -> &'static str {
    match c {
        RankControl::NotAttached => "NotAttached",
        RankControl::Remote => "Remote",
        RankControl::Attached { .. } => "Attached",
        RankControl::Refused { .. } => "Refused",
        RankControl::Failed { .. } => "Failed",
        _ => "Other",
    }
}

pub(crate) fn report(job: &Job) {
    for r in job.ranks() {
        println!(
            "MN rank {} host {} pid {} control {} local {}",
            r.rank,
            r.host.unwrap_or("?"),
            r.pid,
            control_word(job.control(r.rank)),
            job.locality(r.rank).is_local()
        );
    }
    println!("MN attached {}", job.attached_pids().len());
    if let Some(j) = job.starter.job_id {
        println!("MN job {j}");
    }
}

pub(crate) fn parse_report(stdout: &str) -> Report {
    let mut rep = Report::default();
    for l in stdout.lines() {
        // The harness may print "test NAME ... " before the first line (--nocapture).
        let Some((_, l)) = l.split_once("MN ") else {
            continue;
        };
        if let Some(o) = l.strip_prefix("out ") {
            rep.out.push_str(o);
            rep.out.push('\n');
            continue;
        }
        match l.split_whitespace().collect::<Vec<_>>()[..] {
            ["rank", r, "host", h, "pid", p, "control", c, "local", local] => rep.ranks.push((
                (r.parse().unwrap(), p.parse().unwrap(), h.to_string()),
                c.to_string(),
                local == "true",
            )),
            ["attached", n] => rep.attached = n.parse().unwrap(),
            ["job", j] => rep.job = j.parse().ok(),
            _ => panic!("bad report line {l:?}"),
        }
    }
    rep
}

/// Runs test `test` of this binary inside node1 with `arg`; its report (its own assertions
/// passed).
pub(crate) fn inside_node1(cluster: &Cluster, test: &str, arg: &str, envs: &Command) -> Report {
    let mut c = cluster.this_test_in(1, test, arg);
    for (k, v) in envs.get_envs() {
        if let Some(v) = v {
            c.env(k, v);
        }
    }
    let out = c
        .stdin(Stdio::null())
        .output()
        .expect("run the test in node1");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{test} inside node1 failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    parse_report(&stdout)
}
