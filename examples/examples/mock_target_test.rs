//! Unit-test a tool without any MPI job: a `MockTarget` plays the starter.
//!
//! ```text
//! cargo test -p mpir-examples --example mock_target_test
//! ```
//!
//! The mock is built in any data model (here a 32-bit big-endian one, read from this 64-bit
//! little-endian host), with the process table the spec describes; the code under test sees it
//! through the same `Target` traits as a live process or a core file.

use mpir_target::Target;
use mpir_target::mock::{MockStarter, MockTarget};
use mpir_target::proctable::{ReadOptions, read_proctable};
use mpir_types::DataModel;

/// The code under test: which hosts does the job run on?
fn hosts_of(target: &dyn Target) -> Result<Vec<String>, Box<dyn std::error::Error>> {
    let table = read_proctable(target, &ReadOptions::default())?;
    let mut hosts: Vec<String> = table
        .resolved
        .ranks()
        .filter_map(|r| r.host.map(str::to_string))
        .collect();
    hosts.sort();
    hosts.dedup();
    Ok(hosts)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut builder = MockTarget::builder(DataModel::ILP32_BE);
    MockStarter::uniform(8, 2, "/opt/app", 1000).place(&mut builder);
    println!("{:?}", hosts_of(&builder.build())?);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_every_host_of_a_big_endian_32_bit_job() {
        let mut builder = MockTarget::builder(DataModel::ILP32_BE);
        MockStarter::uniform(16, 4, "/opt/app", 1000).place(&mut builder);
        let hosts = hosts_of(&builder.build()).unwrap();
        assert_eq!(hosts.len(), 4, "{hosts:?}");
    }

    #[test]
    fn a_starter_without_a_table_is_an_error_not_a_panic() {
        let target = MockTarget::builder(DataModel::LP64).build();
        assert!(hosts_of(&target).is_err());
    }
}
