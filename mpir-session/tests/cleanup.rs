//! `install_cleanup` in a test binary of its own: its panic hook lets go of every tracer of
//! the process on any panic, which would disturb the other tests' (deliberate) panics.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_session::{Session, SessionOptions};
use mpir_target::testkit::{assert_untouched, status_field, wait_for};

#[test]
fn a_panic_while_ranks_are_held_lets_them_go_even_without_unwinding_to_the_guard() {
    mpir_session::install_cleanup().unwrap();
    mpir_session::install_cleanup().unwrap(); // a second call changes nothing
    let mut child = Command::new("sleep")
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut session = Session::pids([pid], SessionOptions::default()).unwrap();
    let held = session.hold().unwrap();
    assert_ne!(status_field(pid, "TracerPid:"), "0");
    // The guard is leaked (as a panic under `panic = "abort"` or an `exit` would skip it);
    // the hook still lets go, at the panic.
    std::mem::forget(held);
    let caught = std::panic::catch_unwind(|| panic!("a bug while ranks are held"));
    assert!(caught.is_err());
    assert!(
        wait_for(10, || status_field(pid, "TracerPid:") == "0"),
        "still traced after the panic"
    );
    std::thread::sleep(Duration::from_millis(50));
    assert_untouched(pid);
    let _ = child.kill();
    let _ = child.wait();
}
