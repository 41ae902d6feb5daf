//! The documents of the crate `mpir-json`, as the C API and the Python bindings get them (not
//! through the tool): made from one session over the running demo job, each validated against
//! its schema in docs/schema and checked against what the demo's sources (mpir-demo/demo/rank.c)
//! build: 4 ranks, a receive cycle among ranks 0-2, rank 3 blocked by it.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_session::{Engine, ReaderOptions, Session, SessionOptions, StackOptions};
use mpir_target::testkit::assert_untouched;

#[test]
fn every_document_of_one_session_over_the_demo_job_matches_its_schema() {
    let starter = mpir_demo::starter().unwrap();
    let mut cmd = Command::new(starter);
    cmd.args(["-n", "4", "--lifetime", "60"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped());
    let options = SessionOptions::default()
        .with_timeout(Duration::from_secs(20))
        .with_reader_options(ReaderOptions::default().with_engine(Engine::Native));
    let mut session = Session::launch(cmd, options).unwrap();
    let mut child = session.take_child().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut ready = 0;
    while ready < 4 {
        let l = lines.next().expect("the demo ended early").unwrap();
        ready += usize::from(l.ends_with(" ready"));
    }
    let pids = session.job().unwrap().attached_pids();

    let job = mpir_json::job(&session).expect("a launched session has a job");
    common::validate(&job);
    assert_eq!(job["schema"], "mpir.job/1");
    let ranks = job["ranks"].as_array().unwrap();
    let listed: Vec<(u64, u32)> = ranks
        .iter()
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["pid"].as_u64().unwrap() as u32,
            )
        })
        .collect();
    let want: Vec<(u64, u32)> = (0..4).zip(pids.iter().copied()).collect();
    assert_eq!(listed, want);

    let queues = mpir_json::queues(&session.queues().unwrap(), false);
    common::validate(&queues);
    assert_eq!(queues["ranks"].as_array().unwrap().len(), 4);

    let read = session.deadlock(3, Duration::from_millis(50)).unwrap();
    let deadlock = mpir_json::deadlock(&read, 3, false);
    common::validate(&deadlock);
    assert_eq!(deadlock["verdict"], "deadlock");
    assert_eq!(deadlock["cycles"][0]["ranks"], serde_json::json!([0, 1, 2]));

    let interval = Duration::from_millis(20);
    let stacks = session
        .stacks(
            &StackOptions::default()
                .with_samples(2)
                .with_interval(interval),
        )
        .unwrap();
    let doc = mpir_json::stacks(&stacks, "starter", interval);
    common::validate(&doc);
    assert_eq!(doc["source"], "starter");
    assert_eq!(doc["samples"], 2);
    assert_eq!(doc["interval_ms"], 20);
    let functions: Vec<&str> = doc["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["function"].as_str())
        .collect();
    for f in ["main", "MPI_Recv", "MPI_Waitall"] {
        assert!(functions.contains(&f), "{f} not in {functions:?}");
    }

    drop(session);
    for p in pids {
        assert_untouched(p);
    }
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_session_of_pids_has_no_job_document() {
    let me = std::process::id();
    let session = Session::pids([me], SessionOptions::default()).unwrap();
    assert!(mpir_json::job(&session).is_none());
}
