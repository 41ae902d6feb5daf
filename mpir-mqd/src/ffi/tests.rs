//! Tests of the bindings: layouts against the ABI and the installed headers, handles,
//! callbacks without a host.

use super::*;
use mpir_types::DataModel;
use mpir_types::mqd::{CommunicatorLayout, PendingOperationLayout};
use std::mem::{offset_of, size_of};

#[test]
fn bindings_match_the_abi_layouts_computed_independently() {
    // The DLL fills `mqs_communicator` and `mqs_pending_operation` in buffers laid out by
    // mpir-types from the data model alone (`raw::HostLayouts`); its `long` must be the
    // `mqs_taddr_t` the DLL's taddr width is checked against, and the header's sizes hold
    // (LP64: 3 longs + char[64]; 4 ints and 8 longs + char[5][64]).
    let host = DataModel::host();
    assert_eq!(host.long_size(), size_of::<TAddr>() as u64);
    let c = CommunicatorLayout::abi(&host);
    let o = PendingOperationLayout::abi(&host);
    if host.long_size() == 8 {
        assert_eq!((c.size, c.name.offset), (88, 24));
        assert_eq!(
            (
                o.size,
                o.tag_wild.offset,
                o.buffer.offset,
                o.extra_text.offset
            ),
            (416, 24, 56, 96)
        );
    }
    assert_eq!(size_of::<TargetTypeSizes>(), 5 * size_of::<c_int>());
    // The tables are arrays of function pointers in the header's order.
    let fp = size_of::<usize>();
    assert_eq!(size_of::<BasicCallbacks>(), 10 * fp);
    assert_eq!(size_of::<ImageCallbacks>(), 6 * fp);
    assert_eq!(size_of::<ProcessCallbacks>(), 6 * fp);
    assert_eq!(offset_of!(ImageCallbacks, sizeof), 5 * fp);
    assert_eq!(offset_of!(ProcessCallbacks, target_to_host), 3 * fp);
}

#[test]
fn handles_are_fresh_aligned_and_round_trip() {
    let a = Handle::fresh();
    let b = Handle::fresh();
    assert_ne!(a, b);
    assert_eq!(a.0 % 16, 0);
    assert_eq!(Handle::from_ptr(a.as_ptr()), a);
}

#[test]
fn callbacks_without_an_active_host_return_errors_not_crashes() {
    let mut out: TAddr = 7;
    let rc = cb_find_symbol(Handle(0x10).as_ptr(), c"x".as_ptr().cast_mut(), &mut out);
    assert_eq!(rc, CB_NO_HOST);
    assert_eq!(out, 7, "nothing written");
    assert_eq!(cb_get_global_rank(Handle(0x10).as_ptr()), -1);
    assert!(cb_get_image_info(Handle(0x10).as_ptr()).is_null());
}

/// The real header as oracle: Open MPI's installed `msgq_interface.h` (libopenmpi-dev),
/// compiled by the C compiler, must give our bindings' sizes and offsets (the structs the DLL
/// fills: mpir-types' layouts). Our callback
/// tables add the MPI-2 fields after the header's MPI-1 end.
#[test]
fn bindings_match_the_installed_open_mpi_header() {
    use mpir_target::testkit;
    let inc = std::path::Path::new("/usr/lib/x86_64-linux-gnu/openmpi/include");
    let dbg = inc.join("openmpi/ompi/debuggers/msgq_interface.h");
    if !dbg.is_file() || !testkit::have("cc") {
        testkit::skip("needs libopenmpi-dev's msgq_interface.h and cc");
        return;
    }
    let dir = testkit::scratch("mqd-header-oracle");
    let src = dir.join("oracle.c");
    std::fs::write(
        &src,
        "#include <stddef.h>\n#include <stdio.h>\n#include \"msgq_interface.h\"\n\
         int main(void) { printf(\"%zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\", \
         sizeof(mqs_communicator), offsetof(mqs_communicator, name), \
         sizeof(mqs_pending_operation), offsetof(mqs_pending_operation, tag_wild), \
         offsetof(mqs_pending_operation, buffer), \
         offsetof(mqs_pending_operation, extra_text), \
         sizeof(mqs_basic_callbacks), sizeof(mqs_image_callbacks), \
         sizeof(mqs_process_callbacks), offsetof(mqs_target_type_sizes, pointer_size)); \
         return 0; }\n",
    )
    .expect("write oracle");
    let exe = dir.join("oracle");
    let mut cc = std::process::Command::new("cc");
    cc.arg("-I")
        .arg(dbg.parent().expect("dir"))
        .arg("-I")
        .arg(inc.join("openmpi"))
        .arg("-I")
        .arg(inc)
        .arg("-o")
        .arg(&exe)
        .arg(&src);
    testkit::run(&mut cc).unwrap_or_else(|e| panic!("{e}"));
    let out = testkit::run(&mut std::process::Command::new(&exe)).expect("run oracle");
    let got: Vec<usize> = out
        .split_whitespace()
        .map(|n| n.parse().expect("number"))
        .collect();
    // The interface's structs: mpir-types' ABI layouts, which the host decodes with.
    let host = DataModel::host();
    let c = CommunicatorLayout::abi(&host);
    let o = PendingOperationLayout::abi(&host);
    let ours = [
        c.size as usize,
        c.name.offset as usize,
        o.size as usize,
        o.tag_wild.offset as usize,
        o.buffer.offset as usize,
        o.extra_text.offset as usize,
        offset_of!(BasicCallbacks, put_job_info),
        size_of::<ImageCallbacks>(),
        offset_of!(ProcessCallbacks, get_process_job),
        offset_of!(TargetTypeSizes, pointer_size),
    ];
    assert_eq!(got, ours);
}

