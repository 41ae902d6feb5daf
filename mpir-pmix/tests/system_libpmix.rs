//! The system's libpmix (Debian's 4.2.2, from `libpmix-dev`'s runtime package) speaking to the
//! wheel's 5.0.11 server: the fallback of `Library::load` when the launcher's own is not used.
//! A test binary of its own: one libpmix per process.

mod common;

use common::{Job, prefix};
use mpir_pmix::{Library, LoadOptions, Server, Tool};
use std::time::Duration;

#[test]
fn the_systems_libpmix_reads_a_5_0_servers_table() {
    let Some(prefix) = prefix() else { return };
    let lib = match Library::load(&LoadOptions::default()) {
        Ok(l) => l,
        Err(e) => {
            mpir_target::testkit::skip(&format!("no system libpmix: {e}"));
            return;
        }
    };
    assert_eq!(lib.path(), std::path::Path::new("libpmix.so.2"));
    eprintln!("system libpmix: {}", lib.version());
    let job = Job::start(&prefix, 4, 60, &[], &[]);
    job.wait_for_server();
    let printed = job.wait_printed(30);
    let tool = Tool::connect(&lib, &Server::Pid(job.pid()), Duration::from_secs(20)).unwrap();
    let table = tool.proc_table(&job.nspace()).unwrap();
    let got: Vec<(u32, i32)> = table.iter().map(|p| (p.rank, p.pid)).collect();
    assert_eq!(got, printed);
}
