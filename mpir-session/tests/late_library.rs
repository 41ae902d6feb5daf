//! A rank that loads a library after the session first read it (as an MPI opens its components
//! in `MPI_Init`, after a launch caught its ranks early): the session's next read sees what it
//! maps now. Before this was fixed a session kept every rank's images from its first read, so
//! `mpir launch --watch` on a stock Open MPI job, started fast enough (the symbol store warm),
//! never found `mca_pml_ob1` in its ranks and never confirmed their hang.
//!
//! The fixture (compiled here) waits in `pause` until SIGUSR1, then `dlopen`s a library of
//! its own and blocks in its `late_block`: the first read must show `pause` under `main`, the
//! second `late_block` under `main`, from the library's own symbols. gdb is not needed: where
//! the process waits is fixed by construction.

#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mpir_session::{Session, SessionOptions, StackOptions};
use mpir_target::testkit::{have, run, scratch, skip, wait_for};

mod oracle;
use oracle::{assert_running_untraced, main_thread_to_main};

const LIBRARY: &str = r#"
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
__attribute__((noinline)) void late_block(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/loaded", dir);
    int fd = open(path, O_CREAT | O_WRONLY, 0600);
    if (fd >= 0) close(fd);
    for (;;) pause();
}
"#;

const PROGRAM: &str = r#"
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
static volatile sig_atomic_t go;
static void on_usr1(int s) { (void)s; go = 1; }
int main(int argc, char **argv) {
    if (argc != 3) return 2;
    signal(SIGUSR1, on_usr1);
    alarm(120); /* a failed test leaves nothing behind for long */
    printf("%d\n", (int)getpid());
    fflush(stdout);
    while (!go) pause();
    void *h = dlopen(argv[1], RTLD_NOW);
    if (!h) { fprintf(stderr, "%s\n", dlerror()); return 3; }
    void (*f)(const char *) = (void (*)(const char *))dlsym(h, "late_block");
    if (!f) return 4;
    f(argv[2]);
    return 0;
}
"#;

#[test]
fn a_library_loaded_after_the_first_read_is_seen_by_the_next() {
    if !have("cc") {
        skip("no C compiler (cc)");
        return;
    }
    let dir = scratch("late-library");
    let (lib_c, main_c) = (dir.join("late.c"), dir.join("main.c"));
    std::fs::write(&lib_c, LIBRARY).unwrap();
    std::fs::write(&main_c, PROGRAM).unwrap();
    let lib = dir.join("liblate.so");
    let program = dir.join("late-main");
    run(Command::new("cc")
        .args(["-g", "-O0", "-fPIC", "-shared", "-o"])
        .arg(&lib)
        .arg(&lib_c))
    .unwrap_or_else(|e| panic!("{e}"));
    run(Command::new("cc")
        .args(["-g", "-O0", "-o"])
        .arg(&program)
        .arg(&main_c)
        .arg("-ldl"))
    .unwrap_or_else(|e| panic!("{e}"));

    let mut child = Command::new(&program)
        .arg(&lib)
        .arg(dir.as_ref() as &Path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let pid: u32 = line.trim().parse().unwrap();
    assert_eq!(pid, child.id());

    // The store off: what is tested is the session's own images, not the store's answers.
    let options = SessionOptions::default()
        .with_timeout(Duration::from_secs(20))
        .with_symbol_store(None);
    let mut session = Session::pids([pid], options).unwrap();
    let stacks = StackOptions::default();
    let first = session.stacks(&stacks).unwrap();
    let before = main_thread_to_main(&first.last().ranks[0]);
    assert_eq!(
        before.last().map(String::as_str),
        Some("main"),
        "{before:?}"
    );
    assert!(
        !before.iter().any(|f| f == "late_block"),
        "not loaded yet: {before:?}"
    );

    run(Command::new("kill").args(["-USR1", &pid.to_string()])).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        wait_for(20, || dir.join("loaded").exists()),
        "the fixture never reached late_block"
    );
    let second = session.stacks(&stacks).unwrap();
    let after = main_thread_to_main(&second.last().ranks[0]);
    assert_eq!(after.last().map(String::as_str), Some("main"), "{after:?}");
    let at = after.iter().position(|f| f == "late_block");
    assert!(
        at.is_some(),
        "the library loaded since the first read is not in the second: {after:?}"
    );
    // late_block is called by main directly.
    assert_eq!(after.get(at.unwrap() + 1).map(String::as_str), Some("main"));
    drop(session);

    assert_running_untraced(&[pid]);
    let _ = child.kill();
    let _ = child.wait();
}