/// MPICH's `mpi_interface.h` from the debugger-enabled MPICH's source tree
/// (`scripts/mpich-debuginfo.sh`), if present.
fn mpich_interface_header() -> Option<std::path::PathBuf> {
    let prefix = std::env::var("MPIR_MPICH_DEBUGINFO")
        .unwrap_or_else(|_| "/var/cache/mpir-rs/mpich-debuginfo".into());
    let tree = std::path::PathBuf::from(format!("{prefix}.d"));
    let mut sources: Vec<_> = std::fs::read_dir(&tree)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("source-"))
        })
        .collect();
    sources.sort();
    sources
        .into_iter()
        .map(|s| s.join("src/mpi/debugger/mpi_interface.h"))
        .find(|h| h.is_file())
}

/// The MPI-2 half of the interface against a real header: MPICH's `mpi_interface.h` compiled
/// with `FOR_MPI2` (Open MPI's installed copy pins `FOR_MPI2` to 0) must give our bindings'
/// `mqs_process_location`, the grown callback tables, the job table, and version 3.
#[test]
fn mpi2_bindings_match_mpichs_header_built_for_mpi2() {
    use mpir_target::testkit;
    let Some(header) = mpich_interface_header() else {
        testkit::skip("needs MPICH's source tree (scripts/mpich-debuginfo.sh) for mpi_interface.h");
        return;
    };
    if !testkit::have("cc") {
        testkit::skip("needs cc");
        return;
    }
    let dir = testkit::scratch("mqd-mpi2-header-oracle");
    let src = dir.join("oracle.c");
    std::fs::write(
        &src,
        "#include <stddef.h>\n#include <stdio.h>\n#include \"mpi_interface.h\"\n\
         int main(void) { printf(\"%zu %zu %zu %zu %zu %zu %zu %zu %zu %d\", \
         sizeof(mqs_process_location), offsetof(mqs_process_location, image_name), \
         offsetof(mqs_process_location, host_name), \
         sizeof(mqs_basic_callbacks), offsetof(mqs_basic_callbacks, mqs_put_job_info_fp), \
         sizeof(mqs_process_callbacks), \
         offsetof(mqs_process_callbacks, mqs_get_process_job_fp), \
         offsetof(mqs_process_callbacks, mqs_get_process_identity_fp), \
         sizeof(mqs_job_callbacks), (int)MQS_INTERFACE_COMPATIBILITY); return 0; }\n",
    )
    .expect("write oracle");
    let exe = dir.join("oracle");
    let mut cc = std::process::Command::new("cc");
    cc.arg("-DFOR_MPI2")
        .arg("-I")
        .arg(header.parent().expect("dir"))
        .arg("-o")
        .arg(&exe)
        .arg(&src);
    testkit::run(&mut cc).unwrap_or_else(|e| panic!("{e}"));
    let out = testkit::run(&mut std::process::Command::new(&exe)).expect("run oracle");
    let got: Vec<usize> = out
        .split_whitespace()
        .map(|n| n.parse().expect("number"))
        .collect();
    let ours = [
        size_of::<RawProcessLocation>(),
        offset_of!(RawProcessLocation, image_name),
        offset_of!(RawProcessLocation, host_name),
        size_of::<BasicCallbacks>(),
        offset_of!(BasicCallbacks, put_job_info),
        size_of::<ProcessCallbacks>(),
        offset_of!(ProcessCallbacks, get_process_job),
        offset_of!(ProcessCallbacks, get_process_identity),
        size_of::<JobCallbacks>(),
        mpir_types::mqd::INTERFACE_COMPATIBILITY_MPI2 as usize,
    ];
    assert_eq!(got, ours, "from {}", header.display());
}

#[test]
fn mpi2_callbacks_without_an_active_host_return_errors_not_crashes() {
    let h = Handle(0x10).as_ptr();
    assert!(cb_get_job_info(h).is_null());
    assert!(cb_get_process_job(h).is_null());
    assert_eq!(cb_get_process_identity(h), MQS_INVALID_PROCESS);
    assert!(cb_get_process(h, 0).is_null());
    cb_put_job_info(h, h);
}
