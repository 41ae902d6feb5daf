//! A container's files are read as the container has them, never as a link in its root
//! leads out of it onto this host (issue 32, docs/containers.md). A process in a bwrap
//! container (PID and mount namespaces) maps a library at a path that exists only inside;
//! then the library is deleted and, in its place, a symbolic link to an absolute path is put,
//! whose target exists on the host but not in the container (hidden there by a tmpfs).
//! Followed from the host through `/proc/PID/root`, the link names the host's file (checked
//! first: the trap is real); `ProcessImages` must never take that file for the process's, and
//! (as root, through `/proc/PID/map_files`) must read the library actually mapped. Skipped
//! without bwrap or a C compiler, failed under `MPIR_REQUIRE_PEERS=1`.

#![cfg(target_os = "linux")]

mod support;

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use mpir_target::debuginfo::{DebugOptions, ProcessImages};
use mpir_target::testkit::children;
use support::*;

/// The descendant of `pid` running `exe`.
fn descendant_running(pid: u32, exe: &Path) -> Option<u32> {
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for c in children(p) {
            if std::fs::read_link(format!("/proc/{c}/exe")).ok().as_deref() == Some(exe) {
                return Some(c);
            }
            todo.push(c);
        }
    }
    None
}

/// A shared library defining `function`, built from a one-line source in `dir`.
fn library(dir: &Path, function: &str) -> Option<PathBuf> {
    let src = dir.join(format!("{function}.c"));
    std::fs::write(&src, format!("int {function}(void) {{ return 7; }}\n")).unwrap();
    match cc(
        &dir.join(format!("{function}.so")),
        &["-shared", "-fPIC", "-Wl,--build-id", src.to_str().unwrap()],
    ) {
        Ok(p) => Some(p),
        Err(e) => {
            skip(&e);
            None
        }
    }
}

struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_link_in_a_containers_root_never_names_a_host_file_as_the_processs() {
    if !have("bwrap") {
        skip("needs bubblewrap (bwrap)");
        return;
    }
    let dir = scratch("containers-hostile");
    let Ok(mapper) = cc(
        &dir.join("mapper"),
        &[fixtures().join("mapper.c").to_str().unwrap()],
    ) else {
        skip("no C compiler");
        return;
    };
    let (Some(original), Some(secret)) = (
        library(&dir, "mpir_ctr_original"),
        library(&dir, "mpir_ctr_host_secret"),
    ) else {
        return;
    };
    let shared = dir.join("c");
    let host_only = dir.join("host-only");
    std::fs::create_dir_all(&shared).unwrap();
    std::fs::create_dir_all(&host_only).unwrap();
    std::fs::copy(&original, shared.join("lib.so")).unwrap();
    let host_file = host_only.join("secret.so");
    std::fs::copy(&secret, &host_file).unwrap();
    let inside = PathBuf::from(format!("/mnt/mpir-ctr-{}-hostile", std::process::id()));
    assert!(!inside.exists(), "{} exists on this host", inside.display());
    let ready = dir.join("ready");
    let bwrap = Command::new("bwrap")
        .args(["--bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--tmpfs", "/mnt", "--bind"])
        .arg(&shared)
        .arg(&inside)
        // The link's target exists on the host only.
        .arg("--tmpfs")
        .arg(&host_only)
        .args(["--unshare-pid", "--die-with-parent"])
        .arg(&mapper)
        .arg(inside.join("lib.so"))
        .arg(&ready)
        .stdin(Stdio::null())
        .spawn()
        .expect("start bwrap");
    let bwrap = Killed(bwrap);
    assert!(
        wait_for(20, || ready.is_file()),
        "the mapper never got ready"
    );
    let pid = descendant_running(bwrap.0.id(), &mapper).expect("the mapper under bwrap");

    // The hostile change: the library gone, a link to a host-only file in its place.
    std::fs::remove_file(shared.join("lib.so")).unwrap();
    std::os::unix::fs::symlink(&host_file, shared.join("lib.so")).unwrap();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mapped = format!("{}/lib.so (deleted)", inside.display());
    assert!(maps.contains(&mapped), "{maps}");
    // The trap is real: through /proc/PID/root the path reaches the host's file.
    let naive = PathBuf::from(format!("/proc/{pid}/root{}/lib.so", inside.display()));
    assert_eq!(
        std::fs::metadata(&naive).unwrap().ino(),
        std::fs::metadata(&host_file).unwrap().ino(),
        "the setup does not make the naive path escape"
    );

    let images = ProcessImages::for_pid(pid, DebugOptions::default()).unwrap();
    for im in images.images() {
        assert!(
            im.elf().symbols("mpir_ctr_host_secret").is_empty(),
            "{} was read from the host file {}",
            im.path().display(),
            im.elf().path().display()
        );
    }
    let lib = images
        .images()
        .iter()
        .find(|im| im.path() == inside.join("lib.so"));
    // Our effective user owns /proc/self.
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    if root {
        // /proc/PID/map_files reaches the deleted library itself.
        let lib = lib.expect("the mapped library, through map_files");
        assert!(!lib.elf().symbols("mpir_ctr_original").is_empty());
    } else {
        // Without map_files, the link is refused: no image rather than a wrong one.
        assert!(lib.is_none());
    }
    assert_untouched(pid);
}
